/* SPDX-License-Identifier: Apache-2.0 */
/* Internal declarations shared by the library's files; not installed. */
#ifndef DL_SYNC_INTERNAL_H_
#define DL_SYNC_INTERNAL_H_

#include <stdatomic.h>

#include "dlsync/dlsync.h"
#include "platform.h"

#ifdef dl_sync_stream_view
#error "dlsync is built without per-thread default streams: its stream views keep handle 0 legacy"
#endif

#if defined(__GNUC__)
#if defined(__MINGW32__)
/* MinGW: the C99 printf (__USE_MINGW_ANSI_STDIO, which the build sets), checked as such. */
#define DL_SYNC__PRINTF(fmt, args) __attribute__((format(gnu_printf, fmt, args)))
#else
#define DL_SYNC__PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#endif
/* Off the hot path: never inlined into it (the flattened exports stay small). */
#define DL_SYNC__COLD __attribute__((cold, noinline))
#define DL_SYNC__NOINLINE __attribute__((noinline))
#define DL_SYNC__FLATTEN __attribute__((flatten))
#else
#define DL_SYNC__PRINTF(fmt, args)
#define DL_SYNC__COLD
#define DL_SYNC__NOINLINE
#define DL_SYNC__FLATTEN
#endif

/* The locks of critical sections of a few loads and stores (the pools, the pending
   releases): a spinlock that yields when the holder is descheduled costs less than a
   mutex, uncontended and contended. */
static inline void dl_sync__spin_lock(atomic_bool *held) {
  for (unsigned spins = 0;; spins++) {
    if (!atomic_load_explicit(held, memory_order_relaxed) &&
        !atomic_exchange_explicit(held, 1, memory_order_acquire))
      return;
    if (spins >= 64) dl_sync__yield();
  }
}

static inline void dl_sync__spin_unlock(atomic_bool *held) {
  atomic_store_explicit(held, 0, memory_order_release);
}

/* error.c: a failure's message is written where the failure is found, once: internal
   code says what failed (dl_sync__error, dl_sync__runtime_error), the public function
   the caller called puts its name in front on its way out (dl_sync__named), and a call
   that succeeds writes nothing. */
/* Sets this thread's message to what failed; returns status. */
DL_SYNC__COLD int dl_sync__error(int status, const char *fmt, ...) DL_SYNC__PRINTF(2, 3);
#ifdef __clang_analyzer__
/* For the static analyzer (clang-tidy), which sees one file at a time: the call returns
   its status, so a failure is never taken for success. */
#define dl_sync__error(status, ...) ((void)dl_sync__error(status, __VA_ARGS__), (status))
#endif
/* The code a built-in backend's callbacks return when it has no library to call: below
   every runtime's own codes (those are >= 0). */
enum { DL_SYNC__NO_RUNTIME = -1 };
/* A failed runtime call: "[call][error name] error string (backend, device)"; without a
   library no call was made: "[error name] error string (backend, device)". */
DL_SYNC__COLD int dl_sync__runtime_error(const dl_sync_backend *backend, dl_sync_op op, int code,
                                         DLDevice device);
/* The same for a call named call. */
DL_SYNC__COLD int dl_sync__runtime_call_error(const dl_sync_backend *backend, const char *call,
                                              int code, DLDevice device);
/* While on, failures write no message: for calls that only ask what a call would do. */
void dl_sync__quiet(int on);
/* Puts "what: " (formatted) in front of this thread's message; returns status. */
DL_SYNC__COLD int dl_sync__error_context(int status, const char *fmt, ...) DL_SYNC__PRINTF(2, 3);
/* A public function's result: a failure's message gets "func: " in front. */
DL_SYNC__COLD int dl_sync__name_failure(const char *func, int status);
static inline int dl_sync__named(const char *func, int status) {
  return status >= 0 ? status : dl_sync__name_failure(func, status);
}

