/* SPDX-License-Identifier: Apache-2.0 */
/* The simulated device against the CUDA documentation: for every rule it models, a
   scenario CUDA refuses or orders, and beside it the control that CUDA accepts or leaves
   unordered. docs/sim.md lists each rule with its source and the test here that pins it. */
#define _POSIX_C_SOURCE 200809L /* nanosleep, pthread barriers */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "dlsync/dlsync.h"
#include "dlsync/sim.h"
#include "ordering.h"

enum { VALUE_ROUNDS = 100 };

/* The simulator sees pthread_create and pthread_join, except in a program that links its
   archive together with a sanitizer runtime: both definitions are weak and the
   sanitizer's comes first (docs/sim.md). */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer) || __has_feature(hwaddress_sanitizer)
#define SANITIZER_INTERCEPTS_THREADS 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZER_INTERCEPTS_THREADS 1
#endif
#if defined(DL_SYNC_TEST_SIM_STATIC) && defined(SANITIZER_INTERCEPTS_THREADS)
#define SIM_SEES_THREADS 0
#else
#define SIM_SEES_THREADS 1
#endif

#define SKIP_UNLESS_THE_SIM_SEES_THREADS()                                     \
  do {                                                                         \
    if (!SIM_SEES_THREADS && !explicit_calls) {                                \
      print_message(                                                           \
          "skipped: the sanitizer's pthread_create is the program's, not the " \
          "simulator's static one\n");                                         \
      skip();                                                                  \
    }                                                                          \
  } while (0)

static dl_sync_sim_stream *new_stream(unsigned flags) {
  dl_sync_sim_stream *stream = NULL;
  CHECK_SIM(dl_sync_sim_stream_create(&stream, flags));
  return stream;
}

static dl_sync_sim_event *new_event(void) {
  dl_sync_sim_event *event = NULL;
  CHECK_SIM(dl_sync_sim_event_create(&event));
  return event;
}

/* Ends the capture begun on stream; returns the error and destroys any graph. */
static int end_capture(dl_sync_sim_stream *stream) {
  dl_sync_sim_graph *graph = NULL;
  int error = dl_sync_sim_stream_end_capture(stream, &graph);
  if (graph != NULL) CHECK_SIM(dl_sync_sim_graph_destroy(graph));
  return error;
}

static const int capture_modes[] = {DL_SYNC_SIM_CAPTURE_GLOBAL, DL_SYNC_SIM_CAPTURE_THREAD_LOCAL,
                                    DL_SYNC_SIM_CAPTURE_RELAXED};

/* --- several devices --------------------------------------------------------------- */

static void test_event_record_on_another_devices_stream_is_invalid_handle(void **state) {
  (void)state;
  CHECK_SIM(dl_sync_sim_set_device(0));
  dl_sync_sim_event *on_device_0 = new_event();
  CHECK_SIM(dl_sync_sim_set_device(1));
  dl_sync_sim_stream *on_device_1 = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_event *also_on_device_1 = new_event();
  assert_int_equal(dl_sync_sim_event_record(on_device_0, on_device_1, 0),
                   DL_SYNC_SIM_ERROR_INVALID_HANDLE);
  /* The legacy stream is the current device's: device 1's too. */
  assert_int_equal(dl_sync_sim_event_record(on_device_0, DL_SYNC_SIM_STREAM_LEGACY, 0),
                   DL_SYNC_SIM_ERROR_INVALID_HANDLE);
  /* the control: event and stream of one device */
  CHECK_SIM(dl_sync_sim_event_record(also_on_device_1, on_device_1, 0));
  CHECK_SIM(dl_sync_sim_set_device(0));
  CHECK_SIM(dl_sync_sim_event_record(on_device_0, DL_SYNC_SIM_STREAM_LEGACY, 0));
}

static void test_launch_on_a_stream_of_another_device_is_invalid_handle(void **state) {
  (void)state;
  static pattern data;
  CHECK_SIM(dl_sync_sim_set_device(1));
  dl_sync_sim_stream *on_device_1 = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  CHECK_SIM(dl_sync_sim_set_device(0));
  assert_int_equal(launch_producer(on_device_1, &data, 1), DL_SYNC_SIM_ERROR_INVALID_HANDLE);
  CHECK_SIM(dl_sync_sim_set_device(1)); /* the control: its device current */
  CHECK_SIM(launch_producer(on_device_1, &data, 1));
  CHECK_SIM(dl_sync_sim_device_synchronize());
}

/* Producer on device 0, consumer on device 1, the wait crossing devices or missing. */
static int64_t cross_device_rounds(int with_wait) {
  static pattern data;
  data = (pattern){.racy = !with_wait};
  CHECK_SIM(dl_sync_sim_set_device(0));
  dl_sync_sim_stream *producer = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_event *done = new_event();
  CHECK_SIM(dl_sync_sim_set_device(1));
  dl_sync_sim_stream *consumer = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  for (int i = 0; i < VALUE_ROUNDS; i++) {
    CHECK_SIM(dl_sync_sim_set_device(0));
    CHECK_SIM(launch_producer(producer, &data, i));
    CHECK_SIM(dl_sync_sim_event_record(done, producer, 0));
    CHECK_SIM(dl_sync_sim_set_device(1));
    if (with_wait) CHECK_SIM(dl_sync_sim_stream_wait_event(consumer, done, 0));
    CHECK_SIM(launch_consumer(consumer, &data, i));
    CHECK_SIM(dl_sync_sim_stream_synchronize(consumer));
  }
  CHECK_SIM(dl_sync_sim_set_device(0));
  CHECK_SIM(dl_sync_sim_device_synchronize());
  return data.mismatches;
}

static void test_a_wait_may_cross_devices(void **state) {
  (void)state;
  dl_sync_sim_set_jitter(21, 200);
  assert_int_equal(cross_device_rounds(1), 0);
  assert_int_equal(dl_sync_sim_race_count(), 0);
}

static void test_negative_control_cross_device_consumer_without_wait_races(void **state) {
  (void)state;
  dl_sync_sim_set_jitter(22, 400);
  int64_t mismatches = cross_device_rounds(0);
  print_races("consumer on device 1 without the wait");
  print_message("wrong values seen under jitter: %lld words\n", (long long)mismatches);
  assert_true(dl_sync_sim_race_count() >= VALUE_ROUNDS);
  assert_true(mismatches > 0);
}

/* dlsync's same-stream shortcut must look at the device: the legacy stream handle of
   device 0 and of device 1 are two streams. */
static void legacy_to_legacy_of_another_device(int with_dependency) {
  static pattern data;
  data = (pattern){.racy = !with_dependency};
  CHECK_SIM(dl_sync_sim_set_device(0));
  CHECK_SIM(launch_producer(DL_SYNC_SIM_STREAM_LEGACY, &data, 5));
  if (with_dependency)
    CHECK_DL(dl_sync_push_dep(sim_view(DL_SYNC_SIM_STREAM_LEGACY, 0),
                              sim_view(DL_SYNC_SIM_STREAM_LEGACY, 1)));
  CHECK_SIM(dl_sync_sim_set_device(1));
  CHECK_SIM(launch_consumer(DL_SYNC_SIM_STREAM_LEGACY, &data, 5));
  CHECK_SIM(dl_sync_sim_device_synchronize());
  CHECK_SIM(dl_sync_sim_set_device(0));
  CHECK_SIM(dl_sync_sim_device_synchronize());
}

static void test_push_dep_between_the_legacy_streams_of_two_devices_orders(void **state) {
  (void)state;
  legacy_to_legacy_of_another_device(1);
  print_races("legacy stream of device 0 to that of device 1");
  assert_int_equal(dl_sync_sim_race_count(), 0);
}

static void test_negative_control_legacy_streams_of_two_devices_are_not_one(void **state) {
  (void)state;
  legacy_to_legacy_of_another_device(0);
  assert_int_equal(dl_sync_sim_race_count(), 1);
}

/* --- graph-internal order of external event nodes ---------------------------------- */

/* A graph reading data, with an external wait on the producer's event before or after
   the reader in capture order; each round launches it after the producer's record. */
static int64_t graph_reader_and_external_wait(int reader_after_wait) {
  static pattern data;
  data = (pattern){.racy = 1};
  dl_sync_sim_stream *producer = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_stream *capturing = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_stream *launcher = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_event *produced = new_event();
  CHECK_SIM(dl_sync_sim_stream_begin_capture(capturing, DL_SYNC_SIM_CAPTURE_GLOBAL));
  if (!reader_after_wait) CHECK_SIM(launch_consumer(capturing, &data, 3));
  CHECK_SIM(dl_sync_sim_stream_wait_event(capturing, produced, DL_SYNC_SIM_EVENT_WAIT_EXTERNAL));
  if (reader_after_wait) CHECK_SIM(launch_consumer(capturing, &data, 3));
  dl_sync_sim_graph *graph;
  CHECK_SIM(dl_sync_sim_stream_end_capture(capturing, &graph));
  dl_sync_sim_graph_exec *exec;
  CHECK_SIM(dl_sync_sim_graph_instantiate(&exec, graph));
  for (int i = 0; i < VALUE_ROUNDS; i++) {
    CHECK_SIM(launch_producer(producer, &data, -1000)); /* stale values to read early */
    CHECK_SIM(dl_sync_sim_stream_synchronize(producer));
    CHECK_SIM(launch_producer(producer, &data, 3));
    CHECK_SIM(dl_sync_sim_event_record(produced, producer, 0));
    CHECK_SIM(dl_sync_sim_graph_launch(exec, launcher));
    CHECK_SIM(dl_sync_sim_stream_synchronize(launcher));
    CHECK_SIM(dl_sync_sim_stream_synchronize(producer));
  }
  CHECK_SIM(dl_sync_sim_graph_exec_destroy(exec));
  CHECK_SIM(dl_sync_sim_graph_destroy(graph));
  return data.mismatches;
}

