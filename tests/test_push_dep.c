/* SPDX-License-Identifier: Apache-2.0 */
/* dl_sync_push_dep / dl_sync_export call patterns, proven on a backend of cmocka mocks:
   any runtime call the test did not expect fails it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "dlsync/dlsync.h"
#include "support/mock_backend.h"
#include "support/error_message.h"

static const DLDevice cuda0 = {kDLCUDA, 0};
static const DLDevice cuda1 = {kDLCUDA, 1};
static const DLDevice rocm0 = {kDLROCM, 0};
static const DLDevice cpu0 = {kDLCPU, 0};

static dl_sync_stream on(DLDevice device, void *handle) {
  return dl_sync_stream_view(device, handle);
}

/* A pool miss: the event is made on the producer's device, so the current device is read
   (no switch: it is already device 0). */
static void expect_new_event(void *event, int code) {
  expect_get_device(0, 0);
  expect_event_create(event, code);
}

/* Expects the not-capturing queries and a record + wait, creating event when given. */
static void expect_plain_dep(void *src, void *dst, void *event, int create) {
  expect_capture_info(src, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(dst, DL_SYNC_CAPTURE_NONE, 0, 0);
  if (create) expect_new_event(event, 0);
  expect_event_record(event, src, 0);
  expect_stream_wait(dst, event, 0);
}

static void test_same_stream_makes_no_runtime_call(void **state) {
  (void)state;
  assert_int_equal(dl_sync_push_dep(on(cuda0, MOCK_STREAM_A), on(cuda0, MOCK_STREAM_A)),
                   DL_SYNC_OK);
  assert_int_equal(dl_sync_push_dep(on(cuda0, NULL), on(cuda0, DL_SYNC_STREAM_LEGACY)), DL_SYNC_OK);
  assert_int_equal(dl_sync_push_dep(on(rocm0, DL_SYNC_STREAM_LEGACY), on(rocm0, NULL)), DL_SYNC_OK);
  assert_int_equal(dl_sync_export(on(cuda0, DL_SYNC_STREAM_LEGACY), dl_sync_stream_arg_none()),
                   DL_SYNC_OK);
}

static void test_export_minus_one_makes_no_runtime_call(void **state) {
  (void)state;
  assert_int_equal(dl_sync_export(on(cuda0, MOCK_STREAM_A), dl_sync_stream_arg_int(-1)),
                   DL_SYNC_OK);
  assert_int_equal(dl_sync_export(on(rocm0, MOCK_STREAM_A), dl_sync_stream_arg_int(-1)),
                   DL_SYNC_OK);
}

static void test_cpu_export_makes_no_runtime_call(void **state) {
  (void)state;
  assert_int_equal(dl_sync_export(on(cpu0, NULL), dl_sync_stream_arg_none()), DL_SYNC_OK);
  assert_int_equal(dl_sync_push_dep(on(cpu0, NULL), on(cpu0, NULL)), DL_SYNC_OK);
}

static void test_cross_stream_is_one_record_and_one_wait_in_steady_state(void **state) {
  (void)state;
  expect_plain_dep(MOCK_STREAM_A, MOCK_STREAM_B, MOCK_EVENT_1, 1);
  assert_int_equal(dl_sync_push_dep(on(cuda0, MOCK_STREAM_A), on(cuda0, MOCK_STREAM_B)),
                   DL_SYNC_OK);
  for (int i = 0; i < 3; i++) {
    expect_plain_dep(MOCK_STREAM_A, MOCK_STREAM_B, MOCK_EVENT_1, 0);
    assert_int_equal(dl_sync_export(on(cuda0, MOCK_STREAM_A), dl_sync_stream_arg_int(0xB000)),
                     DL_SYNC_OK);
  }
  dl_sync_pool_stats stats = mock_pool_stats(0);
  assert_int_equal(stats.created, 1);
  assert_int_equal(stats.idle, 1);
  assert_int_equal(stats.outstanding, 0);
  assert_int_equal(stats.acquired, 4);
}

static void test_event_is_created_on_the_producer_device(void **state) {
  (void)state;
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_get_device(0, 0);
  expect_set_device(1, 0);
  expect_event_create(MOCK_EVENT_2, 0);
  expect_event_record(MOCK_EVENT_2, MOCK_STREAM_A, 0);
  expect_stream_wait(MOCK_STREAM_B, MOCK_EVENT_2, 0);
  expect_set_device(0, 0);
  assert_int_equal(dl_sync_push_dep(on(cuda1, MOCK_STREAM_A), on(cuda0, MOCK_STREAM_B)),
                   DL_SYNC_OK);
  assert_int_equal(mock_pool_stats(1).created, 1);
  assert_int_equal(mock_pool_stats(0).created, 0);
}

static void test_default_streams_resolve_on_their_device(void **state) {
  (void)state;
  /* The legacy stream of device 1 and the per-thread stream of device 0. */
  expect_get_device(0, 0);
  expect_set_device(1, 0);
  expect_capture_info(DL_SYNC_STREAM_LEGACY, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_set_device(0, 0);
  expect_capture_info(DL_SYNC_STREAM_PER_THREAD, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_set_device(1, 0);
  expect_event_create(MOCK_EVENT_1, 0);
  expect_event_record(MOCK_EVENT_1, DL_SYNC_STREAM_LEGACY, 0);
  expect_set_device(0, 0);
  expect_stream_wait(DL_SYNC_STREAM_PER_THREAD, MOCK_EVENT_1, 0);
  assert_int_equal(dl_sync_push_dep(on(cuda1, NULL), on(cuda0, DL_SYNC_STREAM_PER_THREAD)),
                   DL_SYNC_OK);
}

static void test_no_device_switch_when_already_current(void **state) {
  (void)state;
  expect_get_device(0, 0);
  expect_capture_info(DL_SYNC_STREAM_LEGACY, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_event_create(MOCK_EVENT_1, 0);
  expect_event_record(MOCK_EVENT_1, DL_SYNC_STREAM_LEGACY, 0);
  expect_stream_wait(MOCK_STREAM_B, MOCK_EVENT_1, 0);
  assert_int_equal(dl_sync_push_dep(on(cuda0, NULL), on(cuda0, MOCK_STREAM_B)), DL_SYNC_OK);
}

static void test_same_capture_is_a_fork_join_edge(void **state) {
  (void)state;
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_ACTIVE, 7, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_ACTIVE, 7, 0);
  expect_new_event(MOCK_EVENT_1, 0);
  expect_event_record(MOCK_EVENT_1, MOCK_STREAM_A, 0);
  expect_stream_wait(MOCK_STREAM_B, MOCK_EVENT_1, 0);
  assert_int_equal(dl_sync_push_dep(on(cuda0, MOCK_STREAM_A), on(cuda0, MOCK_STREAM_B)),
                   DL_SYNC_OK);
}

static void test_capturing_producer_with_plain_consumer_is_ecapture(void **state) {
  (void)state;
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_ACTIVE, 7, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_NONE, 0, 0);
  assert_int_equal(dl_sync_push_dep(on(cuda0, MOCK_STREAM_A), on(cuda0, MOCK_STREAM_B)),
                   DL_SYNC_ECAPTURE);
  assert_error_mentions("Run the consumer on the producer's current work stream, or capture both");
  assert_int_equal(mock_pool_stats(0).created, 0);
}

static void test_two_different_captures_are_ecapture(void **state) {
  (void)state;
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_ACTIVE, 7, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_ACTIVE, 8, 0);
  assert_int_equal(dl_sync_push_dep(on(cuda0, MOCK_STREAM_A), on(cuda0, MOCK_STREAM_B)),
                   DL_SYNC_ECAPTURE);
  assert_error_mentions("two different graphs");
}

static void test_invalidated_capture_is_ecapture(void **state) {
  (void)state;
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_INVALIDATED, 3, 0);
  assert_int_equal(dl_sync_push_dep(on(cuda0, MOCK_STREAM_A), on(cuda0, MOCK_STREAM_B)),
                   DL_SYNC_ECAPTURE);
  assert_error_mentions("invalidated graph capture");
}

