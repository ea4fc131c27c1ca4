/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The safety rules of the pending-release path (dlsync/release.h, docs/release.md) on the
 * simulated device, under CUDA's query rules and HIP's (dl_sync_sim_set_query_rules):
 * - finishing a release never breaks a capture: not another thread's (global, thread-local,
 *   relaxed), not the caller's own on another stream, not one its consumer stream began
 *   after the release; never reads a consumer stream destroyed since;
 * - a deleter runs only where the contract names it: a deleter that takes a lock its
 *   caller holds deadlocks no other call;
 * - a release whose completion cannot be asked is asked once, holds no other up, and
 *   dl_sync_shutdown reports it;
 * - a poll asks one event per consumer stream while nothing completes, however deep;
 * - a tensor a graph refused is the caller's again, whenever the user object goes;
 * - the release thread finishes releases without a poll, and stops.
 * Each rule has its negative control: a backend without the rule (queries in the global
 * interaction mode, no stream of dlsync's own under HIP's rules) breaks what the rule
 * protects.
 */
#define _POSIX_C_SOURCE 200809L /* pthread barriers, nanosleep */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifndef _WIN32 /* fork */
#include <sys/wait.h>
#include <unistd.h>
#endif
#include <cmocka.h>

#include "dlsync/dlsync.h"
#include "ordering/ordering.h"

#include "support/sanitizers.h"
#include "support/error_message.h"

/* --- tensors and streams -------------------------------------------------------------- */

typedef struct tensor {
  DLManagedTensorVersioned managed;
  atomic_int deleted;
  pthread_mutex_t *lock; /* taken by the deleter, when set */
} tensor;

