// Kernels for the GPU ordering suites: a producer that spins before writing a pattern, and
// a consumer that counts the elements that differ from it. The same source builds with
// nvcc and with hipcc.
#if defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC__)
#include <hip/hip_runtime.h>
#define cudaStream_t hipStream_t
#define cudaGetLastError hipGetLastError
#else
#include <cuda_runtime.h>
#endif

#include "kernels.h"

__global__ void produce_kernel(int *data, int count, int value, long long delay_cycles) {
  long long start = clock64();
  while (clock64() - start < delay_cycles) {
  }
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x)
    data[i] = value + i;
}

__global__ void check_kernel(const int *data, int count, int value, unsigned long long *mismatches) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x)
    if (data[i] != value + i) atomicAdd(mismatches, 1ULL);
}

extern "C" int gpu_produce(void *stream, int *data, int count, int value, long long delay_cycles) {
  produce_kernel<<<4, 256, 0, (cudaStream_t)stream>>>(data, count, value, delay_cycles);
  return (int)cudaGetLastError();
}

extern "C" int gpu_check(void *stream, const int *data, int count, int value,
                         unsigned long long *mismatches) {
  check_kernel<<<4, 256, 0, (cudaStream_t)stream>>>(data, count, value, mismatches);
  return (int)cudaGetLastError();
}
