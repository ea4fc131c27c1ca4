/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlsync/backend.h: the device-runtime vtable, the backend registry, the event pool
 * statistics and dl_sync_shutdown.
 *
 * A backend wraps one runtime (CUDA, HIP, the simulated device). Users may install their
 * own, or wrap a built-in one (to count or fail calls) and install the wrapper.
 *
 * Calling convention of every callback: ctx is the backend's ctx field; the return value
 * is the runtime's own error code, 0 on success. dlsync turns a nonzero code into a
 * status with error_status() and into a message with call_names[op], error_name() and
 * error_string(). Streams are always borrowed; events are created and destroyed only
 * through event_create / event_destroy, by dlsync's event pool.
 */
#ifndef DL_SYNC_BACKEND_H_
#define DL_SYNC_BACKEND_H_

#include <stddef.h>
#include <stdint.h>

#include "dlsync/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The operations of a backend, for messages (call_names) and for call counting. */
typedef enum dl_sync_op {
  DL_SYNC_OP_DEVICE_COUNT,
  DL_SYNC_OP_GET_DEVICE,
  DL_SYNC_OP_SET_DEVICE,
  DL_SYNC_OP_EVENT_CREATE,
  DL_SYNC_OP_EVENT_DESTROY,
  DL_SYNC_OP_EVENT_RECORD,
  DL_SYNC_OP_STREAM_WAIT,
  DL_SYNC_OP_STREAM_WAIT_EXTERNAL,
  DL_SYNC_OP_EVENT_SYNCHRONIZE,
  DL_SYNC_OP_EVENT_QUERY,
  DL_SYNC_OP_CAPTURE_INFO,
  DL_SYNC_OP_GRAPH_RETAIN,
  DL_SYNC_OP_OWN_STREAM_CREATE,
  DL_SYNC_OP_OWN_STREAM_CHECK,
  DL_SYNC_OP_OWN_STREAM_DESTROY,
  DL_SYNC_OP_STREAM_ID,
  DL_SYNC_OP_COUNT
} dl_sync_op;

/** Capture states, numbered as cudaStreamCaptureStatus. */
#define DL_SYNC_CAPTURE_NONE 0
#define DL_SYNC_CAPTURE_ACTIVE 1
#define DL_SYNC_CAPTURE_INVALIDATED 2

/** A stream's capture state; id identifies the capture sequence when not NONE. */
typedef struct dl_sync_capture_info {
  int32_t status; /**< DL_SYNC_CAPTURE_* */
  uint64_t id;    /**< equal for every stream of one capture */
} dl_sync_capture_info;

/** The backend may not re-record an event whose last record may be pending (HIP):
    the pool hands out the oldest idle event after querying it, or creates a new one. */
#define DL_SYNC_BACKEND_QUERY_BEFORE_REUSE (1u << 0)

typedef struct dl_sync_backend dl_sync_backend;

/**
 * The vtable is an ABI that grows: it begins with its size and a tag, and new members
 * only ever come at its end. A backend starts its initializer with DL_SYNC_BACKEND_INIT
 * (or sets size to sizeof(dl_sync_backend) and abi to DL_SYNC_BACKEND_ABI); dlsync reads
 * only the members its size covers, so a backend built against this header keeps working
 * with later versions, and dl_sync_set_backend refuses (EINVAL, naming what it found) a
 * struct without the tag, such as one of the layout before it, which began with name.
 */
#define DL_SYNC_BACKEND_ABI UINT32_C(0x444c5342) /* "DLSB" */
#define DL_SYNC_BACKEND_INIT .size = (uint32_t)sizeof(dl_sync_backend), .abi = DL_SYNC_BACKEND_ABI

