/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The runner of driver programs (driver_program.h): the world of contexts and streams, made
 * once per process over the fake driver; each operation run on one of DP_WORKERS host
 * threads, in program order, with its caller's context current; and the oracles. The runner
 * keeps its own record of what each tensor's producer wrote and consumer read, on which
 * stream of which context, and skips an operation whose preconditions do not hold.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dlsync/dlsync.h"
#include "../support/dynamic_library.h"
#include "driver_program.h"

dp_counts dp_totals;

/* ---- the fake driver ----------------------------------------------------------------- */

static void *libcuda;

static void *sym(const char *name) {
  void *address = test_library_symbol(libcuda, name);
  if (address == NULL) {
    fprintf(stderr, "the fake driver lacks %s\n", name);
    abort();
  }
  return address;
}

typedef int (*ctx_fn)(void *context);
typedef int (*ctx_out_fn)(void **context);
typedef int (*ctx_create_fn)(void **context, unsigned flags, int device);
typedef int (*primary_retain_fn)(void **context, int device);
typedef int (*stream_create_fn)(void **stream, unsigned flags);
typedef int (*handle_fn)(void *handle);
typedef int (*begin_fn)(void *stream, int mode);
typedef int (*end_fn)(void *stream, void **graph);
typedef int (*record_fn)(void *event, void *stream);
typedef int (*event_create_fn)(void **event, unsigned flags);
typedef int (*wait_value_fn)(void *stream, unsigned long long address, uint32_t value,
                             unsigned flags);
typedef int (*host_alloc_fn)(void **pointer, size_t size, unsigned flags);
typedef int (*mode_fn)(int *mode);
typedef long (*counter_fn)(const char *name);
typedef int (*log_fn)(int i, int *kind, void **context, void **stream);

#define CU(type, name, ...) (((type)sym(name))(__VA_ARGS__))

enum {
  CU_STREAM_NON_BLOCKING = 1,
  CU_EVENT_DISABLE_TIMING = 2,
  CU_MEMHOSTALLOC_PORTABLE = 1,
  CU_MEMHOSTALLOC_DEVICEMAP = 2,
  CU_STREAM_WAIT_VALUE_GEQ = 0,
  CU_CAPTURE_RELAXED = 2,
  CUDA_ERROR_NOT_READY = 600,
  CU_DEV_RESOURCE_TYPE_SM = 1,
  CU_GREEN_CTX_DEFAULT_STREAM = 1,
  FLAGS = 60000,   /* the value waits the fake keeps, less a margin */
  MAX_PENDING = 7, /* flags not set yet: the fake holds 8 memory waits a stream */
};
#define CU_LEGACY ((void *)1)
#define CU_PER_THREAD ((void *)2)

/* ---- the world ----------------------------------------------------------------------- */

static void *contexts[DP_CONTEXTS], *greens[DP_CONTEXTS];
static void *streams[DP_CONTEXTS][DP_STREAMS_PER_CONTEXT];
static void *check_events[DP_CONTEXTS]; /* the oracle's own, one per context */
static int context_count = G0, driver_version;
static uint32_t *flags; /* mapped host memory: 0 pending, 1 done */
static int flags_used;

static void *named_handle(int named) {
  if (dp_named_kind(named) == S_EXPLICIT)
    return streams[named / DP_STREAMS_PER_CONTEXT][named % DP_STREAMS_PER_CONTEXT];
  int which = (named - DP_CONTEXTS * DP_STREAMS_PER_CONTEXT) % 3;
  return which == 0 ? NULL : which == 1 ? CU_LEGACY : CU_PER_THREAD;
}

/* The calling thread's context stack made empty, then caller (NO_CONTEXT: none) current. */
static int set_caller(int caller) {
  void *popped;
  while (CU(ctx_out_fn, "cuCtxPopCurrent_v2", &popped) == 0) continue;
  return caller == NO_CONTEXT ? 0 : CU(ctx_fn, "cuCtxSetCurrent", contexts[caller]);
}

static void *current(void) {
  void *context = (void *)1;
  CU(ctx_out_fn, "cuCtxGetCurrent", &context);
  return context;
}

/* cuda.h "Green Contexts": the device's SM resource, a descriptor of it, the context,
   converted; its non-blocking stream from cuGreenCtxStreamCreate where the driver has it
   (12.5), else from cuStreamCreate with the converted context current. */
typedef struct dev_resource {
  int type;
  unsigned char internal_padding[92];
  unsigned char resource[48];
} dev_resource;

