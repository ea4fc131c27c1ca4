/* SPDX-License-Identifier: Apache-2.0 */
/* Shared pieces of the ordering suites on the simulated device: a producer kernel that
   writes a pattern, a consumer kernel that counts mismatches, and threads that record
   outcomes for the test thread to assert (cmocka is not thread-safe). */
#ifndef DL_SYNC_TEST_ORDERING_H_
#define DL_SYNC_TEST_ORDERING_H_

#include <stdint.h>

#include "dlsync/dlsync.h"
#include "dlsync/sim.h"

enum { PATTERN_WORDS = 64 };

typedef struct pattern {
  int32_t words[PATTERN_WORDS];
  /* Negative controls race on purpose: their kernels use relaxed atomics so that the
     race is well defined (and ThreadSanitizer checks only the ordered runs). */
  int racy;
  int64_t mismatches;
} pattern;

/* Launches producer(value) on stream: writes value + i to every word. */
int launch_producer(void *stream, pattern *p, int32_t value);
/* Launches the consumer on stream: counts words that differ from expected. */
int launch_consumer(void *stream, pattern *p, int32_t expected);
/* Closes the gate and launches on stream a kernel that holds it until open_gate(). */
int launch_gate(void *stream);
void open_gate(void);
/* In cmocka tests: fail with the simulator's or dlsync's message. */
#define CHECK_SIM(call)                                                         \
  do {                                                                          \
    int error_ = (call);                                                        \
    if (error_ != 0) fail_msg("%s: %s", #call, dl_sync_sim_error_name(error_)); \
  } while (0)
#define CHECK_DL(call)                                                         \
  do {                                                                         \
    if ((call) != DL_SYNC_OK) fail_msg("%s: %s", #call, dl_sync_last_error()); \
  } while (0)

/* In cmocka tests: prints what the race checker found (the count, and the first race). */
void print_races(const char *what);
/* A CUDA-typed view of a simulated stream on device 0 (or device). */
dl_sync_stream sim_view(void *stream, int32_t device);
/* cmocka setup: installs the sim under every CUDA and ROCm device type, and resets it. */
int use_sim(void **state);
/* cmocka teardown: opens the gate, resets the sim, shuts dlsync down, restores the default
   backends. */
int leave_sim(void **state);

#endif
