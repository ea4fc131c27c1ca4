/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The event pool's ring, through its internal interface (linked statically): growth while
 * the idle events wrap around the ring must keep every idle event exactly once.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <string.h>
#ifndef _WIN32 /* fork */
#include <sys/wait.h>
#endif
#include <unistd.h>

#include "internal.h"

enum { EVENTS = 32 };

/* Events are numbers 1..EVENTS; the test decides which records are still pending. */
static int next_event = 1, destroyed[EVENTS + 1], pending[EVENTS + 1];

static void *as_event(int n) {
  return (void *)(intptr_t)n;
}
static int as_number(void *event) {
  return (int)(intptr_t)event;
}

static int ok_device(void *ctx, int32_t *device) {
  (void)ctx;
  *device = 0;
  return 0;
}
static int ok_set_device(void *ctx, int32_t device) {
  (void)ctx;
  (void)device;
  return 0;
}
static int create(void *ctx, void **event) {
  (void)ctx;
  if (next_event > EVENTS) return 1;
  *event = as_event(next_event++);
  return 0;
}
static int destroy(void *ctx, void *event) {
  (void)ctx;
  destroyed[as_number(event)]++;
  return 0;
}
static int unused_record(void *ctx, void *event, void *stream) {
  (void)ctx, (void)event, (void)stream;
  return 1;
}
static int query(void *ctx, void *event, int *complete) {
  (void)ctx;
  *complete = !pending[as_number(event)];
  return 0;
}
static int unused_sync(void *ctx, void *event) {
  (void)ctx, (void)event;
  return 1;
}
static int unused_capture(void *ctx, void *stream, dl_sync_capture_info *out) {
  (void)ctx, (void)stream, (void)out;
  return 1;
}
static const char *name_of(void *ctx, int code) {
  (void)ctx, (void)code;
  return "ringError";
}
static int status_of(void *ctx, int code) {
  (void)ctx, (void)code;
  return DL_SYNC_EBACKEND;
}

static const dl_sync_backend ring_backend = {
    DL_SYNC_BACKEND_INIT,
    .name = "ring",
    .flags = DL_SYNC_BACKEND_QUERY_BEFORE_REUSE, /* hands out the oldest idle event */
    .get_device = ok_device,
    .set_device = ok_set_device,
    .event_create = create,
    .event_destroy = destroy,
    .event_record = unused_record,
    .stream_wait = unused_record,
    .event_synchronize = unused_sync,
    .event_query = query,
    .capture_info = unused_capture,
    .error_name = name_of,
    .error_string = name_of,
    .error_status = status_of,
};

/* The pool of backend's device (the test backends have no contexts), as a call finds it
   for a stream there. */
static int pool_get(const dl_sync_backend *backend, DLDevice device, dl_sync__pool **out) {
  dl_sync__guard guard;
  dl_sync__guard_init(&guard, backend);
  dl_sync__bound stream = {.stream = dl_sync_stream_view(device, (void *)0x10), .identified = 1};
  return dl_sync__pool_for_stream(&guard, &stream, out);
}

static int borrow(dl_sync__guard *guard, DLDevice device, dl_sync__borrowed *out) {
  dl_sync__bound stream = {.stream = dl_sync_stream_view(device, (void *)0x10), .identified = 1};
  return dl_sync__pool_borrow(guard, &stream, out);
}

static void *acquire(dl_sync__pool *pool) {
  dl_sync__guard guard;
  dl_sync__guard_init(&guard, &ring_backend);
  void *event = NULL;
  assert_int_equal(dl_sync__pool_acquire(pool, &guard, &event), DL_SYNC_OK);
  return event;
}