/* device_type.c: device types' names and stream families. */
enum {
  DL_SYNC__FAMILY_UNKNOWN = -1,
  DL_SYNC__FAMILY_NONE,
  DL_SYNC__FAMILY_CUDA,
  DL_SYNC__FAMILY_ROCM
};
int dl_sync__family(int32_t device_type);
/* The device types of each family with streams, as bit masks of 1 << type. */
#define DL_SYNC__CUDA_TYPES ((1u << kDLCUDA) | (1u << kDLCUDAHost) | (1u << kDLCUDAManaged))
#define DL_SYNC__ROCM_TYPES ((1u << kDLROCM) | (1u << kDLROCMHost))
const char *dl_sync__device_type_name(int32_t device_type);

/* device.c: validation and stream identity. */
/* EINVAL naming `what` unless device has a known type and an id in range. */
int dl_sync__check_device(const char *what, DLDevice device);
/* The handle as dl_sync_stream_view canonicalizes it: on CUDA types NULL is the legacy
   stream, on ROCm types the legacy stream is NULL (by a bit mask: every export's caller
   makes a view). */
static inline void *dl_sync__canonical_handle(DLDevice device, void *handle) {
  uint32_t type = (uint32_t)device.device_type;
  uint32_t bit = type < 32 ? 1u << type : 0;
  if (handle == NULL && (bit & DL_SYNC__CUDA_TYPES) != 0)
    handle = DL_SYNC_STREAM_LEGACY;
  else if (handle == DL_SYNC_STREAM_LEGACY && (bit & DL_SYNC__ROCM_TYPES) != 0)
    handle = NULL;
  return handle;
}
/* Two rows of the stream-argument table (stream.c) that the export's fast path
   (push_dep.c) reads too: -1 asks for no synchronization, and a value above 2 that fits a
   pointer names a stream by its handle on either family (which every view leaves as it
   is). */
static inline int dl_sync__arg_asks_no_sync(dl_sync_stream_arg arg) {
  return !arg.is_none && arg.value == -1;
}
static inline int dl_sync__arg_is_handle(dl_sync_stream_arg arg) {
  return !arg.is_none && arg.value > 2 && (uint64_t)arg.value <= UINTPTR_MAX;
}
/* Two canonical views of one family name one stream: one handle on one device id (the
   default streams of two devices are two streams). */
int dl_sync__same_stream(dl_sync_stream a, dl_sync_stream b);
/* Default streams resolve against the current device: using them needs it set. */
static inline int dl_sync__is_default_stream(void *canonical_handle) {
  return canonical_handle == NULL || canonical_handle == DL_SYNC_STREAM_LEGACY ||
         canonical_handle == DL_SYNC_STREAM_PER_THREAD;
}

/* context.c: where each call on a stream runs. A call binds every stream it names once,
   from what the caller had current when it came in; calls on a default stream then run
   with its context (device) current, and the caller's is restored at the end. */
typedef struct dl_sync__guard {
  const dl_sync_backend *backend;
  int contexts;          /* the backend has contexts */
  int caller_known;      /* the caller's context and device were asked for */
  void *caller_context;  /* contexts: the caller's current context, NULL for none */
  int32_t caller_device; /* its device (without contexts: the current device); -1: none */
  void *current_context; /* what is current now, once caller_known */
  int32_t current_device;
  int switched; /* something was made current: the end restores the caller's */
} dl_sync__guard;

/* A stream of one call, bound to where calls on it run. */
typedef struct dl_sync__bound {
  dl_sync_stream stream; /* canonical handle */
  int is_default;        /* a default stream: calls on it need its context (device) current */
  void *context;         /* contexts: a default stream's context from binding; an explicit
                            handle's once identified */
  uint64_t context_id;   /* the context's identity, once identified: its events' pool */
  int identified;        /* context and context_id known (always, without contexts) */
} dl_sync__bound;

static inline void dl_sync__guard_init(dl_sync__guard *guard, const dl_sync_backend *backend) {
  guard->backend = backend;
  guard->contexts = backend->get_context != NULL;
  guard->caller_known = 0;
  guard->switched = 0;
}
/* A default stream's context, for the caller (the inline callers' slow half). */
DL_SYNC__COLD int dl_sync__bind_default(dl_sync__guard *guard, dl_sync__bound *bound);
/* A handle of the simulated device (DL_SYNC_SIM_STREAM_TAG): EINVAL when the guard's
   backend is a built-in one over a real runtime (dl_sync__backend_is_builtin), which would
   hand it to a real driver. */