static void test_external_wait_node_orders_its_dependents(void **state) {
  (void)state;
  dl_sync_sim_set_jitter(23, 200);
  assert_int_equal(graph_reader_and_external_wait(1), 0);
  assert_int_equal(dl_sync_sim_race_count(), 0);
}

static void test_negative_control_external_wait_does_not_order_earlier_nodes(void **state) {
  (void)state;
  dl_sync_sim_set_jitter(24, 400);
  int64_t mismatches = graph_reader_and_external_wait(0);
  print_races("graph node captured before the external wait");
  print_message("wrong values seen under jitter: %lld words\n", (long long)mismatches);
  assert_int_equal(dl_sync_sim_race_count(), VALUE_ROUNDS);
  assert_true(mismatches > 0);
}

/* A graph writing first then second, with an external record between them; a consumer
   stream waits on the event and reads one of the two. */
static uint64_t read_after_external_record(int read_second) {
  static pattern first, second;
  first = (pattern){.racy = 1};
  second = (pattern){.racy = 1};
  dl_sync_sim_stream *capturing = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_stream *launcher = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_stream *consumer = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_event *recorded = new_event();
  CHECK_SIM(dl_sync_sim_stream_begin_capture(capturing, DL_SYNC_SIM_CAPTURE_GLOBAL));
  CHECK_SIM(launch_producer(capturing, &first, 1));
  CHECK_SIM(dl_sync_sim_event_record(recorded, capturing, DL_SYNC_SIM_EVENT_RECORD_EXTERNAL));
  CHECK_SIM(launch_producer(capturing, &second, 2));
  dl_sync_sim_graph *graph;
  CHECK_SIM(dl_sync_sim_stream_end_capture(capturing, &graph));
  dl_sync_sim_graph_exec *exec;
  CHECK_SIM(dl_sync_sim_graph_instantiate(&exec, graph));
  CHECK_SIM(dl_sync_sim_graph_launch(exec, launcher));
  CHECK_SIM(dl_sync_sim_stream_wait_event(consumer, recorded, 0));
  if (read_second)
    CHECK_SIM(launch_consumer(consumer, &second, 2));
  else
    CHECK_SIM(launch_consumer(consumer, &first, 1));
  CHECK_SIM(dl_sync_sim_device_synchronize());
  CHECK_SIM(dl_sync_sim_graph_exec_destroy(exec));
  CHECK_SIM(dl_sync_sim_graph_destroy(graph));
  return dl_sync_sim_race_count();
}

static void test_external_record_node_captures_its_dependencies(void **state) {
  (void)state;
  assert_int_equal(read_after_external_record(0), 0);
}

static void test_negative_control_external_record_does_not_cover_later_nodes(void **state) {
  (void)state;
  uint64_t races = read_after_external_record(1);
  print_races("reading a node captured after the external record");
  assert_int_equal(races, 1);
}

/* A graph's external wait node names an event; the event is then recorded inside a
   capture. cudaErrorCapturedEvent: "The operation is not permitted on an event which was
   last recorded in a capturing stream" (the node would wait for work that is not
   scheduled: an event reused by another capture before the graph's launches are done). */
static void test_launching_a_graph_waiting_on_a_captured_event_fails(void **state) {
  (void)state;
  static pattern data;
  data = (pattern){0};
  dl_sync_sim_stream *producer = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_stream *capturing = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_stream *launcher = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_event *produced = new_event();
  CHECK_SIM(dl_sync_sim_stream_begin_capture(capturing, DL_SYNC_SIM_CAPTURE_GLOBAL));
  CHECK_SIM(dl_sync_sim_stream_wait_event(capturing, produced, DL_SYNC_SIM_EVENT_WAIT_EXTERNAL));
  CHECK_SIM(launch_consumer(capturing, &data, 2));
  dl_sync_sim_graph *graph;
  CHECK_SIM(dl_sync_sim_stream_end_capture(capturing, &graph));
  dl_sync_sim_graph_exec *exec;
  CHECK_SIM(dl_sync_sim_graph_instantiate(&exec, graph));
  CHECK_SIM(dl_sync_sim_stream_begin_capture(capturing, DL_SYNC_SIM_CAPTURE_RELAXED));
  CHECK_SIM(dl_sync_sim_event_record(produced, capturing, 0));
  assert_int_equal(dl_sync_sim_graph_launch(exec, launcher), DL_SYNC_SIM_ERROR_CAPTURED_EVENT);
  CHECK_SIM(end_capture(capturing));
  assert_int_equal(dl_sync_sim_graph_launch(exec, launcher), DL_SYNC_SIM_ERROR_CAPTURED_EVENT);
  /* the control: recorded again on a stream, the launch waits for that record */
  CHECK_SIM(launch_producer(producer, &data, 2));
  CHECK_SIM(dl_sync_sim_event_record(produced, producer, 0));
  CHECK_SIM(dl_sync_sim_graph_launch(exec, launcher));
  CHECK_SIM(dl_sync_sim_device_synchronize());
  assert_int_equal(data.mismatches, 0);
  assert_int_equal(dl_sync_sim_race_count(), 0);
  CHECK_SIM(dl_sync_sim_graph_exec_destroy(exec));
  CHECK_SIM(dl_sync_sim_graph_destroy(graph));
}

/* --- repeated launches of one executable graph -------------------------------------- */

static uint64_t launch_on_two_streams(int same_exec) {
  static pattern data;
  data = (pattern){.racy = !same_exec};
  dl_sync_sim_stream *capturing = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_stream *one = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_stream *two = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  CHECK_SIM(dl_sync_sim_stream_begin_capture(capturing, DL_SYNC_SIM_CAPTURE_GLOBAL));
  CHECK_SIM(launch_producer(capturing, &data, 4));
  CHECK_SIM(launch_consumer(capturing, &data, 4));
  dl_sync_sim_graph *graph;
  CHECK_SIM(dl_sync_sim_stream_end_capture(capturing, &graph));
  dl_sync_sim_graph_exec *first, *second;
  CHECK_SIM(dl_sync_sim_graph_instantiate(&first, graph));
  CHECK_SIM(dl_sync_sim_graph_instantiate(&second, graph));
  for (int i = 0; i < 10; i++) {
    CHECK_SIM(dl_sync_sim_graph_launch(first, one));
    CHECK_SIM(dl_sync_sim_graph_launch(same_exec ? first : second, two));
  }
  CHECK_SIM(dl_sync_sim_device_synchronize());
  CHECK_SIM(dl_sync_sim_graph_exec_destroy(first));
  CHECK_SIM(dl_sync_sim_graph_exec_destroy(second));
  CHECK_SIM(dl_sync_sim_graph_destroy(graph));
  assert_int_equal(data.mismatches, 0); /* every launch writes and checks the same values */
  return dl_sync_sim_race_count();
}

static void test_launches_of_one_executable_graph_are_ordered_across_streams(void **state) {
  (void)state;
  dl_sync_sim_set_jitter(31, 200);
  assert_int_equal(launch_on_two_streams(1), 0);
}

static void test_negative_control_two_executable_graphs_on_two_streams_race(void **state) {
  (void)state;
  uint64_t races = launch_on_two_streams(0);
  print_races("two executable graphs of one graph on two streams");
  assert_true(races >= 1);
}

/* --- what orders the host ----------------------------------------------------------- */

static uint64_t host_reads_after_event(int poll) {
  static pattern data;
  data = (pattern){.racy = !poll};
  dl_sync_sim_stream *producer = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_event *done = new_event();
  CHECK_SIM(launch_producer(producer, &data, 6));
  CHECK_SIM(dl_sync_sim_event_record(done, producer, 0));
  int error;
  while (poll && (error = dl_sync_sim_event_query(done)) == DL_SYNC_SIM_ERROR_NOT_READY) {
  }
  if (poll) CHECK_SIM(error);
  CHECK_SIM(dl_sync_sim_host_access("host reads", data.words, DL_SYNC_SIM_READ));
  CHECK_SIM(dl_sync_sim_stream_synchronize(producer));
  return dl_sync_sim_race_count();
}

static void test_a_successful_event_query_orders_the_host(void **state) {
  (void)state;
  dl_sync_sim_set_jitter(41, 300);
  assert_int_equal(host_reads_after_event(1), 0);
}