static int make_green(int c) {
  dev_resource sms;
  void *desc = NULL;
  if (CU(int (*)(int, dev_resource *, int), "cuDeviceGetDevResource", 0, &sms,
         CU_DEV_RESOURCE_TYPE_SM) != 0 ||
      CU(int (*)(void **, dev_resource *, unsigned), "cuDevResourceGenerateDesc", &desc, &sms,
         1u) != 0 ||
      CU(int (*)(void **, void *, int, unsigned), "cuGreenCtxCreate", &greens[c], desc, 0,
         (unsigned)CU_GREEN_CTX_DEFAULT_STREAM) != 0)
    return -1;
  return CU(int (*)(void **, void *), "cuCtxFromGreenCtx", &contexts[c], greens[c]);
}

static int make_streams(int c) {
  if (set_caller(c) != 0) return -1;
  for (int s = 0; s < DP_STREAMS_PER_CONTEXT; s++) {
    unsigned flags_ = s == 0 ? (unsigned)CU_STREAM_NON_BLOCKING : 0u;
    int error = dp_is_green(c) && s == 0 && driver_version >= 12050
                    ? CU(int (*)(void **, void *, unsigned, int), "cuGreenCtxStreamCreate",
                         &streams[c][s], greens[c], flags_, 0)
                    : CU(stream_create_fn, "cuStreamCreate", &streams[c][s], flags_);
    if (error != 0) return -1;
  }
  int error =
      CU(event_create_fn, "cuEventCreate", &check_events[c], (unsigned)CU_EVENT_DISABLE_TIMING);
  set_caller(NO_CONTEXT);
  return error;
}

/* ---- the worker threads ------------------------------------------------------------- */

typedef struct worker {
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t changed;
  void (*job)(void *);
  void *argument;
} worker;
static worker workers[DP_WORKERS];

static void *worker_main(void *arg) {
  worker *w = arg;
  pthread_mutex_lock(&w->lock);
  for (;;) {
    while (w->job == NULL) pthread_cond_wait(&w->changed, &w->lock);
    pthread_mutex_unlock(&w->lock);
    w->job(w->argument);
    set_caller(NO_CONTEXT); /* a green context is current to one thread at a time */
    pthread_mutex_lock(&w->lock);
    w->job = NULL;
    pthread_cond_broadcast(&w->changed);
  }
  return NULL;
}

/* Runs job on worker index and waits for it. */
static void on_worker(int index, void (*job)(void *), void *argument) {
  worker *w = &workers[index];
  pthread_mutex_lock(&w->lock);
  w->job = job;
  w->argument = argument;
  pthread_cond_broadcast(&w->changed);
  while (w->job != NULL) pthread_cond_wait(&w->changed, &w->lock);
  pthread_mutex_unlock(&w->lock);
}

int dp_world_open(void) {
  libcuda = test_library_open(getenv("DL_SYNC_LIBCUDA"));
  if (libcuda == NULL || CU(int (*)(unsigned), "cuInit", 0u) != 0 ||
      CU(int (*)(int *), "cuDriverGetVersion", &driver_version) != 0)
    return -1;
  for (int d = 0; d < 2; d++)
    if (CU(primary_retain_fn, "cuDevicePrimaryCtxRetain", &contexts[d == 0 ? P0 : P1], d) != 0)
      return -1;
  for (int c = X0; c < G0; c += 2) {
    if (CU(ctx_create_fn, "cuCtxCreate_v2", &contexts[c], 0u, dp_context_device[c]) != 0) return -1;
    set_caller(NO_CONTEXT);
  }
  if (driver_version >= 12040) {
    context_count = DP_CONTEXTS;
    if (make_green(G0) != 0 || make_green(H0) != 0) return -1;
  }
  for (int c = 0; c < context_count; c++)
    if (make_streams(c) != 0) return -1;
  set_caller(P0);
  if (CU(host_alloc_fn, "cuMemHostAlloc", (void **)&flags, sizeof(uint32_t) * FLAGS,
         (unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP)) != 0)
    return -1;
  set_caller(NO_CONTEXT);
  for (int i = 0; i < DP_WORKERS; i++) {
    pthread_mutex_init(&workers[i].lock, NULL);
    pthread_cond_init(&workers[i].changed, NULL);
    if (pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]) != 0) return -1;
  }
  return 0;
}

int dp_world_green(void) {
  return context_count == DP_CONTEXTS;
}

int dp_world_flags_left(void) {
  return FLAGS - flags_used;
}

/* ---- one run's state ---------------------------------------------------------------- */