struct dl_sync_backend {
  uint32_t size;    /**< sizeof(dl_sync_backend) where the backend was built */
  uint32_t abi;     /**< DL_SYNC_BACKEND_ABI */
  const char *name; /**< "cuda", "hip", "sim": used in messages */
  void *ctx;        /**< passed to every callback */
  uint32_t flags;   /**< DL_SYNC_BACKEND_* */
  /** The number of entries of call_names; an operation past them has no name. */
  uint32_t call_name_count;
  /** The runtime call behind each operation, indexed by dl_sync_op (e.g.
      "cudaStreamWaitEvent"); an entry may be NULL. */
  const char *const *call_names;

  /** Number of devices. A runtime without devices returns its error code. */
  int (*device_count)(void *ctx, int *count);
  /** The calling thread's current device; -1 when none is (a backend with contexts and
      no context current on the thread). */
  int (*get_device)(void *ctx, int32_t *device_id);
  /** Makes device_id current for the calling thread (with contexts: its primary
      context, as the CUDA runtime does). */
  int (*set_device)(void *ctx, int32_t device_id);
  /** Creates an event on the current device, timing disabled. dlsync owns it. */
  int (*event_create)(void *ctx, void **event);
  /** Destroys an event created by event_create; pending waits on it stay valid. */
  int (*event_destroy)(void *ctx, void *event);
  /** Captures the work enqueued so far on stream into event (re-recording overwrites). */
  int (*event_record)(void *ctx, void *event, void *stream);
  /** Makes later work on stream wait for the record that event holds now. */
  int (*stream_wait)(void *ctx, void *stream, void *event);
  /** stream_wait for a capturing stream and a non-captured event: captures an external
      event-wait node. NULL (or not available) when the runtime cannot. */
  int (*stream_wait_external)(void *ctx, void *stream, void *event);
  /** Blocks the host until event's record completed. */
  int (*event_synchronize)(void *ctx, void *event);
  /** *complete = 1 when event's record completed (or it was never recorded), else 0. */
  int (*event_query)(void *ctx, void *event, int *complete);
  /** The capture state of stream. */
  int (*capture_info)(void *ctx, void *stream, dl_sync_capture_info *out);
  /** Hands object to the graph being captured on stream: release(object) runs once, when
      the graph is destroyed, possibly on a runtime thread where no runtime call is
      allowed. Ownership moves in every case: on failure release runs too (now or
      later). NULL (or not available) when the runtime has no graph user objects. */
  int (*graph_retain)(void *ctx, void *stream, void *object, void (*release)(void *object));
  /** The runtime's name for code ("cudaErrorInvalidValue"); never NULL. */
  const char *(*error_name)(void *ctx, int code);
  /** The runtime's description of code; never NULL. */
  const char *(*error_string)(void *ctx, int code);
  /** The dlsync status for code: ENODEV for "no device/driver", ECAPTURE for capture
      errors, ENOMEM for allocation failures, EBACKEND otherwise. */
  int (*error_status)(void *ctx, int code);
  /** Whether the optional operation op (DL_SYNC_OP_STREAM_WAIT_EXTERNAL,
      DL_SYNC_OP_GRAPH_RETAIN), whose callback is set, can be used now: 1 or 0. NULL when
      every callback set can. For a backend that learns what its runtime has only once it
      finds it, without writing to a struct it has handed out. */
  int (*available)(void *ctx, dl_sync_op op);

  /* Contexts, for runtimes that have them (the CUDA driver); all five NULL otherwise.
     A context owns its streams and events, and an event records only on a stream of its
     own context. dlsync resolves every stream a call names to its context once, before
     it switches anything: an explicit handle's is stream_context's answer; a default
     stream of device N is the caller's current context when that is N's, else N's
     primary context. It keeps one event pool per context identity (context_id), creates
     a pool's events with its context current, makes a default stream's context current
     for each call on it, and restores the caller's exact context (NULL included). */
  /** The calling thread's current context, or NULL when none is current. */
  int (*get_context)(void *ctx, void **context);
  /** Makes context (from get_context, stream_context or primary_context; NULL: none)
      current. */
  int (*set_context)(void *ctx, void *context);
  /** The context an explicit (non-default) stream handle belongs to. */
  int (*stream_context)(void *ctx, void *stream, void **context);
  /** Device device_id's primary context, without making it current. The backend keeps
      what it needs alive and gives it back at dl_sync_shutdown. */
  int (*primary_context)(void *ctx, int32_t device_id, void **context);
  /** context's identity: unique for the life of the process, and changed when the
      context is destroyed or (a primary context) reset, whose events die with it. */
  int (*context_id)(void *ctx, void *context, uint64_t *id);
  /** The runtime calls behind get_context, set_context, stream_context, primary_context
      and context_id, for messages. */
  const char *context_call_names[5];

