/*
 * The HIP runtime backend (AMD platform). HIP documents re-recording a pending event as
 * undefined, so this backend sets DL_SYNC_BACKEND_QUERY_BEFORE_REUSE. External event
 * waits and graph user objects are used where the runtime has them (detected at
 * configure time: DL_SYNC_HIP_HAS_WAIT_EXTERNAL, DL_SYNC_HIP_HAS_USER_OBJECTS); without
 * them the capture-external case answers DL_SYNC_ENOTSUP. HIP has no legacy stream
 * handle: the null stream (0) is its legacy default stream.
 */
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__
#endif
#include <hip/hip_runtime_api.h>

#include "../internal.h"

static int hip_device_count(void *ctx, int *count) {
  (void)ctx;
  *count = 0;
  return (int)hipGetDeviceCount(count);
}

static int hip_get_device(void *ctx, int32_t *device_id) {
  (void)ctx;
  int device = 0;
  hipError_t error = hipGetDevice(&device);
  *device_id = device;
  return (int)error;
}

static int hip_set_device(void *ctx, int32_t device_id) {
  (void)ctx;
  return (int)hipSetDevice(device_id);
}

static int hip_event_create(void *ctx, void **event) {
  (void)ctx;
  return (int)hipEventCreateWithFlags((hipEvent_t *)event, hipEventDisableTiming);
}

static int hip_event_destroy(void *ctx, void *event) {
  (void)ctx;
  return (int)hipEventDestroy((hipEvent_t)event);
}

static int hip_event_record(void *ctx, void *event, void *stream) {
  (void)ctx;
  return (int)hipEventRecord((hipEvent_t)event, (hipStream_t)stream);
}

static int hip_stream_wait(void *ctx, void *stream, void *event) {
  (void)ctx;
  return (int)hipStreamWaitEvent((hipStream_t)stream, (hipEvent_t)event, 0);
}

#ifdef DL_SYNC_HIP_HAS_WAIT_EXTERNAL
static int hip_stream_wait_external(void *ctx, void *stream, void *event) {
  (void)ctx;
  return (int)hipStreamWaitEvent((hipStream_t)stream, (hipEvent_t)event, hipEventWaitExternal);
}
#endif

static int hip_event_synchronize(void *ctx, void *event) {
  (void)ctx;
  return (int)hipEventSynchronize((hipEvent_t)event);
}

static int hip_event_query(void *ctx, void *event, int *complete) {
  (void)ctx;
  hipError_t error = hipEventQuery((hipEvent_t)event);
  *complete = error == hipSuccess;
  return error == hipErrorNotReady ? 0 : (int)error;
}

static int hip_capture_info(void *ctx, void *stream, dl_sync_capture_info *out) {
  (void)ctx;
  hipStreamCaptureStatus status = hipStreamCaptureStatusNone;
  unsigned long long id = 0;
  hipError_t error = hipStreamGetCaptureInfo((hipStream_t)stream, &status, &id);
  out->status = (int32_t)status;
  out->id = id;
  return (int)error;
}

#ifdef DL_SYNC_HIP_HAS_USER_OBJECTS
static int hip_graph_retain(void *ctx, void *stream, void *object, void (*release)(void *)) {
  (void)ctx;
  hipStreamCaptureStatus status = hipStreamCaptureStatusNone;
  hipGraph_t graph = NULL;
  hipError_t error =
      hipStreamGetCaptureInfo_v2((hipStream_t)stream, &status, NULL, &graph, NULL, NULL);
  if (error == hipSuccess && status != hipStreamCaptureStatusActive)
    error = hipErrorStreamCaptureUnmatched;
  hipUserObject_t user_object = NULL;
  if (error == hipSuccess)
    error = hipUserObjectCreate(&user_object, object, release, 1, hipUserObjectNoDestructorSync);
  if (error != hipSuccess) {
    release(object);
    return (int)error;
  }
  error = hipGraphRetainUserObject(graph, user_object, 1, hipGraphUserObjectMove);
  if (error != hipSuccess) hipUserObjectRelease(user_object, 1); /* runs release */
  return (int)error;
}
#endif

static const char *hip_error_name(void *ctx, int code) {
  (void)ctx;
  return hipGetErrorName((hipError_t)code);
}

static const char *hip_error_string(void *ctx, int code) {
  (void)ctx;
  return hipGetErrorString((hipError_t)code);
}

static int hip_error_status(void *ctx, int code) {
  (void)ctx;
  switch (code) {
    case hipErrorNotInitialized:
    case hipErrorInsufficientDriver:
    case hipErrorNoDevice:
    case hipErrorInvalidDevice: /* what older ROCm answers without a device */
      return DL_SYNC_ENODEV;
    case hipErrorOutOfMemory:
      return DL_SYNC_ENOMEM;
    default:
      return code >= hipErrorStreamCaptureUnsupported && code <= hipErrorStreamCaptureWrongThread
                 ? DL_SYNC_ECAPTURE
                 : DL_SYNC_EBACKEND;
  }
}

static const dl_sync_backend hip_backend = {
    .name = "hip",
    .flags = DL_SYNC_BACKEND_QUERY_BEFORE_REUSE,
    .call_names =
        {
            [DL_SYNC_OP_DEVICE_COUNT] = "hipGetDeviceCount",
            [DL_SYNC_OP_GET_DEVICE] = "hipGetDevice",
            [DL_SYNC_OP_SET_DEVICE] = "hipSetDevice",
            [DL_SYNC_OP_EVENT_CREATE] = "hipEventCreateWithFlags",
            [DL_SYNC_OP_EVENT_DESTROY] = "hipEventDestroy",
            [DL_SYNC_OP_EVENT_RECORD] = "hipEventRecord",
            [DL_SYNC_OP_STREAM_WAIT] = "hipStreamWaitEvent",
            [DL_SYNC_OP_STREAM_WAIT_EXTERNAL] = "hipStreamWaitEvent(hipEventWaitExternal)",
            [DL_SYNC_OP_EVENT_SYNCHRONIZE] = "hipEventSynchronize",
            [DL_SYNC_OP_EVENT_QUERY] = "hipEventQuery",
            [DL_SYNC_OP_CAPTURE_INFO] = "hipStreamGetCaptureInfo",
            [DL_SYNC_OP_GRAPH_RETAIN] = "hipGraphRetainUserObject",
        },
    .device_count = hip_device_count,
    .get_device = hip_get_device,
    .set_device = hip_set_device,
    .event_create = hip_event_create,
    .event_destroy = hip_event_destroy,
    .event_record = hip_event_record,
    .stream_wait = hip_stream_wait,
#ifdef DL_SYNC_HIP_HAS_WAIT_EXTERNAL
    .stream_wait_external = hip_stream_wait_external,
#endif
    .event_synchronize = hip_event_synchronize,
    .event_query = hip_event_query,
    .capture_info = hip_capture_info,
#ifdef DL_SYNC_HIP_HAS_USER_OBJECTS
    .graph_retain = hip_graph_retain,
#endif
    .error_name = hip_error_name,
    .error_string = hip_error_string,
    .error_status = hip_error_status,
};

const dl_sync_backend *dl_sync_hip_backend(void) { return &hip_backend; }