static void test_capturing_consumer_gets_an_external_wait_owned_by_the_graph(void **state) {
  (void)state;
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_ACTIVE, 9, 0);
  expect_new_event(MOCK_EVENT_1, 0);
  expect_event_record(MOCK_EVENT_1, MOCK_STREAM_A, 0);
  expect_graph_retain(MOCK_STREAM_B, 0);
  expect_stream_wait_external(MOCK_STREAM_B, MOCK_EVENT_1, 0);
  assert_int_equal(dl_sync_push_dep(on(cuda0, MOCK_STREAM_A), on(cuda0, MOCK_STREAM_B)),
                   DL_SYNC_OK);
  assert_int_equal(mock_pool_stats(0).outstanding, 1);

  /* While the graph lives, its event is not handed out again. */
  expect_plain_dep(MOCK_STREAM_A, MOCK_STREAM_C, MOCK_EVENT_2, 1);
  assert_int_equal(dl_sync_push_dep(on(cuda0, MOCK_STREAM_A), on(cuda0, MOCK_STREAM_C)),
                   DL_SYNC_OK);

  mock_graph_destroy();
  dl_sync_pool_stats stats = mock_pool_stats(0);
  assert_int_equal(stats.outstanding, 0);
  assert_int_equal(stats.idle, 2);
}