static void test_negative_control_host_read_without_query_races(void **state) {
  (void)state;
  assert_int_equal(host_reads_after_event(0), 1);
}

/* --- host threads: creation and join order, annotations for other hand-offs ------------ */

/* C11, 7.26.5.1: "The completion of the thrd_create function synchronizes with the
   beginning of the execution of the new thread"; 7.26.5.6: "The termination of the other
   thread synchronizes with the completion of the thrd_join function"; POSIX (Base
   Definitions, Memory Synchronization) lists pthread_create() and pthread_join() among the
   functions that "synchronize memory with respect to other threads". The device's work a
   thread synchronized is complete for every thread ordered after it, as on a GPU. */

/* The host fills data with value + i (relaxed atomics where the test races on purpose). */
static void host_fill(pattern *data, int32_t value) {
  CHECK_SIM(dl_sync_sim_host_access("host writes", data->words, DL_SYNC_SIM_WRITE));
  for (int i = 0; i < PATTERN_WORDS; i++) {
    if (data->racy)
      __atomic_store_n(&data->words[i], value + i, __ATOMIC_RELAXED);
    else
      data->words[i] = value + i;
  }
}

/* How the threads below are made and joined: the plain calls, which the simulator sees by
   interposing on them, or its explicit ones (dl_sync_sim_thread_create and _join), which
   give the same edges where nothing is interposed on: on Windows, always. */
#ifdef _WIN32
static const int explicit_calls = 1;
#else
static int explicit_calls;
#endif

static int create_thread(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *),
                         void *arg) {
  return explicit_calls ? dl_sync_sim_thread_create(thread, attr, start, arg)
                        : pthread_create(thread, attr, start, arg);
}

static int join_thread(pthread_t thread, void **result) {
  return explicit_calls ? dl_sync_sim_thread_join(thread, result) : pthread_join(thread, result);
}

typedef struct reader {
  pthread_t thread;
  pattern *data;
  int32_t expected;
  int via_child; /* create another thread to read, and join it */
  int error;
} reader;

/* Launches a consumer on a stream of its own and synchronizes it, or (via_child) hands
   that to a thread of its own without touching the simulator itself. */
static void *read_on_a_new_stream(void *arg) {
  reader *r = arg;
  if (r->via_child) {
    reader child = *r;
    child.via_child = 0;
    r->error = create_thread(&child.thread, NULL, read_on_a_new_stream, &child);
    if (r->error == 0) r->error = join_thread(child.thread, NULL);
    if (r->error == 0) r->error = child.error;
    return NULL;
  }
  dl_sync_sim_stream *stream = NULL;
  r->error = dl_sync_sim_stream_create(&stream, DL_SYNC_SIM_STREAM_NON_BLOCKING);
  if (r->error == 0) r->error = launch_consumer(stream, r->data, r->expected);
  if (r->error == 0) r->error = dl_sync_sim_stream_synchronize(stream);
  return NULL;
}

/* The host writes data, before or after creating a thread that reads it on the device. */
static uint64_t read_on_a_created_thread(int write_before_create, int via_child) {
  static pattern data;
  data = (pattern){.racy = !write_before_create};
  reader r = {.data = &data, .expected = 10, .via_child = via_child};
  if (write_before_create) host_fill(&data, 10);
  assert_int_equal(create_thread(&r.thread, NULL, read_on_a_new_stream, &r), 0);
  if (!write_before_create) host_fill(&data, 10);
  assert_int_equal(join_thread(r.thread, NULL), 0);
  CHECK_SIM(r.error);
  /* the reader synchronized its stream, and this thread joined it */
  CHECK_SIM(dl_sync_sim_host_access("host reads mismatches", &data.mismatches, DL_SYNC_SIM_READ));
  if (write_before_create) assert_int_equal(data.mismatches, 0);
  return dl_sync_sim_race_count();
}

static void test_a_created_thread_is_ordered_after_its_creator(void **state) {
  (void)state;
  SKIP_UNLESS_THE_SIM_SEES_THREADS();
  dl_sync_sim_set_jitter(51, 200);
  assert_int_equal(read_on_a_created_thread(1, 0), 0);
  /* through a thread that never used the simulator itself */
  assert_int_equal(read_on_a_created_thread(1, 1), 0);
}

static void test_negative_control_a_write_after_pthread_create_is_unordered(void **state) {
  (void)state;
  SKIP_UNLESS_THE_SIM_SEES_THREADS();
  uint64_t races = read_on_a_created_thread(0, 0);
  print_races("host write after creating the reading thread");
  assert_int_equal(races, 1);
}

/* The explicit calls give the same edges in every build, a sanitized static copy and
   Windows included; the control is the same program with the write after the creation. */
static void test_the_explicit_calls_order_a_created_thread(void **state) {
  (void)state;
  dl_sync_sim_set_jitter(53, 200);
  assert_int_equal(read_on_a_created_thread(1, 0), 0);
  assert_int_equal(read_on_a_created_thread(1, 1), 0);
  uint64_t before = dl_sync_sim_race_count();
  uint64_t races = read_on_a_created_thread(0, 0) - before;
  print_races("explicit calls, host write after creating the reading thread");
  assert_int_equal(races, 1);
}

static int use_sim_with_explicit_calls(void **state) {
#ifndef _WIN32
  explicit_calls = 1;
#endif
  return use_sim(state);
}

/* Also after a failed assertion, which leaves the test early. */
static int leave_sim_with_plain_calls(void **state) {
#ifndef _WIN32
  explicit_calls = 0;
#endif
  return leave_sim(state);
}

typedef enum handoff {
  BY_JOIN,                   /* pthread_join of the synchronizing thread */
  BY_JOINING_ITS_CHILD,      /* pthread_join of a thread it created after synchronizing */
  BY_RELAXED_FLAG,           /* a relaxed store and load: C11 orders nothing */
  BY_JOINING_ANOTHER_THREAD, /* the flag, then pthread_join of a thread that did nothing */
  BY_RELEASE_FLAG,           /* a release store and an acquire load: C11 orders it */
  BY_RELEASE_FLAG_ANNOTATED, /* the same with dl_sync_sim_host_release / acquire */
} handoff;

typedef struct synchronizer {
  pthread_t thread;
  dl_sync_sim_stream *stream;
  handoff how;
  int error;
  int done;
  pthread_t child;
  int child_made;
} synchronizer;

static void *do_nothing(void *arg) {
  return arg;
}

static void *synchronize_then_signal(void *arg) {
  synchronizer *s = arg;
  s->error = dl_sync_sim_stream_synchronize(s->stream);
  if (s->error == 0 && s->how == BY_RELEASE_FLAG_ANNOTATED) s->error = dl_sync_sim_host_release(s);
  if (s->error == 0 && s->how == BY_JOINING_ITS_CHILD) {
    /* The child never uses the simulator: it passes on what it inherited. */
    s->error = create_thread(&s->child, NULL, do_nothing, NULL);
    __atomic_store_n(&s->child_made, 1, __ATOMIC_RELAXED); /* no order: only the joins */
  }
  __atomic_store_n(&s->done, 1,
                   s->how == BY_RELAXED_FLAG || s->how == BY_JOINING_ANOTHER_THREAD
                       ? __ATOMIC_RELAXED
                       : __ATOMIC_RELEASE);
  return NULL;
}

/* Another thread synchronizes the producer and hands over; the main thread then
   enqueues a consumer and reads on the host. */
static uint64_t consume_after_handoff(handoff how) {
  static pattern data;
  data = (pattern){.racy = how == BY_RELAXED_FLAG || how == BY_JOINING_ANOTHER_THREAD};
  /* Made before this thread uses the simulator (since the reset), the bystander inherits
     nothing and files no clock: the only one a join could take is the synchronizer's. */
  pthread_t bystander;
  if (how == BY_JOINING_ANOTHER_THREAD)
    assert_int_equal(create_thread(&bystander, NULL, do_nothing, NULL), 0);
  dl_sync_sim_stream *producer = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_stream *consumer = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  CHECK_SIM(launch_producer(producer, &data, 8));
  synchronizer s = {.stream = producer, .how = how};
  assert_int_equal(create_thread(&s.thread, NULL, synchronize_then_signal, &s), 0);
  if (how == BY_JOIN) {
    assert_int_equal(join_thread(s.thread, NULL), 0);
  } else if (how == BY_JOINING_ITS_CHILD) {
    while (!__atomic_load_n(&s.child_made, __ATOMIC_RELAXED)) sched_yield();
    assert_int_equal(join_thread(s.child, NULL), 0);
  } else {
    int order = how == BY_RELAXED_FLAG || how == BY_JOINING_ANOTHER_THREAD ? __ATOMIC_RELAXED
                                                                           : __ATOMIC_ACQUIRE;
    while (!__atomic_load_n(&s.done, order)) sched_yield();
  }
  if (how == BY_JOINING_ANOTHER_THREAD) {
    /* Give the synchronizing thread time to exit, so that its clock is there to be
       (wrongly) taken by the other join. The verdict does not depend on it. */
    nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
    assert_int_equal(join_thread(bystander, NULL), 0);
  }
  CHECK_SIM(s.error);
  if (how == BY_RELEASE_FLAG_ANNOTATED) CHECK_SIM(dl_sync_sim_host_acquire(&s));
  CHECK_SIM(launch_consumer(consumer, &data, 8));
  CHECK_SIM(dl_sync_sim_host_access("host reads", data.words, DL_SYNC_SIM_READ));
  uint64_t races = dl_sync_sim_race_count();
  if (how != BY_JOIN) assert_int_equal(join_thread(s.thread, NULL), 0);
  CHECK_SIM(dl_sync_sim_device_synchronize());
  assert_int_equal(data.mismatches, 0); /* the producer had finished */
  return races;
}

