/* SPDX-License-Identifier: Apache-2.0 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, nanosleep */
/* The shared part of the GPU suites (gpu_suite.h). */
#include "gpu_suite.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

char no_device[256];
int device_count;

static atomic_int ordered_runs, control_runs, controls_raced;
static atomic_int mode_ordered[MAX_MODES], mode_controls[MAX_MODES], mode_raced[MAX_MODES];
static char mode_skipped[MAX_MODES][128]; /* why a mode did not run here (one device, ...) */
static int current_mode;

void suite_set_mode(int mode) {
  current_mode = mode;
}

void count_ordered(int runs) {
  atomic_fetch_add(&ordered_runs, runs);
  atomic_fetch_add(&mode_ordered[current_mode], runs);
}

void skip_mode(const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  vsnprintf(mode_skipped[current_mode], sizeof mode_skipped[current_mode], fmt, args);
  va_end(args);
  print_message("skipped: %s\n", mode_skipped[current_mode]);
  skip();
}

void skip_without_device(void) {
  if (no_device[0] != '\0') {
    print_message("skipped: %s\n", no_device);
    skip();
  }
}

long long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

int seen_within(volatile int *flag, long long limit_ns) {
  long long end = now_ns() + limit_ns;
  struct timespec pause = {0, 10000};
  while (*flag == 0) {
    if (now_ns() > end) return 0;
    nanosleep(&pause, NULL);
  }
  atomic_thread_fence(memory_order_acquire);
  return 1;
}

void flag_set(volatile int *flag, int value) {
  atomic_thread_fence(memory_order_release);
  *flag = value;
  atomic_thread_fence(memory_order_seq_cst);
}

dl_sync_stream on_device(int device, void *stream) {
  return dl_sync_stream_view((DLDevice){GPU_DEVICE_TYPE, device}, stream);
}

dl_sync_stream on(void *stream) {
  return on_device(0, stream);
}

static pthread_mutex_t gates_lock = PTHREAD_MUTEX_INITIALIZER;
static gpu_flags *gates[16]; /* more worlds than this at once never hold a gate */

void gate_register(gpu_flags *flags, gpu_flags *replaced) {
  pthread_mutex_lock(&gates_lock);
  for (size_t i = 0; i < sizeof gates / sizeof gates[0]; i++)
    if (gates[i] == replaced) {
      gates[i] = flags;
      break;
    }
  pthread_mutex_unlock(&gates_lock);
}

int gates_registered(void) {
  int count = 0;
  pthread_mutex_lock(&gates_lock);
  for (size_t i = 0; i < sizeof gates / sizeof gates[0]; i++) count += gates[i] != NULL;
  pthread_mutex_unlock(&gates_lock);
  return count;
}

int setup(void **state) {
  (void)state;
  if (no_device[0] != '\0') return 0;
  dl_sync_set_backend(GPU_DEVICE_TYPE, NULL);
  dl_sync_set_capture_policy(DL_SYNC_CAPTURE_STRICT);
  return 0;
}

int teardown(void **state) {
  (void)state;
  if (no_device[0] != '\0') return 0;
  pthread_mutex_lock(&gates_lock);
  for (size_t i = 0; i < sizeof gates / sizeof gates[0]; i++)
    if (gates[i] != NULL) flag_set(&gates[i]->open, 1);
  pthread_mutex_unlock(&gates_lock);
  cudaSetDevice(0);
  cudaDeviceSynchronize();
  return 0;
}

int world_make(world *w) {
  *w = (world){0};
  int ok = cudaStreamCreateWithFlags(&w->a, cudaStreamNonBlocking) == cudaSuccess &&
           cudaStreamCreateWithFlags(&w->b, cudaStreamNonBlocking) == cudaSuccess &&
           cudaMalloc((void **)&w->data, COUNT * sizeof(int)) == cudaSuccess &&
           cudaMalloc((void **)&w->launch, sizeof *w->launch) == cudaSuccess &&
           cudaMalloc((void **)&w->mismatches, SLOTS * sizeof *w->mismatches) == cudaSuccess &&
           gpu_flags_create(&w->flags, &w->device_flags) == 0 &&
           cudaMemset(w->launch, 0, sizeof *w->launch) == cudaSuccess &&
           cudaDeviceSynchronize() == cudaSuccess;
  if (w->flags != NULL) gate_register(w->flags, NULL);
  return ok ? 0 : -1;
}

void world_free(world *w) {
  cudaStreamSynchronize(w->a);
  cudaStreamSynchronize(w->b);
  cudaFree(w->data);
  cudaFree(w->launch);
  cudaFree(w->mismatches);
  if (w->flags != NULL) {
    gate_register(NULL, w->flags);
    gpu_flags_destroy(w->flags);
  }
  cudaStreamDestroy(w->a);
  cudaStreamDestroy(w->b);
}

