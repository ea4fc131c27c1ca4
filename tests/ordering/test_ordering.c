/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Ordering suites on the simulated device: each scenario runs with dlsync's dependency
 * and, as a negative control, without it; the race checker must flag every missing
 * dependency and jitter must expose it by value.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "dlsync/dlsync.h"
#include "ordering.h"

enum { THREADS = 4, ITERATIONS = 1000, NEGATIVE_ITERATIONS = 250 };

/* --- producer on A, consumer on B, exported with the stream argument ---------------- */

typedef struct exchange_worker {
  pthread_t thread;
  int with_dependency;
  int iterations;
  pattern data;
  int failures;
  char error[256];
} exchange_worker;

static void *run_exchange(void *arg) {
  exchange_worker *w = arg;
  dl_sync_sim_stream *a = NULL, *b = NULL;
  if (dl_sync_sim_stream_create(&a, DL_SYNC_SIM_STREAM_NON_BLOCKING) ||
      dl_sync_sim_stream_create(&b, DL_SYNC_SIM_STREAM_NON_BLOCKING)) {
    w->failures++;
    return NULL;
  }
  for (int i = 0; i < w->iterations; i++) {
    int status = launch_producer(a, &w->data, i);
    /* What a consumer's from_dlpack does: stream argument for B, producer exports. */
    dl_sync_stream_arg consumer_arg;
    if (status == 0) status = dl_sync_stream_to_arg(sim_view(b, 0), &consumer_arg);
    if (status == 0 && w->with_dependency) status = dl_sync_export(sim_view(a, 0), consumer_arg);
    if (status == 0) status = launch_consumer(b, &w->data, i);
    /* The consumer hands the buffer back before the next write. */
    if (status == 0) status = dl_sync_push_dep(sim_view(b, 0), sim_view(a, 0));
    if (status != 0 && w->failures++ == 0)
      snprintf(w->error, sizeof w->error, "iteration %d: %s", i, dl_sync_last_error());
  }
  dl_sync_sim_stream_synchronize(a); /* unordered producers may still run in the control */
  dl_sync_sim_stream_synchronize(b);
  dl_sync_sim_host_access("test reads mismatches", &w->data.mismatches, DL_SYNC_SIM_READ);
  return NULL;
}

static void run_exchange_threads(exchange_worker *workers, int with_dependency, int iterations) {
  for (int t = 0; t < THREADS; t++) {
    workers[t] = (exchange_worker){.with_dependency = with_dependency, .iterations = iterations};
    workers[t].data.racy = !with_dependency;
    assert_int_equal(pthread_create(&workers[t].thread, NULL, run_exchange, &workers[t]), 0);
  }
  for (int t = 0; t < THREADS; t++) pthread_join(workers[t].thread, NULL);
  for (int t = 0; t < THREADS; t++)
    if (workers[t].failures) fail_msg("thread %d: %s", t, workers[t].error);
}

static void test_export_orders_the_consumer_after_the_producer(void **state) {
  (void)state;
  dl_sync_sim_set_jitter(1, 50);
  exchange_worker workers[THREADS];
  run_exchange_threads(workers, 1, ITERATIONS);
  print_races("with dl_sync_export");
  assert_int_equal(dl_sync_sim_race_count(), 0);
  for (int t = 0; t < THREADS; t++) assert_int_equal(workers[t].data.mismatches, 0);
}

static void test_negative_control_without_export_races_every_iteration(void **state) {
  (void)state;
  dl_sync_sim_set_jitter(2, 400);
  exchange_worker workers[THREADS];
  run_exchange_threads(workers, 0, NEGATIVE_ITERATIONS);
  print_races("without the dependency");
  /* Each iteration's consumer read races with its producer's write. */
  assert_true(dl_sync_sim_race_count() >= (uint64_t)THREADS * NEGATIVE_ITERATIONS);
  int64_t mismatches = 0;
  for (int t = 0; t < THREADS; t++) mismatches += workers[t].data.mismatches;
  print_message("wrong values seen under jitter: %lld words\n", (long long)mismatches);
  assert_true(mismatches > 0);
}

/* --- the legacy default stream ------------------------------------------------------ */

