/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The pending-release path's rules that no other suite held (dlsync/release.h,
 * docs/release.md), on the simulated device:
 * - the release thread finishes a graph's release without a poll: it is woken when a graph
 *   takes a release, and polls at its interval while only graphs keep releases (a graph's
 *   destruction wakes nobody);
 * - the finished releases of one stream run oldest first;
 * - each thread's per-thread default stream has its own queue: one thread's unfinished
 *   release holds up no other thread's;
 * - a deferred release that is refused (the tensor was released at the same moment by
 *   another thread) gives its recorded event back to the pool.
 * Each test says the deliberate bug it catches; docs/design.md's test map lists them.
 */
#define _POSIX_C_SOURCE 200809L /* pthread barriers, nanosleep */
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

/* --- tensors, their deleters and the order they ran in ----------------------------------- */

enum { MAX_TENSORS = 64 };

typedef struct tensor {
  DLManagedTensorVersioned managed;
  int number; /* its place in release order */
  atomic_int deleted;
} tensor;

static atomic_int deletions;
static atomic_int deletion_order[MAX_TENSORS]; /* the numbers, as their deleters ran */

static void deleter(DLManagedTensorVersioned *t) {
  tensor *owner = (tensor *)((char *)t - offsetof(tensor, managed));
  int at = atomic_fetch_add(&deletions, 1);
  if (at < MAX_TENSORS) atomic_store(&deletion_order[at], owner->number);
  atomic_fetch_add(&owner->deleted, 1);
}

static void make(tensor *t, int number) {
  memset(t, 0, sizeof *t);
  t->managed = (DLManagedTensorVersioned){.version = {1, 3}, .deleter = deleter};
  t->managed.dl_tensor.device = (DLDevice){kDLCUDA, 0};
  t->number = number;
}