static void test_external_wait_without_runtime_support_is_enotsup(void **state) {
  (void)state;
  int (*saved)(void *, void *, void *) = mock_backend.stream_wait_external;
  mock_backend.stream_wait_external = NULL;
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_ACTIVE, 9, 0);
  int status = dl_sync_push_dep(on(cuda0, MOCK_STREAM_A), on(cuda0, MOCK_STREAM_B));
  mock_backend.stream_wait_external = saved;
  assert_int_equal(status, DL_SYNC_ENOTSUP);
  assert_error_mentions("no external event-wait nodes");
}

/* External waits without graph user objects (HIP 6.4.2 with user objects missing): the
   graph could not own the event, so the case is ENOTSUP too, never a call through NULL. */
static void test_external_wait_without_user_objects_is_enotsup(void **state) {
  (void)state;
  int (*saved)(void *, void *, void *, void (*)(void *)) = mock_backend.graph_retain;
  mock_backend.graph_retain = NULL;
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_ACTIVE, 9, 0);
  int status = dl_sync_push_dep(on(cuda0, MOCK_STREAM_A), on(cuda0, MOCK_STREAM_B));
  mock_backend.graph_retain = saved;
  assert_int_equal(status, DL_SYNC_ENOTSUP);
  assert_error_mentions("no graph user objects");
}

static void test_legacy_consumer_under_capture_is_ecapture(void **state) {
  (void)state;
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_ACTIVE, 7, 0);
  assert_int_equal(dl_sync_export(on(cuda0, MOCK_STREAM_A), dl_sync_stream_arg_none()),
                   DL_SYNC_ECAPTURE);
  assert_error_mentions("legacy stream cannot join a capture");
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_ACTIVE, 7, 0);
  assert_int_equal(dl_sync_export(on(cuda0, MOCK_STREAM_A), dl_sync_stream_arg_int(1)),
                   DL_SYNC_ECAPTURE);
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_ACTIVE, 7, 0);
  assert_int_equal(dl_sync_export(on(rocm0, MOCK_STREAM_A), dl_sync_stream_arg_int(0)),
                   DL_SYNC_ECAPTURE);
}

static void test_none_under_capture_is_no_sync_under_the_opt_in_policy(void **state) {
  (void)state;
  assert_int_equal(dl_sync_set_capture_policy(DL_SYNC_CAPTURE_NONE_IS_NO_SYNC), DL_SYNC_OK);
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_ACTIVE, 7, 0);
  assert_int_equal(dl_sync_export(on(cuda0, MOCK_STREAM_A), dl_sync_stream_arg_none()), DL_SYNC_OK);
  /* An explicit 1 still names the legacy stream. */
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_ACTIVE, 7, 0);
  assert_int_equal(dl_sync_export(on(cuda0, MOCK_STREAM_A), dl_sync_stream_arg_int(1)),
                   DL_SYNC_ECAPTURE);
  /* Not capturing: None still synchronizes. */
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_get_device(0, 0);
  expect_capture_info(DL_SYNC_STREAM_LEGACY, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_event_create(MOCK_EVENT_1, 0);
  expect_event_record(MOCK_EVENT_1, MOCK_STREAM_A, 0);
  expect_stream_wait(DL_SYNC_STREAM_LEGACY, MOCK_EVENT_1, 0);
  assert_int_equal(dl_sync_export(on(cuda0, MOCK_STREAM_A), dl_sync_stream_arg_none()), DL_SYNC_OK);
  assert_int_equal(dl_sync_get_capture_policy(), DL_SYNC_CAPTURE_NONE_IS_NO_SYNC);
  assert_int_equal(dl_sync_set_capture_policy(7), DL_SYNC_EINVAL);
  assert_error_mentions("policy 7");
}