typedef struct tensor {
  DLManagedTensorVersioned managed;
  int live, recorded;
  int producer, producer_context, producer_thread; /* named stream, context, worker */
  int reuse_context;                               /* where its reuse stream is, or -1 */
  int consumer, consumer_context, consumer_thread; /* of its read, or consumer -1 */
  int write_flag, read_flag;                       /* -1: none */
  int releasing;                                   /* released, deleter due */
  int deletions;       /* its deleter's calls (on whichever thread ran it) */
  int early_deletions; /* of those, made while the flag its release waits for was pending */
} tensor;

typedef struct run_state {
  const dp_program *program;
  dp_variant variant;
  int verbose;
  tensor tensors[DP_TENSORS];
  int pending[MAX_PENDING], pending_count; /* flags not set yet */
  dp_verdict verdict;
  long prohibited, dead, green_second; /* the fake's counters at the start */
  pthread_mutex_t lock;                /* deleters may run on the release of another thread's op */
} run_state;

static run_state *running;

static void fail(run_state *s, const char *format, ...) __attribute__((format(printf, 2, 3)));

static void fail(run_state *s, const char *format, ...) {
  if (s->verdict.failed) return;
  s->verdict.failed = 1;
  va_list args;
  va_start(args, format);
  vsnprintf(s->verdict.why, sizeof s->verdict.why, format, args);
  va_end(args);
}

static int flag_done(int flag) {
  return flag < 0 || __atomic_load_n(&flags[flag], __ATOMIC_ACQUIRE) != 0;
}

static void flag_set(run_state *s, int flag) {
  __atomic_store_n(&flags[flag], 1u, __ATOMIC_RELEASE);
  for (int i = 0; i < s->pending_count; i++)
    if (s->pending[i] == flag) s->pending[i] = s->pending[--s->pending_count];
}

/* The flag a tensor's release waits for: its read's, else its write's (released on the
   producer's own stream). */
static int guard_flag(const tensor *t) {
  return t->consumer >= 0 ? t->read_flag : t->write_flag;
}

static void producer_deleter(DLManagedTensorVersioned *managed) {
  tensor *t = managed->manager_ctx;
  pthread_mutex_lock(&running->lock);
  t->deletions++;
  if (!flag_done(guard_flag(t))) t->early_deletions++;
  pthread_mutex_unlock(&running->lock);
}

/* Work that waits for flag, enqueued on the stream named for a thread with context current
   (cuStreamWaitValue32: "Wait until (int32_t)(*addr - value) >= 0"). Returns the flag. */
static int enqueue_wait(run_state *s, int named, int context, int caller) {
  if (flags_used == FLAGS || s->pending_count == MAX_PENDING) return -1;
  int flag = flags_used++;
  flags[flag] = 0;
  set_caller(context);
  int error =
      CU(wait_value_fn, "cuStreamWaitValue32_v2", named_handle(named),
         (unsigned long long)(uintptr_t)&flags[flag], 1u, (unsigned)CU_STREAM_WAIT_VALUE_GEQ);
  set_caller(caller);
  if (error != 0) {
    fail(s, "cuStreamWaitValue32 on stream %d of context %d answered %d", named, context, error);
    return -1;
  }
  s->pending[s->pending_count++] = flag;
  return flag;
}

/* Whether the work enqueued on the stream so far is not done: an event of the oracle's
   recorded there is not complete (asked in relaxed mode, never breaking a capture). */
static int stream_held(run_state *s, int named, int context, int caller) {
  set_caller(context);
  int error = CU(record_fn, "cuEventRecord", check_events[context], named_handle(named));
  int mode = CU_CAPTURE_RELAXED, query = -1;
  if (error == 0 && CU(mode_fn, "cuThreadExchangeStreamCaptureMode", &mode) == 0) {
    query = CU(handle_fn, "cuEventQuery", check_events[context]);
    CU(mode_fn, "cuThreadExchangeStreamCaptureMode", &mode);
  }
  set_caller(caller);
  if (error != 0 || (query != 0 && query != CUDA_ERROR_NOT_READY)) {
    fail(s, "the oracle's record on stream %d of context %d answered %d, its query %d", named,
         context, error, query);
    return 0;
  }
  return query == CUDA_ERROR_NOT_READY;
}

static long counter(const char *name) {
  return CU(counter_fn, "fake_gpu_counter", name);
}

static dl_sync_stream view(int named) {
  return dl_sync_stream_view((DLDevice){kDLCUDA, dp_named_device(named)}, named_handle(named));
}

static void log_clear(void) {
  CU(log_fn, "fake_cuda_log", -1, NULL, NULL, NULL);
}

