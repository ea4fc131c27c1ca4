/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A fake CUDA driver: the entry points dlsync and its tests use, exported under the real
 * SONAME (libcuda.so.1) and symbol names, modelling the driver API as the CUDA 13 cuda.h
 * documents it (the comments quote it), on the host only. The ABI cuGetProcAddress hands
 * out for a name and a CUDA version follows the driver-function typedefs of cudaTypedefs.h
 * (PFN_<name>_v<version>: the version that introduced each ABI), the header cuda.h names
 * for them.
 *
 * FAKE_CUDA_DRIVER_VERSION is what cuDriverGetVersion reports (11080, 12000, 12040, 13000);
 * entry points introduced after it are neither exported nor found by cuGetProcAddress.
 * FAKE_CUDA_STUB=1 makes it the toolkit's stub library. The fake has no per-thread
 * (_ptsz) entry points, and one per-thread default stream per context. From 12.4 it has
 * green contexts (a descriptor of all a device's SMs is enough to make one). Where cuda.h
 * leaves a behaviour open, a switch read at each use picks the reading:
 * FAKE_CUDA_GREEN_EVENT_RULE=strict|lenient (whether a green context's events record on its
 * primary context's streams, and back) and FAKE_CUDA_RESET_KEEPS_ID=1 (a reset primary
 * context keeps its cuCtxGetId).
 *
 * Test hooks (fake_gpu_*, fake_cuda_*) let the suite read what the driver was asked to do;
 * they are observations, never behaviour.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <limits.h>
#include <pthread.h>
#include <time.h>
#include <stddef.h>
#include <stdint.h>

static long driver_counter(const char *name);
#define FAKE_GPU_MORE_COUNTERS(name) driver_counter(name)

#include "fake_gpu.h"

#ifndef FAKE_CUDA_STUB
#define FAKE_CUDA_STUB 0
#endif

/* Entry points newer than the driver modelled are kept out of its exports. */
#if FAKE_CUDA_DRIVER_VERSION >= 12000
#define SINCE_12000 FAKE_EXPORT
#else
#define SINCE_12000 static
#endif
#if FAKE_CUDA_DRIVER_VERSION >= 12030
#define SINCE_12030 FAKE_EXPORT
#else
#define SINCE_12030 static
#endif
#if FAKE_CUDA_DRIVER_VERSION >= 12040
#define SINCE_12040 FAKE_EXPORT
#else
#define SINCE_12040 static
#endif
#if FAKE_CUDA_DRIVER_VERSION >= 12050
#define SINCE_12050 FAKE_EXPORT
#else
#define SINCE_12050 static
#endif
#if FAKE_CUDA_DRIVER_VERSION >= 13000
#define SINCE_13000 FAKE_EXPORT
#else
#define SINCE_13000 static
#endif

typedef int CUresult;
typedef int CUdevice;
typedef struct fake_context *CUcontext;
typedef struct fake_green *CUgreenCtx;
typedef struct fake_resource_desc *CUdevResourceDesc;
typedef void *CUstream;
typedef fake_event *CUevent;
typedef fake_graph *CUgraph;
typedef fake_user_object *CUuserObject;
typedef const void *CUgraphNode;
typedef void (*CUhostFn)(void *userData);

typedef struct CUctxCreateParams {
  void *execAffinityParams;
  int numExecAffinityParams;
  void *cigParams;
} CUctxCreateParams;

enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_STUB_LIBRARY = 34,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_INVALID_RESOURCE_TYPE = 914,
  CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_CONTEXT_IS_DESTROYED = 709,
  CUDA_ERROR_NOT_PERMITTED = 800,
  CUDA_ERROR_NOT_SUPPORTED = 801,
  CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
  CUDA_ERROR_STREAM_CAPTURE_MERGE = 902,
  CUDA_ERROR_STREAM_CAPTURE_UNMATCHED = 903,
  CUDA_ERROR_STREAM_CAPTURE_ISOLATION = 905,
  CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906,
  CUDA_ERROR_CAPTURED_EVENT = 907,
  CUDA_ERROR_UNKNOWN = 999,
};

enum {
  CU_STREAM_NON_BLOCKING = 0x1,
  CU_EVENT_DISABLE_TIMING = 0x2,
  CU_EVENT_INTERPROCESS = 0x4,
  CU_EVENT_WAIT_EXTERNAL = 0x1,
  CU_STREAM_CAPTURE_MODE_GLOBAL = 0,
  CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
  CU_STREAM_CAPTURE_MODE_RELAXED = 2,
  CU_CTX_SCHED_MASK = 0x07,
  CU_USER_OBJECT_NO_DESTRUCTOR_SYNC = 1,
  CU_GRAPH_USER_OBJECT_MOVE = 1,
  CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 1 << 1,
  CU_GET_PROC_ADDRESS_SUCCESS = 0,
  CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
  CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2,
  CU_GREEN_CTX_DEFAULT_STREAM = 0x1,
  CU_DEV_RESOURCE_TYPE_SM = 1,
};

/* cuda.h's CUdevResource (RESOURCE_ABI_VERSION 1): the type, 92 bytes of the driver's own,
   and a union of 48 bytes whose SM member the fake fills. */
typedef struct CUdevSmResource {
  unsigned int smCount, minSmPartitionSize, smCoscheduledAlignment;
} CUdevSmResource;
typedef struct CUdevResource {
  int type;
  unsigned char internal_padding[92];
  union {
    CUdevSmResource sm;
    unsigned char oversize[48];
  };
} CUdevResource;

#define CU_STREAM_LEGACY ((CUstream)0x1)
#define CU_STREAM_PER_THREAD ((CUstream)0x2)

enum { FAKE_MAX_CONTEXTS = 32, FAKE_CONTEXT_STACK = 32 };

typedef struct fake_context {
  int device;
  int primary;
  unsigned long long id; /* cuCtxGetId; a primary context's changes at each activation */
  unsigned retained;     /* a primary context's references (cuDevicePrimaryCtxRetain) */
  int destroyed;         /* cuCtxDestroy ran on it */
  fake_stream *legacy;
  fake_stream own_legacy; /* a created or green context's legacy stream */
  int green;              /* a green context's, as cuCtxFromGreenCtx converts it */
  const void *holder;     /* a green context's: the thread it is current to (green_lock) */
} fake_context;

/* A green context (cuGreenCtxCreate) and the CUcontext it converts to. */
typedef struct fake_green {
  fake_context converted;
} fake_green;

/* A resource descriptor (cuDevResourceGenerateDesc): the device its resources are of. */
typedef struct fake_resource_desc {
  int device;
  unsigned sm_count;
} fake_resource_desc;

/* A primary context's default streams are fake_gpu.h's per-device ones. */
static fake_context primaries[FAKE_MAX_DEVICES];
static fake_context *created[FAKE_MAX_CONTEXTS]; /* kept after cuCtxDestroy: handles stay known */
static fake_green *greens[FAKE_MAX_CONTEXTS];    /* kept after cuGreenCtxDestroy, as created */
static pthread_mutex_t green_lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local fake_context *stack[FAKE_CONTEXT_STACK];
static _Thread_local int depth;
static int devices;
static int initialized;                 /* 1 after a successful cuInit, -1 after a failed one */
static _Thread_local int in_destructor; /* a user object's destructor is running */
static fake_event **events;             /* the live events */
static size_t event_count, event_capacity;
static fake_stream *last_record, *last_wait;
/* Every successful record and wait, in order, for the tests (fake_cuda_log). */
enum { FAKE_LOG_SIZE = 64 };
typedef struct logged_call {
  char op; /* 'r' record, 'w' wait, 'x' external wait */
  fake_stream *stream;
} logged_call;
static logged_call call_log[FAKE_LOG_SIZE];
static int log_count;
/* Atomic: the tests call the driver from several threads at once. */
static struct {
  _Atomic long stream_get_ctx, ctx_set_current, primary_retain, primary_release, init,
      per_thread_lookups;
  _Atomic long destructor_calls, dead_handles, ctx_get_id, prohibited_calls, capture_queries,
      ctx_get_current, green_second_thread, stream_get_green_ctx, stream_get_id;
} driver_counters;
static unsigned long long next_context_id = 1;
/* The calling thread's capture interaction mode (cuThreadExchangeStreamCaptureMode). */
static _Thread_local int capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

/* CUDA_ERROR_STUB_LIBRARY: "Applications that run with the stub rather than a real driver
   loaded will result in CUDA API returning this error." cuUserObjectCreate: "Destructor
   callbacks cannot make CUDA API calls": the fake refuses and counts them. */
#define ENTER_ANY()                                     \
  do {                                                  \
    if (FAKE_CUDA_STUB) return CUDA_ERROR_STUB_LIBRARY; \
    if (in_destructor) {                                \
      driver_counters.destructor_calls++;               \
      return CUDA_ERROR_NOT_PERMITTED;                  \
    }                                                   \
  } while (0)

/* cuInit: "If cuInit() has not been called, any function from the driver API will return
   CUDA_ERROR_NOT_INITIALIZED"; CUDA_ERROR_NOT_INITIALIZED also "indicates ... that
   initialization has failed". The entry points whose documented results name no
   CUDA_ERROR_NOT_INITIALIZED (cuInit, cuDriverGetVersion, cuGetProcAddress,
   cuGetErrorName, cuGetErrorString) work before it: cuGetProcAddress is how a program
   finds cuInit. */
#define ENTER()                                              \
  do {                                                       \
    ENTER_ANY();                                             \
    if (initialized != 1) return CUDA_ERROR_NOT_INITIALIZED; \
  } while (0)

/* Test hook: fake_cuda_fail_next(name, code, skip) makes the call of the entry point called
   name that comes after skip more calls of it answer code, once; a test picks a code from
   that entry point's documented results. */
enum { FAKE_MAX_FAILURES = 4 };
static struct {
  const char *name;
  int code, skip;
} failures[FAKE_MAX_FAILURES];

FAKE_EXPORT void fake_cuda_fail_next(const char *name, int code, int skip);

void fake_cuda_fail_next(const char *name, int code, int skip) {
  for (int i = 0; i < FAKE_MAX_FAILURES; i++)
    if (failures[i].name == NULL) {
      failures[i].name = name;
      failures[i].code = code;
      failures[i].skip = skip;
      return;
    }
}

static CUresult injected(const char *name) {
  for (int i = 0; i < FAKE_MAX_FAILURES; i++) {
    if (failures[i].name == NULL || strcmp(failures[i].name, name) != 0) continue;
    if (failures[i].skip-- > 0) return CUDA_SUCCESS;
    failures[i].name = NULL;
    return failures[i].code;
  }
  return CUDA_SUCCESS;
}

#define FAIL_POINT(name)                  \
  do {                                    \
    CUresult injected_ = injected(name);  \
    if (injected_ != 0) return injected_; \
  } while (0)

/* A handle that names nothing live: a test counts these ("dead_handles"); a real driver
   may answer them so or misbehave (a destroyed event's or context's handle is not valid
   afterwards: cuEventDestroy, cuCtxDestroy). */
static CUresult dead(CUresult code) {
  driver_counters.dead_handles++;
  return code;
}

/* Test hook: fake_cuda_sticky(code) stands for a kernel fault, after which (cuda.h,
   CUDA_ERROR_ILLEGAL_ADDRESS) "the process [is left] in an inconsistent state and any
   further CUDA work will return the same error": every later event query answers code
   (the calls dlsync asks completion with), until fake_cuda_sticky(0). */
static CUresult sticky_error;

FAKE_EXPORT void fake_cuda_sticky(int code);

void fake_cuda_sticky(int code) {
  sticky_error = code;
}

/* ---- contexts ----------------------------------------------------------------------- */

static fake_context *current(void) {
  return depth > 0 ? stack[depth - 1] : NULL;
}

static int known_context(const fake_context *context) {
  if (context == NULL) return 0;
  for (int d = 0; d < devices; d++)
    if (context == &primaries[d]) return 1;
  for (int i = 0; i < FAKE_MAX_CONTEXTS; i++)
    if (context == created[i] || (greens[i] != NULL && context == &greens[i]->converted)) return 1;
  return 0;
}

/* CUDA_ERROR_CONTEXT_IS_DESTROYED: "the context current to the calling thread has been
   destroyed using cuCtxDestroy, or is a primary context which has not yet been
   initialized". */
static int is_gone(const fake_context *context) {
  return context->destroyed || (context->primary && context->retained == 0);
}

/* CUDA_ERROR_INVALID_CONTEXT: "This most frequently indicates that there is no context
   bound to the current thread." */
static CUresult current_context(fake_context **out) {
  fake_context *context = current();
  if (context == NULL) return CUDA_ERROR_INVALID_CONTEXT;
  if (is_gone(context)) return dead(CUDA_ERROR_CONTEXT_IS_DESTROYED);
  *out = context;
  return CUDA_SUCCESS;
}

static int valid_device(CUdevice device) {
  return device >= 0 && device < devices;
}

static int event_index(const fake_event *event) {
  for (size_t i = 0; i < event_count; i++)
    if (events[i] == event) return (int)i;
  return -1;
}