static void test_growth_with_wrapped_idle_events_keeps_each_once(void **state) {
  (void)state;
  dl_sync__pool *pool = NULL;
  DLDevice device = {kDLCUDA, 0};
  assert_int_equal(pool_get(&ring_backend, device, &pool), DL_SYNC_OK);
  /* 16 live events (the first capacity), all idle, oldest first: 1..16. */
  void *events[17];
  for (int i = 1; i <= 16; i++) events[i] = acquire(pool);
  for (int i = 1; i <= 16; i++) dl_sync__pool_release(pool, events[i]);
  /* Hand out 1..4 and take 1, 2 back: the idle events now wrap past the ring's end. */
  for (int i = 1; i <= 4; i++) assert_int_equal(as_number(acquire(pool)), i);
  dl_sync__pool_release(pool, events[1]);
  dl_sync__pool_release(pool, events[2]);
  /* 5 is pending: it goes back and a 17th event is made, which grows the ring. */
  pending[5] = 1;
  void *fresh = acquire(pool);
  assert_int_equal(as_number(fresh), 17);
  pending[5] = 0;
  /* Oldest first after growth: 6..16, 1, 2, 5. */
  int expected[] = {6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 1, 2, 5};
  for (size_t i = 0; i < sizeof expected / sizeof *expected; i++)
    assert_int_equal(as_number(acquire(pool)), expected[i]);
  for (size_t i = 0; i < sizeof expected / sizeof *expected; i++)
    dl_sync__pool_release(pool, as_event(expected[i]));
  dl_sync__pool_release(pool, events[3]);
  dl_sync__pool_release(pool, events[4]);
  dl_sync__pool_release(pool, fresh);
  assert_int_equal(dl_sync_shutdown(), DL_SYNC_OK);
  for (int i = 1; i <= 17; i++) assert_int_equal(destroyed[i], 1);
}

/* dl_sync_shutdown from inside the query of an idle event (a shutdown the caller did not
   keep apart from this call): the pool is retired with that event out, so giving the
   pending event back frees it. Nothing may touch the pool after that (AddressSanitizer),
   whether the query failed or found the event pending, and nothing leaks. */
static int query_mode; /* 1: the query fails, 2: the event is pending */

static int query_then_shut_down(void *ctx, void *event, int *complete) {
  (void)ctx, (void)event;
  assert_int_equal(dl_sync_shutdown(), DL_SYNC_OK);
  *complete = 0;
  return query_mode == 1 ? 1 : 0;
}

static void test_a_shutdown_during_the_reuse_query_frees_the_pool_once(void **state) {
  (void)state;
  for (query_mode = 1; query_mode <= 2; query_mode++) {
    dl_sync_backend shutting = ring_backend;
    shutting.name = "shutting";
    dl_sync__pool *pool = NULL;
    assert_int_equal(pool_get(&shutting, (DLDevice){kDLCUDA, 0}, &pool), DL_SYNC_OK);
    dl_sync__guard guard;
    dl_sync__guard_init(&guard, &shutting);
    void *event = NULL;
    assert_int_equal(dl_sync__pool_acquire(pool, &guard, &event), DL_SYNC_OK);
    dl_sync__pool_release(pool, event); /* idle in the ring */
    shutting.event_query = query_then_shut_down;
    void *second = NULL;
    int status = dl_sync__pool_acquire(pool, &guard, &second);
    if (query_mode == 1) {
      assert_int_equal(status, DL_SYNC_EBACKEND);
    } else {
      assert_int_equal(status, DL_SYNC_OK); /* a new event, in the retired pool */
      dl_sync__pool_release(pool, second);  /* the pool's last: it goes */
    }
    assert_int_equal(dl_sync__pools_allocated(), 0);
  }
}

static void *give_back(void *arg) {
  void **job = arg;
  dl_sync__pool_release(job[0], job[1]);
  return NULL;
}

/* A graph's user-object destructor gives an event back on a runtime thread while the
   application shuts dlsync down: whichever comes first, the pool is not freed under the
   destructor (and is freed: the sanitizer and valgrind builds see a leak), and the event
   is destroyed at most once: by the shutdown if it came back first, else never (a race
   checker build sees any access to the pool's counters outside its lock). */
static void test_shutdown_racing_a_graph_destructor(void **state) {
  (void)state;
  for (int round = 0; round < 200; round++) {
    next_event = 1;
    memset(destroyed, 0, sizeof destroyed);
    dl_sync__pool *pool = NULL;
    DLDevice device = {kDLCUDA, 0};
    assert_int_equal(pool_get(&ring_backend, device, &pool), DL_SYNC_OK);
    void *job[2] = {pool, acquire(pool)};
    pthread_t destructor;
    assert_int_equal(pthread_create(&destructor, NULL, give_back, job), 0);
    assert_int_equal(dl_sync_shutdown(), DL_SYNC_OK);
    assert_int_equal(pthread_join(destructor, NULL), 0);
    assert_int_equal(dl_sync_shutdown(), DL_SYNC_OK); /* nothing left to destroy */
    assert_true(destroyed[1] <= 1);
  }
}