static void deleter(DLManagedTensorVersioned *t) {
  tensor *owner = (tensor *)((char *)t - offsetof(tensor, managed));
  if (owner->lock != NULL) pthread_mutex_lock(owner->lock);
  atomic_fetch_add(&owner->deleted, 1);
  if (owner->lock != NULL) pthread_mutex_unlock(owner->lock);
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

/* --- the control backend: the simulator's, without the rules under test --------------- */

static dl_sync_backend control;
static atomic_long queries;

/* A query as a backend without the relaxed interaction mode makes it. */
static int query_as_is(void *ctx, void *event, int *complete) {
  (void)ctx;
  atomic_fetch_add(&queries, 1);
  int error = dl_sync_sim_event_query(event);
  *complete = error == DL_SYNC_SIM_SUCCESS;
  return error == DL_SYNC_SIM_ERROR_NOT_READY ? 0 : error;
}

static int synchronize_as_is(void *ctx, void *event) {
  (void)ctx;
  return dl_sync_sim_event_synchronize(event);
}

/* The simulator's own backend, its queries counted. */
static dl_sync_backend counted;

static int counted_query(void *ctx, void *event, int *complete) {
  atomic_fetch_add(&queries, 1);
  return dl_sync_sim_backend()->event_query(ctx, event, complete);
}

static void install(const dl_sync_backend *backend) {
  dl_sync_set_backend(kDLCUDA, backend);
}

static int setup(void **state) {
  use_sim(state);
  control = *dl_sync_sim_backend();
  control.event_query = query_as_is;
  control.event_synchronize = synchronize_as_is;
  control.own_stream_create = NULL; /* asks about the event on the consumer stream */
  control.own_stream_check = NULL;
  control.own_stream_destroy = NULL;
  counted = *dl_sync_sim_backend();
  counted.event_query = counted_query;
  atomic_store(&queries, 0);
  return 0;
}

static int teardown(void **state) {
  open_gate(); /* before dl_sync_shutdown waits for the releases' work */
  dl_sync_release_thread_stop();
  dl_sync_shutdown();
  return leave_sim(state);
}

/* --- finishing releases breaks no capture ---------------------------------------------- */

/* A capture of another thread, alive until told to end. */
typedef struct capturer {
  pthread_t thread;
  pthread_barrier_t begun, end;
  dl_sync_sim_stream *stream;
  int mode, ended;
} capturer;

static void *capture_until_told(void *arg) {
  capturer *c = arg;
  int begun = dl_sync_sim_stream_begin_capture(c->stream, c->mode);
  pthread_barrier_wait(&c->begun);
  pthread_barrier_wait(&c->end);
  c->ended = begun == DL_SYNC_SIM_SUCCESS ? end_capture(c->stream) : begun;
  return NULL;
}

static void capturer_start(capturer *c, int mode) {
  c->stream = new_stream();
  c->mode = mode;
  pthread_barrier_init(&c->begun, NULL, 2);
  pthread_barrier_init(&c->end, NULL, 2);
  pthread_create(&c->thread, NULL, capture_until_told, c);
  pthread_barrier_wait(&c->begun);
}

static int capturer_end(capturer *c) {
  pthread_barrier_wait(&c->end);
  pthread_join(c->thread, NULL);
  pthread_barrier_destroy(&c->begun);
  pthread_barrier_destroy(&c->end);
  return c->ended;
}

enum { OTHER_THREAD, OWN_OTHER_STREAM, CONSUMER_STREAM, WHERES };
static const char *const where_names[] = {"another thread's stream", "another stream of the caller",
                                          "the consumer stream, begun after the release"};
enum { POLL, SYNCHRONIZE, SHUTDOWN, FINISHERS };
static const char *const finisher_names[] = {"dl_sync_release_poll", "dl_sync_tensor_synchronize",
                                             "dl_sync_shutdown"};
static const int modes[] = {DL_SYNC_SIM_CAPTURE_GLOBAL, DL_SYNC_SIM_CAPTURE_THREAD_LOCAL,
                            DL_SYNC_SIM_CAPTURE_RELAXED};

/* Whether a query in the global interaction mode, or a read of the recording stream (HIP),
   disturbs the capture: what the control must break. */
static int control_breaks(int where, int mode, int hip) {
  if (where == CONSUMER_STREAM) return hip || mode != DL_SYNC_SIM_CAPTURE_RELAXED;
  if (where == OWN_OTHER_STREAM) return mode != DL_SYNC_SIM_CAPTURE_RELAXED;
  return mode == DL_SYNC_SIM_CAPTURE_GLOBAL;
}

/* One case: a deferred release (or a recorded tensor, for SYNCHRONIZE) on stream b, done;
   then a capture in where begins, and finisher runs. Returns whether the capture survived;
   *finished says whether the release ran its deleter (or the synchronize answered OK). */
static int one_case(int where, int mode, int finisher, int *finished) {
  dl_sync_sim_stream *b = new_stream();
  tensor t;
  make(&t);
  if (finisher == SYNCHRONIZE)
    CHECK_DL(dl_sync_tensor_record(&t.managed, sim_view(b, 0)));
  else
    assert_int_equal(dl_sync_tensor_release(&t.managed, sim_view(b, 0)), DL_SYNC_RELEASE_DEFERRED);
  /* its work is done, and (HIP rules) the wait of dlsync's own stream behind it */
  CHECK_SIM(dl_sync_sim_device_synchronize());
  capturer other = {0};
  dl_sync_sim_stream *captured = b;
  if (where == OTHER_THREAD) {
    capturer_start(&other, mode);
    captured = other.stream;
  } else {
    if (where == OWN_OTHER_STREAM) captured = new_stream();
    CHECK_SIM(dl_sync_sim_stream_begin_capture(captured, mode));
  }
  int status = finisher == POLL          ? dl_sync_release_poll()
               : finisher == SYNCHRONIZE ? dl_sync_tensor_synchronize(&t.managed)
                                         : dl_sync_shutdown();
  int survived = capture_status(captured) == DL_SYNC_CAPTURE_ACTIVE;
  *finished = finisher == SYNCHRONIZE ? status == DL_SYNC_OK : atomic_load(&t.deleted) == 1;
  int ended = where == OTHER_THREAD ? capturer_end(&other) : end_capture(captured);
  assert_int_equal(ended == DL_SYNC_SIM_SUCCESS, survived);
  dl_sync_release_poll(); /* whatever waited for the capture to end */
  if (finisher == SYNCHRONIZE) t.managed.deleter(&t.managed);
  if (dl_sync_get_backend(kDLCUDA) == &control) {
    dl_sync_shutdown(); /* a query the capture refused left the release: forgotten */
    return survived;
  }
  assert_int_equal(atomic_load(&t.deleted), 1);
  return survived;
}

/* Every place a capture can be, every capture mode, every call that asks about an event,
   under CUDA's and HIP's query rules: the capture survives, and the release is finished,
   its own consumer stream capturing or not (under HIP's rules its event is on dlsync's own
   stream, which never captures). The control, a backend without the relaxed mode and
   without dlsync's own stream, breaks every capture the rules say it would. */
static void test_finishing_a_release_breaks_no_capture(void **state) {
  (void)state;
  int cases = 0, broken_by_control = 0;
  for (int hip = 0; hip < 2; hip++)
    for (int where = 0; where < WHERES; where++)
      for (int m = 0; m < 3; m++)
        for (int finisher = 0; finisher < FINISHERS; finisher++) {
          if (finisher == SYNCHRONIZE && where == CONSUMER_STREAM) continue; /* see below */
          CHECK_SIM(dl_sync_sim_set_query_rules(hip ? DL_SYNC_SIM_QUERY_RULES_HIP
                                                    : DL_SYNC_SIM_QUERY_RULES_CUDA));
          install(dl_sync_sim_backend());
          int finished = 0;
          int survived = one_case(where, modes[m], finisher, &finished);
          if (!survived || !finished)
            fail_msg("%s rules, a %s capture on %s, %s: the capture %s, the release %s",
                     hip ? "HIP" : "CUDA",
                     m == 0   ? "global"
                     : m == 1 ? "thread-local"
                              : "relaxed",
                     where_names[where], finisher_names[finisher],
                     survived ? "survived" : "was invalidated", finished ? "ran" : "waited");
          install(&control);
          survived = one_case(where, modes[m], finisher, &finished);
          int breaks = control_breaks(where, modes[m], hip);
          if (survived == breaks)
            fail_msg("control, %s rules, a %s capture on %s, %s: the capture %s",
                     hip ? "HIP" : "CUDA",
                     m == 0   ? "global"
                     : m == 1 ? "thread-local"
                              : "relaxed",
                     where_names[where], finisher_names[finisher],
                     survived ? "survived" : "was invalidated");
          broken_by_control += !survived;
          cases++;
        }
  print_message("%d cases, %d captures broken by the control\n", cases, broken_by_control);
  assert_true(broken_by_control > 0);
  CHECK_SIM(dl_sync_sim_set_query_rules(DL_SYNC_SIM_QUERY_RULES_CUDA));
}

/* A consumer stream destroyed after a deferred release: under HIP's rules a query of an
   event recorded there would read it (freed memory on HIP); the release's event is on
   dlsync's own stream, so the release is finished without a read. The control reads it. */
static void test_a_destroyed_consumer_stream_is_never_read(void **state) {
  (void)state;
  CHECK_SIM(dl_sync_sim_set_query_rules(DL_SYNC_SIM_QUERY_RULES_HIP));
  for (int use_control = 0; use_control < 2; use_control++) {
    install(use_control ? &control : dl_sync_sim_backend());
    dl_sync_sim_stream *b = new_stream(), *c = new_stream();
    static tensor gone_ones[2], live_ones[2]; /* the control's gone one is leaked */
    tensor *gone = &gone_ones[use_control], *live = &live_ones[use_control];
    make(gone);
    make(live);
    assert_int_equal(dl_sync_tensor_release(&gone->managed, sim_view(b, 0)),
                     DL_SYNC_RELEASE_DEFERRED);
    assert_int_equal(dl_sync_tensor_release(&live->managed, sim_view(c, 0)),
                     DL_SYNC_RELEASE_DEFERRED);
    CHECK_SIM(dl_sync_sim_device_synchronize());
    CHECK_SIM(dl_sync_sim_stream_destroy(b));
    uint64_t reads = dl_sync_sim_destroyed_stream_reads();
    int ran = dl_sync_release_poll();
    if (use_control) {
      assert_true(dl_sync_sim_destroyed_stream_reads() > reads);
      dl_sync_shutdown(); /* the failed one, reported and forgotten */
      continue;
    }
    assert_int_equal(ran, 2);
    assert_int_equal(atomic_load(&live->deleted), 1);
    assert_int_equal(atomic_load(&gone->deleted), 1);
    assert_int_equal(dl_sync_release_pending(), 0);
    CHECK_DL(dl_sync_shutdown());
    assert_int_equal(dl_sync_sim_destroyed_stream_reads(), reads);
  }
  CHECK_SIM(dl_sync_sim_set_query_rules(DL_SYNC_SIM_QUERY_RULES_CUDA));
}

/* A release onto the per-thread default stream of the thread that made it, polled from
   another thread, which cannot name that stream: finished there, under CUDA's rules (the
   recording stream is never read) and HIP's (its event is on dlsync's own stream, which
   every thread names). */
typedef struct per_thread_release {
  tensor t;
  int status, polled_here;
} per_thread_release;

static void *release_on_own_per_thread_stream(void *arg) {
  per_thread_release *r = arg;
  make(&r->t);
  r->status = dl_sync_tensor_release(&r->t.managed, sim_view(DL_SYNC_SIM_STREAM_PER_THREAD, 0));
  dl_sync_sim_device_synchronize();
  return NULL;
}

static void test_another_threads_per_thread_release(void **state) {
  (void)state;
  for (int hip = 0; hip < 2; hip++) {
    CHECK_SIM(dl_sync_sim_set_query_rules(hip ? DL_SYNC_SIM_QUERY_RULES_HIP
                                              : DL_SYNC_SIM_QUERY_RULES_CUDA));
    static per_thread_release r;
    memset(&r, 0, sizeof r);
    pthread_t releaser;
    pthread_create(&releaser, NULL, release_on_own_per_thread_stream, &r);
    pthread_join(releaser, NULL);
    assert_int_equal(r.status, DL_SYNC_RELEASE_DEFERRED);
    assert_int_equal(dl_sync_release_poll(), 1);
    assert_int_equal(atomic_load(&r.t.deleted), 1);
    assert_int_equal(dl_sync_release_pending(), 0);
  }
  CHECK_SIM(dl_sync_sim_set_query_rules(DL_SYNC_SIM_QUERY_RULES_CUDA));
}

/* --- deleters run only where the contract names them ------------------------------------ */

/* A deleter is another library's code: a Python producer's takes the GIL. A thread holding
   that lock starts a worker that exports, orders, waits, records and releases its own
   tensors while a release of the lock-taking producer is done, then joins the worker with
   the lock still held: had any of those calls run the deleter, the join would never return.
   A poll, which names deleters, is made by the thread once it let the lock go. */
static pthread_mutex_t gil = PTHREAD_MUTEX_INITIALIZER;

typedef struct worker_calls {
  dl_sync_sim_stream *a, *b;
  atomic_int done;
  int failures;
} worker_calls;

static tensor own, recorded; /* released by the worker, deleted by a later poll */

static void *make_every_other_call(void *arg) {
  worker_calls *w = arg;
  make(&own);
  make(&recorded);
  w->failures += dl_sync_export(sim_view(w->a, 0), dl_sync_stream_arg_int((intptr_t)w->b)) != 0;
  w->failures += dl_sync_push_dep(sim_view(w->b, 0), sim_view(w->a, 0)) != 0;
  dl_sync_group group;
  w->failures += dl_sync_group_init(&group, sim_view(w->b, 0)) != 0;
  w->failures += dl_sync_group_add_stream(&group, sim_view(w->a, 0)) != 0;
  w->failures += dl_sync_group_wait(&group) != 0;
  w->failures += dl_sync_tensor_record(&recorded.managed, sim_view(w->a, 0)) != 0;
  w->failures += dl_sync_tensor_wait(&recorded.managed, sim_view(w->b, 0)) != 0;
  w->failures += dl_sync_tensor_synchronize(&recorded.managed) != 0;
  w->failures += dl_sync_tensor_release(&own.managed, sim_view(w->a, 0)) < 0;
  w->failures += dl_sync_tensor_release(&recorded.managed, sim_view(w->b, 0)) < 0;
  atomic_store(&w->done, 1);
  return NULL;
}

static void test_a_deleter_taking_its_callers_lock_blocks_no_other_call(void **state) {
  (void)state;
  dl_sync_sim_stream *a = new_stream(), *b = new_stream();
  tensor python_owned;
  make(&python_owned);
  python_owned.lock = &gil;
  assert_int_equal(dl_sync_tensor_release(&python_owned.managed, sim_view(b, 0)),
                   DL_SYNC_RELEASE_DEFERRED);
  CHECK_SIM(dl_sync_sim_device_synchronize()); /* done: a careless call would run it */
  worker_calls w = {.a = a, .b = b};
  pthread_mutex_lock(&gil);
  pthread_t worker;
  pthread_create(&worker, NULL, make_every_other_call, &w);
  for (int i = 0; i < 30000 && !atomic_load(&w.done); i++) { /* 30 s: ample under an emulator */
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  int finished = atomic_load(&w.done);
  pthread_mutex_unlock(&gil); /* lets a careless worker go, so that the test ends */
  pthread_join(worker, NULL);
  assert_true(finished); /* the worker never waited for the lock the joiner held */
  assert_int_equal(w.failures, 0);
  assert_int_equal(atomic_load(&python_owned.deleted), 0);
  CHECK_SIM(dl_sync_sim_device_synchronize());
  assert_int_equal(dl_sync_release_poll(), 3); /* the call that names them */
  assert_int_equal(atomic_load(&python_owned.deleted), 1);
  assert_int_equal(atomic_load(&own.deleted), 1);
  assert_int_equal(atomic_load(&recorded.deleted), 1);
}

/* A deleter may call dlsync: here it releases another tensor and polls (no lock of
   dlsync's is held while it runs). */
static tensor inner;
static dl_sync_sim_stream *inner_stream;
static atomic_int inner_status, inner_polled;

static void deleter_calling_dlsync(DLManagedTensorVersioned *t) {
  deleter(t);
  atomic_store(&inner_status, dl_sync_tensor_release(&inner.managed, sim_view(inner_stream, 0)));
  atomic_store(&inner_polled, dl_sync_release_poll());
}

static void test_a_deleter_may_call_dlsync(void **state) {
  (void)state;
  dl_sync_sim_stream *outer_stream = new_stream();
  inner_stream = new_stream();
  CHECK_SIM(launch_gate(inner_stream));
  make(&inner);
  tensor outer;
  make(&outer);
  outer.managed.deleter = deleter_calling_dlsync;
  assert_int_equal(dl_sync_tensor_release(&outer.managed, sim_view(outer_stream, 0)),
                   DL_SYNC_RELEASE_DEFERRED);
  CHECK_SIM(dl_sync_sim_stream_synchronize(outer_stream));
  assert_int_equal(dl_sync_release_poll(), 1);
  assert_int_equal(atomic_load(&outer.deleted), 1);
  assert_int_equal(atomic_load(&inner_status), DL_SYNC_RELEASE_DEFERRED);
  assert_int_equal(atomic_load(&inner_polled), 0); /* the inner read still held */
  open_gate();
  CHECK_SIM(dl_sync_sim_device_synchronize());
  assert_int_equal(dl_sync_release_poll(), 1);
  assert_int_equal(atomic_load(&inner.deleted), 1);
}

/* --- a release that cannot be asked about ---------------------------------------------- */

/* A backend whose query fails for one event (a destroyed context, a lost device): that
   release is asked once, never again, holds no other up, and shutdown says what it left. */
static dl_sync_backend failing;
static void *failing_event;
static atomic_long failing_asks;

static int query_failing_one(void *ctx, void *event, int *complete) {
  if (event == failing_event) {
    atomic_fetch_add(&failing_asks, 1);
    *complete = 0;
    return DL_SYNC_SIM_ERROR_INVALID_HANDLE;
  }
  return dl_sync_sim_backend()->event_query(ctx, event, complete);
}

static int record_noting_the_first(void *ctx, void *event, void *stream) {
  if (failing_event == NULL) failing_event = event;
  return dl_sync_sim_backend()->event_record(ctx, event, stream);
}

static void test_a_failed_query_is_asked_once_and_holds_none_up(void **state) {
  (void)state;
  failing = *dl_sync_sim_backend();
  failing.event_query = query_failing_one;
  failing.event_record = record_noting_the_first;
  failing_event = NULL;
  atomic_store(&failing_asks, 0);
  install(&failing);
  dl_sync_sim_stream *b = new_stream();
  enum { BEHIND = 5 };
  tensor dead, behind[BEHIND];
  make(&dead);
  assert_int_equal(dl_sync_tensor_release(&dead.managed, sim_view(b, 0)), DL_SYNC_RELEASE_DEFERRED);
  failing.event_record = dl_sync_sim_backend()->event_record;
  for (int i = 0; i < BEHIND; i++) {
    make(&behind[i]);
    assert_int_equal(dl_sync_tensor_release(&behind[i].managed, sim_view(b, 0)),
                     DL_SYNC_RELEASE_DEFERRED);
  }
  CHECK_SIM(dl_sync_sim_device_synchronize());
  assert_int_equal(dl_sync_release_poll(), BEHIND); /* the dead one holds none up */
  for (int i = 0; i < 3; i++) assert_int_equal(dl_sync_release_poll(), 0);
  assert_int_equal(atomic_load(&failing_asks), 1);
  assert_int_equal(dl_sync_release_pending(), 0);
  assert_int_equal(atomic_load(&dead.deleted), 0); /* never run unordered */
  /* released once: a second release of it is refused */
  assert_int_equal(dl_sync_tensor_release(&dead.managed, sim_view(b, 0)), DL_SYNC_EINVAL);
  assert_int_equal(dl_sync_shutdown(), DL_SYNC_EBACKEND);
  assert_error_mentions("1 releases could not be finished");
  assert_int_equal(dl_sync_shutdown(), DL_SYNC_OK); /* reported once */
  assert_int_equal(atomic_load(&failing_asks), 1);
}

/* --- cost flat in what is pending ------------------------------------------------------- */

/* While nothing completes, a poll asks one event per consumer stream, whatever the depth;
   once the gate opens, one poll finishes them all, each asked once more. */
static void test_a_poll_asks_one_event_per_stream(void **state) {
  (void)state;
  install(&counted);
  enum { STREAMS = 3, DEPTH = 1000 };
  dl_sync_sim_stream *streams[STREAMS];
  static tensor held[STREAMS][DEPTH];
  for (int s = 0; s < STREAMS; s++) {
    streams[s] = new_stream();
    CHECK_SIM(launch_gate(streams[s]));
    for (int i = 0; i < DEPTH; i++) {
      make(&held[s][i]);
      assert_int_equal(dl_sync_tensor_release(&held[s][i].managed, sim_view(streams[s], 0)),
                       DL_SYNC_RELEASE_DEFERRED);
    }
  }
  atomic_store(&queries, 0);
  for (int poll = 0; poll < 10; poll++) assert_int_equal(dl_sync_release_poll(), 0);
  assert_int_equal(atomic_load(&queries), 10 * STREAMS);
  open_gate();
  CHECK_SIM(dl_sync_sim_device_synchronize());
  atomic_store(&queries, 0);
  assert_int_equal(dl_sync_release_poll(), STREAMS * DEPTH);
  assert_int_equal(atomic_load(&queries), STREAMS * DEPTH);
  assert_int_equal(dl_sync_release_pending(), 0);
  /* the double-release check is a lookup: a finished tensor's address may be released again */
  for (int s = 0; s < STREAMS; s++) assert_int_equal(atomic_load(&held[s][DEPTH - 1].deleted), 1);
}

/* A finished deferred release gives its event back to the pool: nothing stays outstanding,
   and a second round makes no new event. */
static void test_a_finished_release_gives_its_event_back(void **state) {
  (void)state;
  dl_sync_sim_stream *b = new_stream();
  dl_sync_pool_stats before, after;
  for (int round = 0; round < 2; round++) {
    CHECK_DL(dl_sync_pool_stats_get(dl_sync_sim_backend(), 0, &before));
    tensor t;
    make(&t);
    assert_int_equal(dl_sync_tensor_release(&t.managed, sim_view(b, 0)), DL_SYNC_RELEASE_DEFERRED);
    CHECK_SIM(dl_sync_sim_stream_synchronize(b));
    assert_int_equal(dl_sync_release_poll(), 1);
    CHECK_DL(dl_sync_pool_stats_get(dl_sync_sim_backend(), 0, &after));
    assert_int_equal(after.outstanding, 0);
    assert_int_equal(after.idle, before.idle + (round == 0));
    if (round == 1) assert_int_equal(after.created, before.created);
  }
}

/* A tensor waiting for its release is refused a second release, whatever the second asks
   for: nothing pending (-1), or a device without streams (its deleter would run now). */
static void test_a_pending_tensor_is_released_once(void **state) {
  (void)state;
  dl_sync_sim_stream *b = new_stream();
  CHECK_SIM(launch_gate(b));
  tensor t;
  make(&t);
  assert_int_equal(dl_sync_tensor_release(&t.managed, sim_view(b, 0)), DL_SYNC_RELEASE_DEFERRED);
  assert_int_equal(dl_sync_tensor_release(&t.managed, sim_view(DL_SYNC_STREAM_NOTHING_PENDING, 0)),
                   DL_SYNC_EINVAL);
  assert_error_mentions("is already released");
  t.managed.dl_tensor.device = (DLDevice){kDLCPU, 0}; /* as a careless consumer might say */
  assert_int_equal(
      dl_sync_tensor_release(&t.managed, dl_sync_stream_view((DLDevice){kDLCPU, 0}, NULL)),
      DL_SYNC_EINVAL);
  assert_error_mentions("is already released");
  t.managed.dl_tensor.device = (DLDevice){kDLCUDA, 0};
  assert_int_equal(atomic_load(&t.deleted), 0);
  open_gate();
  CHECK_SIM(dl_sync_sim_stream_synchronize(b));
  assert_int_equal(dl_sync_release_poll(), 1);
  assert_int_equal(atomic_load(&t.deleted), 1);
}

/* --- a tensor a graph refused ------------------------------------------------------------ */

/* A runtime gives the user object back when the graph refuses it, now or later (on its own
   thread): the tensor is the caller's again either way. Its retry, and a new tensor at the
   same address, are accepted; the deleter runs only when the caller's own release says so. */
static dl_sync_backend refusing;
static void *refused_objects[2];
static void (*refused_release)(void *object);
static int release_later, refusals;

static int refuse_retain(void *ctx, void *stream, void *object, void (*release)(void *object)) {
  (void)ctx;
  (void)stream;
  if (release_later) {
    refused_objects[refusals++ % 2] = object;
    refused_release = release;
  } else {
    release(object);
  }
  return DL_SYNC_SIM_ERROR_INVALID_VALUE;
}

static void test_a_refused_tensor_is_the_callers_again(void **state) {
  (void)state;
  refusing = *dl_sync_sim_backend();
  refusing.graph_retain = refuse_retain;
  install(&refusing);
  for (release_later = 0; release_later < 2; release_later++) {
    dl_sync_sim_stream *c = new_stream();
    tensor t;
    make(&t);
    CHECK_SIM(dl_sync_sim_stream_begin_capture(c, DL_SYNC_SIM_CAPTURE_GLOBAL));
    assert_int_equal(dl_sync_tensor_release(&t.managed, sim_view(c, 0)), DL_SYNC_EBACKEND);
    assert_int_equal(dl_sync_tensor_release(&t.managed, sim_view(c, 0)), DL_SYNC_EBACKEND);
    assert_int_equal(end_capture(c), DL_SYNC_SIM_SUCCESS);
    if (release_later) {
      assert_int_equal(dl_sync_release_poll(), 0);
      refused_release(refused_objects[0]); /* each refusal's user object goes now */
      refused_release(refused_objects[1]);
    }
    assert_int_equal(dl_sync_release_poll(), 0);
    assert_int_equal(dl_sync_release_pending(), 0);
    assert_int_equal(atomic_load(&t.deleted), 0);
    /* the same address, released again once the capture ended: deferred as any other */
    assert_int_equal(dl_sync_tensor_release(&t.managed, sim_view(c, 0)), DL_SYNC_RELEASE_DEFERRED);
    CHECK_SIM(dl_sync_sim_stream_synchronize(c));
    assert_int_equal(dl_sync_release_poll(), 1);
    assert_int_equal(atomic_load(&t.deleted), 1);
  }
}

/* --- the release thread ------------------------------------------------------------------ */

static void test_the_release_thread_finishes_releases_without_a_poll(void **state) {
  (void)state;
  assert_int_equal(dl_sync_release_thread_running(), 0);
  CHECK_DL(dl_sync_release_thread_start());
  CHECK_DL(dl_sync_release_thread_start()); /* once */
  assert_int_equal(dl_sync_release_thread_running(), 1);
  dl_sync_sim_stream *b = new_stream();
  CHECK_SIM(launch_gate(b));
  tensor t;
  make(&t);
  assert_int_equal(dl_sync_tensor_release(&t.managed, sim_view(b, 0)), DL_SYNC_RELEASE_DEFERRED);
  struct timespec ms = {0, 1000000};
  for (int i = 0; i < 20; i++) nanosleep(&ms, NULL);
  assert_int_equal(atomic_load(&t.deleted), 0); /* the read still held */
  open_gate();
  for (int i = 0; i < 30000 && atomic_load(&t.deleted) == 0; i++) nanosleep(&ms, NULL);
  assert_int_equal(atomic_load(&t.deleted), 1);
  /* dl_sync_shutdown pauses it and leaves it running */
  CHECK_DL(dl_sync_shutdown());
  assert_int_equal(dl_sync_release_thread_running(), 1);
  CHECK_DL(dl_sync_release_thread_stop());
  assert_int_equal(dl_sync_release_thread_running(), 0);
  CHECK_DL(dl_sync_release_thread_stop()); /* nothing to stop */
}

/* Stopping it from one of its own deleters would wait for itself: EINVAL. */
static atomic_int stop_from_deleter;

static void deleter_stopping_the_thread(DLManagedTensorVersioned *t) {
  deleter(t);
  atomic_store(&stop_from_deleter, dl_sync_release_thread_stop());
}

static void test_the_release_thread_cannot_be_stopped_from_its_deleter(void **state) {
  (void)state;
  CHECK_DL(dl_sync_release_thread_start());
  dl_sync_sim_stream *b = new_stream();
  tensor t;
  make(&t);
  t.managed.deleter = deleter_stopping_the_thread;
  atomic_store(&stop_from_deleter, 1);
  assert_int_equal(dl_sync_tensor_release(&t.managed, sim_view(b, 0)), DL_SYNC_RELEASE_DEFERRED);
  /* wait for the deleter's last store, not for `deleted`, which it sets first */
  struct timespec ms = {0, 1000000};
  for (int i = 0; i < 30000 && atomic_load(&stop_from_deleter) == 1; i++) nanosleep(&ms, NULL);
  assert_int_equal(atomic_load(&t.deleted), 1);
  assert_int_equal(atomic_load(&stop_from_deleter), DL_SYNC_EINVAL);
  assert_int_equal(dl_sync_release_thread_running(), 1);
  CHECK_DL(dl_sync_release_thread_stop());
}

/* A forked child has no release thread and runs none of the parent's releases; it may
   start its own. */
static void test_a_forked_child_has_no_release_thread(void **state) {
  (void)state;
#ifdef _WIN32
  skip();
#else
  if (getenv("DL_SYNC_TEST_EMULATED") != NULL) {
    print_message(
        "skipped: the emulator aborts a thread started in a child forked from "
        "several threads\n");
    skip();
  }
  CHECK_DL(dl_sync_release_thread_start());
  pid_t child = fork();
  if (child == 0) {
    int ok = dl_sync_release_thread_running() == 0;
#ifndef THREAD_SANITIZER /* which refuses a thread started after a multithreaded fork */
    ok = ok && dl_sync_release_thread_start() == 0 && dl_sync_release_thread_running() == 1 &&
         dl_sync_release_thread_stop() == 0;
#endif
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  assert_int_equal(waitpid(child, &status, 0), child);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  CHECK_DL(dl_sync_release_thread_stop());
#endif
}

#define SAFETY_TEST(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      SAFETY_TEST(test_finishing_a_release_breaks_no_capture),
      SAFETY_TEST(test_a_destroyed_consumer_stream_is_never_read),
      SAFETY_TEST(test_another_threads_per_thread_release),
      SAFETY_TEST(test_a_deleter_taking_its_callers_lock_blocks_no_other_call),
      SAFETY_TEST(test_a_deleter_may_call_dlsync),
      SAFETY_TEST(test_a_failed_query_is_asked_once_and_holds_none_up),
      SAFETY_TEST(test_a_poll_asks_one_event_per_stream),
      SAFETY_TEST(test_a_finished_release_gives_its_event_back),
      SAFETY_TEST(test_a_pending_tensor_is_released_once),
      SAFETY_TEST(test_a_refused_tensor_is_the_callers_again),
      SAFETY_TEST(test_the_release_thread_finishes_releases_without_a_poll),
      SAFETY_TEST(test_the_release_thread_cannot_be_stopped_from_its_deleter),
      SAFETY_TEST(test_a_forked_child_has_no_release_thread),
  };
  return cmocka_run_group_tests_name("release_safety", tests, NULL, NULL);
}
