/* SPDX-License-Identifier: Apache-2.0 */
/* Framework B: the consumer. It imports DLPack tensors three ways. */
#include "framework_b.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "stream_names.h"

enum { MAX_LATER = 64 };

static const DLDevice device = {kDLCUDA, 0};
static dl_sync_sim_stream *main_stream, *side_stream;
static int sync_enabled;
/* Wrong elements seen, one counter per stream that checks (kernels of one stream only). */
static int64_t seen_wrong_on_producer_stream, seen_wrong_on_main, seen_wrong_on_side;
static pthread_t later[MAX_LATER];
static int later_count;

int fb_init(int sync) {
  sync_enabled = sync;
  int error = dl_sync_sim_stream_create(&main_stream, DL_SYNC_SIM_STREAM_NON_BLOCKING);
  if (error == 0) error = dl_sync_sim_stream_create(&side_stream, DL_SYNC_SIM_STREAM_NON_BLOCKING);
  stream_name_set(main_stream, "B.main");
  stream_name_set(side_stream, "B.side");
  return error;
}

void fb_shutdown(void) {
  dl_sync_sim_stream_destroy(main_stream);
  dl_sync_sim_stream_destroy(side_stream);
}

typedef struct check_job {
  const int32_t *data;
  int64_t count;
  int32_t expected;
  int64_t *wrong;
} check_job;

static void check_kernel(void *arg) {
  check_job *job = arg;
  for (int64_t i = 0; i < job->count; i++)
    if (__atomic_load_n(&job->data[i], __ATOMIC_RELAXED) != job->expected + (int32_t)i)
      (*job->wrong)++;
  free(job);
}

static int launch_check(void *stream, const DLTensor *t, int32_t expected, int64_t *wrong) {
  check_job *job = malloc(sizeof *job);
  if (job == NULL) return DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION;
  *job = (check_job){t->data, t->shape[0], expected, wrong};
  dl_sync_sim_access accesses[] = {{t->data, DL_SYNC_SIM_READ},
                                   {wrong, DL_SYNC_SIM_READ | DL_SYNC_SIM_WRITE}};
  printf("  B  reads tensor %p on %s\n", t->data, stream_name(stream));
  return dl_sync_sim_launch(stream, "B.check", check_kernel, job, accesses, 2);
}

int fb_check_on_producer_stream(const DLPackExchangeAPI *api, void *object, int32_t expected) {
  dl_sync_stream producer;
  int status = dl_sync_stream_from_exchange_api(api, device, &producer);
  if (status != DL_SYNC_OK) return status;
  printf(
      "  B  asks A's exchange table for its current work stream: %s (N0: same stream, no "
      "synchronization needed)\n",
      stream_name(producer.handle));
  DLManagedTensorVersioned *m = NULL;
  if (api->managed_tensor_from_py_object_no_sync(object, &m) != 0) return DL_SYNC_EBACKEND;
  status = launch_check(producer.handle, &m->dl_tensor, expected, &seen_wrong_on_producer_stream);
  m->deleter(m);
  return status == 0 ? DL_SYNC_OK : DL_SYNC_EBACKEND;
}

int fb_check_with_stream_argument(fb_dlpack_fn dlpack, void *object, int32_t expected) {
  dl_sync_stream_arg arg;
  int status = dl_sync_stream_to_arg(dl_sync_stream_view(device, main_stream), &arg);
  if (status != DL_SYNC_OK) return status;
  printf("  B  calls A's __dlpack__(stream=%#llx) for B.main\n", (unsigned long long)arg.value);
  DLManagedTensorVersioned *m = NULL;
  status = dlpack(object, arg, &m);
  if (status != DL_SYNC_OK) return status;
  status = launch_check(main_stream, &m->dl_tensor, expected, &seen_wrong_on_main);
  m->deleter(m);
  return status == 0 ? DL_SYNC_OK : DL_SYNC_EBACKEND;
}

int fb_check_then_release(fb_dlpack_fn dlpack, void *object, int32_t expected) {
  dl_sync_stream b_main = dl_sync_stream_view(device, main_stream);
  dl_sync_stream_arg arg;
  int status = dl_sync_stream_to_arg(b_main, &arg);
  if (status != DL_SYNC_OK) return status;
  printf("  B  calls A's __dlpack__(stream=%#llx) for B.main\n", (unsigned long long)arg.value);
  DLManagedTensorVersioned *m = NULL;
  status = dlpack(object, arg, &m);
  if (status != DL_SYNC_OK) return status;
  if (launch_check(main_stream, &m->dl_tensor, expected, &seen_wrong_on_main) != 0)
    return DL_SYNC_EBACKEND;
  if (!sync_enabled) {
    printf("  B  is done with the tensor and calls its deleter, its kernel still pending\n");
    m->deleter(m);
    return DL_SYNC_OK;
  }
  printf(
      "  B  is done with the tensor and releases it after its work on B.main "
      "(dl_sync_tensor_release)\n");
  status = dl_sync_tensor_release(m, b_main);
  return status < 0 ? status : DL_SYNC_OK;
}

typedef struct check3_job {
  const int32_t *data[3];
  int64_t count[3];
  int32_t expected[3];
  int64_t *wrong;
} check3_job;

