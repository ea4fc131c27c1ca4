/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The per-thread event caches under the shapes that stress their bookkeeping: a thread
 * that works with more pools than its cache has slots while another thread reads the
 * statistics, and a dlsync call from a thread-exit destructor that runs after the cache's
 * own. A small host backend stands in for a runtime: events are tokens, calls succeed.
 */
#define _POSIX_C_SOURCE 200809L /* pthread_attr_setstack, PTHREAD_DESTRUCTOR_ITERATIONS */
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "dlsync/dlsync.h"

/* Under valgrind the test hands an exited thread's stack back to memcheck before zeroing it. */
#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#endif
#endif
#ifndef VALGRIND_MAKE_MEM_UNDEFINED
#define VALGRIND_MAKE_MEM_UNDEFINED(address, size) ((void)(address), (void)(size))
#endif

enum { DEVICES = 6 }; /* more than a thread cache's 4 slots */

static int ok_count(void *ctx, int *count) {
  (void)ctx;
  *count = DEVICES;
  return 0;
}
static int ok_get(void *ctx, int32_t *device) {
  (void)ctx;
  *device = 0;
  return 0;
}
static int ok_set(void *ctx, int32_t device) {
  (void)ctx;
  (void)device;
  return 0;
}
static int token_create(void *ctx, void **event) {
  (void)ctx;
  *event = malloc(1);
  return *event == NULL;
}
static int token_destroy(void *ctx, void *event) {
  (void)ctx;
  free(event);
  return 0;
}
static int ok_record(void *ctx, void *event, void *stream) {
  (void)ctx;
  (void)event;
  (void)stream;
  return 0;
}
static int ok_wait(void *ctx, void *stream, void *event) {
  (void)ctx;
  (void)stream;
  (void)event;
  return 0;
}
static int ok_sync(void *ctx, void *event) {
  (void)ctx;
  (void)event;
  return 0;
}
static int ok_query(void *ctx, void *event, int *complete) {
  (void)ctx;
  (void)event;
  *complete = 1;
  return 0;
}
static int no_capture(void *ctx, void *stream, dl_sync_capture_info *out) {
  (void)ctx;
  (void)stream;
  *out = (dl_sync_capture_info){0};
  return 0;
}
static const char *name_of(void *ctx, int code) {
  (void)ctx;
  (void)code;
  return "hostError";
}
static int status_of(void *ctx, int code) {
  (void)ctx;
  (void)code;
  return DL_SYNC_EBACKEND;
}

static const dl_sync_backend host = {
    DL_SYNC_BACKEND_INIT,           .name = "host",
    .device_count = ok_count,       .get_device = ok_get,
    .set_device = ok_set,           .event_create = token_create,
    .event_destroy = token_destroy, .event_record = ok_record,
    .stream_wait = ok_wait,         .event_synchronize = ok_sync,
    .event_query = ok_query,        .capture_info = no_capture,
    .error_name = name_of,          .error_string = name_of,
    .error_status = status_of,
};

static void order_on(int32_t device) {
  DLDevice d = {kDLCUDA, device};
  int status = dl_sync_push_dep(dl_sync_stream_view(d, (void *)0x100),
                                dl_sync_stream_view(d, (void *)0x200));
  if (status != DL_SYNC_OK) fail_msg("%s", dl_sync_last_error());
}

static int setup(void **state) {
  (void)state;
  return dl_sync_set_backend(kDLCUDA, &host) == DL_SYNC_OK ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  int status = dl_sync_shutdown();
  dl_sync_set_backend(kDLCUDA, NULL);
  return status == DL_SYNC_OK ? 0 : -1;
}

static atomic_int working;

static void *cycle_through_devices(void *arg) {
  (void)arg;
  for (int round = 0; round < 20000; round++) order_on(round % DEVICES);
  atomic_store(&working, 0);
  return NULL;
}

