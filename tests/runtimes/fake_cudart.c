/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A fake CUDA runtime: the entry points dlsync and its tests use, exported under the real
 * SONAME (libcudart.so.12 or .13) and symbol names, modelling the runtime as documented.
 * FAKE_CUDART_VERSION (12030, 13000) selects the version's behaviour. Sources: the
 * CUDA 13 headers (cuda_runtime_api.h, driver_types.h: the comments quote them) and, for
 * CUDA 12's exports, the CUDA 12 runtime API reference (cudaStreamGetCaptureInfo_v2/_v3).
 */
#include <stddef.h>
#include <string.h>

static long prohibited_calls; /* potentially unsafe calls refused */
static long stream_get_id;    /* cudaStreamGetId calls */
#define FAKE_GPU_MORE_COUNTERS(name)                        \
  (strcmp(name, "prohibited_calls") == 0 ? prohibited_calls \
   : strcmp(name, "stream_get_id") == 0  ? stream_get_id    \
                                         : -1L)
#include "fake_gpu.h"

typedef int cudaError_t;
typedef void *cudaStream_t;
typedef fake_event *cudaEvent_t;
typedef fake_graph *cudaGraph_t;
typedef fake_user_object *cudaUserObject_t;

enum {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorStreamCaptureIsolation = 905,
  cudaErrorStreamCaptureImplicit = 906,
};

static _Thread_local cudaError_t last_error;

/* cudaGetLastError: "Returns the last error that has been produced by any of the runtime
   calls ... in the host thread and resets it to cudaSuccess." cudaErrorNotReady "is not
   actually an error" (driver_types.h), so it is not kept. */
static cudaError_t answer(cudaError_t error) {
  if (error != cudaSuccess && error != cudaErrorNotReady) last_error = error;
  return error;
}

/* cudaErrorNoDevice: "no CUDA-capable devices were detected by the installed CUDA
   driver": every call that needs a device answers it. */
#define NEED_DEVICE() \
  if (fake_device_count() == 0) return answer(cudaErrorNoDevice)

/* cudaStreamLegacy (0x1), cudaStreamPerThread (0x2) and 0 (the legacy stream, without
   per-thread compilation) name the current device's default streams (driver_types.h). */
static fake_stream *resolve(cudaStream_t stream) {
  fake_stream *special;
  if (stream == NULL || stream == (cudaStream_t)0x1)
    special = &fake_legacy[fake_current_device];
  else if (stream == (cudaStream_t)0x2)
    special = &fake_per_thread[fake_current_device];
  else
    return stream;
  special->device = fake_current_device; /* the current device's own default streams */
  return special;
}

static int is_legacy(fake_stream *stream) {
  return stream == &fake_legacy[stream->device];
}