/* A pool that dl_sync_shutdown retired, because a graph still owned one of its events, is
   freed when that event comes back; a pool with nothing out is freed by the shutdown. The
   event that came back is neither handed out again nor destroyed, then or by a later
   shutdown (a device reset after the shutdown may have destroyed it, and the graph's
   destructor may call no runtime): its runtime handle stays until the process ends, as
   dlsync/backend.h says. */
static void test_a_retired_pool_is_freed_with_its_last_event(void **state) {
  (void)state;
  memset(destroyed, 0, sizeof destroyed);
  long before = dl_sync__pools_allocated();
  dl_sync__pool *pool = NULL;
  DLDevice device = {kDLCUDA, 0};
  assert_int_equal(pool_get(&ring_backend, device, &pool), DL_SYNC_OK);
  void *owned = acquire(pool);
  assert_int_equal(dl_sync__pools_allocated() - before, 1);
  assert_int_equal(dl_sync_shutdown(), DL_SYNC_OK);
  assert_int_equal(dl_sync__pools_allocated() - before, 1); /* retired: the graph's event */
  dl_sync__pool_release(pool, owned);
  assert_int_equal(dl_sync__pools_allocated() - before, 0);
  assert_int_equal(pool_get(&ring_backend, device, &pool), DL_SYNC_OK);
  void *fresh = acquire(pool);
  assert_ptr_not_equal(fresh, owned); /* never handed out again */
  dl_sync__pool_release(pool, fresh);
  assert_int_equal(dl_sync_shutdown(), DL_SYNC_OK);
  assert_int_equal(dl_sync__pools_allocated() - before, 0);
  assert_int_equal(destroyed[as_number(owned)], 0); /* left to the process's end */
  assert_int_equal(destroyed[as_number(fresh)], 1);
}

/* A thread's cache binds four pools; a fifth evicts one, whose events go back to their pool
   with caches_lock held, so that statistics never count them twice. The hook, in the
   middle of the eviction (the events in the pool and still in the slot), lets another
   thread read the statistics and gives it 200 ms: with the lock held it cannot, and reads
   them once the eviction is over. */
static dl_sync_backend evicting; /* served through the thread caches */
static pthread_mutex_t eviction_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t eviction_changed = PTHREAD_COND_INITIALIZER;
static int eviction_phase; /* 1: in the middle of the eviction; 2: statistics read */
static dl_sync_pool_stats during_eviction;

static void in_the_middle_of_an_eviction(void) {
  pthread_mutex_lock(&eviction_lock);
  eviction_phase = 1;
  pthread_cond_broadcast(&eviction_changed);
  struct timespec limit;
  clock_gettime(CLOCK_REALTIME, &limit);
  limit.tv_nsec += 200 * 1000 * 1000;
  if (limit.tv_nsec >= 1000000000) {
    limit.tv_sec++;
    limit.tv_nsec -= 1000000000;
  }
  while (eviction_phase != 2 &&
         pthread_cond_timedwait(&eviction_changed, &eviction_lock, &limit) == 0)
    continue;
  pthread_mutex_unlock(&eviction_lock);
}

static void *read_stats_during_eviction(void *unused) {
  (void)unused;
  pthread_mutex_lock(&eviction_lock);
  while (eviction_phase == 0) pthread_cond_wait(&eviction_changed, &eviction_lock);
  pthread_mutex_unlock(&eviction_lock);
  dl_sync_pool_stats stats;
  dl_sync_pool_stats_get(&evicting, 0, &stats);
  pthread_mutex_lock(&eviction_lock);
  during_eviction = stats;
  eviction_phase = 2;
  pthread_cond_broadcast(&eviction_changed);
  pthread_mutex_unlock(&eviction_lock);
  return NULL;
}

