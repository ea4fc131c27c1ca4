/* SPDX-License-Identifier: Apache-2.0 */
/* Many threads pushing dependencies through one shared event pool on two devices. The
   worker threads only record outcomes; the test thread asserts (cmocka is not
   thread-safe). */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "dlsync/dlsync.h"
#include "support/counting_backend.h"

enum { THREADS = 8, DEPS_PER_THREAD = 10000, DEVICES = 2 };

typedef struct worker {
  pthread_t thread;
  int index;
  counting_stream src, dst;
  long failures;
  char first_error[256];
} worker;

static void *run_worker(void *arg) {
  worker *w = arg;
  dl_sync_stream src = dl_sync_stream_view((DLDevice){kDLCUDA, w->src.device}, &w->src);
  dl_sync_stream dst = dl_sync_stream_view((DLDevice){kDLCUDA, w->dst.device}, &w->dst);
  for (int i = 0; i < DEPS_PER_THREAD; i++) {
    int status = (i & 1) ? dl_sync_push_dep(src, dst)
                         : dl_sync_export(src, dl_sync_stream_arg_int((int64_t)(uintptr_t)&w->dst));
    if (status != DL_SYNC_OK && w->failures++ == 0)
      snprintf(w->first_error, sizeof w->first_error, "%s", dl_sync_last_error());
  }
  return NULL;
}

static void test_threads_share_the_pool_with_consistent_counts_and_no_leak(void **state) {
  (void)state;
  counting_reset();
  assert_int_equal(dl_sync_set_backend(kDLCUDA, &counting_backend), DL_SYNC_OK);
  worker workers[THREADS];
  for (int t = 0; t < THREADS; t++) {
    /* Half the threads wait across devices: a wait may cross, a record may not. */
    workers[t] = (worker){.index = t, .src = {t % DEVICES}, .dst = {(t / 2) % DEVICES}};
    assert_int_equal(pthread_create(&workers[t].thread, NULL, run_worker, &workers[t]), 0);
  }
  for (int t = 0; t < THREADS; t++) pthread_join(workers[t].thread, NULL);
  for (int t = 0; t < THREADS; t++)
    if (workers[t].failures != 0)
      fail_msg("thread %d: %ld failures, first: %s", t, workers[t].failures,
               workers[t].first_error);

  const long deps = (long)THREADS * DEPS_PER_THREAD;
  assert_int_equal(atomic_load(&counting_calls[DL_SYNC_OP_EVENT_RECORD]), deps);
  assert_int_equal(atomic_load(&counting_calls[DL_SYNC_OP_STREAM_WAIT]), deps);
  assert_int_equal(atomic_load(&counting_calls[DL_SYNC_OP_CAPTURE_INFO]), 2 * deps);
  assert_int_equal(atomic_load(&counting_calls[DL_SYNC_OP_EVENT_DESTROY]), 0);

  long created = 0;
  for (int d = 0; d < DEVICES; d++) {
    dl_sync_pool_stats stats;
    assert_int_equal(dl_sync_pool_stats_get(&counting_backend, d, &stats), DL_SYNC_OK);
    /* At most one event per thread recording on the device is ever in flight. */
    assert_in_range(stats.created, 1, THREADS / DEVICES);
    assert_int_equal(stats.outstanding, 0);
    assert_int_equal(stats.idle, stats.created);
    assert_int_equal(stats.acquired, (uint64_t)deps / DEVICES);
    created += (long)stats.created;
  }
  print_message("%ld dependencies, %ld events created, %ld device queries\n", deps, created,
                atomic_load(&counting_calls[DL_SYNC_OP_GET_DEVICE]));
  assert_int_equal(atomic_load(&counting_calls[DL_SYNC_OP_EVENT_CREATE]), created);
  assert_int_equal(atomic_load(&counting_live_events), created);

  assert_int_equal(dl_sync_shutdown(), DL_SYNC_OK);
  assert_int_equal(atomic_load(&counting_live_events), 0);
  assert_int_equal(atomic_load(&counting_calls[DL_SYNC_OP_EVENT_DESTROY]), created);
  assert_int_equal(dl_sync_set_backend(kDLCUDA, NULL), DL_SYNC_OK);
}