/* Error propagation: each runtime call in turn fails. */

static void test_capture_query_failure_propagates(void **state) {
  (void)state;
  expect_capture_info(MOCK_STREAM_A, 0, 0, MOCK_ERROR_INVALID);
  assert_int_equal(dl_sync_push_dep(on(cuda0, MOCK_STREAM_A), on(cuda0, MOCK_STREAM_B)),
                   DL_SYNC_EBACKEND);
  assert_error_mentions(
      "dl_sync_push_dep: [mockStreamGetCaptureInfo][mockErrorInvalid] mock failure");
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(MOCK_STREAM_B, 0, 0, MOCK_ERROR_CAPTURE);
  assert_int_equal(dl_sync_push_dep(on(cuda0, MOCK_STREAM_A), on(cuda0, MOCK_STREAM_B)),
                   DL_SYNC_ECAPTURE);
  assert_error_mentions("[mockStreamGetCaptureInfo][mockErrorCaptureIsolation]");
}

static void test_event_create_failure_propagates(void **state) {
  (void)state;
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_new_event(NULL, MOCK_ERROR_OOM);
  assert_int_equal(dl_sync_push_dep(on(cuda0, MOCK_STREAM_A), on(cuda0, MOCK_STREAM_B)),
                   DL_SYNC_ENOMEM);
  assert_error_mentions("[mockEventCreate][mockErrorOutOfMemory]");
  assert_int_equal(mock_pool_stats(0).created, 0);
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_new_event(NULL, MOCK_ERROR_NO_DEVICE);
  assert_int_equal(dl_sync_push_dep(on(cuda0, MOCK_STREAM_A), on(cuda0, MOCK_STREAM_B)),
                   DL_SYNC_ENODEV);
  assert_error_mentions("no mock device (mock backend, cuda:0)");
}

static void test_record_failure_propagates_and_returns_the_event(void **state) {
  (void)state;
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_new_event(MOCK_EVENT_1, 0);
  expect_event_record(MOCK_EVENT_1, MOCK_STREAM_A, MOCK_ERROR_INVALID);
  assert_int_equal(dl_sync_push_dep(on(cuda0, MOCK_STREAM_A), on(cuda0, MOCK_STREAM_B)),
                   DL_SYNC_EBACKEND);
  assert_error_mentions("[mockEventRecord][mockErrorInvalid]");
  dl_sync_pool_stats stats = mock_pool_stats(0);
  assert_int_equal(stats.idle, 1);
  assert_int_equal(stats.outstanding, 0);
}

static void test_wait_failure_propagates_and_returns_the_event(void **state) {
  (void)state;
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_new_event(MOCK_EVENT_1, 0);
  expect_event_record(MOCK_EVENT_1, MOCK_STREAM_A, 0);
  expect_stream_wait(MOCK_STREAM_B, MOCK_EVENT_1, MOCK_ERROR_INVALID);
  assert_int_equal(dl_sync_push_dep(on(cuda0, MOCK_STREAM_A), on(cuda0, MOCK_STREAM_B)),
                   DL_SYNC_EBACKEND);
  assert_error_mentions("[mockStreamWaitEvent][mockErrorInvalid]");
  assert_int_equal(mock_pool_stats(0).idle, 1);
}

static void test_device_query_failure_propagates(void **state) {
  (void)state;
  expect_get_device(0, MOCK_ERROR_NO_DEVICE);
  assert_int_equal(dl_sync_push_dep(on(cuda0, NULL), on(cuda0, MOCK_STREAM_B)), DL_SYNC_ENODEV);
  assert_error_mentions("[mockGetDevice][mockErrorNoDevice]");
}

static void test_device_switch_failure_propagates(void **state) {
  (void)state;
  expect_get_device(0, 0);
  expect_set_device(1, MOCK_ERROR_INVALID);
  assert_int_equal(dl_sync_push_dep(on(cuda1, NULL), on(cuda0, MOCK_STREAM_B)), DL_SYNC_EBACKEND);
  assert_error_mentions("[mockSetDevice][mockErrorInvalid]");
}

