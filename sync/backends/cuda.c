/*
 * The CUDA runtime backend. dlsync is compiled without --default-stream per-thread, so
 * handle 0 would mean the legacy stream here; dlsync passes cudaStreamLegacy (1) and
 * cudaStreamPerThread (2) explicitly instead, which mean the same in any translation unit.
 */
#include <cuda_runtime_api.h>

#include "../internal.h"

static int cuda_device_count(void *ctx, int *count) {
  (void)ctx;
  *count = 0; /* cudaErrorInsufficientDriver leaves it unwritten */
  return (int)cudaGetDeviceCount(count);
}

static int cuda_get_device(void *ctx, int32_t *device_id) {
  (void)ctx;
  int device = 0;
  cudaError_t error = cudaGetDevice(&device);
  *device_id = device;
  return (int)error;
}

static int cuda_set_device(void *ctx, int32_t device_id) {
  (void)ctx;
  return (int)cudaSetDevice(device_id);
}

static int cuda_event_create(void *ctx, void **event) {
  (void)ctx;
  return (int)cudaEventCreateWithFlags((cudaEvent_t *)event, cudaEventDisableTiming);
}

static int cuda_event_destroy(void *ctx, void *event) {
  (void)ctx;
  return (int)cudaEventDestroy((cudaEvent_t)event);
}

static int cuda_event_record(void *ctx, void *event, void *stream) {
  (void)ctx;
  return (int)cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream);
}

static int cuda_stream_wait(void *ctx, void *stream, void *event) {
  (void)ctx;
  return (int)cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)event, cudaEventWaitDefault);
}

static int cuda_stream_wait_external(void *ctx, void *stream, void *event) {
  (void)ctx;
  return (int)cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)event, cudaEventWaitExternal);
}

static int cuda_event_synchronize(void *ctx, void *event) {
  (void)ctx;
  return (int)cudaEventSynchronize((cudaEvent_t)event);
}

static int cuda_event_query(void *ctx, void *event, int *complete) {
  (void)ctx;
  cudaError_t error = cudaEventQuery((cudaEvent_t)event);
  *complete = error == cudaSuccess;
  return error == cudaErrorNotReady ? 0 : (int)error;
}

static int cuda_capture_info(void *ctx, void *stream, dl_sync_capture_info *out) {
  (void)ctx;
  enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  cudaError_t error =
      cudaStreamGetCaptureInfo((cudaStream_t)stream, &status, &id, NULL, NULL, NULL, NULL);
  out->status = (int32_t)status;
  out->id = id;
  return (int)error;
}

/* User-object destructors run on a runtime thread and may not call CUDA: release only
   gives the event back to dlsync's pool. */
static int cuda_graph_retain(void *ctx, void *stream, void *object, void (*release)(void *)) {
  (void)ctx;
  enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaGraph_t graph = NULL;
  cudaError_t error =
      cudaStreamGetCaptureInfo((cudaStream_t)stream, &status, NULL, &graph, NULL, NULL, NULL);
  if (error == cudaSuccess && status != cudaStreamCaptureStatusActive)
    error = cudaErrorStreamCaptureUnmatched;
  cudaUserObject_t user_object = NULL;
  if (error == cudaSuccess)
    error = cudaUserObjectCreate(&user_object, object, release, 1, cudaUserObjectNoDestructorSync);
  if (error != cudaSuccess) {
    release(object);
    return (int)error;
  }
  error = cudaGraphRetainUserObject(graph, user_object, 1, cudaGraphUserObjectMove);
  if (error != cudaSuccess) cudaUserObjectRelease(user_object, 1); /* runs release */
  return (int)error;
}

static const char *cuda_error_name(void *ctx, int code) {
  (void)ctx;
  return cudaGetErrorName((cudaError_t)code);
}

static const char *cuda_error_string(void *ctx, int code) {
  (void)ctx;
  return cudaGetErrorString((cudaError_t)code);
}

static int cuda_error_status(void *ctx, int code) {
  (void)ctx;
  switch (code) {
    case cudaErrorInitializationError:
    case cudaErrorStubLibrary:
    case cudaErrorInsufficientDriver:
    case cudaErrorNoDevice:
    case cudaErrorSystemDriverMismatch:
      return DL_SYNC_ENODEV;
    case cudaErrorMemoryAllocation:
      return DL_SYNC_ENOMEM;
    default:
      return code >= cudaErrorStreamCaptureUnsupported && code <= cudaErrorStreamCaptureWrongThread
                 ? DL_SYNC_ECAPTURE
                 : DL_SYNC_EBACKEND;
  }
}

static const dl_sync_backend cuda_backend = {
    .name = "cuda",
    .call_names =
        {
            [DL_SYNC_OP_DEVICE_COUNT] = "cudaGetDeviceCount",
            [DL_SYNC_OP_GET_DEVICE] = "cudaGetDevice",
            [DL_SYNC_OP_SET_DEVICE] = "cudaSetDevice",
            [DL_SYNC_OP_EVENT_CREATE] = "cudaEventCreateWithFlags",
            [DL_SYNC_OP_EVENT_DESTROY] = "cudaEventDestroy",
            [DL_SYNC_OP_EVENT_RECORD] = "cudaEventRecord",
            [DL_SYNC_OP_STREAM_WAIT] = "cudaStreamWaitEvent",
            [DL_SYNC_OP_STREAM_WAIT_EXTERNAL] = "cudaStreamWaitEvent(cudaEventWaitExternal)",
            [DL_SYNC_OP_EVENT_SYNCHRONIZE] = "cudaEventSynchronize",
            [DL_SYNC_OP_EVENT_QUERY] = "cudaEventQuery",
            [DL_SYNC_OP_CAPTURE_INFO] = "cudaStreamGetCaptureInfo",
            [DL_SYNC_OP_GRAPH_RETAIN] = "cudaGraphRetainUserObject",
        },
    .device_count = cuda_device_count,
    .get_device = cuda_get_device,
    .set_device = cuda_set_device,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .stream_wait = cuda_stream_wait,
    .stream_wait_external = cuda_stream_wait_external,
    .event_synchronize = cuda_event_synchronize,
    .event_query = cuda_event_query,
    .capture_info = cuda_capture_info,
    .graph_retain = cuda_graph_retain,
    .error_name = cuda_error_name,
    .error_string = cuda_error_string,
    .error_status = cuda_error_status,
};

const dl_sync_backend *dl_sync_cuda_backend(void) { return &cuda_backend; }
