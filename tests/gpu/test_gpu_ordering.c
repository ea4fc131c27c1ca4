/*
 * The ordering rules on a real CUDA device, with kernels: a producer that spins, then
 * writes a pattern, and a consumer that counts mismatches. Every scenario with dlsync must
 * see 0 mismatches; the negative control without the dependency must see some (retried
 * with longer delays, and reported as inconclusive rather than passed).
 * Without a device every test is skipped with the runtime's reason (exit 77).
 * Built twice: as is, and with CUDA_API_PER_THREAD_DEFAULT_STREAM (stream 0 is then the
 * per-thread default stream in this file's own calls).
 */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "dlsync/dlsync.h"
#include "kernels.h"

enum { COUNT = 1 << 16, EXIT_SKIPPED = 77 };
static const long long DELAY = 200000; /* GPU cycles before the producer writes */

static char no_device[256];

#define CUDA_OK(call)                                                                   \
  do {                                                                                  \
    cudaError_t error_ = (call);                                                        \
    if (error_ != cudaSuccess) fail_msg("%s: %s", #call, cudaGetErrorName(error_));     \
  } while (0)
#define DL_OK(call)                                                                     \
  do {                                                                                  \
    if ((call) != DL_SYNC_OK) fail_msg("%s: %s", #call, dl_sync_last_error());          \
  } while (0)

typedef struct world {
  cudaStream_t a, b;
  int *data;
  unsigned long long *mismatches;
} world;

static void world_make(world *w) {
  CUDA_OK(cudaStreamCreateWithFlags(&w->a, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&w->b, cudaStreamNonBlocking));
  CUDA_OK(cudaMalloc((void **)&w->data, COUNT * sizeof(int)));
  CUDA_OK(cudaMalloc((void **)&w->mismatches, sizeof *w->mismatches));
  CUDA_OK(cudaMemset(w->data, 0xff, COUNT * sizeof(int)));
  CUDA_OK(cudaMemset(w->mismatches, 0, sizeof *w->mismatches));
  CUDA_OK(cudaDeviceSynchronize());
}

static unsigned long long world_end(world *w) {
  unsigned long long mismatches = 0;
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(&mismatches, w->mismatches, sizeof mismatches, cudaMemcpyDeviceToHost));
  cudaFree(w->data);
  cudaFree(w->mismatches);
  cudaStreamDestroy(w->a);
  cudaStreamDestroy(w->b);
  return mismatches;
}

static dl_sync_stream on(void *stream) { return dl_sync_stream_view((DLDevice){kDLCUDA, 0}, stream); }

static int setup(void **state) {
  (void)state;
  if (no_device[0] != '\0') return 0;
  dl_sync_set_backend(kDLCUDA, NULL);
  dl_sync_set_capture_policy(DL_SYNC_CAPTURE_STRICT);
  return 0;
}

static void skip_without_device(void) {
  if (no_device[0] != '\0') {
    print_message("skipped: %s\n", no_device);
    skip();
  }
}

static void test_negative_control_without_the_dependency_sees_wrong_values(void **state) {
  (void)state;
  skip_without_device();
  long long delay = DELAY;
  for (int attempt = 0; attempt < 3; attempt++, delay *= 8) {
    world w;
    world_make(&w);
    for (int i = 0; i < 20; i++) {
      gpu_produce(w.a, w.data, COUNT, i, delay);
      gpu_check(w.b, w.data, COUNT, i, w.mismatches); /* no dependency */
      CUDA_OK(cudaStreamSynchronize(w.b));
      CUDA_OK(cudaStreamSynchronize(w.a));
    }
    unsigned long long mismatches = world_end(&w);
    print_message("attempt %d, delay %lld cycles: %llu wrong values\n", attempt + 1, delay, mismatches);
    if (mismatches > 0) return;
  }
  fail_msg("inconclusive: the control saw no wrong value even with long delays");
}

static void test_export_orders_the_consumer(void **state) {
  (void)state;
  skip_without_device();
  world w;
  world_make(&w);
  for (int i = 0; i < 200; i++) {
    gpu_produce(w.a, w.data, COUNT, i, DELAY);
    dl_sync_stream_arg arg;
    DL_OK(dl_sync_stream_to_arg(on(w.b), &arg));
    DL_OK(dl_sync_export(on(w.a), arg));
    gpu_check(w.b, w.data, COUNT, i, w.mismatches);
    DL_OK(dl_sync_push_dep(on(w.b), on(w.a)));
  }
  assert_int_equal(world_end(&w), 0);
}

static void test_default_streams(void **state) {
  (void)state;
  skip_without_device();
  world w;
  world_make(&w);
  for (int i = 0; i < 50; i++) {
    gpu_produce(w.a, w.data, COUNT, i, DELAY);
    DL_OK(dl_sync_export(on(w.a), dl_sync_stream_arg_none())); /* the legacy stream */
    gpu_check(cudaStreamLegacy, w.data, COUNT, i, w.mismatches);
    DL_OK(dl_sync_push_dep(on(cudaStreamLegacy), on(w.a)));
    gpu_produce(w.a, w.data, COUNT, i + 1000, DELAY);
    DL_OK(dl_sync_export(on(w.a), dl_sync_stream_arg_int(2))); /* this thread's stream */
    gpu_check(cudaStreamPerThread, w.data, COUNT, i + 1000, w.mismatches);
#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
    gpu_check(0, w.data, COUNT, i + 1000, w.mismatches); /* 0 is the per-thread stream here */
#endif
    DL_OK(dl_sync_push_dep(on(cudaStreamPerThread), on(w.a)));
  }
  assert_int_equal(world_end(&w), 0);
}

static void fork_into_capture(cudaStream_t a, cudaStream_t b) {
  cudaEvent_t fork;
  CUDA_OK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CUDA_OK(cudaEventRecord(fork, a));
  CUDA_OK(cudaStreamWaitEvent(b, fork, 0));
  CUDA_OK(cudaEventDestroy(fork));
}

static void test_capture_fork_join_in_every_mode(void **state) {
  (void)state;
  skip_without_device();
  const enum cudaStreamCaptureMode modes[] = {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal,
                                         cudaStreamCaptureModeRelaxed};
  for (int m = 0; m < 3; m++) {
    world w;
    world_make(&w);
    cudaStream_t launcher;
    CUDA_OK(cudaStreamCreateWithFlags(&launcher, cudaStreamNonBlocking));
    CUDA_OK(cudaStreamBeginCapture(w.a, modes[m]));
    fork_into_capture(w.a, w.b);
    gpu_produce(w.a, w.data, COUNT, 7, DELAY);
    DL_OK(dl_sync_push_dep(on(w.a), on(w.b)));
    gpu_check(w.b, w.data, COUNT, 7, w.mismatches);
    DL_OK(dl_sync_push_dep(on(w.b), on(w.a)));
    cudaGraph_t graph;
    CUDA_OK(cudaStreamEndCapture(w.a, &graph));
    cudaGraphExec_t exec;
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    for (int i = 0; i < 100; i++) CUDA_OK(cudaGraphLaunch(exec, launcher));
    CUDA_OK(cudaStreamSynchronize(launcher));
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(launcher);
    assert_int_equal(world_end(&w), 0);
  }
}

static void test_capturing_consumer_gets_an_external_wait(void **state) {
  (void)state;
  skip_without_device();
  world w;
  world_make(&w);
  cudaStream_t launcher;
  CUDA_OK(cudaStreamCreateWithFlags(&launcher, cudaStreamNonBlocking));
  gpu_produce(w.a, w.data, COUNT, 9, DELAY * 10);
  CUDA_OK(cudaStreamBeginCapture(w.b, cudaStreamCaptureModeGlobal));
  DL_OK(dl_sync_push_dep(on(w.a), on(w.b)));
  gpu_check(w.b, w.data, COUNT, 9, w.mismatches);
  cudaGraph_t graph;
  CUDA_OK(cudaStreamEndCapture(w.b, &graph));
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 100; i++) CUDA_OK(cudaGraphLaunch(exec, launcher));
  CUDA_OK(cudaStreamSynchronize(launcher));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(launcher);
  assert_int_equal(world_end(&w), 0);
}