FAKE_EXPORT cudaError_t cudaRuntimeGetVersion(int *version) {
  *version = FAKE_CUDART_VERSION;
  return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaGetLastError(void) {
  cudaError_t error = last_error;
  last_error = cudaSuccess;
  return error;
}

FAKE_EXPORT cudaError_t cudaGetDeviceCount(int *count) {
  NEED_DEVICE();
  *count = fake_device_count();
  return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaGetDevice(int *device) {
  NEED_DEVICE();
  *device = fake_current_device;
  return cudaSuccess;
}

/* cudaErrorInvalidDevice: "the device ordinal supplied by the user does not correspond to
   a valid CUDA device". */
FAKE_EXPORT cudaError_t cudaSetDevice(int device) {
  NEED_DEVICE();
  if (device < 0 || device >= fake_device_count()) return answer(cudaErrorInvalidDevice);
  fake_current_device = device;
  return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaStreamCreate(cudaStream_t *stream) {
  NEED_DEVICE();
  *stream = fake_stream_new(fake_current_device);
  return cudaSuccess;
}

/* cudaStreamGetId: "Query the Id of a stream. The Id is returned in streamId. The Id is
   unique for the life of the program." The fake numbers a stream at its first ask (the
   special handles are not modelled: dlsync asks only created streams). */
FAKE_EXPORT cudaError_t cudaStreamGetId(cudaStream_t stream, unsigned long long *streamId) {
  static unsigned long long last_id;
  stream_get_id++;
  if (streamId == NULL || stream == NULL) return answer(cudaErrorInvalidValue);
  fake_stream *s = stream;
  if (s->id == 0) s->id = ++last_id;
  *streamId = s->id;
  return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  fake_stream_free(stream);
  return cudaSuccess;
}

/* The calling thread's capture interaction mode, for the rules of
   cudaThreadExchangeStreamCaptureMode. */
static _Thread_local int capture_mode; /* cudaStreamCaptureModeGlobal, "the default mode" */

/* cudaThreadExchangeStreamCaptureMode: "Sets the calling thread's stream capture interaction
   mode to the value contained in *mode, and overwrites *mode with the previous mode for the
   thread." */
FAKE_EXPORT cudaError_t cudaThreadExchangeStreamCaptureMode(int *mode) {
  if (mode == NULL || *mode < 0 || *mode > 2) return answer(cudaErrorInvalidValue);
  int previous = capture_mode;
  capture_mode = *mode;
  *mode = previous;
  fake_counters.mode_exchanges++;
  return cudaSuccess;
}

/* cudaThreadExchangeStreamCaptureMode: cudaStreamCaptureModeGlobal: "If the local thread has
   an ongoing capture sequence that was not initiated with cudaStreamCaptureModeRelaxed at
   cuStreamBeginCapture, or if any other thread has a concurrent capture sequence initiated
   with cudaStreamCaptureModeGlobal, this thread is prohibited from potentially unsafe API
   calls"; cudaStreamCaptureModeThreadLocal: only the local thread's own; Relaxed: "the local
   thread is not prohibited". A prohibited call answers cudaErrorStreamCaptureUnsupported
   and, the fake being at least as strict as the runtime, invalidates the captures that
   prohibited it. */
static int prohibited(void) {
  int found = fake_cuda_prohibited(capture_mode);
  if (found) prohibited_calls++;
  return found;
}

/* cudaStreamBeginCapture: "Capture may not be initiated if stream is cudaStreamLegacy." */
FAKE_EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t handle, int mode) {
  fake_stream *stream = resolve(handle);
  if (is_legacy(stream) || stream->capture != NULL || mode < 0 || mode > 2)
    return answer(cudaErrorInvalidValue);
  if (!fake_capture_begin(stream, mode)) return answer(cudaErrorInvalidValue);
  return cudaSuccess;
}

/* cudaStreamEndCapture: "If capture was invalidated, due to a violation of the rules of
   stream capture, then a NULL graph will be returned." */
FAKE_EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t handle, cudaGraph_t *graph) {
  fake_stream *stream = resolve(handle);
  if (stream->capture == NULL) return answer(cudaErrorInvalidValue);
  *graph = fake_capture_end(stream);
  return *graph != NULL ? cudaSuccess : answer(cudaErrorStreamCaptureInvalidated);
}

FAKE_EXPORT cudaError_t cudaStreamIsCapturing(cudaStream_t handle, int *status) {
  fake_stream *stream = resolve(handle);
  if (is_legacy(stream) && fake_any_capture_on(stream->device))
    return answer(cudaErrorStreamCaptureImplicit);
  *status = stream->capture != NULL ? stream->capture->status : 0;
  return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  fake_graph_destroy(graph);
  return cudaSuccess;
}

/* cudaEventDisableTiming events "provide the best performance when used with
   cudaStreamWaitEvent() and cudaEventQuery()": the fake counts the others. */
FAKE_EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags) {
  NEED_DEVICE();
  *event = calloc(1, sizeof **event);
  (*event)->flags = flags;
  (*event)->device = fake_current_device;
  fake_counters.event_create++;
  if ((flags & 0x02) == 0) fake_counters.timing_events++;
  return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (event == NULL) return answer(cudaErrorInvalidResourceHandle);
  fake_counters.event_destroy++;
  free(event);
  return cudaSuccess;
}

