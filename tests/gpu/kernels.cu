/* SPDX-License-Identifier: Apache-2.0 */
// Kernels for the GPU ordering suites: a gate that holds a stream on a host-mapped flag,
// a producer that writes a pattern depending on a launch counter, a consumer that counts
// the elements that differ from it, and a signal the host can watch. The same source
// builds with nvcc and with hipcc.
#if defined(__HIPCC__) && !defined(DL_SYNC_TEST_HIP)
#define DL_SYNC_TEST_HIP 1
#endif
#ifdef DL_SYNC_TEST_HIP
#include <hip/hip_runtime.h>
#else
#include <cuda_runtime.h>
#endif

#include <string.h>

#include "gpu_runtime.h"
#include "kernels.h"

enum { BLOCKS = 8, THREADS = 256 };

// Volatile loads: the flag lives in host memory and changes while the kernel runs, so
// every iteration must read it again instead of reusing a cached or hoisted value.
__global__ void gate_kernel(gpu_flags *flags) {
  volatile int *open = &flags->open;
  long long start = clock64();
  while (*open == 0) {
    if (clock64() - start > GPU_GATE_LIMIT_CYCLES) {
      atomicAdd(&flags->gate_timeouts, 1);
      __threadfence_system();
      return;
    }
  }
}

// A kernel starts only after the earlier work of its stream has finished; the fence makes
// the earlier kernels' effects and this flag visible to the host in that order.
__global__ void signal_kernel(gpu_flags *flags) {
  __threadfence_system();
  *(volatile int *)&flags->signalled = 1;
  __threadfence_system();
}

__device__ static unsigned launch_of(const unsigned *launch_counter) {
  return launch_counter != NULL ? *launch_counter : 0u;
}

__global__ void produce_kernel(int *data, int count, int seed, const unsigned *launch_counter) {
  unsigned launch = launch_of(launch_counter);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x)
    data[i] = GPU_EXPECTED(seed, launch, i);
}

__global__ void check_kernel(const int *data, int count, int seed, const unsigned *launch_counter,
                             unsigned long long *mismatches) {
  unsigned launch = launch_of(launch_counter);
  unsigned long long wrong = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x)
    wrong += ((volatile const int *)data)[i] != GPU_EXPECTED(seed, launch, i);
  if (wrong != 0) atomicAdd(&mismatches[launch], wrong);
}

__global__ void count_launch_kernel(unsigned *launch_counter) {
  *launch_counter += 1;
}

// Portable: the multi-device suite gates a stream on one GPU and signals from another.
extern "C" int gpu_flags_create(gpu_flags **host, gpu_flags **device) {
  void *memory = NULL;
  cudaError_t error =
      cudaHostAlloc(&memory, sizeof(gpu_flags), cudaHostAllocMapped | cudaHostAllocPortable);
  if (error != cudaSuccess) return (int)error;
  memset(memory, 0, sizeof(gpu_flags));
  error = cudaHostGetDevicePointer((void **)device, memory, 0);
  if (error != cudaSuccess) {
    cudaFreeHost(memory);
    return (int)error;
  }
  *host = (gpu_flags *)memory;
  return 0;
}

extern "C" int gpu_flags_destroy(gpu_flags *host) {
  return (int)cudaFreeHost(host);
}

extern "C" int gpu_gate(void *stream, gpu_flags *device_flags) {
  gate_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(device_flags);
  return (int)cudaGetLastError();
}

extern "C" int gpu_signal(void *stream, gpu_flags *device_flags) {
  signal_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(device_flags);
  return (int)cudaGetLastError();
}

extern "C" int gpu_produce(void *stream, int *data, int count, int seed,
                           const unsigned *launch_counter) {
  produce_kernel<<<BLOCKS, THREADS, 0, (cudaStream_t)stream>>>(data, count, seed, launch_counter);
  return (int)cudaGetLastError();
}

extern "C" int gpu_check(void *stream, const int *data, int count, int seed,
                         const unsigned *launch_counter, unsigned long long *mismatches) {
  check_kernel<<<BLOCKS, THREADS, 0, (cudaStream_t)stream>>>(data, count, seed, launch_counter,
                                                             mismatches);
  return (int)cudaGetLastError();
}

extern "C" int gpu_count_launch(void *stream, unsigned *launch_counter) {
  count_launch_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(launch_counter);
  return (int)cudaGetLastError();
}