static void test_capture_errors(void **state) {
  (void)state;
  skip_without_device();
  world w;
  world_make(&w);
  CUDA_OK(cudaStreamBeginCapture(w.a, cudaStreamCaptureModeGlobal));
  gpu_produce(w.a, w.data, COUNT, 1, 0);
  assert_int_equal(dl_sync_push_dep(on(w.a), on(w.b)), DL_SYNC_ECAPTURE);
  assert_int_equal(dl_sync_export(on(w.a), dl_sync_stream_arg_none()), DL_SYNC_ECAPTURE);
  DL_OK(dl_sync_set_capture_policy(DL_SYNC_CAPTURE_NONE_IS_NO_SYNC));
  assert_int_equal(dl_sync_export(on(w.a), dl_sync_stream_arg_none()), DL_SYNC_OK);
  DL_OK(dl_sync_set_capture_policy(DL_SYNC_CAPTURE_STRICT));
  cudaGraph_t graph;
  CUDA_OK(cudaStreamEndCapture(w.a, &graph)); /* the capture survived */
  cudaGraphDestroy(graph);
  world_end(&w);
}

static void tensor_deleter(DLManagedTensorVersioned *t) { (void)t; }

static void test_per_tensor_events(void **state) {
  (void)state;
  skip_without_device();
  world w;
  world_make(&w);
  for (int i = 0; i < 100; i++) {
    DLManagedTensorVersioned tensor = {.version = {1, 3}, .deleter = tensor_deleter};
    tensor.dl_tensor = (DLTensor){.data = w.data, .device = {kDLCUDA, 0}, .ndim = 1};
    gpu_produce(w.a, w.data, COUNT, i, DELAY);
    DL_OK(dl_sync_tensor_record(&tensor, on(w.a)));
    DL_OK(dl_sync_tensor_wait(&tensor, on(w.b)));
    gpu_check(w.b, w.data, COUNT, i, w.mismatches);
    tensor.deleter(&tensor);
    DL_OK(dl_sync_push_dep(on(w.b), on(w.a)));
  }
  assert_int_equal(world_end(&w), 0);
}

