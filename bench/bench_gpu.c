/* SPDX-License-Identifier: Apache-2.0 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
/*
 * Cost per exchange on real CUDA streams, the strategies side by side in one run:
 * dlsync's pooled event (dl_sync_push_dep, and dl_sync_export with the consumer's stream
 * argument, as a producer's __dlpack__ calls it) with the CUDA driver backend (the
 * default) and with the CUDA runtime backend, a fresh event per exchange (create, record,
 * wait, destroy, as PyTorch's __dlpack__ does today: torch/_tensor.py) and host
 * synchronization; and the loop without any synchronization, for what the loop itself
 * costs. Each exchange is a small producer operation on stream a, the synchronization,
 * and a consumer operation on stream b. Prints "name<TAB>value<TAB>unit" lines; without
 * a device, one "skipped" line.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <time.h>

#include "dlsync/dlsync.h"

enum { EXCHANGES = 20000, WARMUP = 200 };

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef enum strategy {
  POOLED,        /* dl_sync_push_dep, driver backend */
  POOLED_EXPORT, /* dl_sync_stream_to_arg + dl_sync_export, driver backend */
  POOLED_CUDART, /* dl_sync_push_dep, CUDA runtime backend */
  FRESH_EVENT,   /* cudaEventCreate, record, wait, destroy */
  HOST_SYNC,     /* cudaStreamSynchronize(a) */
  NONE,          /* no synchronization: the loop's own cost (unordered) */
  STRATEGIES
} strategy;

static const char *const names[STRATEGIES] = {
    "gpu: pooled event (dlsync)",
    "gpu: pooled event (dlsync, dl_sync_export with a stream argument)",
    "gpu: pooled event (dlsync, CUDA runtime backend)",
    "gpu: fresh event per exchange",
    "gpu: host synchronization",
    "gpu: no synchronization (the loop alone, unordered)"};

static int synchronize(strategy s, cudaStream_t a, cudaStream_t b) {
  DLDevice device = {kDLCUDA, 0};
  switch (s) {
    case POOLED:
    case POOLED_CUDART:
      return dl_sync_push_dep(dl_sync_stream_view(device, a), dl_sync_stream_view(device, b));
    case POOLED_EXPORT: {
      dl_sync_stream_arg arg;
      int status = dl_sync_stream_to_arg(dl_sync_stream_view(device, b), &arg);
      return status != DL_SYNC_OK ? status : dl_sync_export(dl_sync_stream_view(device, a), arg);
    }
    case HOST_SYNC:
      return (int)cudaStreamSynchronize(a);
    case NONE:
      return 0;
    default:
      break;
  }
  cudaEvent_t event;
  cudaError_t error = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  if (error == cudaSuccess) error = cudaEventRecord(event, a);
  if (error == cudaSuccess) error = cudaStreamWaitEvent(b, event, 0);
  cudaEventDestroy(event);
  return (int)error;
}

static double run(strategy s, cudaStream_t a, cudaStream_t b, void *produced, void *consumed,
                  int count) {
  double start = now_s();
  for (int i = 0; i < count; i++) {
    cudaMemsetAsync(produced, i & 0xff, 64, a);
    if (synchronize(s, a, b) != 0) return -1;
    cudaMemsetAsync(consumed, i & 0xff, 64, b);
  }
  if (cudaDeviceSynchronize() != cudaSuccess) return -1;
  return (now_s() - start) / count * 1e6;
}

int main(void) {
  int devices = 0;
  cudaError_t error = cudaGetDeviceCount(&devices);
  if (error != cudaSuccess || devices == 0) {
    printf("skipped\t0\tno CUDA device: [cudaGetDeviceCount][%s] %s\n",
           error != cudaSuccess ? cudaGetErrorName(error) : "0 devices",
           error != cudaSuccess ? cudaGetErrorString(error) : "");
    return 0;
  }
  struct cudaDeviceProp prop;
  cudaStream_t a, b;
  void *produced, *consumed;
  if ((error = cudaGetDeviceProperties(&prop, 0)) != cudaSuccess ||
      (error = cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking)) != cudaSuccess ||
      (error = cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking)) != cudaSuccess ||
      (error = cudaMalloc(&produced, 64)) != cudaSuccess ||
      (error = cudaMalloc(&consumed, 64)) != cudaSuccess) {
    fprintf(stderr, "bench_gpu: setting up streams and buffers: %s\n", cudaGetErrorName(error));
    return 1;
  }
  printf("device\t0\t%s\n", prop.name);
  double us[STRATEGIES];
  for (int s = 0; s < STRATEGIES; s++) {
    /* The runtime backend uses the CUDA runtime this program has loaded (libcudart). */
    const dl_sync_backend *backend = s == POOLED_CUDART ? dl_sync_cudart_backend() : NULL;
    if (dl_sync_set_backend(kDLCUDA, backend) != DL_SYNC_OK) {
      fprintf(stderr, "bench_gpu: dl_sync_set_backend: %s\n", dl_sync_last_error());
      return 1;
    }
    run((strategy)s, a, b, produced, consumed, WARMUP);
    us[s] = run((strategy)s, a, b, produced, consumed, EXCHANGES);
    if (us[s] < 0) {
      fprintf(stderr, "bench_gpu: %s failed: %s\n", names[s], dl_sync_last_error());
      return 1;
    }
    printf("%s\t%.3f\tus/exchange\n", names[s], us[s]);
  }
  dl_sync_set_backend(kDLCUDA, NULL);
  printf("gpu: fresh event / pooled event\t%.2f\tratio\n", us[FRESH_EVENT] / us[POOLED]);
  printf("gpu: host sync / pooled event\t%.2f\tratio\n", us[HOST_SYNC] / us[POOLED]);
  /* The pool's own account: a handful of events for every exchange above. */
  dl_sync_pool_stats stats;
  if (dl_sync_pool_stats_get(dl_sync_cuda_backend(), 0, &stats) == DL_SYNC_OK)
    printf("gpu: events dlsync created (driver backend, %d exchanges)\t%llu\tevents\n",
           2 * (EXCHANGES + WARMUP), (unsigned long long)stats.created);
  dl_sync_shutdown();
  cudaFree(produced);
  cudaFree(consumed);
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
  return 0;
}