static int context_index(void *context) {
  for (int c = 0; c < context_count; c++)
    if (contexts[c] == context) return c;
  return -1;
}

/* The fake's log of records and waits since the last clear, held to where they may land:
   records on a stream of record_kind in record_context, waits (plain or external) on one of
   wait_kind in wait_context (-1: none may). */
static void log_check(run_state *s, int op, int record_kind, int record_context, int wait_kind,
                      int wait_context) {
  int kind;
  void *context, *stream;
  for (int i = 0, what;
       i < 64 && (what = CU(log_fn, "fake_cuda_log", i, &kind, &context, &stream)) > 0; i++) {
    int at = context_index(context);
    int fits = what == 'r' ? kind == record_kind && at == record_context
                           : kind == wait_kind && at == wait_context;
    if (!fits)
      fail(s,
           "operation %d: a %s landed on a stream of kind %d in context %d (expected kind %d "
           "in context %d)",
           op, what == 'r' ? "record" : "wait", kind, at, what == 'r' ? record_kind : wait_kind,
           what == 'r' ? record_context : wait_context);
  }
}

/* ---- the operations ------------------------------------------------------------------ */

typedef struct job {
  run_state *s;
  int index, made;
} job;

static const char *status_name(int status) {
  return status >= 0 ? "a release result" : dl_sync_status_name(status);
}

/* A status against the one predicted: want, or also ENOTSUP where allowed. */
static void expect_status(run_state *s, int op, const char *call, int got, int want,
                          int enotsup_allowed) {
  if (got == want || (enotsup_allowed && got == DL_SYNC_ENOTSUP)) return;
  fail(s, "operation %d: %s answered %s (%d: %s), expected %s", op, call, status_name(got), got,
       dl_sync_last_error(), status_name(want));
}

/* cuGreenCtxCreate: "a green context can be current to only one thread at a time": dlsync
   makes a green context's events only where the caller has it current, and may refuse
   (ENOTSUP) to fill its empty pool from anywhere else. */
static int green_pool_may_refuse(int context, int caller) {
  return dp_is_green(context) && caller != context;
}

static int produce(run_state *s, int index) {
  const dp_op *o = &s->program->ops[index];
  tensor *t = &s->tensors[o->tensor];
  if (t->live || s->pending_count >= MAX_PENDING) return 0;
  int context = dp_resolve(o->stream, o->caller);
  memset(t, 0, sizeof *t);
  t->managed.version = (DLPackVersion){1, 3};
  t->managed.deleter = producer_deleter;
  t->managed.manager_ctx = t;
  t->managed.dl_tensor.device = (DLDevice){kDLCUDA, dp_named_device(o->stream)};
  t->producer = o->stream;
  t->producer_context = context;
  t->producer_thread = o->thread;
  t->consumer = t->read_flag = t->reuse_context = -1;
  t->write_flag = enqueue_wait(s, o->stream, context, o->caller);
  if (t->write_flag < 0) return 0;
  t->live = 1;
  dp_totals.producer_contexts[context]++;
  if (o->mechanism == 0) return 1;
  log_clear();
  int status = o->mechanism == 2
                   ? dl_sync_tensor_record_reuse(&t->managed, view(o->stream), view(o->stream))
                   : dl_sync_tensor_record(&t->managed, view(o->stream));
  log_check(s, index, dp_named_kind(o->stream), context, -1, -1);
  /* The per-thread stream is no reuse stream: "the consumer's thread would name another" */
  int want =
      o->mechanism == 2 && dp_named_kind(o->stream) == S_PER_THREAD ? DL_SYNC_EINVAL : DL_SYNC_OK;
  if (want == DL_SYNC_EINVAL) dp_totals.einval_rows++;
  expect_status(s, index, "the tensor's record", status, want,
                green_pool_may_refuse(context, o->caller));
  if (status == DL_SYNC_ENOTSUP) dp_totals.refused_green_pool++;
  t->recorded = status == DL_SYNC_OK;
  if (t->recorded && o->mechanism == 2) t->reuse_context = context;
  return 1;
}

/* The consumer's stream for an export's argument. */
static int export_consumer(const dp_op *o, const tensor *t) {
  int base = DP_CONTEXTS * DP_STREAMS_PER_CONTEXT + 3 * dp_named_device(t->producer);
  switch (o->arg) {
    case ARG_NONE:
    case ARG_LEGACY:
      return base + 1;
    case ARG_PER_THREAD:
      return base + 2;
    case ARG_HANDLE:
      return o->stream;
    default:
      return -1;
  }
}

