/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What every GPU suite shares (test_gpu_ordering.c, test_gpu_contexts.c,
 * test_gpu_release.c): the gate's timing, a world of two streams and a buffer, the judge of
 * a gated run, the per-mode counts, and the lines scripts/gpu-check.sh reads.
 *
 * A gated run: a gate kernel holds a stream on a host-mapped flag until the host opens it,
 * once the consumer has signalled or a window has passed. A control (the same program
 * without the dlsync calls under test) must observe its race every time; an ordered run
 * never can. The gate gives up after a bounded spin, so a broken gate fails the suite
 * instead of hanging it.
 */
#ifndef DL_SYNC_TEST_GPU_SUITE_H_
#define DL_SYNC_TEST_GPU_SUITE_H_

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "dlsync/dlsync.h"
#include "gpu_runtime.h"
#include "kernels.h"

#ifndef DL_SYNC_TEST_VARIANT
#define DL_SYNC_TEST_VARIANT "legacy"
#endif

enum {
  COUNT = 1 << 16,
  EXIT_SKIPPED = 77,
  SLOTS = 64,        /* per-launch mismatch counters of a graph */
  ORDERED_GATED = 3, /* gated runs with the dependency, per scenario */
  CONTROL_GATED = 2, /* gated runs without it, per scenario */
  UNGATED = 50,      /* ordered runs back to back: the event pool's steady state */
  MAX_MODES = 16
};
/* How long an ordered run keeps the gate closed: a consumer that dlsync left unordered
 * would finish in it (microseconds); an ordered one cannot run in it at all. */
#define RACE_WINDOW_NS (20 * 1000 * 1000LL)
/* Bound on waits that end as soon as the awaited kernel has run: a control's consumer, a
 * launch that nothing holds. Never reached when the kernel can run. */
#define RUNS_SOON_NS (2 * 1000 * 1000 * 1000LL)

/* Why the suite skips (empty: a device answered), and how many devices answered. */
extern char no_device[256];
extern int device_count;

#define CUDA_OK(call)                                                               \
  do {                                                                              \
    cudaError_t error_ = (call);                                                    \
    if (error_ != cudaSuccess) fail_msg("%s: %s", #call, cudaGetErrorName(error_)); \
  } while (0)
#define KERNEL_OK(call)                                                                \
  do {                                                                                 \
    int error_ = (call);                                                               \
    if (error_ != 0) fail_msg("%s: %s", #call, cudaGetErrorName((cudaError_t)error_)); \
  } while (0)
#define DL_OK(call)                                                            \
  do {                                                                         \
    if ((call) != DL_SYNC_OK) fail_msg("%s: %s", #call, dl_sync_last_error()); \
  } while (0)

/* The name a runtime function has in this build (the HIP one under DL_SYNC_TEST_HIP). */
#define NAME_OF(function) NAME_OF_EXPANDED(function)
#define NAME_OF_EXPANDED(function) #function

long long now_ns(void);
/* Polls a flag a kernel sets; returns whether it was seen within limit_ns. */
int seen_within(volatile int *flag, long long limit_ns);
void flag_set(volatile int *flag, int value);

dl_sync_stream on_device(int device, void *stream);
dl_sync_stream on(void *stream); /* on device 0 */

/* The modes a suite reports one line each for, with their own counts. gpu-check.sh
 * requires a line per mode, and every control of a mode to have observed its race. */
void suite_set_mode(int mode); /* the mode judge() counts for (main thread) */
void count_ordered(int runs);
/* Reports the running test's mode as skipped with the reason, and skips the test. */
void skip_mode(const char *fmt, ...) CMOCKA_PRINTF_ATTRIBUTE(1, 2);
void skip_without_device(void);

/* A producer stream a, a consumer stream b, a buffer, per-launch mismatch counters and
 * the gate's flags. */
typedef struct world {
  cudaStream_t a, b;
  int *data;
  unsigned *launch;
  unsigned long long *mismatches;
  gpu_flags *flags, *device_flags;
} world;

/* The gates of the worlds alive: teardown opens them all, so that a test that fails while
 * one is closed does not leave its streams held. */
void gate_register(gpu_flags *flags, gpu_flags *replaced);
int gates_registered(void); /* how many */
int setup(void **state);
int teardown(void **state);

int world_make(world *w);
void world_free(world *w);
/* The buffer back to stale values, the counters to zero, the gate closed (or open). No
 * gate is held when this runs. */
cudaError_t world_reset(world *w, int gate_open);

/* What a gated run saw. */
typedef struct verdict {
  int raced;                     /* the consumer finished while the producer was held */
  unsigned long long mismatches; /* wrong values it read */
  int gate_timeouts;
  cudaError_t error;
} verdict;

/* After the consumer was enqueued: wait for its signal while the gate holds the producer
 * (a control's consumer always comes; an ordered run waits out the window), open the gate,
 * collect. */
verdict world_release(world *w, int ordered);
/* Counts the run for the current mode and fails unless it saw what its kind must see: an
 * ordered run no race and no wrong value, a control both, every one of its COUNT values. */
void judge(const char *what, int ordered, verdict v);
/* The same for a run whose hazard is an outcome rather than values: hazard says whether
 * it happened (a capture invalidated, a deleter run early), described by how. */
void judge_outcome(const char *what, int ordered, int hazard, const char *how);

/* Runs the tests as the group name (e.g. "gpu_ordering_legacy"), with the device lines
 * first and the mode lines and the summary last; the exit status: 0, the failures, or
 * EXIT_SKIPPED without a device. prepare (may be NULL) runs once a device answered, and
 * may write a reason to skip into no_device. */
int suite_run(const char *name, const char *const *modes, int mode_count,
              const struct CMUnitTest *tests, size_t test_count, void (*prepare)(void));

#endif