cudaError_t world_reset(world *w, int gate_open) {
  cudaError_t error = cudaMemset(w->data, 0xff, COUNT * sizeof(int)); /* GPU_STALE */
  if (error == cudaSuccess) error = cudaMemset(w->mismatches, 0, SLOTS * sizeof *w->mismatches);
  if (error == cudaSuccess) error = cudaMemset(w->launch, 0, sizeof *w->launch);
  if (error == cudaSuccess) error = cudaDeviceSynchronize();
  w->flags->signalled = 0;
  flag_set(&w->flags->open, gate_open);
  return error;
}

verdict world_release(world *w, int ordered) {
  verdict v = {0};
  v.raced = seen_within(&w->flags->signalled, ordered ? RACE_WINDOW_NS : RUNS_SOON_NS);
  flag_set(&w->flags->open, 1);
  v.error = cudaDeviceSynchronize(); /* every stream the consumer may have used */
  if (v.error == cudaSuccess)
    v.error = cudaMemcpy(&v.mismatches, w->mismatches, sizeof v.mismatches, cudaMemcpyDeviceToHost);
  v.gate_timeouts = w->flags->gate_timeouts;
  return v;
}

void judge(const char *what, int ordered, verdict v) {
  if (v.error != cudaSuccess) fail_msg("%s: %s", what, cudaGetErrorName(v.error));
  if (v.gate_timeouts != 0) fail_msg("%s: the gate timed out (the host never opened it)", what);
  if (ordered) {
    count_ordered(1);
    if (v.raced || v.mismatches != 0)
      fail_msg("%s: the consumer ran before the producer (%s, %llu wrong values)", what,
               v.raced ? "finished while the producer was held" : "after it", v.mismatches);
  } else {
    int raced = v.raced && v.mismatches == COUNT;
    atomic_fetch_add(&control_runs, 1);
    atomic_fetch_add(&controls_raced, raced);
    atomic_fetch_add(&mode_controls[current_mode], 1);
    atomic_fetch_add(&mode_raced[current_mode], raced);
    if (!v.raced || v.mismatches != COUNT)
      fail_msg(
          "%s, control without the dependency: expected the race every time, saw %s and "
          "%llu of %d stale values",
          what, v.raced ? "it finish early" : "it wait", v.mismatches, COUNT);
  }
}

void judge_outcome(const char *what, int ordered, int hazard, const char *how) {
  if (ordered) {
    count_ordered(1);
    if (hazard) fail_msg("%s: %s", what, how);
  } else {
    atomic_fetch_add(&control_runs, 1);
    atomic_fetch_add(&controls_raced, hazard != 0);
    atomic_fetch_add(&mode_controls[current_mode], 1);
    atomic_fetch_add(&mode_raced[current_mode], hazard != 0);
    if (!hazard)
      fail_msg(
          "%s, control without dlsync: expected the hazard every time, and it did not "
          "happen (%s)",
          what, how);
  }
}

static void print_devices(void) {
  struct cudaDeviceProp prop;
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  for (int d = 0; d < device_count; d++)
    if (cudaGetDeviceProperties(&prop, d) == cudaSuccess)
      printf("device %d: %s, sm_%d%d, CUDA runtime %d.%d, driver supports %d.%d\n", d, prop.name,
             prop.major, prop.minor, runtime / 1000, runtime % 1000 / 10, driver / 1000,
             driver % 1000 / 10);
}

int suite_run(const char *name, const char *const *modes, int mode_count,
              const struct CMUnitTest *tests, size_t test_count, void (*prepare)(void)) {
  if (mode_count > MAX_MODES) {
    printf("%s: %d modes, more than the %d this file counts\n", name, mode_count, MAX_MODES);
    return 1;
  }
  cudaError_t error = cudaGetDeviceCount(&device_count);
  if (error != cudaSuccess || device_count == 0)
    snprintf(no_device, sizeof no_device, "no " GPU_RUNTIME_NAME " device: [%s][%s] %s",
             NAME_OF(cudaGetDeviceCount),
             error != cudaSuccess ? cudaGetErrorName(error) : "0 devices",
             error != cudaSuccess ? cudaGetErrorString(error) : "");
  if (no_device[0] == '\0' && prepare != NULL) prepare();
  if (no_device[0] == '\0') print_devices();
  int failed = _cmocka_run_group_tests(name, tests, test_count, NULL, NULL);
  if (no_device[0] != '\0') {
    printf("%s: skipped: %s\n", name, no_device);
    return failed == 0 ? EXIT_SKIPPED : failed;
  }
  /* The lines gpu-check.sh reads: one per mode, then the suite's totals. */
  for (int m = 0; m < mode_count; m++) {
    if (mode_skipped[m][0] != '\0')
      printf("%s: mode %s: skipped: %s\n", name, modes[m], mode_skipped[m]);
    else
      printf("%s: mode %s: ordered runs %d, control runs %d, controls that observed a race %d\n",
             name, modes[m], atomic_load(&mode_ordered[m]), atomic_load(&mode_controls[m]),
             atomic_load(&mode_raced[m]));
  }
  printf("%s: summary: ordered runs %d, control runs %d, controls that observed a race %d\n", name,
         atomic_load(&ordered_runs), atomic_load(&control_runs), atomic_load(&controls_raced));
  return failed;
}
