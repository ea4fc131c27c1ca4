/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CUDA backend, on the driver API. Every CUDA framework's streams and events are
 * driver objects (a cudaStream_t is a CUstream), whether its runtime is shared, bundled,
 * static or absent, and a process has one driver: this backend works in all of them and
 * never brings a runtime in. libcuda.so.1 is opened at the first call (see loader.h), its
 * entry points fetched at one API version (cuda_driver_api.h), cuInit run once.
 *
 * Contexts: a stream's events are created and recorded in the stream's own context
 * (cuStreamGetCtx; a green context's streams report it converted), pooled by the
 * context's cuCtxGetId; a default stream names the current context's. Whether a context is
 * a green one (current to one thread at a time) is asked of a stream, from drivers of 12.4
 * on (cuStreamGetGreenCtx). A device's primary context is retained only to name its
 * default streams for a caller that has no context of that device current, once, and
 * released at dl_sync_shutdown. Event queries and synchronizations run in the relaxed
 * capture mode. The driver keeps no "last error", so the runtime's is never touched.
 */
#include <stdio.h>
#include <string.h>

#include "cuda_driver_api.h"
#include "cuda_driver_entry.h"
#include "loader.h"
#include "user_object.h"

static const char *const driver_sonames[] = {DL_SYNC__CUDA_DRIVER_FILE, NULL};

/* dlsync's own codes (below the loader's): a device whose compute mode prohibits contexts;
   the per-thread default stream named while a green context is current. */
enum {
  DL_SYNC__CU_PROHIBITED = DL_SYNC__NO_RUNTIME - 1,
  DL_SYNC__CU_GREEN_PER_THREAD = DL_SYNC__NO_RUNTIME - 2
};

static int resolve(dl_sync__runtime *rt);

static dl_sync__runtime driver = {.family = "CUDA driver",
                                  .env = "DL_SYNC_LIBCUDA",
                                  .sonames = driver_sonames,
                                  .loadable = 1,
                                  .version_call = "cuDriverGetVersion",
                                  .resolve = resolve,
                                  .lock = DL_SYNC__MUTEX_INIT};

static struct {
/* a declarator: ret is a type and params a parameter list, which take no parentheses */
#define DL_SYNC__CU_POINTER(ret, name, params) \
  ret(*name) params; /* NOLINT(bugprone-macro-parentheses) */
  DL_SYNC__CUDA_DRIVER_CALLS(DL_SYNC__CU_POINTER)
#undef DL_SYNC__CU_POINTER
} api;

/* What resolve() found every entry point with, for dl_sync__cuda_driver_entry_point. */
static dl_sync__cu_get_proc_address get_proc_address;

/* From drivers of CUDA 12.4 on; NULL before (no green context can exist there). */
static dl_sync__cu_stream_get_green_ctx stream_get_green_ctx;
/* cuStreamGetId, 12.0; NULL where the driver does not give it. */
static dl_sync__cu_stream_get_id stream_get_id;

/* Names for the codes a library that is no working driver answers before cuGetErrorName
   can be asked (the toolkit's stub libcuda answers every call with 34). */
static const char *early_code_name(CUresult code) {
  switch (code) {
    case CUDA_ERROR_STUB_LIBRARY:
      return "CUDA_ERROR_STUB_LIBRARY: the toolkit's stub libcuda, not a driver";
    case CUDA_ERROR_INVALID_VALUE:
      return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_NOT_INITIALIZED:
      return "CUDA_ERROR_NOT_INITIALIZED";
    default:
      return "an error";
  }
}

static int resolve(dl_sync__runtime *rt) {
  dl_sync__cu_get_proc_address get_proc = NULL;
  if (!dl_sync__runtime_bind(rt, "cuGetProcAddress_v2", &get_proc, sizeof get_proc))
    return dl_sync__runtime_reject(rt,
                                   "%s has no cuGetProcAddress_v2: its NVIDIA driver is older "
                                   "than CUDA 12.0, and dlsync needs a driver of CUDA 12.0 or "
                                   "newer",
                                   rt->path);
#define DL_SYNC__CU_RESOLVE(ret, name, params)                                                    \
  {                                                                                               \
    void *address = NULL;                                                                         \
    int found = 0;                                                                                \
    CUresult code = get_proc(#name, &address, DL_SYNC__CUDA_DRIVER_API,                           \
                             CU_GET_PROC_ADDRESS_LEGACY_STREAM, &found);                          \
    if (code != CUDA_SUCCESS)                                                                     \
      return dl_sync__runtime_reject(rt, "%s answered cuGetProcAddress(%s) with %d (%s)",         \
                                     rt->path, #name, code, early_code_name(code));               \
    if (address == NULL)                                                                          \
      return dl_sync__runtime_reject(rt, "the driver %s lacks %s at the CUDA 12.0 API", rt->path, \
                                     #name);                                                      \
    memcpy(&api.name, &address, sizeof address);                                                  \
  }
  DL_SYNC__CUDA_DRIVER_CALLS(DL_SYNC__CU_RESOLVE)
#undef DL_SYNC__CU_RESOLVE
  get_proc_address = get_proc;
  CUresult code = api.cuDriverGetVersion(&rt->version);
  if (code != CUDA_SUCCESS)
    return dl_sync__runtime_reject(rt, "%s answered cuDriverGetVersion with %d (%s)", rt->path,
                                   code, early_code_name(code));
  /* cuGetProcAddress: "If the specified CUDA version is greater than the driver version,
     the API will return CUDA_ERROR_INVALID_VALUE": asked only of drivers that have it. */
  void *address = NULL;
  if (rt->version >= DL_SYNC__CUDA_GREEN_CONTEXT_API &&
      get_proc("cuStreamGetGreenCtx", &address, DL_SYNC__CUDA_GREEN_CONTEXT_API,
               CU_GET_PROC_ADDRESS_LEGACY_STREAM, NULL) == CUDA_SUCCESS)
    memcpy(&stream_get_green_ctx, &address, sizeof address);
  address = NULL;
  if (get_proc("cuStreamGetId", &address, DL_SYNC__CUDA_DRIVER_API,
               CU_GET_PROC_ADDRESS_LEGACY_STREAM, NULL) == CUDA_SUCCESS)
    memcpy(&stream_get_id, &address, sizeof address);
  return 0;
}

/* cuInit once, at the first call that needs the driver; its answer is every later one's
   while it failed (no device, a driver mismatch). */
enum { DL_SYNC__CUDA_MAX_DEVICES = DL_SYNC_MAX_DEVICES };
static dl_sync__once init_once = DL_SYNC__ONCE_INIT;
static CUresult init_code;
static int device_count;
static CUdevice devices[DL_SYNC__CUDA_MAX_DEVICES];
static _Atomic(CUcontext) primary[DL_SYNC__CUDA_MAX_DEVICES];

/* A child forked after cuInit: the driver answers it CUDA_ERROR_NOT_INITIALIZED, and
   CUDA cannot be used there at all (cuInit included). */
static atomic_int forked_after_init;

static void note_fork(void) {
  atomic_store(&forked_after_init, 1);
}

static void init(void) {
  init_code = api.cuInit(0);
  if (init_code == CUDA_SUCCESS) dl_sync__on_fork(NULL, NULL, note_fork);
  if (init_code == CUDA_SUCCESS) init_code = api.cuDeviceGetCount(&device_count);
  if (device_count > DL_SYNC__CUDA_MAX_DEVICES) device_count = DL_SYNC__CUDA_MAX_DEVICES;
  for (int i = 0; i < device_count && init_code == CUDA_SUCCESS; i++)
    init_code = api.cuDeviceGet(&devices[i], i);
}

static int need_driver(void) {
  if (!dl_sync__runtime_find(&driver, 1)) return DL_SYNC__NO_RUNTIME;
  dl_sync__once_run(&init_once, init);
  return init_code;
}

#define DL_SYNC__NEED_DRIVER()    \
  do {                            \
    int need_ = need_driver();    \
    if (need_ != 0) return need_; \
  } while (0)

static int cu_device_count(void *ctx, int *count) {
  (void)ctx;
  *count = 0;
  DL_SYNC__NEED_DRIVER();
  *count = device_count;
  return CUDA_SUCCESS;
}

/* The ordinal of the current context's device; -1 when no context is current. */
static int cu_get_device(void *ctx, int32_t *device_id) {
  (void)ctx;
  *device_id = -1;
  DL_SYNC__NEED_DRIVER();
  CUcontext current = NULL;
  CUresult code = api.cuCtxGetCurrent(&current);
  if (code != CUDA_SUCCESS || current == NULL) return code;
  CUdevice device = 0;
  code = api.cuCtxGetDevice(&device);
  for (int i = 0; i < device_count && code == CUDA_SUCCESS; i++)
    if (devices[i] == device) *device_id = i;
  return code;
}

/* Device N's primary context, retained once by dlsync until dl_sync_shutdown: "the
   primary context will be active and available to the user until the user releases it"
   (cuDevicePrimaryCtxRetain). No lock (a forked child must never meet one held): of two
   threads that race, the one that did not publish gives its reference back. */
static CUresult primary_context(int32_t device_id, CUcontext *context) {
  if (device_id < 0 || device_id >= device_count) return CUDA_ERROR_INVALID_DEVICE;
  *context = atomic_load(&primary[device_id]);
  if (*context != NULL) return CUDA_SUCCESS;
  CUcontext retained = NULL, expected = NULL;
  CUresult code = api.cuDevicePrimaryCtxRetain(&retained, devices[device_id]);
  /* "Retaining the primary context for the first time will fail with CUDA_ERROR_UNKNOWN
     if the compute mode of the device is CU_COMPUTEMODE_PROHIBITED." */
  if (code == CUDA_ERROR_UNKNOWN) return DL_SYNC__CU_PROHIBITED;
  if (code != CUDA_SUCCESS) return code;
  if (!atomic_compare_exchange_strong(&primary[device_id], &expected, retained))
    api.cuDevicePrimaryCtxRelease(devices[device_id]); /* the same handle: one is enough */
  *context = atomic_load(&primary[device_id]);
  return CUDA_SUCCESS;
}

/* release_contexts: the references primary_context took to name default streams. */
static int cu_release_contexts(void *ctx, int32_t *device_id, const char **call) {
  (void)ctx;
  *call = "cuDevicePrimaryCtxRelease";
  if (atomic_load(&driver.state) != DL_SYNC__RUNTIME_READY || init_code != CUDA_SUCCESS)
    return CUDA_SUCCESS;
  CUresult first = CUDA_SUCCESS;
  for (int i = 0; i < device_count; i++) {
    if (atomic_exchange(&primary[i], NULL) == NULL) continue;
    CUresult code = api.cuDevicePrimaryCtxRelease(devices[i]);
    if (code != CUDA_SUCCESS && first == CUDA_SUCCESS) {
      first = code;
      *device_id = i;
    }
  }
  return (int)first;
}

static int cu_primary_context(void *ctx, int32_t device_id, void **context) {
  (void)ctx;
  *context = NULL;
  DL_SYNC__NEED_DRIVER();
  return primary_context(device_id, (CUcontext *)context);
}

static int cu_set_device(void *ctx, int32_t device_id) {
  (void)ctx;
  DL_SYNC__NEED_DRIVER();
  CUcontext context = NULL;
  CUresult code = primary_context(device_id, &context);
  return code != CUDA_SUCCESS ? code : api.cuCtxSetCurrent(context);
}

static int cu_get_context(void *ctx, void **context) {
  (void)ctx;
  *context = NULL;
  DL_SYNC__NEED_DRIVER();
  return api.cuCtxGetCurrent((CUcontext *)context);
}

static int cu_set_context(void *ctx, void *context) {
  (void)ctx;
  DL_SYNC__NEED_DRIVER();
  return api.cuCtxSetCurrent((CUcontext)context);
}

static int cu_stream_context(void *ctx, void *stream, void **context) {
  (void)ctx;
  *context = NULL;
  DL_SYNC__NEED_DRIVER();
  return api.cuStreamGetCtx((CUstream)stream, (CUcontext *)context);
}

/* cuStreamGetGreenCtx: a stream's green context, "or NULL if the stream is not associated
   with any green context"; for CU_STREAM_LEGACY, the calling thread's current one's. */
static CUresult stream_green(CUstream stream, int *green) {
  *green = 0;
  if (stream_get_green_ctx == NULL) return CUDA_SUCCESS;
  CUgreenCtx found = NULL;
  CUresult code = stream_get_green_ctx(stream, &found);
  *green = found != NULL;
  return code;
}

/* cuStreamGetId: "The Id is unique for the life of the program", where a destroyed
   stream's handle may be a new stream's. 0 from a driver without it. */
static int cu_stream_id(void *ctx, void *stream, uint64_t *id) {
  (void)ctx;
  *id = 0;
  DL_SYNC__NEED_DRIVER();
  if (stream_get_id == NULL) return CUDA_SUCCESS;
  unsigned long long value = 0;
  CUresult code = stream_get_id((CUstream)stream, &value);
  *id = value;
  return code;
}

/* context_exclusive: a green context is current to one thread at a time. */
static int cu_context_exclusive(void *ctx, void *stream, int *exclusive) {
  (void)ctx;
  *exclusive = 0;
  DL_SYNC__NEED_DRIVER();
  return stream_green((CUstream)stream, exclusive);
}

/* cuStreamGetCtx_v2: "specifying CU_STREAM_PER_THREAD or cudaStreamPerThread will return
   CUDA_ERROR_INVALID_HANDLE if a green context is current to the calling thread": a call
   on the per-thread stream answering so, with a green context current, is told apart (the
   message says why, and what to pass instead). */
static int per_thread_answer(void *stream, CUresult code) {
  int green = 0;
  if (stream != DL_SYNC_STREAM_PER_THREAD || code != CUDA_ERROR_INVALID_HANDLE ||
      stream_green((CUstream)DL_SYNC_STREAM_LEGACY, &green) != CUDA_SUCCESS || !green)
    return code;
  return DL_SYNC__CU_GREEN_PER_THREAD;
}

/* What a reset context's events answer a record with: an event destroyed with its context
   is no valid handle any more (CUDA_ERROR_INVALID_HANDLE: "a resource handle passed to the
   API call was not valid"), or its context is gone (CUDA_ERROR_CONTEXT_IS_DESTROYED). */
/* event_gone: a record's code that says the event no longer exists (its context reset or
   destroyed under it), where the stream was just asked about. */
static int cu_event_gone(void *ctx, int code) {
  (void)ctx;
  return code == CUDA_ERROR_INVALID_HANDLE || code == CUDA_ERROR_CONTEXT_IS_DESTROYED;
}

/* cuCtxGetId: "The Id is unique for the life of the program for this instance of CUDA."
   A primary context keeps its handle when it is reset (its last reference released, or
   cuDevicePrimaryCtxReset), and comes back from the reset as a new context with a new
   Id; a destroyed context's handle may be handed out again for a new one, with a new Id. */
static int cu_context_id(void *ctx, void *context, uint64_t *id) {
  (void)ctx;
  *id = 0;
  DL_SYNC__NEED_DRIVER();
  unsigned long long value = 0;
  CUresult code = api.cuCtxGetId((CUcontext)context, &value);
  *id = value;
  return code;
}

static int cu_event_create(void *ctx, void **event) {
  (void)ctx;
  DL_SYNC__NEED_DRIVER();
  return api.cuEventCreate((CUevent *)event, CU_EVENT_DISABLE_TIMING);
}

static int cu_event_destroy(void *ctx, void *event) {
  (void)ctx;
  DL_SYNC__NEED_DRIVER();
  return api.cuEventDestroy((CUevent)event);
}

static int cu_event_record(void *ctx, void *event, void *stream) {
  (void)ctx;
  DL_SYNC__NEED_DRIVER();
  return per_thread_answer(stream, api.cuEventRecord((CUevent)event, (CUstream)stream));
}

static int cu_stream_wait(void *ctx, void *stream, void *event) {
  (void)ctx;
  DL_SYNC__NEED_DRIVER();
  return per_thread_answer(
      stream, api.cuStreamWaitEvent((CUstream)stream, (CUevent)event, CU_EVENT_WAIT_DEFAULT));
}

static int cu_stream_wait_external(void *ctx, void *stream, void *event) {
  (void)ctx;
  DL_SYNC__NEED_DRIVER();
  return per_thread_answer(
      stream, api.cuStreamWaitEvent((CUstream)stream, (CUevent)event, CU_EVENT_WAIT_EXTERNAL));
}

/* Queries and synchronizations run in the relaxed capture mode (dl_sync__relaxed), never on
   an event recorded in a capture. */
static int query_event(void *event) {
  return api.cuEventQuery((CUevent)event);
}

static int synchronize_event(void *event) {
  return api.cuEventSynchronize((CUevent)event);
}

static int relaxed(int (*call)(void *event), void *event) {
  return dl_sync__relaxed(api.cuThreadExchangeStreamCaptureMode, CU_STREAM_CAPTURE_MODE_RELAXED,
                          call, event, CUDA_ERROR_NOT_READY);
}

static int cu_event_synchronize(void *ctx, void *event) {
  (void)ctx;
  DL_SYNC__NEED_DRIVER();
  return relaxed(synchronize_event, event);
}

static int cu_event_query(void *ctx, void *event, int *complete) {
  (void)ctx;
  *complete = 0;
  DL_SYNC__NEED_DRIVER();
  CUresult code = relaxed(query_event, event);
  *complete = code == CUDA_SUCCESS;
  return code == CUDA_ERROR_NOT_READY ? CUDA_SUCCESS : code;
}

static int cu_capture_info(void *ctx, void *stream, dl_sync_capture_info *out) {
  (void)ctx;
  DL_SYNC__NEED_DRIVER();
  int status = CU_STREAM_CAPTURE_STATUS_NONE;
  uint64_t id = 0;
  CUresult code = api.cuStreamGetCaptureInfo((CUstream)stream, &status, &id, NULL, NULL, NULL);
  out->status = (int32_t)status;
  out->id = id;
  return per_thread_answer(stream, code);
}

static int cu_capturing_graph(void *stream, void **graph) {
  DL_SYNC__NEED_DRIVER();
  int status = CU_STREAM_CAPTURE_STATUS_NONE;
  CUgraph captured = NULL;
  int code = api.cuStreamGetCaptureInfo((CUstream)stream, &status, NULL, &captured, NULL, NULL);
  if (code == CUDA_SUCCESS && status != CU_STREAM_CAPTURE_STATUS_ACTIVE)
    code = CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
  *graph = captured;
  return code;
}

/* User-object destructors run on a driver thread and may not call CUDA: release only
   gives the event back to dlsync's pool. */
static int cu_user_object_create(void **user_object, void *object, void (*release)(void *)) {
  CUuserObject made = NULL;
  int code = api.cuUserObjectCreate(&made, object, release, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC);
  *user_object = made;
  return code;
}

static int cu_move_to_graph(void *graph, void *user_object) {
  return api.cuGraphRetainUserObject((CUgraph)graph, (CUuserObject)user_object, 1,
                                     CU_GRAPH_USER_OBJECT_MOVE);
}

static void cu_user_object_drop(void *user_object) {
  api.cuUserObjectRelease((CUuserObject)user_object, 1);
}

static int cu_graph_retain(void *ctx, void *stream, void *object, void (*release)(void *)) {
  (void)ctx;
  static const dl_sync__user_object_calls calls = {cu_capturing_graph, cu_user_object_create,
                                                   cu_move_to_graph, cu_user_object_drop};
  return dl_sync__graph_retain_with(&calls, stream, object, release);
}

static const char *cu_error_name(void *ctx, int code) {
  (void)ctx;
  if (code == DL_SYNC__NO_RUNTIME) return "no CUDA driver";
  if (code == DL_SYNC__CU_PROHIBITED) return "CUDA_ERROR_UNKNOWN";
  if (code == DL_SYNC__CU_GREEN_PER_THREAD) return "CUDA_ERROR_INVALID_HANDLE";
  const char *name = NULL;
  if (!dl_sync__runtime_find(&driver, 0) || api.cuGetErrorName(code, &name) != CUDA_SUCCESS ||
      name == NULL)
    return "unknown CUDA driver error";
  return name;
}

static const char *cu_error_string(void *ctx, int code) {
  (void)ctx;
  if (code == DL_SYNC__NO_RUNTIME) return driver.why;
  if (code == DL_SYNC__CU_PROHIBITED)
    return "the first retain of the device's primary context failed, as it does when the "
           "device's compute mode is CU_COMPUTEMODE_PROHIBITED (no context can be created on "
           "it): the device is not usable by this process";
  if (code == DL_SYNC__CU_GREEN_PER_THREAD)
    return "the per-thread default stream (CU_STREAM_PER_THREAD, DLPack's stream=2) is no "
           "stream while a green context is current to the calling thread (cuStreamGetCtx_v2: "
           "it \"will return CUDA_ERROR_INVALID_HANDLE if a green context is current to the "
           "calling thread\"): pass one of the green context's streams, or None for its "
           "legacy default stream";
  if (code == CUDA_ERROR_NOT_INITIALIZED && atomic_load(&forked_after_init))
    return "this process was forked after CUDA was initialized in its parent, and CUDA "
           "cannot be used in such a child: initialize CUDA after fork, or start the child "
           "with a spawn/forkserver method";
  const char *text = NULL;
  if (!dl_sync__runtime_find(&driver, 0) || api.cuGetErrorString(code, &text) != CUDA_SUCCESS ||
      text == NULL)
    return "the driver has no description of this code";
  return text;
}

/* The codes that mean "no usable device", whatever call met them: no driver, no device,
   the stub library, an unready system or MPS, a device that cuInit would not take. */
static int cu_error_status(void *ctx, int code) {
  (void)ctx;
  if (code != CUDA_SUCCESS && code == init_code) return DL_SYNC_ENODEV; /* cuInit's answer */
  if (code >= CUDA_ERROR_MPS_CONNECTION_FAILED && code <= CUDA_ERROR_MPS_CLIENT_TERMINATED)
    return DL_SYNC_ENODEV;
  if (code == DL_SYNC__CU_GREEN_PER_THREAD) return DL_SYNC_EINVAL; /* the caller's choice */
  switch (code) {
    case DL_SYNC__NO_RUNTIME:
    case DL_SYNC__CU_PROHIBITED:
    case CUDA_ERROR_SYSTEM_NOT_READY:
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_DEINITIALIZED:
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
      return DL_SYNC_ENODEV;
    case CUDA_ERROR_OUT_OF_MEMORY:
      return DL_SYNC_ENOMEM;
    default:
      return dl_sync__other_error_status(code, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                                         CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD);
  }
}

static const char *const cuda_driver_backend_call_names[DL_SYNC_OP_COUNT] = {
    [DL_SYNC_OP_DEVICE_COUNT] = "cuDeviceGetCount",
    [DL_SYNC_OP_GET_DEVICE] = "cuCtxGetDevice",
    [DL_SYNC_OP_SET_DEVICE] = "cuCtxSetCurrent(primary context)",
    [DL_SYNC_OP_EVENT_CREATE] = "cuEventCreate",
    [DL_SYNC_OP_EVENT_DESTROY] = "cuEventDestroy",
    [DL_SYNC_OP_EVENT_RECORD] = "cuEventRecord",
    [DL_SYNC_OP_STREAM_WAIT] = "cuStreamWaitEvent",
    [DL_SYNC_OP_STREAM_WAIT_EXTERNAL] = "cuStreamWaitEvent(CU_EVENT_WAIT_EXTERNAL)",
    /* run in the relaxed capture mode (relaxed()): either exchange may be what failed */
    [DL_SYNC_OP_EVENT_SYNCHRONIZE] =
        "cuEventSynchronize(relaxed by cuThreadExchangeStreamCaptureMode)",
    [DL_SYNC_OP_EVENT_QUERY] = "cuEventQuery(relaxed by cuThreadExchangeStreamCaptureMode)",
    [DL_SYNC_OP_CAPTURE_INFO] = "cuStreamGetCaptureInfo",
    [DL_SYNC_OP_GRAPH_RETAIN] = "cuGraphRetainUserObject",
    [DL_SYNC_OP_STREAM_ID] = "cuStreamGetId",
};

static const dl_sync_backend cuda_driver_backend = {
    DL_SYNC_BACKEND_INIT,
    .name = "cuda",
    .call_names = cuda_driver_backend_call_names,
    .call_name_count = DL_SYNC_OP_COUNT,
    .device_count = cu_device_count,
    .get_device = cu_get_device,
    .set_device = cu_set_device,
    .event_create = cu_event_create,
    .event_destroy = cu_event_destroy,
    .event_record = cu_event_record,
    .stream_wait = cu_stream_wait,
    .stream_wait_external = cu_stream_wait_external,
    .event_synchronize = cu_event_synchronize,
    .event_query = cu_event_query,
    .capture_info = cu_capture_info,
    .graph_retain = cu_graph_retain,
    .error_name = cu_error_name,
    .error_string = cu_error_string,
    .error_status = cu_error_status,
    .get_context = cu_get_context,
    .set_context = cu_set_context,
    .stream_context = cu_stream_context,
    .primary_context = cu_primary_context,
    .context_id = cu_context_id,
    .context_call_names = {"cuCtxGetCurrent", "cuCtxSetCurrent", "cuStreamGetCtx",
                           "cuDevicePrimaryCtxRetain", "cuCtxGetId"},
    .context_exclusive = cu_context_exclusive,
    .context_exclusive_call_name = "cuStreamGetGreenCtx",
    .event_gone = cu_event_gone,
    .release_contexts = cu_release_contexts,
    .stream_id = cu_stream_id,
};

const dl_sync_backend *dl_sync_cuda_backend(void) {
  return &cuda_driver_backend;
}

dl_sync__runtime *dl_sync__cuda_driver_of(const dl_sync_backend *backend) {
  return backend == &cuda_driver_backend ? &driver : NULL;
}

int dl_sync__cuda_driver_entry_point(const char *name, void **address) {
  *address = NULL;
  DL_SYNC__NEED_DRIVER();
  return get_proc_address(name, address, DL_SYNC__CUDA_DRIVER_API,
                          CU_GET_PROC_ADDRESS_LEGACY_STREAM, NULL);
}
