/* SPDX-License-Identifier: Apache-2.0 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "mock_backend.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

static void *retained_object;
static void (*retained_release)(void *);

static int mock_get_device(void *ctx, int32_t *device_id) {
  (void)ctx;
  function_called();
  *device_id = mock_type(int32_t);
  return mock_type(int);
}

static int mock_set_device(void *ctx, int32_t device_id) {
  (void)ctx;
  function_called();
  check_expected(device_id);
  return mock_type(int);
}

static int mock_event_create(void *ctx, void **event) {
  (void)ctx;
  function_called();
  *event = mock_ptr_type(void *);
  return mock_type(int);
}

static int mock_event_destroy(void *ctx, void *event) {
  (void)ctx;
  function_called();
  check_expected_ptr(event);
  return mock_type(int);
}

static int mock_event_record(void *ctx, void *event, void *stream) {
  (void)ctx;
  function_called();
  check_expected_ptr(event);
  check_expected_ptr(stream);
  return mock_type(int);
}

static int mock_stream_wait(void *ctx, void *stream, void *event) {
  (void)ctx;
  function_called();
  check_expected_ptr(stream);
  check_expected_ptr(event);
  return mock_type(int);
}

static int mock_stream_wait_external(void *ctx, void *stream, void *event) {
  (void)ctx;
  function_called();
  check_expected_ptr(stream);
  check_expected_ptr(event);
  return mock_type(int);
}

static int mock_event_synchronize(void *ctx, void *event) {
  (void)ctx;
  function_called();
  check_expected_ptr(event);
  return mock_type(int);
}

static int mock_event_query(void *ctx, void *event, int *complete) {
  (void)ctx;
  function_called();
  check_expected_ptr(event);
  *complete = mock_type(int);
  return mock_type(int);
}

static int mock_capture_info(void *ctx, void *stream, dl_sync_capture_info *out) {
  (void)ctx;
  function_called();
  check_expected_ptr(stream);
  out->status = mock_type(int32_t);
  out->id = mock_type(uint64_t);
  return mock_type(int);
}

static int mock_graph_retain(void *ctx, void *stream, void *object, void (*release)(void *)) {
  (void)ctx;
  function_called();
  check_expected_ptr(stream);
  int code = mock_type(int);
  if (code != 0) {
    release(object);
    return code;
  }
  retained_object = object;
  retained_release = release;
  return 0;
}

static int mock_get_context(void *ctx, void **context) {
  (void)ctx;
  function_called();
  *context = mock_ptr_type(void *);
  return mock_type(int);
}

static int mock_set_context(void *ctx, void *context) {
  (void)ctx;
  function_called();
  check_expected_ptr(context);
  return mock_type(int);
}

static int mock_stream_context(void *ctx, void *stream, void **context) {
  (void)ctx;
  function_called();
  check_expected_ptr(stream);
  *context = mock_ptr_type(void *);
  return mock_type(int);
}

static int mock_primary_context(void *ctx, int32_t device_id, void **context) {
  (void)ctx;
  function_called();
  check_expected(device_id);
  *context = mock_ptr_type(void *);
  return mock_type(int);
}

static int mock_context_id(void *ctx, void *context, uint64_t *id) {
  (void)ctx;
  function_called();
  check_expected_ptr(context);
  *id = mock_type(uint64_t);
  return mock_type(int);
}

static const char *mock_error_name(void *ctx, int code) {
  (void)ctx;
  switch (code) {
    case MOCK_ERROR_INVALID:
      return "mockErrorInvalid";
    case MOCK_ERROR_NO_DEVICE:
      return "mockErrorNoDevice";
    case MOCK_ERROR_OOM:
      return "mockErrorOutOfMemory";
    case MOCK_ERROR_CAPTURE:
      return "mockErrorCaptureIsolation";
    default:
      return "mockErrorUnknown";
  }
}

static const char *mock_error_string(void *ctx, int code) {
  (void)ctx;
  return code == MOCK_ERROR_NO_DEVICE ? "no mock device" : "mock failure";
}

static int mock_error_status(void *ctx, int code) {
  (void)ctx;
  switch (code) {
    case MOCK_ERROR_NO_DEVICE:
      return DL_SYNC_ENODEV;
    case MOCK_ERROR_OOM:
      return DL_SYNC_ENOMEM;
    case MOCK_ERROR_CAPTURE:
      return DL_SYNC_ECAPTURE;
    default:
      return DL_SYNC_EBACKEND;
  }
}

static const char *const mock_backend_call_names[DL_SYNC_OP_COUNT] = {
    [DL_SYNC_OP_GET_DEVICE] = "mockGetDevice",
    [DL_SYNC_OP_SET_DEVICE] = "mockSetDevice",
    [DL_SYNC_OP_EVENT_CREATE] = "mockEventCreate",
    [DL_SYNC_OP_EVENT_DESTROY] = "mockEventDestroy",
    [DL_SYNC_OP_EVENT_RECORD] = "mockEventRecord",
    [DL_SYNC_OP_STREAM_WAIT] = "mockStreamWaitEvent",
    [DL_SYNC_OP_STREAM_WAIT_EXTERNAL] = "mockStreamWaitEventExternal",
    [DL_SYNC_OP_EVENT_SYNCHRONIZE] = "mockEventSynchronize",
    [DL_SYNC_OP_EVENT_QUERY] = "mockEventQuery",
    [DL_SYNC_OP_CAPTURE_INFO] = "mockStreamGetCaptureInfo",
    [DL_SYNC_OP_GRAPH_RETAIN] = "mockGraphRetainUserObject",
};

dl_sync_backend mock_backend = {
    DL_SYNC_BACKEND_INIT,
    .name = "mock",
    .call_names = mock_backend_call_names,
    .call_name_count = DL_SYNC_OP_COUNT,
    .context_call_names = {"mockCtxGetCurrent", "mockCtxSetCurrent", "mockStreamGetCtx",
                           "mockPrimaryCtx", "mockCtxGetId"},
    .get_device = mock_get_device,
    .set_device = mock_set_device,
    .event_create = mock_event_create,
    .event_destroy = mock_event_destroy,
    .event_record = mock_event_record,
    .stream_wait = mock_stream_wait,
    .stream_wait_external = mock_stream_wait_external,
    .event_synchronize = mock_event_synchronize,
    .event_query = mock_event_query,
    .capture_info = mock_capture_info,
    .graph_retain = mock_graph_retain,
    .error_name = mock_error_name,
    .error_string = mock_error_string,
    .error_status = mock_error_status,
};

void mock_backend_use_contexts(int on) {
  mock_backend.get_context = on ? mock_get_context : NULL;
  mock_backend.set_context = on ? mock_set_context : NULL;
  mock_backend.stream_context = on ? mock_stream_context : NULL;
  mock_backend.primary_context = on ? mock_primary_context : NULL;
  mock_backend.context_id = on ? mock_context_id : NULL;
}

void expect_get_context(void *current, int code) {
  expect_function_call(mock_get_context);
  will_return(mock_get_context, current);
  will_return(mock_get_context, code);
}

void expect_set_context(void *context, int code) {
  expect_function_call(mock_set_context);
  expect_value(mock_set_context, context, context);
  will_return(mock_set_context, code);
}

void expect_stream_context(void *stream, void *context, int code) {
  expect_function_call(mock_stream_context);
  expect_value(mock_stream_context, stream, stream);
  will_return(mock_stream_context, context);
  will_return(mock_stream_context, code);
}

void expect_primary_context(int32_t device, void *context, int code) {
  expect_function_call(mock_primary_context);
  expect_value(mock_primary_context, device_id, device);
  will_return(mock_primary_context, context);
  will_return(mock_primary_context, code);
}

void expect_context_id(void *context, uint64_t id, int code) {
  expect_function_call(mock_context_id);
  expect_value(mock_context_id, context, context);
  will_return(mock_context_id, id);
  will_return(mock_context_id, code);
}

void expect_get_device(int32_t current, int code) {
  expect_function_call(mock_get_device);
  will_return(mock_get_device, current);
  will_return(mock_get_device, code);
}

void expect_set_device(int32_t device, int code) {
  expect_function_call(mock_set_device);
  expect_value(mock_set_device, device_id, device);
  will_return(mock_set_device, code);
}

void expect_event_create(void *event, int code) {
  expect_function_call(mock_event_create);
  will_return(mock_event_create, event);
  will_return(mock_event_create, code);
}

void expect_event_destroy(void *event, int code) {
  expect_function_call(mock_event_destroy);
  expect_value(mock_event_destroy, event, event);
  will_return(mock_event_destroy, code);
}

void expect_event_record(void *event, void *stream, int code) {
  expect_function_call(mock_event_record);
  expect_value(mock_event_record, event, event);
  expect_value(mock_event_record, stream, stream);
  will_return(mock_event_record, code);
}

void expect_stream_wait(void *stream, void *event, int code) {
  expect_function_call(mock_stream_wait);
  expect_value(mock_stream_wait, stream, stream);
  expect_value(mock_stream_wait, event, event);
  will_return(mock_stream_wait, code);
}

void expect_stream_wait_external(void *stream, void *event, int code) {
  expect_function_call(mock_stream_wait_external);
  expect_value(mock_stream_wait_external, stream, stream);
  expect_value(mock_stream_wait_external, event, event);
  will_return(mock_stream_wait_external, code);
}

void expect_event_query(void *event, int complete, int code) {
  expect_function_call(mock_event_query);
  expect_value(mock_event_query, event, event);
  will_return(mock_event_query, complete);
  will_return(mock_event_query, code);
}

void expect_capture_info(void *stream, int32_t status, uint64_t id, int code) {
  expect_function_call(mock_capture_info);
  expect_value(mock_capture_info, stream, stream);
  will_return(mock_capture_info, status);
  will_return(mock_capture_info, id);
  will_return(mock_capture_info, code);
}

void expect_graph_retain(void *stream, int code) {
  expect_function_call(mock_graph_retain);
  expect_value(mock_graph_retain, stream, stream);
  will_return(mock_graph_retain, code);
}

void mock_graph_destroy(void) {
  assert_non_null(retained_release);
  void (*release)(void *) = retained_release;
  retained_release = NULL;
  release(retained_object);
}

static const int32_t stream_device_types[] = {kDLCUDA, kDLCUDAHost, kDLCUDAManaged, kDLROCM,
                                              kDLROCMHost};

void mock_backend_install(void) {
  for (size_t i = 0; i < sizeof stream_device_types / sizeof stream_device_types[0]; i++)
    assert_int_equal(dl_sync_set_backend(stream_device_types[i], &mock_backend), DL_SYNC_OK);
}

void mock_backend_shutdown(void) {
  for (int32_t device = 0; device < 4; device++) {
    dl_sync_pool_stats stats;
    assert_int_equal(dl_sync_pool_stats_get(&mock_backend, device, &stats), DL_SYNC_OK);
    if (stats.idle == 0) continue;
    expect_function_calls(mock_event_destroy, (int)stats.idle);
    expect_any_count(mock_event_destroy, event, (int)stats.idle);
    will_return_count(mock_event_destroy, 0, (int)stats.idle);
  }
  assert_int_equal(dl_sync_shutdown(), DL_SYNC_OK);
  for (size_t i = 0; i < sizeof stream_device_types / sizeof stream_device_types[0]; i++)
    assert_int_equal(dl_sync_set_backend(stream_device_types[i], NULL), DL_SYNC_OK);
}

/* A failed check in a mock call leaves dlsync by cmocka's longjmp, in the middle of a call
   that may hold a lock (dl_sync_shutdown holds the caches' lock while it destroys events):
   every later test would wait on that lock until ctest's timeout. The first failure
   therefore ends the suite (cmocka's CMOCKA_TEST_ABORT; set it to 0 to see them all). */
static void stop_at_the_first_failure(void) {
#ifdef _WIN32
  if (getenv("CMOCKA_TEST_ABORT") == NULL) _putenv("CMOCKA_TEST_ABORT=1");
#else
  setenv("CMOCKA_TEST_ABORT", "1", 0);
#endif
}

int mock_suite_setup(void **state) {
  (void)state;
  stop_at_the_first_failure();
  mock_backend_install();
  return dl_sync_set_capture_policy(DL_SYNC_CAPTURE_STRICT);
}

int mock_suite_teardown(void **state) {
  (void)state;
  mock_backend_shutdown();
  return 0;
}

dl_sync_pool_stats mock_pool_stats(int32_t device) {
  dl_sync_pool_stats stats;
  assert_int_equal(dl_sync_pool_stats_get(&mock_backend, device, &stats), DL_SYNC_OK);
  return stats;
}