/* cudaEventRecord: "event and stream must be on the same CUDA context" (the runtime's
   context of a device is its primary one: the same device). In a capturing stream the
   record is captured into the graph; the event then belongs to that capture sequence. */
FAKE_EXPORT cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t handle) {
  fake_stream *stream = resolve(handle);
  if (event->device != stream->device) return answer(cudaErrorInvalidResourceHandle);
  if (is_legacy(stream) && fake_any_capture_on(stream->device))
    return answer(cudaErrorStreamCaptureImplicit);
  fake_counters.event_record++;
  event->last_stream = stream;
  event->capture = stream->capture;
  if (stream->capture != NULL) stream->capture->graph->nodes++;
  return cudaSuccess;
}

/* cudaStreamWaitEvent during capture, per the CUDA programming guide (stream capture,
   "Prohibited and Unhandled Operations"): waiting on an event of the same capture joins
   it; a wait from a non-capturing stream on a captured event pulls that stream into the
   capture; "it is invalid to merge two separate capture graphs by waiting on a captured
   event from a stream which is being captured and is associated with a different capture
   graph than the event", and a wait on a non-captured event from a capturing stream is
   invalid unless it is cudaEventWaitExternal ("Event is captured in the graph as an
   external event node when performing stream capture", cuda_runtime_api.h). An invalid
   operation invalidates the capture and answers cudaErrorStreamCaptureIsolation. */
FAKE_EXPORT cudaError_t cudaStreamWaitEvent(cudaStream_t handle, cudaEvent_t event,
                                            unsigned int flags) {
  fake_stream *stream = resolve(handle);
  if (is_legacy(stream) && fake_any_capture_on(stream->device))
    return answer(cudaErrorStreamCaptureImplicit);
  fake_counters.stream_wait++;
  fake_capture *capture = stream->capture;
  if (capture == NULL) {
    if (event->capture != NULL && event->capture->status == 1) stream->capture = event->capture;
    return cudaSuccess;
  }
  if (event->capture == capture) {
    capture->graph->nodes++;
    return cudaSuccess;
  }
  if (event->capture == NULL && (flags & 0x01) != 0) {
    capture->graph->nodes++;
    capture->graph->external_waits++;
    return cudaSuccess;
  }
  fake_capture_invalidate(capture);
  if (event->capture != NULL) fake_capture_invalidate(event->capture);
  return answer(cudaErrorStreamCaptureIsolation);
}

/* Potentially unsafe calls (cudaStreamBeginCapture's modes: "attempting cudaEventQuery on
   an event ... is prohibited" and a synchronization "is not permitted"); the fake device
   completes work as it is enqueued. */
FAKE_EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  (void)event;
  return prohibited() ? answer(cudaErrorStreamCaptureUnsupported) : cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaEventQuery(cudaEvent_t event) {
  (void)event;
  fake_counters.event_query++;
  return prohibited() ? answer(cudaErrorStreamCaptureUnsupported) : cudaSuccess;
}

/* The capture query of one stream. The legacy stream answers
   cudaErrorStreamCaptureImplicit while a capture is in progress on its device: "The
   operation would have resulted in a disallowed implicit dependency on a current capture
   sequence from cudaStreamLegacy" (driver_types.h). */
static cudaError_t capture_info(cudaStream_t handle, int *status, unsigned long long *id,
                                cudaGraph_t *graph, size_t *count) {
  fake_stream *stream = resolve(handle);
  if (fake_device_count() == 0) return answer(cudaErrorNoDevice);
  if (is_legacy(stream) && fake_any_capture_on(stream->device))
    return answer(cudaErrorStreamCaptureImplicit);
  fake_capture *capture = stream->capture;
  *status = capture != NULL ? capture->status : 0;
  if (capture == NULL) return cudaSuccess;
  if (id != NULL) *id = capture->id;
  if (graph != NULL) *graph = capture->graph;
  if (count != NULL) *count = 0;
  return cudaSuccess;
}