static void test_work_after_joining_a_synchronizing_thread_is_ordered(void **state) {
  (void)state;
  SKIP_UNLESS_THE_SIM_SEES_THREADS();
  assert_int_equal(consume_after_handoff(BY_JOIN), 0);
  /* transitively: the synchronizing thread creates one, which this thread joins */
  assert_int_equal(consume_after_handoff(BY_JOINING_ITS_CHILD), 0);
}

static void test_negative_control_a_relaxed_flag_hands_nothing_over(void **state) {
  (void)state;
  uint64_t races = consume_after_handoff(BY_RELAXED_FLAG);
  print_races("hand-off by a relaxed flag");
  assert_int_equal(races, 2); /* the consumer kernel and the host read */
}

static void test_negative_control_joining_another_thread_hands_nothing_over(void **state) {
  (void)state;
  SKIP_UNLESS_THE_SIM_SEES_THREADS();
  uint64_t races = consume_after_handoff(BY_JOINING_ANOTHER_THREAD);
  print_races("joined a thread other than the synchronizing one");
  assert_int_equal(races, 2);
}

/* Created threads exit while this one makes streams, whose workers the simulator creates
   with its lock held: a thread's exit hook takes no lock of the simulator's, so neither
   waits for the other (winpthreads runs the hook under a lock of its own, which its
   pthread_create takes too). Each thread's write is ordered before the read after its
   join. */
static void *write_and_exit(void *arg) {
  CHECK_SIM(dl_sync_sim_host_access("exiting thread writes", arg, DL_SYNC_SIM_WRITE));
  return NULL;
}

static void test_threads_exit_while_streams_are_made(void **state) {
  (void)state;
  SKIP_UNLESS_THE_SIM_SEES_THREADS();
  enum { BATCHES = 5, ROUNDS = 100 }; /* two agents a round: the thread and the stream */
  static int words[ROUNDS];
  for (int batch = 0; batch < BATCHES; batch++) {
    for (int i = 0; i < ROUNDS; i++) {
      pthread_t thread;
      assert_int_equal(create_thread(&thread, NULL, write_and_exit, &words[i]), 0);
      CHECK_SIM(dl_sync_sim_stream_destroy(new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING)));
      assert_int_equal(join_thread(thread, NULL), 0);
      CHECK_SIM(dl_sync_sim_host_access("host reads after the join", &words[i], DL_SYNC_SIM_READ));
    }
    assert_int_equal(dl_sync_sim_race_count(), 0);
    dl_sync_sim_reset(); /* the agents, for the next batch */
  }
}

/* A hand-off the simulator does not see (here an atomic flag; a mutex or a queue alike)
   needs dl_sync_sim_host_release / dl_sync_sim_host_acquire. */
static void test_an_annotated_hand_off_is_ordered(void **state) {
  (void)state;
  assert_int_equal(consume_after_handoff(BY_RELEASE_FLAG_ANNOTATED), 0);
}

static void test_negative_control_an_unannotated_hand_off_is_reported(void **state) {
  (void)state;
  uint64_t races = consume_after_handoff(BY_RELEASE_FLAG);
  print_races("release/acquire flag without the annotations");
  assert_int_equal(races, 2); /* stricter than the program needs: see docs/sim.md */
}

static void test_acquiring_a_key_never_released_orders_nothing(void **state) {
  (void)state;
  static pattern data = {.racy = 1};
  static int key;
  dl_sync_sim_stream *producer = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  CHECK_SIM(launch_producer(producer, &data, 9));
  CHECK_SIM(dl_sync_sim_host_acquire(&key));
  CHECK_SIM(dl_sync_sim_host_access("host reads", data.words, DL_SYNC_SIM_READ));
  CHECK_SIM(dl_sync_sim_device_synchronize());
  assert_int_equal(dl_sync_sim_race_count(), 1);
  assert_int_equal(dl_sync_sim_host_release(NULL), DL_SYNC_SIM_ERROR_INVALID_VALUE);
  assert_int_equal(dl_sync_sim_host_acquire(NULL), DL_SYNC_SIM_ERROR_INVALID_VALUE);
}

/* --- calls prohibited during capture, in every mode ---------------------------------- */

static void test_legacy_stream_sync_during_a_blocking_capture_is_invalid(void **state) {
  (void)state;
  static pattern data;
  for (size_t m = 0; m < 3; m++) {
    dl_sync_sim_stream *blocking = new_stream(DL_SYNC_SIM_STREAM_DEFAULT);
    CHECK_SIM(dl_sync_sim_stream_begin_capture(blocking, capture_modes[m]));
    CHECK_SIM(launch_producer(blocking, &data, 1));
    assert_int_equal(dl_sync_sim_stream_synchronize(DL_SYNC_SIM_STREAM_LEGACY),
                     DL_SYNC_SIM_ERROR_CAPTURE_IMPLICIT);
    assert_int_equal(end_capture(blocking), DL_SYNC_SIM_ERROR_CAPTURE_INVALIDATED);
  }
  /* the control: a non-blocking capture leaves the legacy stream usable (relaxed: the
     thread's own global-mode rules do not apply) */
  dl_sync_sim_stream *non_blocking = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  CHECK_SIM(dl_sync_sim_stream_begin_capture(non_blocking, DL_SYNC_SIM_CAPTURE_RELAXED));
  CHECK_SIM(launch_producer(non_blocking, &data, 1));
  CHECK_SIM(dl_sync_sim_stream_synchronize(DL_SYNC_SIM_STREAM_LEGACY));
  CHECK_SIM(end_capture(non_blocking));
}

static void test_device_sync_during_any_capture_of_the_device_is_invalid(void **state) {
  (void)state;
  static pattern data;
  for (size_t m = 0; m < 3; m++) {
    dl_sync_sim_stream *non_blocking = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
    CHECK_SIM(dl_sync_sim_stream_begin_capture(non_blocking, capture_modes[m]));
    CHECK_SIM(launch_producer(non_blocking, &data, 1));
    assert_int_equal(dl_sync_sim_device_synchronize(), DL_SYNC_SIM_ERROR_CAPTURE_UNSUPPORTED);
    assert_int_equal(end_capture(non_blocking), DL_SYNC_SIM_ERROR_CAPTURE_INVALIDATED);
  }
  /* the control: a relaxed capture on device 1 does not concern device 0 */
  CHECK_SIM(dl_sync_sim_set_device(1));
  dl_sync_sim_stream *on_device_1 = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  CHECK_SIM(dl_sync_sim_stream_begin_capture(on_device_1, DL_SYNC_SIM_CAPTURE_RELAXED));
  CHECK_SIM(launch_producer(on_device_1, &data, 1));
  CHECK_SIM(dl_sync_sim_set_device(0));
  CHECK_SIM(dl_sync_sim_device_synchronize());
  CHECK_SIM(end_capture(on_device_1));
}

typedef enum unsafe_call {
  PROHIBITED_CALL,
  EVENT_QUERY,
  EVENT_SYNCHRONIZE,
  STREAM_SYNCHRONIZE
} unsafe_call;

static int make_unsafe_call(unsafe_call call, dl_sync_sim_event *event,
                            dl_sync_sim_stream *stream) {
  switch (call) {
    case PROHIBITED_CALL:
      return dl_sync_sim_prohibited_call();
    case EVENT_QUERY:
      return dl_sync_sim_event_query(event);
    case EVENT_SYNCHRONIZE:
      return dl_sync_sim_event_synchronize(event);
    default:
      return dl_sync_sim_stream_synchronize(stream);
  }
}

/* The calling thread is in CUDA's default interaction mode. cudaThreadExchangeStreamCaptureMode,
   cudaStreamCaptureModeGlobal: "If the local thread has an ongoing capture sequence that
   was not initiated with cudaStreamCaptureModeRelaxed at cuStreamBeginCapture, or if any
   other thread has a concurrent capture sequence initiated with
   cudaStreamCaptureModeGlobal, this thread is prohibited from potentially unsafe API
   calls." Its own thread-local capture counts as much as its own global one. */
