/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Dependency groups on the simulated device: f(a, b, c) on a consumer stream B, where a
 * and b were written on producer stream A1 (added to the group twice, once per tensor)
 * and c on A2 (reached through c's per-tensor event). The negative control leaves A1 out
 * of the group: the race checker must flag every iteration and jitter must expose it by
 * value.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "dlsync/dlsync.h"
#include "ordering/ordering.h"

enum { THREADS = 4, ITERATIONS = 300, NEGATIVE_ITERATIONS = 100 };

typedef struct group_worker {
  pthread_t thread;
  int skip_a1; /* the negative control: the group misses the producer of a and b */
  int iterations;
  pattern a, b, c;
  int failures;
  char error[256];
} group_worker;

static int one_call(group_worker *w, dl_sync_sim_stream *a1, dl_sync_sim_stream *a2,
                    dl_sync_sim_stream *b, DLManagedTensorVersioned *c_tensor, int32_t i) {
  int status = launch_producer(a1, &w->a, i);
  if (status == 0) status = launch_producer(a1, &w->b, i + 1);
  if (status == 0) status = launch_producer(a2, &w->c, i + 2);
  if (status == 0) status = dl_sync_tensor_record(c_tensor, sim_view(a2, 0));
  dl_sync_group group;
  if (status == 0) status = dl_sync_group_init(&group, sim_view(b, 0));
  for (int tensor = 0; tensor < 2 && status == 0 && !w->skip_a1; tensor++)
    status = dl_sync_group_add_stream(&group, sim_view(a1, 0)); /* a, then b */
  if (status == 0) status = dl_sync_group_add_tensor(&group, c_tensor);
  if (status == 0) status = dl_sync_group_wait(&group);
  if (status == 0) status = launch_consumer(b, &w->a, i);
  if (status == 0) status = launch_consumer(b, &w->b, i + 1);
  if (status == 0) status = launch_consumer(b, &w->c, i + 2);
  /* The consumer hands the buffers back before the next writes. */
  if (status == 0) status = dl_sync_push_dep(sim_view(b, 0), sim_view(a1, 0));
  if (status == 0) status = dl_sync_push_dep(sim_view(b, 0), sim_view(a2, 0));
  return status;
}

static void *run_group(void *arg) {
  group_worker *w = arg;
  dl_sync_sim_stream *a1 = NULL, *a2 = NULL, *b = NULL;
  if (dl_sync_sim_stream_create(&a1, DL_SYNC_SIM_STREAM_NON_BLOCKING) ||
      dl_sync_sim_stream_create(&a2, DL_SYNC_SIM_STREAM_NON_BLOCKING) ||
      dl_sync_sim_stream_create(&b, DL_SYNC_SIM_STREAM_NON_BLOCKING)) {
    w->failures++;
    return NULL;
  }
  DLManagedTensorVersioned c_tensor = {.version = {1, 3}};
  c_tensor.dl_tensor.device = (DLDevice){kDLCUDA, 0};
  for (int i = 0; i < w->iterations; i++) {
    int status = one_call(w, a1, a2, b, &c_tensor, i * 3);
    if (status != 0 && w->failures++ == 0)
      snprintf(w->error, sizeof w->error, "iteration %d: %s", i, dl_sync_last_error());
  }
  dl_sync_sim_stream_synchronize(a1);
  dl_sync_sim_stream_synchronize(a2);
  dl_sync_sim_stream_synchronize(b);
  if (c_tensor.deleter != NULL) c_tensor.deleter(&c_tensor);
  dl_sync_sim_host_access("test reads mismatches", &w->a.mismatches, DL_SYNC_SIM_READ);
  dl_sync_sim_host_access("test reads mismatches", &w->b.mismatches, DL_SYNC_SIM_READ);
  dl_sync_sim_host_access("test reads mismatches", &w->c.mismatches, DL_SYNC_SIM_READ);
  return NULL;
}

static void run_threads(group_worker *workers, int skip_a1, int iterations) {
  for (int t = 0; t < THREADS; t++) {
    workers[t] = (group_worker){.skip_a1 = skip_a1, .iterations = iterations};
    workers[t].a.racy = workers[t].b.racy = skip_a1;
    assert_int_equal(pthread_create(&workers[t].thread, NULL, run_group, &workers[t]), 0);
  }
  for (int t = 0; t < THREADS; t++) pthread_join(workers[t].thread, NULL);
  for (int t = 0; t < THREADS; t++)
    if (workers[t].failures) fail_msg("thread %d: %s", t, workers[t].error);
}

static void test_a_group_orders_every_producer_before_the_consumer(void **state) {
  (void)state;
  dl_sync_sim_set_jitter(11, 50);
  static group_worker workers[THREADS];
  run_threads(workers, 0, ITERATIONS);
  print_races("with the group");
  assert_int_equal(dl_sync_sim_race_count(), 0);
  for (int t = 0; t < THREADS; t++) {
    assert_int_equal(workers[t].a.mismatches, 0);
    assert_int_equal(workers[t].b.mismatches, 0);
    assert_int_equal(workers[t].c.mismatches, 0);
  }
}

static void test_negative_control_a_group_missing_one_producer_races(void **state) {
  (void)state;
  dl_sync_sim_set_jitter(12, 400);
  static group_worker workers[THREADS];
  run_threads(workers, 1, NEGATIVE_ITERATIONS);
  print_races("without the producer of a and b");
  /* Each iteration's reads of a and b race with their writes on A1. */
  assert_true(dl_sync_sim_race_count() >= (uint64_t)THREADS * NEGATIVE_ITERATIONS * 2);
  int64_t ordered = 0, unordered = 0;
  for (int t = 0; t < THREADS; t++) {
    unordered += workers[t].a.mismatches + workers[t].b.mismatches;
    ordered += workers[t].c.mismatches;
  }
  print_message("wrong values seen under jitter: %lld words of a and b\n", (long long)unordered);
  assert_int_equal(ordered, 0); /* c stays ordered */
  assert_true(unordered > 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_a_group_orders_every_producer_before_the_consumer,
                                      use_sim, leave_sim),
      cmocka_unit_test_setup_teardown(test_negative_control_a_group_missing_one_producer_races,
                                      use_sim, leave_sim),
  };
  return cmocka_run_group_tests_name("group_ordering", tests, NULL, NULL);
}