static void test_pool_is_rebuilt_after_shutdown(void **state) {
  (void)state;
  counting_reset();
  assert_int_equal(dl_sync_set_backend(kDLROCM, &counting_backend), DL_SYNC_OK);
  counting_stream a = {0}, b = {0};
  dl_sync_stream src = dl_sync_stream_view((DLDevice){kDLROCM, 0}, &a);
  dl_sync_stream dst = dl_sync_stream_view((DLDevice){kDLROCM, 0}, &b);
  for (int round = 0; round < 3; round++) {
    assert_int_equal(dl_sync_push_dep(src, dst), DL_SYNC_OK);
    assert_int_equal(atomic_load(&counting_live_events), 1);
    assert_int_equal(dl_sync_shutdown(), DL_SYNC_OK);
    assert_int_equal(atomic_load(&counting_live_events), 0);
  }
  assert_int_equal(atomic_load(&counting_calls[DL_SYNC_OP_EVENT_CREATE]), 3);
  assert_int_equal(dl_sync_set_backend(kDLROCM, NULL), DL_SYNC_OK);
}

/* --- groups and the thread caches ----------------------------------------------------- */

enum { GROUP_CALLS = 5000 };

typedef struct group_worker {
  pthread_t thread;
  counting_stream a1, a2, consumer;
  long failures;
  char first_error[256];
} group_worker;

/* f(a, b, c) with a and b from a1, c from a2, all on device 0. */
static void *run_group_worker(void *arg) {
  group_worker *w = arg;
  DLDevice device = {kDLCUDA, 0};
  for (int i = 0; i < GROUP_CALLS; i++) {
    dl_sync_group group;
    int status = dl_sync_group_init(&group, dl_sync_stream_view(device, &w->consumer));
    if (status == DL_SYNC_OK)
      status = dl_sync_group_add_stream(&group, dl_sync_stream_view(device, &w->a1));
    if (status == DL_SYNC_OK)
      status = dl_sync_group_add_stream(&group, dl_sync_stream_view(device, &w->a1));
    if (status == DL_SYNC_OK)
      status = dl_sync_group_add_stream(&group, dl_sync_stream_view(device, &w->a2));
    if (status == DL_SYNC_OK) status = dl_sync_group_wait(&group);
    if (status != DL_SYNC_OK && w->failures++ == 0)
      snprintf(w->first_error, sizeof w->first_error, "%s", dl_sync_last_error());
  }
  return NULL;
}

static dl_sync_pool_stats device0_stats(void) {
  dl_sync_pool_stats stats;
  assert_int_equal(dl_sync_pool_stats_get(&counting_backend, 0, &stats), DL_SYNC_OK);
  return stats;
}