static dl_sync_stream_arg export_arg(const dp_op *o) {
  switch (o->arg) {
    case ARG_NONE:
      return dl_sync_stream_arg_none();
    case ARG_LEGACY:
      return dl_sync_stream_arg_int(1);
    case ARG_PER_THREAD:
      return dl_sync_stream_arg_int(2);
    case ARG_HANDLE:
      return dl_sync_stream_arg_int((int64_t)(intptr_t)named_handle(o->stream));
    case ARG_ZERO:
      return dl_sync_stream_arg_int(0);
    default:
      return dl_sync_stream_arg_int(-1);
  }
}

/* Whether the two named streams are one stream for this caller and thread. */
static int same_stream(int a, int b, int caller) {
  if (dp_resolve(a, caller) != dp_resolve(b, caller)) return 0;
  if (dp_named_kind(a) != dp_named_kind(b)) return 0;
  return dp_named_kind(a) != S_EXPLICIT || a == b;
}

static int ordering_call(const dp_op *o, tensor *t, int mechanism) {
  dl_sync_stream consumer = view(o->stream);
  switch (mechanism) {
    case M_EXPORT:
      return dl_sync_export(view(t->producer), export_arg(o));
    case M_PUSH_DEP:
      return dl_sync_push_dep(view(t->producer), consumer);
    case M_TENSOR_WAIT:
      return dl_sync_tensor_wait(&t->managed, consumer);
    case M_HOST_WAIT:
      return dl_sync_tensor_synchronize(&t->managed);
    default: {
      dl_sync_group group;
      int status = dl_sync_group_init(&group, consumer);
      if (status == DL_SYNC_OK)
        status = mechanism == M_GROUP ? dl_sync_group_add_stream(&group, view(t->producer))
                                      : dl_sync_group_add_tensor(&group, &t->managed);
      return status == DL_SYNC_OK ? dl_sync_group_wait(&group) : status;
    }
  }
}

