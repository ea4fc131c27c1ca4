/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CUDA runtime backend, an explicit choice (the default CUDA backend speaks the
 * driver API, cuda_driver.c). libcudart is the one bound, named or loaded (see loader.h);
 * entry points are chosen by its version (docs/runtimes.md). dlsync passes
 * cudaStreamLegacy (1) and cudaStreamPerThread (2) explicitly, which mean the same to
 * every caller whatever its --default-stream setting.
 */
#include <stdio.h>
#include <string.h>

#include "cuda_api.h"
#include "loader.h"
#include "user_object.h"

static int resolve(dl_sync__runtime *rt);

static dl_sync__runtime runtime = {.family = "CUDA runtime",
                                   .env = "DL_SYNC_CUDART",
                                   .file_prefix = DL_SYNC__CUDART_FILE_PREFIX,
                                   .version_call = "cudaRuntimeGetVersion",
                                   .resolve = resolve,
                                   .lock = DL_SYNC__MUTEX_INIT};

static struct {
/* a declarator: ret is a type and params a parameter list, which take no parentheses */
#define DL_SYNC__CUDA_POINTER(ret, name, params) \
  ret(*name) params; /* NOLINT(bugprone-macro-parentheses) */
  DL_SYNC__CUDA_CALLS(DL_SYNC__CUDA_POINTER)
#undef DL_SYNC__CUDA_POINTER
  dl_sync__cuda_capture_info_13 capture_info_13; /* CUDA 13 */
  dl_sync__cuda_capture_info_12 capture_info_12; /* CUDA 12 */
  dl_sync__cuda_stream_get_id stream_get_id;     /* cudaStreamGetId, 12.0; NULL if absent */
} api;

static int resolve(dl_sync__runtime *rt) {
  (void)rt;
#define DL_SYNC__CUDA_RESOLVE(ret, name, params)                                  \
  if (!dl_sync__runtime_bind(&runtime, #name, &api.name, sizeof api.name)) {      \
    return dl_sync__runtime_reject(&runtime, "%s lacks %s", runtime.path, #name); \
  }
  DL_SYNC__CUDA_CALLS(DL_SYNC__CUDA_RESOLVE)
#undef DL_SYNC__CUDA_RESOLVE
  if (api.cudaRuntimeGetVersion(&runtime.version) != cudaSuccess || runtime.version < 12000) {
    return dl_sync__runtime_reject(
        &runtime, "%s is CUDA runtime version %d: dlsync needs 12000 (12.0) or newer", runtime.path,
        runtime.version);
  }
  const char *name =
      runtime.version >= 13000 ? "cudaStreamGetCaptureInfo" : "cudaStreamGetCaptureInfo_v2";
  void *query = dl_sync__runtime_symbol(&runtime, name);
  if (query == NULL) {
    return dl_sync__runtime_reject(&runtime, "%s lacks %s", runtime.path, name);
  }
  if (runtime.version >= 13000)
    memcpy(&api.capture_info_13, &query, sizeof query);
  else
    memcpy(&api.capture_info_12, &query, sizeof query);
  if (!dl_sync__runtime_bind(&runtime, "cudaStreamGetId", &api.stream_get_id,
                             sizeof api.stream_get_id))
    api.stream_get_id = NULL;
  return 0;
}

/* The thread's last error is the caller's: one dlsync turned into a status is consumed.
   cudaErrorNotReady is not recorded as an error, so a query's "not ready" leaves it alone. */
static int consumed(cudaError_t code) {
  if (code != cudaSuccess && code != cudaErrorNotReady) api.cudaGetLastError();
  return (int)code;
}

static int cuda_device_count(void *ctx, int *count) {
  (void)ctx;
  *count = 0; /* cudaErrorInsufficientDriver leaves it unwritten */
  DL_SYNC__NEED_RUNTIME(&runtime);
  return consumed(api.cudaGetDeviceCount(count));
}

static int cuda_get_device(void *ctx, int32_t *device_id) {
  (void)ctx;
  int device = 0;
  *device_id = 0;
  DL_SYNC__NEED_RUNTIME(&runtime);
  cudaError_t error = api.cudaGetDevice(&device);
  *device_id = device;
  return consumed(error);
}

static int cuda_set_device(void *ctx, int32_t device_id) {
  (void)ctx;
  DL_SYNC__NEED_RUNTIME(&runtime);
  return consumed(api.cudaSetDevice(device_id));
}

static int cuda_event_create(void *ctx, void **event) {
  (void)ctx;
  DL_SYNC__NEED_RUNTIME(&runtime);
  return consumed(api.cudaEventCreateWithFlags((cudaEvent_t *)event, cudaEventDisableTiming));
}

static int cuda_event_destroy(void *ctx, void *event) {
  (void)ctx;
  DL_SYNC__NEED_RUNTIME(&runtime);
  return consumed(api.cudaEventDestroy((cudaEvent_t)event));
}

static int cuda_event_record(void *ctx, void *event, void *stream) {
  (void)ctx;
  DL_SYNC__NEED_RUNTIME(&runtime);
  return consumed(api.cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream));
}

/* cudaStreamGetId: "The Id is unique for the life of the program". 0 from a runtime
   without it. */
static int cuda_stream_id(void *ctx, void *stream, uint64_t *id) {
  (void)ctx;
  *id = 0;
  DL_SYNC__NEED_RUNTIME(&runtime);
  if (api.stream_get_id == NULL) return 0;
  unsigned long long value = 0;
  cudaError_t code = api.stream_get_id((cudaStream_t)stream, &value);
  *id = code == cudaSuccess ? value : 0;
  return consumed(code);
}

static int cuda_stream_wait(void *ctx, void *stream, void *event) {
  (void)ctx;
  DL_SYNC__NEED_RUNTIME(&runtime);
  return consumed(
      api.cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)event, cudaEventWaitDefault));
}