static void test_eight_threads_of_groups_leak_no_event(void **state) {
  (void)state;
  counting_reset();
  assert_int_equal(dl_sync_set_backend(kDLCUDA, &counting_backend), DL_SYNC_OK);
  group_worker workers[THREADS];
  for (int t = 0; t < THREADS; t++) {
    workers[t] = (group_worker){.failures = 0};
    assert_int_equal(pthread_create(&workers[t].thread, NULL, run_group_worker, &workers[t]), 0);
  }
  for (int t = 0; t < THREADS; t++) pthread_join(workers[t].thread, NULL);
  for (int t = 0; t < THREADS; t++)
    if (workers[t].failures != 0)
      fail_msg("thread %d: %ld failures, first: %s", t, workers[t].failures,
               workers[t].first_error);

  const long calls = (long)THREADS * GROUP_CALLS;
  assert_int_equal(atomic_load(&counting_calls[DL_SYNC_OP_EVENT_RECORD]), 2 * calls);
  assert_int_equal(atomic_load(&counting_calls[DL_SYNC_OP_STREAM_WAIT]), 2 * calls);
  assert_int_equal(atomic_load(&counting_calls[DL_SYNC_OP_CAPTURE_INFO]), 3 * calls);
  dl_sync_pool_stats stats = device0_stats();
  /* Each thread borrows one event at a time and keeps it in its cache. */
  assert_in_range(stats.created, 1, THREADS);
  assert_int_equal(stats.outstanding, 0);
  assert_int_equal(stats.idle, stats.created);
  assert_int_equal(stats.acquired, (uint64_t)(2 * calls));
  assert_int_equal(atomic_load(&counting_live_events), (long)stats.created);
  assert_int_equal(dl_sync_shutdown(), DL_SYNC_OK);
  assert_int_equal(atomic_load(&counting_live_events), 0);
  assert_int_equal(dl_sync_set_backend(kDLCUDA, NULL), DL_SYNC_OK);
}

static void *one_dependency(void *arg) {
  counting_stream *streams = arg;
  DLDevice device = {kDLCUDA, 0};
  intptr_t failed = dl_sync_push_dep(dl_sync_stream_view(device, &streams[0]),
                                     dl_sync_stream_view(device, &streams[1])) != DL_SYNC_OK;
  return (void *)failed;
}

/* Takes the pool's idle event the way a tensor does (not through a thread cache). */
static void record_tensor_on(counting_stream *stream, DLManagedTensorVersioned *tensor) {
  *tensor = (DLManagedTensorVersioned){.version = {1, 3}};
  tensor->dl_tensor.device = (DLDevice){kDLCUDA, 0};
  assert_int_equal(
      dl_sync_tensor_record(tensor, dl_sync_stream_view(tensor->dl_tensor.device, stream)),
      DL_SYNC_OK);
}

static void test_an_exiting_thread_returns_its_cached_events_to_the_pool(void **state) {
  (void)state;
  counting_reset();
  assert_int_equal(dl_sync_set_backend(kDLCUDA, &counting_backend), DL_SYNC_OK);
  counting_stream streams[2] = {{0}, {0}};
  pthread_t thread;
  void *failed = NULL;
  assert_int_equal(pthread_create(&thread, NULL, one_dependency, streams), 0);
  pthread_join(thread, &failed);
  assert_null(failed);
  assert_int_equal(atomic_load(&counting_calls[DL_SYNC_OP_EVENT_CREATE]), 1);
  /* The pool itself holds the event again: a tensor takes it without creating one. */
  DLManagedTensorVersioned tensor;
  record_tensor_on(&streams[0], &tensor);
  assert_int_equal(atomic_load(&counting_calls[DL_SYNC_OP_EVENT_CREATE]), 1);
  tensor.deleter(&tensor);
  assert_int_equal(dl_sync_shutdown(), DL_SYNC_OK);
  assert_int_equal(atomic_load(&counting_live_events), 0);
  assert_int_equal(dl_sync_set_backend(kDLCUDA, NULL), DL_SYNC_OK);
}

enum { MANY_DEVICES = 6 }; /* more than a thread cache has slots for */

static void *push_on_many_devices(void *arg) {
  counting_stream *streams = arg; /* two per device */
  intptr_t failures = 0;
  for (int round = 0; round < 3; round++)
    for (int d = 0; d < MANY_DEVICES; d++) {
      DLDevice device = {kDLCUDA, d};
      failures += dl_sync_push_dep(dl_sync_stream_view(device, &streams[2 * d]),
                                   dl_sync_stream_view(device, &streams[2 * d + 1])) != DL_SYNC_OK;
    }
  return (void *)failures;
}