static void test_statistics_never_see_an_evicted_slot_twice(void **state) {
  (void)state;
  evicting = ring_backend;
  evicting.name = "evicting";
  evicting.flags = 0;
  dl_sync__guard guard;
  dl_sync__guard_init(&guard, &evicting);
  for (int32_t d = 0; d < 4; d++) { /* one event in each of four slots */
    dl_sync__borrowed borrowed;
    assert_int_equal(borrow(&guard, (DLDevice){kDLCUDA, d}, &borrowed), DL_SYNC_OK);
    dl_sync__pool_return(&borrowed);
  }
  pthread_t reader;
  assert_int_equal(pthread_create(&reader, NULL, read_stats_during_eviction, NULL), 0);
  dl_sync__cache_flush_hook = in_the_middle_of_an_eviction;
  dl_sync__borrowed fifth; /* evicts device 0's slot, the first bound */
  assert_int_equal(borrow(&guard, (DLDevice){kDLCUDA, 4}, &fifth), DL_SYNC_OK);
  dl_sync__cache_flush_hook = NULL;
  dl_sync__pool_return(&fifth);
  assert_int_equal(pthread_join(reader, NULL), 0);
  assert_int_equal(eviction_phase, 2);
  assert_int_equal(during_eviction.created, 1);
  assert_int_equal(during_eviction.idle, 1);
  assert_int_equal(during_eviction.outstanding, 0);
  assert_int_equal(dl_sync_shutdown(), DL_SYNC_OK);
}

/* The thread-exit hook (the platform's: a pthread key, a fiber-local slot on Windows)
   gives an exiting thread's cached events back: its cache is flushed before the join
   returns, and the thread's events are then idle in the pool. */
static atomic_int exit_flushes;
static dl_sync_backend exiting;

static void count_flush(void) {
  atomic_fetch_add(&exit_flushes, 1);
}

static void *borrow_then_exit(void *unused) {
  (void)unused;
  dl_sync__guard guard;
  dl_sync__guard_init(&guard, &exiting);
  dl_sync__borrowed borrowed;
  if (borrow(&guard, (DLDevice){kDLCUDA, 0}, &borrowed) != DL_SYNC_OK) return (void *)1;
  int cached = borrowed.slot != NULL;
  dl_sync__pool_return(&borrowed);
  return cached ? NULL : (void *)1;
}

static void test_a_threads_exit_gives_its_cache_back(void **state) {
  (void)state;
  exiting = ring_backend;
  exiting.name = "exiting";
  exiting.flags = 0;
  dl_sync__cache_flush_hook = count_flush;
  for (int i = 0; i < 3; i++) {
    pthread_t thread;
    void *result = (void *)1;
    assert_int_equal(pthread_create(&thread, NULL, borrow_then_exit, NULL), 0);
    assert_int_equal(pthread_join(thread, &result), 0);
    assert_null(result); /* the event went through the thread's cache */
    assert_int_equal(atomic_load(&exit_flushes), i + 1);
  }
  dl_sync__cache_flush_hook = NULL;
  dl_sync_pool_stats stats;
  assert_int_equal(dl_sync_pool_stats_get(&exiting, 0, &stats), DL_SYNC_OK);
  assert_int_equal(stats.created, 1); /* each thread found the one its predecessor gave back */
  assert_int_equal(stats.outstanding, 0);
  assert_int_equal(dl_sync_shutdown(), DL_SYNC_OK);
}

#ifndef _WIN32
/* A child after fork() starts with no pools: the parent's events are not its own. */
static void test_a_forked_child_starts_without_pools(void **state) {
  (void)state;
  dl_sync__pool *pool = NULL;
  DLDevice device = {kDLCUDA, 0};
  assert_int_equal(pool_get(&ring_backend, device, &pool), DL_SYNC_OK);
  dl_sync__pool_release(pool, acquire(pool));
  dl_sync_pool_stats stats;
  assert_int_equal(dl_sync_pool_stats_get(&ring_backend, 0, &stats), DL_SYNC_OK);
  assert_int_equal(stats.idle, 1);
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    int clean = dl_sync_pool_stats_get(&ring_backend, 0, &stats) == DL_SYNC_OK &&
                stats.created == 0 && stats.idle == 0;
    _exit(clean ? 0 : 1);
  }
  int status = 0;
  assert_int_equal(waitpid(child, &status, 0), child);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  assert_int_equal(dl_sync_shutdown(), DL_SYNC_OK);
}
#else
static void test_a_forked_child_starts_without_pools(void **state) {
  (void)state;
  skip(); /* Windows has no fork */
}
#endif

#ifndef _WIN32
/* A thread was inside dl_sync_shutdown (holding the thread caches' lock, in a runtime call)
   when another forked: the child, which has no such thread, still shuts down and works,
   and never reuses an event the parent's thread cache held. */