static void test_unsafe_calls_fail_in_the_callers_own_non_relaxed_capture(void **state) {
  (void)state;
  static pattern data;
  dl_sync_sim_stream *other = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_event *outside = new_event();
  CHECK_SIM(dl_sync_sim_event_record(outside, other, 0));
  for (unsafe_call call = PROHIBITED_CALL; call <= STREAM_SYNCHRONIZE; call++) {
    for (size_t m = 0; m < 2; m++) { /* global, thread-local */
      dl_sync_sim_stream *capturing = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
      CHECK_SIM(dl_sync_sim_stream_begin_capture(capturing, capture_modes[m]));
      CHECK_SIM(launch_producer(capturing, &data, 1));
      assert_int_equal(make_unsafe_call(call, outside, other),
                       DL_SYNC_SIM_ERROR_CAPTURE_UNSUPPORTED);
      int32_t status;
      CHECK_SIM(dl_sync_sim_stream_capture_info(capturing, &status, NULL, NULL));
      assert_int_equal(status, DL_SYNC_CAPTURE_INVALIDATED);
      assert_int_equal(end_capture(capturing), DL_SYNC_SIM_ERROR_CAPTURE_INVALIDATED);
    }
    /* the control: the caller's own relaxed capture does not prohibit the call */
    dl_sync_sim_stream *relaxed = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
    CHECK_SIM(dl_sync_sim_stream_begin_capture(relaxed, DL_SYNC_SIM_CAPTURE_RELAXED));
    CHECK_SIM(launch_producer(relaxed, &data, 1));
    CHECK_SIM(make_unsafe_call(call, outside, other));
    CHECK_SIM(end_capture(relaxed));
  }
}

/* A capture begun on a thread of its own, which stays alive until it ends the capture
   (only a relaxed capture may end on another thread). */
typedef struct foreign_capture {
  pthread_t thread;
  pthread_barrier_t begun, end;
  dl_sync_sim_stream *stream;
  int mode, ended;
} foreign_capture;

static void *capture_on_own_thread(void *arg) {
  foreign_capture *f = arg;
  int begun = dl_sync_sim_stream_begin_capture(f->stream, f->mode);
  pthread_barrier_wait(&f->begun);
  pthread_barrier_wait(&f->end);
  f->ended = begun == DL_SYNC_SIM_SUCCESS ? end_capture(f->stream) : begun;
  return NULL;
}

static void foreign_capture_begin(foreign_capture *f, int mode) {
  f->stream = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  f->mode = mode;
  pthread_barrier_init(&f->begun, NULL, 2);
  pthread_barrier_init(&f->end, NULL, 2);
  pthread_create(&f->thread, NULL, capture_on_own_thread, f);
  pthread_barrier_wait(&f->begun);
}

/* The error that ending the capture answered. */
static int foreign_capture_end(foreign_capture *f) {
  pthread_barrier_wait(&f->end);
  pthread_join(f->thread, NULL);
  pthread_barrier_destroy(&f->begun);
  pthread_barrier_destroy(&f->end);
  return f->ended;
}

/* cuThreadExchangeStreamCaptureMode: the calling thread's interaction mode decides which
   captures its potentially unsafe calls disturb. GLOBAL (the default): "If the local thread
   has an ongoing capture sequence that was not initiated with CU_STREAM_CAPTURE_MODE_RELAXED
   at cuStreamBeginCapture, or if any other thread has a concurrent capture sequence
   initiated with CU_STREAM_CAPTURE_MODE_GLOBAL, this thread is prohibited from potentially
   unsafe API calls"; THREAD_LOCAL: the local thread's own, and "Concurrent capture sequences
   in other threads are ignored"; RELAXED: "the local thread is not prohibited from
   potentially unsafe API calls". Every combination of the caller's mode, the capture's mode
   and whose capture it is; the global caller is the control. */
static void test_interaction_modes_decide_what_unsafe_calls_disturb(void **state) {
  (void)state;
  int mode = 7;
  assert_int_equal(dl_sync_sim_thread_exchange_capture_mode(&mode),
                   DL_SYNC_SIM_ERROR_INVALID_VALUE);
  assert_int_equal(dl_sync_sim_thread_exchange_capture_mode(NULL), DL_SYNC_SIM_ERROR_INVALID_VALUE);
  for (size_t caller = 0; caller < 3; caller++)
    for (size_t captured = 0; captured < 3; captured++)
      for (int own = 0; own < 2; own++) {
        int expected = caller == 2 ? 0 : own ? captured != 2 : caller == 0 && captured == 0;
        foreign_capture f = {0};
        dl_sync_sim_stream *stream = NULL;
        if (own) {
          stream = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
          CHECK_SIM(dl_sync_sim_stream_begin_capture(stream, capture_modes[captured]));
        } else {
          foreign_capture_begin(&f, capture_modes[captured]);
          stream = f.stream;
        }
        mode = capture_modes[caller];
        CHECK_SIM(dl_sync_sim_thread_exchange_capture_mode(&mode));
        assert_int_equal(mode, DL_SYNC_SIM_CAPTURE_GLOBAL); /* a thread starts global */
        int answered = dl_sync_sim_prohibited_call();
        CHECK_SIM(dl_sync_sim_thread_exchange_capture_mode(&mode));
        assert_int_equal(mode, capture_modes[caller]); /* the previous mode comes back */
        int32_t status;
        CHECK_SIM(dl_sync_sim_stream_capture_info(stream, &status, NULL, NULL));
        int ended = own ? end_capture(stream) : foreign_capture_end(&f);
        if (answered != (expected ? DL_SYNC_SIM_ERROR_CAPTURE_UNSUPPORTED : DL_SYNC_SIM_SUCCESS) ||
            status != (expected ? DL_SYNC_CAPTURE_INVALIDATED : DL_SYNC_CAPTURE_ACTIVE) ||
            ended != (expected ? DL_SYNC_SIM_ERROR_CAPTURE_INVALIDATED : DL_SYNC_SIM_SUCCESS))
          fail_msg("caller mode %d, %s capture of mode %d: answered %d, status %d, ended %d",
                   capture_modes[caller], own ? "its own" : "another thread's",
                   capture_modes[captured], answered, (int)status, ended);
      }
}

/* HIP's query rules (clr rocm-6.2.0 hipamd/src/hip_event.cpp ihipEventQuery and
   hipEventSynchronize): the event's last recording stream is read first; while it captures
   (a capture begun after the record), the query invalidates that capture and answers
   hipErrorCapturedEvent, even in the relaxed interaction mode; once it was destroyed the
   read is of freed memory, counted here. The control: CUDA's rules, under which both calls
   succeed in the relaxed mode. */
static void test_hip_query_rules_read_the_recording_stream(void **state) {
  (void)state;
  assert_int_equal(dl_sync_sim_set_query_rules(7), DL_SYNC_SIM_ERROR_INVALID_VALUE);
  for (int rules = DL_SYNC_SIM_QUERY_RULES_CUDA; rules <= DL_SYNC_SIM_QUERY_RULES_HIP; rules++) {
    CHECK_SIM(dl_sync_sim_set_query_rules(rules));
    int hip = rules == DL_SYNC_SIM_QUERY_RULES_HIP;
    for (int call = EVENT_QUERY; call <= EVENT_SYNCHRONIZE; call++) {
      dl_sync_sim_stream *s = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
      dl_sync_sim_event *e = new_event();
      CHECK_SIM(dl_sync_sim_event_record(e, s, 0));
      CHECK_SIM(dl_sync_sim_stream_synchronize(s));
      CHECK_SIM(dl_sync_sim_stream_begin_capture(s, DL_SYNC_SIM_CAPTURE_RELAXED));
      int mode = DL_SYNC_SIM_CAPTURE_RELAXED;
      CHECK_SIM(dl_sync_sim_thread_exchange_capture_mode(&mode));
      assert_int_equal(make_unsafe_call(call, e, s),
                       hip ? DL_SYNC_SIM_ERROR_CAPTURED_EVENT : DL_SYNC_SIM_SUCCESS);
      assert_int_equal(end_capture(s), hip ? DL_SYNC_SIM_ERROR_CAPTURE_INVALIDATED : 0);
      uint64_t reads = dl_sync_sim_destroyed_stream_reads();
      CHECK_SIM(dl_sync_sim_stream_destroy(s));
      assert_int_equal(make_unsafe_call(call, e, s),
                       hip ? DL_SYNC_SIM_ERROR_INVALID_HANDLE : DL_SYNC_SIM_SUCCESS);
      assert_int_equal(dl_sync_sim_destroyed_stream_reads() - reads, hip ? 1 : 0);
      CHECK_SIM(dl_sync_sim_thread_exchange_capture_mode(&mode));
      /* the legacy stream is exempt */
      CHECK_SIM(dl_sync_sim_event_record(e, DL_SYNC_SIM_STREAM_LEGACY, 0));
      CHECK_SIM(make_unsafe_call(call, e, NULL));
      CHECK_SIM(dl_sync_sim_event_destroy(e));
    }
  }
  CHECK_SIM(dl_sync_sim_set_query_rules(DL_SYNC_SIM_QUERY_RULES_CUDA));
}