typedef struct worker {
  pthread_t thread;
  unsigned long long mismatches;
  int failures;
} worker;

static void *run_worker(void *arg) {
  worker *k = arg;
  cudaSetDevice(0);
  cudaStream_t a, b;
  int *data;
  unsigned long long *mismatches;
  cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
  cudaMalloc((void **)&data, COUNT * sizeof(int));
  cudaMalloc((void **)&mismatches, sizeof *mismatches);
  cudaMemset(mismatches, 0, sizeof *mismatches);
  cudaDeviceSynchronize();
  for (int i = 0; i < 100; i++) {
    gpu_produce(a, data, COUNT, i, DELAY / 4);
    k->failures += dl_sync_push_dep(on(a), on(b)) != DL_SYNC_OK;
    gpu_check(b, data, COUNT, i, mismatches);
    k->failures += dl_sync_push_dep(on(b), on(a)) != DL_SYNC_OK;
  }
  cudaStreamSynchronize(b);
  cudaMemcpy(&k->mismatches, mismatches, sizeof k->mismatches, cudaMemcpyDeviceToHost);
  cudaFree(data);
  cudaFree(mismatches);
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
  return NULL;
}

static void test_eight_threads_share_the_event_pool(void **state) {
  (void)state;
  skip_without_device();
  worker workers[8];
  for (int t = 0; t < 8; t++) {
    workers[t] = (worker){0};
    pthread_create(&workers[t].thread, NULL, run_worker, &workers[t]);
  }
  for (int t = 0; t < 8; t++) {
    pthread_join(workers[t].thread, NULL);
    assert_int_equal(workers[t].failures, 0);
    assert_int_equal(workers[t].mismatches, 0);
  }
  dl_sync_pool_stats stats;
  DL_OK(dl_sync_pool_stats_get(dl_sync_cuda_backend(), 0, &stats));
  print_message("8 threads: %llu dependencies, %llu events created\n",
                (unsigned long long)stats.acquired, (unsigned long long)stats.created);
}

int main(void) {
  int devices = 0;
  cudaError_t error = cudaGetDeviceCount(&devices);
  if (error != cudaSuccess || devices == 0)
    snprintf(no_device, sizeof no_device, "no CUDA device: [cudaGetDeviceCount][%s] %s",
             error != cudaSuccess ? cudaGetErrorName(error) : "0 devices",
             error != cudaSuccess ? cudaGetErrorString(error) : "");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_negative_control_without_the_dependency_sees_wrong_values, setup),
      cmocka_unit_test_setup(test_export_orders_the_consumer, setup),
      cmocka_unit_test_setup(test_default_streams, setup),
      cmocka_unit_test_setup(test_capture_fork_join_in_every_mode, setup),
      cmocka_unit_test_setup(test_capturing_consumer_gets_an_external_wait, setup),
      cmocka_unit_test_setup(test_capture_errors, setup),
      cmocka_unit_test_setup(test_per_tensor_events, setup),
      cmocka_unit_test_setup(test_eight_threads_share_the_event_pool, setup),
  };
  int failed = cmocka_run_group_tests_name("gpu_ordering", tests, NULL, NULL);
  if (failed == 0 && no_device[0] != '\0') {
    printf("skipped: %s\n", no_device);
    return EXIT_SKIPPED;
  }
  return failed;
}