DL_SYNC__COLD int dl_sync__check_sim_handle(const dl_sync__guard *guard, dl_sync_stream stream);
static inline int dl_sync__is_sim_handle(void *handle) {
#if UINTPTR_MAX > 0xFFFFFFFFu
  return ((uintptr_t)handle >> 56) == DL_SYNC_SIM_STREAM_TAG;
#else
  (void)handle;
  return 0;
#endif
}
/* Binds stream for the caller; switches nothing. */
static inline int dl_sync__bind(dl_sync__guard *guard, dl_sync_stream stream, dl_sync__bound *out) {
  if (dl_sync__is_sim_handle(stream.handle)) {
    int status = dl_sync__check_sim_handle(guard, stream);
    if (status != DL_SYNC_OK) return status;
  }
  out->stream = stream;
  out->is_default = dl_sync__is_default_stream(stream.handle);
  out->identified = !guard->contexts;
  out->context = NULL;
  out->context_id = 0;
  return guard->contexts && out->is_default ? dl_sync__bind_default(guard, out) : DL_SYNC_OK;
}
int dl_sync__identify_context(dl_sync__guard *guard, dl_sync__bound *bound);
/* The context (an explicit handle's) and its identity: what bound's events are pooled by. */
static inline int dl_sync__identify(dl_sync__guard *guard, dl_sync__bound *bound) {
  return bound->identified ? DL_SYNC_OK : dl_sync__identify_context(guard, bound);
}
/* Makes context (of device; without contexts: device) current, when it is not. */
int dl_sync__guard_use(dl_sync__guard *guard, DLDevice device, void *context);
/* Whether stream's context (identified) may be current to one thread at a time only (a
   CUDA green context): dlsync then never makes it current where the caller does not have
   it. Asked once per pool. */
DL_SYNC__COLD int dl_sync__context_exclusive(dl_sync__guard *guard, const dl_sync__bound *stream,
                                             int *exclusive);
/* Makes a pool's context current to create its events: as dl_sync__guard_use, but an
   exclusive context only when it is the caller's (ENOTSUP otherwise, saying why). */
DL_SYNC__COLD int dl_sync__guard_use_to_create(dl_sync__guard *guard, DLDevice device,
                                               void *context, uint64_t context_id, int exclusive);
/* Makes bound's context (device) current when calls on it need it (a default stream). */
static inline int dl_sync__guard_enter(dl_sync__guard *guard, const dl_sync__bound *bound) {
  return bound->is_default ? dl_sync__guard_use(guard, bound->stream.device, bound->context)
                           : DL_SYNC_OK;
}
/* Makes the caller's context (device) current again; status is returned unchanged unless
   it was OK. */
DL_SYNC__COLD int dl_sync__guard_restore(dl_sync__guard *guard, DLDevice device, int status);
static inline int dl_sync__guard_end(dl_sync__guard *guard, DLDevice device, int status) {
  return guard->switched ? dl_sync__guard_restore(guard, device, status) : status;
}
/* A failed context call of backend (the index of context_call_names). */
DL_SYNC__COLD int dl_sync__context_error(const dl_sync_backend *backend, int which, int code,
                                         DLDevice device);

/* stream.c: dl_sync_stream_from_arg, for the public functions built on it. */
int dl_sync__stream_from_arg(DLDevice device, dl_sync_stream_arg arg, dl_sync_stream *out,
                             int *out_needs_sync);

/* backends/runtime_info.c, the seam to the built-in backends (the core names none): the
   i-th built-in backend over a real runtime, with a device type it serves, or NULL past
   the last, in the order of the defaults (the first one serving a device type's family is
   its default); and whether backend is one of them (it hands a stream to a real runtime). */
const dl_sync_backend *dl_sync__builtin_backend(size_t i, int32_t *device_type);
int dl_sync__backend_is_builtin(const dl_sync_backend *backend);