static dl_sync_sim_stream *new_stream(void) {
  dl_sync_sim_stream *stream = NULL;
  CHECK_SIM(dl_sync_sim_stream_create(&stream, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  return stream;
}

static void sleep_ms(int ms) {
  struct timespec pause = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&pause, NULL);
}

/* Waits up to 30 s (ample under an emulator) for t's deleter; whether it ran. */
static int deleted_within_30_s(tensor *t) {
  for (int i = 0; i < 30000 && atomic_load(&t->deleted) == 0; i++) sleep_ms(1);
  return atomic_load(&t->deleted) == 1;
}

static int setup(void **state) {
  atomic_store(&deletions, 0);
  return use_sim(state);
}

static int teardown(void **state) {
  open_gate(); /* before dl_sync_shutdown waits for the releases' work */
  dl_sync_release_thread_stop();
  dl_sync_shutdown();
  return leave_sim(state);
}

/* --- the release thread and graphs' releases --------------------------------------------- */

/* A release a graph keeps, on a capturing stream: its graph, once the capture ended. */
static dl_sync_sim_graph *release_into_a_graph(tensor *t, dl_sync_sim_stream *stream) {
  CHECK_SIM(dl_sync_sim_stream_begin_capture(stream, DL_SYNC_SIM_CAPTURE_GLOBAL));
  assert_int_equal(dl_sync_tensor_release(&t->managed, sim_view(stream, 0)), DL_SYNC_RELEASE_GRAPH);
  dl_sync_sim_graph *graph = NULL;
  CHECK_SIM(dl_sync_sim_stream_end_capture(stream, &graph));
  return graph;
}

/* The thread sleeps while no release waits. A graph that takes a release wakes it: the
   graph's destruction wakes nobody (it runs on a runtime thread where dlsync may not block),
   so a thread left asleep would never run the deleter. Each round gives the thread time to
   fall asleep first. Catches: the wake after a graph's claim (release_queue.c) removed. */
static void test_a_graphs_release_wakes_the_sleeping_thread(void **state) {
  (void)state;
  CHECK_DL(dl_sync_release_thread_start());
  dl_sync_sim_stream *c = new_stream();
  for (int round = 0; round < 3; round++) {
    sleep_ms(50); /* asleep: nothing waits */
    tensor t;
    make(&t, round);
    dl_sync_sim_graph *graph = release_into_a_graph(&t, c);
    assert_int_equal(atomic_load(&t.deleted), 0); /* the graph holds it */
    CHECK_SIM(dl_sync_sim_graph_destroy(graph));
    if (!deleted_within_30_s(&t))
      fail_msg(
          "round %d: the release thread never ran the deleter of a graph's release once "
          "the graph was destroyed (%d releases pending)",
          round, dl_sync_release_pending());
    assert_int_equal(dl_sync_release_pending(), 0);
  }
  CHECK_DL(dl_sync_release_thread_stop());
}

/* While only graphs keep releases the thread polls at its graphs' interval: here it is
   awake (a deferred release woke it, and finished) when the graph goes, so only that
   interval brings it back to the graph's release. Catches: the graphs' interval replaced
   by "forever" or by a limit no test waits out, or a thread that sleeps without polling
   while only graphs keep releases (release_thread.c). */
static void test_the_thread_polls_while_only_graphs_keep_releases(void **state) {
  (void)state;
  CHECK_DL(dl_sync_release_thread_start());
  dl_sync_sim_stream *c = new_stream(), *b = new_stream();
  tensor kept, deferred;
  make(&kept, 0);
  make(&deferred, 1);
  dl_sync_sim_graph *graph = release_into_a_graph(&kept, c);
  assert_int_equal(dl_sync_tensor_release(&deferred.managed, sim_view(b, 0)),
                   DL_SYNC_RELEASE_DEFERRED);
  assert_true(deleted_within_30_s(&deferred)); /* the thread is awake, the graph's waits */
  sleep_ms(5);
  assert_int_equal(atomic_load(&kept.deleted), 0);
  assert_int_equal(dl_sync_release_pending(), 1);
  CHECK_SIM(dl_sync_sim_graph_destroy(graph)); /* wakes nobody */
  if (!deleted_within_30_s(&kept))
    fail_msg(
        "the release thread never ran the deleter of a graph's release while only graphs "
        "kept releases (%d pending)",
        dl_sync_release_pending());
  assert_int_equal(dl_sync_release_pending(), 0);
  CHECK_DL(dl_sync_release_thread_stop());
}

/* --- order ------------------------------------------------------------------------------- */

/* Releases of one stream finish oldest first: their deleters run in release order, one
   poll finishing them all, and each stream's order kept where streams interleave. Catches:
   the reversal of the finished list removed (newest first), or a queue appended at its
   head (release_queue.c). */
static void test_finished_releases_run_in_release_order(void **state) {
  (void)state;
  enum { STREAMS = 2, EACH = 8, COUNT = STREAMS * EACH };
  dl_sync_sim_stream *streams[STREAMS] = {new_stream(), new_stream()};
  static tensor tensors[COUNT];
  for (int i = 0; i < COUNT; i++) { /* stream 0 gets 0, 2, 4...; stream 1 gets 1, 3, 5... */
    make(&tensors[i], i);
    assert_int_equal(dl_sync_tensor_release(&tensors[i].managed, sim_view(streams[i % 2], 0)),
                     DL_SYNC_RELEASE_DEFERRED);
  }
  CHECK_SIM(dl_sync_sim_device_synchronize());
  assert_int_equal(dl_sync_release_poll(), COUNT);
  assert_int_equal(atomic_load(&deletions), COUNT);
  int last[STREAMS] = {-1, -1};
  for (int i = 0; i < COUNT; i++) {
    int number = atomic_load(&deletion_order[i]);
    if (number <= last[number % 2])
      fail_msg("deleter %d of the poll ran for release %d, after release %d of the same stream", i,
               number, last[number % 2]);
    last[number % 2] = number;
  }
  /* one stream, one poll: exactly release order */
  atomic_store(&deletions, 0);
  for (int i = 0; i < EACH; i++) {
    make(&tensors[i], i);
    assert_int_equal(dl_sync_tensor_release(&tensors[i].managed, sim_view(streams[0], 0)),
                     DL_SYNC_RELEASE_DEFERRED);
  }
  CHECK_SIM(dl_sync_sim_stream_synchronize(streams[0]));
  assert_int_equal(dl_sync_release_poll(), EACH);
  for (int i = 0; i < EACH; i++) assert_int_equal(atomic_load(&deletion_order[i]), i);
}

/* --- per-thread default streams ---------------------------------------------------------- */

/* Two threads release onto their own per-thread default streams; the first one's work is
   held by a gate. Each per-thread stream is its own stream ("each host thread has its own
   default stream"), so the second's release is finished by a poll while the first's waits.
   Catches: the queue lookup comparing a queue's thread with itself, or ignoring the thread
   (release_queue.c), which puts the second release behind the first. */
typedef struct per_thread_release {
  tensor t;
  int gated, status;
} per_thread_release;

static void *release_on_own_per_thread_stream(void *arg) {
  per_thread_release *r = arg;
  void *own = DL_SYNC_SIM_STREAM_PER_THREAD;
  if (r->gated && launch_gate(own) != DL_SYNC_SIM_SUCCESS) {
    r->status = -1000;
    return NULL;
  }
  r->status = dl_sync_tensor_release(&r->t.managed, sim_view(own, 0));
  if (!r->gated) dl_sync_sim_stream_synchronize(own);
  return NULL;
}

static void test_each_threads_per_thread_stream_has_its_own_queue(void **state) {
  (void)state;
  static per_thread_release held, free_one;
  make(&held.t, 0);
  make(&free_one.t, 1);
  held.gated = 1;
  pthread_t first, second;
  pthread_create(&first, NULL, release_on_own_per_thread_stream, &held);
  pthread_join(first, NULL);
  pthread_create(&second, NULL, release_on_own_per_thread_stream, &free_one);
  pthread_join(second, NULL);
  assert_int_equal(held.status, DL_SYNC_RELEASE_DEFERRED);
  assert_int_equal(free_one.status, DL_SYNC_RELEASE_DEFERRED);
  int finished = dl_sync_release_poll();
  if (finished != 1 || atomic_load(&free_one.t.deleted) != 1)
    fail_msg(
        "a release on one thread's per-thread stream waited behind another thread's "
        "(the poll finished %d, the free one's deleter ran %d times)",
        finished, atomic_load(&free_one.t.deleted));
  assert_int_equal(atomic_load(&held.t.deleted), 0);
  open_gate();
  CHECK_SIM(dl_sync_sim_device_synchronize());
  assert_int_equal(dl_sync_release_poll(), 1);
  assert_int_equal(atomic_load(&held.t.deleted), 1);
}

/* --- a refused release gives its event back ---------------------------------------------- */

/* Two threads release one tensor at the same moment: both pass the double-release check,
   both record an event, one queues its release and the other is refused ("already
   released"). The refused one's event goes back to the pool: once the queued release is
   finished, no event is outstanding. The control backend below holds the first thread's
   record until the second release is queued. Catches: a refused deferred release (already
   pending, or without memory: one path) keeping its recorded event (release.c). */
static dl_sync_backend pausing;
static _Thread_local int pauses_here; /* the first release's thread */
static atomic_int pause_armed;
static pthread_barrier_t recorded, go_on;

static int record_pausing_once(void *ctx, void *event, void *stream) {
  int error = dl_sync_sim_backend()->event_record(ctx, event, stream);
  if (pauses_here && atomic_exchange(&pause_armed, 0)) {
    pthread_barrier_wait(&recorded);
    pthread_barrier_wait(&go_on);
  }
  return error;
}

typedef struct racing_release {
  tensor *t;
  dl_sync_sim_stream *stream;
  int status;
  char message[512];
} racing_release;

static void *release_racing(void *arg) {
  racing_release *r = arg;
  pauses_here = 1;
  r->status = dl_sync_tensor_release(&r->t->managed, sim_view(r->stream, 0));
  snprintf(r->message, sizeof r->message, "%s", dl_sync_last_error());
  return NULL;
}

static void test_a_refused_release_gives_its_event_back(void **state) {
  (void)state;
  pausing = *dl_sync_sim_backend();
  pausing.event_record = record_pausing_once;
  dl_sync_set_backend(kDLCUDA, &pausing);
  pthread_barrier_init(&recorded, NULL, 2);
  pthread_barrier_init(&go_on, NULL, 2);
  dl_sync_sim_stream *b = new_stream(), *c = new_stream();
  CHECK_SIM(launch_gate(c)); /* the winner's release waits: its event stays outstanding */
  tensor t;
  make(&t, 0);
  dl_sync_pool_stats before, during, after;
  CHECK_DL(dl_sync_pool_stats_get(&pausing, 0, &before));
  racing_release loser = {.t = &t, .stream = b};
  atomic_store(&pause_armed, 1);
  pthread_t first;
  pthread_create(&first, NULL, release_racing, &loser);
  pthread_barrier_wait(&recorded); /* the first release holds a recorded event */
  assert_int_equal(dl_sync_tensor_release(&t.managed, sim_view(c, 0)), DL_SYNC_RELEASE_DEFERRED);
  pthread_barrier_wait(&go_on);
  pthread_join(first, NULL);
  assert_int_equal(loser.status, DL_SYNC_EINVAL);
  if (strstr(loser.message, "is already released") == NULL)
    fail_msg("the refused release said: %s", loser.message);
  CHECK_DL(dl_sync_pool_stats_get(&pausing, 0, &during));
  if (during.outstanding != before.outstanding + 1)
    fail_msg(
        "with one release queued, %llu events are outstanding (the refused release kept "
        "its event)",
        (unsigned long long)(during.outstanding - before.outstanding));
  open_gate();
  CHECK_SIM(dl_sync_sim_device_synchronize());
  assert_int_equal(dl_sync_release_poll(), 1);
  assert_int_equal(atomic_load(&t.deleted), 1);
  CHECK_DL(dl_sync_pool_stats_get(&pausing, 0, &after));
  assert_int_equal(after.outstanding, before.outstanding);
  pthread_barrier_destroy(&recorded);
  pthread_barrier_destroy(&go_on);
}

#define GAPS_TEST(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      GAPS_TEST(test_a_graphs_release_wakes_the_sleeping_thread),
      GAPS_TEST(test_the_thread_polls_while_only_graphs_keep_releases),
      GAPS_TEST(test_finished_releases_run_in_release_order),
      GAPS_TEST(test_each_threads_per_thread_stream_has_its_own_queue),
      GAPS_TEST(test_a_refused_release_gives_its_event_back),
  };
  return cmocka_run_group_tests_name("release_gaps", tests, NULL, NULL);
}