  /* Added after the first layout: read only when size covers them. */
  /** For a runtime whose event query or synchronization reads the stream the event was
      last recorded on (HIP: it may invalidate that stream's capture, or read it after it
      was destroyed, or answer for the asking thread's own per-thread stream): dlsync then
      never asks about a deferred release's event recorded on a stream it does not own (a
      tensor's event: event_synchronize_disturbs). A deferred release records an event on
      the consumer's stream, makes a stream of its own wait for it and records there the
      event it asks about later. own_stream_create makes that stream on the current device
      (context): non-blocking, never captured, destroyed with own_stream_destroy at
      dl_sync_shutdown; own_stream_check answers 0 while the stream exists, the runtime's
      code once it is gone (a device reset destroyed it), without reading a destroyed one.
      The three come together (and available() may say they are not used now:
      DL_SYNC_OP_OWN_STREAM_CREATE); NULL: the runtime's queries read no stream (CUDA), and
      dlsync asks about the event recorded on the consumer's stream. */
  int (*own_stream_create)(void *ctx, void **stream);
  int (*own_stream_check)(void *ctx, void *stream);
  int (*own_stream_destroy)(void *ctx, void *stream);
  /** For a backend with contexts, asked once per event pool: *exclusive = 1 when stream's
      context may be current to one thread at a time only (a CUDA green context: "a green
      context can be current to only one thread at a time"), so that dlsync never makes it
      current on a thread that does not have it current. stream is an explicit handle, or
      DL_SYNC_STREAM_LEGACY for the calling thread's current context. NULL: no context of
      the backend's is. */
  int (*context_exclusive)(void *ctx, void *stream, int *exclusive);
  /** The runtime call behind context_exclusive, for messages (NULL: "context_exclusive"). */
  const char *context_exclusive_call_name;
  /** Asked before dl_sync_tensor_synchronize synchronizes (event_synchronize) a tensor's
      event, recorded on stream by its producer (a stream dlsync does not own, which may have
      been destroyed since): *disturbs = 1 when that must not happen now, because the
      runtime's synchronization reads the event's last recording stream and would invalidate
      its capture (HIP 6.2 to 7.2.0, whatever the thread's interaction mode), or would read it
      after it was destroyed (HIP from 5.7). *disturbs is 1 on entry when this thread cannot
      name stream (another thread's per-thread default stream): answer 0 then only where the
      synchronization never reads the recording stream. Called with the stream's device
      (context) current. Deferred releases never ask it: they are watched on the backend's
      own stream (own_stream_create). NULL: a synchronization reads no stream (CUDA). */
  int (*event_synchronize_disturbs)(void *ctx, void *stream, int *disturbs);
  /** For a backend with contexts, whose events die with their context: asked after
      event_record failed with code on a pool's event, when the stream's capture state was
      just read without error (so the stream is alive): 1 when code says the event itself no
      longer exists (its context destroyed, or reset while it kept its identity), 0
      otherwise. On 1 dlsync drops that event's pool (it never hands out, nor destroys, its
      events again) and records once more with an event of a new pool; on 0 the failure is
      the call's. Pure: no runtime call. NULL: no code says so. */
  int (*event_gone)(void *ctx, int code);
  /** Gives back what the backend kept alive for dlsync (the primary contexts
      primary_context named). Called by dl_sync_shutdown on the calling thread, after every
      pool is drained, once for each built-in backend and each backend installed (with
      dl_sync_set_backend) at that time; again at each later shutdown (so giving back twice
      must do nothing), and primary_context may be asked again after it. Returns 0, or the
      runtime's code of the first failed call, with *device_id its device and *call its name
      ("cuDevicePrimaryCtxRelease"; NULL: "release_contexts"), for the message; it goes on
      giving back the rest. NULL: nothing to give back. */
  int (*release_contexts)(void *ctx, int32_t *device_id, const char **call);
  /** *id = stream's identity: unique for the life of the process, so that a new stream
      given a destroyed stream's handle has another (CUDA's cuStreamGetId, HIP's
      hipStreamGetId); 0 when the runtime has none to give (then, and when the call fails,
      the handle stands for the stream). Asked once per deferred release, of an explicit
      handle only (a default stream is keyed by its context or thread), with no context
      switched: its releases wait in one queue per id. NULL: handles only. */
  int (*stream_id)(void *ctx, void *stream, uint64_t *id);
};