static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_changed = PTHREAD_COND_INITIALIZER;
static int destroy_entered, destroy_released;

static int blocking_destroy(void *ctx, void *event) {
  pthread_mutex_lock(&gate_lock);
  destroy_entered = 1;
  pthread_cond_broadcast(&gate_changed);
  while (!destroy_released) pthread_cond_wait(&gate_changed, &gate_lock);
  pthread_mutex_unlock(&gate_lock);
  return destroy(ctx, event);
}

static void *shut_down(void *arg) {
  (void)arg;
  return (void *)(intptr_t)dl_sync_shutdown();
}

static void test_a_forked_child_is_free_of_the_parents_threads_and_caches(void **state) {
  (void)state;
  static dl_sync_backend cached; /* served through the thread caches */
  cached = ring_backend;
  cached.name = "cached";
  cached.flags = 0;
  cached.event_destroy = blocking_destroy;
  DLDevice device = {kDLCUDA, 0};
  dl_sync__pool *pool = NULL;
  assert_int_equal(pool_get(&cached, device, &pool), DL_SYNC_OK);
  dl_sync__guard guard;
  dl_sync__guard_init(&guard, &cached);
  void *parents = NULL, *idle = NULL;
  assert_int_equal(dl_sync__pool_acquire(pool, &guard, &idle), DL_SYNC_OK);
  dl_sync__pool_release(pool, idle); /* for the shutdown below to block on */
  dl_sync__borrowed borrowed;
  assert_int_equal(borrow(&guard, device, &borrowed), DL_SYNC_OK);
  parents = borrowed.event;
  dl_sync__pool_return(&borrowed); /* held by this thread's cache now */

  pthread_t shutting_down;
  assert_int_equal(pthread_create(&shutting_down, NULL, shut_down, NULL), 0);
  pthread_mutex_lock(&gate_lock);
  while (!destroy_entered) pthread_cond_wait(&gate_changed, &gate_lock);
  pthread_mutex_unlock(&gate_lock);
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    alarm(20);            /* a deadlock ends the child by signal, and the test fails */
    destroy_released = 1; /* the child's own events are destroyed without blocking */
    dl_sync__borrowed fresh = {0};
    dl_sync__guard child_guard;
    dl_sync__guard_init(&child_guard, &cached);
    int clean = borrow(&child_guard, device, &fresh) == DL_SYNC_OK && fresh.event != parents &&
                fresh.event != idle;
    void *event = fresh.event;
    if (clean) dl_sync__pool_return(&fresh);
    clean = clean && dl_sync_shutdown() == DL_SYNC_OK && destroyed[as_number(event)] == 1 &&
            destroyed[as_number(parents)] == 0;
    _exit(clean ? 0 : 1);
  }
  int status = 0;
  assert_int_equal(waitpid(child, &status, 0), child);
  pthread_mutex_lock(&gate_lock);
  destroy_released = 1;
  pthread_cond_broadcast(&gate_changed);
  pthread_mutex_unlock(&gate_lock);
  void *result = NULL;
  assert_int_equal(pthread_join(shutting_down, &result), 0);
  assert_int_equal((int)(intptr_t)result, DL_SYNC_OK);
  if (!WIFEXITED(status))
    fail_msg("the child did not exit (signal %d): a deadlock", WTERMSIG(status));
  assert_int_equal(WEXITSTATUS(status), 0);
}
#else
static void test_a_forked_child_is_free_of_the_parents_threads_and_caches(void **state) {
  (void)state;
  skip(); /* Windows has no fork */
}
#endif

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_growth_with_wrapped_idle_events_keeps_each_once),
      cmocka_unit_test(test_a_shutdown_during_the_reuse_query_frees_the_pool_once),
      cmocka_unit_test(test_shutdown_racing_a_graph_destructor),
      cmocka_unit_test(test_a_retired_pool_is_freed_with_its_last_event),
      cmocka_unit_test(test_statistics_never_see_an_evicted_slot_twice),
      cmocka_unit_test(test_a_threads_exit_gives_its_cache_back),
      cmocka_unit_test(test_a_forked_child_starts_without_pools),
      cmocka_unit_test(test_a_forked_child_is_free_of_the_parents_threads_and_caches),
  };
  return cmocka_run_group_tests_name("event_pool", tests, NULL, NULL);
}
