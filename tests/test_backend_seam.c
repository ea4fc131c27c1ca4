/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The core reaches a backend only through the table: event_gone and release_contexts are
 * members appended after the first layout, asked only where a backend's size covers them
 * (a backend built before them is never asked), and the CUDA driver backend fills them.
 * What each answer does is tested on the fake driver (tests/runtimes/test_driver_contexts.c:
 * a reset that keeps the context's identity, and the shutdown's primary-context release).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "dlsync/dlsync.h"
#include "support/mock_backend.h"

static const DLDevice cuda0 = {kDLCUDA, 0};

/* The size of a backend built against the header before the two members. */
static const uint32_t size_before = (uint32_t)offsetof(dl_sync_backend, event_gone);

static int gone_asked;
static int gone_code;

static int counting_event_gone(void *ctx, int code) {
  (void)ctx;
  gone_asked++;
  gone_code = code;
  return 0; /* not gone: the failure stays the call's */
}

static int released;
static int release_code;

static int counting_release_contexts(void *ctx, int32_t *device_id, const char **call) {
  (void)ctx;
  released++;
  *device_id = 1;
  *call = "mockPrimaryRelease";
  return release_code;
}

/* A pooled event's failed record asks event_gone once where the size covers it, never
   where it does not; either way the call fails with the runtime's error. */
static void test_event_gone_is_asked_only_where_the_size_covers_it(void **state) {
  (void)state;
  uint32_t size = mock_backend.size;
  mock_backend.event_gone = counting_event_gone;
  for (int covered = 0; covered < 2; covered++) {
    mock_backend.size = covered ? size : size_before;
    gone_asked = 0;
    gone_code = 0;
    expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
    expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_NONE, 0, 0);
    if (!covered) { /* the second time the pool has the event back */
      expect_get_device(0, 0);
      expect_event_create(MOCK_EVENT_1, 0);
    }
    expect_event_record(MOCK_EVENT_1, MOCK_STREAM_A, MOCK_ERROR_INVALID);
    int status = dl_sync_push_dep(dl_sync_stream_view(cuda0, MOCK_STREAM_A),
                                  dl_sync_stream_view(cuda0, MOCK_STREAM_B));
    assert_int_equal(status, DL_SYNC_EBACKEND);
    assert_int_equal(gone_asked, covered);
    if (covered) assert_int_equal(gone_code, MOCK_ERROR_INVALID);
  }
  mock_backend.size = size;
  mock_backend.event_gone = NULL;
}

/* dl_sync_shutdown asks release_contexts once (the mock is installed for five device
   types), after the pools are drained; never where the size does not cover it. A failure
   is the shutdown's, naming the call and the device the backend gave. */
static void test_release_contexts_is_asked_only_where_the_size_covers_it(void **state) {
  (void)state;
  uint32_t size = mock_backend.size;
  mock_backend.release_contexts = counting_release_contexts;
  for (int covered = 0; covered < 2; covered++) {
    mock_backend.size = covered ? size : size_before;
    released = 0;
    release_code = 0;
    assert_int_equal(dl_sync_shutdown(), DL_SYNC_OK);
    assert_int_equal(released, covered);
  }
  release_code = MOCK_ERROR_INVALID;
  assert_int_equal(dl_sync_shutdown(), DL_SYNC_EBACKEND);
  assert_int_equal(released, 2);
  print_message("%s\n", dl_sync_last_error());
  assert_non_null(strstr(dl_sync_last_error(), "mockPrimaryRelease"));
  assert_non_null(strstr(dl_sync_last_error(), ":1"));
  release_code = 0;
  mock_backend.size = size;
  mock_backend.release_contexts = NULL;
}

/* The driver backend fills both (a reset's gone event and the primary contexts it retains
   depend on them); the backends without contexts leave them empty. */
static void test_the_driver_backend_fills_the_members(void **state) {
  (void)state;
  const dl_sync_backend *driver = dl_sync_cuda_backend();
  assert_true(driver->size >=
              offsetof(dl_sync_backend, release_contexts) + sizeof driver->release_contexts);
  assert_non_null(driver->event_gone);
  assert_non_null(driver->release_contexts);
  assert_null(dl_sync_hip_backend()->event_gone);
  assert_null(dl_sync_hip_backend()->release_contexts);
  assert_null(dl_sync_cudart_backend()->event_gone);
  assert_null(dl_sync_cudart_backend()->release_contexts);
}

#define SEAM_TEST(name) cmocka_unit_test_setup_teardown(name, mock_suite_setup, mock_suite_teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      SEAM_TEST(test_event_gone_is_asked_only_where_the_size_covers_it),
      SEAM_TEST(test_release_contexts_is_asked_only_where_the_size_covers_it),
      cmocka_unit_test(test_the_driver_backend_fills_the_members),
  };
  return cmocka_run_group_tests_name("backend_seam", tests, NULL, NULL);
}