static void test_device_restore_failure_is_reported_without_hiding_an_earlier_error(void **state) {
  (void)state;
  expect_get_device(0, 0);
  expect_set_device(1, 0);
  expect_capture_info(DL_SYNC_STREAM_LEGACY, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_event_create(MOCK_EVENT_1, 0);
  expect_event_record(MOCK_EVENT_1, DL_SYNC_STREAM_LEGACY, 0);
  expect_stream_wait(MOCK_STREAM_B, MOCK_EVENT_1, 0);
  expect_set_device(0, MOCK_ERROR_INVALID);
  assert_int_equal(dl_sync_push_dep(on(cuda1, NULL), on(cuda0, MOCK_STREAM_B)), DL_SYNC_EBACKEND);
  assert_error_mentions("[mockSetDevice][mockErrorInvalid] mock failure (mock backend, cuda:0)");

  expect_get_device(0, 0);
  expect_set_device(1, 0);
  expect_capture_info(DL_SYNC_STREAM_LEGACY, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_event_record(MOCK_EVENT_1, DL_SYNC_STREAM_LEGACY, MOCK_ERROR_OOM);
  expect_set_device(0, MOCK_ERROR_INVALID);
  assert_int_equal(dl_sync_push_dep(on(cuda1, NULL), on(cuda0, MOCK_STREAM_B)), DL_SYNC_ENOMEM);
  assert_error_mentions("[mockEventRecord][mockErrorOutOfMemory]");
}

static void test_graph_retain_failure_propagates_and_the_event_returns(void **state) {
  (void)state;
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_ACTIVE, 9, 0);
  expect_new_event(MOCK_EVENT_1, 0);
  expect_event_record(MOCK_EVENT_1, MOCK_STREAM_A, 0);
  expect_graph_retain(MOCK_STREAM_B, MOCK_ERROR_OOM);
  assert_int_equal(dl_sync_push_dep(on(cuda0, MOCK_STREAM_A), on(cuda0, MOCK_STREAM_B)),
                   DL_SYNC_ENOMEM);
  assert_error_mentions("[mockGraphRetainUserObject][mockErrorOutOfMemory]");
  dl_sync_pool_stats stats = mock_pool_stats(0);
  assert_int_equal(stats.outstanding, 0);
  assert_int_equal(stats.idle, 1);
}

static void test_external_wait_failure_leaves_the_event_with_the_graph(void **state) {
  (void)state;
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_ACTIVE, 9, 0);
  expect_new_event(MOCK_EVENT_1, 0);
  expect_event_record(MOCK_EVENT_1, MOCK_STREAM_A, 0);
  expect_graph_retain(MOCK_STREAM_B, 0);
  expect_stream_wait_external(MOCK_STREAM_B, MOCK_EVENT_1, MOCK_ERROR_CAPTURE);
  assert_int_equal(dl_sync_push_dep(on(cuda0, MOCK_STREAM_A), on(cuda0, MOCK_STREAM_B)),
                   DL_SYNC_ECAPTURE);
  assert_error_mentions("[mockStreamWaitEventExternal][mockErrorCaptureIsolation]");
  assert_int_equal(mock_pool_stats(0).outstanding, 1);
  mock_graph_destroy();
  assert_int_equal(mock_pool_stats(0).outstanding, 0);
}

static void test_query_before_reuse_skips_pending_events(void **state) {
  (void)state;
  mock_backend.flags = DL_SYNC_BACKEND_QUERY_BEFORE_REUSE;
  expect_plain_dep(MOCK_STREAM_A, MOCK_STREAM_B, MOCK_EVENT_1, 1);
  assert_int_equal(dl_sync_push_dep(on(rocm0, MOCK_STREAM_A), on(rocm0, MOCK_STREAM_B)),
                   DL_SYNC_OK);
  /* EVENT_1's record is still pending: a second event is made. */
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_event_query(MOCK_EVENT_1, 0, 0);
  expect_new_event(MOCK_EVENT_2, 0);
  expect_event_record(MOCK_EVENT_2, MOCK_STREAM_A, 0);
  expect_stream_wait(MOCK_STREAM_B, MOCK_EVENT_2, 0);
  assert_int_equal(dl_sync_push_dep(on(rocm0, MOCK_STREAM_A), on(rocm0, MOCK_STREAM_B)),
                   DL_SYNC_OK);
  /* Now EVENT_1 (the oldest) is complete and is reused. */
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_event_query(MOCK_EVENT_1, 1, 0);
  expect_event_record(MOCK_EVENT_1, MOCK_STREAM_A, 0);
  expect_stream_wait(MOCK_STREAM_B, MOCK_EVENT_1, 0);
  assert_int_equal(dl_sync_push_dep(on(rocm0, MOCK_STREAM_A), on(rocm0, MOCK_STREAM_B)),
                   DL_SYNC_OK);
  mock_backend.flags = 0;
  assert_int_equal(mock_pool_stats(0).created, 2);
}