/* backend.c */
int dl_sync__backend_for(DLDevice device, const dl_sync_backend **out);
/* Whether an optional operation (its callback set, and available if the backend says) can
   be used: the one test of stream_wait_external and graph_retain. */
int dl_sync__backend_available(const dl_sync_backend *b, dl_sync_op op);
/* Whether b's size covers the own_stream members, and whether b has them and uses them now:
   its deferred releases are watched on a stream of dlsync's own (release_watch.c). */
int dl_sync__backend_covers_own_stream(const dl_sync_backend *b);
int dl_sync__backend_owns_streams(const dl_sync_backend *b);
/* Whether b has context_exclusive (set, and b's size covers it and its call name). */
int dl_sync__backend_has_context_exclusive(const dl_sync_backend *b);
/* Whether b has event_synchronize_disturbs (set, and covered by b's size). */
int dl_sync__backend_has_event_synchronize_disturbs(const dl_sync_backend *b);
/* Whether b has event_gone (set, and covered by b's size). */
int dl_sync__backend_has_event_gone(const dl_sync_backend *b);
/* Whether b has release_contexts (set, and covered by b's size). */
int dl_sync__backend_has_release_contexts(const dl_sync_backend *b);
/* Calls release_contexts of each built-in backend and each installed one, once per
   backend, for dl_sync_shutdown once the pools are gone: the first failure's status. */
int dl_sync__backends_release_contexts(void);
/* Whether b has stream_id (set, and covered by b's size). */
int dl_sync__backend_has_stream_id(const dl_sync_backend *b);
/* The size of the first versioned layout of dl_sync_backend: the smallest one accepted.
   Members added later are read only when a backend's size covers them. */
#define DL_SYNC__BACKEND_SIZE_FIRST                \
  (offsetof(dl_sync_backend, context_call_names) + \
   sizeof(((dl_sync_backend *)0)->context_call_names))

/* event_pool.c: one pool per (backend, device, context identity); events are made there. */
typedef struct dl_sync__pool dl_sync__pool;
/* The pool for events recorded on stream (identified first; made when there is none). */
int dl_sync__pool_for_stream(dl_sync__guard *guard, dl_sync__bound *stream, dl_sync__pool **out);
/* Takes an idle event, or creates one (guard makes the pool's context current). */
DL_SYNC__COLD int dl_sync__pool_acquire(dl_sync__pool *pool, dl_sync__guard *guard, void **event);
/* An event of stream's pool recorded on stream, for the caller to keep (a tensor's, a
   graph's, a pending release's). A record that answers that the event is gone drops the
   pool (its context was reset under the same identity) and records once more with an
   event of a fresh pool. */
int dl_sync__pool_acquire_recorded(dl_sync__guard *guard, dl_sync__bound *stream,
                                   dl_sync__pool **pool, void **event);
/* Leaves pool behind: its events died with its context, which kept its identity. It is
   never found again (a fresh pool takes its key), its events are never handed out or
   destroyed, and the thread caches unbind it when they meet it. */
DL_SYNC__COLD void dl_sync__pool_drop(dl_sync__pool *pool);
/* Whether pool is one that dl_sync__pool_drop left behind (a relaxed read: cheap). */
int dl_sync__pool_dropped(const dl_sync__pool *pool);
/* Whether events of pool go back to the pool rather than to a thread's cache: a context
   current to one thread at a time, whose events other threads cannot make. */
int dl_sync__pool_shared_only(const dl_sync__pool *pool);
/* For the tests: called (when set) in the middle of giving a thread cache slot's events
   back to their pool, where they are in both. */
extern void (*dl_sync__cache_flush_hook)(void);
/* How many pools are allocated now (for the tests: a retired pool is freed with its last
   event). */
long dl_sync__pools_allocated(void);
/* Gives an event back. Makes no runtime call and takes no lock a forked child could
   inherit held, so it is safe from runtime callbacks and in a child. */
void dl_sync__pool_release(dl_sync__pool *pool, void *event);
/* Whether pool's context is still the one its events were made in (a destroyed or reset
   context took them with it); always with backends without contexts. */
