/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A fake HIP runtime (AMD platform): the entry points dlsync and its tests use, exported
 * under the real SONAME (libamdhip64.so.5, .6, .7) and symbol names, modelling the
 * runtime as its source behaves. FAKE_HIP_VERSION (hipRuntimeGetVersion's value:
 * major * 10000000 + minor * 100000 + build) selects the version's behaviour. Sources:
 * ROCm/hipamd at rocm-5.2.3 / rocm-5.3.0 and ROCm/clr at rocm-6.2.0 (files named where
 * used), and hip_runtime_api.h of ROCm 5.2 (/usr/include/hip). What is marked "ROCm 7"
 * (external waits from 6.4.2, errors-only last error, the .so.7 SONAME) follows AMD's
 * release notes for 6.4.2 and 7.0: the sources read here end at clr rocm-6.2.2.
 */
#include <stddef.h>

#include "fake_gpu.h"

#define AT_LEAST(major, minor) (FAKE_HIP_VERSION >= (major)*10000000 + (minor)*100000)

typedef int hipError_t;
typedef void *hipStream_t;
typedef fake_event *hipEvent_t;
typedef fake_graph *hipGraph_t;
typedef fake_user_object *hipUserObject_t;

enum {
  hipSuccess = 0,
  hipErrorInvalidValue = 1,
  hipErrorNoDevice = 100,
  hipErrorInvalidDevice = 101,
  hipErrorInvalidHandle = 400,
  hipErrorNotReady = 600,
  hipErrorStreamCaptureInvalidated = 901,
  hipErrorStreamCaptureIsolation = 905,
  hipErrorStreamCaptureImplicit = 906,
  hipErrorCapturedEvent = 907,
  hipErrorUnknown = 999,
};

static _Thread_local hipError_t last_error;

/* HIP_RETURN (hipamd rocm-5.2.3 src/hip_internal.hpp: "hip::g_lastError = ret") stores
   every call's status as the thread's last error, success included (clr rocm-6.2.0
   hipamd/src/hip_internal.hpp: "hip::tls.last_error_ = ret"); ROCm 7 stores errors only,
   as CUDA does. */
static hipError_t answer(hipError_t error) {
  if (!AT_LEAST(7, 0) || (error != hipSuccess && error != hipErrorNotReady)) last_error = error;
  return error;
}

/* hipErrorNoDevice: "Call to hipGetDeviceCount returned 0 devices" (hip_runtime_api.h). */
#define NEED_DEVICE() \
  if (fake_device_count() == 0) return answer(hipErrorNoDevice)

/* The null stream (0) is the legacy default stream; hipStreamPerThread is (hipStream_t)2. */
static fake_stream *resolve(hipStream_t stream) {
  fake_stream *special;
  if (stream == NULL)
    special = &fake_legacy[fake_current_device];
  else if (stream == (hipStream_t)0x2)
    special = &fake_per_thread[fake_current_device];
  else
    return stream;
  special->device = fake_current_device; /* the current device's own default streams */
  return special;
}

static int is_null_stream(fake_stream *stream) {
  return stream == &fake_legacy[stream->device];
}

/* hipRuntimeGetVersion: "@returns #hipSuccess, #hipErrorInavlidValue" (hip_runtime_api.h);
   FAKE_HIP_VERSION_ERROR=1 makes it fail, as every failing call, recorded as the thread's
   last error. */
FAKE_EXPORT hipError_t hipRuntimeGetVersion(int *version) {
  const char *fail = getenv("FAKE_HIP_VERSION_ERROR");
  if (fail != NULL && strcmp(fail, "1") == 0) return answer(hipErrorInvalidValue);
  *version = FAKE_HIP_VERSION;
  return answer(hipSuccess);
}

FAKE_EXPORT hipError_t hipGetLastError(void) {
  hipError_t error = last_error;
  last_error = hipSuccess;
  return error;
}

FAKE_EXPORT hipError_t hipGetDeviceCount(int *count) {
  NEED_DEVICE();
  *count = fake_device_count();
  return answer(hipSuccess);
}

