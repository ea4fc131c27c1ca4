/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a deferred release watches (sync/release_watch.c, docs/release.md) on the simulated
 * device under HIP's query rules, where a query reads the event's last recording stream:
 * - a capture the consumer's stream begins at any moment after the release survives every
 *   poll (the event asked is on dlsync's own stream); the control, the same backend without
 *   dlsync's own stream, breaks it;
 * - a release whose consumer stream was destroyed is finished once its work completed, and
 *   then costs no runtime call more, however many polls follow;
 * - a release onto a per-thread default stream is finished by the release thread;
 * - a capture's refusal is asked again, any other failure is final, and what shutdown and a
 *   second release say of them is true;
 * - a release onto the legacy stream while a blocking stream captures is refused, the tensor
 *   the caller's.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "dlsync/dlsync.h"
#include "ordering/ordering.h"
#include "support/error_message.h"

typedef struct tensor {
  DLManagedTensorVersioned managed;
  atomic_int deleted;
} tensor;

static void deleter(DLManagedTensorVersioned *t) {
  tensor *owner = (tensor *)((char *)t - offsetof(tensor, managed));
  atomic_fetch_add(&owner->deleted, 1);
}

static void make(tensor *t) {
  memset(t, 0, sizeof *t);
  t->managed = (DLManagedTensorVersioned){.version = {1, 3}, .deleter = deleter};
  t->managed.dl_tensor.device = (DLDevice){kDLCUDA, 0};
}

static dl_sync_sim_stream *new_stream(void) {
  dl_sync_sim_stream *stream = NULL;
  CHECK_SIM(dl_sync_sim_stream_create(&stream, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  return stream;
}

static int capture_status(dl_sync_sim_stream *stream) {
  int32_t status = -1;
  CHECK_SIM(dl_sync_sim_stream_capture_info(stream, &status, NULL, NULL));
  return status;
}

static int end_capture(dl_sync_sim_stream *stream) {
  dl_sync_sim_graph *graph = NULL;
  int error = dl_sync_sim_stream_end_capture(stream, &graph);
  if (graph != NULL) CHECK_SIM(dl_sync_sim_graph_destroy(graph));
  return error;
}

/* The simulator's backend, each runtime call counted; without_own_stream: the control, which
   asks about the event recorded on the consumer's stream. */
static dl_sync_backend counted;
static atomic_long calls;

static int counted_query(void *ctx, void *event, int *complete) {
  atomic_fetch_add(&calls, 1);
  return dl_sync_sim_backend()->event_query(ctx, event, complete);
}

static int counted_synchronize(void *ctx, void *event) {
  atomic_fetch_add(&calls, 1);
  return dl_sync_sim_backend()->event_synchronize(ctx, event);
}

static int counted_capture_info(void *ctx, void *stream, dl_sync_capture_info *out) {
  atomic_fetch_add(&calls, 1);
  return dl_sync_sim_backend()->capture_info(ctx, stream, out);
}

static int counted_check(void *ctx, void *stream) {
  atomic_fetch_add(&calls, 1);
  return dl_sync_sim_backend()->own_stream_check(ctx, stream);
}

/* dlsync's own streams made and destroyed. */
static atomic_int own_made, own_destroyed;

static int counted_create(void *ctx, void **stream) {
  int code = dl_sync_sim_backend()->own_stream_create(ctx, stream);
  if (code == 0) atomic_fetch_add(&own_made, 1);
  return code;
}

static int counted_destroy(void *ctx, void *stream) {
  atomic_fetch_add(&own_destroyed, 1);
  return dl_sync_sim_backend()->own_stream_destroy(ctx, stream);
}

static void use_counted(int without_own_stream) {
  counted = *dl_sync_sim_backend();
  counted.event_query = counted_query;
  counted.event_synchronize = counted_synchronize;
  counted.capture_info = counted_capture_info;
  counted.own_stream_check = counted_check;
  counted.own_stream_create = counted_create;
  counted.own_stream_destroy = counted_destroy;
  atomic_store(&own_made, 0);
  atomic_store(&own_destroyed, 0);
  if (without_own_stream) {
    counted.own_stream_create = NULL;
    counted.own_stream_check = NULL;
    counted.own_stream_destroy = NULL;
  }
  atomic_store(&calls, 0);
  CHECK_DL(dl_sync_set_backend(kDLCUDA, &counted));
}

static int setup(void **state) {
  use_sim(state);
  CHECK_SIM(dl_sync_sim_set_query_rules(DL_SYNC_SIM_QUERY_RULES_HIP));
  return 0;
}

static int teardown(void **state) {
  open_gate();
  dl_sync_release_thread_stop();
  dl_sync_shutdown();
  return leave_sim(state);
}

/* --- a capture begun between any check and the query ----------------------------------- */

/* Another thread begins a capture on the consumer's stream at the worst moment: right
   before the poll's query, after anything the poll may have checked. */
static dl_sync_sim_stream *capture_target;
static atomic_int captures_begun;

static void begin_capture_on_target(void) {
  if (capture_target != NULL && atomic_exchange(&captures_begun, 1) == 0)
    CHECK_SIM(dl_sync_sim_stream_begin_capture(capture_target, DL_SYNC_SIM_CAPTURE_RELAXED));
}

static int query_after_a_capture_begins(void *ctx, void *event, int *complete) {
  begin_capture_on_target();
  return counted_query(ctx, event, complete);
}

static int one_racing_release(int without_own_stream, int *finished) {
  use_counted(without_own_stream);
  counted.event_query = query_after_a_capture_begins;
  dl_sync_sim_stream *b = new_stream();
  tensor t;
  make(&t);
  assert_int_equal(dl_sync_tensor_release(&t.managed, sim_view(b, 0)), DL_SYNC_RELEASE_DEFERRED);
  CHECK_SIM(dl_sync_sim_device_synchronize());
  atomic_store(&captures_begun, 0);
  capture_target = b;
  dl_sync_release_poll();
  capture_target = NULL;
  int survived = capture_status(b) == DL_SYNC_CAPTURE_ACTIVE;
  assert_int_equal(end_capture(b) == DL_SYNC_SIM_SUCCESS, survived);
  dl_sync_release_poll();
  *finished = atomic_load(&t.deleted);
  dl_sync_shutdown(); /* whatever the control left */
  CHECK_SIM(dl_sync_sim_stream_destroy(b));
  return survived;
}

static void test_a_capture_begun_right_before_the_query_survives(void **state) {
  (void)state;
  int finished = 0;
  assert_true(one_racing_release(0, &finished));
  assert_int_equal(finished, 1);
  /* the control: the event on the consumer's stream, asked while it captures */
  assert_false(one_racing_release(1, &finished));
}

/* A capture begun on the consumer's stream right before the release's record there takes
   that record into it, and a wait for a captured event pulls the waiting stream into the
   capture (CUDA Programming Guide, Cross-stream Dependencies and Events): the release goes
   to the capture's graph, and dlsync's own stream stays out of the capture (which ends
   without a stream left unjoined). */
static int record_after_a_capture_begins(void *ctx, void *event, void *stream) {
  if (stream == capture_target) begin_capture_on_target();
  return dl_sync_sim_backend()->event_record(ctx, event, stream);
}

static void test_a_capture_begun_right_before_the_record_keeps_the_own_stream_out(void **state) {
  (void)state;
  use_counted(0);
  counted.event_record = record_after_a_capture_begins;
  dl_sync_sim_stream *b = new_stream(), *c = new_stream();
  tensor t, later;
  make(&t);
  make(&later);
  atomic_store(&captures_begun, 0);
  capture_target = b;
  assert_int_equal(dl_sync_tensor_release(&t.managed, sim_view(b, 0)), DL_SYNC_RELEASE_GRAPH);
  capture_target = NULL;
  assert_int_equal(atomic_load(&captures_begun), 1);
  assert_int_equal(dl_sync_tensor_release(&later.managed, sim_view(c, 0)),
                   DL_SYNC_RELEASE_DEFERRED);
  assert_int_equal(capture_status(b), DL_SYNC_CAPTURE_ACTIVE);
  /* no stream of dlsync's joined it: the capture ends (the graph destroyed with it) */
  assert_int_equal(end_capture(b), DL_SYNC_SIM_SUCCESS);
  CHECK_SIM(dl_sync_sim_device_synchronize());
  assert_int_equal(dl_sync_release_poll(), 2);
  assert_int_equal(atomic_load(&later.deleted), 1);
  assert_int_equal(atomic_load(&t.deleted), 1);
  CHECK_SIM(dl_sync_sim_stream_destroy(b));
  CHECK_SIM(dl_sync_sim_stream_destroy(c));
}

/* --- what a runtime answer is ---------------------------------------------------------- */

/* A query refused by a capture (ECAPTURE) is a "not now": asked again at the next poll and
   finished then. Any other failure is final (test_a_failed_query_is_asked_once_and_holds_none_up
   in test_release_safety.c). */
static atomic_int refusals_left;

static int query_refused_by_a_capture(void *ctx, void *event, int *complete) {
  if (atomic_fetch_sub(&refusals_left, 1) > 0) {
    atomic_fetch_add(&calls, 1);
    *complete = 0;
    return DL_SYNC_SIM_ERROR_CAPTURED_EVENT;
  }
  return counted_query(ctx, event, complete);
}

static int synchronize_refused_by_a_capture(void *ctx, void *event) {
  if (atomic_fetch_sub(&refusals_left, 1) > 0) {
    atomic_fetch_add(&calls, 1);
    return DL_SYNC_SIM_ERROR_CAPTURED_EVENT;
  }
  return counted_synchronize(ctx, event);
}

static void test_a_capture_refusal_is_asked_again(void **state) {
  (void)state;
  use_counted(0);
  counted.event_query = query_refused_by_a_capture;
  atomic_store(&refusals_left, 2);
  dl_sync_sim_stream *b = new_stream();
  tensor t;
  make(&t);
  assert_int_equal(dl_sync_tensor_release(&t.managed, sim_view(b, 0)), DL_SYNC_RELEASE_DEFERRED);
  CHECK_SIM(dl_sync_sim_device_synchronize());
  assert_int_equal(dl_sync_release_poll(), 0);
  assert_int_equal(dl_sync_release_poll(), 0);
  assert_int_equal(dl_sync_release_pending(), 1);
  assert_int_equal(dl_sync_release_poll(), 1);
  assert_int_equal(atomic_load(&t.deleted), 1);
  CHECK_DL(dl_sync_shutdown());
}

/* Shutdown names the failed releases and those still waiting, each with its count; a
   tensor whose release failed, released again, is told that its deleter never runs. */
static void *failing_event;

static int query_failing_one_refusing_others(void *ctx, void *event, int *complete) {
  (void)ctx;
  *complete = 0;
  atomic_fetch_add(&calls, 1);
  if (failing_event == NULL) failing_event = event;
  return event == failing_event ? DL_SYNC_SIM_ERROR_INVALID_HANDLE
                                : DL_SYNC_SIM_ERROR_CAPTURED_EVENT;
}

static int synchronize_refused(void *ctx, void *event) {
  int complete = 0;
  return query_failing_one_refusing_others(ctx, event, &complete);
}

static void test_shutdown_names_failed_and_waiting_releases(void **state) {
  (void)state;
  use_counted(0);
  counted.event_query = query_failing_one_refusing_others;
  counted.event_synchronize = synchronize_refused;
  failing_event = NULL;
  dl_sync_sim_stream *b = new_stream(), *c = new_stream();
  tensor dead, waiting[2];
  make(&dead);
  assert_int_equal(dl_sync_tensor_release(&dead.managed, sim_view(b, 0)), DL_SYNC_RELEASE_DEFERRED);
  CHECK_SIM(dl_sync_sim_device_synchronize());
  assert_int_equal(dl_sync_release_poll(), 0); /* the first event asked fails */
  for (int i = 0; i < 2; i++) {
    make(&waiting[i]);
    assert_int_equal(dl_sync_tensor_release(&waiting[i].managed, sim_view(c, 0)),
                     DL_SYNC_RELEASE_DEFERRED);
  }
  assert_int_equal(dl_sync_release_poll(), 0);
  assert_int_equal(dl_sync_tensor_release(&dead.managed, sim_view(b, 0)), DL_SYNC_EINVAL);
  assert_error_mentions("that release failed");
  assert_error_mentions("its deleter never runs");
  assert_int_equal(dl_sync_tensor_release(&waiting[0].managed, sim_view(c, 0)), DL_SYNC_EINVAL);
  assert_error_mentions("its deleter runs once the consumer's work on it completed");
  assert_int_equal(dl_sync_shutdown(), DL_SYNC_EBACKEND);
  assert_error_mentions("1 releases could not be finished");
  assert_error_mentions("2 releases still wait");
  for (int i = 0; i < 2; i++) assert_int_equal(atomic_load(&waiting[i].deleted), 0);
  /* the capture is over: they are finished */
  counted.event_query = counted_query;
  counted.event_synchronize = counted_synchronize;
  CHECK_SIM(dl_sync_sim_device_synchronize());
  assert_int_equal(dl_sync_release_poll(), 2);
  CHECK_DL(dl_sync_shutdown());
  assert_int_equal(atomic_load(&dead.deleted), 0);
}

/* A shutdown that leaves releases waiting keeps the own stream they wait on; the poll that
   finishes the last of them destroys it (no runtime stream of dlsync's outlives its
   releases), and one with no release waiting on it goes with the shutdown. */
static void test_an_own_stream_kept_by_shutdown_goes_with_its_last_release(void **state) {
  (void)state;
  use_counted(0);
  counted.event_query = query_refused_by_a_capture;
  counted.event_synchronize = synchronize_refused_by_a_capture;
  atomic_store(&refusals_left, 1 << 20);
  dl_sync_sim_stream *b = new_stream();
  tensor t;
  make(&t);
  assert_int_equal(dl_sync_tensor_release(&t.managed, sim_view(b, 0)), DL_SYNC_RELEASE_DEFERRED);
  CHECK_SIM(dl_sync_sim_device_synchronize());
  assert_int_equal(dl_sync_shutdown(), DL_SYNC_EBACKEND);
  assert_error_mentions("1 releases still wait");
  assert_int_equal(atomic_load(&own_made), 1);
  assert_int_equal(atomic_load(&own_destroyed), 0); /* the release still waits on it */
  atomic_store(&refusals_left, 0);                  /* the capture is over */
  assert_int_equal(dl_sync_release_poll(), 1);
  assert_int_equal(atomic_load(&t.deleted), 1);
  assert_int_equal(atomic_load(&own_destroyed), 1);
  /* a shutdown with no release waiting destroys the stream it made */
  make(&t);
  assert_int_equal(dl_sync_tensor_release(&t.managed, sim_view(b, 0)), DL_SYNC_RELEASE_DEFERRED);
  CHECK_DL(dl_sync_shutdown());
  assert_int_equal(atomic_load(&t.deleted), 1);
  assert_int_equal(atomic_load(&own_made), 2);
  assert_int_equal(atomic_load(&own_destroyed), 2);
  CHECK_SIM(dl_sync_sim_stream_destroy(b));
}

/* --- a destroyed consumer stream -------------------------------------------------------- */

/* Its release is finished once its work completed (it is never probed), and then polls
   make no runtime call at all: 1000 polls, at most the two calls of the first (the own
   stream's check and its event's query). */
static void test_a_destroyed_consumer_stream_costs_nothing_after(void **state) {
  (void)state;
  use_counted(0);
  dl_sync_sim_stream *b = new_stream();
  CHECK_SIM(launch_gate(b));
  tensor t;
  make(&t);
  assert_int_equal(dl_sync_tensor_release(&t.managed, sim_view(b, 0)), DL_SYNC_RELEASE_DEFERRED);
  CHECK_SIM(dl_sync_sim_stream_destroy(b));
  open_gate();
  CHECK_SIM(dl_sync_sim_device_synchronize());
  uint64_t reads = dl_sync_sim_destroyed_stream_reads();
  atomic_store(&calls, 0);
  int finished = 0;
  for (int i = 0; i < 1000; i++) finished += dl_sync_release_poll();
  print_message("1000 polls: %ld runtime calls\n", atomic_load(&calls));
  assert_int_equal(finished, 1);
  assert_int_equal(atomic_load(&t.deleted), 1);
  assert_true(atomic_load(&calls) <= 2);
  assert_int_equal(dl_sync_sim_destroyed_stream_reads(), reads);
  assert_int_equal(dl_sync_release_pending(), 0);
}

/* --- per-thread default streams --------------------------------------------------------- */

/* A worker releases onto its own per-thread stream and exits without a poll: the release
   thread finishes it. */
static tensor worker_tensor;
static int worker_status;

static void *release_and_leave(void *arg) {
  (void)arg;
  make(&worker_tensor);
  worker_status =
      dl_sync_tensor_release(&worker_tensor.managed, sim_view(DL_SYNC_SIM_STREAM_PER_THREAD, 0));
  return NULL;
}

static void test_the_release_thread_finishes_a_per_thread_release(void **state) {
  (void)state;
  CHECK_DL(dl_sync_release_thread_start());
  pthread_t worker;
  pthread_create(&worker, NULL, release_and_leave, NULL);
  pthread_join(worker, NULL);
  assert_int_equal(worker_status, DL_SYNC_RELEASE_DEFERRED);
  struct timespec ms = {0, 1000000};
  for (int i = 0; i < 30000 && atomic_load(&worker_tensor.deleted) == 0; i++) nanosleep(&ms, NULL);
  assert_int_equal(atomic_load(&worker_tensor.deleted), 1);
  CHECK_DL(dl_sync_release_thread_stop());
  CHECK_DL(dl_sync_shutdown());
}

/* --- a release the runtime refuses ---------------------------------------------------- */

/* The legacy default stream while a blocking stream of its device captures: the runtime
   refuses to say whether the legacy stream captures (cudaErrorStreamCaptureImplicit), so
   the release is refused (DL_SYNC_ECAPTURE), the tensor the caller's, the capture intact;
   after the capture the same tensor is released as any other (docs/release.md's list). */
static void test_the_legacy_stream_beside_a_blocking_capture_is_refused(void **state) {
  (void)state;
  dl_sync_sim_stream *blocking = NULL;
  CHECK_SIM(dl_sync_sim_stream_create(&blocking, DL_SYNC_SIM_STREAM_DEFAULT));
  CHECK_SIM(dl_sync_sim_stream_begin_capture(blocking, DL_SYNC_SIM_CAPTURE_RELAXED));
  tensor t;
  make(&t);
  assert_int_equal(dl_sync_tensor_release(&t.managed, sim_view(DL_SYNC_SIM_STREAM_LEGACY, 0)),
                   DL_SYNC_ECAPTURE);
  assert_int_equal(atomic_load(&t.deleted), 0);
  assert_int_equal(dl_sync_release_pending(), 0);
  assert_int_equal(capture_status(blocking), DL_SYNC_CAPTURE_ACTIVE);
  assert_int_equal(end_capture(blocking), DL_SYNC_SIM_SUCCESS);
  assert_int_equal(dl_sync_tensor_release(&t.managed, sim_view(DL_SYNC_SIM_STREAM_LEGACY, 0)),
                   DL_SYNC_RELEASE_DEFERRED);
  CHECK_SIM(dl_sync_sim_device_synchronize());
  assert_int_equal(dl_sync_release_poll(), 1);
  assert_int_equal(atomic_load(&t.deleted), 1);
  CHECK_SIM(dl_sync_sim_stream_destroy(blocking));
}

#define WATCH_TEST(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      WATCH_TEST(test_a_capture_begun_right_before_the_query_survives),
      WATCH_TEST(test_a_capture_begun_right_before_the_record_keeps_the_own_stream_out),
      WATCH_TEST(test_a_capture_refusal_is_asked_again),
      WATCH_TEST(test_shutdown_names_failed_and_waiting_releases),
      WATCH_TEST(test_an_own_stream_kept_by_shutdown_goes_with_its_last_release),
      WATCH_TEST(test_a_destroyed_consumer_stream_costs_nothing_after),
      WATCH_TEST(test_the_release_thread_finishes_a_per_thread_release),
      WATCH_TEST(test_the_legacy_stream_beside_a_blocking_capture_is_refused),
  };
  return cmocka_run_group_tests_name("release_watch", tests, NULL, NULL);
}