static int consume(run_state *s, int index) {
  const dp_op *o = &s->program->ops[index];
  tensor *t = &s->tensors[o->tensor];
  if (!t->live || t->consumer >= 0 || t->releasing || s->pending_count >= MAX_PENDING) return 0;
  if (dp_named_kind(t->producer) == S_PER_THREAD && o->thread != t->producer_thread) return 0;
  if (dp_resolve(t->producer, o->caller) != t->producer_context) return 0;
  int mechanism = o->mechanism;
  /* A tensor without an event is ordered by its stream. */
  if (!t->recorded &&
      (mechanism == M_TENSOR_WAIT || mechanism == M_GROUP_TENSOR || mechanism == M_HOST_WAIT))
    mechanism = M_PUSH_DEP;
  /* The host waits for the event, which waits for whatever its stream waited for: all the
     program's pending work completes first (else the wait would never end). */
  if (mechanism == M_HOST_WAIT)
    while (s->pending_count > 0) flag_set(s, s->pending[0]);
  int named = mechanism == M_EXPORT ? export_consumer(o, t) : o->stream;
  if (named >= 0 && dp_named_device(named) != dp_named_device(t->producer)) return 0;
  int capture = o->capture;
  int caller = o->caller;
  int no_stream = named >= 0 && dp_no_stream(named, caller);
  int consumer_context = named >= 0 ? dp_resolve(named, caller) : -1;
  if (capture >= 0 && (named < 0 || dp_named_kind(named) == S_LEGACY || no_stream)) capture = -1;
  int names_producer = mechanism == M_EXPORT || mechanism == M_PUSH_DEP || mechanism == M_GROUP;
  /* The status cuda.h's rules predict. */
  int want = DL_SYNC_OK, same = named >= 0 && same_stream(t->producer, named, caller);
  if (mechanism == M_EXPORT && o->arg == ARG_ZERO)
    want = DL_SYNC_EINVAL;
  else if (no_stream && mechanism != M_HOST_WAIT)
    want = DL_SYNC_EINVAL;
  /* cuStreamIsCapturing on the legacy stream "while a blocking stream in the same context is
     capturing": CUDA_ERROR_STREAM_CAPTURE_IMPLICIT. */
  else if (capture >= 0 && names_producer && !same && dp_named_kind(t->producer) == S_LEGACY &&
           dp_named_blocking(named) && t->producer_context == consumer_context)
    want = DL_SYNC_ECAPTURE;
  if (want == DL_SYNC_EINVAL) dp_totals.einval_rows++;
  if (want == DL_SYNC_ECAPTURE) dp_totals.ecapture_rows++;
  int may_refuse = names_producer && !same && green_pool_may_refuse(t->producer_context, caller);
  if (named >= 0 && !no_stream) dp_totals.consumer_contexts[consumer_context]++;
  if (caller != t->producer_context || (named >= 0 && caller != consumer_context))
    dp_totals.other_caller++;
  dp_totals.mechanisms[mechanism]++;
  if (mechanism == M_EXPORT) dp_totals.args[o->arg]++;
  if (capture >= 0) {
    set_caller(consumer_context);
    int error = CU(begin_fn, "cuStreamBeginCapture_v2", named_handle(named), capture);
    set_caller(caller);
    if (error != 0) {
      fail(s, "operation %d: the consumer's capture did not begin (%d)", index, error);
      return 1;
    }
  }
  /* Judged where the write is pending and the consumer's stream waits for nothing yet (not
     ordered already by an earlier wait, or by the legacy stream's implicit synchronization):
     then it must wait after the ordering. */
  int judged = capture < 0 && want == DL_SYNC_OK && named >= 0 && !no_stream &&
               mechanism != M_HOST_WAIT && !flag_done(t->write_flag) &&
               !stream_held(s, named, consumer_context, caller);
  int skipped = s->variant == DP_SKIP_ORDERING && want == DL_SYNC_OK;
  if (skipped && judged) s->verdict.affected++;
  /* The control that names the producer's legacy stream with another context of its device
     current (not a green one, whose pool may refuse): the stream named is another one. */
  int calling = caller;
  if (s->variant == DP_OTHER_CONTEXT && want == DL_SYNC_OK && names_producer && !same &&
      dp_named_kind(t->producer) == S_LEGACY && named >= 0 && dp_named_kind(named) == S_EXPLICIT) {
    static const int other[DP_CONTEXTS] = {X0, P0, X1, P1, X0, X0};
    calling = other[t->producer_context];
    set_caller(calling);
    s->verdict.affected++;
  }
  log_clear();
  int status = skipped ? DL_SYNC_OK : ordering_call(o, t, mechanism);
  void *after = current();
  if (calling != caller) set_caller(caller);
  if (status == DL_SYNC_OK && names_producer)
    log_check(s, index, dp_named_kind(t->producer), t->producer_context,
              named >= 0 ? dp_named_kind(named) : -1, consumer_context);
  else if (status == DL_SYNC_OK)
    log_check(s, index, -1, -1, named >= 0 ? dp_named_kind(named) : -1, consumer_context);
  if (after != (calling == NO_CONTEXT ? NULL : contexts[calling]))
    fail(s, "operation %d: the caller's context changed from %d to %d", index, calling,
         context_index(after));
  expect_status(s, index, "the ordering", status, want, may_refuse);
  if (status == DL_SYNC_ENOTSUP) dp_totals.refused_green_pool++;
  if (capture >= 0) {
    void *graph = NULL;
    set_caller(consumer_context);
    int error = CU(end_fn, "cuStreamEndCapture", named_handle(named), &graph);
    set_caller(caller);
    if (error != 0 || graph == NULL)
      fail(s, "operation %d: the consumer's capture ended with %d", index, error);
    else
      CU(handle_fn, "cuGraphDestroy", graph);
    dp_totals.captured_orderings++;
    return 1;
  }
  if (status != DL_SYNC_OK || named < 0 || no_stream) return 1;
  if (judged) {
    dp_totals.pending_orderings++;
    if (!stream_held(s, named, consumer_context, caller))
      fail(s,
           "operation %d: the consumer's stream %d (context %d) may read before the producer's "
           "write on stream %d (context %d) completed",
           index, named, consumer_context, t->producer, t->producer_context);
  }
  t->consumer = named;
  t->consumer_context = consumer_context;
  t->consumer_thread = o->thread;
  t->read_flag = enqueue_wait(s, named, consumer_context, caller);
  if (t->read_flag < 0) t->consumer = -1;
  return 1;
}