int dl_sync__pool_alive(dl_sync__pool *pool);
/* An event borrowed for one call: where it came from and goes back to. */
typedef struct dl_sync__borrowed {
  void *event;
  dl_sync__pool *pool;
  void *slot; /* the calling thread's cache slot, or NULL */
} dl_sync__borrowed;
/* An idle event of stream's pool (stream identified), recorded on stream, through the
   calling thread's cache of idle events, so that threads working on one device do not
   contend for its pool (in steady state no lock and no pool lookup). Only for an event
   that the calling thread takes and gives back within one call; an event that outlives the
   call (owned by a graph or a tensor) comes from dl_sync__pool_acquire_recorded, which
   retries the same way. On failure nothing stays borrowed. */
int dl_sync__pool_borrow_recorded(dl_sync__guard *guard, dl_sync__bound *stream,
                                  dl_sync__borrowed *out);
/* The borrow alone (the event not recorded yet). */
int dl_sync__pool_borrow(dl_sync__guard *guard, dl_sync__bound *stream, dl_sync__borrowed *out);
void dl_sync__pool_return(const dl_sync__borrowed *borrowed);

/* release_watch.c: a deferred release's event on a stream of dlsync's own, for a backend
   that owns streams (dl_sync__backend_owns_streams): E1 recorded on consumer, the pool's own
   stream (made at first use) waits for it, and *event (of *pool) is recorded there. */
typedef struct dl_sync__watch dl_sync__watch;
int dl_sync__watch_record(dl_sync__guard *guard, dl_sync__bound *consumer, dl_sync__watch **watch,
                          dl_sync__pool **pool, void **event);
/* Whether the own stream may be asked about: checked once per poll pass (pass), never read
   again once found gone (a device reset destroyed it). */
int dl_sync__watch_usable(const dl_sync_backend *b, dl_sync__watch *w, unsigned pass);
/* event_pool.c: a release waits on w (of pool) from its defer until it finished or failed
   for good; the last to go destroys w when dl_sync_shutdown retired pool meanwhile (no lock
   of ours held: a runtime call). */
void dl_sync__watch_hold(dl_sync__watch *w);
void dl_sync__watch_let_go(dl_sync__pool *pool, dl_sync__watch *w);

/* exchange.c: the producer's current work stream from its exchange table. */
int dl_sync__exchange_stream(const DLPackExchangeAPI *api, DLDevice device, dl_sync_stream *out);
/* exchange.c: the producer's tensor of object (*out), through the table of api's chain
   that dlsync uses (*table): a DLPack major-1 tensor on a known device. On failure nothing
   is the caller's (a tensor the producer returned and the import refuses was deleted). */
int dl_sync__exchange_take(const DLPackExchangeAPI *api, void *object,
                           const DLPackExchangeAPI **table, DLManagedTensorVersioned **out);

/* push_dep.c: one dependency src -> dst under the capture table (docs/design.md). */
typedef struct dl_sync__dep {
  dl_sync__guard guard;
  const dl_sync_backend *backend;
  dl_sync__bound src, dst; /* bound by one guard, of one device family */
  int none_arg;            /* export(stream=None): may be no sync while src captures */
  /* dst's capture state, queried at most once for all the sources ordered before it:
     ordering a source never changes it (a wait that would pull dst into a capture is
     refused with ECAPTURE, not made) */
  int dst_queried;
  dl_sync_capture_info dst_capture;
} dl_sync__dep;

/* calls.c: the backend calls on one bound stream, its place made current by guard when it
   is a default stream, a failure turned into a status. */
int dl_sync__record(dl_sync__guard *guard, void *event, const dl_sync__bound *stream);
/* dl_sync__record of a pooled event: when the runtime answers that the event no longer
   exists, *gone is set and no message written (the caller records once more with a fresh
   event, through dl_sync__record). */
int dl_sync__record_pooled(dl_sync__guard *guard, void *event, const dl_sync__bound *stream,
                           int *gone);