static int cuda_stream_wait_external(void *ctx, void *stream, void *event) {
  (void)ctx;
  DL_SYNC__NEED_RUNTIME(&runtime);
  return consumed(
      api.cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)event, cudaEventWaitExternal));
}

/* Queries and synchronizations run in the relaxed capture mode (dl_sync__relaxed), never on
   an event recorded in a capture. */
static int query_event(void *event) {
  return api.cudaEventQuery((cudaEvent_t)event);
}

static int synchronize_event(void *event) {
  return api.cudaEventSynchronize((cudaEvent_t)event);
}

static int relaxed(int (*call)(void *event), void *event) {
  return dl_sync__relaxed(api.cudaThreadExchangeStreamCaptureMode, cudaStreamCaptureModeRelaxed,
                          call, event, cudaErrorNotReady);
}

static int cuda_event_synchronize(void *ctx, void *event) {
  (void)ctx;
  DL_SYNC__NEED_RUNTIME(&runtime);
  return consumed(relaxed(synchronize_event, event));
}

static int cuda_event_query(void *ctx, void *event, int *complete) {
  (void)ctx;
  *complete = 0;
  DL_SYNC__NEED_RUNTIME(&runtime);
  cudaError_t error = relaxed(query_event, event);
  *complete = error == cudaSuccess;
  return error == cudaErrorNotReady ? 0 : consumed(error);
}

static cudaError_t capture_query(cudaStream_t stream, int *status, unsigned long long *id,
                                 cudaGraph_t *graph) {
  return api.capture_info_13 != NULL
             ? api.capture_info_13(stream, status, id, graph, NULL, NULL, NULL)
             : api.capture_info_12(stream, status, id, graph, NULL, NULL);
}

static int cuda_capture_info(void *ctx, void *stream, dl_sync_capture_info *out) {
  (void)ctx;
  DL_SYNC__NEED_RUNTIME(&runtime);
  int status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  cudaError_t error = capture_query((cudaStream_t)stream, &status, &id, NULL);
  out->status = (int32_t)status;
  out->id = id;
  return consumed(error);
}

