#define _POSIX_C_SOURCE 200809L /* clock_gettime */
/*
 * Cost per exchange on real CUDA streams, three strategies side by side in one run:
 * dlsync's pooled event (dl_sync_push_dep), a fresh event per exchange (create, record,
 * wait, destroy, as PyTorch and CuPy do today) and host synchronization. Each exchange is
 * a small producer operation on stream a, the synchronization, and a consumer operation
 * on stream b. Prints "name<TAB>value<TAB>unit" lines; without a device, one "skipped" line.
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

typedef enum strategy { POOLED, FRESH_EVENT, HOST_SYNC } strategy;

static int synchronize(strategy s, cudaStream_t a, cudaStream_t b) {
  if (s == POOLED) {
    DLDevice device = {kDLCUDA, 0};
    return dl_sync_push_dep(dl_sync_stream_view(device, a), dl_sync_stream_view(device, b));
  }
  if (s == HOST_SYNC) return (int)cudaStreamSynchronize(a);
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
  static const char *names[] = {"gpu: pooled event (dlsync)", "gpu: fresh event per exchange",
                                "gpu: host synchronization"};
  double us[3];
  for (int s = POOLED; s <= HOST_SYNC; s++) {
    run((strategy)s, a, b, produced, consumed, WARMUP);
    us[s] = run((strategy)s, a, b, produced, consumed, EXCHANGES);
    if (us[s] < 0) {
      fprintf(stderr, "bench_gpu: %s failed: %s\n", names[s], dl_sync_last_error());
      return 1;
    }
    printf("%s\t%.3f\tus/exchange\n", names[s], us[s]);
  }
  printf("gpu: fresh event / pooled event\t%.2f\tratio\n", us[FRESH_EVENT] / us[POOLED]);
  printf("gpu: host sync / pooled event\t%.2f\tratio\n", us[HOST_SYNC] / us[POOLED]);
  dl_sync_shutdown();
  cudaFree(produced);
  cudaFree(consumed);
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
  return 0;
}