static void test_legacy_capture_info_is_implicit_error_without_invalidating(void **state) {
  (void)state;
  int32_t status;
  for (size_t m = 0; m < 3; m++) {
    dl_sync_sim_stream *blocking = new_stream(DL_SYNC_SIM_STREAM_DEFAULT);
    CHECK_SIM(dl_sync_sim_stream_begin_capture(blocking, capture_modes[m]));
    assert_int_equal(
        dl_sync_sim_stream_capture_info(DL_SYNC_SIM_STREAM_LEGACY, &status, NULL, NULL),
        DL_SYNC_SIM_ERROR_CAPTURE_IMPLICIT);
    CHECK_SIM(end_capture(blocking));
  }
  /* A blocking stream forked into a non-blocking stream's capture captures too. */
  dl_sync_sim_stream *origin = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_stream *forked = new_stream(DL_SYNC_SIM_STREAM_DEFAULT);
  dl_sync_sim_event *fork = new_event(), *join = new_event();
  CHECK_SIM(dl_sync_sim_stream_begin_capture(origin, DL_SYNC_SIM_CAPTURE_RELAXED));
  CHECK_SIM(dl_sync_sim_stream_capture_info(DL_SYNC_SIM_STREAM_LEGACY, &status, NULL, NULL));
  assert_int_equal(status, DL_SYNC_CAPTURE_NONE); /* the control: only non-blocking */
  CHECK_SIM(dl_sync_sim_event_record(fork, origin, 0));
  CHECK_SIM(dl_sync_sim_stream_wait_event(forked, fork, 0));
  assert_int_equal(dl_sync_sim_stream_capture_info(DL_SYNC_SIM_STREAM_LEGACY, &status, NULL, NULL),
                   DL_SYNC_SIM_ERROR_CAPTURE_IMPLICIT);
  CHECK_SIM(dl_sync_sim_event_record(join, forked, 0));
  CHECK_SIM(dl_sync_sim_stream_wait_event(origin, join, 0));
  CHECK_SIM(end_capture(origin));
}

/* --- event queries and external flags ------------------------------------------------ */

typedef struct querier {
  pthread_t thread;
  dl_sync_sim_event *event;
  int error;
} querier;

static void *query_event(void *arg) {
  querier *q = arg;
  q->error = dl_sync_sim_event_query(q->event);
  return NULL;
}

/* Another thread (an allocator's) polls an event while this one captures. */
static void foreign_query_during_capture(int mode, int *query_error, int *end_error) {
  static pattern data;
  dl_sync_sim_stream *capturing = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_stream *other = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  querier q = {.event = new_event()};
  CHECK_SIM(dl_sync_sim_event_record(q.event, other, 0));
  CHECK_SIM(dl_sync_sim_stream_synchronize(other));
  CHECK_SIM(dl_sync_sim_stream_begin_capture(capturing, mode));
  CHECK_SIM(launch_producer(capturing, &data, 1));
  assert_int_equal(pthread_create(&q.thread, NULL, query_event, &q), 0);
  assert_int_equal(pthread_join(q.thread, NULL), 0);
  *query_error = q.error;
  *end_error = end_capture(capturing);
}

static void test_foreign_event_query_invalidates_a_global_capture(void **state) {
  (void)state;
  int query, end;
  foreign_query_during_capture(DL_SYNC_SIM_CAPTURE_GLOBAL, &query, &end);
  assert_int_equal(query, DL_SYNC_SIM_ERROR_CAPTURE_UNSUPPORTED);
  assert_int_equal(end, DL_SYNC_SIM_ERROR_CAPTURE_INVALIDATED);
  /* the controls: thread-local and relaxed captures do not concern other threads */
  foreign_query_during_capture(DL_SYNC_SIM_CAPTURE_THREAD_LOCAL, &query, &end);
  assert_int_equal(query, DL_SYNC_SIM_SUCCESS);
  assert_int_equal(end, DL_SYNC_SIM_SUCCESS);
  foreign_query_during_capture(DL_SYNC_SIM_CAPTURE_RELAXED, &query, &end);
  assert_int_equal(query, DL_SYNC_SIM_SUCCESS);
  assert_int_equal(end, DL_SYNC_SIM_SUCCESS);
}

static void test_query_of_an_event_recorded_in_the_capture_invalidates_it(void **state) {
  (void)state;
  dl_sync_sim_stream *capturing = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_event *captured = new_event(), *outside = new_event();
  CHECK_SIM(dl_sync_sim_event_record(outside, capturing, 0));
  CHECK_SIM(dl_sync_sim_stream_begin_capture(capturing, DL_SYNC_SIM_CAPTURE_RELAXED));
  CHECK_SIM(dl_sync_sim_event_query(outside)); /* the control: relaxed, recorded before */
  CHECK_SIM(dl_sync_sim_event_record(captured, capturing, 0));
  assert_int_equal(dl_sync_sim_event_query(captured), DL_SYNC_SIM_ERROR_CAPTURED_EVENT);
  int32_t status;
  CHECK_SIM(dl_sync_sim_stream_capture_info(capturing, &status, NULL, NULL));
  assert_int_equal(status, DL_SYNC_CAPTURE_INVALIDATED);
  assert_int_equal(end_capture(capturing), DL_SYNC_SIM_ERROR_CAPTURE_INVALIDATED);
}

/* cudaErrorCapturedEvent, as above; Programming Guide, CUDA Graphs, Prohibited and
   Unhandled Operations: "It is invalid to synchronize or query the execution status of a
   stream which is being captured or a captured event, because they do not represent items
   scheduled for execution"; Invalidation: "When an invalid operation is attempted during
   stream capture, any associated capture graphs are invalidated." */
static void test_synchronizing_an_event_recorded_in_the_capture_invalidates_it(void **state) {
  (void)state;
  dl_sync_sim_stream *capturing = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_event *captured = new_event(), *outside = new_event();
  CHECK_SIM(dl_sync_sim_event_record(outside, capturing, 0));
  CHECK_SIM(dl_sync_sim_stream_begin_capture(capturing, DL_SYNC_SIM_CAPTURE_RELAXED));
  CHECK_SIM(dl_sync_sim_event_synchronize(outside)); /* the control: recorded before */
  CHECK_SIM(dl_sync_sim_event_record(captured, capturing, 0));
  assert_int_equal(dl_sync_sim_event_synchronize(captured), DL_SYNC_SIM_ERROR_CAPTURED_EVENT);
  int32_t status;
  CHECK_SIM(dl_sync_sim_stream_capture_info(capturing, &status, NULL, NULL));
  assert_int_equal(status, DL_SYNC_CAPTURE_INVALIDATED);
  assert_int_equal(end_capture(capturing), DL_SYNC_SIM_ERROR_CAPTURE_INVALIDATED);
  /* A capture that ended leaves the event last recorded in it: still refused. */
  CHECK_SIM(dl_sync_sim_stream_begin_capture(capturing, DL_SYNC_SIM_CAPTURE_RELAXED));
  CHECK_SIM(dl_sync_sim_event_record(captured, capturing, 0));
  CHECK_SIM(end_capture(capturing));
  assert_int_equal(dl_sync_sim_event_synchronize(captured), DL_SYNC_SIM_ERROR_CAPTURED_EVENT);
  /* the control: recorded again outside a capture */
  CHECK_SIM(dl_sync_sim_event_record(captured, capturing, 0));
  CHECK_SIM(dl_sync_sim_event_synchronize(captured));
}

static void test_external_flags_outside_capture_are_invalid_values(void **state) {
  (void)state;
  dl_sync_sim_stream *stream = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_event *event = new_event();
  assert_int_equal(dl_sync_sim_event_record(event, stream, DL_SYNC_SIM_EVENT_RECORD_EXTERNAL),
                   DL_SYNC_SIM_ERROR_INVALID_VALUE);
  assert_int_equal(dl_sync_sim_stream_wait_event(stream, event, DL_SYNC_SIM_EVENT_WAIT_EXTERNAL),
                   DL_SYNC_SIM_ERROR_INVALID_VALUE);
  assert_int_equal(dl_sync_sim_event_record(event, stream, 4), DL_SYNC_SIM_ERROR_INVALID_VALUE);
  assert_int_equal(dl_sync_sim_stream_wait_event(stream, event, 4),
                   DL_SYNC_SIM_ERROR_INVALID_VALUE);
  /* the control: inside a capture both are external nodes */
  CHECK_SIM(dl_sync_sim_event_record(event, stream, 0));
  dl_sync_sim_stream *capturing = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  CHECK_SIM(dl_sync_sim_stream_begin_capture(capturing, DL_SYNC_SIM_CAPTURE_GLOBAL));
  CHECK_SIM(dl_sync_sim_stream_wait_event(capturing, event, DL_SYNC_SIM_EVENT_WAIT_EXTERNAL));
  CHECK_SIM(dl_sync_sim_event_record(event, capturing, DL_SYNC_SIM_EVENT_RECORD_EXTERNAL));
  dl_sync_sim_graph *graph;
  CHECK_SIM(dl_sync_sim_stream_end_capture(capturing, &graph));
  size_t waits, records;
  CHECK_SIM(dl_sync_sim_graph_count_nodes(graph, NULL, &waits, &records));
  assert_int_equal(waits, 1);
  assert_int_equal(records, 1);
  CHECK_SIM(dl_sync_sim_graph_destroy(graph));
}

