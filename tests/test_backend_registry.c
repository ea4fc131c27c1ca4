/* SPDX-License-Identifier: Apache-2.0 */
/* The backend registry: installing, restoring defaults, validation, concurrent readers. */
#include <pthread.h>
#include <stdio.h>
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
  /* The CUDA default is the driver backend, with contexts; the runtime backend is not a
     default of any type. */
  assert_non_null(dl_sync_cuda_backend()->stream_context);
  assert_string_equal(dl_sync_cudart_backend()->name, "cudart");
  assert_null(dl_sync_cudart_backend()->stream_context);
  assert_null(dl_sync_hip_backend()->stream_context);
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

static int no_context(void *ctx, void **context) {
  (void)ctx;
  *context = NULL;
  return 0;
}
static int set_no_context(void *ctx, void *context) {
  (void)ctx;
  (void)context;
  return 0;
}
static int stream_no_context(void *ctx, void *stream, void **context) {
  (void)ctx;
  (void)stream;
  *context = NULL;
  return 0;
}

static int primary_none(void *ctx, int32_t device_id, void **context) {
  (void)ctx;
  (void)device_id;
  *context = NULL;
  return 0;
}
static int id_none(void *ctx, void *context, uint64_t *id) {
  (void)ctx;
  (void)context;
  *id = 0;
  return 0;
}

/* The context callbacks come as a set: pools keyed by a context dlsync cannot identify
   or make current, or a context saved and never restored, would be wrong silently. Each
   one missing from a set that has the others is named. */
static void test_context_callbacks_come_together(void **state) {
  (void)state;
  const char *names[] = {"get_context", "set_context", "stream_context", "primary_context",
                         "context_id"};
  for (int missing = 0; missing < 5; missing++) {
    dl_sync_backend partial = counting_backend;
    partial.get_context = missing == 0 ? NULL : no_context;
    partial.set_context = missing == 1 ? NULL : set_no_context;
    partial.stream_context = missing == 2 ? NULL : stream_no_context;
    partial.primary_context = missing == 3 ? NULL : primary_none;
    partial.context_id = missing == 4 ? NULL : id_none;
    assert_int_equal(dl_sync_set_backend(kDLCUDA, &partial), DL_SYNC_EINVAL);
    char expected[96];
    snprintf(expected, sizeof expected, "lacks the required callback %s", names[missing]);
    assert_error_mentions(expected);
  }
  dl_sync_backend only_one = counting_backend;
  only_one.context_id = id_none;
  assert_int_equal(dl_sync_set_backend(kDLCUDA, &only_one), DL_SYNC_EINVAL);
  assert_error_mentions("lacks the required callback get_context");
  dl_sync_backend full = counting_backend;
  full.get_context = no_context;
  full.set_context = set_no_context;
  full.stream_context = stream_no_context;
  full.primary_context = primary_none;
  full.context_id = id_none;
  assert_int_equal(dl_sync_set_backend(kDLCUDA, &full), DL_SYNC_OK);
  assert_int_equal(dl_sync_set_backend(kDLCUDA, NULL), DL_SYNC_OK);
}

/* dl_sync_bind_runtime takes only the runtime backends, before their first use. */
static void test_bind_runtime_validates_its_arguments(void **state) {
  (void)state;
  assert_int_equal(dl_sync_bind_runtime(NULL, NULL, NULL), DL_SYNC_EINVAL);
  assert_int_equal(dl_sync_bind_runtime(dl_sync_cudart_backend(), NULL, NULL), DL_SYNC_EINVAL);
  assert_error_mentions("must be a dlopen handle");
  int handle;
  assert_int_equal(dl_sync_bind_runtime(dl_sync_cuda_backend(), NULL, &handle), DL_SYNC_ENOTSUP);
  assert_error_mentions("the CUDA driver backend needs none");
  assert_int_equal(dl_sync_bind_runtime(&counting_backend, NULL, &handle), DL_SYNC_ENOTSUP);
  assert_error_mentions("backend 'counting' takes no runtime");
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
      cmocka_unit_test(test_context_callbacks_come_together),
      cmocka_unit_test(test_bind_runtime_validates_its_arguments),
      cmocka_unit_test(test_concurrent_readers_see_one_of_the_installed_backends),
      cmocka_unit_test(test_pool_stats_validate_their_arguments),
  };
  return cmocka_run_group_tests_name("backend_registry", tests, NULL, NULL);
}