FAKE_EXPORT hipError_t hipGetDevice(int *device) {
  NEED_DEVICE();
  *device = fake_current_device;
  return answer(hipSuccess);
}

/* hipErrorInvalidDevice: "DeviceID must be in range 0...#compute-devices". */
FAKE_EXPORT hipError_t hipSetDevice(int device) {
  NEED_DEVICE();
  if (device < 0 || device >= fake_device_count()) return answer(hipErrorInvalidDevice);
  fake_current_device = device;
  return answer(hipSuccess);
}

FAKE_EXPORT hipError_t hipStreamCreate(hipStream_t *stream) {
  NEED_DEVICE();
  *stream = fake_stream_new(fake_current_device);
  return answer(hipSuccess);
}

FAKE_EXPORT hipError_t hipStreamDestroy(hipStream_t stream) {
  fake_stream_free(stream);
  return answer(hipSuccess);
}

/* The calling thread's capture interaction mode: hipThreadExchangeStreamCaptureMode swaps it
   (a thread-local, global by default) and refuses a NULL pointer or a value outside 0 to 2
   with hipErrorInvalidValue (clr rocm-6.2.0 hipamd/src/hip_graph.cpp; exported since
   hipamd rocm-5.2.3). */
static _Thread_local int capture_mode;

FAKE_EXPORT hipError_t hipThreadExchangeStreamCaptureMode(int *mode) {
  if (mode == NULL || *mode < 0 || *mode > 2) return answer(hipErrorInvalidValue);
  int previous = capture_mode;
  capture_mode = *mode;
  *mode = previous;
  fake_counters.mode_exchanges++;
  return answer(hipSuccess);
}

FAKE_EXPORT hipError_t hipStreamBeginCapture(hipStream_t handle, int mode) {
  (void)mode;
  fake_stream *stream = resolve(handle);
  if (is_null_stream(stream) || stream->capture != NULL) return answer(hipErrorInvalidValue);
  fake_capture_begin(stream);
  return answer(hipSuccess);
}

FAKE_EXPORT hipError_t hipStreamEndCapture(hipStream_t handle, hipGraph_t *graph) {
  fake_stream *stream = resolve(handle);
  if (stream->capture == NULL) return answer(hipErrorInvalidValue);
  *graph = fake_capture_end(stream);
  return answer(*graph != NULL ? hipSuccess : hipErrorStreamCaptureInvalidated);
}

FAKE_EXPORT hipError_t hipGraphDestroy(hipGraph_t graph) {
  fake_graph_destroy(graph);
  return answer(hipSuccess);
}

FAKE_EXPORT hipError_t hipEventCreateWithFlags(hipEvent_t *event, unsigned int flags) {
  NEED_DEVICE();
  *event = calloc(1, sizeof **event);
  (*event)->flags = flags;
  (*event)->device = fake_current_device;
  fake_counters.event_create++;
  if ((flags & 0x2) == 0) fake_counters.timing_events++;
  return answer(hipSuccess);
}

FAKE_EXPORT hipError_t hipEventDestroy(hipEvent_t event) {
  if (event == NULL) return answer(hipErrorInvalidHandle);
  fake_counters.event_destroy++;
  free(event);
  return answer(hipSuccess);
}

/* A record in a capturing stream becomes a graph node and the event joins the capture
   (hipamd rocm-5.2.3 src/hip_graph.cpp capturehipEventRecord); the event remembers the
   stream it was recorded on (clr rocm-6.2.0 hipamd/src/hip_event.cpp SetCaptureStream).
   Re-recording an event is safe: hipStreamWaitEvent binds the amd::Event the hipEvent holds at call
   time, under the event's lock, and a re-record swaps in a new one (hipamd rocm-5.2.3
   src/hip_event.cpp ~150-192; clr rocm-6.2.0 hipamd/src/hip_event.cpp ~201-251), so the
   fake keeps no record history. */
