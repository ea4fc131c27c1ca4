/* SPDX-License-Identifier: Apache-2.0 */
/* Contexts, call by call, on the mock backend with its five context callbacks: where each
   stream is bound, which context is current for each call, what is restored, and which
   error is reported. Every runtime call the test did not expect fails it. */
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

static dl_sync_stream on(DLDevice device, void *handle) {
  return dl_sync_stream_view(device, handle);
}

static dl_sync_stream_arg handle_arg(void *handle) {
  return dl_sync_stream_arg_int((int64_t)(intptr_t)handle);
}

/* dl_sync_shutdown over one pool: its context's identity is asked (still id: its events
   are destroyed). */
static void shutdown_one_pool(void *context, uint64_t id, void *event) {
  expect_context_id(context, id, 0);
  expect_event_destroy(event, 0);
  assert_int_equal(dl_sync_shutdown(), DL_SYNC_OK);
}

static int setup(void **state) {
  mock_backend_use_contexts(1);
  return mock_suite_setup(state);
}

static int teardown(void **state) {
  int status = mock_suite_teardown(state);
  mock_backend_use_contexts(0);
  return status;
}

/* Between two explicit streams a warm export asks no context and switches none: the
   capture queries, the producer's context and its identity, one record, one wait. */
static void test_explicit_streams_switch_nothing_once_warm(void **state) {
  (void)state;
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_stream_context(MOCK_STREAM_A, MOCK_CONTEXT_X0, 0);
  expect_context_id(MOCK_CONTEXT_X0, 100, 0);
  expect_get_context(MOCK_CONTEXT_P0, 0); /* the first event is made in X0 */
  expect_get_device(0, 0);
  expect_set_context(MOCK_CONTEXT_X0, 0);
  expect_event_create(MOCK_EVENT_1, 0);
  expect_event_record(MOCK_EVENT_1, MOCK_STREAM_A, 0);
  expect_stream_wait(MOCK_STREAM_B, MOCK_EVENT_1, 0);
  expect_set_context(MOCK_CONTEXT_P0, 0); /* the caller's, restored */
  assert_int_equal(dl_sync_export(on(cuda0, MOCK_STREAM_A), handle_arg(MOCK_STREAM_B)), DL_SYNC_OK);
  for (int i = 0; i < 3; i++) {
    expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
    expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_NONE, 0, 0);
    expect_stream_context(MOCK_STREAM_A, MOCK_CONTEXT_X0, 0);
    expect_context_id(MOCK_CONTEXT_X0, 100, 0);
    expect_event_record(MOCK_EVENT_1, MOCK_STREAM_A, 0);
    expect_stream_wait(MOCK_STREAM_B, MOCK_EVENT_1, 0);
    assert_int_equal(dl_sync_export(on(cuda0, MOCK_STREAM_A), handle_arg(MOCK_STREAM_B)),
                     DL_SYNC_OK);
  }
  shutdown_one_pool(MOCK_CONTEXT_X0, 100, MOCK_EVENT_1);
}

/* The consumer passes None with P0 current; the producer's stream is of X0 and its pool
   cold. The legacy stream is P0's, bound before the event is made in X0: the wait runs
   with P0 current again. */