static void test_mixed_families_are_rejected(void **state) {
  (void)state;
  assert_int_equal(dl_sync_push_dep(on(cuda0, MOCK_STREAM_A), on(rocm0, MOCK_STREAM_B)),
                   DL_SYNC_EINVAL);
  assert_error_mentions("src is on cuda:0 and dst on rocm:0");
  assert_int_equal(dl_sync_push_dep(on(cpu0, NULL), on(cuda0, MOCK_STREAM_B)), DL_SYNC_EINVAL);
}

static void test_bad_devices_are_rejected(void **state) {
  (void)state;
  DLDevice unknown = {(DLDeviceType)42, 0};
  assert_int_equal(dl_sync_push_dep(on(unknown, NULL), on(cuda0, MOCK_STREAM_B)), DL_SYNC_EINVAL);
  assert_error_mentions("src has unknown device type 42");
  DLDevice negative = {kDLCUDA, -1};
  assert_int_equal(dl_sync_push_dep(on(cuda0, MOCK_STREAM_A), on(negative, MOCK_STREAM_B)),
                   DL_SYNC_EINVAL);
  assert_error_mentions("dst has device id -1 on cuda: expected 0 to 255");
  DLDevice too_large = {kDLROCM, DL_SYNC_MAX_DEVICES};
  assert_int_equal(dl_sync_export(on(too_large, MOCK_STREAM_A), dl_sync_stream_arg_none()),
                   DL_SYNC_EINVAL);
}

static void test_bad_export_argument_makes_no_runtime_call(void **state) {
  (void)state;
  assert_int_equal(dl_sync_export(on(cuda0, MOCK_STREAM_A), dl_sync_stream_arg_int(0)),
                   DL_SYNC_EINVAL);
  assert_error_mentions("stream=0 is ambiguous on cuda:0");
  assert_int_equal(dl_sync_export(on(cuda0, MOCK_STREAM_A), dl_sync_stream_arg_int(-5)),
                   DL_SYNC_EINVAL);
}

static void test_cuda_types_fall_back_to_the_runtime_backend(void **state) {
  (void)state;
  /* The CUDA backend is always built: kDLCUDAManaged falls back to it, never to none. */
  assert_int_equal(dl_sync_set_backend(kDLCUDAManaged, NULL), DL_SYNC_OK);
  assert_non_null(dl_sync_get_backend(kDLCUDAManaged));
  assert_ptr_equal(dl_sync_get_backend(kDLCUDAManaged), dl_sync_cuda_backend());
}

/* dl_sync_shutdown leaves behind a pool whose events a graph still owns: the graph's
   user-object destructor gives its event back there later, where it is never handed out
   again (a device reset after the shutdown may have destroyed it), and the pool goes with
   it. The next export builds a new pool and creates a new event. */
static void test_shutdown_keeps_the_pool_of_an_event_out_in_a_graph(void **state) {
  (void)state;
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_ACTIVE, 9, 0);
  expect_new_event(MOCK_EVENT_1, 0);
  expect_event_record(MOCK_EVENT_1, MOCK_STREAM_A, 0);
  expect_graph_retain(MOCK_STREAM_B, 0);
  expect_stream_wait_external(MOCK_STREAM_B, MOCK_EVENT_1, 0);
  assert_int_equal(dl_sync_push_dep(on(cuda0, MOCK_STREAM_A), on(cuda0, MOCK_STREAM_B)),
                   DL_SYNC_OK);
  expect_plain_dep(MOCK_STREAM_A, MOCK_STREAM_C, MOCK_EVENT_2, 1);
  assert_int_equal(dl_sync_push_dep(on(cuda0, MOCK_STREAM_A), on(cuda0, MOCK_STREAM_C)),
                   DL_SYNC_OK);

  dl_sync_pool_stats stats = mock_pool_stats(0);
  assert_int_equal(stats.outstanding, 1);
  expect_event_destroy(MOCK_EVENT_2, 0); /* the idle one goes; the graph's stays */
  assert_int_equal(dl_sync_shutdown(), DL_SYNC_OK);
  stats = mock_pool_stats(0);
  assert_int_equal(stats.created, 0); /* the retired pool is no longer the device's */

  mock_graph_destroy(); /* the destructor returns the event to the retired pool */
  stats = mock_pool_stats(0);
  assert_int_equal(stats.created, 0); /* no pool of the backend is reachable any more */
  assert_int_equal(stats.outstanding, 0);
  assert_int_equal(dl_sync_shutdown(), DL_SYNC_OK); /* destroys nothing: no expectation */

  expect_plain_dep(MOCK_STREAM_A, MOCK_STREAM_C, MOCK_EVENT_3, 1); /* not MOCK_EVENT_1 */
  assert_int_equal(dl_sync_push_dep(on(cuda0, MOCK_STREAM_A), on(cuda0, MOCK_STREAM_C)),
                   DL_SYNC_OK);
  expect_event_destroy(MOCK_EVENT_3, 0);
  assert_int_equal(dl_sync_shutdown(), DL_SYNC_OK);
}