static int release(run_state *s, int index) {
  const dp_op *o = &s->program->ops[index];
  tensor *t = &s->tensors[o->tensor];
  if (!t->live || t->releasing) return 0;
  int named = t->consumer >= 0 ? t->consumer : t->producer;
  int context = t->consumer >= 0 ? t->consumer_context : t->producer_context;
  int thread = t->consumer >= 0 ? t->consumer_thread : t->producer_thread;
  if (named != o->stream || dp_resolve(named, o->caller) != context) return 0;
  if (dp_named_kind(named) == S_PER_THREAD && o->thread != thread) return 0;
  int pending = !flag_done(guard_flag(t));
  int status;
  if (s->verbose)
    printf(
        "  release: producer stream %d (context %d), reuse context %d, consumer stream %d "
        "(context %d), %s\n",
        t->producer, t->producer_context, t->reuse_context, t->consumer, t->consumer_context,
        pending ? "pending" : "done");
  log_clear();
  if (s->variant == DP_DELETER_NOT_RELEASE) {
    if (pending) s->verdict.affected++;
    t->managed.deleter(&t->managed);
    status = DL_SYNC_RELEASED_NOW;
  } else {
    status = dl_sync_tensor_release(&t->managed, view(named));
    log_check(s, index, dp_named_kind(named), context,
              t->reuse_context >= 0 ? dp_named_kind(t->producer) : -1, t->reuse_context);
    if (status < 0) {
      expect_status(s, index, "the release", status, DL_SYNC_RELEASE_DEFERRED,
                    green_pool_may_refuse(context, o->caller));
      if (status == DL_SYNC_ENOTSUP) dp_totals.refused_green_pool++;
      return 1;
    }
    if (status == DL_SYNC_RELEASE_GRAPH ||
        (status == DL_SYNC_RELEASED_ORDERED && t->reuse_context < 0))
      fail(s, "operation %d: the release answered %d", index, status);
    if (status == DL_SYNC_RELEASED_ORDERED) dp_totals.reuse_ordered++;
    if (status == DL_SYNC_RELEASE_DEFERRED) dp_totals.deferred++;
  }
  t->releasing = 1;
  pthread_mutex_lock(&s->lock);
  int early = t->early_deletions;
  pthread_mutex_unlock(&s->lock);
  if (early == 0) return 1;
  /* The deleter ran with the read pending: only a release that ordered the producer's reuse
     stream after it may do so. */
  if (status != DL_SYNC_RELEASED_ORDERED ||
      !stream_held(s, t->producer, t->reuse_context, o->caller))
    fail(s,
         "operation %d: the deleter ran while the consumer's read on stream %d (context %d) "
         "was pending, and no reuse stream waits for it",
         index, named, context);
  pthread_mutex_lock(&s->lock);
  t->early_deletions = 0; /* judged */
  pthread_mutex_unlock(&s->lock);
  return 1;
}

static void run_job(void *argument) {
  job *j = argument;
  run_state *s = j->s;
  const dp_op *o = &s->program->ops[j->index];
  if (set_caller(o->caller) != 0) {
    fail(s, "operation %d: the caller's context could not be made current", j->index);
    return;
  }
  switch (o->kind) {
    case DP_PRODUCE:
      j->made = produce(s, j->index);
      break;
    case DP_CONSUME:
      j->made = consume(s, j->index);
      break;
    case DP_RELEASE:
      j->made = release(s, j->index);
      break;
    case DP_POLL: {
      int ran = dl_sync_release_poll();
      if (ran < 0) fail(s, "operation %d: the poll answered %s", j->index, status_name(ran));
      j->made = 1;
      break;
    }
    case DP_SHUTDOWN:
      if (dl_sync_release_pending() == 0) {
        expect_status(s, j->index, "shutdown", dl_sync_shutdown(), DL_SYNC_OK, 0);
        j->made = 1;
      }
      break;
    default:
      break;
  }
}

/* Another thread's capture, in global mode, open around an operation: it must end with a
   graph ("prohibited from potentially unsafe API calls" invalidates it in the fake). */
typedef struct bystander_job {
  int named, begin, error;
  void *graph;
} bystander_job;

static void bystander_run(void *argument) {
  bystander_job *b = argument;
  void *handle = named_handle(b->named);
  b->error = b->begin ? CU(begin_fn, "cuStreamBeginCapture_v2", handle, 0)
                      : CU(end_fn, "cuStreamEndCapture", handle, &b->graph);
}

/* The deleters that ran early since the last look, outside a release that may (a poll's, or
   a release of another tensor). */
static void judge_deletions(run_state *s, int index) {
  pthread_mutex_lock(&s->lock);
  for (int i = 0; i < DP_TENSORS; i++) {
    tensor *t = &s->tensors[i];
    if (t->early_deletions > 0)
      fail(s,
           "operation %d: tensor %d's deleter ran while the flag its release waits for was "
           "pending",
           index, i);
    if (t->deletions > 1) fail(s, "tensor %d's deleter ran %d times", i, t->deletions);
    if (t->deletions == 1 && t->live) {
      t->live = 0;
      if (!t->releasing) fail(s, "operation %d: tensor %d's deleter ran unreleased", index, i);
    }
  }
  pthread_mutex_unlock(&s->lock);
}