static void test_default_consumer_is_bound_before_a_cold_pool_switches(void **state) {
  (void)state;
  expect_get_context(MOCK_CONTEXT_P0, 0);
  expect_get_device(0, 0);
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(DL_SYNC_STREAM_LEGACY, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_stream_context(MOCK_STREAM_A, MOCK_CONTEXT_X0, 0);
  expect_context_id(MOCK_CONTEXT_X0, 100, 0);
  expect_set_context(MOCK_CONTEXT_X0, 0);
  expect_event_create(MOCK_EVENT_1, 0);
  expect_event_record(MOCK_EVENT_1, MOCK_STREAM_A, 0);
  expect_set_context(MOCK_CONTEXT_P0, 0);
  expect_stream_wait(DL_SYNC_STREAM_LEGACY, MOCK_EVENT_1, 0);
  assert_int_equal(dl_sync_export(on(cuda0, MOCK_STREAM_A), dl_sync_stream_arg_none()), DL_SYNC_OK);
  shutdown_one_pool(MOCK_CONTEXT_X0, 100, MOCK_EVENT_1);
}

/* With no context current a default stream of device 0 is its primary context's, made
   current for each call on it; the thread is left with none. */
static void test_no_context_current_binds_the_primary_context(void **state) {
  (void)state;
  expect_get_context(NULL, 0);
  expect_primary_context(0, MOCK_CONTEXT_P0, 0);
  expect_set_context(MOCK_CONTEXT_P0, 0);
  expect_capture_info(DL_SYNC_STREAM_PER_THREAD, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_context_id(MOCK_CONTEXT_P0, 7, 0);
  expect_event_create(MOCK_EVENT_1, 0); /* P0 is current already */
  expect_event_record(MOCK_EVENT_1, DL_SYNC_STREAM_PER_THREAD, 0);
  expect_stream_wait(MOCK_STREAM_B, MOCK_EVENT_1, 0);
  expect_set_context(NULL, 0);
  assert_int_equal(dl_sync_push_dep(on(cuda0, DL_SYNC_STREAM_PER_THREAD), on(cuda0, MOCK_STREAM_B)),
                   DL_SYNC_OK);
  shutdown_one_pool(MOCK_CONTEXT_P0, 7, MOCK_EVENT_1);
}

/* A context's identity keys its pool: the same handle with a new identity (a reset
   primary context) never gets the events of the old one. */
static void test_a_new_identity_behind_one_handle_gets_new_events(void **state) {
  (void)state;
  for (int round = 0; round < 2; round++) {
    expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
    expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_NONE, 0, 0);
    expect_stream_context(MOCK_STREAM_A, MOCK_CONTEXT_P0, 0);
    expect_context_id(MOCK_CONTEXT_P0, round == 0 ? 1 : 2, 0);
    expect_get_context(MOCK_CONTEXT_P0, 0);
    expect_get_device(0, 0);
    expect_event_create(round == 0 ? MOCK_EVENT_1 : MOCK_EVENT_2, 0);
    expect_event_record(round == 0 ? MOCK_EVENT_1 : MOCK_EVENT_2, MOCK_STREAM_A, 0);
    expect_stream_wait(MOCK_STREAM_B, round == 0 ? MOCK_EVENT_1 : MOCK_EVENT_2, 0);
    assert_int_equal(dl_sync_push_dep(on(cuda0, MOCK_STREAM_A), on(cuda0, MOCK_STREAM_B)),
                     DL_SYNC_OK);
  }
  /* shutdown destroys the events of the identity P0 has now (the newest pool first), and
     never those of the old one, which died with it */
  expect_context_id(MOCK_CONTEXT_P0, 2, 0);
  expect_event_destroy(MOCK_EVENT_2, 0);
  expect_context_id(MOCK_CONTEXT_P0, 2, 0);
  assert_int_equal(dl_sync_shutdown(), DL_SYNC_OK);
}

/* A call that fails and then fails to restore the caller's context reports the first
   failure. */
static void test_a_failed_restore_keeps_the_first_error(void **state) {
  (void)state;
  expect_get_context(NULL, 0);
  expect_primary_context(0, MOCK_CONTEXT_P0, 0);
  expect_set_context(MOCK_CONTEXT_P0, 0);
  expect_capture_info(DL_SYNC_STREAM_LEGACY, DL_SYNC_CAPTURE_NONE, 0, MOCK_ERROR_INVALID);
  expect_set_context(NULL, MOCK_ERROR_NO_DEVICE);
  assert_int_equal(dl_sync_push_dep(on(cuda0, DL_SYNC_STREAM_LEGACY), on(cuda0, MOCK_STREAM_B)),
                   DL_SYNC_EBACKEND);
  assert_error_mentions("[mockStreamGetCaptureInfo][mockErrorInvalid]");
  /* a restore that fails after a success is the error */
  expect_get_context(NULL, 0);
  expect_primary_context(0, MOCK_CONTEXT_P0, 0);
  expect_set_context(MOCK_CONTEXT_P0, 0);
  expect_capture_info(DL_SYNC_STREAM_LEGACY, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_context_id(MOCK_CONTEXT_P0, 7, 0);
  expect_event_create(MOCK_EVENT_1, 0);
  expect_event_record(MOCK_EVENT_1, DL_SYNC_STREAM_LEGACY, 0);
  expect_stream_wait(MOCK_STREAM_B, MOCK_EVENT_1, 0);
  expect_set_context(NULL, MOCK_ERROR_NO_DEVICE);
  assert_int_equal(dl_sync_push_dep(on(cuda0, DL_SYNC_STREAM_LEGACY), on(cuda0, MOCK_STREAM_B)),
                   DL_SYNC_ENODEV);
  assert_error_mentions("[mockCtxSetCurrent][mockErrorNoDevice]");
  shutdown_one_pool(MOCK_CONTEXT_P0, 7, MOCK_EVENT_1);
}

/* Each context call that fails is named in the message. */
static void test_context_call_failures_are_named(void **state) {
  (void)state;
  expect_get_context(NULL, MOCK_ERROR_INVALID);
  assert_int_equal(dl_sync_export(on(cuda0, MOCK_STREAM_A), dl_sync_stream_arg_none()),
                   DL_SYNC_EBACKEND);
  assert_error_mentions("[mockCtxGetCurrent]");
  expect_get_context(NULL, 0);
  expect_primary_context(0, NULL, MOCK_ERROR_NO_DEVICE);
  assert_int_equal(dl_sync_export(on(cuda0, MOCK_STREAM_A), dl_sync_stream_arg_int(2)),
                   DL_SYNC_ENODEV);
  assert_error_mentions("[mockPrimaryCtx]");
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_stream_context(MOCK_STREAM_A, NULL, MOCK_ERROR_INVALID);
  assert_int_equal(dl_sync_export(on(cuda0, MOCK_STREAM_A), handle_arg(MOCK_STREAM_B)),
                   DL_SYNC_EBACKEND);
  assert_error_mentions("[mockStreamGetCtx]");
  expect_capture_info(MOCK_STREAM_A, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_capture_info(MOCK_STREAM_B, DL_SYNC_CAPTURE_NONE, 0, 0);
  expect_stream_context(MOCK_STREAM_A, MOCK_CONTEXT_X0, 0);
  expect_context_id(MOCK_CONTEXT_X0, 0, MOCK_ERROR_INVALID);
  assert_int_equal(dl_sync_export(on(cuda0, MOCK_STREAM_A), handle_arg(MOCK_STREAM_B)),
                   DL_SYNC_EBACKEND);
  assert_error_mentions("[mockCtxGetId]");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_explicit_streams_switch_nothing_once_warm, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_default_consumer_is_bound_before_a_cold_pool_switches,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_no_context_current_binds_the_primary_context, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_a_new_identity_behind_one_handle_gets_new_events, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_a_failed_restore_keeps_the_first_error, setup, teardown),
      cmocka_unit_test_setup_teardown(test_context_call_failures_are_named, setup, teardown),
  };
  return cmocka_run_group_tests_name("contexts", tests, NULL, NULL);
}
