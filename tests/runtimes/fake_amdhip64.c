/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A fake HIP runtime (AMD platform): the entry points dlsync and its tests use, exported
 * under the real SONAME (libamdhip64.so.5, .6, .7) and symbol names, modelling the runtime
 * as its source behaves. FAKE_ROCM_RELEASE (major * 10000 + minor * 100 + patch) is the
 * release modelled; FAKE_HIP_VERSION is what hipRuntimeGetVersion reports (major * 10000000
 * + minor * 100000 + a build number, hip_version.h), which cannot tell 6.4.1 from 6.4.2 nor
 * 7.2.0 from 7.2.1. Sources, named where used:
 * - ROCm/hipamd tags rocm-5.2.0, rocm-5.2.3, rocm-5.3.0 and rocm-5.5.0 (files under src/),
 *   and hip_runtime_api.h of ROCm 5.2 and ROCm/HIP rocm-6.2.0;
 * - ROCm/clr tags rocm-5.7.0, rocm-6.0.0 and rocm-6.1.0 (hipamd/src/hip_event.cpp
 *   hipEventSynchronize, hip_stream.cpp StreamCaptureOngoing, stream_per_thread);
 * - ROCm/clr tag rocm-6.2.0 (files under hipamd/src/) and its amd-staging branch at
 *   9faaf20a (2025-02-22, where 6.4 was developed);
 * - ROCm/clr commits b671c7ec (hip_event.cpp, about 7.0 to 7.1), d3901a76 (hip_stream.cpp,
 *   the first with hipEventWaitExternal) and 152c44df (hip_graph.cpp, 7.0 or later);
 * - ROCm/rocm-systems commits 06d4c70a (projects/clr/hipamd/src/hip_event.cpp with
 *   checkEventCaptureRestrictions, which the 7.2.1 CHANGELOG calls "Corrected the return
 *   value of hipEventQuery and hipEventSynchronize") and 02bb78cf (hip_stream.cpp).
 * No 6.4.2 source was read: its external-wait flags (6.4.2 CHANGELOG) are modelled as in
 * d3901a76, the first source that has them.
 *
 * A use of a destroyed stream or event is a use after free in the runtime; the fake keeps
 * destroyed ones for the life of the process and counts each such use
 * (fake_gpu_counter "destroyed_stream_reads", "destroyed_event_uses").
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static long destroyed_stream_reads, destroyed_event_uses, defective_external_wait_calls,
    legacy_handle_uses, null_stream_records, null_stream_waits, streams_created,
    per_thread_handle_uses, stream_id_asks;
static long hip_counter(const char *name);
#define FAKE_GPU_MORE_COUNTERS(name) hip_counter(name)
#include "fake_gpu.h"

#define AT_LEAST(major, minor, patch) (FAKE_ROCM_RELEASE >= (major)*10000 + (minor)*100 + (patch))

typedef int hipError_t;
typedef void *hipStream_t;
typedef fake_event *hipEvent_t;
typedef fake_graph *hipGraph_t;
typedef fake_node *hipGraphNode_t;
typedef fake_user_object *hipUserObject_t;

/* hip_runtime_api.h (ROCm/HIP rocm-6.2.0). */
enum {
  hipSuccess = 0,
  hipErrorInvalidValue = 1,
  hipErrorNoDevice = 100,
  hipErrorInvalidDevice = 101,
  hipErrorInvalidHandle = 400,
  hipErrorInvalidResourceHandle = 400,
  hipErrorIllegalState = 401,
  hipErrorNotReady = 600,
  hipErrorContextIsDestroyed = 709,
  hipErrorStreamCaptureUnsupported = 900,
  hipErrorStreamCaptureInvalidated = 901,
  hipErrorStreamCaptureUnmatched = 903,
  hipErrorStreamCaptureIsolation = 905,
  hipErrorStreamCaptureImplicit = 906,
  hipErrorCapturedEvent = 907,
  hipErrorStreamCaptureWrongThread = 908,
  hipErrorUnknown = 999,
};
enum { CAPTURE_GLOBAL = 0, CAPTURE_RELAXED = 2 };
enum { CAPTURE_ACTIVE = 1, CAPTURE_INVALIDATED = 2 };
#define LEGACY_HANDLE ((hipStream_t)0x1)     /* hipStreamLegacy, from the 6.2 header */
#define PER_THREAD_HANDLE ((hipStream_t)0x2) /* hipStreamPerThread */
enum { WAIT_EXTERNAL = 0x1, RECORD_EXTERNAL = 0x1 };

/* ---- the thread's last error ------------------------------------------------------- */

static _Thread_local hipError_t last_error;

/* ROCm 6.4's preview of 7.0's rules: DEBUG_HIP_7_PREVIEW, a mask read once from the
   environment with atoi (clr amd-staging 9faaf20a rocclr/utils/flags.cpp Flag::init,
   setValue), whose bit 0x1 (CHANGE_HIP_GET_LAST_ERROR, rocclr/utils/debug.hpp) makes
   HIP_RETURN keep errors only. */
static int preview_bits(void) {
  static int bits = -1;
  if (bits < 0) {
    const char *value = getenv("DEBUG_HIP_7_PREVIEW");
    bits = value != NULL ? atoi(value) : 0;
  }
  return bits;
}

/* HIP_RETURN stores every status as the thread's last error, success and hipErrorNotReady
   included (hipamd rocm-5.2.3 src/hip_internal.hpp "hip::g_lastError = ret"; clr rocm-6.2.0
   hipamd/src/hip_internal.hpp "hip::tls.last_error_ = ret"); from 7.0, and on 6.4 with the
   preview bit (clr amd-staging 9faaf20a hip_internal.hpp HIP_RETURN), neither is stored. */
static hipError_t answer(hipError_t error) {
  int errors_only = AT_LEAST(7, 0, 0) || (AT_LEAST(6, 4, 0) && (preview_bits() & 0x1) != 0);
  if (!errors_only || (error != hipSuccess && error != hipErrorNotReady)) last_error = error;
  return error;
}

/* hipErrorNoDevice: "Call to hipGetDeviceCount returned 0 devices" (hip_runtime_api.h). */
#define NEED_DEVICE() \
  if (fake_device_count() == 0) return answer(hipErrorNoDevice)

/* ---- streams ----------------------------------------------------------------------- */

/* hipStreamPerThread names the calling thread's own stream of the current device, made at
   its first use, and made again when hipDeviceReset destroyed it (clr rocm-6.2.0
   hipamd/src/hip_stream.cpp getStreamPerThread, stream_per_thread::get: a thread-local
   hip::tls.stream_per_thread_obj_, ihipStreamCreate with hipStreamDefault). The fake keeps
   it after its thread exits (the runtime destroys it then). */
static _Thread_local fake_stream *own_per_thread[FAKE_MAX_DEVICES];

static fake_stream *per_thread_stream(void) {
  per_thread_handle_uses++;
  fake_stream **own = &own_per_thread[fake_current_device];
  if (*own == NULL || (*own)->destroyed) {
    fake_stream *made = fake_stream_new(fake_current_device);
    if (made == NULL) abort(); /* the fake's limit */
    *own = made;
  }
  return *own;
}

/* The null stream (0) is the legacy default stream; hipStreamPerThread is (hipStream_t)2. */
static fake_stream *resolve(hipStream_t stream) {
  if (stream == PER_THREAD_HANDLE) return per_thread_stream();
  if (stream != NULL) return stream;
  fake_stream *legacy = &fake_legacy[fake_current_device];
  legacy->device = fake_current_device; /* the current device's own */
  return legacy;
}

static int is_null_stream(const fake_stream *stream) {
  return stream == &fake_legacy[stream->device];
}

/* The stream a handle names. A call that validates it (hip::isValid, a lookup in the
   device's stream set: clr rocm-6.2.0 hip_stream.cpp) answers invalid for a destroyed one;
   one that does not reads the freed object, which the fake counts. hipStreamLegacy is no
   handle 6.2 knows (isValid refuses it); 6.3.0 takes it (clr rocm-6.3.0 hip_stream.cpp
   isValid, hip_context.cpp getStream) but hipEventRecord_common reads (hip::Stream*)1, a
   crash, until clr d37224970 (rocm-6.3.2, "Allow hipEvent_t to record on hipStreamLegacy"):
   the fake refuses it before 6.3.2 and takes it as the null stream from then. */
static hipError_t stream_of(hipStream_t handle, int validates, hipError_t invalid,
                            fake_stream **out) {
  if (handle == LEGACY_HANDLE) {
    legacy_handle_uses++;
    if (!AT_LEAST(6, 3, 2)) return invalid;
    handle = NULL;
  }
  fake_stream *stream = resolve(handle);
  if (stream->destroyed) {
    if (validates) return invalid;
    destroyed_stream_reads++;
  }
  *out = stream;
  return hipSuccess;
}

/* What an invalid stream handle answers where it is validated: hipErrorInvalidValue in 5.2
   (hipamd rocm-5.2.0 src/hip_graph.cpp hipStreamIsCapturing), hipErrorContextIsDestroyed
   from 5.5 (hipamd rocm-5.5.0 hipStreamIsCapturing_common). */
static hipError_t destroyed_answer(void) {
  return AT_LEAST(5, 5, 0) ? hipErrorContextIsDestroyed : hipErrorInvalidValue;
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

/* hipGetLastError returns the last error and resets it, without HIP_RETURN;
   hipPeekAtLastError returns it through HIP_RETURN (hipamd rocm-5.2.0 src/hip_error.cpp,
   clr rocm-6.2.0 hipamd/src/hip_error.cpp). */
FAKE_EXPORT hipError_t hipGetLastError(void) {
  hipError_t error = last_error;
  last_error = hipSuccess;
  return error;
}

FAKE_EXPORT hipError_t hipPeekAtLastError(void) {
  return answer(last_error);
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

/* hipStreamCreateWithFlags (clr rocm-6.2.0 hipamd/src/hip_stream.cpp; the same in hipamd
   rocm-5.2.0 src/hip_stream.cpp): a NULL pointer is hipErrorInvalidValue, then
   ihipStreamCreate makes the stream, hipStreamNonBlocking (0x1) one that does not
   synchronize with the null stream. */
FAKE_EXPORT hipError_t hipStreamCreateWithFlags(hipStream_t *stream, unsigned int flags) {
  NEED_DEVICE();
  if (stream == NULL) return answer(hipErrorInvalidValue);
  fake_stream *made = fake_stream_new(fake_current_device);
  if (made == NULL) return answer(hipErrorInvalidValue); /* the fake's limit */
  made->non_blocking = (flags & 0x1) != 0;
  *stream = made;
  streams_created++;
  return answer(hipSuccess);
}

/* ---- capture modes and the captures in progress ------------------------------------ */

/* The calling thread's capture interaction mode: hipThreadExchangeStreamCaptureMode swaps it
   (a thread-local, global by default) and refuses a NULL pointer or a value outside 0 to 2
   with hipErrorInvalidValue (clr rocm-6.2.0 hipamd/src/hip_graph.cpp; exported since
   hipamd rocm-5.2.3, where nothing reads it; read from 5.5 as hip::tls.stream_capture_mode_).
   */
static _Thread_local int capture_mode = CAPTURE_GLOBAL;

FAKE_EXPORT hipError_t hipThreadExchangeStreamCaptureMode(int *mode) {
  if (mode == NULL || *mode < 0 || *mode > 2) return answer(hipErrorInvalidValue);
  int previous = capture_mode;
  capture_mode = *mode;
  *mode = previous;
  fake_counters.mode_exchanges++;
  return answer(hipSuccess);
}

enum { GLOBAL_ONES, OWN_ONES };

/* Finds, and with invalidate invalidates, every global-mode capture of any thread
   (GLOBAL_ONES), or the calling thread's non-relaxed ones (OWN_ONES); whether there was one.
   Of the captures begun and not ended (fake_live_captures), g_captureStreams holds the
   global-mode ones of every thread, tls.capture_streams_ a thread's non-relaxed ones
   (hipStreamBeginCapture_common, clr rocm-5.7.0 and rocm-6.2.0 hip_graph.cpp). */
static int find_captures(int which, int invalidate) {
  int found = 0;
  for (int i = 0; i < FAKE_MAX_STREAMS; i++) {
    fake_capture *capture = fake_live_captures[i];
    if (capture == NULL) continue;
    int hit = which == GLOBAL_ONES
                  ? capture->mode == CAPTURE_GLOBAL
                  : capture->thread == &fake_thread_identity && capture->mode != CAPTURE_RELAXED;
    if (hit && invalidate) fake_capture_invalidate(capture);
    found |= hit;
  }
  return found;
}

static int invalidate_captures(int which) {
  return find_captures(which, 1);
}

static int captures_now(const fake_stream *stream) {
  return stream->capture != NULL && stream->capture->status == CAPTURE_ACTIVE;
}

/* hipStreamBeginCapture_common (clr rocm-6.2.0 hip_graph.cpp): the stream is validated up to
   6.4 (hipErrorContextIsDestroyed), not from 7.0 (clr 152c44df); the null stream is
   hipErrorStreamCaptureUnsupported, a mode outside 0 to 2 hipErrorInvalidValue, a stream
   already capturing hipErrorIllegalState. */
FAKE_EXPORT hipError_t hipStreamBeginCapture(hipStream_t handle, int mode) {
  fake_stream *stream = NULL;
  hipError_t error = stream_of(handle, !AT_LEAST(7, 0, 0), hipErrorContextIsDestroyed, &stream);
  if (error != hipSuccess) return answer(error);
  if (is_null_stream(stream)) return answer(hipErrorStreamCaptureUnsupported);
  if (mode < 0 || mode > 2) return answer(hipErrorInvalidValue);
  if (stream->capture != NULL) return answer(hipErrorIllegalState);
  if (!fake_capture_begin(stream, mode)) return answer(hipErrorInvalidValue); /* the fake's limit */
  stream->last_mode = mode; /* SetCaptureMode, kept after the capture ends */
  stream->deps.count = 0;
  return answer(hipSuccess);
}

/* hipStreamEndCapture_common (clr rocm-6.2.0 hip_graph.cpp): ends a capture on the stream
   it began on (hipErrorStreamCaptureUnmatched), a non-relaxed one on the thread that began
   it (hipErrorStreamCaptureWrongThread); an invalidated capture gives no graph
   (hipErrorStreamCaptureInvalidated). */
FAKE_EXPORT hipError_t hipStreamEndCapture(hipStream_t handle, hipGraph_t *graph) {
  if (graph == NULL) return answer(hipErrorInvalidValue);
  if (handle == NULL) return answer(hipErrorIllegalState);
  fake_stream *stream = NULL;
  hipError_t error = stream_of(handle, 1, hipErrorContextIsDestroyed, &stream);
  if (error != hipSuccess) return answer(error);
  fake_capture *capture = stream->capture;
  if (capture == NULL) return answer(hipErrorIllegalState);
  if (capture->origin != stream) return answer(hipErrorStreamCaptureUnmatched);
  if (capture->mode != CAPTURE_RELAXED && capture->thread != &fake_thread_identity)
    return answer(hipErrorStreamCaptureWrongThread);
  *graph = fake_capture_end(stream);
  return answer(*graph != NULL ? hipSuccess : hipErrorStreamCaptureInvalidated);
}

FAKE_EXPORT hipError_t hipGraphDestroy(hipGraph_t graph) {
  fake_graph_destroy(graph);
  return answer(hipSuccess);
}

/* A capture whose origin stream is destroyed ends without a graph (Stream::EndCapture, which
   frees nothing: the graph stays allocated): every stream leaves it. */
static void drop_capture(fake_capture *capture) {
  fake_capture_unlist(capture);
  fake_capture_leave_all(capture);
}

/* The stream leaves the capture it joined; one it began ends without a graph. */
static void leave_capture(fake_stream *stream) {
  if (stream->capture != NULL && stream->capture->origin == stream) drop_capture(stream->capture);
  stream->capture = NULL;
  stream->deps.count = 0;
}

/* Destroys a stream: a capture in progress on it ends, and it leaves the device's stream
   set. The fake keeps the object (see the top of the file). */
static void destroy_stream(fake_stream *stream) {
  leave_capture(stream);
  for (int i = 0; i < FAKE_MAX_STREAMS; i++)
    if (fake_streams[i] == stream) fake_streams[i] = NULL;
  stream->destroyed = 1;
  fake_keep(stream);
}

/* hipStreamDestroy: NULL is hipErrorInvalidHandle, hipStreamPerThread
   hipErrorInvalidResourceHandle; the handle is validated up to 6.4 (clr rocm-6.2.0
   hip_stream.cpp: hipErrorContextIsDestroyed), not from 7.0 (clr d3901a76, where
   hipStreamLegacy is hipErrorInvalidResourceHandle too). */
FAKE_EXPORT hipError_t hipStreamDestroy(hipStream_t handle) {
  if (handle == NULL) return answer(hipErrorInvalidHandle);
  if (handle == PER_THREAD_HANDLE) return answer(hipErrorInvalidResourceHandle);
  if (handle == LEGACY_HANDLE && AT_LEAST(7, 0, 0)) {
    legacy_handle_uses++;
    return answer(hipErrorInvalidResourceHandle);
  }
  fake_stream *stream = NULL;
  hipError_t error = stream_of(handle, !AT_LEAST(7, 0, 0), hipErrorContextIsDestroyed, &stream);
  if (error != hipSuccess) return answer(error);
  if (is_null_stream(stream)) return answer(hipErrorInvalidResourceHandle);
  destroy_stream(stream);
  return answer(hipSuccess);
}

/* hipDeviceReset destroys every stream of the current device but its null stream, and no
   event: hipamd rocm-5.2.0 src/hip_device_runtime.cpp hipDeviceReset
   (Stream::destroyAllStreams), clr rocm-6.2.0 hipamd/src/hip_device.cpp Device::Reset
   (memory pools, destroyAllStreams, MemObjMap::Purge, Create), the same in the newest
   read (rocm-systems projects/clr/hipamd/src/hip_device.cpp). A thread's per-thread stream
   is one of them, made again at its next use (clr d3901a76 hip_stream.cpp
   stream_per_thread::get: "hipResetDevice destroys stream per thread"). */
FAKE_EXPORT hipError_t hipDeviceReset(void) {
  NEED_DEVICE();
  for (int i = 0; i < FAKE_MAX_STREAMS; i++)
    if (fake_streams[i] != NULL && fake_streams[i]->device == fake_current_device)
      destroy_stream(fake_streams[i]);
  return answer(hipSuccess);
}

/* ---- graph nodes ------------------------------------------------------------------- */

/* Adds a node after deps to graph; NULL when the fake's table is full. */
static fake_node *add_node(fake_graph *graph, int kind, fake_node *const *deps, size_t count) {
  if (graph->nodes >= FAKE_MAX_NODES || count > FAKE_MAX_DEPS) return NULL;
  fake_node *node = &graph->node[graph->nodes++];
  *node = (fake_node){.kind = kind, .dep_count = (int)count};
  for (size_t i = 0; i < count; i++) node->deps[i] = deps[i];
  if (kind == FAKE_NODE_EVENT_WAIT) graph->external_waits++;
  return node;
}

static int in_graph(const fake_graph *graph, const fake_node *node) {
  return node >= graph->node && node < graph->node + graph->nodes;
}

/* The stream's dependencies become node alone (hip::Stream::SetLastCapturedNode). */
static void depend_on(fake_stream *stream, fake_node *node) {
  stream->deps.at[0] = node;
  stream->deps.count = 1;
}

/* Adds nodes to the stream's dependencies, each once (Stream::AddCrossCapturedNode); false
   when the fake's table is full. */
static int add_deps(fake_stream *stream, fake_node *const *nodes, int count) {
  for (int i = 0; i < count; i++) {
    int known = 0;
    for (int j = 0; j < stream->deps.count; j++) known |= stream->deps.at[j] == nodes[i];
    if (known) continue;
    if (stream->deps.count == FAKE_MAX_DEPS) return 0;
    stream->deps.at[stream->deps.count++] = nodes[i];
  }
  return 1;
}

/* hipLaunchHostFunc: in an active capture a host node after the stream's dependencies,
   which it replaces (clr rocm-6.2.0 hip_graph.cpp capturehipLaunchHostFunc); an
   invalidated capture is hipErrorStreamCaptureInvalidated (hip_internal.hpp
   STREAM_CAPTURE, which reads the stream unvalidated). Outside a capture the fake device
   runs it as it is enqueued. */
FAKE_EXPORT hipError_t hipLaunchHostFunc(hipStream_t handle, void (*fn)(void *), void *data) {
  fake_stream *stream = NULL;
  hipError_t error = stream_of(handle, 0, hipErrorContextIsDestroyed, &stream);
  if (error != hipSuccess) return answer(error);
  if (fn == NULL) return answer(hipErrorInvalidValue);
  if (stream->capture != NULL && stream->capture->status == CAPTURE_INVALIDATED)
    return answer(hipErrorStreamCaptureInvalidated);
  if (stream->capture == NULL) {
    fn(data);
    return answer(hipSuccess);
  }
  fake_node *node =
      add_node(stream->capture->graph, FAKE_NODE_HOST, stream->deps.at, (size_t)stream->deps.count);
  if (node == NULL) return answer(hipErrorInvalidValue);
  depend_on(stream, node);
  return answer(hipSuccess);
}

/* hipGraphAddEventWaitNode (clr rocm-6.2.0 hip_graph.cpp; ihipGraphAddNode with capture
   false, the same in clr 152c44df): NULL arguments are hipErrorInvalidValue, and so is a
   dependency that is not a node of graph or is named twice; the edges are made from each
   dependency. A node added to a capture's graph this way is a manual node there. The
   event is not validated. */
FAKE_EXPORT hipError_t hipGraphAddEventWaitNode(hipGraphNode_t *node, hipGraph_t graph,
                                                const hipGraphNode_t *deps, size_t count,
                                                hipEvent_t event) {
  if (node == NULL || graph == NULL || (count > 0 && deps == NULL) || event == NULL)
    return answer(hipErrorInvalidValue);
  for (size_t i = 0; i < count; i++) {
    if (deps[i] == NULL || !in_graph(graph, deps[i])) return answer(hipErrorInvalidValue);
    for (size_t j = 0; j < i; j++)
      if (deps[j] == deps[i]) return answer(hipErrorInvalidValue);
  }
  *node = add_node(graph, FAKE_NODE_EVENT_WAIT, deps, count);
  return answer(*node != NULL ? hipSuccess : hipErrorInvalidValue);
}

/* hipStreamUpdateCaptureDependencies (clr rocm-6.2.0 hip_graph.cpp
   ihipStreamUpdateCaptureDependencies, the same in clr 152c44df): the stream is validated
   (hipErrorContextIsDestroyed); one that does not capture is hipErrorIllegalState (an
   invalidated capture is taken); more dependencies than the graph has nodes, a NULL array,
   flags other than 0 (add) or 1 (set), or a node not in the capture's graph are
   hipErrorInvalidValue. The null stream, which passes the validation and is then read as
   a stream object (a crash), is hipErrorIllegalState here. */
FAKE_EXPORT hipError_t hipStreamUpdateCaptureDependencies(hipStream_t handle, hipGraphNode_t *deps,
                                                          size_t count, unsigned flags) {
  fake_stream *stream = NULL;
  hipError_t error = stream_of(handle, 1, hipErrorContextIsDestroyed, &stream);
  if (error != hipSuccess) return answer(error);
  if (is_null_stream(stream) || stream->capture == NULL) return answer(hipErrorIllegalState);
  fake_graph *graph = stream->capture->graph;
  if (count > (size_t)graph->nodes || (count > 0 && deps == NULL) || flags > 1)
    return answer(hipErrorInvalidValue);
  for (size_t i = 0; i < count; i++)
    if (deps[i] == NULL || !in_graph(graph, deps[i])) return answer(hipErrorInvalidValue);
  if (flags == 1) stream->deps.count = 0;
  return answer(add_deps(stream, deps, (int)count) ? hipSuccess : hipErrorInvalidValue);
}

/* ---- events ------------------------------------------------------------------------ */

/* The test's hold on the device's work (fake_hip_hold_work): events recorded while it is
   held are not complete until it is let go, or until a host synchronization on them. */
static int work_held;
static unsigned hold_round = 1;

FAKE_EXPORT void fake_hip_hold_work(int hold);
void fake_hip_hold_work(int hold) {
  if (!hold && work_held) hold_round++;
  work_held = hold;
}

static int pending(const fake_event *event) {
  return work_held && event->held_round == hold_round;
}

/* A destroyed event, counted: a use after free in the runtime (event handles are validated
   only by hipEventDestroy, clr rocm-6.2.0 hip_event.cpp). */
static int destroyed_event(const fake_event *event) {
  if (event->destroyed) destroyed_event_uses++;
  return event->destroyed;
}

FAKE_EXPORT hipError_t hipEventCreateWithFlags(hipEvent_t *event, unsigned int flags) {
  NEED_DEVICE();
  *event = calloc(1, sizeof **event);
  fake_keep(*event); /* the runtime's event set holds it, destroyed or not */
  (*event)->flags = flags;
  (*event)->device = fake_current_device;
  fake_counters.event_create++;
  if ((flags & 0x2) == 0) fake_counters.timing_events++;
  return answer(hipSuccess);
}

/* hipEventDestroy: a handle no longer in the event set is hipErrorContextIsDestroyed,
   returned without HIP_RETURN (clr rocm-6.2.0 hip_event.cpp); the fake keeps the event. */
FAKE_EXPORT hipError_t hipEventDestroy(hipEvent_t event) {
  if (event == NULL) return answer(hipErrorInvalidHandle);
  if (event->destroyed) return hipErrorContextIsDestroyed;
  fake_counters.event_destroy++;
  event->destroyed = 1;
  return answer(hipSuccess);
}

/* The event's capture stream (hip::Event::captureStream_): from 5.7 every record sets it,
   null stream included (clr rocm-6.2.0 hip_event.cpp hipEventRecord_common
   SetCaptureStream), and the end of a capture the event was recorded in resets it to
   nullptr (hip_stream.cpp Stream::EndCapture). NULL here for none or the null stream. */
static fake_stream *capture_stream_of(const fake_event *event) {
  fake_stream *stream = event->last_stream;
  if (stream == NULL || is_null_stream(stream)) return NULL;
  if (event->capture_id != 0 &&
      (stream->capture == NULL || stream->capture->id != event->capture_id))
    return NULL;
  return stream;
}

/* Whether the event was recorded in the capture its stream is in now
   (Stream::IsEventCaptured: the stream's captureEvents_). */
static int captured_there(const fake_event *event, const fake_stream *stream) {
  return event->capture_id != 0 && stream->capture != NULL &&
         stream->capture->id == event->capture_id;
}

static hipError_t record(hipEvent_t event, hipStream_t handle, unsigned flags) {
  if (event == NULL) return hipErrorInvalidHandle;
  if (destroyed_event(event)) return hipErrorContextIsDestroyed;
  fake_stream *stream = NULL;
  int validates = AT_LEAST(6, 2, 0) && !AT_LEAST(7, 0, 0);
  hipError_t error = stream_of(handle, validates, hipErrorContextIsDestroyed, &stream);
  if (error != hipSuccess) return error;
  fake_counters.event_record++;
  null_stream_records += is_null_stream(stream);
  event->last_stream = stream;
  event->on_legacy = handle == LEGACY_HANDLE;
  if (captures_now(stream)) {
    event->capture_id = stream->capture->id;
    event->before = stream->deps;
    if (flags == RECORD_EXTERNAL) {
      fake_node *node = add_node(stream->capture->graph, FAKE_NODE_EVENT_RECORD, stream->deps.at,
                                 (size_t)stream->deps.count);
      if (node == NULL) return hipErrorInvalidValue;
      depend_on(stream, node);
    }
    return hipSuccess;
  }
  if (stream->device != event->device) return hipErrorInvalidHandle;
  event->capture_id = 0;
  event->held_round = work_held ? hold_round : 0;
  return hipSuccess;
}

/* hipEventRecord (clr rocm-6.2.0 hip_event.cpp hipEventRecord_common): the stream is
   validated from 6.2 (hipErrorContextIsDestroyed) to 6.4; 5.2 reads it first (hipamd
   rocm-5.2.0 STREAM_CAPTURE), 7.0 again without validation (clr b671c7ec). In an active
   capture the record makes no node: the event joins the capture and keeps the stream's
   dependencies for a later wait (SetCaptureEvent, SetNodesPrevToRecorded; hipamd
   rocm-5.2.3 src/hip_graph.cpp capturehipEventRecord). Outside one, an event of another
   device is hipErrorInvalidHandle. Re-recording is safe: hipStreamWaitEvent binds the
   amd::Event the hipEvent holds at call time, under the event's lock, and a re-record swaps
   in a new one (hipamd rocm-5.2.3 src/hip_event.cpp ~150-192; clr rocm-6.2.0
   hip_event.cpp ~201-251), so the fake keeps no record history. */
FAKE_EXPORT hipError_t hipEventRecord(hipEvent_t event, hipStream_t handle) {
  return answer(record(event, handle, 0));
}

#if AT_LEAST(7, 1, 0)
/* hipStreamGetId (7.1; clr hipamd/src/hip_stream.cpp hipStreamGetId_common): a NULL pointer
   is hipErrorInvalidValue, a handle that is no valid stream hipErrorInvalidResourceHandle
   (hip::isValid), else the stream's id (hip::Stream::GetStreamId), which no other stream
   of the process has: the fake numbers each stream at its first ask. */
FAKE_EXPORT hipError_t hipStreamGetId(hipStream_t handle, unsigned long long *id) {
  static unsigned long long last_id;
  stream_id_asks++;
  if (id == NULL) return answer(hipErrorInvalidValue);
  fake_stream *stream = NULL;
  hipError_t error = stream_of(handle, 1, hipErrorInvalidResourceHandle, &stream);
  if (error != hipSuccess) return answer(error);
  if (stream->id == 0) stream->id = ++last_id;
  *id = stream->id;
  return answer(hipSuccess);
}
#endif

#if AT_LEAST(6, 4, 2)
/* hipEventRecordWithFlags (6.4.2 CHANGELOG; clr b671c7ec hipEventRecord_common): flags other
   than hipEventRecordDefault and hipEventRecordExternal are hipErrorInvalidValue; an external
   record in an active capture is an event-record node after the stream's dependencies,
   which it replaces. */
FAKE_EXPORT hipError_t hipEventRecordWithFlags(hipEvent_t event, hipStream_t stream,
                                               unsigned int flags) {
  if (flags > RECORD_EXTERNAL) return answer(hipErrorInvalidValue);
  return answer(record(event, stream, flags));
}
#endif

/* hipStreamWaitEvent with hipEventWaitExternal, 6.4.2 on (clr d3901a76 hip_stream.cpp
   hipStreamWaitEvent_common; the same in rocm-systems 02bb78cf): the waiting stream's
   dependencies reach hip::Graph::AddExternalEventWaitNode as hip::GraphNode* (a
   reinterpret_cast of the vector's data), which indexes them as GraphNode objects: with one
   dependency or more it writes far past the array (heap corruption), the intended edges are
   never made, and the node becomes the stream's only dependency. Outside a capture the
   graph is NULL: a crash in d3901a76, hipErrorInvalidHandle in 02bb78cf. The fake counts
   every call ("defective_external_wait_calls") and makes the node without edges. */
static hipError_t defective_external_wait(fake_stream *stream) {
  defective_external_wait_calls++;
  if (stream->capture == NULL) return hipErrorInvalidHandle;
  fake_node *node = add_node(stream->capture->graph, FAKE_NODE_EVENT_WAIT, NULL, 0);
  if (node == NULL) return hipErrorInvalidValue;
  depend_on(stream, node);
  return hipSuccess;
}

/* hipStreamWaitEvent (hipamd rocm-5.2.3 src/hip_stream.cpp hipStreamWaitEvent_common and
   src/hip_graph.cpp capturehipStreamWaitEvent; clr rocm-6.2.0 and d3901a76
   hipamd/src/hip_stream.cpp hipStreamWaitEvent_common):
   - from 6.4.2 flags other than hipEventWaitDefault and hipEventWaitExternal are
     hipErrorInvalidValue, first;
   - the waiting stream is validated before 7.0 (5.2: hipErrorContextIsDestroyed; 6.2:
     hipErrorInvalidHandle), read unvalidated from 7.0 (hip::getStream);
   - from 6.2 an event whose capture stream was destroyed is taken as complete: success,
     no wait (hip::isValid on it);
   - from 6.4.2, hipEventWaitExternal goes to the defective node (above) before any other
     check;
   - an event recorded in the capture its stream is in now: the waiting stream joins that
     capture (graph, id and mode) unless it began one itself, and takes the event's
     dependencies; no check that the capture is its own; the null stream cannot
     (hipErrorInvalidHandle);
   - otherwise flags other than 0 are hipErrorInvalidValue (before 6.4.2); from 5.7 an event
     whose capture stream captures now is hipErrorStreamCaptureIsolation (hipamd
     rocm-5.5.0 has no such check); else the wait is enqueued, so a capturing stream's
     graph silently lacks the dependency. */
static hipError_t stream_wait(hipStream_t handle, hipEvent_t event, unsigned flags) {
  if (AT_LEAST(6, 4, 2) && flags > WAIT_EXTERNAL) return hipErrorInvalidValue;
  if (event == NULL) return hipErrorInvalidHandle;
  if (destroyed_event(event)) return hipErrorContextIsDestroyed;
  fake_stream *stream = NULL;
  hipError_t invalid = AT_LEAST(6, 2, 0) ? hipErrorInvalidHandle : hipErrorContextIsDestroyed;
  hipError_t error = stream_of(handle, !AT_LEAST(7, 0, 0), invalid, &stream);
  if (error != hipSuccess) return error;
  fake_counters.stream_wait++;
  null_stream_waits += is_null_stream(stream);
  fake_stream *recorded = capture_stream_of(event);
  if (AT_LEAST(6, 2, 0) && recorded != NULL && recorded->destroyed) return hipSuccess;
  if (event->on_legacy) {
    legacy_handle_uses++; /* IsEventCaptured on (hip::Stream*)1: a crash, 6.3.2 to 10.0 */
    return hipErrorInvalidHandle;
  }
  if (AT_LEAST(6, 4, 2) && flags == WAIT_EXTERNAL) return defective_external_wait(stream);
  if (recorded != NULL && captured_there(event, recorded)) {
    if (is_null_stream(stream)) return hipErrorInvalidHandle;
    if (stream->capture == NULL || stream->capture->origin != stream) {
      stream->capture = recorded->capture;
      stream->deps.count = 0;
    }
    return add_deps(stream, event->before.at, event->before.count) ? hipSuccess
                                                                   : hipErrorInvalidValue;
  }
  if (flags != 0) return hipErrorInvalidValue;
  if (AT_LEAST(5, 7, 0) && recorded != NULL && captures_now(recorded))
    return hipErrorStreamCaptureIsolation;
  return hipSuccess;
}

FAKE_EXPORT hipError_t hipStreamWaitEvent(hipStream_t handle, hipEvent_t event,
                                          unsigned int flags) {
  return answer(stream_wait(handle, event, flags));
}

/* Stream::StreamCaptureOngoing (clr rocm-6.2.0 hip_stream.cpp; the same in d3901a76, 7.0 to
   7.2.0) for the event's capture stream: one not capturing answers false in the relaxed
   mode, else invalidates every global-mode capture of any thread when there is one (the
   thread-local mode too), else the thread's own non-relaxed captures; a capturing one is
   invalidated. */
static int capture_ongoing(fake_stream *stream) {
  if (stream->capture == NULL) {
    if (capture_mode == CAPTURE_RELAXED) return 0;
    return invalidate_captures(GLOBAL_ONES) || invalidate_captures(OWN_ONES);
  }
  fake_capture_invalidate(stream->capture);
  return 1;
}

/* checkEventCaptureRestrictions (rocm-systems 06d4c70a hip_event.cpp; 7.2.1 on): only an
   event recorded in the capture its stream is in now is refused there (that capture
   invalidated, hipErrorCapturedEvent); the relaxed mode passes; the global mode invalidates
   every global-mode capture of any thread; then the thread's own non-relaxed captures. */
static hipError_t capture_restrictions(const fake_event *event, fake_stream *stream) {
  if (captures_now(stream) && captured_there(event, stream)) {
    fake_capture_invalidate(stream->capture);
    return hipErrorCapturedEvent;
  }
  if (capture_mode == CAPTURE_RELAXED) return hipSuccess;
  if (capture_mode == CAPTURE_GLOBAL && invalidate_captures(GLOBAL_ONES))
    return hipErrorStreamCaptureUnsupported;
  return invalidate_captures(OWN_ONES) ? hipErrorStreamCaptureUnsupported : hipSuccess;
}

/* Stream::StreamCaptureOngoing of 5.7 to 6.1 (clr rocm-5.7.0, rocm-6.0.0 and rocm-6.1.0
   hipamd/src/hip_stream.cpp), for the event's capture stream, which it reads: from 6.1 false
   in the relaxed mode; then, for a stream whose last capture mode is global (every stream
   that never captured), whether any thread has a global-mode capture or this thread a
   non-relaxed one; else whether the stream captures now. It invalidates nothing. */
static int capture_ongoing_refused(const fake_stream *stream) {
  if (AT_LEAST(6, 1, 0) && capture_mode == CAPTURE_RELAXED) return 0;
  if (stream->last_mode == CAPTURE_GLOBAL)
    return find_captures(GLOBAL_ONES, 0) || find_captures(OWN_ONES, 0);
  return stream->capture != NULL;
}

/* hipEventSynchronize of 5.7 to 6.1 (clr rocm-5.7.0, rocm-6.0.0, rocm-6.1.0
   hipamd/src/hip_event.cpp): the event's capture stream is read unvalidated; one capturing
   now with the event not recorded in its capture refuses, as does StreamCaptureOngoing
   (hipErrorStreamCaptureUnsupported, no capture invalidated). ihipEventQuery reads no
   stream there. */
static hipError_t synchronize_checks_57(const fake_event *event, fake_stream *stream) {
  if (stream->destroyed) destroyed_stream_reads++;
  if (captures_now(stream) && !captured_there(event, stream))
    return hipErrorStreamCaptureUnsupported;
  return capture_ongoing_refused(stream) ? hipErrorStreamCaptureUnsupported : hipSuccess;
}

/* What hipEventQuery and hipEventSynchronize check before they ask the event, by release:
   - up to 5.5 nothing (hipamd rocm-5.5.0 src/hip_event.cpp);
   - 5.7 to 6.1: a synchronization, synchronize_checks_57; a query nothing;
   - 6.2 to 6.4: an event whose capture stream captures now invalidates that capture and is
     hipErrorCapturedEvent, whether or not it was recorded in it, whatever the mode (clr
     rocm-6.2.0 hip_event.cpp ihipEventQuery, hipEventSynchronize); a synchronization then
     runs StreamCaptureOngoing (hipErrorStreamCaptureUnsupported);
   - 7.0 to 7.2.0: a query runs StreamCaptureOngoing too (clr b671c7ec ihipEventQuery);
   - 7.2.1 on: checkEventCaptureRestrictions.
   Every one of them reads the capture stream unvalidated: a destroyed one is counted. The
   null stream and hipStreamLegacy are exempt. */
static hipError_t capture_checks(const fake_event *event, int synchronizes) {
  fake_stream *stream = capture_stream_of(event);
  if (!AT_LEAST(5, 7, 0) || stream == NULL || event->on_legacy) return hipSuccess;
  if (!AT_LEAST(6, 2, 0)) return synchronizes ? synchronize_checks_57(event, stream) : hipSuccess;
  if (stream->destroyed) destroyed_stream_reads++;
  if (AT_LEAST(7, 2, 1)) return capture_restrictions(event, stream);
  if (captures_now(stream)) {
    fake_capture_invalidate(stream->capture);
    return hipErrorCapturedEvent;
  }
  int ongoing_checked = synchronizes || AT_LEAST(7, 0, 0);
  return ongoing_checked && capture_ongoing(stream) ? hipErrorStreamCaptureUnsupported : hipSuccess;
}

FAKE_EXPORT hipError_t hipEventSynchronize(hipEvent_t event) {
  if (event == NULL) return answer(hipErrorInvalidHandle);
  if (destroyed_event(event)) return answer(hipErrorContextIsDestroyed);
  hipError_t error = capture_checks(event, 1);
  if (error == hipSuccess) event->held_round = 0; /* the host waited for the work */
  return answer(error);
}

FAKE_EXPORT hipError_t hipEventQuery(hipEvent_t event) {
  if (event == NULL) return answer(hipErrorInvalidHandle);
  fake_counters.event_query++;
  if (destroyed_event(event)) return answer(hipErrorContextIsDestroyed);
  hipError_t error = capture_checks(event, 0);
  if (error != hipSuccess) return answer(error);
  return answer(pending(event) ? hipErrorNotReady : hipSuccess);
}

/* ---- capture state ----------------------------------------------------------------- */

/* The null stream's capture state. ROCm 5.2 to 5.4: hipStreamGetCaptureInfo (and _v2)
   refuse the null stream with hipErrorUnknown (hipamd rocm-5.2.3 src/hip_graph.cpp ~1273,
   ~1295) while hipStreamIsCapturing answers "none" for it (same file ~732). From 5.5 they
   answer hipErrorStreamCaptureImplicit while a blocking stream of any device captures
   (Stream::StreamCaptureBlocking, hipamd rocm-5.5.0). */
#define NULL_STREAM_REFUSED (AT_LEAST(5, 2, 0) && !AT_LEAST(5, 5, 0))

static int blocking_capture_anywhere(void) {
  for (int d = 0; d < FAKE_MAX_DEVICES; d++)
    if (fake_any_capture_on(d)) return 1;
  return 0;
}

enum { IS_CAPTURING, GET_INFO, GET_INFO_V2 };

/* hipStreamIsCapturing, hipStreamGetCaptureInfo and _v2 (hipamd rocm-5.2.0 and rocm-5.5.0
   src/hip_graph.cpp, clr rocm-6.2.0 hip_graph.cpp): the handle is validated in every
   version by _v2, by the other two until 7.0 (clr 152c44df reads it unvalidated);
   hipStreamLegacy as stream_of says. The id, graph and dependencies are written
   only for an active capture; _v2's dependencies are the stream's own array. */
static hipError_t capture_info(hipStream_t handle, int *status, unsigned long long *id,
                               hipGraph_t *graph, const hipGraphNode_t **deps, size_t *count,
                               int which) {
  if (status == NULL) return hipErrorInvalidValue;
  if (fake_device_count() == 0) return hipErrorNoDevice;
  int validates = which == GET_INFO_V2 || !AT_LEAST(7, 0, 0);
  fake_stream *stream = NULL;
  hipError_t error = stream_of(handle, validates, destroyed_answer(), &stream);
  if (error != hipSuccess) return error;
  if (is_null_stream(stream)) {
    if (NULL_STREAM_REFUSED && which != IS_CAPTURING) return hipErrorUnknown;
    if (!NULL_STREAM_REFUSED && blocking_capture_anywhere()) return hipErrorStreamCaptureImplicit;
  }
  fake_capture *capture = stream->capture;
  *status = capture != NULL ? capture->status : 0;
  if (!captures_now(stream)) return hipSuccess;
  if (id != NULL) *id = capture->id;
  if (graph != NULL) *graph = capture->graph;
  if (deps != NULL) *deps = stream->deps.at;
  if (count != NULL) *count = (size_t)stream->deps.count;
  return hipSuccess;
}

FAKE_EXPORT hipError_t hipStreamGetCaptureInfo(hipStream_t stream, int *status,
                                               unsigned long long *id) {
  return answer(capture_info(stream, status, id, NULL, NULL, NULL, GET_INFO));
}

FAKE_EXPORT hipError_t hipStreamGetCaptureInfo_v2(hipStream_t stream, int *status,
                                                  unsigned long long *id, hipGraph_t *graph,
                                                  const hipGraphNode_t **deps, size_t *count) {
  return answer(capture_info(stream, status, id, graph, deps, count, GET_INFO_V2));
}

FAKE_EXPORT hipError_t hipStreamIsCapturing(hipStream_t stream, int *status) {
  return answer(capture_info(stream, status, NULL, NULL, NULL, NULL, IS_CAPTURING));
}

#if AT_LEAST(5, 3, 0)
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
    case hipErrorInvalidHandle:
      return "hipErrorInvalidHandle";
    case hipErrorIllegalState:
      return "hipErrorIllegalState";
    case hipErrorNotReady:
      return "hipErrorNotReady";
    case hipErrorContextIsDestroyed:
      return "hipErrorContextIsDestroyed";
    case hipErrorStreamCaptureUnsupported:
      return "hipErrorStreamCaptureUnsupported";
    case hipErrorStreamCaptureInvalidated:
      return "hipErrorStreamCaptureInvalidated";
    case hipErrorStreamCaptureUnmatched:
      return "hipErrorStreamCaptureUnmatched";
    case hipErrorStreamCaptureIsolation:
      return "hipErrorStreamCaptureIsolation";
    case hipErrorStreamCaptureImplicit:
      return "hipErrorStreamCaptureImplicit";
    case hipErrorCapturedEvent:
      return "hipErrorCapturedEvent";
    case hipErrorStreamCaptureWrongThread:
      return "hipErrorStreamCaptureWrongThread";
    default:
      return "hipErrorUnknown";
  }
}

FAKE_EXPORT const char *hipGetErrorString(hipError_t error) {
  return error == hipErrorNoDevice ? "no ROCm-capable device is detected" : "fake HIP error";
}

static long hip_counter(const char *name) {
  if (strcmp(name, "destroyed_stream_reads") == 0) return destroyed_stream_reads;
  if (strcmp(name, "destroyed_event_uses") == 0) return destroyed_event_uses;
  if (strcmp(name, "defective_external_wait_calls") == 0) return defective_external_wait_calls;
  if (strcmp(name, "legacy_handle_uses") == 0) return legacy_handle_uses;
  if (strcmp(name, "null_stream_records") == 0) return null_stream_records;
  if (strcmp(name, "null_stream_waits") == 0) return null_stream_waits;
  if (strcmp(name, "streams_created") == 0) return streams_created;
  if (strcmp(name, "per_thread_handle_uses") == 0) return per_thread_handle_uses;
  if (strcmp(name, "stream_get_id") == 0) return stream_id_asks;
  return -1;
}