/* Whether the operation may touch the explicit stream: its tensor's producer (and reuse)
   stream, its consumer's, or the stream it names. */
static int touches(const run_state *s, const dp_op *o, int named) {
  if (o->kind != DP_PRODUCE && o->kind != DP_CONSUME && o->kind != DP_RELEASE) return 0;
  const tensor *t = &s->tensors[o->tensor];
  return o->stream == named || (t->live && (t->producer == named || t->consumer == named));
}

static void run_op(run_state *s, int index) {
  const dp_op *o = &s->program->ops[index];
  dp_totals.ops_given[o->kind]++;
  if (o->kind == DP_COMPLETE) {
    if (s->pending_count > 0) {
      flag_set(s, s->pending[o->arg % s->pending_count]);
      dp_totals.ops_made[o->kind]++;
    }
    return;
  }
  bystander_job b = {.named = o->bystander, .begin = 1};
  int other = (o->thread + 1) % DP_WORKERS;
  if (o->bystander >= 0 && o->bystander / DP_STREAMS_PER_CONTEXT < context_count &&
      !touches(s, o, o->bystander)) {
    on_worker(other, bystander_run, &b);
    if (b.error != 0) b.named = -1;
  } else {
    b.named = -1;
  }
  job j = {s, index, 0};
  on_worker(o->thread, run_job, &j);
  if (b.named >= 0) {
    b.begin = 0;
    on_worker(other, bystander_run, &b);
    if (b.error != 0 || b.graph == NULL)
      fail(s, "operation %d: another thread's global capture on stream %d ended with %d", index,
           b.named, b.error);
    else
      CU(handle_fn, "cuGraphDestroy", b.graph);
    dp_totals.bystanders++;
  }
  dp_totals.ops_made[o->kind] += j.made;
  if (j.made) dp_totals.callers[o->caller + 1]++;
  judge_deletions(s, index);
}

/* The end: every flag set, the deferred releases polled to their end, the tensors never
   released given back; each deleter has run once; nothing prohibited, dead or doubled. */
static void finish(run_state *s) {
  while (s->pending_count > 0) flag_set(s, s->pending[0]);
  set_caller(NO_CONTEXT);
  struct timespec pause = {0, 100000};
  for (int i = 0; i < 20000 && dl_sync_release_pending() > 0; i++) {
    if (dl_sync_release_poll() < 0) fail(s, "the last polls failed: %s", dl_sync_last_error());
    nanosleep(&pause, NULL);
  }
  if (dl_sync_release_pending() != 0)
    fail(s, "%d releases still pending with every flag set", dl_sync_release_pending());
  for (int i = 0; i < DP_TENSORS; i++) {
    tensor *t = &s->tensors[i];
    if (t->live && !t->releasing) {
      dl_sync_stream nothing =
          dl_sync_stream_view(t->managed.dl_tensor.device, DL_SYNC_STREAM_NOTHING_PENDING);
      int status = dl_sync_tensor_release(&t->managed, nothing);
      if (status != DL_SYNC_RELEASED_NOW) fail(s, "the last release answered %d", status);
      t->releasing = 1;
    }
    if (t->live && t->deletions != 1)
      fail(s, "tensor %d's deleter ran %d times in the end", i, t->deletions);
  }
  if (counter("prohibited_calls") != s->prohibited)
    fail(s, "%ld calls were made that a capture prohibited",
         counter("prohibited_calls") - s->prohibited);
  if (counter("dead_handles") != s->dead)
    fail(s, "%ld calls named a dead handle", counter("dead_handles") - s->dead);
  if (counter("green_second_thread") != s->green_second)
    fail(s, "a green context was made current on a second thread");
}

dp_verdict dp_run(const dp_program *p, dp_variant v, int verbose) {
  static run_state s;
  memset(&s, 0, sizeof s);
  pthread_mutex_init(&s.lock, NULL);
  s.program = p;
  s.variant = v;
  s.verbose = verbose;
  running = &s;
  if (p->cold && dl_sync_shutdown() != DL_SYNC_OK) fail(&s, "shutdown before the program failed");
  s.prohibited = counter("prohibited_calls");
  s.dead = counter("dead_handles");
  s.green_second = counter("green_second_thread");
  for (int i = 0; i < p->op_count && !s.verdict.failed; i++) {
    if (verbose) printf("operation %d\n", i);
    run_op(&s, i);
  }
  finish(&s);
  pthread_mutex_destroy(&s.lock);
  return s.verdict;
}
