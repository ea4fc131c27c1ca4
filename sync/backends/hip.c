/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HIP runtime backend (AMD platform). libamdhip64 is the one bound, named or loaded
 * in the process (see loader.h), never loaded by dlsync: a ROCm stream means a framework
 * loaded it. What it offers is chosen by its version (docs/runtimes.md):
 * - the null stream's capture state: hipStreamGetCaptureInfo fails on it in 5.2 to 5.4,
 *   hipStreamIsCapturing answers there;
 * - graph user objects from 5.3, external event waits from 6.4.2: stream_wait_external
 *   and graph_retain stay unavailable without them, and the capture-external case answers
 *   DL_SYNC_ENOTSUP. The wait node is made with the graph calls, never with
 *   hipEventWaitExternal, whose implementation corrupts the heap (see
 *   hip_stream_wait_external);
 * - whether the thread's last error keeps every status or errors only is asked of the
 *   runtime itself (6.4 answers either way, see stores_errors_only).
 * Events are re-recorded without a query first: hipStreamWaitEvent binds the record the
 * event holds at call time, and querying an event recorded on a now-capturing stream
 * invalidates that capture from 6.2 to 7.2.0. A pending release's event is recorded on a
 * stream of dlsync's own (own_stream_create, on every version) and queried or synchronized
 * in the relaxed capture interaction mode; a tensor's event is synchronized only once
 * event_synchronize_disturbs said its producer's stream neither captures nor is gone (HIP
 * reads it from 5.7). dlsync names the legacy
 * default stream by the null stream (0), which every version takes, never by hipStreamLegacy
 * (refused by 6.2, mishandled by early 6.3).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hip_api.h"
#include "loader.h"
#include "user_object.h"

static int resolve(dl_sync__runtime *rt);

static dl_sync__runtime runtime = {.family = "HIP runtime",
                                   .env = "DL_SYNC_HIP",
                                   .file_prefix = DL_SYNC__HIP_FILE_PREFIX,
                                   .version_call = "hipRuntimeGetVersion",
                                   .resolve = resolve,
                                   .lock = DL_SYNC__MUTEX_INIT};

static struct {
/* a declarator: ret is a type and params a parameter list, which take no parentheses */
#define DL_SYNC__HIP_POINTER(ret, name, params) \
  ret(*name) params; /* NOLINT(bugprone-macro-parentheses) */
  DL_SYNC__HIP_CALLS(DL_SYNC__HIP_POINTER)
  DL_SYNC__HIP_USER_OBJECT_CALLS(DL_SYNC__HIP_POINTER)
  DL_SYNC__HIP_EXTERNAL_WAIT_CALLS(DL_SYNC__HIP_POINTER)
#undef DL_SYNC__HIP_POINTER
  int null_stream_is_capturing; /* 5.2 to 5.4: ask hipStreamIsCapturing for the null stream */
  int records_every_status;     /* every call's status becomes the last error (up to 6.4) */
  int user_objects;             /* 5.3: hipUserObjectCreate, hipGraphRetainUserObject */
  int external_waits;           /* 6.4.2: the runtime has external event waits */
  dl_sync__hip_stream_get_id stream_get_id; /* 7.1: hipStreamGetId; NULL before */
} api;

/* HIP_VERSION: major * 10000000 + minor * 100000 + patch (hip_version.h). */
static int version_at_least(int major, int minor) {
  return runtime.version >= major * 10000000 + minor * 100000;
}

/* Whether the runtime stores errors only as the thread's last error, neither hipSuccess nor
   hipErrorNotReady (HIP_RETURN: clr rocm-6.2.0 hipamd/src/hip_internal.hpp stores every
   status; 7.0 errors only; 6.4 errors only when DEBUG_HIP_7_PREVIEW has bit 0x1, clr
   amd-staging 9faaf20a, which the version does not show). Asked by behaviour: a success
   leaves an error set before it where errors only are stored. The error is the caller's
   when there is one (then it stays, or the success overwrote it as any call would), else
   one made here (hipThreadExchangeStreamCaptureMode(NULL): hipErrorInvalidValue in every
   version) and cleared after. */