static void test_different_backends_in_one_family_are_rejected(void **state) {
  (void)state;
  dl_sync_backend other = mock_backend;
  other.name = "other";
  assert_int_equal(dl_sync_set_backend(kDLCUDAHost, &other), DL_SYNC_OK);
  DLDevice host = {kDLCUDAHost, 0};
  int status = dl_sync_push_dep(on(cuda0, MOCK_STREAM_A), on(host, MOCK_STREAM_B));
  assert_int_equal(dl_sync_set_backend(kDLCUDAHost, &mock_backend), DL_SYNC_OK);
  assert_int_equal(status, DL_SYNC_EINVAL);
  assert_error_mentions("different backends ('mock' and 'other')");
}

#define DEP_TEST(name) cmocka_unit_test_setup_teardown(name, mock_suite_setup, mock_suite_teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      DEP_TEST(test_same_stream_makes_no_runtime_call),
      DEP_TEST(test_export_minus_one_makes_no_runtime_call),
      DEP_TEST(test_cpu_export_makes_no_runtime_call),
      DEP_TEST(test_cross_stream_is_one_record_and_one_wait_in_steady_state),
      DEP_TEST(test_event_is_created_on_the_producer_device),
      DEP_TEST(test_default_streams_resolve_on_their_device),
      DEP_TEST(test_no_device_switch_when_already_current),
      DEP_TEST(test_same_capture_is_a_fork_join_edge),
      DEP_TEST(test_capturing_producer_with_plain_consumer_is_ecapture),
      DEP_TEST(test_two_different_captures_are_ecapture),
      DEP_TEST(test_invalidated_capture_is_ecapture),
      DEP_TEST(test_capturing_consumer_gets_an_external_wait_owned_by_the_graph),
      DEP_TEST(test_external_wait_without_runtime_support_is_enotsup),
      DEP_TEST(test_external_wait_without_user_objects_is_enotsup),
      DEP_TEST(test_legacy_consumer_under_capture_is_ecapture),
      DEP_TEST(test_none_under_capture_is_no_sync_under_the_opt_in_policy),
      DEP_TEST(test_capture_query_failure_propagates),
      DEP_TEST(test_event_create_failure_propagates),
      DEP_TEST(test_record_failure_propagates_and_returns_the_event),
      DEP_TEST(test_wait_failure_propagates_and_returns_the_event),
      DEP_TEST(test_device_query_failure_propagates),
      DEP_TEST(test_device_switch_failure_propagates),
      DEP_TEST(test_device_restore_failure_is_reported_without_hiding_an_earlier_error),
      DEP_TEST(test_graph_retain_failure_propagates_and_the_event_returns),
      DEP_TEST(test_external_wait_failure_leaves_the_event_with_the_graph),
      DEP_TEST(test_query_before_reuse_skips_pending_events),
      DEP_TEST(test_mixed_families_are_rejected),
      DEP_TEST(test_bad_devices_are_rejected),
      DEP_TEST(test_bad_export_argument_makes_no_runtime_call),
      DEP_TEST(test_cuda_types_fall_back_to_the_runtime_backend),
      DEP_TEST(test_shutdown_keeps_the_pool_of_an_event_out_in_a_graph),
      DEP_TEST(test_different_backends_in_one_family_are_rejected),
  };
  return cmocka_run_group_tests_name("push_dep", tests, NULL, NULL);
}