FAKE_EXPORT hipError_t hipEventRecord(hipEvent_t event, hipStream_t handle) {
  fake_stream *stream = resolve(handle);
  fake_counters.event_record++;
  event->last_stream = stream;
  event->capture = stream->capture;
  if (stream->capture != NULL) stream->capture->graph->nodes++;
  return answer(hipSuccess);
}

#if AT_LEAST(7, 0)
/* hipEventRecordWithFlags arrived with hipEventWaitExternal (ROCm 6.4.2). */
FAKE_EXPORT hipError_t hipEventRecordWithFlags(hipEvent_t event, hipStream_t stream,
                                               unsigned int flags) {
  (void)flags;
  return hipEventRecord(event, stream);
}
#endif

/* hipStreamWaitEvent (hipamd rocm-5.2.3 src/hip_stream.cpp hipStreamWaitEvent_common and
   src/hip_graph.cpp capturehipStreamWaitEvent; clr rocm-6.2.0 hipamd/src/hip_stream.cpp
   hipStreamWaitEvent_common):
   - an event recorded in a capture: the waiting stream joins that capture when it is not
     capturing, and takes the event's nodes as dependencies; no check that the capture is
     its own (a stream of another capture is not refused);
   - an event recorded outside any capture: flags other than 0 are hipErrorInvalidValue
     (until ROCm 6.4.2 adds hipEventWaitExternal, captured as an external event-wait node);
     from 6.2 an event whose recording stream is capturing now is
     hipErrorStreamCaptureIsolation; otherwise the wait is enqueued on the stream, so a
     capturing stream's graph silently lacks the dependency. */
FAKE_EXPORT hipError_t hipStreamWaitEvent(hipStream_t handle, hipEvent_t event,
                                          unsigned int flags) {
  fake_stream *stream = resolve(handle);
  fake_counters.stream_wait++;
  fake_capture *capture = stream->capture;
  if (event->capture != NULL && event->capture->status == 1) {
    if (capture == NULL)
      stream->capture = event->capture;
    else
      capture->graph->nodes++;
    return answer(hipSuccess);
  }
  if (AT_LEAST(7, 0) && flags == 0x1 && capture != NULL) {
    capture->graph->nodes++;
    capture->graph->external_waits++;
    return answer(hipSuccess);
  }
  if (flags != 0 && !AT_LEAST(7, 0)) return answer(hipErrorInvalidValue);
  if (AT_LEAST(6, 2) && event->last_stream != NULL && event->last_stream->capture != NULL)
    return answer(hipErrorStreamCaptureIsolation);
  return answer(hipSuccess);
}

/* From ROCm 6.2 a query or synchronize on an event whose last record was on a stream that
   is now capturing invalidates that capture and answers hipErrorCapturedEvent (clr
   rocm-6.2.0 hipamd/src/hip_event.cpp ihipEventQuery ~452-464, hipEventSynchronize
   ~435-439). */
static hipError_t touches_capture(hipEvent_t event) {
  if (!AT_LEAST(6, 2) || event->last_stream == NULL || event->last_stream->capture == NULL)
    return hipSuccess;
  fake_capture_invalidate(event->last_stream->capture);
  return hipErrorCapturedEvent;
}

FAKE_EXPORT hipError_t hipEventSynchronize(hipEvent_t event) {
  return answer(touches_capture(event));
}

FAKE_EXPORT hipError_t hipEventQuery(hipEvent_t event) {
  fake_counters.event_query++;
  return answer(touches_capture(event));
}

/* The null stream's capture state. ROCm 5.2 to 5.4: hipStreamGetCaptureInfo (and _v2)
   refuse the null stream with hipErrorUnknown (hipamd rocm-5.2.3 src/hip_graph.cpp ~1273,
   ~1295) while hipStreamIsCapturing answers "none" for it (same file ~732). Other versions answer
   hipErrorStreamCaptureImplicit while a stream of the device captures. */
#define NULL_STREAM_REFUSED (AT_LEAST(5, 2) && !AT_LEAST(5, 5))