static int stores_errors_only(void) {
  hipError_t before = api.hipPeekAtLastError();
  hipError_t marker = before != hipSuccess ? before : api.hipThreadExchangeStreamCaptureMode(NULL);
  if (marker == hipSuccess) return version_at_least(7, 0); /* no error to tell them apart */
  int version = 0;
  api.hipRuntimeGetVersion(&version);
  hipError_t after = api.hipPeekAtLastError();
  if (before == hipSuccess) api.hipGetLastError(); /* the caller had none: leave none */
  return after == marker;
}

static int resolve(dl_sync__runtime *rt) {
  (void)rt;
#define DL_SYNC__HIP_RESOLVE(ret, name, params)                                   \
  if (!dl_sync__runtime_bind(&runtime, #name, &api.name, sizeof api.name)) {      \
    return dl_sync__runtime_reject(&runtime, "%s lacks %s", runtime.path, #name); \
  }
  DL_SYNC__HIP_CALLS(DL_SYNC__HIP_RESOLVE)
#undef DL_SYNC__HIP_RESOLVE
  hipError_t code = api.hipRuntimeGetVersion(&runtime.version);
  if (code != hipSuccess || !version_at_least(5, 0)) {
    api.hipGetLastError(); /* the thread's last error stays the caller's */
    if (code != hipSuccess)
      return dl_sync__runtime_reject(&runtime, "%s answered hipRuntimeGetVersion with %d",
                                     runtime.path, (int)code);
    return dl_sync__runtime_reject(&runtime,
                                   "%s is HIP runtime version %d: dlsync needs 5.0 or newer",
                                   runtime.path, runtime.version);
  }
  api.null_stream_is_capturing = version_at_least(5, 2) && !version_at_least(5, 5);
  api.records_every_status = !stores_errors_only();
  int user_objects = version_at_least(5, 3);
#define DL_SYNC__HIP_OPTIONAL(ret, name, params) \
  user_objects = user_objects && dl_sync__runtime_bind(&runtime, #name, &api.name, sizeof api.name);
  DL_SYNC__HIP_USER_OBJECT_CALLS(DL_SYNC__HIP_OPTIONAL)
#undef DL_SYNC__HIP_OPTIONAL
  api.user_objects = user_objects;
  /* hipEventRecordWithFlags came with the external waits (6.4.2 CHANGELOG): the version
     cannot tell 6.4.2 from 6.4.1. */
  int external_waits = dl_sync__runtime_symbol(&runtime, "hipEventRecordWithFlags") != NULL;
#define DL_SYNC__HIP_OPTIONAL(ret, name, params) \
  external_waits =                               \
      external_waits && dl_sync__runtime_bind(&runtime, #name, &api.name, sizeof api.name);
  DL_SYNC__HIP_EXTERNAL_WAIT_CALLS(DL_SYNC__HIP_OPTIONAL)
#undef DL_SYNC__HIP_OPTIONAL
  api.external_waits = external_waits;
  if (!dl_sync__runtime_bind(&runtime, "hipStreamGetId", &api.stream_get_id,
                             sizeof api.stream_get_id))
    api.stream_get_id = NULL;
  return 0;
}

/* The thread's last error is the caller's: one dlsync turned into a status is consumed.
   Up to ROCm 6 every call's status is stored (hipErrorNotReady too); ROCm 7 stores
   errors only, as CUDA does. */
static int consumed(hipError_t code) {
  if (code != hipSuccess && (code != hipErrorNotReady || api.records_every_status))
    api.hipGetLastError();
  return (int)code;
}

static int hip_device_count(void *ctx, int *count) {
  (void)ctx;
  *count = 0;
  DL_SYNC__NEED_RUNTIME(&runtime);
  return consumed(api.hipGetDeviceCount(count));
}

static int hip_get_device(void *ctx, int32_t *device_id) {
  (void)ctx;
  int device = 0;
  *device_id = 0;
  DL_SYNC__NEED_RUNTIME(&runtime);
  hipError_t error = api.hipGetDevice(&device);
  *device_id = device;
  return consumed(error);
}

static int hip_set_device(void *ctx, int32_t device_id) {
  (void)ctx;
  DL_SYNC__NEED_RUNTIME(&runtime);
  return consumed(api.hipSetDevice(device_id));
}

static int hip_event_create(void *ctx, void **event) {
  (void)ctx;
  DL_SYNC__NEED_RUNTIME(&runtime);
  return consumed(api.hipEventCreateWithFlags((hipEvent_t *)event, hipEventDisableTiming));
}

static int hip_event_destroy(void *ctx, void *event) {
  (void)ctx;
  DL_SYNC__NEED_RUNTIME(&runtime);
  return consumed(api.hipEventDestroy((hipEvent_t)event));
}

static int hip_event_record(void *ctx, void *event, void *stream) {
  (void)ctx;
  DL_SYNC__NEED_RUNTIME(&runtime);
  return consumed(api.hipEventRecord((hipEvent_t)event, (hipStream_t)stream));
}

static int hip_stream_wait(void *ctx, void *stream, void *event) {
  (void)ctx;
  DL_SYNC__NEED_RUNTIME(&runtime);
  return consumed(api.hipStreamWaitEvent((hipStream_t)stream, (hipEvent_t)event, 0));
}

/* An external event-wait node in the stream's capture, made with the graph calls: its
   dependencies are the stream's (hipStreamGetCaptureInfo_v2, copied at once: the array is
   the stream's own), and it becomes the stream's only one
   (hipStreamUpdateCaptureDependencies with hipStreamSetCaptureDependencies; clr rocm-6.2.0
   and 152c44df hipamd/src/hip_graph.cpp hipGraphAddEventWaitNode,
   ihipStreamUpdateCaptureDependencies). hipStreamWaitEvent with hipEventWaitExternal is
   never used: it hands the stream's node pointers to hip::Graph::AddExternalEventWaitNode
   as GraphNode objects (clr d3901a76 hipamd/src/hip_stream.cpp hipStreamWaitEvent_common),
   which corrupts the heap once the stream has a dependency, in every source read from 6.4.2
   to 7.x. The node waits on the record the event holds at each launch (clr rocm-6.2.0
   hip_graph_internal.hpp GraphEventWaitNode::CreateCommand, hip_event.cpp
   Event::streamWaitCommand), as an external wait does. */
static int hip_stream_wait_external(void *ctx, void *stream, void *event) {
  (void)ctx;
  DL_SYNC__NEED_RUNTIME(&runtime);
  int status = hipStreamCaptureStatusNone;
  hipGraph_t graph = NULL;
  const hipGraphNode_t *deps = NULL;
  size_t count = 0;
  hipError_t error =
      api.hipStreamGetCaptureInfo_v2((hipStream_t)stream, &status, NULL, &graph, &deps, &count);
  if (error == hipSuccess && status != hipStreamCaptureStatusActive)
    error = hipErrorStreamCaptureUnmatched;
  if (error != hipSuccess) return consumed(error);
  /* an array of handles, which are pointers by definition */
  size_t bytes = count * sizeof(hipGraphNode_t); /* NOLINT(bugprone-sizeof-expression) */
  hipGraphNode_t few[8];
  hipGraphNode_t *copy = count <= 8 ? few : malloc(bytes);
  if (copy == NULL) return hipErrorOutOfMemory; /* no runtime call failed */
  if (count != 0) memcpy(copy, deps, bytes);
  hipGraphNode_t node = NULL;
  error = api.hipGraphAddEventWaitNode(&node, graph, copy, count, (hipEvent_t)event);
  if (copy != few) free(copy);
  if (error == hipSuccess)
    error = api.hipStreamUpdateCaptureDependencies((hipStream_t)stream, &node, 1,
                                                   hipStreamSetCaptureDependencies);
  return consumed(error);
}

/* Queries and synchronizations run in the relaxed capture mode (dl_sync__relaxed): there a
   query or synchronization invalidates no other thread's global-mode capture (clr rocm-6.2.0
   hipamd/src/hip_stream.cpp StreamCaptureOngoing; 7.x hip_event.cpp
   checkEventCaptureRestrictions); hipThreadExchangeStreamCaptureMode sets the calling
   thread's mode (a thread-local, hip_graph.cpp). */
static int query_event(void *event) {
  return api.hipEventQuery((hipEvent_t)event);
}

static int synchronize_event(void *event) {
  return api.hipEventSynchronize((hipEvent_t)event);
}

static int relaxed(int (*call)(void *event), void *event) {
  return dl_sync__relaxed(api.hipThreadExchangeStreamCaptureMode, hipStreamCaptureModeRelaxed, call,
                          event, hipErrorNotReady);
}

static int hip_event_synchronize(void *ctx, void *event) {
  (void)ctx;
  DL_SYNC__NEED_RUNTIME(&runtime);
  return consumed(relaxed(synchronize_event, event));
}

static int hip_event_query(void *ctx, void *event, int *complete) {
  (void)ctx;
  *complete = 0;
  DL_SYNC__NEED_RUNTIME(&runtime);
  hipError_t error = relaxed(query_event, event);
  *complete = error == hipSuccess;
  consumed(error);
  return error == hipErrorNotReady ? 0 : (int)error;
}

/* The stream of dlsync's own that a deferred release's event is recorded on (dlsync/backend.h
   own_stream_create): from 5.7 hipEventSynchronize, and from 6.2 hipEventQuery too, read
   the event's last recording stream without validating it, and from 6.2 to 7.2.0 (7.11 in
   TheRock) invalidate its capture when it captures now, in any interaction mode (clr
   rocm-6.2.0 hip_event.cpp hipEventSynchronize, ihipEventQuery): no version number tells
   which rule a build has (docs/runtimes.md), so dlsync never asks about an event recorded
   on a stream it does not own, on every version. Non-blocking: the null stream's work never
   waits for it, nor it for the null stream's. hipStreamGetCaptureInfo_v2 validates its
   handle in every version read (5.5 on: hipErrorContextIsDestroyed; clr rocm-6.2.0
   hip_graph.cpp), so the check reads no stream a device reset destroyed. */
static int hip_own_stream_create(void *ctx, void **stream) {
  (void)ctx;
  DL_SYNC__NEED_RUNTIME(&runtime);
  return consumed(api.hipStreamCreateWithFlags((hipStream_t *)stream, hipStreamNonBlocking));
}

static int hip_own_stream_check(void *ctx, void *stream) {
  (void)ctx;
  DL_SYNC__NEED_RUNTIME(&runtime);
  int status = hipStreamCaptureStatusNone;
  return consumed(
      api.hipStreamGetCaptureInfo_v2((hipStream_t)stream, &status, NULL, NULL, NULL, NULL));
}

static int hip_own_stream_destroy(void *ctx, void *stream) {
  (void)ctx;
  DL_SYNC__NEED_RUNTIME(&runtime);
  return consumed(api.hipStreamDestroy((hipStream_t)stream));
}

/* A tensor's event is recorded on the producer's stream, which dlsync does not own; from
   5.7 hipEventSynchronize reads it without validating it, and from 6.2 to 7.2.0 invalidates
   its capture (the same clr lines): disturbs while it captures, or when
   hipStreamGetCaptureInfo_v2, which validates its handle, refuses it (destroyed). Not
   through the own stream: hipStreamWaitEvent reads the event's recording stream too (clr
   rocm-5.7.0 to rocm-6.1.0 hip_stream.cpp hipStreamWaitEvent_common, unvalidated). The null
   stream is exempt from those checks in every version; another thread's per-thread stream
   cannot be named here (hipStreamPerThread is the asking thread's own). */
static int hip_event_synchronize_disturbs(void *ctx, void *stream, int *disturbs) {
  (void)ctx;
  int unnameable = *disturbs;
  *disturbs = 1;
  DL_SYNC__NEED_RUNTIME(&runtime);
  if (!version_at_least(5, 7) || (stream == NULL && !unnameable)) {
    *disturbs = 0;
    return 0;
  }
  if (unnameable) return 0; /* another thread's per-thread stream: HIP would read it */
  int status = hipStreamCaptureStatusNone;
  hipError_t error =
      api.hipStreamGetCaptureInfo_v2((hipStream_t)stream, &status, NULL, NULL, NULL, NULL);
  consumed(error);
  *disturbs = error != hipSuccess || status != hipStreamCaptureStatusNone;
  return 0;
}

static int hip_capture_info(void *ctx, void *stream, dl_sync_capture_info *out) {
  (void)ctx;
  DL_SYNC__NEED_RUNTIME(&runtime);
  int status = hipStreamCaptureStatusNone;
  unsigned long long id = 0;
  hipError_t error = stream == NULL && api.null_stream_is_capturing
                         ? api.hipStreamIsCapturing(NULL, &status)
                         : api.hipStreamGetCaptureInfo((hipStream_t)stream, &status, &id);
  out->status = (int32_t)status;
  out->id = id;
  return consumed(error);
}

static int hip_capturing_graph(void *stream, void **graph) {
  int status = hipStreamCaptureStatusNone;
  hipGraph_t captured = NULL;
  hipError_t error =
      api.hipStreamGetCaptureInfo_v2((hipStream_t)stream, &status, NULL, &captured, NULL, NULL);
  if (error == hipSuccess && status != hipStreamCaptureStatusActive)
    error = hipErrorStreamCaptureUnmatched;
  *graph = captured;
  return consumed(error);
}

static int hip_user_object_create(void **user_object, void *object, void (*release)(void *)) {
  hipUserObject_t made = NULL;
  hipError_t error =
      api.hipUserObjectCreate(&made, object, release, 1, hipUserObjectNoDestructorSync);
  *user_object = made;
  return consumed(error);
}

static int hip_move_to_graph(void *graph, void *user_object) {
  return consumed(api.hipGraphRetainUserObject((hipGraph_t)graph, (hipUserObject_t)user_object, 1,
                                               hipGraphUserObjectMove));
}

static void hip_user_object_drop(void *user_object) {
  consumed(api.hipUserObjectRelease((hipUserObject_t)user_object, 1));
}

static int hip_graph_retain(void *ctx, void *stream, void *object, void (*release)(void *)) {
  (void)ctx;
  static const dl_sync__user_object_calls calls = {hip_capturing_graph, hip_user_object_create,
                                                   hip_move_to_graph, hip_user_object_drop};
  return dl_sync__graph_retain_with(&calls, stream, object, release);
}

static const char *hip_error_name(void *ctx, int code) {
  (void)ctx;
  if (code == DL_SYNC__NO_RUNTIME) return "no HIP runtime";
  return dl_sync__runtime_find(&runtime, 0) ? api.hipGetErrorName(code) : "?";
}

static const char *hip_error_string(void *ctx, int code) {
  (void)ctx;
  if (code == DL_SYNC__NO_RUNTIME) return runtime.why;
  /* HIP 7.14 on: a stream of an execution (green) context destroyed since is detached, takes
     no more work and answers every call with this (rocm-systems CHANGELOG). */
  if (code == hipErrorStreamDetached)
    return "the stream belongs to an execution context that was destroyed: it is gone, and "
           "takes no more work or synchronization";
  return dl_sync__runtime_find(&runtime, 0) ? api.hipGetErrorString(code) : "?";
}

/* hipErrorInvalidDevice answers both "no device" (older ROCm without one) and a bad
   device id: only the first is ENODEV. */
static int no_device_answers(void) {
  int count = 0;
  hipError_t error = api.hipGetDeviceCount(&count);
  consumed(error);
  return error != hipSuccess || count == 0;
}

static int hip_error_status(void *ctx, int code) {
  (void)ctx;
  switch (code) {
    case DL_SYNC__NO_RUNTIME:
    case hipErrorNotInitialized:
    case hipErrorInsufficientDriver:
    case hipErrorNoDevice:
      return DL_SYNC_ENODEV;
    case hipErrorInvalidDevice:
      return !dl_sync__runtime_find(&runtime, 0) || no_device_answers() ? DL_SYNC_ENODEV
                                                                        : DL_SYNC_EBACKEND;
    case hipErrorOutOfMemory:
      return DL_SYNC_ENOMEM;
    default:
      return dl_sync__other_error_status(code, hipErrorStreamCaptureUnsupported,
                                         hipErrorStreamCaptureWrongThread);
  }
}

/* hipStreamGetId (clr hip_stream.cpp hipStreamGetId_common): validates the handle
   (hipErrorInvalidResourceHandle for one destroyed) and reads the stream's id, never its
   capture. 0 from a runtime without it. */
static int hip_stream_id(void *ctx, void *stream, uint64_t *id) {
  (void)ctx;
  *id = 0;
  DL_SYNC__NEED_RUNTIME(&runtime);
  if (api.stream_get_id == NULL) return 0;
  unsigned long long value = 0;
  hipError_t code = api.stream_get_id((hipStream_t)stream, &value);
  *id = code == hipSuccess ? value : 0;
  return consumed(code);
}

/* What the runtime found has of the optional operations (resolve() says). */
static int hip_available(void *ctx, dl_sync_op op) {
  (void)ctx;
  if (!dl_sync__runtime_find(&runtime, 0)) return 0;
  return op == DL_SYNC_OP_GRAPH_RETAIN           ? api.user_objects
         : op == DL_SYNC_OP_STREAM_WAIT_EXTERNAL ? api.external_waits
                                                 : 1;
}

static const char *const hip_backend_call_names[DL_SYNC_OP_COUNT] = {
    [DL_SYNC_OP_DEVICE_COUNT] = "hipGetDeviceCount",
    [DL_SYNC_OP_GET_DEVICE] = "hipGetDevice",
    [DL_SYNC_OP_SET_DEVICE] = "hipSetDevice",
    [DL_SYNC_OP_EVENT_CREATE] = "hipEventCreateWithFlags",
    [DL_SYNC_OP_EVENT_DESTROY] = "hipEventDestroy",
    [DL_SYNC_OP_EVENT_RECORD] = "hipEventRecord",
    [DL_SYNC_OP_STREAM_WAIT] = "hipStreamWaitEvent",
    [DL_SYNC_OP_STREAM_WAIT_EXTERNAL] =
        "hipGraphAddEventWaitNode+hipStreamUpdateCaptureDependencies",
    [DL_SYNC_OP_EVENT_SYNCHRONIZE] = "hipEventSynchronize",
    [DL_SYNC_OP_EVENT_QUERY] = "hipEventQuery",
    [DL_SYNC_OP_CAPTURE_INFO] = "hipStreamGetCaptureInfo",
    [DL_SYNC_OP_GRAPH_RETAIN] = "hipGraphRetainUserObject",
    [DL_SYNC_OP_OWN_STREAM_CREATE] = "hipStreamCreateWithFlags",
    [DL_SYNC_OP_OWN_STREAM_CHECK] = "hipStreamGetCaptureInfo_v2",
    [DL_SYNC_OP_OWN_STREAM_DESTROY] = "hipStreamDestroy",
    [DL_SYNC_OP_STREAM_ID] = "hipStreamGetId",
};

static const dl_sync_backend hip_backend = {
    DL_SYNC_BACKEND_INIT,
    .name = "hip",
    .call_names = hip_backend_call_names,
    .call_name_count = DL_SYNC_OP_COUNT,
    .device_count = hip_device_count,
    .get_device = hip_get_device,
    .set_device = hip_set_device,
    .event_create = hip_event_create,
    .event_destroy = hip_event_destroy,
    .event_record = hip_event_record,
    .stream_wait = hip_stream_wait,
    .event_synchronize = hip_event_synchronize,
    .event_query = hip_event_query,
    .capture_info = hip_capture_info,
    .error_name = hip_error_name,
    .error_string = hip_error_string,
    .error_status = hip_error_status,
    .stream_wait_external = hip_stream_wait_external,
    .graph_retain = hip_graph_retain,
    .available = hip_available,
    .own_stream_create = hip_own_stream_create,
    .own_stream_check = hip_own_stream_check,
    .own_stream_destroy = hip_own_stream_destroy,
    .event_synchronize_disturbs = hip_event_synchronize_disturbs,
    .stream_id = hip_stream_id,
};

const dl_sync_backend *dl_sync_hip_backend(void) {
  dl_sync__runtime_find(&runtime, 0);
  return &hip_backend;
}

dl_sync__runtime *dl_sync__hip_runtime_of(const dl_sync_backend *backend) {
  return backend == &hip_backend ? &runtime : NULL;
}