static void test_a_thread_on_more_devices_than_cache_slots_loses_no_event(void **state) {
  (void)state;
  counting_reset();
  assert_int_equal(dl_sync_set_backend(kDLCUDA, &counting_backend), DL_SYNC_OK);
  counting_stream streams[2 * MANY_DEVICES];
  for (int d = 0; d < MANY_DEVICES; d++) streams[2 * d] = streams[2 * d + 1] = (counting_stream){d};
  pthread_t thread;
  void *failures = NULL;
  assert_int_equal(pthread_create(&thread, NULL, push_on_many_devices, streams), 0);
  pthread_join(thread, &failures);
  assert_null(failures);
  for (int d = 0; d < MANY_DEVICES; d++) {
    dl_sync_pool_stats stats;
    assert_int_equal(dl_sync_pool_stats_get(&counting_backend, d, &stats), DL_SYNC_OK);
    /* Evicted from the cache or returned at exit: every event is back in its pool. */
    assert_int_equal(stats.outstanding, 0);
    assert_int_equal(stats.idle, stats.created);
    assert_int_equal(stats.acquired, 3);
  }
  assert_int_equal(atomic_load(&counting_calls[DL_SYNC_OP_EVENT_CREATE]),
                   atomic_load(&counting_live_events));
  assert_int_equal(dl_sync_shutdown(), DL_SYNC_OK);
  assert_int_equal(atomic_load(&counting_live_events), 0);
  assert_int_equal(dl_sync_set_backend(kDLCUDA, NULL), DL_SYNC_OK);
}

typedef struct parked_thread {
  pthread_t thread;
  counting_stream streams[2];
  atomic_int step; /* 1: it cached an event; 2: shutdown ran, push again and exit */
  intptr_t failed;
} parked_thread;

static void *push_park_push(void *arg) {
  parked_thread *p = arg;
  p->failed |= (intptr_t)one_dependency(p->streams);
  atomic_store(&p->step, 1);
  while (atomic_load(&p->step) != 2) sched_yield();
  p->failed |= (intptr_t)one_dependency(p->streams);
  return NULL;
}

static void test_shutdown_takes_back_the_caches_of_live_threads(void **state) {
  (void)state;
  counting_reset();
  assert_int_equal(dl_sync_set_backend(kDLCUDA, &counting_backend), DL_SYNC_OK);
  static parked_thread parked;
  parked = (parked_thread){.failed = 0};
  assert_int_equal(pthread_create(&parked.thread, NULL, push_park_push, &parked), 0);
  while (atomic_load(&parked.step) != 1) sched_yield();
  assert_int_equal(atomic_load(&counting_live_events), 1);
  assert_int_equal(dl_sync_shutdown(), DL_SYNC_OK); /* the thread is parked, not in dlsync */
  assert_int_equal(atomic_load(&counting_live_events), 0);
  atomic_store(&parked.step, 2);
  pthread_join(parked.thread, NULL);
  assert_int_equal(parked.failed, 0);
  /* Its second push made a new event, which its exit returned to the rebuilt pool. */
  assert_int_equal(atomic_load(&counting_live_events), 1);
  dl_sync_pool_stats stats = device0_stats();
  assert_int_equal(stats.idle, 1);
  assert_int_equal(stats.outstanding, 0);
  assert_int_equal(dl_sync_shutdown(), DL_SYNC_OK);
  assert_int_equal(atomic_load(&counting_live_events), 0);
  assert_int_equal(dl_sync_set_backend(kDLCUDA, NULL), DL_SYNC_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_threads_share_the_pool_with_consistent_counts_and_no_leak),
      cmocka_unit_test(test_pool_is_rebuilt_after_shutdown),
      cmocka_unit_test(test_eight_threads_of_groups_leak_no_event),
      cmocka_unit_test(test_an_exiting_thread_returns_its_cached_events_to_the_pool),
      cmocka_unit_test(test_shutdown_takes_back_the_caches_of_live_threads),
      cmocka_unit_test(test_a_thread_on_more_devices_than_cache_slots_loses_no_event),
  };
  return cmocka_run_group_tests_name("stress", tests, NULL, NULL);
}
