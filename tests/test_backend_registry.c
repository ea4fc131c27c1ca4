/* The backend registry: installing, restoring defaults, validation, concurrent readers. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "dlsync/dlsync.h"
#include "support/counting_backend.h"
#include "support/error_message.h"

static void test_defaults_follow_the_build(void **state) {
  (void)state;
  assert_ptr_equal(dl_sync_get_backend(kDLCUDA), dl_sync_cuda_backend());
  assert_ptr_equal(dl_sync_get_backend(kDLCUDAHost), dl_sync_cuda_backend());
  assert_ptr_equal(dl_sync_get_backend(kDLCUDAManaged), dl_sync_cuda_backend());
  assert_ptr_equal(dl_sync_get_backend(kDLROCM), dl_sync_hip_backend());
  assert_ptr_equal(dl_sync_get_backend(kDLROCMHost), dl_sync_hip_backend());
  assert_null(dl_sync_get_backend(kDLCPU));
  assert_null(dl_sync_get_backend(-1));
  assert_null(dl_sync_get_backend(1000));
  /* Both runtime backends are always built; their runtimes are found at run time. */
  assert_non_null(dl_sync_cuda_backend());
  assert_string_equal(dl_sync_cuda_backend()->name, "cuda");
  assert_non_null(dl_sync_hip_backend());
  assert_string_equal(dl_sync_hip_backend()->name, "hip");
}

static void test_install_and_restore(void **state) {
  (void)state;
  assert_int_equal(dl_sync_set_backend(kDLROCMHost, &counting_backend), DL_SYNC_OK);
  assert_ptr_equal(dl_sync_get_backend(kDLROCMHost), &counting_backend);
  assert_ptr_equal(dl_sync_get_backend(kDLROCM), dl_sync_hip_backend());
  assert_int_equal(dl_sync_set_backend(kDLROCMHost, NULL), DL_SYNC_OK);
  assert_ptr_equal(dl_sync_get_backend(kDLROCMHost), dl_sync_hip_backend());
}

static void test_unknown_and_streamless_types_are_rejected(void **state) {
  (void)state;
  assert_int_equal(dl_sync_set_backend(5, &counting_backend), DL_SYNC_EINVAL);
  assert_error_mentions("unknown device type 5");
  assert_int_equal(dl_sync_set_backend(-2, &counting_backend), DL_SYNC_EINVAL);
  assert_int_equal(dl_sync_set_backend(kDLCPU, &counting_backend), DL_SYNC_EINVAL);
  assert_error_mentions("device type 1 (cpu) has no streams");
  assert_int_equal(dl_sync_set_backend(kDLMetal, &counting_backend), DL_SYNC_EINVAL);
}

static void test_backends_missing_a_callback_are_rejected(void **state) {
  (void)state;
  dl_sync_backend broken = counting_backend;
  broken.capture_info = NULL;
  assert_int_equal(dl_sync_set_backend(kDLCUDA, &broken), DL_SYNC_EINVAL);
  assert_error_mentions("backend 'counting' lacks the required callback capture_info");
  broken = counting_backend;
  broken.name = NULL;
  assert_int_equal(dl_sync_set_backend(kDLCUDA, &broken), DL_SYNC_EINVAL);
  assert_error_mentions("'(unnamed)' lacks the required callback name");
  assert_ptr_equal(dl_sync_get_backend(kDLCUDA), dl_sync_cuda_backend());
}

enum { READERS = 4, FLIPS = 20000 };
static atomic_int stop_reading;
static dl_sync_backend second_backend;

static void *read_registry(void *arg) {
  long *bad = arg;
  while (!atomic_load(&stop_reading)) {
    const dl_sync_backend *b = dl_sync_get_backend(kDLCUDA);
    if (b != &counting_backend && b != &second_backend) (*bad)++;
  }
  return NULL;
}

static void test_concurrent_readers_see_one_of_the_installed_backends(void **state) {
  (void)state;
  second_backend = counting_backend;
  assert_int_equal(dl_sync_set_backend(kDLCUDA, &counting_backend), DL_SYNC_OK);
  pthread_t readers[READERS];
  long bad[READERS] = {0};
  atomic_store(&stop_reading, 0);
  for (int i = 0; i < READERS; i++)
    assert_int_equal(pthread_create(&readers[i], NULL, read_registry, &bad[i]), 0);
  for (int i = 0; i < FLIPS; i++)
    dl_sync_set_backend(kDLCUDA, (i & 1) ? &counting_backend : &second_backend);
  atomic_store(&stop_reading, 1);
  for (int i = 0; i < READERS; i++) {
    pthread_join(readers[i], NULL);
    assert_int_equal(bad[i], 0);
  }
  assert_int_equal(dl_sync_set_backend(kDLCUDA, NULL), DL_SYNC_OK);
}

static void test_pool_stats_validate_their_arguments(void **state) {
  (void)state;
  dl_sync_pool_stats stats;
  assert_int_equal(dl_sync_pool_stats_get(NULL, 0, &stats), DL_SYNC_EINVAL);
  assert_int_equal(dl_sync_pool_stats_get(&counting_backend, 0, NULL), DL_SYNC_EINVAL);
  assert_int_equal(dl_sync_pool_stats_get(&counting_backend, -1, &stats), DL_SYNC_EINVAL);
  assert_error_mentions("device id -1");
  assert_int_equal(dl_sync_pool_stats_get(&counting_backend, 3, &stats), DL_SYNC_OK);
  assert_int_equal(stats.created, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_defaults_follow_the_build),
      cmocka_unit_test(test_install_and_restore),
      cmocka_unit_test(test_unknown_and_streamless_types_are_rejected),
      cmocka_unit_test(test_backends_missing_a_callback_are_rejected),
      cmocka_unit_test(test_concurrent_readers_see_one_of_the_installed_backends),
      cmocka_unit_test(test_pool_stats_validate_their_arguments),
  };
  return cmocka_run_group_tests_name("backend_registry", tests, NULL, NULL);
}