/**
 * Installs backend for device_type; NULL restores the default (CUDA types: the CUDA
 * driver backend; ROCm types: the HIP backend; others: none). Safe
 * against concurrent readers. The backend must stay valid until dl_sync_shutdown()
 * has run after its last use. EINVAL for unknown device types, device types without
 * stream conventions (only CUDA and ROCm types take a backend) and a backend missing a
 * required callback (the five context callbacks come together or not at all).
 */
DL_SYNC_API int dl_sync_set_backend(int32_t device_type, const dl_sync_backend *backend);

/** The backend for device_type (the built-in default unless one was installed), or NULL
    for device types without streams. */
DL_SYNC_API const dl_sync_backend *dl_sync_get_backend(int32_t device_type);

/**
 * The CUDA backend, the default for CUDA device types: it speaks the CUDA driver API
 * (libcuda.so.1, which every CUDA framework's streams and events belong to, whatever
 * runtime it uses, bundled, static or none). Never NULL. The driver is loaded and
 * initialized (cuInit) at the backend's first runtime call, once; DL_SYNC_LIBCUDA=<path>
 * overrides the library. Without a driver its callbacks answer DL_SYNC_ENODEV naming
 * what was tried. See docs/runtimes.md.
 */
DL_SYNC_API const dl_sync_backend *dl_sync_cuda_backend(void);
/**
 * The CUDA runtime backend (libcudart), an explicit choice for a framework that wants
 * dlsync on its own runtime: install it with dl_sync_set_backend. It never loads a
 * runtime: it uses the one dl_sync_bind_runtime gave it, else DL_SYNC_CUDART=<path>, else
 * the one libcudart.so.13 or .12 the process has loaded (several: DL_SYNC_ENODEV naming
 * each). Never NULL; found at its first runtime call.
 */
DL_SYNC_API const dl_sync_backend *dl_sync_cudart_backend(void);
/**
 * The HIP runtime backend, the default for ROCm device types. It never loads a runtime:
 * a ROCm stream means the process has one. It uses the one dl_sync_bind_runtime gave it,
 * else DL_SYNC_HIP=<path>, else the one HIP runtime (libamdhip64) the process has loaded;
 * several loaded are DL_SYNC_ENODEV naming each path. Looked for again at each use until
 * found. stream_wait_external and graph_retain are not available when the runtime lacks
 * them (external waits: ROCm 6.4.2; user objects: ROCm 5.3).
 */
DL_SYNC_API const dl_sync_backend *dl_sync_hip_backend(void);

/**
 * Binds a runtime backend (dl_sync_cudart_backend() or dl_sync_hip_backend()) to the
 * runtime the caller uses: lookup(user, name) returns the runtime's entry point called
 * name (e.g. "cudaEventRecord"), or NULL; with lookup NULL, user is the runtime's dlopen
 * handle. A statically linked runtime is reachable only this way. Must come before the
 * backend's first runtime call: EINVAL once it has found a runtime (the message names
 * it), ENOTSUP for other backends, ENODEV when the bound runtime lacks what dlsync needs
 * (the message says what).
 */