static void event_forget(int index) {
  free(events[index]);
  events[index] = events[--event_count];
}

/* An event its context took with it: no longer live, and kept allocated, so that its dead
   handle never names an event made later. */
static void event_orphan(int index) {
  fake_keep(events[index]);
  events[index] = events[--event_count];
}

/* Frees a stream; the test hooks forget it. */
/* Test hook: fake_cuda_reuse_stream_handles(1) gives the next stream created the handle of
   the last one destroyed, as a driver may: cuStreamDestroy's stream "resources ... will be
   released", and the handle is their address, which cuStreamGetId's Id is not ("The Id is
   unique for the life of the program"). Off: every stream's memory is its own. */
static int reuse_handles;
static _Atomic unsigned long long next_stream_id; /* cuStreamGetId's last Id given */
static fake_stream *recycled; /* a destroyed stream's memory, for the next stream */

FAKE_EXPORT void fake_cuda_reuse_stream_handles(int on);

void fake_cuda_reuse_stream_handles(int on) {
  reuse_handles = on;
  if (!on) {
    free(recycled);
    recycled = NULL;
  }
}

static void stream_free(fake_stream *stream) {
  if (last_record == stream) last_record = NULL;
  if (last_wait == stream) last_wait = NULL;
  for (int i = 0; i < log_count; i++)
    if (call_log[i].stream == stream) call_log[i].stream = NULL;
  if (reuse_handles && recycled == NULL) {
    for (int i = 0; i < FAKE_MAX_STREAMS; i++)
      if (fake_streams[i] == stream) fake_streams[i] = NULL;
    recycled = stream;
    return;
  }
  fake_stream_free(stream);
}

/* A new stream of device: in the memory of the last one destroyed when the test asks. */
static fake_stream *stream_new(int device) {
  fake_stream *stream = recycled == NULL ? fake_stream_new(device) : NULL;
  for (int i = 0; recycled != NULL && i < FAKE_MAX_STREAMS; i++) {
    if (fake_streams[i] != NULL) continue;
    *recycled = (fake_stream){.device = device};
    stream = fake_streams[i] = recycled;
    recycled = NULL;
  }
  if (stream != NULL) stream->id = ++next_stream_id;
  return stream;
}

static int per_thread_capture(const fake_context *context, const fake_capture *capture, int clear);

/* cuCtxDestroy: "Destroys and cleans up all resources associated with the context ...
   These resources include CUDA types ... CUstream, CUevent"; a primary context "is
   automatically reset once the last reference to it is released" (cuDevicePrimaryCtxRelease).
   Their handles are no longer valid afterwards. */
static void context_reset(fake_context *context) {
  for (int i = 0; i < FAKE_MAX_STREAMS; i++)
    if (fake_streams[i] != NULL && fake_streams[i]->context == context)
      stream_free(fake_streams[i]);
  for (size_t i = event_count; i-- > 0;)
    if (events[i]->context == context) event_orphan((int)i);
  context->legacy->capture = NULL;
  per_thread_capture(context, NULL, 1);
}

static int push(fake_context *context) {
  if (depth == FAKE_CONTEXT_STACK) return 0;
  stack[depth++] = context;
  return 1;
}

/* cuGreenCtxCreate: "It should be noted that a green context can be current to only one
   thread at a time. There is no internal synchronization to make API calls accessing the
   same green context from multiple threads work." cuda.h names no result for a second
   thread that makes it current: the fake takes the strict reading, refuses with
   CUDA_ERROR_INVALID_CONTEXT (among cuCtxSetCurrent's, cuCtxPushCurrent's and
   cuCtxPopCurrent's results) and counts it ("green_second_thread"). Called before the
   calling thread's current context changes from was to next. */
static CUresult change_current(fake_context *was, fake_context *next) {
  if (was == next) return CUDA_SUCCESS;
  CUresult result = CUDA_SUCCESS;
  pthread_mutex_lock(&green_lock);
  if (next != NULL && next->green && next->holder != NULL &&
      next->holder != &fake_thread_identity) {
    driver_counters.green_second_thread++;
    result = CUDA_ERROR_INVALID_CONTEXT;
  } else {
    if (was != NULL && was->green && was->holder == &fake_thread_identity) was->holder = NULL;
    if (next != NULL && next->green) next->holder = &fake_thread_identity;
  }
  pthread_mutex_unlock(&green_lock);
  return result;
}

/* ---- streams ------------------------------------------------------------------------ */

/* CU_STREAM_PER_THREAD: "Stream handle that can be passed as a CUstream to use an implicit
   stream with per-thread synchronization semantics": each host thread has its own in each
   context. They are kept in one table (a thread's identity, its context), so that the
   legacy stream's implicit synchronization and the end of a capture see every thread's. */
enum { FAKE_MAX_PER_THREAD = 128 };
static struct {
  const void *thread;
  fake_context *context;
  fake_stream *stream;
} per_thread_streams[FAKE_MAX_PER_THREAD];
static pthread_mutex_t per_thread_lock = PTHREAD_MUTEX_INITIALIZER;

/* The calling thread's per-thread default stream of context, made at its first use. */
static fake_stream *per_thread_of(fake_context *context) {
  fake_stream *found = NULL;
  pthread_mutex_lock(&per_thread_lock);
  int free_slot = -1;
  for (int i = 0; i < FAKE_MAX_PER_THREAD && found == NULL; i++) {
    if (per_thread_streams[i].context == NULL && free_slot < 0) free_slot = i;
    if (per_thread_streams[i].thread == &fake_thread_identity &&
        per_thread_streams[i].context == context)
      found = per_thread_streams[i].stream;
  }
  if (found == NULL && free_slot >= 0) {
    found = calloc(1, sizeof *found);
    *found = (fake_stream){.device = context->device, .context = context, .per_thread = 1};
    per_thread_streams[free_slot].thread = &fake_thread_identity;
    per_thread_streams[free_slot].context = context;
    per_thread_streams[free_slot].stream = found;
  }
  pthread_mutex_unlock(&per_thread_lock);
  return found;
}

/* A capture on any thread's per-thread stream of context (capture: that one only; NULL:
   any); with clear, every such stream leaves its capture. */
static int per_thread_capture(const fake_context *context, const fake_capture *capture, int clear) {
  int found = 0;
  pthread_mutex_lock(&per_thread_lock);
  for (int i = 0; i < FAKE_MAX_PER_THREAD; i++) {
    fake_stream *stream = per_thread_streams[i].stream;
    if (stream == NULL || (context != NULL && per_thread_streams[i].context != context) ||
        stream->capture == NULL || (capture != NULL && stream->capture != capture))
      continue;
    found = 1;
    if (clear) stream->capture = NULL;
  }
  pthread_mutex_unlock(&per_thread_lock);
  return found;
}

static int is_special(CUstream handle) {
  return handle == NULL || handle == CU_STREAM_LEGACY || handle == CU_STREAM_PER_THREAD;
}

static int known_stream(const void *handle) {
  for (int i = 0; i < FAKE_MAX_STREAMS; i++)
    if (fake_streams[i] != NULL && fake_streams[i] == handle) return 1;
  return 0;
}

/* The special handles, "the NULL stream, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD"
   (cuStreamGetCtx), name the current context's default streams: CU_STREAM_LEGACY is "the
   null stream" (cuStreamIsCapturing). cuStreamGetCtx: for them "If no context is current
   to the calling thread, CUDA_ERROR_INVALID_CONTEXT is returned." Another handle must be
   a live stream: CUDA_ERROR_INVALID_HANDLE "indicates that a resource handle passed to the
   API call was not valid. Resource handles are opaque types like CUstream and CUevent." */
static CUresult resolve(CUstream handle, fake_stream **out) {
  if (is_special(handle)) {
    fake_context *context;
    CUresult error = current_context(&context);
    if (error != CUDA_SUCCESS) return error;
    /* cuStreamGetCtx_v2: "Note that specifying CU_STREAM_PER_THREAD or cudaStreamPerThread
       will return CUDA_ERROR_INVALID_HANDLE if a green context is current to the calling
       thread": a green context has no per-thread stream, whatever the call. */
    if (handle == CU_STREAM_PER_THREAD && context->green) return CUDA_ERROR_INVALID_HANDLE;
    *out = handle == CU_STREAM_PER_THREAD ? per_thread_of(context) : context->legacy;
    return *out != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (!known_stream(handle)) return dead(CUDA_ERROR_INVALID_HANDLE);
  /* cuGreenCtxDestroy: "Once the green context is destroyed, any subsequent API calls
     involving these streams (including cuStreamDestroy) will return
     CUDA_ERROR_CONTEXT_IS_DESTROYED." */
  const fake_context *owner = ((const fake_stream *)handle)->context;
  if (owner->green && owner->destroyed) return dead(CUDA_ERROR_CONTEXT_IS_DESTROYED);
  *out = handle;
  return CUDA_SUCCESS;
}

static fake_context *context_of(const fake_stream *stream) {
  return stream->context;
}

static int is_legacy(const fake_stream *stream) {
  return stream == context_of(stream)->legacy;
}

/* cuStreamIsCapturing: "if this is called on CU_STREAM_LEGACY (the "null stream") while a
   blocking stream in the same context is capturing, it will return
   CUDA_ERROR_STREAM_CAPTURE_IMPLICIT ... The blocking stream capture is not invalidated.
   When a blocking stream is capturing, the legacy stream is in an unusable state until
   the blocking stream capture is terminated." The per-thread default stream is blocking. */
static int legacy_blocked(const fake_stream *stream) {
  fake_context *context = context_of(stream);
  return is_legacy(stream) && (fake_blocking_capture_on(context->device, context, stream) ||
                               per_thread_capture(context, NULL, 0));
}

static int stream_kind(const fake_stream *stream) {
  if (stream == context_of(stream)->legacy) return 1;
  if (stream->per_thread) return 2;
  return 0;
}

/* ---- initialization and versions ---------------------------------------------------- */

/* After fork() the child has none of the driver: "CUDA does not duplicate any of its
   internal data structures or threads to other processes upon a call to fork. Any use of
   CUDA after a call to fork and before a subsequent call to exec has undefined behavior"
   (NVIDIA's CUDA C++ Guidelines for robust and safety-critical programming, rule 1.6). The
   fake gives the defined answer drivers give there: every call, cuInit included, is
   CUDA_ERROR_NOT_INITIALIZED. */
static int forked_child;

#ifndef _WIN32
static void child_after_fork(void) {
  forked_child = 1;
  initialized = 0;
}
#endif

FAKE_EXPORT CUresult cuInit(unsigned int Flags) {
  ENTER_ANY();
  driver_counters.init++;
  if (forked_child) return CUDA_ERROR_NOT_INITIALIZED;
  /* "Currently, the Flags parameter must be 0." */
  if (Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (initialized == 1) return CUDA_SUCCESS;
  /* CUDA_ERROR_NO_DEVICE: "no CUDA-capable devices were detected by the installed CUDA
     driver"; the driver stays uninitialized. */
  int count = fake_device_count();
  if (count <= 0) {
    initialized = -1;
    return CUDA_ERROR_NO_DEVICE;
  }
  /* FAKE_CUDA_INIT_ERROR=<code>: a machine whose driver cannot start. cuInit's results
     include CUDA_ERROR_INVALID_DEVICE, CUDA_ERROR_SYSTEM_DRIVER_MISMATCH and
     CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, and "may also return error codes from
     previous, asynchronous launches" (\notefnerr): CUDA_ERROR_SYSTEM_NOT_READY ("the
     system is not yet ready to start any CUDA work"), the MPS codes ("the MPS client
     failed to connect to the MPS control daemon or the MPS server", 805). */
  const char *init_error = getenv("FAKE_CUDA_INIT_ERROR");
  if (init_error != NULL && atoi(init_error) != 0) {
    initialized = -1;
    return atoi(init_error);
  }
  devices = count < FAKE_MAX_DEVICES ? count : FAKE_MAX_DEVICES;
  for (int d = 0; d < devices; d++) {
    primaries[d] = (fake_context){.device = d, .primary = 1, .legacy = &fake_legacy[d]};
    fake_legacy[d] = (fake_stream){.device = d, .context = &primaries[d]};
  }
  initialized = 1;
#ifndef _WIN32 /* no fork there */
  pthread_atfork(NULL, NULL, child_after_fork);
#endif
  return CUDA_SUCCESS;
}

/* cuDriverGetVersion: "The version is returned as (1000 * major + 10 * minor)" and "This
   function automatically returns CUDA_ERROR_INVALID_VALUE if driverVersion is NULL." */
FAKE_EXPORT CUresult cuDriverGetVersion(int *driverVersion) {
  ENTER_ANY();
  if (driverVersion == NULL) return CUDA_ERROR_INVALID_VALUE;
  *driverVersion = FAKE_CUDA_DRIVER_VERSION;
  return CUDA_SUCCESS;
}

/* ---- devices and primary contexts --------------------------------------------------- */

FAKE_EXPORT CUresult cuDeviceGetCount(int *count) {
  ENTER();
  if (count == NULL) return CUDA_ERROR_INVALID_VALUE;
  *count = devices;
  return CUDA_SUCCESS;
}

/* cuDeviceGet: "Returns in *device a device handle given an ordinal in the range [0,
   cuDeviceGetCount()-1]"; CUDA_ERROR_INVALID_DEVICE: "the device ordinal supplied by the
   user does not correspond to a valid CUDA device". */
FAKE_EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  ENTER();
  if (device == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

/* Retained after a reset, or for the first time: a new context behind the same handle
   ("The primary context is unique per device"). cuCtxGetId: "The Id is unique for the life
   of the program for this instance of CUDA", and cuda.h does not say whether a reset
   primary context comes back with a new Id or keeps its own, as it keeps its handle: the
   fake gives it a new one, or with FAKE_CUDA_RESET_KEEPS_ID=1 (read at each reset) the Id
   it had, whose events the reset destroyed all the same. */
static void primary_retain(CUdevice dev) {
  if (primaries[dev].retained++ != 0) return;
  const char *keeps = getenv("FAKE_CUDA_RESET_KEEPS_ID");
  if (primaries[dev].id == 0 || keeps == NULL || strcmp(keeps, "1") != 0)
    primaries[dev].id = next_context_id++;
}

/* "The primary context is unique per device": every retain returns the same handle.
   cuDevicePrimaryCtxRetain: "Unlike cuCtxCreate() the newly retained context is not pushed
   onto the stack." */
FAKE_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  ENTER();
  if (pctx == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  /* cuDevicePrimaryCtxRetain: "Retaining the primary context for the first time will fail
     with CUDA_ERROR_UNKNOWN if the compute mode of the device is
     CU_COMPUTEMODE_PROHIBITED" (FAKE_CUDA_COMPUTE_PROHIBITED=1: every device). */
  const char *prohibited_mode = getenv("FAKE_CUDA_COMPUTE_PROHIBITED");
  if (prohibited_mode != NULL && strcmp(prohibited_mode, "1") == 0 && primaries[dev].retained == 0)
    return CUDA_ERROR_UNKNOWN;
  driver_counters.primary_retain++;
  primary_retain(dev);
  *pctx = &primaries[dev];
  return CUDA_SUCCESS;
}

/* cuDevicePrimaryCtxRelease: "Releasing a primary context that has not been previously
   retained will fail with CUDA_ERROR_INVALID_CONTEXT"; "The context is automatically reset
   once the last reference to it is released"; "unlike cuCtxDestroy() this method does not
   pop the context from stack in any circumstances." */
static CUresult primary_release(CUdevice dev) {
  ENTER();
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  if (primaries[dev].retained == 0) return CUDA_ERROR_INVALID_CONTEXT;
  driver_counters.primary_release++;
  if (--primaries[dev].retained == 0) context_reset(&primaries[dev]);
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  return primary_release(dev);
}

FAKE_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  return primary_release(dev);
}

/* ---- contexts ----------------------------------------------------------------------- */

/* cuCtxGetCurrent: "If no context is bound to the calling CPU thread then *pctx is set to
   NULL and CUDA_SUCCESS is returned." */
FAKE_EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx) {
  ENTER();
  driver_counters.ctx_get_current++;
  if (pctx == NULL) return CUDA_ERROR_INVALID_VALUE;
  *pctx = current();
  return CUDA_SUCCESS;
}

/* cuCtxSetCurrent: "If there exists a CUDA context stack on the calling CPU thread, this
   will replace the top of that stack with ctx. If ctx is NULL then this will be equivalent
   to popping the top of the calling CPU thread's CUDA context stack (or a no-op if the
   calling CPU thread's CUDA context stack is empty)." CUDA_ERROR_INVALID_CONTEXT "can also
   be returned if the context passed to an API call is not a valid handle (such as a
   context that has had cuCtxDestroy() invoked on it)". */
FAKE_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
  ENTER();
  FAIL_POINT("cuCtxSetCurrent");
  driver_counters.ctx_set_current++;
  if (ctx == NULL) {
    if (depth == 0) return CUDA_SUCCESS;
    CUresult refused = change_current(current(), depth > 1 ? stack[depth - 2] : NULL);
    if (refused == CUDA_SUCCESS) depth--;
    return refused;
  }
  if (!known_context(ctx) || ctx->destroyed) return dead(CUDA_ERROR_INVALID_CONTEXT);
  if (depth == FAKE_CONTEXT_STACK) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult refused = change_current(current(), ctx);
  if (refused != CUDA_SUCCESS) return refused;
  if (depth == 0) return push(ctx) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
  stack[depth - 1] = ctx;
  return CUDA_SUCCESS;
}