static int cuda_capturing_graph(void *stream, void **graph) {
  if (!dl_sync__runtime_find(&runtime, 0)) return DL_SYNC__NO_RUNTIME;
  int status = cudaStreamCaptureStatusNone;
  cudaGraph_t captured = NULL;
  cudaError_t error = capture_query((cudaStream_t)stream, &status, NULL, &captured);
  if (error == cudaSuccess && status != cudaStreamCaptureStatusActive)
    error = cudaErrorStreamCaptureUnmatched;
  *graph = captured;
  return consumed(error);
}

/* User-object destructors run on a runtime thread and may not call CUDA: release only
   gives the event back to dlsync's pool. */
static int cuda_user_object_create(void **user_object, void *object, void (*release)(void *)) {
  cudaUserObject_t made = NULL;
  cudaError_t error =
      api.cudaUserObjectCreate(&made, object, release, 1, cudaUserObjectNoDestructorSync);
  *user_object = made;
  return consumed(error);
}

static int cuda_move_to_graph(void *graph, void *user_object) {
  return consumed(api.cudaGraphRetainUserObject((cudaGraph_t)graph, (cudaUserObject_t)user_object,
                                                1, cudaGraphUserObjectMove));
}

static void cuda_user_object_drop(void *user_object) {
  api.cudaUserObjectRelease((cudaUserObject_t)user_object, 1);
  api.cudaGetLastError();
}

static int cuda_graph_retain(void *ctx, void *stream, void *object, void (*release)(void *)) {
  (void)ctx;
  static const dl_sync__user_object_calls calls = {cuda_capturing_graph, cuda_user_object_create,
                                                   cuda_move_to_graph, cuda_user_object_drop};
  return dl_sync__graph_retain_with(&calls, stream, object, release);
}

static const char *cuda_error_name(void *ctx, int code) {
  (void)ctx;
  if (code == DL_SYNC__NO_RUNTIME) return "no CUDA runtime";
  return dl_sync__runtime_find(&runtime, 0) ? api.cudaGetErrorName(code) : "?";
}

static const char *cuda_error_string(void *ctx, int code) {
  (void)ctx;
  if (code == DL_SYNC__NO_RUNTIME) return runtime.why;
  return dl_sync__runtime_find(&runtime, 0) ? api.cudaGetErrorString(code) : "?";
}

static int cuda_error_status(void *ctx, int code) {
  (void)ctx;
  switch (code) {
    case DL_SYNC__NO_RUNTIME:
    case cudaErrorInitializationError:
    case cudaErrorStubLibrary:
    case cudaErrorInsufficientDriver:
    case cudaErrorNoDevice:
    case cudaErrorSystemDriverMismatch:
      return DL_SYNC_ENODEV;
    case cudaErrorMemoryAllocation:
      return DL_SYNC_ENOMEM;
    default:
      return dl_sync__other_error_status(code, cudaErrorStreamCaptureUnsupported,
                                         cudaErrorStreamCaptureWrongThread);
  }
}

static const char *const cuda_backend_call_names[DL_SYNC_OP_COUNT] = {
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
};

static const dl_sync_backend cuda_backend = {
    DL_SYNC_BACKEND_INIT,
    .name = "cudart",
    .call_names = cuda_backend_call_names,
    .call_name_count = DL_SYNC_OP_COUNT,
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
    .stream_id = cuda_stream_id,
};

/* Asking for the backend is no use of it: a runtime is found at its first call, so that a
   framework can still bind its own. */
const dl_sync_backend *dl_sync_cudart_backend(void) {
  return &cuda_backend;
}

dl_sync__runtime *dl_sync__cudart_of(const dl_sync_backend *backend) {
  return backend == &cuda_backend ? &runtime : NULL;
}