static void test_isolation_error_invalidates_the_capture(void **state) {
  (void)state;
  static pattern data;
  dl_sync_sim_stream *outside = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_stream *capturing = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_event *event = new_event();
  CHECK_SIM(dl_sync_sim_event_record(event, outside, 0));
  CHECK_SIM(dl_sync_sim_stream_begin_capture(capturing, DL_SYNC_SIM_CAPTURE_RELAXED));
  assert_int_equal(dl_sync_sim_stream_wait_event(capturing, event, 0),
                   DL_SYNC_SIM_ERROR_CAPTURE_ISOLATION);
  int32_t status;
  CHECK_SIM(dl_sync_sim_stream_capture_info(capturing, &status, NULL, NULL));
  assert_int_equal(status, DL_SYNC_CAPTURE_INVALIDATED);
  assert_int_equal(launch_producer(capturing, &data, 1), DL_SYNC_SIM_ERROR_CAPTURE_INVALIDATED);
  dl_sync_sim_graph *graph = NULL;
  assert_int_equal(dl_sync_sim_stream_end_capture(capturing, &graph),
                   DL_SYNC_SIM_ERROR_CAPTURE_INVALIDATED);
  assert_null(graph);
}

/* --- structured race reports --------------------------------------------------------- */

static void test_races_can_be_read_as_structures(void **state) {
  (void)state;
  static pattern data = {.racy = 1};
  dl_sync_sim_stream *a = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_stream *b = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  CHECK_SIM(launch_producer(a, &data, 1));
  CHECK_SIM(launch_consumer(b, &data, 1));
  CHECK_SIM(dl_sync_sim_host_access("host writes", data.words, DL_SYNC_SIM_WRITE));
  CHECK_SIM(dl_sync_sim_device_synchronize());
  assert_int_equal(dl_sync_sim_race_count(), 3); /* consumer-producer, host with both */
  dl_sync_sim_race race;
  CHECK_SIM(dl_sync_sim_race_get(0, &race));
  assert_ptr_equal(race.buffer, data.words);
  assert_false(race.in_graph);
  assert_string_equal(race.earlier.name, "producer");
  assert_int_equal(race.earlier.mode, DL_SYNC_SIM_WRITE);
  assert_false(race.earlier.is_host);
  assert_string_equal(race.later.name, "consumer");
  assert_int_equal(race.later.mode, DL_SYNC_SIM_READ);
  assert_false(race.later.is_host);
  assert_int_not_equal(race.earlier.agent, race.later.agent);
  CHECK_SIM(dl_sync_sim_race_get(1, &race));
  assert_string_equal(race.later.name, "host writes");
  assert_true(race.later.is_host);
  assert_int_equal(dl_sync_sim_race_get(3, &race), DL_SYNC_SIM_ERROR_INVALID_VALUE);
  assert_int_equal(dl_sync_sim_race_get(0, NULL), DL_SYNC_SIM_ERROR_INVALID_VALUE);
  char report[512];
  dl_sync_sim_race_report(report, sizeof report);
  assert_non_null(strstr(report, "write by 'producer'"));
  assert_non_null(strstr(report, "(host thread"));
}

static void test_graph_races_are_marked_in_graph(void **state) {
  (void)state;
  static pattern data = {.racy = 1};
  dl_sync_sim_stream *a = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_stream *b = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_event *fork = new_event(), *join = new_event();
  CHECK_SIM(dl_sync_sim_stream_begin_capture(a, DL_SYNC_SIM_CAPTURE_GLOBAL));
  CHECK_SIM(dl_sync_sim_event_record(fork, a, 0));
  CHECK_SIM(dl_sync_sim_stream_wait_event(b, fork, 0));
  CHECK_SIM(launch_producer(a, &data, 1));
  CHECK_SIM(launch_consumer(b, &data, 1));
  CHECK_SIM(dl_sync_sim_event_record(join, b, 0));
  CHECK_SIM(dl_sync_sim_stream_wait_event(a, join, 0));
  CHECK_SIM(end_capture(a));
  dl_sync_sim_race race;
  CHECK_SIM(dl_sync_sim_race_get(0, &race));
  assert_true(race.in_graph);
  assert_ptr_equal(race.buffer, data.words);
  assert_string_equal(race.earlier.name, "producer");
  assert_string_equal(race.later.name, "consumer");
  assert_int_equal(race.earlier.mode, DL_SYNC_SIM_WRITE);
}

/* --- events and captures: the remaining rules ---------------------------------------- */

/* A wait binds to the record before it; recording again later does not move it. */
static uint64_t wait_then_rerecord(int read_second) {
  static pattern first, second;
  first = (pattern){.racy = 1};
  second = (pattern){.racy = 1};
  dl_sync_sim_stream *producer = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_stream *consumer = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_event *event = new_event();
  CHECK_SIM(launch_producer(producer, &first, 1));
  CHECK_SIM(dl_sync_sim_event_record(event, producer, 0));
  CHECK_SIM(dl_sync_sim_stream_wait_event(consumer, event, 0));
  CHECK_SIM(launch_producer(producer, &second, 2));
  CHECK_SIM(dl_sync_sim_event_record(event, producer, 0));
  CHECK_SIM(dl_sync_sim_event_destroy(event)); /* legal with the wait pending */
  if (read_second)
    CHECK_SIM(launch_consumer(consumer, &second, 2));
  else
    CHECK_SIM(launch_consumer(consumer, &first, 1));
  CHECK_SIM(dl_sync_sim_device_synchronize());
  return dl_sync_sim_race_count();
}

static void test_a_wait_binds_to_the_record_before_it(void **state) {
  (void)state;
  assert_int_equal(wait_then_rerecord(0), 0);
}

static void test_negative_control_a_later_record_does_not_move_the_wait(void **state) {
  (void)state;
  assert_int_equal(wait_then_rerecord(1), 1);
}

/* One stream reads twice; another writes after waiting on an event recorded after the
   first read or after the second. cudaEventRecord: "Captures in event the contents of
   stream at the time of this call ... Uses of stream after this call do not modify
   event": the first record does not cover the second read, and the checker must keep
   each agent's latest read, not its first. */
static uint64_t write_after_two_reads(int wait_for_second) {
  static pattern data;
  data = (pattern){.racy = !wait_for_second};
  dl_sync_sim_stream *reading = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_stream *writing = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_event *first = new_event(), *second = new_event();
  CHECK_SIM(launch_consumer(reading, &data, 0));
  CHECK_SIM(dl_sync_sim_event_record(first, reading, 0));
  CHECK_SIM(launch_consumer(reading, &data, 0));
  CHECK_SIM(dl_sync_sim_event_record(second, reading, 0));
  CHECK_SIM(dl_sync_sim_stream_wait_event(writing, wait_for_second ? second : first, 0));
  CHECK_SIM(launch_producer(writing, &data, 1));
  CHECK_SIM(dl_sync_sim_device_synchronize());
  return dl_sync_sim_race_count();
}

static void test_a_write_after_repeated_reads_is_ordered_after_the_last(void **state) {
  (void)state;
  assert_int_equal(write_after_two_reads(1), 0);
}

static void test_negative_control_a_write_after_the_first_of_two_reads_races(void **state) {
  (void)state;
  uint64_t races = write_after_two_reads(0);
  print_races("write ordered after the first of two reads only");
  assert_int_equal(races, 1);
}

static void test_joining_two_captures_is_a_merge_error(void **state) {
  (void)state;
  dl_sync_sim_stream *a = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_stream *b = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_event *event = new_event();
  CHECK_SIM(dl_sync_sim_stream_begin_capture(a, DL_SYNC_SIM_CAPTURE_RELAXED));
  CHECK_SIM(dl_sync_sim_stream_begin_capture(b, DL_SYNC_SIM_CAPTURE_RELAXED));
  CHECK_SIM(dl_sync_sim_event_record(event, a, 0));
  assert_int_equal(dl_sync_sim_stream_wait_event(b, event, 0), DL_SYNC_SIM_ERROR_CAPTURE_MERGE);
  assert_int_equal(end_capture(a), DL_SYNC_SIM_ERROR_CAPTURE_INVALIDATED);
  assert_int_equal(end_capture(b), DL_SYNC_SIM_ERROR_CAPTURE_INVALIDATED);
}

typedef struct ender {
  pthread_t thread;
  dl_sync_sim_stream *stream;
  int error;
} ender;

static void *end_on_another_thread(void *arg) {
  ender *e = arg;
  e->error = end_capture(e->stream);
  return NULL;
}

static int end_from_another_thread(int mode) {
  ender e = {.stream = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING)};
  CHECK_SIM(dl_sync_sim_stream_begin_capture(e.stream, mode));
  assert_int_equal(pthread_create(&e.thread, NULL, end_on_another_thread, &e), 0);
  assert_int_equal(pthread_join(e.thread, NULL), 0);
  if (e.error != DL_SYNC_SIM_SUCCESS) CHECK_SIM(end_capture(e.stream));
  return e.error;
}