static void test_legacy_stream_waits_for_blocking_streams(void **state) {
  (void)state;
  static pattern data;
  dl_sync_sim_stream *blocking;
  CHECK_SIM(dl_sync_sim_stream_create(&blocking, DL_SYNC_SIM_STREAM_DEFAULT));
  dl_sync_sim_set_jitter(3, 300);
  for (int i = 0; i < 50; i++) {
    CHECK_SIM(launch_producer(blocking, &data, i));
    CHECK_SIM(launch_consumer(DL_SYNC_SIM_STREAM_LEGACY, &data, i)); /* implicit sync */
    CHECK_SIM(launch_producer(blocking, &data, i + 1000));           /* and back */
    CHECK_SIM(launch_consumer(DL_SYNC_SIM_STREAM_LEGACY, &data, i + 1000));
  }
  CHECK_SIM(dl_sync_sim_device_synchronize());
  assert_int_equal(dl_sync_sim_race_count(), 0);
  assert_int_equal(data.mismatches, 0);
}

static void test_legacy_stream_does_not_wait_for_non_blocking_streams(void **state) {
  (void)state;
  static pattern data = {.racy = 1};
  dl_sync_sim_stream *non_blocking;
  CHECK_SIM(dl_sync_sim_stream_create(&non_blocking, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(launch_producer(non_blocking, &data, 7));
  CHECK_SIM(launch_consumer(DL_SYNC_SIM_STREAM_LEGACY, &data, 7));
  CHECK_SIM(dl_sync_sim_device_synchronize());
  print_races("non-blocking producer, legacy consumer, no dependency");
  assert_int_equal(dl_sync_sim_race_count(), 1);
}

static void test_export_with_none_orders_the_legacy_consumer(void **state) {
  (void)state;
  static pattern data;
  dl_sync_sim_stream *non_blocking;
  CHECK_SIM(dl_sync_sim_stream_create(&non_blocking, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  dl_sync_sim_set_jitter(4, 300);
  for (int i = 0; i < 50; i++) {
    CHECK_SIM(launch_producer(non_blocking, &data, i));
    CHECK_DL(dl_sync_export(sim_view(non_blocking, 0), dl_sync_stream_arg_none()));
    CHECK_SIM(launch_consumer(DL_SYNC_SIM_STREAM_LEGACY, &data, i));
    CHECK_DL(dl_sync_push_dep(sim_view(NULL, 0), sim_view(non_blocking, 0)));
  }
  CHECK_SIM(dl_sync_sim_device_synchronize());
  assert_int_equal(dl_sync_sim_race_count(), 0);
  assert_int_equal(data.mismatches, 0);
}

/* --- stream=2: each thread's own per-thread default stream -------------------------- */

typedef struct per_thread_worker {
  pthread_t thread;
  pattern *data;
  int produce, consume, use_dependency;
  int wait_for_gate;  /* after exporting, set exported and wait until gate is set */
  int exported, gate; /* relaxed: they order nothing */
  int status;
  char error[256];
} per_thread_worker;

static void *run_per_thread(void *arg) {
  per_thread_worker *w = arg;
  static _Thread_local dl_sync_sim_stream *producer_stream;
  if (dl_sync_sim_stream_create(&producer_stream, DL_SYNC_SIM_STREAM_NON_BLOCKING)) return NULL;
  if (w->produce) {
    w->status = launch_producer(producer_stream, w->data, 5);
    if (w->status == 0 && w->use_dependency)
      w->status = dl_sync_export(sim_view(producer_stream, 0), dl_sync_stream_arg_int(2));
  }
  if (w->status == 0 && w->consume)
    w->status = launch_consumer(DL_SYNC_SIM_STREAM_PER_THREAD, w->data, 5);
  if (w->status != 0) snprintf(w->error, sizeof w->error, "%s", dl_sync_last_error());
  if (w->wait_for_gate) {
    __atomic_store_n(&w->exported, 1, __ATOMIC_RELAXED);
    while (!__atomic_load_n(&w->gate, __ATOMIC_RELAXED)) sched_yield();
  }
  dl_sync_sim_stream_synchronize(DL_SYNC_SIM_STREAM_PER_THREAD);
  return NULL;
}

static void test_stream_two_is_the_calling_threads_per_thread_stream(void **state) {
  (void)state;
  static pattern data[THREADS];
  per_thread_worker workers[THREADS];
  for (int t = 0; t < THREADS; t++) {
    workers[t] =
        (per_thread_worker){.data = &data[t], .produce = 1, .consume = 1, .use_dependency = 1};
    assert_int_equal(pthread_create(&workers[t].thread, NULL, run_per_thread, &workers[t]), 0);
  }
  for (int t = 0; t < THREADS; t++) {
    pthread_join(workers[t].thread, NULL);
    if (workers[t].status) fail_msg("thread %d: %s", t, workers[t].error);
  }
  assert_int_equal(dl_sync_sim_race_count(), 0);
}

static void test_another_threads_per_thread_stream_is_not_ordered(void **state) {
  (void)state;
  static pattern data = {.racy = 1};
  /* Thread 1 produces and exports to *its* stream 2; thread 2 consumes on *its* own
     while thread 1 waits: had thread 1 synchronized and been joined before thread 2 was
     created, the two would be ordered. */
  per_thread_worker producer = {
      .data = &data, .produce = 1, .use_dependency = 1, .wait_for_gate = 1};
  pthread_create(&producer.thread, NULL, run_per_thread, &producer);
  while (!__atomic_load_n(&producer.exported, __ATOMIC_RELAXED)) sched_yield();
  per_thread_worker consumer = {.data = &data, .consume = 1};
  pthread_create(&consumer.thread, NULL, run_per_thread, &consumer);
  pthread_join(consumer.thread, NULL);
  __atomic_store_n(&producer.gate, 1, __ATOMIC_RELAXED);
  pthread_join(producer.thread, NULL);
  assert_int_equal(producer.status, 0);
  print_races("consumer on another thread's stream 2");
  assert_int_equal(dl_sync_sim_race_count(), 1);
}

/* --- graph capture ----------------------------------------------------------------- */

/* How a framework brings a side stream into its capture: b waits on an event recorded
   on the capturing stream a. dlsync refuses to do this implicitly (ECAPTURE). */
static void fork_into_capture(dl_sync_sim_stream *a, dl_sync_sim_stream *b) {
  dl_sync_sim_event *fork;
  CHECK_SIM(dl_sync_sim_event_create(&fork));
  CHECK_SIM(dl_sync_sim_event_record(fork, a, 0));
  CHECK_SIM(dl_sync_sim_stream_wait_event(b, fork, 0));
  CHECK_SIM(dl_sync_sim_event_destroy(fork));
}

static void test_one_capture_forks_and_joins_and_replays_without_races(void **state) {
  (void)state;
  static pattern data;
  dl_sync_sim_stream *a, *b, *launcher;
  CHECK_SIM(dl_sync_sim_stream_create(&a, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(dl_sync_sim_stream_create(&b, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(dl_sync_sim_stream_create(&launcher, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  const int modes[] = {DL_SYNC_SIM_CAPTURE_GLOBAL, DL_SYNC_SIM_CAPTURE_THREAD_LOCAL,
                       DL_SYNC_SIM_CAPTURE_RELAXED};
  dl_sync_sim_set_jitter(5, 200);
  for (size_t m = 0; m < 3; m++) {
    CHECK_SIM(dl_sync_sim_stream_begin_capture(a, modes[m]));
    fork_into_capture(a, b);
    CHECK_SIM(launch_producer(a, &data, 11));
    CHECK_DL(dl_sync_push_dep(sim_view(a, 0), sim_view(b, 0))); /* an edge in the graph */
    CHECK_SIM(launch_consumer(b, &data, 11));
    CHECK_DL(dl_sync_push_dep(sim_view(b, 0), sim_view(a, 0))); /* join back */
    dl_sync_sim_graph *graph;
    CHECK_SIM(dl_sync_sim_stream_end_capture(a, &graph));
    size_t kernels, waits;
    CHECK_SIM(dl_sync_sim_graph_count_nodes(graph, &kernels, &waits, NULL));
    assert_int_equal(kernels, 2);
    assert_int_equal(waits, 0);
    dl_sync_sim_graph_exec *exec;
    CHECK_SIM(dl_sync_sim_graph_instantiate(&exec, graph));
    for (int i = 0; i < 100; i++) CHECK_SIM(dl_sync_sim_graph_launch(exec, launcher));
    CHECK_SIM(dl_sync_sim_stream_synchronize(launcher));
    CHECK_SIM(dl_sync_sim_graph_exec_destroy(exec));
    CHECK_SIM(dl_sync_sim_graph_destroy(graph));
  }
  assert_int_equal(dl_sync_sim_race_count(), 0);
  assert_int_equal(data.mismatches, 0);
}

static void test_negative_control_capture_without_the_edge_is_a_graph_race(void **state) {
  (void)state;
  static pattern data = {.racy = 1};
  dl_sync_sim_stream *a, *b;
  CHECK_SIM(dl_sync_sim_stream_create(&a, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(dl_sync_sim_stream_create(&b, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(dl_sync_sim_stream_begin_capture(a, DL_SYNC_SIM_CAPTURE_GLOBAL));
  fork_into_capture(a, b);
  CHECK_SIM(launch_producer(a, &data, 1));
  /* the control: no dl_sync_push_dep(a, b) here */
  CHECK_SIM(launch_consumer(b, &data, 1));
  CHECK_DL(dl_sync_push_dep(sim_view(b, 0), sim_view(a, 0)));
  dl_sync_sim_graph *graph;
  CHECK_SIM(dl_sync_sim_stream_end_capture(a, &graph));
  print_races("capture without the edge");
  assert_int_equal(dl_sync_sim_race_count(), 1);
  CHECK_SIM(dl_sync_sim_graph_destroy(graph));
}

static void test_capturing_producer_with_plain_consumer_is_ecapture(void **state) {
  (void)state;
  static pattern data;
  dl_sync_sim_stream *a, *b;
  CHECK_SIM(dl_sync_sim_stream_create(&a, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(dl_sync_sim_stream_create(&b, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(dl_sync_sim_stream_begin_capture(a, DL_SYNC_SIM_CAPTURE_GLOBAL));
  CHECK_SIM(launch_producer(a, &data, 1));
  assert_int_equal(dl_sync_export(sim_view(a, 0), dl_sync_stream_arg_int((int64_t)(uintptr_t)b)),
                   DL_SYNC_ECAPTURE);
  assert_non_null(strstr(dl_sync_last_error(), "or capture both"));
  int32_t status;
  CHECK_SIM(dl_sync_sim_stream_capture_info(b, &status, NULL, NULL));
  assert_int_equal(status, DL_SYNC_CAPTURE_NONE); /* b was not pulled into the capture */
  dl_sync_sim_graph *graph;
  CHECK_SIM(dl_sync_sim_stream_end_capture(a, &graph));
  CHECK_SIM(dl_sync_sim_graph_destroy(graph));
}

typedef struct pool_counts {
  uint64_t outstanding, idle;
} pool_counts;

static pool_counts pool_now(void) {
  dl_sync_pool_stats stats;
  dl_sync_pool_stats_get(dl_sync_sim_backend(), 0, &stats);
  return (pool_counts){stats.outstanding, stats.idle};
}

static void capture_consumer(int with_dependency, int launches) {
  static pattern data;
  data = (pattern){.racy = !with_dependency};
  dl_sync_sim_stream *a, *b, *launcher;
  CHECK_SIM(dl_sync_sim_stream_create(&a, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(dl_sync_sim_stream_create(&b, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(dl_sync_sim_stream_create(&launcher, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  dl_sync_sim_set_jitter(6, 500);
  CHECK_SIM(launch_producer(a, &data, 21)); /* not captured */
  CHECK_SIM(dl_sync_sim_stream_begin_capture(b, DL_SYNC_SIM_CAPTURE_GLOBAL));
  if (with_dependency) CHECK_DL(dl_sync_push_dep(sim_view(a, 0), sim_view(b, 0)));
  CHECK_SIM(launch_consumer(b, &data, 21));
  dl_sync_sim_graph *graph;
  CHECK_SIM(dl_sync_sim_stream_end_capture(b, &graph));
  size_t waits;
  CHECK_SIM(dl_sync_sim_graph_count_nodes(graph, NULL, &waits, NULL));
  assert_int_equal(waits, with_dependency ? 1 : 0);
  dl_sync_sim_graph_exec *exec;
  CHECK_SIM(dl_sync_sim_graph_instantiate(&exec, graph));
  for (int i = 0; i < launches; i++) CHECK_SIM(dl_sync_sim_graph_launch(exec, launcher));
  CHECK_SIM(dl_sync_sim_stream_synchronize(launcher));
  dl_sync_sim_host_access("test reads mismatches", &data.mismatches, DL_SYNC_SIM_READ);
  if (with_dependency) {
    assert_int_equal(pool_now().outstanding, 1); /* the graph owns its event */
    CHECK_SIM(dl_sync_sim_graph_destroy(graph));
    assert_int_equal(pool_now().outstanding, 1); /* the executable graph still does */
    CHECK_SIM(dl_sync_sim_graph_exec_destroy(exec));
    assert_int_equal(pool_now().outstanding, 0);
    assert_int_equal(pool_now().idle, 1);
    assert_int_equal(dl_sync_sim_race_count(), 0);
    assert_int_equal(data.mismatches, 0);
  } else {
    print_races("captured consumer without the dependency");
    assert_int_equal(dl_sync_sim_race_count(), (uint64_t)launches); /* one per launch */
    CHECK_SIM(dl_sync_sim_graph_exec_destroy(exec));
    CHECK_SIM(dl_sync_sim_graph_destroy(graph));
  }
}

static void test_capturing_consumer_gets_an_external_wait_released_with_the_graph(void **state) {
  (void)state;
  capture_consumer(1, 20);
}

static void test_negative_control_captured_consumer_without_dependency_races(void **state) {
  (void)state;
  capture_consumer(0, 20);
}

static void test_legacy_argument_during_capture_is_ecapture_or_no_sync_by_policy(void **state) {
  (void)state;
  static pattern data;
  dl_sync_sim_stream *a;
  CHECK_SIM(dl_sync_sim_stream_create(&a, DL_SYNC_SIM_STREAM_DEFAULT));
  CHECK_SIM(dl_sync_sim_stream_begin_capture(a, DL_SYNC_SIM_CAPTURE_GLOBAL));
  CHECK_SIM(launch_producer(a, &data, 1));
  assert_int_equal(dl_sync_export(sim_view(a, 0), dl_sync_stream_arg_none()), DL_SYNC_ECAPTURE);
  assert_int_equal(dl_sync_export(sim_view(a, 0), dl_sync_stream_arg_int(1)), DL_SYNC_ECAPTURE);
  CHECK_DL(dl_sync_set_capture_policy(DL_SYNC_CAPTURE_NONE_IS_NO_SYNC));
  assert_int_equal(dl_sync_export(sim_view(a, 0), dl_sync_stream_arg_none()), DL_SYNC_OK);
  assert_int_equal(dl_sync_export(sim_view(a, 0), dl_sync_stream_arg_int(1)), DL_SYNC_ECAPTURE);
  CHECK_DL(dl_sync_set_capture_policy(DL_SYNC_CAPTURE_STRICT));
  dl_sync_sim_graph *graph;
  CHECK_SIM(dl_sync_sim_stream_end_capture(a, &graph)); /* the capture survived */
  CHECK_SIM(dl_sync_sim_graph_destroy(graph));
}

typedef struct prohibited_call {
  pthread_t thread;
  int error;
} prohibited_call;

static void *call_prohibited(void *arg) {
  ((prohibited_call *)arg)->error = dl_sync_sim_prohibited_call();
  return NULL;
}

static int capture_with_foreign_prohibited_call(int mode) {
  static pattern data;
  dl_sync_sim_stream *a;
  CHECK_SIM(dl_sync_sim_stream_create(&a, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(dl_sync_sim_stream_begin_capture(a, mode));
  CHECK_SIM(launch_producer(a, &data, 1));
  prohibited_call call = {0};
  pthread_create(&call.thread, NULL, call_prohibited, &call);
  pthread_join(call.thread, NULL);
  dl_sync_sim_graph *graph = NULL;
  int error = dl_sync_sim_stream_end_capture(a, &graph);
  if (graph != NULL) dl_sync_sim_graph_destroy(graph);
  return error;
}

static void test_foreign_prohibited_call_invalidates_a_global_capture_only(void **state) {
  (void)state;
  assert_int_equal(capture_with_foreign_prohibited_call(DL_SYNC_SIM_CAPTURE_GLOBAL),
                   DL_SYNC_SIM_ERROR_CAPTURE_INVALIDATED);
  assert_int_equal(capture_with_foreign_prohibited_call(DL_SYNC_SIM_CAPTURE_THREAD_LOCAL),
                   DL_SYNC_SIM_SUCCESS);
  assert_int_equal(capture_with_foreign_prohibited_call(DL_SYNC_SIM_CAPTURE_RELAXED),
                   DL_SYNC_SIM_SUCCESS);
}

static void test_unjoined_fork_fails_end_of_capture(void **state) {
  (void)state;
  static pattern data;
  dl_sync_sim_stream *a, *b;
  CHECK_SIM(dl_sync_sim_stream_create(&a, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(dl_sync_sim_stream_create(&b, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(dl_sync_sim_stream_begin_capture(a, DL_SYNC_SIM_CAPTURE_GLOBAL));
  fork_into_capture(a, b);
  CHECK_SIM(launch_producer(a, &data, 1));
  CHECK_DL(dl_sync_push_dep(sim_view(a, 0), sim_view(b, 0)));
  CHECK_SIM(launch_consumer(b, &data, 1)); /* never joined back into a */
  dl_sync_sim_graph *graph = (dl_sync_sim_graph *)1;
  assert_int_equal(dl_sync_sim_stream_end_capture(a, &graph), DL_SYNC_SIM_ERROR_CAPTURE_UNJOINED);
  assert_null(graph);
}

/* --- many threads, streams and devices through one pool ----------------------------- */

typedef struct pool_worker {
  pthread_t thread;
  int32_t device;
  pattern data;
  int failures;
  char error[256];
} pool_worker;

static void *run_pool_worker(void *arg) {
  pool_worker *w = arg;
  dl_sync_sim_set_device(w->device);
  dl_sync_sim_stream *a, *b;
  dl_sync_sim_stream_create(&a, DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_stream_create(&b, DL_SYNC_SIM_STREAM_NON_BLOCKING);
  for (int i = 0; i < 300; i++) {
    int status = launch_producer(a, &w->data, i);
    if (status == 0) status = dl_sync_push_dep(sim_view(a, w->device), sim_view(b, w->device));
    if (status == 0) status = launch_consumer(b, &w->data, i);
    if (status == 0) status = dl_sync_push_dep(sim_view(b, w->device), sim_view(a, w->device));
    if (status != 0 && w->failures++ == 0)
      snprintf(w->error, sizeof w->error, "%s", dl_sync_last_error());
  }
  dl_sync_sim_stream_synchronize(b);
  dl_sync_sim_host_access("test reads mismatches", &w->data.mismatches, DL_SYNC_SIM_READ);
  return NULL;
}

static void test_many_threads_and_devices_share_the_event_pool(void **state) {
  (void)state;
  enum { WORKERS = 8 };
  pool_worker workers[WORKERS];
  dl_sync_sim_set_jitter(7, 30);
  for (int t = 0; t < WORKERS; t++) {
    workers[t] = (pool_worker){.device = t % 2};
    assert_int_equal(pthread_create(&workers[t].thread, NULL, run_pool_worker, &workers[t]), 0);
  }
  for (int t = 0; t < WORKERS; t++) pthread_join(workers[t].thread, NULL);
  for (int t = 0; t < WORKERS; t++) {
    if (workers[t].failures) fail_msg("thread %d: %s", t, workers[t].error);
    assert_int_equal(workers[t].data.mismatches, 0);
  }
  assert_int_equal(dl_sync_sim_race_count(), 0);
  for (int32_t d = 0; d < 2; d++) {
    dl_sync_pool_stats stats;
    CHECK_DL(dl_sync_pool_stats_get(dl_sync_sim_backend(), d, &stats));
    print_message("device %d: %llu dependencies, %llu events\n", d,
                  (unsigned long long)stats.acquired, (unsigned long long)stats.created);
    assert_int_equal(stats.acquired, WORKERS / 2 * 600);
    assert_in_range(stats.created, 1, WORKERS / 2);
    assert_int_equal(stats.outstanding, 0);
  }
}

#define ORDERING_TEST(name) cmocka_unit_test_setup_teardown(name, use_sim, leave_sim)

int main(void) {
  const struct CMUnitTest tests[] = {
      ORDERING_TEST(test_export_orders_the_consumer_after_the_producer),
      ORDERING_TEST(test_negative_control_without_export_races_every_iteration),
      ORDERING_TEST(test_legacy_stream_waits_for_blocking_streams),
      ORDERING_TEST(test_legacy_stream_does_not_wait_for_non_blocking_streams),
      ORDERING_TEST(test_export_with_none_orders_the_legacy_consumer),
      ORDERING_TEST(test_stream_two_is_the_calling_threads_per_thread_stream),
      ORDERING_TEST(test_another_threads_per_thread_stream_is_not_ordered),
      ORDERING_TEST(test_one_capture_forks_and_joins_and_replays_without_races),
      ORDERING_TEST(test_negative_control_capture_without_the_edge_is_a_graph_race),
      ORDERING_TEST(test_capturing_producer_with_plain_consumer_is_ecapture),
      ORDERING_TEST(test_capturing_consumer_gets_an_external_wait_released_with_the_graph),
      ORDERING_TEST(test_negative_control_captured_consumer_without_dependency_races),
      ORDERING_TEST(test_legacy_argument_during_capture_is_ecapture_or_no_sync_by_policy),
      ORDERING_TEST(test_foreign_prohibited_call_invalidates_a_global_capture_only),
      ORDERING_TEST(test_unjoined_fork_fails_end_of_capture),
      ORDERING_TEST(test_many_threads_and_devices_share_the_event_pool),
  };
  return cmocka_run_group_tests_name("ordering_sim", tests, NULL, NULL);
}