DL_SYNC_API int dl_sync_bind_runtime(const dl_sync_backend *backend,
                                     void *(*lookup)(void *user, const char *name), void *user);

/** The runtime library a built-in backend uses. */
typedef struct dl_sync_runtime_info {
  const char *path;     /**< the library file used, e.g. "/usr/lib/libcuda.so.1", or
                             "(bound by the caller)" for a runtime bound through a lookup */
  int32_t version;      /**< as the library reports it: cuDriverGetVersion and
                             cudaRuntimeGetVersion (12080 is 12.8), hipRuntimeGetVersion
                             (major * 10000000 + minor * 100000 + patch) */
  int32_t major, minor; /**< decoded from version */
} dl_sync_runtime_info;

/**
 * Which library a built-in backend (dl_sync_cuda_backend(): the driver;
 * dl_sync_cudart_backend(), dl_sync_hip_backend(): a runtime) uses. Loads nothing: a
 * backend that has not made its first runtime call reports what is loaded in the process
 * now (a file an override, DL_SYNC_*, names is the one it may open). ENODEV when there is
 * none to use (the message names what was tried and why), ENOTSUP for any other backend, EINVAL for
 * NULL arguments. path stays valid while dlsync is loaded.
 */
DL_SYNC_API int dl_sync_backend_runtime(const dl_sync_backend *backend, dl_sync_runtime_info *out);

/** Event-pool counters for one backend and device. Each thread keeps a few idle events
    of the pools it used (so that threads on one device do not contend for its pool); they
    count as idle here, and taking one counts as an acquisition. */
typedef struct dl_sync_pool_stats {
  uint64_t created;     /**< events created by event_create */
  uint64_t destroyed;   /**< events destroyed by event_destroy */
  uint64_t idle;        /**< events in the pool or in a thread's cache now */
  uint64_t outstanding; /**< events handed out and not returned (e.g. owned by graphs) */
  uint64_t acquired;    /**< acquisitions since the pool was made */
} dl_sync_pool_stats;

/** Reads the counters of backend's pool for device_id (all zero if it has none). */
DL_SYNC_API int dl_sync_pool_stats_get(const dl_sync_backend *backend, int32_t device_id,
                                       dl_sync_pool_stats *out);

/**
 * Takes back the idle events every thread keeps in its cache, destroys every idle pooled
 * event (runtime calls happen here, never at exit) and frees the pools. A thread that
 * exits gives its cached events back to the pool without any runtime call; only this
 * function destroys them. Events still owned by graphs stay valid; their pools are
 * retired: such an event, given back when its graph is destroyed, is never handed out
 * again, nor destroyed: its runtime handle stays allocated until the process ends (or its
 * context goes), because the graph's destructor may call no runtime, and after the shutdown
 * a device reset may already have destroyed it. With the CUDA driver backend, the shutdown
 * asks cuCtxGetId once of each context it made events in and has not found gone yet, and
 * leaves the events of a context destroyed or reset since alone; a context destroyed
 * before the shutdown (against the rule below) is thus asked about once after its
 * destruction: CUDA answers an error, or, where its handle came back for a new context,
 * another id; dlsync asks it nothing more, in this shutdown or in a poll.
 * dlsync works again after it: the pools are rebuilt on demand. Must not run
 * concurrently with other dlsync calls (graph user-object destructors on the runtime's
 * threads may). It stops the release thread for the call, waiting for a deleter that
 * thread runs to return, and runs finished releases' deleters on the calling thread: the
 * caller must hold no lock a deleter may take (a Python host lets the GIL go). Call it
 * before cudaDeviceReset / hipDeviceReset, or destroying a context dlsync used: those
 * destroy the pooled events under dlsync. In a child process after fork() dlsync starts
 * with no pools and never touches the parent's (its events are not the child's); the
 * child's first call builds new ones.
 */
DL_SYNC_API int dl_sync_shutdown(void);

#ifdef __cplusplus
}
#endif
#endif /* DL_SYNC_BACKEND_H_ */
