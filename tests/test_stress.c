/* Many threads pushing dependencies through one shared event pool on two devices. The
   worker threads only record outcomes; the test thread asserts (cmocka is not
   thread-safe). */
#include <pthread.h>
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
      fail_msg("thread %d: %ld failures, first: %s", t, workers[t].failures, workers[t].first_error);

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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_threads_share_the_pool_with_consistent_counts_and_no_leak),
      cmocka_unit_test(test_pool_is_rebuilt_after_shutdown),
  };
  return cmocka_run_group_tests_name("stress", tests, NULL, NULL);
}