static void test_only_a_relaxed_capture_may_end_on_another_thread(void **state) {
  (void)state;
  assert_int_equal(end_from_another_thread(DL_SYNC_SIM_CAPTURE_GLOBAL),
                   DL_SYNC_SIM_ERROR_CAPTURE_WRONG_THREAD);
  assert_int_equal(end_from_another_thread(DL_SYNC_SIM_CAPTURE_THREAD_LOCAL),
                   DL_SYNC_SIM_ERROR_CAPTURE_WRONG_THREAD);
  assert_int_equal(end_from_another_thread(DL_SYNC_SIM_CAPTURE_RELAXED), DL_SYNC_SIM_SUCCESS);
}

/* --- limits ----------------------------------------------------------------------- */

static int destroyed;
static void count_destroy(void *ptr) {
  (void)ptr;
  destroyed++;
}

/* cudaUserObjectRelease: "It is undefined behavior to release references not owned by
   the caller". The sim refuses a release of more references than are left (1) and keeps
   the object: its destructor runs once, when the last reference held goes. */
static void test_releasing_more_user_object_references_than_held_is_refused(void **state) {
  (void)state;
  static int object_data;
  dl_sync_sim_user_object *object;
  destroyed = 0;
  CHECK_SIM(dl_sync_sim_user_object_create(&object, &object_data, count_destroy, 2));
  assert_int_equal(dl_sync_sim_user_object_release(object, 3), DL_SYNC_SIM_ERROR_INVALID_VALUE);
  assert_int_equal(destroyed, 0);
  /* the control: releasing the two references held, one at a time */
  CHECK_SIM(dl_sync_sim_user_object_release(object, 1));
  assert_int_equal(destroyed, 0);
  CHECK_SIM(dl_sync_sim_user_object_release(object, 1));
  assert_int_equal(destroyed, 1);
}

/* Each executable graph's kernel nodes are agents; past the limit, instantiation fails
   and gives back the graph's user-object references it took. */
static void test_instantiating_past_the_agent_limit_fails_cleanly(void **state) {
  (void)state;
  static pattern data;
  dl_sync_sim_stream *capturing = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  CHECK_SIM(dl_sync_sim_stream_begin_capture(capturing, DL_SYNC_SIM_CAPTURE_GLOBAL));
  CHECK_SIM(launch_producer(capturing, &data, 1));
  dl_sync_sim_graph *graph;
  CHECK_SIM(dl_sync_sim_stream_end_capture(capturing, &graph));
  dl_sync_sim_user_object *object;
  destroyed = 0;
  CHECK_SIM(dl_sync_sim_user_object_create(&object, &data, count_destroy, 1));
  CHECK_SIM(dl_sync_sim_graph_retain_user_object(graph, object, 1));
  dl_sync_sim_graph_exec *exec = NULL;
  int error = DL_SYNC_SIM_SUCCESS, made = 0;
  while (error == DL_SYNC_SIM_SUCCESS && made < 1000) {
    error = dl_sync_sim_graph_instantiate(&exec, graph);
    made += error == DL_SYNC_SIM_SUCCESS;
  }
  print_message("%d executable graphs before the agent limit\n", made);
  assert_int_equal(error, DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION);
  assert_null(exec);
  assert_true(made > 200);
  CHECK_SIM(dl_sync_sim_graph_destroy(graph));
  assert_int_equal(destroyed, 0); /* the executable graphs still hold it */
  dl_sync_sim_reset();
  assert_int_equal(destroyed, 1);
}

/* --- teardown order with dlsync's event pool ----------------------------------------- */

static void export_once(void) {
  static pattern data;
  dl_sync_sim_stream *a = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_stream *b = new_stream(DL_SYNC_SIM_STREAM_NON_BLOCKING);
  CHECK_SIM(launch_producer(a, &data, 1));
  CHECK_DL(dl_sync_push_dep(sim_view(a, 0), sim_view(b, 0)));
  CHECK_SIM(launch_consumer(b, &data, 1));
}

static void test_shutdown_after_sim_reset_destroys_no_live_event(void **state) {
  (void)state;
  export_once(); /* the pool now keeps a simulated event */
  dl_sync_sim_reset();
  dl_sync_sim_event *fresh = new_event(); /* may reuse an old event's memory */
  CHECK_DL(dl_sync_shutdown());
  CHECK_SIM(dl_sync_sim_event_query(fresh)); /* still valid */
  CHECK_SIM(dl_sync_sim_event_destroy(fresh));
  /* and the documented order */
  export_once();
  CHECK_DL(dl_sync_shutdown());
  dl_sync_sim_reset();
}

#define SIM_TEST(name) cmocka_unit_test_setup_teardown(name, use_sim, leave_sim)

int main(void) {
  const struct CMUnitTest tests[] = {
      SIM_TEST(test_event_record_on_another_devices_stream_is_invalid_handle),
      SIM_TEST(test_launch_on_a_stream_of_another_device_is_invalid_handle),
      SIM_TEST(test_a_wait_may_cross_devices),
      SIM_TEST(test_negative_control_cross_device_consumer_without_wait_races),
      SIM_TEST(test_push_dep_between_the_legacy_streams_of_two_devices_orders),
      SIM_TEST(test_negative_control_legacy_streams_of_two_devices_are_not_one),
      SIM_TEST(test_external_wait_node_orders_its_dependents),
      SIM_TEST(test_negative_control_external_wait_does_not_order_earlier_nodes),
      SIM_TEST(test_external_record_node_captures_its_dependencies),
      SIM_TEST(test_negative_control_external_record_does_not_cover_later_nodes),
      SIM_TEST(test_launching_a_graph_waiting_on_a_captured_event_fails),
      SIM_TEST(test_launches_of_one_executable_graph_are_ordered_across_streams),
      SIM_TEST(test_negative_control_two_executable_graphs_on_two_streams_race),
      SIM_TEST(test_a_successful_event_query_orders_the_host),
      SIM_TEST(test_negative_control_host_read_without_query_races),
      SIM_TEST(test_a_created_thread_is_ordered_after_its_creator),
      SIM_TEST(test_negative_control_a_write_after_pthread_create_is_unordered),
      cmocka_unit_test_setup_teardown(test_the_explicit_calls_order_a_created_thread,
                                      use_sim_with_explicit_calls, leave_sim_with_plain_calls),
      SIM_TEST(test_work_after_joining_a_synchronizing_thread_is_ordered),
      SIM_TEST(test_negative_control_a_relaxed_flag_hands_nothing_over),
      SIM_TEST(test_negative_control_joining_another_thread_hands_nothing_over),
      SIM_TEST(test_threads_exit_while_streams_are_made),
      SIM_TEST(test_an_annotated_hand_off_is_ordered),
      SIM_TEST(test_negative_control_an_unannotated_hand_off_is_reported),
      SIM_TEST(test_acquiring_a_key_never_released_orders_nothing),
      SIM_TEST(test_legacy_stream_sync_during_a_blocking_capture_is_invalid),
      SIM_TEST(test_device_sync_during_any_capture_of_the_device_is_invalid),
      SIM_TEST(test_unsafe_calls_fail_in_the_callers_own_non_relaxed_capture),
      SIM_TEST(test_interaction_modes_decide_what_unsafe_calls_disturb),
      SIM_TEST(test_hip_query_rules_read_the_recording_stream),
      SIM_TEST(test_legacy_capture_info_is_implicit_error_without_invalidating),
      SIM_TEST(test_foreign_event_query_invalidates_a_global_capture),
      SIM_TEST(test_query_of_an_event_recorded_in_the_capture_invalidates_it),
      SIM_TEST(test_synchronizing_an_event_recorded_in_the_capture_invalidates_it),
      SIM_TEST(test_external_flags_outside_capture_are_invalid_values),
      SIM_TEST(test_isolation_error_invalidates_the_capture),
      SIM_TEST(test_races_can_be_read_as_structures),
      SIM_TEST(test_graph_races_are_marked_in_graph),
      SIM_TEST(test_a_wait_binds_to_the_record_before_it),
      SIM_TEST(test_negative_control_a_later_record_does_not_move_the_wait),
      SIM_TEST(test_a_write_after_repeated_reads_is_ordered_after_the_last),
      SIM_TEST(test_negative_control_a_write_after_the_first_of_two_reads_races),
      SIM_TEST(test_joining_two_captures_is_a_merge_error),
      SIM_TEST(test_only_a_relaxed_capture_may_end_on_another_thread),
      SIM_TEST(test_releasing_more_user_object_references_than_held_is_refused),
      SIM_TEST(test_instantiating_past_the_agent_limit_fails_cleanly),
      SIM_TEST(test_shutdown_after_sim_reset_destroys_no_live_event),
  };
  return cmocka_run_group_tests_name("sim_fidelity", tests, NULL, NULL);
}
