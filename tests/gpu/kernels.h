/* Host entry points of the GPU test kernels (C linkage). */
#ifndef DL_SYNC_TEST_GPU_KERNELS_H_
#define DL_SYNC_TEST_GPU_KERNELS_H_

#ifdef __cplusplus
extern "C" {
#endif

/* Spins delay_cycles on the GPU, then writes value + i into data[i]. */
int gpu_produce(void *stream, int *data, int count, int value, long long delay_cycles);
/* Adds to *mismatches the number of data[i] != value + i. */
int gpu_check(void *stream, const int *data, int count, int value, unsigned long long *mismatches);

#ifdef __cplusplus
}
#endif
#endif
