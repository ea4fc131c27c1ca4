/* SPDX-License-Identifier: Apache-2.0 */
/* Framework A: the producer. It knows nothing of B; it speaks DLPack and calls dlsync. */
#include "framework_a.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "stream_names.h"

struct fa_tensor {
  int32_t *data;
  int64_t shape[1];
  atomic_int refs;
  int pooled; /* its block comes from, and goes back to, A's stream-ordered pool */
};

/* A's stream-ordered pool, as a caching allocator's: a pooled tensor's block, once its last
   reference goes, is freed on A.work and is the next pooled allocation's at once, with no
   synchronization: work A enqueues on A.work after the free may write it. */
static int32_t *free_block;
static size_t free_block_count;

static const DLDevice device = {kDLCUDA, 0};
static dl_sync_sim_stream *work_stream; /* A's current work stream */
static int sync_enabled;

int fa_init(int sync) {
  sync_enabled = sync;
  int error = dl_sync_sim_stream_create(&work_stream, DL_SYNC_SIM_STREAM_NON_BLOCKING);
  if (error == 0) stream_name_set(work_stream, "A.work");
  return error;
}

void fa_shutdown(void) {
  dl_sync_sim_stream_destroy(work_stream);
  free(free_block);
  free_block = NULL;
}

fa_tensor *fa_tensor_new(size_t count) {
  fa_tensor *t = calloc(1, sizeof *t);
  if (t == NULL) return NULL;
  t->data = calloc(count, sizeof *t->data);
  if (t->data == NULL) {
    free(t);
    return NULL;
  }
  t->shape[0] = (int64_t)count;
  atomic_init(&t->refs, 1);
  return t;
}

fa_tensor *fa_pooled_tensor_new(size_t count) {
  if (free_block == NULL || free_block_count != count) {
    fa_tensor *t = fa_tensor_new(count);
    if (t != NULL) t->pooled = 1;
    return t;
  }
  fa_tensor *t = calloc(1, sizeof *t);
  if (t == NULL) return NULL;
  t->data = free_block;
  free_block = NULL;
  t->shape[0] = (int64_t)count;
  t->pooled = 1;
  atomic_init(&t->refs, 1);
  printf("  A  allocates from its pool on A.work: block %p again\n", (void *)t->data);
  return t;
}

void fa_tensor_release(fa_tensor *t) {
  if (atomic_fetch_sub(&t->refs, 1) != 1) return;
  if (t->pooled) {
    free(free_block);
    free_block = t->data;
    free_block_count = (size_t)t->shape[0];
    printf("  A  frees block %p on A.work: its pool hands it out again at once\n", (void *)t->data);
  } else {
    free(t->data);
  }
  free(t);
}

/* The block and its size, not the tensor: A may drop the tensor before the kernel runs. */
typedef struct fill_job {
  int32_t *data;
  int64_t count;
  int32_t value;
} fill_job;

static void fill_kernel(void *arg) {
  fill_job *job = arg;
  for (int64_t i = 0; i < job->count; i++)
    __atomic_store_n(&job->data[i], job->value + (int32_t)i, __ATOMIC_RELAXED);
  free(job);
}

int fa_fill(fa_tensor *t, int32_t value) {
  fill_job *job = malloc(sizeof *job);
  if (job == NULL) return DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION;
  *job = (fill_job){t->data, t->shape[0], value};
  dl_sync_sim_access write = {t->data, DL_SYNC_SIM_WRITE};
  printf("  A  writes tensor %p (%d, %d, ...) on A.work\n", (void *)t->data, value, value + 1);
  return dl_sync_sim_launch(work_stream, "A.fill", fill_kernel, job, &write, 1);
}

static void managed_deleter(DLManagedTensorVersioned *m) {
  fa_tensor_release(m->manager_ctx);
  free(m);
}

static DLManagedTensorVersioned *wrap(fa_tensor *t) {
  DLManagedTensorVersioned *m = calloc(1, sizeof *m);
  if (m == NULL) return NULL;
  atomic_fetch_add(&t->refs, 1);
  m->version = (DLPackVersion){1, 3};
  m->manager_ctx = t;
  m->deleter = managed_deleter;
  m->dl_tensor = (DLTensor){
      .data = t->data, .device = device, .ndim = 1, .dtype = {kDLInt, 32, 1}, .shape = t->shape};
  return m;
}

static int current_work_stream(DLDeviceType type, int32_t id, void **out) {
  if (type == kDLCPU) {
    *out = NULL;
    return 0;
  }
  if (type != device.device_type || id != device.device_id) return -1;
  *out = work_stream;
  return 0;
}

static int from_object_no_sync(void *object, DLManagedTensorVersioned **out) {
  *out = wrap(object);
  return *out != NULL ? 0 : -1;
}

static const DLPackExchangeAPI exchange_api = {
    .header = {.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION}},
    .managed_tensor_from_py_object_no_sync = from_object_no_sync,
    .current_work_stream = current_work_stream,
};

const DLPackExchangeAPI *fa_exchange_api(void) {
  return &exchange_api;
}

int fa_dlpack(fa_tensor *t, dl_sync_stream_arg stream, DLManagedTensorVersioned **out) {
  if (sync_enabled) {
    int status = dl_sync_export(dl_sync_stream_view(device, work_stream), stream);
    if (status != DL_SYNC_OK) return status;
  }
  *out = wrap(t);
  return *out != NULL ? DL_SYNC_OK : DL_SYNC_ENOMEM;
}

int fa_dlpack_reusable(fa_tensor *t, dl_sync_stream_arg stream, DLManagedTensorVersioned **out) {
  int status = fa_dlpack(t, stream, out);
  if (status != DL_SYNC_OK || !sync_enabled) return status;
  printf("  A  names A.work, where its pool reuses the block, as the tensor's reuse stream\n");
  dl_sync_stream work = dl_sync_stream_view(device, work_stream);
  return dl_sync_tensor_record_reuse(*out, work, work);
}

int fa_dlpack_with_event(fa_tensor *t, DLManagedTensorVersioned **out) {
  *out = wrap(t);
  if (*out == NULL) return DL_SYNC_ENOMEM;
  if (!sync_enabled) return DL_SYNC_OK;
  printf("  A  exports with a per-tensor event (N1): dl_sync_tensor_record on A.work\n");
  return dl_sync_tensor_record(*out, dl_sync_stream_view(device, work_stream));
}