static hipError_t capture_info(hipStream_t handle, int *status, unsigned long long *id,
                               hipGraph_t *graph, int is_capturing_call) {
  if (fake_device_count() == 0) return answer(hipErrorNoDevice);
  fake_stream *stream = resolve(handle);
  if (is_null_stream(stream)) {
    if (NULL_STREAM_REFUSED && !is_capturing_call) return answer(hipErrorUnknown);
    if (!NULL_STREAM_REFUSED && fake_any_capture_on(stream->device))
      return answer(hipErrorStreamCaptureImplicit);
  }
  fake_capture *capture = stream->capture;
  *status = capture != NULL ? capture->status : 0;
  if (capture != NULL && id != NULL) *id = capture->id;
  if (capture != NULL && graph != NULL) *graph = capture->graph;
  return answer(hipSuccess);
}

FAKE_EXPORT hipError_t hipStreamGetCaptureInfo(hipStream_t stream, int *status,
                                               unsigned long long *id) {
  return capture_info(stream, status, id, NULL, 0);
}

FAKE_EXPORT hipError_t hipStreamGetCaptureInfo_v2(hipStream_t stream, int *status,
                                                  unsigned long long *id, hipGraph_t *graph,
                                                  const void **dependencies, size_t *count) {
  (void)dependencies;
  if (count != NULL) *count = 0;
  return capture_info(stream, status, id, graph, 0);
}

FAKE_EXPORT hipError_t hipStreamIsCapturing(hipStream_t stream, int *status) {
  return capture_info(stream, status, NULL, NULL, 1);
}

#if AT_LEAST(5, 3)
/* Graph user objects: ROCm 5.3 on (hipamd rocm-5.3.0 src/hip_graph.cpp, src/amdhip.def;
   absent from rocm-5.2.3). */
FAKE_EXPORT hipError_t hipUserObjectCreate(hipUserObject_t *object, void *ptr,
                                           void (*destroy)(void *), unsigned int refs,
                                           unsigned int flags) {
  (void)flags;
  if (refs == 0 || destroy == NULL) return answer(hipErrorInvalidValue);
  *object = calloc(1, sizeof **object);
  **object = (fake_user_object){.ptr = ptr, .destroy = destroy, .refs = refs};
  fake_counters.user_objects_live++;
  return answer(hipSuccess);
}

FAKE_EXPORT hipError_t hipUserObjectRelease(hipUserObject_t object, unsigned int count) {
  fake_user_object_release(object, count);
  return answer(hipSuccess);
}

/* hipGraphUserObjectMove moves the caller's references to the graph; without it the
   graph takes new ones. */
FAKE_EXPORT hipError_t hipGraphRetainUserObject(hipGraph_t graph, hipUserObject_t object,
                                                unsigned int count, unsigned int flags) {
  if (graph == NULL || object == NULL || graph->object_count == FAKE_MAX_OBJECTS)
    return answer(hipErrorInvalidValue);
  graph->objects[graph->object_count] = object;
  graph->counts[graph->object_count++] = count;
  if ((flags & 0x1) == 0) object->refs += count;
  return answer(hipSuccess);
}
#endif

FAKE_EXPORT const char *hipGetErrorName(hipError_t error) {
  switch (error) {
    case hipSuccess:
      return "hipSuccess";
    case hipErrorInvalidValue:
      return "hipErrorInvalidValue";
    case hipErrorNoDevice:
      return "hipErrorNoDevice";
    case hipErrorInvalidDevice:
      return "hipErrorInvalidDevice";
    case hipErrorStreamCaptureIsolation:
      return "hipErrorStreamCaptureIsolation";
    case hipErrorStreamCaptureImplicit:
      return "hipErrorStreamCaptureImplicit";
    case hipErrorCapturedEvent:
      return "hipErrorCapturedEvent";
    case hipErrorUnknown:
      return "hipErrorUnknown";
    default:
      return "hipErrorUnknown";
  }
}

FAKE_EXPORT const char *hipGetErrorString(hipError_t error) {
  return error == hipErrorNoDevice ? "no ROCm-capable device is detected" : "fake HIP error";
}