/* Slots give way in turn, moving their events back to their pools; the statistics read
   meanwhile see each event in one place: never more idle events than live ones, never an
   outstanding count below zero (which an unsigned counter shows as a huge one). */
static void test_more_pools_than_slots_while_stats_are_read(void **state) {
  (void)state;
  atomic_store(&working, 1);
  pthread_t worker;
  assert_int_equal(pthread_create(&worker, NULL, cycle_through_devices, NULL), 0);
  long bad = 0, reads = 0;
  while (atomic_load(&working)) {
    for (int32_t d = 0; d < DEVICES; d++) {
      dl_sync_pool_stats stats;
      assert_int_equal(dl_sync_pool_stats_get(&host, d, &stats), DL_SYNC_OK);
      uint64_t live = stats.created - stats.destroyed;
      if (stats.idle > live || stats.outstanding > live) bad++;
      reads++;
    }
  }
  pthread_join(worker, NULL);
  print_message("%ld statistics read while one thread used %d pools, %ld inconsistent\n", reads,
                DEVICES, bad);
  assert_int_equal(bad, 0);
  for (int32_t d = 0; d < DEVICES; d++) {
    dl_sync_pool_stats stats;
    assert_int_equal(dl_sync_pool_stats_get(&host, d, &stats), DL_SYNC_OK);
    assert_int_equal(stats.outstanding, 0);
    assert_int_equal(stats.idle, stats.created);
  }
}

static pthread_key_t late_key;

/* Runs at thread exit after dlsync's own cache destructor (its key is older). */
static void export_at_exit(void *value) {
  (void)value;
  order_on(0);
}

static void *export_then_exit(void *arg) {
  (void)arg;
  order_on(0);
  pthread_setspecific(late_key, (void *)1);
  return NULL;
}

/* A destructor-time call after the thread's cache went back to the pools uses the pools
   directly: its event is back in the pool when the thread is gone, not in a cache that
   no one will flush again. */
static void test_a_call_from_a_later_thread_exit_destructor(void **state) {
  (void)state;
  order_on(0); /* dlsync's thread-cache key exists before the test's */
  assert_int_equal(pthread_key_create(&late_key, export_at_exit), 0);
  for (int i = 0; i < 20; i++) {
    pthread_t thread;
    assert_int_equal(pthread_create(&thread, NULL, export_then_exit, NULL), 0);
    pthread_join(thread, NULL);
  }
  pthread_key_delete(late_key);
  dl_sync_pool_stats stats;
  assert_int_equal(dl_sync_pool_stats_get(&host, 0, &stats), DL_SYNC_OK);
  assert_int_equal(stats.outstanding, 0); /* none stuck in an exited thread's cache */
  assert_int_equal(stats.idle, stats.created);
  assert_int_equal(dl_sync_shutdown(), DL_SYNC_OK); /* the main thread's cache too */
  assert_int_equal(dl_sync_pool_stats_get(&host, 0, &stats), DL_SYNC_OK);
  assert_int_equal(stats.created, 0); /* every pool was unused, and freed */
  order_on(0);
  assert_int_equal(dl_sync_pool_stats_get(&host, 0, &stats), DL_SYNC_OK);
  assert_int_equal(stats.created, 1);
}

#include "support/sanitizers.h"

#if !defined(_WIN32) && !defined(THREAD_SANITIZER)
#ifndef PTHREAD_DESTRUCTOR_ITERATIONS
#define PTHREAD_DESTRUCTOR_ITERATIONS 4 /* _POSIX_THREAD_DESTRUCTOR_ITERATIONS */
#endif

/* The exiting thread's stack, given by the test: the C library keeps the thread's own
   storage (its static TLS, where dlsync's cache lives) at the top of it, so the test sees
   that storage torn down. */
static _Alignas(4096) unsigned char exiting_stack[1 << 22];
static pthread_key_t last_round_key;
static int last_round_status;
static atomic_int last_round_calls;