/* f(a, b, c): one kernel that reads three tensors. */
static void check3_kernel(void *arg) {
  check3_job *job = arg;
  for (int t = 0; t < 3; t++)
    for (int64_t i = 0; i < job->count[t]; i++)
      if (__atomic_load_n(&job->data[t][i], __ATOMIC_RELAXED) != job->expected[t] + (int32_t)i)
        (*job->wrong)++;
  free(job);
}

static int launch_check3(void *stream, DLManagedTensorVersioned *m[3], const int32_t expected[3]) {
  check3_job *job = malloc(sizeof *job);
  if (job == NULL) return DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION;
  job->wrong = &seen_wrong_on_main;
  dl_sync_sim_access accesses[4];
  for (int t = 0; t < 3; t++) {
    job->data[t] = m[t]->dl_tensor.data;
    job->count[t] = m[t]->dl_tensor.shape[0];
    job->expected[t] = expected[t];
    accesses[t] = (dl_sync_sim_access){m[t]->dl_tensor.data, DL_SYNC_SIM_READ};
  }
  accesses[3] = (dl_sync_sim_access){job->wrong, DL_SYNC_SIM_READ | DL_SYNC_SIM_WRITE};
  printf("  B  reads tensors %p, %p, %p in one kernel on %s\n", (void *)job->data[0],
         (void *)job->data[1], (void *)job->data[2], stream_name(stream));
  return dl_sync_sim_launch(stream, "B.check3", check3_kernel, job, accesses, 4);
}

int fb_check_three_with_group(const DLPackExchangeAPI *api, void *objects[3],
                              const int32_t expected[3]) {
  dl_sync_group group;
  int status = dl_sync_group_init(&group, dl_sync_stream_view(device, main_stream));
  DLManagedTensorVersioned *m[3] = {NULL, NULL, NULL};
  for (int t = 0; t < 3 && status == DL_SYNC_OK; t++) {
    if (api->managed_tensor_from_py_object_no_sync(objects[t], &m[t]) != 0)
      status = DL_SYNC_EBACKEND;
    /* The table is asked for its current work stream once, not once per tensor. */
    if (status == DL_SYNC_OK && sync_enabled)
      status = dl_sync_group_add_exchange_api(&group, api, device);
  }
  if (status == DL_SYNC_OK && sync_enabled) {
    printf(
        "  B  orders A's stream before B.main once for the three tensors (dl_sync_group_wait;\n"
        "     one export per tensor would make 3 records, 3 waits and 6 capture queries)\n");
    status = dl_sync_group_wait(&group);
  }
  if (status == DL_SYNC_OK && launch_check3(main_stream, m, expected) != 0)
    status = DL_SYNC_EBACKEND;
  for (int t = 0; t < 3; t++)
    if (m[t] != NULL) m[t]->deleter(m[t]);
  return status;
}

typedef struct later_job {
  const void *handoff; /* the key under which the two threads publish their clocks */
  DLManagedTensorVersioned *tensor;
  int32_t expected;
  int status;
} later_job;

static void *check_later(void *arg) {
  later_job *job = arg;
  /* dlsync_sim orders pthread_create and pthread_join by itself; a build whose simulator
     cannot (a static one under a sanitizer) is told what they order. */
  dl_sync_sim_host_acquire(job->handoff);
  if (sync_enabled) {
    printf("  B  (another thread) waits on the tensor's event on B.side\n");
    job->status = dl_sync_tensor_wait(job->tensor, dl_sync_stream_view(device, side_stream));
  }
  if (job->status == DL_SYNC_OK)
    job->status =
        launch_check(side_stream, &job->tensor->dl_tensor, job->expected, &seen_wrong_on_side);
  job->tensor->deleter(job->tensor); /* the deleter runs on this thread */
  if (job->status != DL_SYNC_OK) fprintf(stderr, "B: %s\n", dl_sync_last_error());
  dl_sync_sim_host_release(job->handoff);
  free(job);
  return NULL;
}

int fb_check_later_on_another_thread(DLManagedTensorVersioned *tensor, int32_t expected) {
  later_job *job = malloc(sizeof *job);
  if (job == NULL || later_count == MAX_LATER) {
    free(job);
    return DL_SYNC_ENOMEM;
  }
  *job = (later_job){&later[later_count], tensor, expected, DL_SYNC_OK};
  /* One at a time keeps the timeline readable; the thread is still a foreign one. */
  dl_sync_sim_host_release(job->handoff);
  if (pthread_create(&later[later_count], NULL, check_later, job) != 0) {
    free(job);
    return DL_SYNC_ENOMEM;
  }
  pthread_join(later[later_count], NULL);
  dl_sync_sim_host_acquire(&later[later_count]);
  later_count++;
  return DL_SYNC_OK;
}

int64_t fb_finish(void) {
  dl_sync_sim_device_synchronize();
  const int64_t *counters[] = {&seen_wrong_on_producer_stream, &seen_wrong_on_main,
                               &seen_wrong_on_side};
  int64_t wrong = 0;
  for (int i = 0; i < 3; i++) {
    dl_sync_sim_host_access("B reads its counters", counters[i], DL_SYNC_SIM_READ);
    wrong += *counters[i];
  }
  return wrong;
}