#if FAKE_CUDART_VERSION >= 13000
/* CUDA 13: cudaStreamGetCaptureInfo is the 7-argument query (cuda_runtime_api.h). */
FAKE_EXPORT cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, int *status,
                                                 unsigned long long *id, cudaGraph_t *graph,
                                                 const void **dependencies, const void **edge_data,
                                                 size_t *count) {
  (void)dependencies;
  (void)edge_data;
  return capture_info(stream, status, id, graph, count);
}
#else
/* CUDA 12: the exported cudaStreamGetCaptureInfo is the original 3-argument query (the
   12.x headers redirect the plain name to _v2); _v2 has 6 arguments (all 12.x), _v3 adds
   the edge data (12.3+). */
FAKE_EXPORT cudaError_t cudaStreamGetCaptureInfo(cudaStream_t stream, int *status,
                                                 unsigned long long *id) {
  return capture_info(stream, status, id, NULL, NULL);
}
FAKE_EXPORT cudaError_t cudaStreamGetCaptureInfo_v2(cudaStream_t stream, int *status,
                                                    unsigned long long *id, cudaGraph_t *graph,
                                                    const void **dependencies, size_t *count) {
  (void)dependencies;
  return capture_info(stream, status, id, graph, count);
}
FAKE_EXPORT cudaError_t cudaStreamGetCaptureInfo_v3(cudaStream_t stream, int *status,
                                                    unsigned long long *id, cudaGraph_t *graph,
                                                    const void **dependencies,
                                                    const void **edge_data, size_t *count) {
  (void)dependencies;
  (void)edge_data;
  return capture_info(stream, status, id, graph, count);
}
#endif

/* cudaUserObjectCreate: "flags - Currently it is required to pass
   cudaUserObjectNoDestructorSync, which is the only defined flag." */
FAKE_EXPORT cudaError_t cudaUserObjectCreate(cudaUserObject_t *object, void *ptr,
                                             void (*destroy)(void *), unsigned int refs,
                                             unsigned int flags) {
  if (flags != 0x1 || refs == 0 || destroy == NULL) return answer(cudaErrorInvalidValue);
  *object = calloc(1, sizeof **object);
  **object = (fake_user_object){.ptr = ptr, .destroy = destroy, .refs = refs};
  fake_counters.user_objects_live++;
  return cudaSuccess;
}

FAKE_EXPORT cudaError_t cudaUserObjectRelease(cudaUserObject_t object, unsigned int count) {
  fake_user_object_release(object, count);
  return cudaSuccess;
}

/* cudaGraphRetainUserObject: "cudaGraphUserObjectMove transfers references from the
   calling thread, rather than create new references"; without it the graph takes new
   ones and the caller keeps its own. */
FAKE_EXPORT cudaError_t cudaGraphRetainUserObject(cudaGraph_t graph, cudaUserObject_t object,
                                                  unsigned int count, unsigned int flags) {
  if (graph == NULL || object == NULL || graph->object_count == FAKE_MAX_OBJECTS)
    return answer(cudaErrorInvalidValue);
  graph->objects[graph->object_count] = object;
  graph->counts[graph->object_count++] = count;
  if ((flags & 0x1) == 0) object->refs += count;
  return cudaSuccess;
}

FAKE_EXPORT const char *cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorNoDevice:
      return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorStreamCaptureIsolation:
      return "cudaErrorStreamCaptureIsolation";
    case cudaErrorStreamCaptureImplicit:
      return "cudaErrorStreamCaptureImplicit";
    default:
      return "cudaErrorUnknown";
  }
}

FAKE_EXPORT const char *cudaGetErrorString(cudaError_t error) {
  return error == cudaErrorNoDevice ? "no CUDA-capable device is detected" : "fake CUDA error";
}