int dl_sync__wait(dl_sync__guard *guard, const dl_sync__bound *stream, void *event);
/* Hands object to the graph capturing on stream: release(object) runs once, when the graph
   is gone (now or later when this fails). */
DL_SYNC__COLD int dl_sync__graph_retain(dl_sync__guard *guard, const dl_sync__bound *stream,
                                        void *object, void (*release)(void *object));
/* ENOTSUP, saying which, unless b can put an external event-wait node in a capture and
   hand the graph what it must keep (both optional operations available). */
DL_SYNC__COLD int dl_sync__external_wait_usable(const dl_sync_backend *b,
                                                const void *consumer_stream);
/* An external event-wait node in stream's capture; the graph owns object, which
   release(object) gives back when it is destroyed (run now when this fails early). */
DL_SYNC__COLD int dl_sync__wait_external(dl_sync__guard *guard, const dl_sync__bound *stream,
                                         void *event, void *object, void (*release)(void *object));

/* push_dep.c: the steady-state ordering of src before dst (bound by guard): a pooled event
   borrowed through the thread's cache, recorded on src, waited on by dst, given back. */
int dl_sync__record_and_wait(dl_sync__guard *guard, dl_sync__bound *src, const dl_sync__bound *dst);
/* dl_sync_push_dep without its name in a failure's message. */
int dl_sync__push_dep(dl_sync_stream src, dl_sync_stream dst);
/* Binds dst for dependencies into it, with a guard of its own; the source is set (and
   bound by the same guard) per dependency. */
int dl_sync__dep_init(dl_sync__dep *d, const dl_sync_backend *backend, dl_sync_stream dst,
                      int none_arg);
int dl_sync__dep_set_source(dl_sync__dep *d, dl_sync_stream src);
/* capture.c: a bound stream's capture state (its place current when it is a default
   stream); ECAPTURE for an invalidated capture (dl_sync__capture_usable). */
int dl_sync__capture_query(dl_sync__guard *guard, const dl_sync__bound *stream,
                           dl_sync_capture_info *info);
/* ECAPTURE naming stream when info is an invalidated capture, else OK. */
int dl_sync__capture_usable(dl_sync_stream stream, const dl_sync_capture_info *info);
/* dst's capture state, queried on first use only. */
int dl_sync__dep_dst_capture(dl_sync__dep *d, const dl_sync_capture_info **info);
/* Orders d->src before d->dst: queries src (and dst unless known), then record + wait,
   an external wait owned by dst's graph, or ECAPTURE. */
int dl_sync__dep_order(dl_sync__dep *d);

/* tensor.c: this copy's deleters under names no other copy can interpose on (the
   exported dl_sync_*_deleter_v1 are their aliases). */
void dl_sync__tensor_event_deleter(DLManagedTensorVersioned *tensor);
void dl_sync__legacy_tensor_event_deleter(DLManagedTensor *tensor);

/* tensor_recognize.c: what deleter is, judged now (uncached): the ABI major of a
   versioned deleter of any copy (legacy: its negation), 0 for any other. */
int dl_sync__deleter_verdict(uintptr_t deleter);
/* tensor_recognize.c: the ABI major of a dlsync deleter of any copy in the process
   (legacy: of a DLManagedTensor), 0 for any other deleter. Reads nothing at the address. */
int dl_sync__deleter_major(uintptr_t deleter, int legacy);

/* release_queue.c: the releases waiting for their deleter (a deferred one on an event of its
   consumer stream, one a graph keeps until the graph is gone), and the calls that finish
   them. The count pending: deferred and kept by graphs. */
extern atomic_int dl_sync__releases_pending;
typedef struct dl_sync__pending dl_sync__pending;
/* EINVAL (naming the tensor) when tensor waits for its release already. */
int dl_sync__release_check_new(const void *tensor);
/* For the tests: called (when set) while the tensor set grows, its old buckets freed and the
   new ones not yet in place, under the queues' lock. */
extern void (*dl_sync__release_grow_hook)(void);
/* A release of tensor for a deleter to run later; NULL without memory. Freed with free()
   until it is deferred or kept. */
