/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CUDA and HIP runtime backends through their vtables.
 *   test_runtime_backend cuda|hip no-device  -- runs where no device answers
 *   test_runtime_backend cuda|hip device     -- runs where one does
 * Each mode skips (exit 77, cmocka skip) with the reason when its condition does not hold.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "dlsync/dlsync.h"

enum { EXIT_SKIPPED = 77 };

static const dl_sync_backend *backend;
static DLDevice device;
static char no_device_reason[256];
static int has_device;

/* The runtime's default streams: CUDA's legacy and per-thread streams, HIP's null and
   per-thread streams. They need no handle made by the test. */
static dl_sync_stream legacy(void) {
  return dl_sync_stream_view(device, NULL);
}
static dl_sync_stream per_thread(void) {
  return dl_sync_stream_view(device, DL_SYNC_STREAM_PER_THREAD);
}

static void skip_without_device(void) {
  if (!has_device) {
    print_message("skipped: %s\n", no_device_reason);
    skip();
  }
}

static void test_no_device_count_code_means_enodev(void **state) {
  (void)state;
  int count = -1;
  int code = backend->device_count(backend->ctx, &count);
  if (code == 0)
    assert_int_equal(count, 0);
  else
    assert_int_equal(backend->error_status(backend->ctx, code), DL_SYNC_ENODEV);
}

static void test_push_dep_without_device_is_enodev_with_the_runtime_reason(void **state) {
  (void)state;
  int status = dl_sync_push_dep(legacy(), per_thread());
  print_message("%s\n", dl_sync_last_error());
  assert_int_equal(status, DL_SYNC_ENODEV);
  char message[1024];
  snprintf(message, sizeof message, "%s", dl_sync_last_error());
  char call[64];
  snprintf(call, sizeof call, "[%s]", backend->call_names[DL_SYNC_OP_GET_DEVICE]);
  /* A runtime that answered names the call that failed; without one no call was made, and
     the message names none. */
  dl_sync_runtime_info info;
  int found = dl_sync_backend_runtime(backend, &info) == DL_SYNC_OK;
  if (found != (strstr(message, call) != NULL))
    fail_msg("runtime %s, message names %s: %s", found ? "found" : "not found", call, message);
  assert_non_null(strstr(message, backend->name));
}

static void test_export_without_device_is_enodev(void **state) {
  (void)state;
  assert_int_equal(dl_sync_export(per_thread(), dl_sync_stream_arg_none()), DL_SYNC_ENODEV);
  assert_int_equal(dl_sync_export(per_thread(), dl_sync_stream_arg_int(-1)), DL_SYNC_OK);
  assert_int_equal(dl_sync_shutdown(), DL_SYNC_OK);
}

static void test_default_streams_are_ordered_with_one_pooled_event(void **state) {
  (void)state;
  skip_without_device();
  for (int i = 0; i < 100; i++) {
    if (dl_sync_push_dep(legacy(), per_thread()) != DL_SYNC_OK)
      fail_msg("%s", dl_sync_last_error());
    if (dl_sync_push_dep(per_thread(), legacy()) != DL_SYNC_OK)
      fail_msg("%s", dl_sync_last_error());
  }
  dl_sync_pool_stats stats;
  assert_int_equal(dl_sync_pool_stats_get(backend, device.device_id, &stats), DL_SYNC_OK);
  print_message("200 dependencies, %llu events created\n", (unsigned long long)stats.created);
  /* Both runtimes re-record a pooled event safely: one event serves every dependency. */
  assert_int_equal(stats.created, 1);
  assert_int_equal(dl_sync_shutdown(), DL_SYNC_OK);
}

static void test_export_decodes_and_orders_on_a_device(void **state) {
  (void)state;
  skip_without_device();
  assert_int_equal(dl_sync_export(per_thread(), dl_sync_stream_arg_none()), DL_SYNC_OK);
  assert_int_equal(dl_sync_export(per_thread(), dl_sync_stream_arg_int(-1)), DL_SYNC_OK);
  assert_int_equal(dl_sync_shutdown(), DL_SYNC_OK);
}

int main(int argc, char **argv) {
  if (argc != 3 || (strcmp(argv[1], "cuda") != 0 && strcmp(argv[1], "hip") != 0) ||
      (strcmp(argv[2], "device") != 0 && strcmp(argv[2], "no-device") != 0)) {
    fprintf(stderr, "usage: %s cuda|hip device|no-device\n", argv[0]);
    return 2;
  }
  int cuda = strcmp(argv[1], "cuda") == 0;
  backend = cuda ? dl_sync_cuda_backend() : dl_sync_hip_backend();
  device = (DLDevice){cuda ? kDLCUDA : kDLROCM, 0};
  int count = 0;
  int code = backend->device_count(backend->ctx, &count);
  has_device = code == 0 && count > 0;
  if (code != 0)
    snprintf(no_device_reason, sizeof no_device_reason, "no %s device: [%s][%s] %s", argv[1],
             backend->call_names[DL_SYNC_OP_DEVICE_COUNT], backend->error_name(backend->ctx, code),
             backend->error_string(backend->ctx, code));
  else if (count == 0)
    snprintf(no_device_reason, sizeof no_device_reason, "no %s device: 0 devices", argv[1]);

  if (strcmp(argv[2], "no-device") == 0) {
    if (has_device) {
      printf("skipped: %d %s device(s) answer; the no-device checks need none\n", count, argv[1]);
      return EXIT_SKIPPED;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_device_count_code_means_enodev),
        cmocka_unit_test(test_push_dep_without_device_is_enodev_with_the_runtime_reason),
        cmocka_unit_test(test_export_without_device_is_enodev),
    };
    return cmocka_run_group_tests_name("runtime_backend_no_device", tests, NULL, NULL);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_default_streams_are_ordered_with_one_pooled_event),
      cmocka_unit_test(test_export_decodes_and_orders_on_a_device),
  };
  int failed = cmocka_run_group_tests_name("runtime_backend_device", tests, NULL, NULL);
  return failed == 0 && !has_device ? EXIT_SKIPPED : failed;
}