/* "If, after all the destructors have been called for all non-NULL values with associated
   destructors, there are still some non-NULL values with associated destructors, then the
   process is repeated", up to PTHREAD_DESTRUCTOR_ITERATIONS times (pthread_key_create),
   in an unspecified order: the value is set again until the last round, long after
   dlsync's own hook ran in the first, and only then does dlsync get its call. */
static void call_in_the_last_round(void *value) {
  uintptr_t round = (uintptr_t)value;
  if (round < PTHREAD_DESTRUCTOR_ITERATIONS) {
    pthread_setspecific(last_round_key, (void *)(round + 1));
    return;
  }
  DLDevice d = {kDLCUDA, 0};
  last_round_status = dl_sync_push_dep(dl_sync_stream_view(d, (void *)0x100),
                                       dl_sync_stream_view(d, (void *)0x200));
  atomic_fetch_add(&last_round_calls, 1);
}

static void *order_then_exit(void *arg) {
  (void)arg;
  order_on(0); /* the thread's cache is made, and holds the event */
  pthread_setspecific(last_round_key, (void *)1);
  return NULL;
}

/* A dlsync call from the last round of the thread's key destructors, after its cache went
   back to the pools, makes no new cache: no destructor would flush it, and it would stay
   on the list of caches in storage the thread no longer has. The storage is zeroed after
   the join, as the C library does when it reuses a stack: an event left in it would be
   lost to the statistics, and so would every cache listed after it. */
static void test_a_call_from_the_last_destructor_round_makes_no_cache(void **state) {
  (void)state;
  order_on(0); /* the main thread's cache, listed behind the exiting thread's */
  assert_int_equal(pthread_key_create(&last_round_key, call_in_the_last_round), 0);
  pthread_attr_t attributes;
  assert_int_equal(pthread_attr_init(&attributes), 0);
  assert_int_equal(pthread_attr_setstack(&attributes, exiting_stack, sizeof exiting_stack), 0);
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, &attributes, order_then_exit, NULL), 0);
  assert_int_equal(pthread_join(thread, NULL), 0);
  pthread_attr_destroy(&attributes);
  pthread_key_delete(last_round_key);
  /* Valgrind marks an exited thread's stack unaddressable; the test takes it back first. */
  VALGRIND_MAKE_MEM_UNDEFINED(exiting_stack, sizeof exiting_stack);
  memset(exiting_stack, 0, sizeof exiting_stack);
  if (atomic_load(&last_round_calls) != 1) {
    print_message("the key destructors ran fewer than %d rounds: no call was made in one\n",
                  PTHREAD_DESTRUCTOR_ITERATIONS);
    skip();
  }
  if (last_round_status != DL_SYNC_OK)
    fail_msg("push_dep in the last round: %d", last_round_status);
  dl_sync_pool_stats stats;
  assert_int_equal(dl_sync_pool_stats_get(&host, 0, &stats), DL_SYNC_OK);
  if (stats.outstanding != 0 || stats.idle != stats.created)
    fail_msg(
        "%llu of %llu events are lost (idle %llu): the last round's call made a cache in "
        "the exited thread's storage, listed ahead of the live ones",
        (unsigned long long)stats.outstanding, (unsigned long long)stats.created,
        (unsigned long long)stats.idle);
}
#else
/* On Windows a thread's storage is not on the stack its creator gives; under
   ThreadSanitizer the sanitizer's own thread state is gone by the last destructor round,
   and its interceptors abort on any call made there. */
static void test_a_call_from_the_last_destructor_round_makes_no_cache(void **state) {
  (void)state;
  skip();
}
#endif

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_more_pools_than_slots_while_stats_are_read, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_a_call_from_a_later_thread_exit_destructor, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_a_call_from_the_last_destructor_round_makes_no_cache,
                                      setup, teardown),
  };
  return cmocka_run_group_tests_name("cache_hygiene", tests, NULL, NULL);
}
