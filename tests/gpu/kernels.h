/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Host entry points of the GPU test kernels (C linkage, runtime-neutral: streams are
 * passed as void *). Every launcher returns the runtime's error code, 0 on success.
 */
#ifndef DL_SYNC_TEST_GPU_KERNELS_H_
#define DL_SYNC_TEST_GPU_KERNELS_H_

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Flags in host-mapped memory shared by the host and the kernels. The host writes
 * `open`; the gate kernel reads it with volatile loads. Kernels write `signalled` and
 * `gate_timeouts` with system-scope fences so that the host sees them while they run.
 */
typedef struct gpu_flags {
  int open;          /* 0: the gate holds its stream; 1: it lets it go */
  int signalled;     /* set by gpu_signal: the consumer has finished reading */
  int gate_timeouts; /* gates that gave up waiting (a broken gate cannot hang a suite) */
  int reserved;
} gpu_flags;

/* Allocates zeroed host-mapped flags; *device is the pointer kernels use. */
int gpu_flags_create(gpu_flags **host, gpu_flags **device);
int gpu_flags_destroy(gpu_flags *host);

/*
 * Holds `stream` until flags->open != 0, or for at most about GPU_GATE_LIMIT_CYCLES
 * GPU clock cycles (then counts a timeout and lets the stream go).
 */
#define GPU_GATE_LIMIT_CYCLES \
  20000000000LL /* about 10 s at 2 GHz: above every hold of the suites */
int gpu_gate(void *stream, gpu_flags *device_flags);

/* Sets flags->signalled once every earlier operation of `stream` has finished. */
int gpu_signal(void *stream, gpu_flags *device_flags);

/*
 * The value element i holds after a producer ran with `seed` at launch number `launch`.
 * Never equal to GPU_STALE, the value buffers start with.
 */
#define GPU_STALE (-1)
#define GPU_EXPECTED(seed, launch, i) \
  ((int)(((unsigned)(seed)*7919u + (unsigned)(launch)*104729u + (unsigned)(i)) & 0x7fffffffu))

/*
 * data[i] = GPU_EXPECTED(seed, launch, i), where launch is *launch_counter (device
 * memory) or 0 when launch_counter is NULL.
 */
int gpu_produce(void *stream, int *data, int count, int seed, const unsigned *launch_counter);

/*
 * Adds the number of data[i] != GPU_EXPECTED(seed, launch, i) to mismatches[launch]
 * (mismatches[0] when launch_counter is NULL; the caller sizes the array).
 */
int gpu_check(void *stream, const int *data, int count, int seed, const unsigned *launch_counter,
              unsigned long long *mismatches);

/* ++*launch_counter on the device. */
int gpu_count_launch(void *stream, unsigned *launch_counter);

#ifdef __cplusplus
}
#endif
#endif