/* cuCtxPushCurrent: "Pushes the given context ctx onto the CPU thread's stack of current
   contexts." */
static CUresult push_current(CUcontext ctx) {
  ENTER();
  if (ctx == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (!known_context(ctx) || ctx->destroyed) return CUDA_ERROR_INVALID_CONTEXT;
  if (depth == FAKE_CONTEXT_STACK) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult refused = change_current(current(), ctx);
  return refused != CUDA_SUCCESS ? refused : push(ctx) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

FAKE_EXPORT CUresult cuCtxPushCurrent(CUcontext ctx) {
  return push_current(ctx);
}

FAKE_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  return push_current(ctx);
}

/* cuCtxPopCurrent: "Pops the current CUDA context from the CPU thread and passes back the
   old context handle in *pctx"; with none current, CUDA_ERROR_INVALID_CONTEXT ("no
   context bound to the current thread"). */
static CUresult pop_current(CUcontext *pctx) {
  ENTER();
  if (depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
  CUresult refused = change_current(current(), depth > 1 ? stack[depth - 2] : NULL);
  if (refused != CUDA_SUCCESS) return refused;
  fake_context *popped = stack[--depth];
  if (pctx != NULL) *pctx = popped;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxPopCurrent(CUcontext *pctx) {
  return pop_current(pctx);
}

FAKE_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx) {
  return pop_current(pctx);
}

/* cuCtxGetDevice: "Returns in *device the handle of the current context's device."; with
   no context current, CUDA_ERROR_INVALID_CONTEXT. */
FAKE_EXPORT CUresult cuCtxGetDevice(CUdevice *device) {
  ENTER();
  if (device == NULL) return CUDA_ERROR_INVALID_VALUE;
  fake_context *context;
  CUresult error = current_context(&context);
  if (error != CUDA_SUCCESS) return error;
  *device = context->device;
  return CUDA_SUCCESS;
}

/* cuCtxGetDevice_v2: "If the specified context is NULL, the API will return the current
   context's device." */
SINCE_13000 CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx) {
  ENTER();
  if (ctx == NULL) return cuCtxGetDevice(device);
  if (device == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (!known_context(ctx) || is_gone(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  *device = ctx->device;
  return CUDA_SUCCESS;
}

/* cuCtxGetId: "Returns in ctxId the unique Id which is associated with a given context.
   The Id is unique for the life of the program for this instance of CUDA. If context is
   supplied as NULL and there is one current, the Id of the current context is returned."
   Results include CUDA_ERROR_CONTEXT_IS_DESTROYED ("the context current to the calling
   thread has been destroyed using cuCtxDestroy, or is a primary context which has not
   yet been initialized") and CUDA_ERROR_INVALID_CONTEXT. */
SINCE_12000 CUresult cuCtxGetId(CUcontext ctx, unsigned long long *ctxId) {
  ENTER();
  driver_counters.ctx_get_id++;
  if (ctxId == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (ctx == NULL) {
    CUresult error = current_context(&ctx);
    if (error != CUDA_SUCCESS) return error;
  }
  if (!known_context(ctx)) return dead(CUDA_ERROR_INVALID_CONTEXT);
  if (is_gone(ctx)) return dead(CUDA_ERROR_CONTEXT_IS_DESTROYED);
  *ctxId = ctx->id;
  return CUDA_SUCCESS;
}

/* cuThreadExchangeStreamCaptureMode: "Sets the calling thread's stream capture interaction
   mode to the value contained in *mode, and overwrites *mode with the previous mode for
   the thread"; GLOBAL "is the default mode". cuda.h lists CUDA_ERROR_DEINITIALIZED and
   CUDA_ERROR_INVALID_VALUE among its results: a test injects one (fake_cuda_fail_next),
   and the thread's mode stays as it was. */
FAKE_EXPORT CUresult cuThreadExchangeStreamCaptureMode(int *mode) {
  ENTER();
  FAIL_POINT("cuThreadExchangeStreamCaptureMode");
  if (mode == NULL || *mode < CU_STREAM_CAPTURE_MODE_GLOBAL ||
      *mode > CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  int previous = capture_mode;
  capture_mode = *mode;
  *mode = previous;
  return CUDA_SUCCESS;
}

/* cuThreadExchangeStreamCaptureMode: GLOBAL: "If the local thread has an ongoing capture
   sequence that was not initiated with CU_STREAM_CAPTURE_MODE_RELAXED at
   cuStreamBeginCapture, or if any other thread has a concurrent capture sequence initiated
   with CU_STREAM_CAPTURE_MODE_GLOBAL, this thread is prohibited from potentially unsafe API
   calls"; THREAD_LOCAL: only "the local thread['s] ongoing capture sequence not initiated
   with CU_STREAM_CAPTURE_MODE_RELAXED"; RELAXED: "not prohibited". A prohibited call
   answers CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED ("the operation is not permitted when the
   stream is capturing") and, as the fake is at least as strict as the driver, invalidates
   the captures that prohibited it. The fake counts such calls ("prohibited_calls"). */
static int prohibited(void) {
  int found = fake_cuda_prohibited(capture_mode);
  if (found) driver_counters.prohibited_calls++;
  return found;
}

/* cuCtxCreate: "Creates a new CUDA context and associates it with the calling thread ...
   If a context is already current to the thread, it is supplanted by the newly created
   context and may be restored by a subsequent call to cuCtxPopCurrent()"; "Only one of
   the scheduling flags can be set when creating a context." */
static CUresult create_context(CUcontext *pctx, unsigned int flags, CUdevice dev) {
  ENTER();
  unsigned schedule = flags & CU_CTX_SCHED_MASK;
  if (pctx == NULL || (schedule & (schedule - 1)) != 0) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  int slot = 0;
  while (slot < FAKE_MAX_CONTEXTS && created[slot] != NULL) slot++;
  if (slot == FAKE_MAX_CONTEXTS || depth == FAKE_CONTEXT_STACK) return CUDA_ERROR_OUT_OF_MEMORY;
  fake_context *context = calloc(1, sizeof *context);
  context->device = dev;
  context->id = next_context_id++;
  context->legacy = &context->own_legacy;
  context->own_legacy = (fake_stream){.device = dev, .context = context};
  created[slot] = context;
  change_current(current(), context); /* a new context: no other thread has it */
  push(context);
  *pctx = context;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev) {
  return create_context(pctx, flags, dev);
}

FAKE_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) {
  return create_context(pctx, flags, dev);
}

/* Execution affinity "is only supported under Volta+ MPS", which the fake is not. */
FAKE_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, void *paramsArray, int numParams,
                                    unsigned int flags, CUdevice dev) {
  ENTER();
  if (paramsArray != NULL && numParams > 0) return CUDA_ERROR_NOT_SUPPORTED;
  return create_context(pctx, flags, dev);
}

/* As _v3, and "Context creation in CIG mode will fail with CUDA_ERROR_NOT_SUPPORTED if
   CIG is not supported by the device or the driver." */
SINCE_12050 CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
                                    unsigned int flags, CUdevice dev) {
  ENTER();
  if (ctxCreateParams != NULL && ((ctxCreateParams->execAffinityParams != NULL &&
                                   ctxCreateParams->numExecAffinityParams > 0) ||
                                  ctxCreateParams->cigParams != NULL))
    return CUDA_ERROR_NOT_SUPPORTED;
  return create_context(pctx, flags, dev);
}

/* cuCtxDestroy: "If ctx is current to the calling thread then ctx will also be popped from
   the current thread's context stack (as though cuCtxPopCurrent() were called)." A
   primary context is not destroyed but released: it stays "active and available to the
   user until the user releases it with cuDevicePrimaryCtxRelease() or resets it"
   (cuDevicePrimaryCtxRetain). */
static CUresult destroy_context(CUcontext ctx) {
  ENTER();
  if (!known_context(ctx) || ctx->destroyed || ctx->primary) return CUDA_ERROR_INVALID_CONTEXT;
  context_reset(ctx);
  ctx->destroyed = 1;
  if (current() == ctx && change_current(ctx, depth > 1 ? stack[depth - 2] : NULL) == 0) depth--;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxDestroy(CUcontext ctx) {
  return destroy_context(ctx);
}

FAKE_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
  return destroy_context(ctx);
}

/* ---- green contexts ----------------------------------------------------------------- */

/* cuDeviceGetDevResource: "Get the type resources available to the device"; "Only SM type
   is supported today" (CUDA_ERROR_INVALID_RESOURCE_TYPE otherwise). The fake device has 132
   SMs, partitioned in groups of at least 8 aligned to 8 ("On Compute Architecture 9.0+: The
   minimum count is 8 SMs and must be a multiple of 8"); the driver's own bytes of the
   resource carry its device. */
SINCE_12040 CUresult cuDeviceGetDevResource(CUdevice device, CUdevResource *resource, int type) {
  ENTER();
  if (resource == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(device)) return CUDA_ERROR_INVALID_DEVICE;
  if (type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
  memset(resource, 0, sizeof *resource);
  resource->type = CU_DEV_RESOURCE_TYPE_SM;
  resource->internal_padding[0] = (unsigned char)device;
  resource->sm = (CUdevSmResource){132, 8, 8};
  return CUDA_SUCCESS;
}

/* cuDevResourceGenerateDesc: "A successful API call must have: A valid output pointer for
   the phDesc descriptor as well as a valid array of resources pointers, with the array
   size passed in nbResources"; "If multiple resources are provided in resources, the
   device they came from must be the same, otherwise
   CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION is returned" (the fake takes one). */
SINCE_12040 CUresult cuDevResourceGenerateDesc(CUdevResourceDesc *phDesc, CUdevResource *resources,
                                               unsigned int nbResources) {
  ENTER();
  if (phDesc == NULL || resources == NULL || nbResources != 1) return CUDA_ERROR_INVALID_VALUE;
  if (resources[0].type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
  fake_resource_desc *desc = calloc(1, sizeof *desc); /* descriptors are never freed */
  if (desc == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  fake_keep(desc);
  desc->device = resources[0].internal_padding[0];
  desc->sm_count = resources[0].sm.smCount;
  *phDesc = desc;
  return CUDA_SUCCESS;
}

static fake_green *green_of(fake_context *context) {
  return context != NULL && context->green ? (fake_green *)context : NULL;
}

static int known_green(const fake_green *green) {
  for (int i = 0; green != NULL && i < FAKE_MAX_CONTEXTS; i++)
    if (greens[i] == green) return 1;
  return 0;
}

/* cuGreenCtxCreate: "This API creates a green context with the resources specified in the
   descriptor desc"; "This API will retain the primary context on device dev, which will is
   released when the green context is destroyed"; "The API does not set the green context
   current"; "CU_GREEN_CTX_DEFAULT_STREAM is required" ("Creates a default stream to use
   inside the green context"). Its converted context (cuCtxFromGreenCtx) is a context of
   its own to the fake: its own Id, legacy stream and events. */
SINCE_12040 CUresult cuGreenCtxCreate(CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev,
                                      unsigned int flags) {
  ENTER();
  if (phCtx == NULL || desc == NULL || (flags & CU_GREEN_CTX_DEFAULT_STREAM) == 0 ||
      (flags & ~(unsigned)CU_GREEN_CTX_DEFAULT_STREAM) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  if (desc->device != dev) return CUDA_ERROR_INVALID_VALUE;
  int slot = 0;
  while (slot < FAKE_MAX_CONTEXTS && greens[slot] != NULL) slot++;
  if (slot == FAKE_MAX_CONTEXTS) return CUDA_ERROR_OUT_OF_MEMORY;
  fake_green *green = calloc(1, sizeof *green);
  if (green == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  fake_context *context = &green->converted;
  context->device = dev;
  context->green = 1;
  context->id = next_context_id++;
  context->legacy = &context->own_legacy;
  context->own_legacy = (fake_stream){.device = dev, .context = context};
  greens[slot] = green;
  primary_retain(dev);
  *phCtx = green;
  return CUDA_SUCCESS;
}

/* cuGreenCtxDestroy: "Destroys the green context, releasing the primary context of the
   device that this green context was created for"; "The API does not destroy streams
   created via cuGreenCtxStreamCreate, cuStreamCreate, or cuStreamCreateWithPriority"
   (calls on them then answer CUDA_ERROR_CONTEXT_IS_DESTROYED: resolve); its events go
   with it, as a destroyed context's. */
SINCE_12040 CUresult cuGreenCtxDestroy(CUgreenCtx hCtx) {
  ENTER();
  if (!known_green(hCtx)) return CUDA_ERROR_INVALID_CONTEXT;
  fake_context *context = &hCtx->converted;
  if (context->destroyed) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  for (size_t i = event_count; i-- > 0;)
    if (events[i]->context == context) event_orphan((int)i);
  context->legacy->capture = NULL;
  per_thread_capture(context, NULL, 1);
  pthread_mutex_lock(&green_lock);
  context->destroyed = 1;
  context->holder = NULL;
  pthread_mutex_unlock(&green_lock);
  if (--primaries[context->device].retained == 0) context_reset(&primaries[context->device]);
  return CUDA_SUCCESS;
}

/* cuCtxFromGreenCtx: "The API converts a green context into the primary context returned
   in pContext ... the converted context pContext is a normal primary context but with the
   resources of the specified green context hCtx. Once converted, it can then be used to
   set the context current with cuCtxSetCurrent". */
SINCE_12040 CUresult cuCtxFromGreenCtx(CUcontext *pContext, CUgreenCtx hCtx) {
  ENTER();
  if (pContext == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (!known_green(hCtx) || hCtx->converted.destroyed) return CUDA_ERROR_INVALID_CONTEXT;
  *pContext = &hCtx->converted;
  return CUDA_SUCCESS;
}

/* cuStreamGetGreenCtx: "Returns the CUDA green context that the stream is associated with,
   or NULL if the stream is not associated with any green context"; for "special stream
   such as the NULL stream or CU_STREAM_LEGACY ... if context that is active in the calling
   thread was obtained with cuCtxFromGreenCtx, that green context is returned". */
SINCE_12040 CUresult cuStreamGetGreenCtx(CUstream hStream, CUgreenCtx *phCtx) {
  ENTER();
  driver_counters.stream_get_green_ctx++;
  if (phCtx == NULL) return CUDA_ERROR_INVALID_VALUE;
  fake_stream *stream;
  CUresult error = resolve(hStream, &stream);
  if (error != CUDA_SUCCESS) return error;
  *phCtx = green_of(stream->context);
  return CUDA_SUCCESS;
}

/* cuGreenCtxStreamCreate: "Creates a stream for use in the specified green context
   greenCtx"; "the API ignores the context that is current to the calling thread";
   "CU_STREAM_NON_BLOCKING must be specified"; priorities out of range are clamped (the fake
   has none). Its context, to cuStreamGetCtx, "is equivalent to the one returned by
   cuCtxFromGreenCtx() on the green context associated with the stream at creation time". */
SINCE_12050 CUresult cuGreenCtxStreamCreate(CUstream *phStream, CUgreenCtx greenCtx,
                                            unsigned int flags, int priority) {
  ENTER();
  (void)priority;
  if (phStream == NULL || flags != CU_STREAM_NON_BLOCKING) return CUDA_ERROR_INVALID_VALUE;
  if (!known_green(greenCtx) || greenCtx->converted.destroyed) return CUDA_ERROR_INVALID_CONTEXT;
  fake_stream *stream = stream_new(greenCtx->converted.device);
  if (stream == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  stream->context = &greenCtx->converted;
  stream->non_blocking = 1;
  *phStream = stream;
  return CUDA_SUCCESS;
}

/* ---- streams ------------------------------------------------------------------------ */

/* cuStreamCreate: "Valid values for Flags are: CU_STREAM_DEFAULT ... CU_STREAM_NON_BLOCKING:
   ... the created stream should perform no implicit synchronization with stream 0". The
   stream belongs to the current context: cuStreamGetCtx returns "the context that was
   active in the calling thread when the stream was created". */
FAKE_EXPORT CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags) {
  ENTER();
  if (phStream == NULL || (Flags & ~(unsigned)CU_STREAM_NON_BLOCKING) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  fake_context *context;
  CUresult error = current_context(&context);
  if (error != CUDA_SUCCESS) return error;
  fake_stream *stream = stream_new(context->device);
  if (stream == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  stream->context = context;
  stream->non_blocking = (Flags & CU_STREAM_NON_BLOCKING) != 0;
  *phStream = stream;
  return CUDA_SUCCESS;
}

static CUresult destroy_stream(CUstream hStream) {
  ENTER();
  if (is_special(hStream) || !known_stream(hStream)) return CUDA_ERROR_INVALID_HANDLE;
  fake_stream *stream;
  CUresult error = resolve(hStream, &stream); /* a destroyed green context's stream */
  if (error != CUDA_SUCCESS) return error;
  stream_free(stream);
  return CUDA_SUCCESS;
}

/* cuStreamGetId: "Returns in streamId the unique Id which is associated with the given
   stream handle. The Id is unique for the life of the program"; the special handles name
   the calling thread's default streams, as everywhere (theirs given at the first ask). */
SINCE_12000 CUresult cuStreamGetId(CUstream hStream, unsigned long long *streamId) {
  ENTER();
  driver_counters.stream_get_id++;
  if (streamId == NULL) return CUDA_ERROR_INVALID_VALUE;
  fake_stream *stream;
  CUresult error = resolve(hStream, &stream);
  if (error != CUDA_SUCCESS) return error;
  if (stream->id == 0) stream->id = ++next_stream_id;
  *streamId = stream->id;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuStreamDestroy(CUstream hStream) {
  return destroy_stream(hStream);
}

FAKE_EXPORT CUresult cuStreamDestroy_v2(CUstream hStream) {
  return destroy_stream(hStream);
}

/* cuStreamGetCtx: "Returns the CUDA context that the stream is associated with ... The
   returned context is the context that was active in the calling thread when the stream
   was created ... Specifying any of the special handles will return the context current
   to the calling thread. If no context is current to the calling thread,
   CUDA_ERROR_INVALID_CONTEXT is returned." */
FAKE_EXPORT CUresult cuStreamGetCtx(CUstream hStream, CUcontext *pctx) {
  ENTER();
  driver_counters.stream_get_ctx++;
  if (pctx == NULL) return CUDA_ERROR_INVALID_VALUE;
  fake_stream *stream;
  CUresult error = resolve(hStream, &stream);
  if (error != CUDA_SUCCESS) return error;
  *pctx = context_of(stream);
  return CUDA_SUCCESS;
}

/* cuStreamGetCtx_v2: "If the stream is associated with a green context, the API returns
   the green context in pGreenCtx and the primary context of the associated device in
   pCtx. If the stream is associated with a regular context, the API returns the regular
   context in pCtx and NULL in pGreenCtx"; the special handles, likewise for the context
   current to the calling thread. */
SINCE_12050 CUresult cuStreamGetCtx_v2(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx) {
  ENTER();
  if (pGreenCtx == NULL) return CUDA_ERROR_INVALID_VALUE;
  CUresult error = cuStreamGetCtx(hStream, pCtx);
  if (error != CUDA_SUCCESS) return error;
  *pGreenCtx = green_of(*pCtx);
  if (*pGreenCtx != NULL) *pCtx = &primaries[(*pCtx)->device];
  return CUDA_SUCCESS;
}

/* ---- stream capture ----------------------------------------------------------------- */

/* cuStreamBeginCapture: "Capture may not be initiated if stream is CU_STREAM_LEGACY ...
   it may only be initiated if the stream is not already in capture mode." */
static CUresult begin_capture(CUstream hStream, int mode) {
  ENTER();
  if (mode < 0 || mode > CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_ERROR_INVALID_VALUE;
  fake_stream *stream;
  CUresult error = resolve(hStream, &stream);
  if (error != CUDA_SUCCESS) return error;
  if (is_legacy(stream) || stream->capture != NULL) return CUDA_ERROR_INVALID_VALUE;
  if (!fake_capture_begin(stream, mode)) return CUDA_ERROR_OUT_OF_MEMORY;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuStreamBeginCapture(CUstream hStream) {
  return begin_capture(hStream, 0);
}

FAKE_EXPORT CUresult cuStreamBeginCapture_v2(CUstream hStream, int mode) {
  return begin_capture(hStream, mode);
}

/* cuUserObjectCreate: "Destructor callbacks cannot make CUDA API calls and should avoid
   blocking behavior, as they are executed by a shared internal thread." The fake runs them
   in order on a thread of its own, later than the release that made them due; its test
   hook fake_cuda_drain_destructors waits until every due one has run. */
enum { FAKE_MAX_DUE = 256 };
static pthread_mutex_t due_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t due_changed = PTHREAD_COND_INITIALIZER;
static struct {
  void (*destroy)(void *);
  void *ptr;
} due[FAKE_MAX_DUE];
static int due_head, due_count, due_running, destructor_thread_started;
/* Test hooks: destructors held back; cuEventDestroy letting them go and waiting for them
   (as the driver's thread may run one while another thread destroys an event). */
static int destructors_held, release_on_destroy;
static long destructor_stalls; /* waits for a destructor that did not finish in 2 s */

static void *destructor_thread(void *unused) {
  (void)unused;
  in_destructor = 1;
  pthread_mutex_lock(&due_lock);
  for (;;) {
    while (due_count == 0 || destructors_held) pthread_cond_wait(&due_changed, &due_lock);
    void (*destroy)(void *) = due[due_head].destroy;
    void *ptr = due[due_head].ptr;
    due_head = (due_head + 1) % FAKE_MAX_DUE;
    due_count--;
    due_running = 1;
    pthread_mutex_unlock(&due_lock);
    destroy(ptr);
    pthread_mutex_lock(&due_lock);
    due_running = 0;
    pthread_cond_broadcast(&due_changed);
  }
  return NULL;
}

static void run_later(void (*destroy)(void *), void *ptr) {
  pthread_mutex_lock(&due_lock);
  if (!destructor_thread_started) {
    pthread_t thread;
    destructor_thread_started = pthread_create(&thread, NULL, destructor_thread, NULL) == 0;
    if (destructor_thread_started) pthread_detach(thread);
  }
  while (due_count == FAKE_MAX_DUE) pthread_cond_wait(&due_changed, &due_lock);
  due[(due_head + due_count) % FAKE_MAX_DUE].destroy = destroy;
  due[(due_head + due_count) % FAKE_MAX_DUE].ptr = ptr;
  due_count++;
  pthread_cond_broadcast(&due_changed);
  pthread_mutex_unlock(&due_lock);
}

FAKE_EXPORT void fake_cuda_drain_destructors(void);
FAKE_EXPORT void fake_cuda_hold_destructors(int hold, int until_event_destroy);

void fake_cuda_hold_destructors(int hold, int until_event_destroy) {
  pthread_mutex_lock(&due_lock);
  destructors_held = hold;
  release_on_destroy = until_event_destroy;
  pthread_cond_broadcast(&due_changed);
  pthread_mutex_unlock(&due_lock);
}

/* Lets held destructors run and waits up to 2 s for them. */
static void run_held_destructors(void) {
  pthread_mutex_lock(&due_lock);
  if (release_on_destroy) {
    release_on_destroy = destructors_held = 0;
    pthread_cond_broadcast(&due_changed);
    struct timespec limit;
    clock_gettime(CLOCK_REALTIME, &limit);
    limit.tv_sec += 2;
    while ((due_count != 0 || due_running) &&
           pthread_cond_timedwait(&due_changed, &due_lock, &limit) == 0)
      continue;
    if (due_count != 0 || due_running) destructor_stalls++;
  }
  pthread_mutex_unlock(&due_lock);
}

void fake_cuda_drain_destructors(void) {
  pthread_mutex_lock(&due_lock);
  while (due_count != 0 || due_running) pthread_cond_wait(&due_changed, &due_lock);
  pthread_mutex_unlock(&due_lock);
}

/* "The object's destructor is invoked if the reference count reaches zero"
   (cuUserObjectRelease): later, on the destructor thread. */
static void release_object(fake_user_object *object, unsigned count) {
  object->refs -= count;
  if (object->refs != 0) return;
  run_later(object->destroy, object->ptr);
  fake_counters.user_objects_live--;
  free(object);
}

/* Ends the capture begun on origin: every stream and event that joined it leaves it. The
   graph of an invalidated capture is never handed out, so its user-object references go
   with it now. */
static fake_graph *end_capture(fake_stream *origin) {
  fake_capture *capture = origin->capture;
  if (capture->status != 1) {
    for (int i = 0; i < capture->graph->object_count; i++)
      release_object(capture->graph->objects[i], capture->graph->counts[i]);
    capture->graph->object_count = 0;
  }
  fake_capture *ended = origin->capture;
  per_thread_capture(NULL, ended, 1);
  origin->capture = ended; /* fake_capture_end reads it */
  for (size_t i = 0; i < event_count; i++)
    if (events[i]->capture == capture) events[i]->capture = NULL;
  fake_graph *graph = fake_capture_end(origin);
  origin->capture = NULL;
  return graph;
}

/* cuStreamEndCapture: "Capture must have been initiated on hStream via a call to
   cuStreamBeginCapture. If capture was invalidated, due to a violation of the rules of
   stream capture, then a NULL graph will be returned." CUDA_ERROR_STREAM_CAPTURE_UNMATCHED:
   "the capture was not initiated in this stream"; CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
   "the current capture sequence on the stream has been invalidated due to a previous
   error". */
FAKE_EXPORT CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph) {
  ENTER();
  if (phGraph == NULL) return CUDA_ERROR_INVALID_VALUE;
  fake_stream *stream;
  CUresult error = resolve(hStream, &stream);
  if (error != CUDA_SUCCESS) return error;
  if (stream->capture == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (stream->capture->origin != stream) return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
  *phGraph = end_capture(stream);
  return *phGraph != NULL ? CUDA_SUCCESS : CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
}

/* cuStreamIsCapturing: "CU_STREAM_CAPTURE_STATUS_NONE: The stream is not capturing.
   CU_STREAM_CAPTURE_STATUS_ACTIVE: The stream is capturing.
   CU_STREAM_CAPTURE_STATUS_INVALIDATED: The stream was capturing but an error has
   invalidated the capture sequence." */
FAKE_EXPORT CUresult cuStreamIsCapturing(CUstream hStream, int *captureStatus) {
  ENTER();
  if (captureStatus == NULL) return CUDA_ERROR_INVALID_VALUE;
  fake_stream *stream;
  CUresult error = resolve(hStream, &stream);
  if (error != CUDA_SUCCESS) return error;
  if (legacy_blocked(stream)) return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  *captureStatus = stream->capture != NULL ? stream->capture->status : 0;
  return CUDA_SUCCESS;
}

static const CUgraphNode no_nodes[1];

/* cuStreamGetCaptureInfo: "captureStatus_out - Location to return the capture status of
   the stream; required"; "If called on CU_STREAM_LEGACY (the "null stream") while a stream
   not created with CU_STREAM_NON_BLOCKING is capturing, returns
   CUDA_ERROR_STREAM_CAPTURE_IMPLICIT"; "Valid data (other than capture status) is returned
   only if both of the following are true: the call returns CUDA_SUCCESS; the returned
   capture status is CU_STREAM_CAPTURE_STATUS_ACTIVE"; "If edgeData_out is non-NULL then
   dependencies_out must be as well." The fake's captures keep no dependency set. */
static CUresult capture_info(CUstream hStream, int *status, uint64_t *id, CUgraph *graph,
                             const CUgraphNode **dependencies, const void **edges, size_t *count) {
  ENTER();
  driver_counters.capture_queries++;
  FAIL_POINT("cuStreamGetCaptureInfo");
  if (status == NULL || (edges != NULL && dependencies == NULL)) return CUDA_ERROR_INVALID_VALUE;
  fake_stream *stream;
  CUresult error = resolve(hStream, &stream);
  if (error != CUDA_SUCCESS) return error;
  if (legacy_blocked(stream)) return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  fake_capture *capture = stream->capture;
  *status = capture != NULL ? capture->status : 0;
  if (capture == NULL || capture->status != 1) return CUDA_SUCCESS;
  if (id != NULL) *id = capture->id;
  if (graph != NULL) *graph = capture->graph;
  if (dependencies != NULL) *dependencies = no_nodes;
  if (edges != NULL) *edges = NULL;
  if (count != NULL) *count = 0;
  return CUDA_SUCCESS;
}

/* The three ABIs of cudaTypedefs.h: PFN_cuStreamGetCaptureInfo_v10010 (status, id),
   _v11030 (adds graph, dependencies, count), _v12030 (adds the edge data). */
FAKE_EXPORT CUresult cuStreamGetCaptureInfo(CUstream hStream, int *captureStatus_out,
                                            uint64_t *id_out) {
  return capture_info(hStream, captureStatus_out, id_out, NULL, NULL, NULL, NULL);
}

FAKE_EXPORT CUresult cuStreamGetCaptureInfo_v2(CUstream hStream, int *captureStatus_out,
                                               uint64_t *id_out, CUgraph *graph_out,
                                               const CUgraphNode **dependencies_out,
                                               size_t *numDependencies_out) {
  return capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, NULL,
                      numDependencies_out);
}

SINCE_12030 CUresult cuStreamGetCaptureInfo_v3(CUstream hStream, int *captureStatus_out,
                                               uint64_t *id_out, CUgraph *graph_out,
                                               const CUgraphNode **dependencies_out,
                                               const void **edgeData_out,
                                               size_t *numDependencies_out) {
  return capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
                      numDependencies_out);
}

/* cuGraphDestroy: "Destroys the graph specified by hGraph, as well as all of its nodes";
   the references it owns to user objects are released (cuGraphRetainUserObject). */
FAKE_EXPORT CUresult cuGraphDestroy(CUgraph hGraph) {
  ENTER();
  if (hGraph == NULL) return CUDA_ERROR_INVALID_VALUE;
  for (int i = 0; i < hGraph->object_count; i++)
    release_object(hGraph->objects[i], hGraph->counts[i]);
  free(hGraph);
  return CUDA_SUCCESS;
}

/* ---- mapped host memory and stream memory operations -------------------------------- */

/* cuMemHostAlloc: "Allocates bytesize bytes of host memory that is page-locked and
   accessible to the device"; the fake keeps each allocation's flags, so that
   cuMemHostGetDevicePointer can refuse one made without CU_MEMHOSTALLOC_DEVICEMAP. */
enum {
  FAKE_MAX_HOST_ALLOCATIONS = 64,
  FAKE_MAX_VALUE_WAITS = 65536, /* whole random programs make tens of thousands */
  CU_MEMHOSTALLOC_ALL = 0x07,   /* PORTABLE | DEVICEMAP | WRITECOMBINED */
  CU_MEMHOSTALLOC_DEVICEMAP = 0x02,
  CU_STREAM_WAIT_VALUE_NOR = 0x3,
  CU_STREAM_WAIT_VALUE_FLUSH = 1 << 30,
};
typedef unsigned long long CUdeviceptr;

static struct {
  char *pointer;
  size_t size;
  unsigned flags;
} host_allocations[FAKE_MAX_HOST_ALLOCATIONS];

/* A memory wait (cuStreamWaitValue32): "Work ordered after the operation will block until
   the given condition on the memory is satisfied." The fake device reaches each wait as
   soon as it is enqueued (it completes work at once), and a wait stays satisfied once it
   has seen its condition true: the stream has moved past it. Its condition is read when
   someone asks whether work behind it is done (cuEventQuery, cuStreamQuery) or waits for
   it (cuEventSynchronize, cuStreamSynchronize), which is when a real device's answer
   could change. The device's own work has no effect on the memory: only the host writes
   it. */
static struct {
  const volatile uint32_t *address;
  uint32_t value;
  unsigned condition;
  int met;
} value_waits[FAKE_MAX_VALUE_WAITS];
static int value_wait_count; /* never reset: also the test hook "value_waits" */
static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;

/* FAKE_CUDA_NO_MAPPED_MEMORY=1: devices that cannot map host memory; and
   FAKE_CUDA_NO_STREAM_MEM_OPS=1: devices without stream memory operations. Read at each
   use. */
static int switch_on(const char *name) {
  const char *value = getenv(name);
  return value != NULL && strcmp(value, "1") == 0;
}

/* The allocation p lies in, or -1. */
static int host_allocation_of(const void *p) {
  for (int i = 0; i < FAKE_MAX_HOST_ALLOCATIONS; i++) {
    const char *start = host_allocations[i].pointer;
    if (start != NULL && (const char *)p >= start &&
        (const char *)p < start + host_allocations[i].size)
      return i;
  }
  return -1;
}

/* CUDA_ERROR_INVALID_CONTEXT is among the results of each call below: "This most
   frequently indicates that there is no context bound to the current thread." */
FAKE_EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags) {
  ENTER();
  if (pp == NULL || (Flags & ~(unsigned)CU_MEMHOSTALLOC_ALL) != 0) return CUDA_ERROR_INVALID_VALUE;
  fake_context *context;
  CUresult error = current_context(&context);
  if (error != CUDA_SUCCESS) return error;
  int slot = 0;
  while (slot < FAKE_MAX_HOST_ALLOCATIONS && host_allocations[slot].pointer != NULL) slot++;
  char *memory = slot < FAKE_MAX_HOST_ALLOCATIONS ? calloc(1, bytesize > 0 ? bytesize : 1) : NULL;
  if (memory == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  host_allocations[slot].pointer = memory;
  host_allocations[slot].size = bytesize > 0 ? bytesize : 1;
  host_allocations[slot].flags = Flags;
  *pp = memory;
  return CUDA_SUCCESS;
}

/* cuMemHostGetDevicePointer: "will fail if the CU_MEMHOSTALLOC_DEVICEMAP flag was not
   specified at the time the memory was allocated, or if the function is called on a GPU
   that does not support mapped pinned memory"; "Flags provides for future releases. For
   now, it must be set to 0." The fake's devices can use the host pointer (attribute
   CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM is 1), and "If all devices
   visible to the application have a non-zero value for the device attribute, the device
   pointer returned by cuMemHostGetDevicePointer() will match the original pointer p". */
FAKE_EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags) {
  ENTER();
  if (pdptr == NULL || Flags != 0) return CUDA_ERROR_INVALID_VALUE;
  fake_context *context;
  CUresult error = current_context(&context);
  if (error != CUDA_SUCCESS) return error;
  int index = host_allocation_of(p);
  if (index < 0 || (host_allocations[index].flags & CU_MEMHOSTALLOC_DEVICEMAP) == 0 ||
      switch_on("FAKE_CUDA_NO_MAPPED_MEMORY"))
    return CUDA_ERROR_INVALID_VALUE;
  *pdptr = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
}

/* cuMemFreeHost: "Frees the memory space pointed to by p, which must have been returned by
   a previous call to cuMemAllocHost()" (or cuMemHostAlloc: "The memory allocated by this
   function must be freed with cuMemFreeHost()"). */
FAKE_EXPORT CUresult cuMemFreeHost(void *p) {
  ENTER();
  int index = host_allocation_of(p);
  if (index < 0 || host_allocations[index].pointer != p) return CUDA_ERROR_INVALID_VALUE;
  free(host_allocations[index].pointer);
  host_allocations[index].pointer = NULL;
  return CUDA_SUCCESS;
}

/* cuDeviceGetAttribute: "Returns in *pi the integer value of the attribute attrib on device
   dev". The attributes the fake models: CAN_MAP_HOST_MEMORY (19), UNIFIED_ADDRESSING (41),
   CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM (91), CAN_USE_STREAM_MEM_OPS_V1 (92),
   CAN_FLUSH_REMOTE_WRITES (98: 0, "requires dedicated platform hardware features") and
   CAN_USE_STREAM_WAIT_VALUE_NOR (123); any other answers CUDA_ERROR_INVALID_VALUE, as an
   attribute out of range does. */
FAKE_EXPORT CUresult cuDeviceGetAttribute(int *pi, int attrib, CUdevice dev) {
  ENTER();
  if (pi == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_device(dev)) return CUDA_ERROR_INVALID_DEVICE;
  int mem_ops = !switch_on("FAKE_CUDA_NO_STREAM_MEM_OPS");
  switch (attrib) {
    case 19:
      *pi = !switch_on("FAKE_CUDA_NO_MAPPED_MEMORY");
      return CUDA_SUCCESS;
    case 41:
    case 91:
      *pi = 1;
      return CUDA_SUCCESS;
    case 92:
    case 123:
      *pi = mem_ops;
      return CUDA_SUCCESS;
    case 98:
      *pi = 0;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

/* CUstreamWaitValue_flags: GEQ "Wait until (int32_t)(*addr - value) >= 0 ... a cyclic
   comparison which ignores wraparound", EQ "Wait until *addr == value", AND "Wait until
   (*addr & value) != 0", NOR "Wait until ~(*addr | value) != 0". Called with hold_lock. */
static int wait_met(int index) {
  if (value_waits[index].met) return 1;
  uint32_t now = *value_waits[index].address, value = value_waits[index].value;
  switch (value_waits[index].condition) {
    case 0:
      value_waits[index].met = (int32_t)(now - value) >= 0;
      break;
    case 1:
      value_waits[index].met = now == value;
      break;
    case 2:
      value_waits[index].met = (now & value) != 0;
      break;
    default:
      value_waits[index].met = ~(now | value) != 0;
      break;
  }
  return value_waits[index].met;
}

/* Keeps the waits not met yet; 1 when any is left. Called with hold_lock. */
static int holds_left(int *holds, int *count) {
  int kept = 0;
  for (int i = 0; i < *count; i++)
    if (!wait_met(holds[i])) holds[kept++] = holds[i];
  *count = kept;
  return kept > 0;
}

/* Adds the waits of from that are not met to holds; 0 when there is no room. */
static int holds_merge(int *holds, int *count, const int *from, int from_count) {
  holds_left(holds, count);
  for (int i = 0; i < from_count; i++) {
    int present = wait_met(from[i]);
    for (int j = 0; j < *count && !present; j++) present = holds[j] == from[i];
    if (present) continue;
    if (*count == FAKE_MAX_HOLDS) return 0;
    holds[(*count)++] = from[i];
  }
  return 1;
}

/* What work enqueued on stream now waits for, besides the stream's own waits: the legacy
   stream's implicit synchronization. CU_STREAM_NON_BLOCKING: "the created stream should
   perform no implicit synchronization with stream 0": every other stream of the context
   (the per-thread default streams included: "will synchronize with the legacy default
   stream") does, both ways. Called with hold_lock. */
static void implicit_holds(fake_stream *stream) {
  fake_context *context = context_of(stream);
  if (!is_legacy(stream)) {
    if (!stream->non_blocking)
      holds_merge(stream->holds, &stream->hold_count, context->legacy->holds,
                  context->legacy->hold_count);
    return;
  }
  for (int i = 0; i < FAKE_MAX_STREAMS; i++)
    if (fake_streams[i] != NULL && fake_streams[i]->context == context &&
        !fake_streams[i]->non_blocking)
      holds_merge(stream->holds, &stream->hold_count, fake_streams[i]->holds,
                  fake_streams[i]->hold_count);
  pthread_mutex_lock(&per_thread_lock);
  for (int i = 0; i < FAKE_MAX_PER_THREAD; i++)
    if (per_thread_streams[i].context == context && per_thread_streams[i].stream != NULL)
      holds_merge(stream->holds, &stream->hold_count, per_thread_streams[i].stream->holds,
                  per_thread_streams[i].stream->hold_count);
  pthread_mutex_unlock(&per_thread_lock);
}

/* A record on stream: the event's completion waits for what the stream's work waits for. */
static void hold_record(fake_event *event, fake_stream *stream) {
  pthread_mutex_lock(&hold_lock);
  implicit_holds(stream);
  holds_left(stream->holds, &stream->hold_count);
  memcpy(event->holds, stream->holds, sizeof event->holds);
  event->hold_count = stream->hold_count;
  pthread_mutex_unlock(&hold_lock);
}

/* A wait on event: the stream's later work waits for what the event's record waited for. */
static void hold_wait_event(fake_stream *stream, fake_event *event) {
  pthread_mutex_lock(&hold_lock);
  implicit_holds(stream);
  holds_merge(stream->holds, &stream->hold_count, event->holds, event->hold_count);
  pthread_mutex_unlock(&hold_lock);
}

/* Whether work behind holds is not done yet. */
static int held(int *holds, int *count) {
  pthread_mutex_lock(&hold_lock);
  int left = holds_left(holds, count);
  pthread_mutex_unlock(&hold_lock);
  return left;
}

/* Blocks until no wait of holds is left: the host thread that opens them runs meanwhile. */
static void wait_holds(int *holds, int *count) {
  struct timespec pause = {0, 100000};
  while (held(holds, count)) nanosleep(&pause, NULL);
}

/* cuStreamWaitValue32: "Enqueues a synchronization of the stream on the given memory
   location"; "all memory pointers passed as parameters to these operations are device
   pointers" (the fake's only device pointers are those of its mapped host memory);
   CUDA_ERROR_NOT_SUPPORTED is among its results (FAKE_CUDA_NO_STREAM_MEM_OPS=1, and
   CU_STREAM_WAIT_VALUE_FLUSH, whose support "requires dedicated platform hardware features"
   the fake's devices lack). In a capturing stream it is captured as a node (the fake never
   launches graphs). */
static CUresult wait_value32(CUstream hStream, CUdeviceptr addr, uint32_t value, unsigned flags) {
  ENTER();
  fake_stream *stream;
  CUresult error = resolve(hStream, &stream);
  if (error != CUDA_SUCCESS) return error;
  if (switch_on("FAKE_CUDA_NO_STREAM_MEM_OPS") || (flags & CU_STREAM_WAIT_VALUE_FLUSH) != 0)
    return CUDA_ERROR_NOT_SUPPORTED;
  const void *address = (const void *)(uintptr_t)addr;
  int index = host_allocation_of(address);
  if (flags > CU_STREAM_WAIT_VALUE_NOR || index < 0 ||
      (host_allocations[index].flags & CU_MEMHOSTALLOC_DEVICEMAP) == 0 ||
      (const char *)address + sizeof(uint32_t) >
          host_allocations[index].pointer + host_allocations[index].size)
    return CUDA_ERROR_INVALID_VALUE;
  if (legacy_blocked(stream)) return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  if (stream->capture != NULL) {
    stream->capture->graph->nodes++;
    return CUDA_SUCCESS;
  }
  pthread_mutex_lock(&hold_lock);
  implicit_holds(stream);
  holds_left(stream->holds, &stream->hold_count);
  error = value_wait_count == FAKE_MAX_VALUE_WAITS || stream->hold_count == FAKE_MAX_HOLDS
              ? CUDA_ERROR_OUT_OF_MEMORY
              : CUDA_SUCCESS;
  if (error == CUDA_SUCCESS) {
    int wait = value_wait_count++;
    value_waits[wait].address = address;
    value_waits[wait].value = value;
    value_waits[wait].condition = flags;
    value_waits[wait].met = 0;
    stream->holds[stream->hold_count++] = wait;
  }
  pthread_mutex_unlock(&hold_lock);
  return error;
}

/* cudaTypedefs.h: PFN_cuStreamWaitValue32_v8000 and _v11070, one ABI. */
FAKE_EXPORT CUresult cuStreamWaitValue32(CUstream stream, CUdeviceptr addr, uint32_t value,
                                         unsigned int flags) {
  return wait_value32(stream, addr, value, flags);
}

FAKE_EXPORT CUresult cuStreamWaitValue32_v2(CUstream stream, CUdeviceptr addr, uint32_t value,
                                            unsigned int flags) {
  return wait_value32(stream, addr, value, flags);
}

/* cuStreamGetFlags: "The value returned in flags is a logical 'OR' of all flags that were
   used while creating this stream"; the default streams were made with none. */
FAKE_EXPORT CUresult cuStreamGetFlags(CUstream hStream, unsigned int *flags) {
  ENTER();
  if (flags == NULL) return CUDA_ERROR_INVALID_VALUE;
  fake_stream *stream;
  CUresult error = resolve(hStream, &stream);
  if (error != CUDA_SUCCESS) return error;
  *flags = stream->non_blocking ? CU_STREAM_NON_BLOCKING : 0;
  return CUDA_SUCCESS;
}

/* The stream of a query or synchronize: refused on a stream being captured, and where
   another capture prohibits the call (the rules quoted at cuStreamQuery). */
static CUresult resolve_for_host_wait(CUstream handle, fake_stream **out) {
  CUresult error = resolve(handle, out);
  if (error != CUDA_SUCCESS) return error;
  if ((*out)->capture != NULL) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (prohibited()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  return CUDA_SUCCESS;
}

/* cuStreamQuery: "Returns CUDA_SUCCESS if all operations in the stream specified by hStream
   have completed, or CUDA_ERROR_NOT_READY if not": the fake's work is done unless a memory
   wait holds it. As cuEventQuery, a potentially unsafe call during another thread's
   capture; on a capturing stream CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (the CUDA
   programming guide, stream capture: "It is invalid to query the execution status of or
   synchronize a stream which is being captured"). */
FAKE_EXPORT CUresult cuStreamQuery(CUstream hStream) {
  ENTER();
  fake_stream *stream;
  CUresult error = resolve_for_host_wait(hStream, &stream);
  if (error != CUDA_SUCCESS) return error;
  return held(stream->holds, &stream->hold_count) ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}

/* cuStreamSynchronize: "Waits until the device has completed all operations in the stream
   specified by hStream"; as cuStreamQuery during capture. */
FAKE_EXPORT CUresult cuStreamSynchronize(CUstream hStream) {
  ENTER();
  fake_stream *stream;
  CUresult error = resolve_for_host_wait(hStream, &stream);
  if (error != CUDA_SUCCESS) return error;
  wait_holds(stream->holds, &stream->hold_count);
  return CUDA_SUCCESS;
}

/* ---- events ------------------------------------------------------------------------- */

/* cuEventCreate: "Creates an event *phEvent for the current context"; "CU_EVENT_INTERPROCESS
   must be specified along with CU_EVENT_DISABLE_TIMING". CU_EVENT_DISABLE_TIMING events
   "provide the best performance when used with cuStreamWaitEvent() and cuEventQuery()":
   the fake counts the others. */
FAKE_EXPORT CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags) {
  ENTER();
  if (phEvent == NULL || (Flags & ~0x7u) != 0 ||
      ((Flags & CU_EVENT_INTERPROCESS) != 0 && (Flags & CU_EVENT_DISABLE_TIMING) == 0))
    return CUDA_ERROR_INVALID_VALUE;
  fake_context *context;
  CUresult error = current_context(&context);
  if (error != CUDA_SUCCESS) return error;
  if (event_count == event_capacity) {
    size_t capacity = event_capacity != 0 ? 2 * event_capacity : 64;
    fake_event **grown = realloc(events, capacity * sizeof *grown);
    if (grown == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    events = grown;
    event_capacity = capacity;
  }
  fake_event *event = calloc(1, sizeof *event);
  if (event == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  event->flags = Flags;
  event->device = context->device;
  event->context = context;
  events[event_count++] = event;
  fake_counters.event_create++;
  if ((Flags & CU_EVENT_DISABLE_TIMING) == 0) fake_counters.timing_events++;
  *phEvent = event;
  return CUDA_SUCCESS;
}

/* cuEventDestroy: "An event may be destroyed before it is complete ... the call does not
   block on completion of the event". A destroyed event's handle is no longer valid. */
static CUresult destroy_event(CUevent hEvent) {
  ENTER();
  int index = event_index(hEvent);
  if (index < 0) return dead(CUDA_ERROR_INVALID_HANDLE);
  run_held_destructors();
  event_forget(index);
  fake_counters.event_destroy++;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuEventDestroy(CUevent hEvent) {
  return destroy_event(hEvent);
}

FAKE_EXPORT CUresult cuEventDestroy_v2(CUevent hEvent) {
  return destroy_event(hEvent);
}

/* cuEventRecord: "hEvent and hStream must be from the same context otherwise
   CUDA_ERROR_INVALID_HANDLE is returned." cuda.h leaves open whether a green context's
   converted context and its device's primary context are the same context here:
   cuStreamGetCtx names the converted one for a green context's streams, while
   cuGreenCtxRecordEvent asks only that "hEvent and hCtx must be from the same primary
   context". FAKE_CUDA_GREEN_EVENT_RULE (read at each record) models both readings: strict
   (the default) records an event only on streams of the context it was made in; lenient
   also on streams of the primary context and of every green context of its device.
   In a capturing stream the record is captured into the graph and the event belongs to
   that capture sequence. */
static int event_context_matches(const fake_context *event, const fake_context *stream) {
  if (event == stream) return 1;
  const char *rule = getenv("FAKE_CUDA_GREEN_EVENT_RULE");
  int lenient = rule != NULL && strcmp(rule, "lenient") == 0;
  return lenient && event->device == stream->device && (event->primary || event->green) &&
         (stream->primary || stream->green);
}

FAKE_EXPORT CUresult cuEventRecord(CUevent hEvent, CUstream hStream) {
  ENTER();
  if (event_index(hEvent) < 0) return dead(CUDA_ERROR_INVALID_HANDLE);
  fake_stream *stream;
  CUresult error = resolve(hStream, &stream);
  if (error != CUDA_SUCCESS) return error;
  if (!event_context_matches(hEvent->context, stream->context)) return CUDA_ERROR_INVALID_HANDLE;
  if (legacy_blocked(stream)) return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  fake_counters.event_record++;
  last_record = stream;
  if (log_count < FAKE_LOG_SIZE) call_log[log_count++] = (logged_call){'r', stream};
  hEvent->last_stream = stream;
  hEvent->capture = stream->capture;
  if (stream->capture != NULL) stream->capture->graph->nodes++;
  if (stream->capture != NULL)
    hEvent->hold_count = 0; /* a captured record runs in a launch */
  else
    hold_record(hEvent, stream);
  return CUDA_SUCCESS;
}

/* cuStreamWaitEvent: "hEvent may be from a different context or device than hStream";
   "hEvent - Event to wait on (may not be NULL)"; CU_EVENT_WAIT_EXTERNAL: "Event is
   captured in the graph as an external event node when performing stream capture. This
   flag is invalid outside of stream capture."
   During capture, per the CUDA programming guide (stream capture, "Prohibited and
   Unhandled Operations"): waiting on an event of the same capture joins it; a wait from a
   non-capturing stream on a captured event pulls that stream into the capture (the legacy
   stream "is not supported for stream capture", cuStreamIsCapturing); waiting on an event
   of another capture is CUDA_ERROR_STREAM_CAPTURE_MERGE ("would have resulted in a merge of
   two independent capture sequences"), and on a non-captured event without
   CU_EVENT_WAIT_EXTERNAL CUDA_ERROR_STREAM_CAPTURE_ISOLATION ("a dependency would have been
   created which crosses the capture sequence boundary"); either invalidates the captures
   involved. */
FAKE_EXPORT CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags) {
  ENTER();
  if (event_index(hEvent) < 0) return dead(CUDA_ERROR_INVALID_HANDLE);
  if ((Flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL) != 0) return CUDA_ERROR_INVALID_VALUE;
  fake_stream *stream;
  CUresult error = resolve(hStream, &stream);
  if (error != CUDA_SUCCESS) return error;
  if (legacy_blocked(stream)) return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
  fake_capture *capture = stream->capture;
  if (capture == NULL) {
    if ((Flags & CU_EVENT_WAIT_EXTERNAL) != 0) return CUDA_ERROR_INVALID_VALUE;
    if (hEvent->capture != NULL && hEvent->capture->status == 1) {
      if (is_legacy(stream)) return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
      stream->capture = hEvent->capture;
    } else {
      hold_wait_event(stream, hEvent);
    }
  } else if (hEvent->capture == capture) {
    capture->graph->nodes++;
  } else if (hEvent->capture == NULL && (Flags & CU_EVENT_WAIT_EXTERNAL) != 0) {
    capture->graph->nodes++;
    capture->graph->external_waits++;
  } else {
    fake_capture_invalidate(capture);
    if (hEvent->capture == NULL) return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
    fake_capture_invalidate(hEvent->capture);
    return CUDA_ERROR_STREAM_CAPTURE_MERGE;
  }
  fake_counters.stream_wait++;
  last_wait = stream;
  if (log_count < FAKE_LOG_SIZE)
    call_log[log_count++] =
        (logged_call){(Flags & CU_EVENT_WAIT_EXTERNAL) != 0 ? 'x' : 'w', stream};
  return CUDA_SUCCESS;
}

/* CUDA_ERROR_CAPTURED_EVENT: "the operation is not permitted on an event which was last
   recorded in a capturing stream" (cuStreamBeginCapture's modes: "attempting cuEventQuery
   on an event that was last recorded inside a capture sequence"). The fake device
   completes work as it is enqueued: "Before the first call to cuEventRecord(), an event
   represents an empty set of work, so for example cuEventQuery() would return
   CUDA_SUCCESS", and so does every record, unless its stream's work waits behind a memory
   wait (cuStreamWaitValue32) whose condition is not met yet. */
FAKE_EXPORT CUresult cuEventSynchronize(CUevent hEvent) {
  ENTER();
  if (event_index(hEvent) < 0) return dead(CUDA_ERROR_INVALID_HANDLE);
  if (hEvent->capture != NULL) return CUDA_ERROR_CAPTURED_EVENT;
  if (prohibited()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  wait_holds(hEvent->holds, &hEvent->hold_count);
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuEventQuery(CUevent hEvent) {
  ENTER();
  if (event_index(hEvent) < 0) return dead(CUDA_ERROR_INVALID_HANDLE);
  fake_counters.event_query++;
  if (sticky_error != CUDA_SUCCESS) return sticky_error;
  if (hEvent->capture != NULL) return CUDA_ERROR_CAPTURED_EVENT;
  if (prohibited()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  /* CUDA_ERROR_NOT_READY: "asynchronous operations issued previously have not completed
     yet": the record's work waits behind a memory wait not met. */
  return held(hEvent->holds, &hEvent->hold_count) ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}

/* ---- graph user objects ------------------------------------------------------------- */

/* cuUserObjectCreate: "flags - Currently it is required to pass
   CU_USER_OBJECT_NO_DESTRUCTOR_SYNC, which is the only defined flag"; "destroy - Callback
   to free the user object when it is no longer in use". */
FAKE_EXPORT CUresult cuUserObjectCreate(CUuserObject *object_out, void *ptr, CUhostFn destroy,
                                        unsigned int initialRefcount, unsigned int flags) {
  ENTER();
  if (object_out == NULL || destroy == NULL || flags != CU_USER_OBJECT_NO_DESTRUCTOR_SYNC)
    return CUDA_ERROR_INVALID_VALUE;
  *object_out = calloc(1, sizeof **object_out);
  **object_out = (fake_user_object){.ptr = ptr, .destroy = destroy, .refs = initialRefcount};
  fake_counters.user_objects_live++;
  return CUDA_SUCCESS;
}

/* cuUserObjectRelease: "count - The number of references to release, typically 1. Must be
   nonzero and not larger than INT_MAX"; "The object's destructor is invoked if the
   reference count reaches zero". Releasing "references not owned by the caller" is
   undefined: the fake refuses more than the object has. */
FAKE_EXPORT CUresult cuUserObjectRelease(CUuserObject object, unsigned int count) {
  ENTER();
  if (object == NULL || count == 0 || count > INT_MAX || count > object->refs)
    return CUDA_ERROR_INVALID_VALUE;
  release_object(object, count);
  return CUDA_SUCCESS;
}

/* cuGraphRetainUserObject: "Creates or moves user object references that will be owned by
   a CUDA graph"; "count ... Must be nonzero and not larger than INT_MAX"; "The optional
   flag CU_GRAPH_USER_OBJECT_MOVE transfers references from the calling thread, rather than
   create new references. Pass 0 to create new references." */
FAKE_EXPORT CUresult cuGraphRetainUserObject(CUgraph graph, CUuserObject object, unsigned int count,
                                             unsigned int flags) {
  ENTER();
  FAIL_POINT("cuGraphRetainUserObject");
  if (graph == NULL || object == NULL || count == 0 || count > INT_MAX ||
      (flags & ~(unsigned)CU_GRAPH_USER_OBJECT_MOVE) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  if ((flags & CU_GRAPH_USER_OBJECT_MOVE) != 0 && count > object->refs)
    return CUDA_ERROR_INVALID_VALUE;
  if (graph->object_count == FAKE_MAX_OBJECTS) return CUDA_ERROR_OUT_OF_MEMORY;
  graph->objects[graph->object_count] = object;
  graph->counts[graph->object_count++] = count;
  if ((flags & CU_GRAPH_USER_OBJECT_MOVE) == 0) object->refs += count;
  return CUDA_SUCCESS;
}

/* ---- errors ------------------------------------------------------------------------- */

/* Names as the CUresult enumerators; descriptions: the first sentence of each one's
   comment in cuda.h. */
static const struct {
  CUresult code;
  const char *name, *description;
} errors[] = {
    {0, "CUDA_SUCCESS", "The API call returned with no errors."},
    {1, "CUDA_ERROR_INVALID_VALUE",
     "This indicates that one or more of the parameters passed to the API call is not within "
     "an acceptable range of values."},
    {2, "CUDA_ERROR_OUT_OF_MEMORY",
     "The API call failed because it was unable to allocate enough memory or other resources "
     "to perform the requested operation."},
    {3, "CUDA_ERROR_NOT_INITIALIZED",
     "This indicates that the CUDA driver has not been initialized with cuInit() or that "
     "initialization has failed."},
    {4, "CUDA_ERROR_DEINITIALIZED",
     "This indicates that the CUDA driver is in the process of shutting down."},
    {34, "CUDA_ERROR_STUB_LIBRARY",
     "This indicates that the CUDA driver that the application has loaded is a stub library."},
    {100, "CUDA_ERROR_NO_DEVICE",
     "This indicates that no CUDA-capable devices were detected by the installed CUDA "
     "driver."},
    {101, "CUDA_ERROR_INVALID_DEVICE",
     "This indicates that the device ordinal supplied by the user does not correspond to a "
     "valid CUDA device or that the action requested is invalid for the specified device."},
    {201, "CUDA_ERROR_INVALID_CONTEXT",
     "This most frequently indicates that there is no context bound to the current thread."},
    {400, "CUDA_ERROR_INVALID_HANDLE",
     "This indicates that a resource handle passed to the API call was not valid."},
    {600, "CUDA_ERROR_NOT_READY",
     "This indicates that asynchronous operations issued previously have not completed yet."},
    {709, "CUDA_ERROR_CONTEXT_IS_DESTROYED",
     "This error indicates that the context current to the calling thread has been destroyed "
     "using cuCtxDestroy, or is a primary context which has not yet been initialized."},
    {800, "CUDA_ERROR_NOT_PERMITTED",
     "This error indicates that the attempted operation is not permitted."},
    {801, "CUDA_ERROR_NOT_SUPPORTED",
     "This error indicates that the attempted operation is not supported on the current "
     "system or device."},
    {802, "CUDA_ERROR_SYSTEM_NOT_READY",
     "This error indicates that the system is not yet ready to start any CUDA work."},
    {803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
     "This error indicates that there is a mismatch between the versions of the display "
     "driver and the CUDA driver."},
    {805, "CUDA_ERROR_MPS_CONNECTION_FAILED",
     "This error indicates that the MPS client failed to connect to the MPS control daemon "
     "or the MPS server."},
    {810, "CUDA_ERROR_MPS_CLIENT_TERMINATED",
     "This error indicates that the MPS client has been terminated by the server."},
    {900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "This error indicates that the operation is not permitted when the stream is capturing."},
    {901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
     "This error indicates that the current capture sequence on the stream has been "
     "invalidated due to a previous error."},
    {902, "CUDA_ERROR_STREAM_CAPTURE_MERGE",
     "This error indicates that the operation would have resulted in a merge of two "
     "independent capture sequences."},
    {903, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED",
     "This error indicates that the capture was not initiated in this stream."},
    {904, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED",
     "This error indicates that the capture sequence contains a fork that was not joined to "
     "the primary stream."},
    {905, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION",
     "This error indicates that a dependency would have been created which crosses the "
     "capture sequence boundary."},
    {906, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
     "This error indicates a disallowed implicit dependency on a current capture sequence "
     "from cudaStreamLegacy."},
    {907, "CUDA_ERROR_CAPTURED_EVENT",
     "This error indicates that the operation is not permitted on an event which was last "
     "recorded in a capturing stream."},
    {908, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
     "A stream capture sequence not initiated with the CU_STREAM_CAPTURE_MODE_RELAXED "
     "argument to cuStreamBeginCapture was passed to cuStreamEndCapture in a different "
     "thread."},
    {999, "CUDA_ERROR_UNKNOWN", "This indicates that an unknown internal error has occurred."},
};

/* cuGetErrorName / cuGetErrorString: "Sets *pStr to the address of a NULL-terminated
   string ... If the error code is not recognized, CUDA_ERROR_INVALID_VALUE will be
   returned and *pStr will be set to the NULL address." */
static CUresult error_text(CUresult error, const char **pStr, int name) {
  ENTER_ANY();
  if (pStr == NULL) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < sizeof errors / sizeof *errors; i++) {
    if (errors[i].code != error) continue;
    *pStr = name ? errors[i].name : errors[i].description;
    return CUDA_SUCCESS;
  }
  *pStr = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}

FAKE_EXPORT CUresult cuGetErrorName(CUresult error, const char **pStr) {
  return error_text(error, pStr, 1);
}

FAKE_EXPORT CUresult cuGetErrorString(CUresult error, const char **pStr) {
  return error_text(error, pStr, 0);
}

/* ---- entry point access ------------------------------------------------------------- */

SINCE_12000 CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                         uint64_t flags, int *symbolStatus);
FAKE_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                      uint64_t flags);

typedef void (*entry_point)(void);

/* Each ABI of a base name with the version that introduced it, newest first (the
   PFN_<name>_v<version> typedefs of cudaTypedefs.h). */
static const struct {
  const char *name;
  int since;
  entry_point function;
} entry_points[] = {
#define ROW(name, since, function) \
  { name, since, (entry_point)function }
    ROW("cuInit", 2000, cuInit),
    ROW("cuDriverGetVersion", 2020, cuDriverGetVersion),
    ROW("cuDeviceGetCount", 2000, cuDeviceGetCount),
    ROW("cuDeviceGet", 2000, cuDeviceGet),
    ROW("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain),
    ROW("cuDevicePrimaryCtxRelease", 11000, cuDevicePrimaryCtxRelease_v2),
    ROW("cuDevicePrimaryCtxRelease", 7000, cuDevicePrimaryCtxRelease),
    ROW("cuCtxGetCurrent", 4000, cuCtxGetCurrent),
    ROW("cuCtxGetId", 12000, cuCtxGetId),
    ROW("cuThreadExchangeStreamCaptureMode", 10010, cuThreadExchangeStreamCaptureMode),
    ROW("cuCtxSetCurrent", 4000, cuCtxSetCurrent),
    ROW("cuCtxGetDevice", 13000, cuCtxGetDevice_v2),
    ROW("cuCtxGetDevice", 2000, cuCtxGetDevice),
    ROW("cuCtxCreate", 12050, cuCtxCreate_v4),
    ROW("cuCtxCreate", 11040, cuCtxCreate_v3),
    ROW("cuCtxCreate", 3020, cuCtxCreate_v2),
    ROW("cuCtxCreate", 2000, cuCtxCreate),
    ROW("cuCtxDestroy", 4000, cuCtxDestroy_v2),
    ROW("cuCtxDestroy", 2000, cuCtxDestroy),
    ROW("cuCtxPushCurrent", 4000, cuCtxPushCurrent_v2),
    ROW("cuCtxPushCurrent", 2000, cuCtxPushCurrent),
    ROW("cuCtxPopCurrent", 4000, cuCtxPopCurrent_v2),
    ROW("cuCtxPopCurrent", 2000, cuCtxPopCurrent),
    ROW("cuStreamCreate", 2000, cuStreamCreate),
    ROW("cuStreamGetId", 12000, cuStreamGetId),
    ROW("cuStreamDestroy", 4000, cuStreamDestroy_v2),
    ROW("cuStreamDestroy", 2000, cuStreamDestroy),
    ROW("cuStreamGetCtx", 12050, cuStreamGetCtx_v2),
    ROW("cuDeviceGetDevResource", 12040, cuDeviceGetDevResource),
    ROW("cuDevResourceGenerateDesc", 12040, cuDevResourceGenerateDesc),
    ROW("cuGreenCtxCreate", 12040, cuGreenCtxCreate),
    ROW("cuGreenCtxDestroy", 12040, cuGreenCtxDestroy),
    ROW("cuCtxFromGreenCtx", 12040, cuCtxFromGreenCtx),
    ROW("cuStreamGetGreenCtx", 12040, cuStreamGetGreenCtx),
    ROW("cuGreenCtxStreamCreate", 12050, cuGreenCtxStreamCreate),
    ROW("cuStreamGetCtx", 9020, cuStreamGetCtx),
    ROW("cuStreamWaitValue32", 11070, cuStreamWaitValue32_v2),
    ROW("cuStreamWaitValue32", 8000, cuStreamWaitValue32),
    ROW("cuStreamGetFlags", 5050, cuStreamGetFlags),
    ROW("cuStreamQuery", 2000, cuStreamQuery),
    ROW("cuStreamSynchronize", 2000, cuStreamSynchronize),
    ROW("cuMemHostAlloc", 2020, cuMemHostAlloc),
    ROW("cuMemHostGetDevicePointer", 3020, cuMemHostGetDevicePointer_v2),
    ROW("cuMemFreeHost", 2000, cuMemFreeHost),
    ROW("cuDeviceGetAttribute", 2000, cuDeviceGetAttribute),
    ROW("cuStreamBeginCapture", 10010, cuStreamBeginCapture_v2),
    ROW("cuStreamBeginCapture", 10000, cuStreamBeginCapture),
    ROW("cuStreamEndCapture", 10000, cuStreamEndCapture),
    ROW("cuStreamIsCapturing", 10000, cuStreamIsCapturing),
    ROW("cuStreamGetCaptureInfo", 12030, cuStreamGetCaptureInfo_v3),
    ROW("cuStreamGetCaptureInfo", 11030, cuStreamGetCaptureInfo_v2),
    ROW("cuStreamGetCaptureInfo", 10010, cuStreamGetCaptureInfo),
    ROW("cuGraphDestroy", 10000, cuGraphDestroy),
    ROW("cuEventCreate", 2000, cuEventCreate),
    ROW("cuEventDestroy", 4000, cuEventDestroy_v2),
    ROW("cuEventDestroy", 2000, cuEventDestroy),
    ROW("cuEventRecord", 2000, cuEventRecord),
    ROW("cuStreamWaitEvent", 3020, cuStreamWaitEvent),
    ROW("cuEventSynchronize", 2000, cuEventSynchronize),
    ROW("cuEventQuery", 2000, cuEventQuery),
    ROW("cuUserObjectCreate", 11030, cuUserObjectCreate),
    ROW("cuUserObjectRelease", 11030, cuUserObjectRelease),
    ROW("cuGraphRetainUserObject", 11030, cuGraphRetainUserObject),
    ROW("cuGetErrorName", 6000, cuGetErrorName),
    ROW("cuGetErrorString", 6000, cuGetErrorString),
    ROW("cuGetProcAddress", 12000, cuGetProcAddress_v2),
    ROW("cuGetProcAddress", 11030, cuGetProcAddress),
#undef ROW
};

_Static_assert(sizeof(entry_point) == sizeof(void *), "entry points fit in a void *");

/* cuGetProcAddress: "If the specified CUDA version is greater than the driver version, the
   API will return CUDA_ERROR_INVALID_VALUE"; "if the specified CUDA version is greater
   than or equal to the CUDA version in which the driver symbol was introduced, this API
   will return the function pointer to the corresponding versioned function"; "The API
   will return CUDA_SUCCESS and set the returned pfn to NULL if the requested driver
   function is not supported on the platform, no ABI compatible driver function exists for
   the specified cudaVersion or if the driver symbol is invalid", symbolStatus saying
   CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND or CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT.
   CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM: "If a per-thread version is not found,
   the API will return the legacy version": the fake has none, and counts such lookups. */
static CUresult proc_address(const char *symbol, void **pfn, int cudaVersion, uint64_t flags,
                             int *symbolStatus) {
  ENTER_ANY();
  if (symbol == NULL || pfn == NULL) return CUDA_ERROR_INVALID_VALUE;
  if (cudaVersion > FAKE_CUDA_DRIVER_VERSION) return CUDA_ERROR_INVALID_VALUE;
  if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0)
    driver_counters.per_thread_lookups++;
  int found = 0;
  *pfn = NULL;
  /* FAKE_CUDA_NULL_ENTRY=<name>: a platform on which that function "is not supported":
     CUDA_SUCCESS and a NULL pfn. */
  const char *unsupported = getenv("FAKE_CUDA_NULL_ENTRY");
  if (unsupported != NULL && strcmp(unsupported, symbol) == 0) {
    if (symbolStatus != NULL) *symbolStatus = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_SUCCESS;
  }
  for (size_t i = 0; i < sizeof entry_points / sizeof *entry_points; i++) {
    if (strcmp(entry_points[i].name, symbol) != 0) continue;
    found = 1;
    if (entry_points[i].since > cudaVersion) continue;
    memcpy(pfn, &entry_points[i].function, sizeof *pfn);
    if (symbolStatus != NULL) *symbolStatus = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
  }
  if (symbolStatus != NULL)
    *symbolStatus =
        found ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_SUCCESS;
}

/* cudaTypedefs.h: PFN_cuGetProcAddress_v12000 adds symbolStatus to the _v11030 ABI. */
SINCE_12000 CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                         uint64_t flags, int *symbolStatus) {
  return proc_address(symbol, pfn, cudaVersion, flags, symbolStatus);
}

FAKE_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                      uint64_t flags) {
  return proc_address(symbol, pfn, cudaVersion, flags, NULL);
}

/* ---- test hooks --------------------------------------------------------------------- */

static long driver_counter(const char *name) {
  if (strcmp(name, "stream_get_ctx") == 0) return driver_counters.stream_get_ctx;
  if (strcmp(name, "ctx_set_current") == 0) return driver_counters.ctx_set_current;
  if (strcmp(name, "primary_retain") == 0) return driver_counters.primary_retain;
  if (strcmp(name, "init") == 0) return driver_counters.init;
  if (strcmp(name, "proc_address_per_thread") == 0) return driver_counters.per_thread_lookups;
  if (strcmp(name, "destructor_calls") == 0) return driver_counters.destructor_calls;
  if (strcmp(name, "primary_release") == 0) return driver_counters.primary_release;
  if (strcmp(name, "dead_handles") == 0) return driver_counters.dead_handles;
  if (strcmp(name, "ctx_get_id") == 0) return driver_counters.ctx_get_id;
  if (strcmp(name, "stream_get_id") == 0) return driver_counters.stream_get_id;
  if (strcmp(name, "prohibited_calls") == 0) return driver_counters.prohibited_calls;
  if (strcmp(name, "capture_queries") == 0) return driver_counters.capture_queries;
  if (strcmp(name, "destructor_stalls") == 0) return destructor_stalls;
  if (strcmp(name, "ctx_get_current") == 0) return driver_counters.ctx_get_current;
  if (strcmp(name, "green_second_thread") == 0) return driver_counters.green_second_thread;
  if (strcmp(name, "stream_get_green_ctx") == 0) return driver_counters.stream_get_green_ctx;
  if (strcmp(name, "value_waits") == 0) return value_wait_count;
  return -1;
}

/* Where the last successful cuEventRecord ("record") or cuStreamWaitEvent ("wait") went:
   the stream's context in *context, and 0 for a created stream, 1 for a context's legacy
   stream, 2 for its per-thread stream; -1 when there was none. */
FAKE_EXPORT int fake_cuda_last(const char *op, void **context);

int fake_cuda_last(const char *op, void **context) {
  fake_stream *stream = strcmp(op, "record") == 0 ? last_record : last_wait;
  *context = NULL;
  if (stream == NULL) return -1;
  *context = stream->context;
  return stream_kind(stream);
}

/* The records and waits since the last call (at most 64): entry i's op ('r', 'w', 'x') is
   returned, its stream's kind in *kind (as fake_cuda_last), context in *context and
   stream in *stream (for a created stream, its handle). -1 past the end; i = -1 clears the
   log and returns how many entries it had. */
FAKE_EXPORT int fake_cuda_log(int i, int *kind, void **context, void **stream);

int fake_cuda_log(int i, int *kind, void **context, void **stream) {
  if (i < 0) {
    int count = log_count;
    log_count = 0;
    return count;
  }
  if (i >= log_count) return -1;
  fake_stream *where = call_log[i].stream;
  *kind = where != NULL ? stream_kind(where) : -1;
  *context = where != NULL ? where->context : NULL;
  *stream = where;
  return call_log[i].op;
}