dl_sync__pending *dl_sync__pending_new(void *tensor, int legacy);
/* Queues it behind event (of pool and b, recorded after the work of consumer, which binding
   identified; on watch's own stream where watch is not NULL), in the queue of consumer's
   stream_id (the runtime's id of an explicit handle, 0 when none is known): OK, or EINVAL
   when its tensor waits already, ENOMEM; then nothing is queued and the event and p are
   still the caller's. */
int dl_sync__pending_defer(dl_sync__pending *p, const dl_sync_backend *b, dl_sync__pool *pool,
                           void *event, dl_sync__watch *watch, const dl_sync__bound *consumer,
                           uint64_t stream_id);
/* Marks its tensor kept by a graph (EINVAL when it waits already, ENOMEM); then the graph's
   user object is given dl_sync__pending_graph_gone(p) as its release, and the retain's
   outcome is told: kept, or abandoned (the graph refused it: the tensor is the caller's
   again). */
int dl_sync__pending_keep(dl_sync__pending *p);
void dl_sync__pending_graph_gone(void *p);
void dl_sync__pending_kept(dl_sync__pending *p);
void dl_sync__pending_abandon(dl_sync__pending *p);
/* Finishes the releases whose work completed (with wait, waits for each deferred one on the
   host): their deleters run on this thread, no lock held. Returns how many ran. */
int dl_sync__release_finish(int wait);
/* The deferred releases queued now. */
int dl_sync__releases_queued(void);
/* What dl_sync_shutdown reports of the releases it could not finish: EBACKEND naming how
   many failed (never finished; reported once) and how many still wait (their event's
   query answered that a capture refuses it now), else OK. */
int dl_sync__release_report_left(void);

/* Waits, at most timeout_ms (< 0: until a release waits), for a release to be queued or for
   dl_sync__release_wake, unless *stop. For the release thread. */
void dl_sync__release_wait(int timeout_ms, const atomic_int *stop);
void dl_sync__release_wake(void);

/* release_thread.c: stops the release thread (*was_running says whether it ran), for
   dl_sync_shutdown. */
int dl_sync__release_thread_stop(int *was_running);

/* tensor.c: what releasing a tensor (either kind, legacy says which) needs of it: its
   device, and the producer's reuse stream when its owner record names one. */
typedef struct dl_sync__release_target {
  void *tensor;
  int legacy;
  DLDevice device;
  int has_reuse;
  dl_sync_stream reuse;
  void *reuse_context;       /* a legacy reuse stream's context, as the producer named it */
  uint64_t reuse_context_id; /* 0: not named (an explicit stream, no contexts, an older copy) */
} dl_sync__release_target;
int dl_sync__tensor_release_target(void *tensor, int legacy, dl_sync__release_target *out);
/* Runs the tensor's deleter (when not NULL). */
void dl_sync__tensor_delete(void *tensor, int legacy);

/* tensor.c: the per-tensor event, the one path by which the rest of dlsync reaches it
   (the public waits and the dependency groups). */
typedef struct dl_sync__tensor_event_ref {
  void *event;     /* the native event handle: equal handles are one event */
  DLDevice device; /* where it was recorded */
  void *owner;     /* opaque: what dl_sync__tensor_event_wait needs */
} dl_sync__tensor_event_ref;
/* *found = 0 (and OK) when the tensor carries no dlsync event; an event dlsync cannot
   use is an error. At most one of versioned / legacy is non-NULL (none: EINVAL, a NULL
   tensor). */
int dl_sync__tensor_event_find(const DLManagedTensorVersioned *versioned,
                               const DLManagedTensor *legacy, dl_sync__tensor_event_ref *out,
                               int *found);
/* consumer (bound by guard) waits on the event with dl_sync_tensor_wait's capture rules;
   consumer_capture: the consumer's capture state when already queried, else NULL. */
int dl_sync__tensor_event_wait(const dl_sync__tensor_event_ref *ref, dl_sync__guard *guard,
                               const dl_sync__bound *consumer,
                               const dl_sync_capture_info *consumer_capture);

#endif /* DL_SYNC_INTERNAL_H_ */
