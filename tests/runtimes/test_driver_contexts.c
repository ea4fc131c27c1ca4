/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Contexts on the CUDA driver backend, held to cuda.h's rules over a fake libcuda.so.1
 * (DL_SYNC_LIBCUDA names it):
 *   test_driver_contexts
 * The combinatorial test runs every combination of the caller's current context (none,
 * device 0's primary P0, a created X0 on device 0, P1, a created X1 on device 1, and from
 * drivers of CUDA 12.4 on two green contexts G0 and H0 of device 0, converted), the
 * producer's stream (explicit in each context; the NULL, legacy and per-thread handles of
 * each device), the consumer's stream or stream argument, a cold or a warm pool, and the
 * consumer capturing or not, for dl_sync_export, dl_sync_push_dep, per-tensor events and
 * dependency groups. The oracle below says from cuda.h's sentences on which stream, in
 * which context, each record and wait must land; the fake's log of records and waits is
 * checked against it, as are the caller's context afterwards and the handles used. The same
 * cases then run in a random order on three threads with nothing reset between them (the
 * pools, the threads' caches and the contexts' events carried over), under the same
 * oracle, among tensors whose event one step records and later steps, with other callers
 * on other threads, wait on. The suite runs under both readings of whether a green context's events
 * may record on its primary context's streams (FAKE_CUDA_GREEN_EVENT_RULE, fake_cuda_driver.c).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifndef _WIN32 /* fork */
#include <sys/wait.h>
#include <unistd.h>
#endif
#include <cmocka.h>

#include "dlsync/dlsync.h"
#include "../support/dynamic_library.h"
#include "../support/error_message.h"
#include "../support/other_copy_record.h"
#include "../support/phases.h"

static void *libcuda;

static void *sym(const char *name) {
  void *address = test_library_symbol(libcuda, name);
  if (address == NULL) fail_msg("the fake driver lacks %s", name);
  return address;
}

typedef int (*ctx_fn)(void *context);
typedef int (*ctx_out_fn)(void **context);
typedef int (*ctx_create_fn)(void **context, unsigned flags, int device);
typedef int (*primary_retain_fn)(void **context, int device);
typedef int (*device_fn)(int device);
typedef int (*stream_create_fn)(void **stream, unsigned flags);
typedef int (*handle_fn)(void *handle);
typedef int (*begin_fn)(void *stream, int mode);
typedef int (*end_fn)(void *stream, void **graph);
typedef int (*is_capturing_fn)(void *stream, int *status);
typedef int (*id_fn)(void *context, unsigned long long *id);
typedef int (*init_fn)(unsigned flags);
typedef long (*counter_fn)(const char *name);
typedef int (*log_fn)(int i, int *kind, void **context, void **stream);
typedef int (*external_waits_fn)(const void *graph);
typedef int (*event_create_fn)(void **event, unsigned flags);
typedef int (*mode_fn)(int *mode);

#define CU(type, name, ...) (((type)sym(name))(__VA_ARGS__))
#define CU_OK(type, name, ...)                               \
  do {                                                       \
    int code_ = CU(type, name, __VA_ARGS__);                 \
    if (code_ != 0) fail_msg("%s answered %d", name, code_); \
  } while (0)

static long counter(const char *name) {
  return ((counter_fn)sym("fake_gpu_counter"))(name);
}

static void drain(void) {
  ((void (*)(void))sym("fake_cuda_drain_destructors"))();
}

/* ---- the process's contexts and streams ---------------------------------------------- */

enum { P0, X0, P1, X1, G0, H0, CONTEXTS, NONE = -1 };
static const char *const context_names[CONTEXTS] = {"P0", "X0", "P1", "X1", "G0", "H0"};
static const int context_device[CONTEXTS] = {0, 0, 1, 1, 0, 0};
static void *contexts[CONTEXTS];         /* G0 and H0: converted (cuCtxFromGreenCtx) */
static void *explicit_streams[CONTEXTS]; /* one non-blocking stream in each context */
static void *greens[CONTEXTS];           /* the green contexts of G0 and H0 */
static int context_count = G0;           /* G0 and H0 from drivers of CUDA 12.4 on */
static int driver_version;

static int is_green(int context) {
  return context == G0 || context == H0;
}
enum { EXPLICIT, LEGACY, PER_THREAD }; /* stream kinds, as the fake's log reports them */
enum { CU_STREAM_NON_BLOCKING = 1 };
enum { CU_CAPTURE_GLOBAL, CU_CAPTURE_THREAD_LOCAL, CU_CAPTURE_RELAXED }; /* CUstreamCaptureMode */
#define CU_LEGACY ((void *)1)
#define CU_PER_THREAD ((void *)2)

static void *current(void) {
  void *context = (void *)1;
  CU_OK(ctx_out_fn, "cuCtxGetCurrent", &context);
  return context;
}

/* The calling thread's context stack made empty, then caller (NONE: nothing) current. */
static void set_caller(int caller) {
  void *popped;
  while (CU(ctx_out_fn, "cuCtxPopCurrent_v2", &popped) == 0) continue;
  if (caller != NONE) CU_OK(ctx_fn, "cuCtxSetCurrent", contexts[caller]);
}

static int caller_of(void *context) {
  for (int c = 0; c < context_count; c++)
    if (contexts[c] == context) return c;
  return NONE;
}

static void *stream_in(int context) {
  void *saved = current(), *stream = NULL;
  CU_OK(ctx_fn, "cuCtxSetCurrent", contexts[context]);
  CU_OK(stream_create_fn, "cuStreamCreate", &stream, (unsigned)CU_STREAM_NON_BLOCKING);
  CU_OK(ctx_fn, "cuCtxSetCurrent", saved);
  return stream;
}

/* cuda.h's CUdevResource (RESOURCE_ABI_VERSION 1), which the test only passes on. */
typedef struct dev_resource {
  int type;
  unsigned char internal_padding[92];
  unsigned char resource[48];
} dev_resource;
enum { CU_DEV_RESOURCE_TYPE_SM = 1, CU_GREEN_CTX_DEFAULT_STREAM = 1 };
typedef int (*get_resource_fn)(int device, dev_resource *resource, int type);
typedef int (*generate_desc_fn)(void **desc, dev_resource *resources, unsigned count);
typedef int (*green_create_fn)(void **green, void *desc, int device, unsigned flags);
typedef int (*from_green_fn)(void **context, void *green);
typedef int (*green_stream_fn)(void **stream, void *green, unsigned flags, int priority);

/* A green context of device 0 with all its SMs (the steps of cuda.h's "Green Contexts":
   resources, a descriptor, the context), converted. */
static int green_new(int c) {
  dev_resource sms;
  void *desc = NULL;
  if (CU(get_resource_fn, "cuDeviceGetDevResource", 0, &sms, CU_DEV_RESOURCE_TYPE_SM) != 0 ||
      CU(generate_desc_fn, "cuDevResourceGenerateDesc", &desc, &sms, 1u) != 0 ||
      CU(green_create_fn, "cuGreenCtxCreate", &greens[c], desc, 0,
         (unsigned)CU_GREEN_CTX_DEFAULT_STREAM) != 0)
    return -1;
  return CU(from_green_fn, "cuCtxFromGreenCtx", &contexts[c], greens[c]);
}

/* G0's stream from cuGreenCtxStreamCreate (CUDA 12.5); H0's, and G0's before 12.5, from
   cuStreamCreate with the converted context current. */
static void *green_stream(int c) {
  void *stream = NULL;
  if (c == H0 || driver_version < 12050) return stream_in(c);
  CU_OK(green_stream_fn, "cuGreenCtxStreamCreate", &stream, greens[c],
        (unsigned)CU_STREAM_NON_BLOCKING, 0);
  return stream;
}

/* A primary context is reset only by its last reference, and each green context holds one
   ("This API will retain the primary context on device dev", cuGreenCtxCreate): the tests
   that reset P0 take the green contexts away first, their streams before them ("Users
   must explicitly destroy all such streams before invoking cuGreenCtxDestroy"), and make
   them again afterwards. */
static void greens_destroy(void) {
  for (int c = G0; c < context_count; c++) {
    CU_OK(handle_fn, "cuStreamDestroy_v2", explicit_streams[c]);
    CU_OK(handle_fn, "cuGreenCtxDestroy", greens[c]);
  }
}

static void greens_make(void) {
  for (int c = G0; c < context_count; c++) {
    if (green_new(c) != 0) fail_msg("could not make green context %s", context_names[c]);
    explicit_streams[c] = green_stream(c);
  }
}

static int setup(void **state) {
  (void)state;
  libcuda = test_library_open(getenv("DL_SYNC_LIBCUDA"));
  if (libcuda == NULL) return -1;
  if (CU(init_fn, "cuInit", 0u) != 0) return -1;
  if (((int (*)(int *))sym("cuDriverGetVersion"))(&driver_version) != 0) return -1;
  for (int d = 0; d < 2; d++)
    if (CU(primary_retain_fn, "cuDevicePrimaryCtxRetain", &contexts[d == 0 ? P0 : P1], d) != 0)
      return -1;
  for (int c = X0; c < G0; c += 2) {
    void *popped = NULL;
    if (CU(ctx_create_fn, "cuCtxCreate_v2", &contexts[c], 0u, context_device[c]) != 0) return -1;
    CU(ctx_out_fn, "cuCtxPopCurrent_v2", &popped);
  }
  if (driver_version >= 12040) {
    context_count = CONTEXTS;
    if (green_new(G0) != 0 || green_new(H0) != 0) return -1;
  }
  set_caller(P0);
  for (int c = 0; c < context_count; c++)
    explicit_streams[c] = is_green(c) ? green_stream(c) : stream_in(c);
  return 0;
}

static int teardown_each(void **state) {
  (void)state;
  set_caller(P0);
  return dl_sync_shutdown() == DL_SYNC_OK ? 0 : -1;
}

/* ---- the oracle ---------------------------------------------------------------------- */

/* A stream as a framework names it to dlsync: an explicit handle, or a default stream of
   a device. */
typedef struct named {
  char name[32];
  int device;
  int kind;    /* EXPLICIT, LEGACY, PER_THREAD */
  int context; /* an explicit stream's */
  void *handle;
} named;

/* Which context the stream is of, for a call made by caller. cuStreamGetCtx: an explicit
   stream's context "is the context that was active in the calling thread when the stream
   was created"; "Specifying any of the special handles will return the context current to
   the calling thread": a default stream named for device d is the caller's own when its
   context is d's. A caller with no context of d current names the default stream its
   own work on d would use once the device is made current, which is d's primary context
   ("The primary context is unique per device and shared with the CUDA runtime API"). */
static int oracle_context(const named *s, int caller) {
  if (s->kind == EXPLICIT) return s->context;
  if (caller != NONE && context_device[caller] == s->device) return caller;
  return s->device == 0 ? P0 : P1;
}

/* cuStreamGetCtx_v2: "specifying CU_STREAM_PER_THREAD or cudaStreamPerThread will return
   CUDA_ERROR_INVALID_HANDLE if a green context is current to the calling thread": the
   per-thread stream of a green context is no stream, and dlsync says so (EINVAL). */
static int per_thread_of_green(const named *s, int caller) {
  return s->kind == PER_THREAD && is_green(oracle_context(s, caller));
}

/* cuGreenCtxCreate: "a green context can be current to only one thread at a time": dlsync
   makes a green context's events only where the caller has it current, and refuses
   (ENOTSUP) to fill its empty pool from anywhere else. */
static int green_pool_refused(const named *producer, int caller, int warm) {
  return !warm && producer->kind == EXPLICIT && is_green(producer->context) &&
         caller != producer->context;
}

static int same_stream(const named *a, const named *b, int caller) {
  if (a->kind != b->kind || oracle_context(a, caller) != oracle_context(b, caller)) return 0;
  return a->kind != EXPLICIT || a->handle == b->handle;
}

/* cuStreamGetCaptureInfo: "If called on CU_STREAM_LEGACY (the "null stream") while a
   stream not created with CU_STREAM_NON_BLOCKING is capturing, returns
   CUDA_ERROR_STREAM_CAPTURE_IMPLICIT" (the legacy stream of that stream's context). The
   per-thread default stream is such a stream; the explicit streams here are non-blocking. */
static int legacy_blocked(const named *producer, const named *consumer, int caller, int capture) {
  return capture && producer->kind == LEGACY && consumer->kind == PER_THREAD &&
         oracle_context(producer, caller) == oracle_context(consumer, caller);
}

typedef struct expected_call {
  char op; /* 'r' record, 'w' wait, 'x' external wait (cuStreamWaitEvent with
              CU_EVENT_WAIT_EXTERNAL: "Event is captured in the graph as an external event
              node when performing stream capture") */
  int kind, context;
} expected_call;

static int named_streams(named *out) {
  int n = 0;
  for (int c = 0; c < context_count; c++) {
    named s = {
        .device = context_device[c], .kind = EXPLICIT, .context = c, .handle = explicit_streams[c]};
    snprintf(s.name, sizeof s.name, "stream of %s", context_names[c]);
    out[n++] = s;
  }
  static const struct {
    const char *name;
    int kind;
    void *handle;
  } defaults[] = {{"NULL", LEGACY, NULL},
                  {"legacy", LEGACY, CU_LEGACY},
                  {"per-thread", PER_THREAD, CU_PER_THREAD}};
  for (int d = 0; d < 2; d++)
    for (size_t i = 0; i < sizeof defaults / sizeof *defaults; i++) {
      named s = {
          .device = d, .kind = defaults[i].kind, .context = NONE, .handle = defaults[i].handle};
      snprintf(s.name, sizeof s.name, "%s of device %d", defaults[i].name, d);
      out[n++] = s;
    }
  return n;
}

static dl_sync_stream view(const named *s) {
  return dl_sync_stream_view((DLDevice){kDLCUDA, s->device}, s->handle);
}

/* ---- running one case ---------------------------------------------------------------- */

enum { OP_EXPORT, OP_PUSH_DEP, OP_TENSOR, OP_GROUP, OPS };
static const char *const op_names[OPS] = {"export", "push_dep", "tensor record/wait", "group"};

typedef struct scenario {
  int op, caller, warm, capture;
  named producer, consumer;
  dl_sync_stream_arg arg; /* export: the consumer's stream argument */
  char arg_name[40];
} scenario;

static void tensor_deleter(DLManagedTensorVersioned *tensor) {
  (void)tensor;
}

/* Begins (or ends: *graph receives the graph) the consumer's capture, from the consumer
   stream's own context (where a per-thread handle names it); the caller's context stays. */
static void consumer_capture(const scenario *sc, int begin, void **graph) {
  void *saved = current();
  int context = oracle_context(&sc->consumer, sc->caller);
  CU_OK(ctx_fn, "cuCtxSetCurrent", contexts[context]);
  if (begin)
    CU_OK(begin_fn, "cuStreamBeginCapture_v2", sc->consumer.handle, CU_CAPTURE_GLOBAL);
  else
    CU_OK(end_fn, "cuStreamEndCapture", sc->consumer.handle, graph);
  set_caller(caller_of(saved));
}

/* The call under test, from the caller's context; its status. */
static int run(const scenario *sc) {
  dl_sync_stream producer = view(&sc->producer), consumer = view(&sc->consumer);
  switch (sc->op) {
    case OP_EXPORT:
      return dl_sync_export(producer, sc->arg);
    case OP_PUSH_DEP:
      return dl_sync_push_dep(producer, consumer);
    case OP_GROUP: {
      dl_sync_group group;
      int status = dl_sync_group_init(&group, consumer);
      if (status == DL_SYNC_OK) status = dl_sync_group_add_stream(&group, producer);
      return status == DL_SYNC_OK ? dl_sync_group_wait(&group) : status;
    }
    default:
      return -100; /* tensors: see run_case */
  }
}

/* One case, the consumer capturing when sc->capture: its status, with the log in calls. */
static int run_case(const scenario *sc, expected_call *calls, int *count, void **graph) {
  log_fn log = (log_fn)sym("fake_cuda_log");
  set_caller(sc->caller);
  DLManagedTensorVersioned tensor = {.version = {1, 3}, .deleter = tensor_deleter};
  tensor.dl_tensor.device = (DLDevice){kDLCUDA, sc->producer.device};
  int status = DL_SYNC_OK;
  log(-1, NULL, NULL, NULL);
  if (sc->op == OP_TENSOR) status = dl_sync_tensor_record(&tensor, view(&sc->producer));
  if (sc->capture) consumer_capture(sc, 1, NULL);
  if (sc->op == OP_TENSOR && status == DL_SYNC_OK)
    status = dl_sync_tensor_wait(&tensor, view(&sc->consumer));
  else if (sc->op != OP_TENSOR)
    status = run(sc);
  *count = 0;
  int kind;
  void *context, *stream;
  for (int op; (op = log(*count, &kind, &context, &stream)) > 0 && *count < 8; (*count)++)
    calls[*count] = (expected_call){(char)op, kind, caller_of(context)};
  if (sc->capture) consumer_capture(sc, 0, graph);
  if (sc->op == OP_TENSOR && tensor.deleter != NULL) tensor.deleter(&tensor);
  return status;
}

/* What cuda.h says the case must do. A stream's capture state is asked before anything
   is recorded on it or waited on, and an ordering asks the consumer's before it takes an
   event; a tensor's record comes first, whole. */
static int expect(const scenario *sc, expected_call *calls, int *count) {
  *count = 0;
  int caller = sc->caller, tensor = sc->op == OP_TENSOR;
  /* A tensor's record comes before the capture begins: only an ordering made while the
     consumer captures queries the producer's legacy stream. */
  if (!tensor && legacy_blocked(&sc->producer, &sc->consumer, caller, sc->capture))
    return DL_SYNC_ECAPTURE;
  if (!tensor && same_stream(&sc->producer, &sc->consumer, caller)) return DL_SYNC_OK;
  if (per_thread_of_green(&sc->producer, caller)) return DL_SYNC_EINVAL;
  if (!tensor && per_thread_of_green(&sc->consumer, caller)) return DL_SYNC_EINVAL;
  if (green_pool_refused(&sc->producer, caller, sc->warm)) return DL_SYNC_ENOTSUP;
  calls[(*count)++] =
      (expected_call){'r', sc->producer.kind, oracle_context(&sc->producer, caller)};
  if (tensor && per_thread_of_green(&sc->consumer, caller)) return DL_SYNC_EINVAL;
  calls[(*count)++] = (expected_call){sc->capture ? 'x' : 'w', sc->consumer.kind,
                                      oracle_context(&sc->consumer, caller)};
  return DL_SYNC_OK;
}

static void describe(const scenario *sc, char *out, size_t size) {
  snprintf(out, size, "%s, caller %s, %s pool, producer %s, consumer %s%s%s", op_names[sc->op],
           sc->caller == NONE ? "none" : context_names[sc->caller], sc->warm ? "warm" : "cold",
           sc->producer.name, sc->op == OP_EXPORT ? "argument " : "",
           sc->op == OP_EXPORT ? sc->arg_name : sc->consumer.name,
           sc->capture ? " (capturing)" : "");
}

static void format_calls(const expected_call *calls, int count, char *out, size_t size) {
  static const char *const kinds[] = {"explicit", "legacy", "per-thread"};
  size_t used = 0;
  out[0] = '\0';
  for (int i = 0; i < count && used < size; i++)
    used += (size_t)snprintf(out + used, size - used, "%s%c on %s of %s", i ? ", " : "",
                             calls[i].op, calls[i].kind >= 0 ? kinds[calls[i].kind] : "?",
                             calls[i].context == NONE ? "?" : context_names[calls[i].context]);
  if (count == 0) snprintf(out, size, "nothing");
}

/* A green context's pool warmed where the green context is current: one ordering from
   its stream to its legacy stream leaves an event that every thread can use. */
static void warm_green_pool(const named *producer) {
  if (producer->kind != EXPLICIT || !is_green(producer->context)) return;
  set_caller(producer->context);
  DL_OK(dl_sync_push_dep(view(producer),
                         dl_sync_stream_view((DLDevice){kDLCUDA, producer->device}, CU_LEGACY)));
}

/* Checks one case; returns 1 when it held, else prints why. */
static int check(const scenario *sc) {
  if (sc->warm) {
    expected_call ignored[8];
    int n;
    void *graph = NULL;
    run_case(sc, ignored, &n, &graph);
    if (graph != NULL) CU_OK(handle_fn, "cuGraphDestroy", graph);
    drain();
    warm_green_pool(&sc->producer);
  } else {
    set_caller(P0);
    DL_OK(dl_sync_shutdown());
  }
  long dead = counter("dead_handles"), created = counter("event_create");
  expected_call got[8], want[8];
  int got_count, want_count;
  void *graph = NULL;
  int status = run_case(sc, got, &got_count, &graph);
  char message[512];
  snprintf(message, sizeof message, "%s", dl_sync_last_error());
  int want_status = expect(sc, want, &want_count);
  int external =
      graph != NULL ? ((external_waits_fn)sym("fake_gpu_graph_external_waits"))(graph) : 0;
  if (graph != NULL) CU_OK(handle_fn, "cuGraphDestroy", graph);
  drain();
  void *after = current();
  int same_calls = got_count == want_count;
  for (int i = 0; i < want_count && same_calls; i++)
    same_calls =
        got[i].op == want[i].op && got[i].kind == want[i].kind && got[i].context == want[i].context;
  int held = status == want_status && same_calls &&
             after == (sc->caller == NONE ? NULL : contexts[sc->caller]) &&
             counter("dead_handles") == dead && (!sc->warm || counter("event_create") == created) &&
             external == (want_count > 0 && want[want_count - 1].op == 'x');
  if (held) return 1;
  char what[160], got_text[200], want_text[200];
  describe(sc, what, sizeof what);
  format_calls(got, got_count, got_text, sizeof got_text);
  format_calls(want, want_count, want_text, sizeof want_text);
  print_error(
      "%s:\n  status %s (expected %s)%s%s\n  made %s\n  expected %s\n"
      "  caller's context after: %p (expected %s); dead handles %ld, events made %ld, "
      "external waits %d\n",
      what, dl_sync_status_name(status), dl_sync_status_name(want_status),
      status != DL_SYNC_OK ? ": " : "", status != DL_SYNC_OK ? message : "", got_text, want_text,
      after, sc->caller == NONE ? "none" : context_names[sc->caller],
      counter("dead_handles") - dead, counter("event_create") - created, external);
  return 0;
}

/* The consumer ends of one producer for op: streams, or (export) stream arguments. */
static int consumers(const scenario *base, const named *all, int n, scenario *out) {
  int count = 0;
  if (base->op != OP_EXPORT) {
    for (int i = 0; i < n; i++) {
      out[count] = *base;
      out[count++].consumer = all[i];
    }
    return count;
  }
  for (int value = 0; value < 3; value++) { /* None, 1, 2 */
    scenario sc = *base;
    sc.arg = value == 0 ? dl_sync_stream_arg_none() : dl_sync_stream_arg_int(value);
    snprintf(sc.arg_name, sizeof sc.arg_name, "%s", value == 0 ? "None" : value == 1 ? "1" : "2");
    int kind = value == 2 ? PER_THREAD : LEGACY;
    for (int i = 0; i < n; i++)
      if (all[i].kind == kind && all[i].device == base->producer.device && all[i].handle != NULL)
        sc.consumer = all[i];
    out[count++] = sc;
  }
  for (int i = 0; i < n; i++) { /* explicit handles of the producer's device */
    if (all[i].kind != EXPLICIT || all[i].device != base->producer.device) continue;
    scenario sc = *base;
    sc.consumer = all[i];
    sc.arg = dl_sync_stream_arg_int((int64_t)(intptr_t)all[i].handle);
    memcpy(sc.arg_name, all[i].name, sizeof all[i].name);
    out[count++] = sc;
  }
  return count;
}

static void test_every_combination_lands_where_cuda_h_says(void **state) {
  (void)state;
  named all[16];
  int n = named_streams(all);
  long cases = 0, failed = 0;
  for (int op = 0; op < OPS; op++)
    for (int caller = NONE; caller < context_count; caller++)
      for (int p = 0; p < n; p++)
        for (int warm = 0; warm < 2; warm++)
          for (int capture = 0; capture < 2; capture++) {
            scenario base = {
                .op = op, .caller = caller, .warm = warm, .capture = capture, .producer = all[p]};
            scenario list[16];
            int count = consumers(&base, all, n, list);
            for (int i = 0; i < count; i++) {
              if (capture && list[i].consumer.kind == LEGACY) continue; /* cannot capture */
              if (capture && per_thread_of_green(&list[i].consumer, caller)) continue; /* none */
              if (capture && same_stream(&list[i].producer, &list[i].consumer, caller)) continue;
              cases++;
              if (!check(&list[i]) && ++failed >= 20) fail_msg("20 combinations failed");
            }
          }
  print_message("%ld combinations, %ld failed\n", cases, failed);
  assert_int_equal(failed, 0);
}

/* ---- random sequences: what lands where does not depend on what came before -------- */

/* The cases of the combinatorial test in a random order, each on one of a few threads,
   with nothing reset between them: the pools, the threads' caches and the contexts' events
   carry from case to case and from thread to thread. Each case is checked as check() does
   (its pool warmed by one run of the case first), against the same oracle. Between them,
   tensors whose event is recorded in one step (a caller, a thread) and waited on in later
   ones (other callers, other threads): the record lands on the producer's stream in its
   context, each wait on the consumer's in its own, whatever the caller's. */
enum {
  SEQUENCE_THREADS = 3,
  SEQUENCE_STEPS = 900,
  SEQUENCE_MAX_CASES = 20000,
  SEQUENCE_TENSORS = 4
};

typedef struct tensor_step {
  int action; /* TENSOR_RECORD, TENSOR_WAIT, TENSOR_DROP */
  int slot, caller;
  named stream;
} tensor_step;
enum { TENSOR_RECORD, TENSOR_WAIT, TENSOR_DROP };

static DLManagedTensorVersioned sequence_tensors[SEQUENCE_TENSORS];
static int tensor_recorded[SEQUENCE_TENSORS];
static long tensor_steps[3];

static void fresh_tensor(int slot) {
  sequence_tensors[slot] = (DLManagedTensorVersioned){.version = {1, 3}, .deleter = tensor_deleter};
  tensor_recorded[slot] = 0;
}

/* One step of a tensor's; returns 1 when it held, else prints why. */
static int check_tensor_step(const tensor_step *step) {
  DLManagedTensorVersioned *tensor = &sequence_tensors[step->slot];
  if (step->action == TENSOR_DROP) {
    set_caller(step->caller);
    tensor->deleter(tensor); /* dlsync's, after a record: the event goes back */
    drain();
    fresh_tensor(step->slot);
    return current() == (step->caller == NONE ? NULL : contexts[step->caller]);
  }
  int record = step->action == TENSOR_RECORD;
  if (record) { /* a green context's pool, warmed where it is current (as check() does) */
    warm_green_pool(&step->stream);
    tensor->dl_tensor.device = (DLDevice){kDLCUDA, step->stream.device};
  }
  set_caller(step->caller);
  log_fn log = (log_fn)sym("fake_cuda_log");
  log(-1, NULL, NULL, NULL);
  int status = record ? dl_sync_tensor_record(tensor, view(&step->stream))
                      : dl_sync_tensor_wait(tensor, view(&step->stream));
  expected_call got[8];
  int got_count = 0, kind;
  void *context, *stream;
  for (int op; (op = log(got_count, &kind, &context, &stream)) > 0 && got_count < 8; got_count++)
    got[got_count] = (expected_call){(char)op, kind, caller_of(context)};
  drain();
  int refused = per_thread_of_green(&step->stream, step->caller);
  int want_status = refused ? DL_SYNC_EINVAL : DL_SYNC_OK;
  expected_call want = {record ? 'r' : 'w', step->stream.kind,
                        oracle_context(&step->stream, step->caller)};
  int held = status == want_status && got_count == !refused &&
             (refused || (got[0].op == want.op && got[0].kind == want.kind &&
                          got[0].context == want.context)) &&
             current() == (step->caller == NONE ? NULL : contexts[step->caller]);
  if (record && status == DL_SYNC_OK) tensor_recorded[step->slot] = 1;
  if (held) return 1;
  char got_text[200], want_text[200];
  format_calls(got, got_count, got_text, sizeof got_text);
  format_calls(&want, !refused, want_text, sizeof want_text);
  print_error(
      "tensor %d: %s on %s, caller %s:\n  status %s (expected %s)\n  made %s\n"
      "  expected %s\n",
      step->slot, record ? "record" : "wait", step->stream.name,
      step->caller == NONE ? "none" : context_names[step->caller], dl_sync_status_name(status),
      dl_sync_status_name(want_status), got_text, want_text);
  return 0;
}

typedef struct sequence_worker {
  phases steps;
  const scenario *next;         /* a case, or */
  const tensor_step *next_step; /* a tensor's step; both NULL: stop */
  int held;
  pthread_t thread;
} sequence_worker;

static void *sequence_thread(void *arg) {
  sequence_worker *worker = arg;
  for (int phase = 1;; phase++) {
    phases_await(&worker->steps, phase);
    const scenario *sc = worker->next;
    const tensor_step *step = worker->next_step;
    if (sc != NULL) worker->held = check(sc);
    if (step != NULL) worker->held = check_tensor_step(step);
    set_caller(NONE); /* a green context is current on one thread at a time (cuda.h) */
    phases_done(&worker->steps, phase);
    if (sc == NULL && step == NULL) return NULL;
  }
}

static uint64_t splitmix(uint64_t *state) {
  uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

static void test_random_sequences_on_threads_land_where_cuda_h_says(void **state) {
  (void)state;
  named all[16];
  int n = named_streams(all);
  static scenario cases[SEQUENCE_MAX_CASES];
  int total = 0;
  for (int op = 0; op < OPS; op++)
    for (int caller = NONE; caller < context_count; caller++)
      for (int p = 0; p < n; p++)
        for (int capture = 0; capture < 2; capture++) {
          scenario base = {
              .op = op, .caller = caller, .warm = 1, .capture = capture, .producer = all[p]};
          scenario list[16];
          int count = consumers(&base, all, n, list);
          for (int i = 0; i < count && total < SEQUENCE_MAX_CASES; i++) {
            if (capture && list[i].consumer.kind == LEGACY) continue;
            if (capture && per_thread_of_green(&list[i].consumer, caller)) continue;
            if (capture && same_stream(&list[i].producer, &list[i].consumer, caller)) continue;
            cases[total++] = list[i];
          }
        }
  for (int slot = 0; slot < SEQUENCE_TENSORS; slot++) fresh_tensor(slot);
  sequence_worker workers[SEQUENCE_THREADS];
  int phase[SEQUENCE_THREADS] = {0};
  for (int t = 0; t < SEQUENCE_THREADS; t++) {
    workers[t] = (sequence_worker){.steps = PHASES_INIT};
    assert_int_equal(pthread_create(&workers[t].thread, NULL, sequence_thread, &workers[t]), 0);
  }
  uint64_t seed = UINT64_C(0x5eed) + (uint64_t)driver_version;
  long failed = 0;
  int ran = 0, cases_ran = 0;
  for (; ran < SEQUENCE_STEPS && failed < 20; ran++) {
    int t = (int)(splitmix(&seed) % SEQUENCE_THREADS);
    uint64_t roll = splitmix(&seed);
    tensor_step step = {.slot = (int)(roll / 16 % SEQUENCE_TENSORS),
                        .caller = (int)(roll / 64 % (uint64_t)(context_count + 1)) - 1,
                        .stream = all[roll / 1024 % (uint64_t)n]};
    step.action = !tensor_recorded[step.slot] ? TENSOR_RECORD
                  : roll / 65536 % 4 == 0     ? TENSOR_DROP
                                              : TENSOR_WAIT;
    int tensor = roll % 3 == 0;
    workers[t].next = tensor ? NULL : &cases[splitmix(&seed) % (uint64_t)total];
    workers[t].next_step = tensor ? &step : NULL;
    phases_tell(&workers[t].steps, ++phase[t]);
    failed += !workers[t].held;
    cases_ran += !tensor;
    tensor_steps[step.action] += tensor;
  }
  for (int t = 0; t < SEQUENCE_THREADS; t++) {
    workers[t].next = NULL;
    workers[t].next_step = NULL;
    phases_tell(&workers[t].steps, ++phase[t]);
    pthread_join(workers[t].thread, NULL);
  }
  for (int slot = 0; slot < SEQUENCE_TENSORS; slot++)
    sequence_tensors[slot].deleter(&sequence_tensors[slot]);
  drain();
  print_message(
      "%d steps at random on %d threads, nothing reset between: %d cases of %d, "
      "tensors' records %ld, waits %ld, drops %ld; %ld failed\n",
      ran, SEQUENCE_THREADS, cases_ran, total, tensor_steps[TENSOR_RECORD],
      tensor_steps[TENSOR_WAIT], tensor_steps[TENSOR_DROP], failed);
  assert_int_equal(failed, 0);
}

/* The steady state of a cross-stream export between explicit streams: no event made, no
   context asked for or switched, no green context asked about (once per pool); the driver
   calls are the two capture queries, the producer stream's context and that context's
   identity (its pool), one record and one wait. */
static void test_steady_state_export_makes_six_driver_calls(void **state) {
  (void)state;
  static const char *const calls[] = {"capture_queries", "stream_get_ctx",  "ctx_get_id",
                                      "event_record",    "stream_wait",     "event_create",
                                      "ctx_get_current", "ctx_set_current", "stream_get_green_ctx"};
  static const long per_export[] = {2, 1, 1, 1, 1, 0, 0, 0, 0};
  enum { CALLS = sizeof calls / sizeof *calls, EXPORTS = 100 };
  dl_sync_stream producer = dl_sync_stream_view((DLDevice){kDLCUDA, 0}, explicit_streams[X0]);
  dl_sync_stream_arg consumer = dl_sync_stream_arg_int((int64_t)(intptr_t)explicit_streams[P0]);
  DL_OK(dl_sync_export(producer, consumer)); /* the pool and the thread's cache, warm */
  long before[CALLS];
  for (int i = 0; i < CALLS; i++) before[i] = counter(calls[i]);
  for (int i = 0; i < EXPORTS; i++) DL_OK(dl_sync_export(producer, consumer));
  for (int i = 0; i < CALLS; i++)
    if (counter(calls[i]) - before[i] != per_export[i] * EXPORTS)
      fail_msg("%s: %ld calls in %d exports, expected %ld", calls[i], counter(calls[i]) - before[i],
               EXPORTS, per_export[i] * EXPORTS);
}

/* Release ordering over the driver, call by call. A participating producer's release is
   an export's work: the two capture queries, the consumer's context and its identity,
   one record, one wait, no event made once warm. A foreign producer's is one record now
   and its stream's id (its queue's key), and a query per later poll until complete, made
   in the relaxed capture mode; a capturing consumer's is a user object, and no event
   recorded in its capture is ever queried. */
static void release_deleter(DLManagedTensorVersioned *t) {
  (*(int *)t->manager_ctx)++;
}

static void fail_next(const char *name, int code, int skip) {
  ((void (*)(const char *, int, int))sym("fake_cuda_fail_next"))(name, code, skip);
}

static void test_release_calls(void **state) {
  (void)state;
  set_caller(P0);
  static const char *const calls[] = {"capture_queries", "stream_get_ctx", "ctx_get_id",
                                      "event_record",    "stream_wait",    "event_create",
                                      "event_query",     "stream_get_id"};
  enum { CALLS = sizeof calls / sizeof *calls };
  long before[CALLS];
  DLDevice d0 = {kDLCUDA, 0};
  dl_sync_stream producer = dl_sync_stream_view(d0, explicit_streams[P0]);
  dl_sync_stream consumer = dl_sync_stream_view(d0, explicit_streams[X0]);
  int deleted = 0;
  for (int round = 0; round < 2; round++) { /* the second warm */
    DLManagedTensorVersioned tensor = {
        .version = {1, 3}, .manager_ctx = &deleted, .deleter = release_deleter};
    tensor.dl_tensor.device = d0;
    DL_OK(dl_sync_tensor_record_reuse(&tensor, producer, producer));
    for (int i = 0; i < CALLS; i++) before[i] = counter(calls[i]);
    assert_int_equal(dl_sync_tensor_release(&tensor, consumer), DL_SYNC_RELEASED_ORDERED);
  }
  static const long ordered[] = {2, 1, 1, 1, 1, 0, 0, 0};
  for (int i = 0; i < CALLS; i++)
    if (counter(calls[i]) - before[i] != ordered[i])
      fail_msg("participating release: %ld %s, expected %ld", counter(calls[i]) - before[i],
               calls[i], ordered[i]);
  assert_int_equal(deleted, 2);

  DLManagedTensorVersioned foreign = {
      .version = {1, 3}, .manager_ctx = &deleted, .deleter = release_deleter};
  foreign.dl_tensor.device = d0;
  long records = counter("event_record"), queries = counter("event_query");
  long ids = counter("stream_get_id");
  assert_int_equal(dl_sync_tensor_release(&foreign, consumer), DL_SYNC_RELEASE_DEFERRED);
  assert_int_equal(counter("event_record") - records, 1);
  assert_int_equal(counter("stream_get_id") - ids, 1); /* the key of its queue */
  assert_int_equal(counter("event_query") - queries, 0);
  assert_int_equal(dl_sync_release_poll(), 1); /* the fake's work is done when enqueued */
  assert_int_equal(counter("event_query") - queries, 1);
  assert_int_equal(deleted, 3);

  DLManagedTensorVersioned kept = {
      .version = {1, 3}, .manager_ctx = &deleted, .deleter = release_deleter};
  kept.dl_tensor.device = d0;
  long objects = counter("user_objects_live"), prohibited = counter("prohibited_calls");
  CU_OK(begin_fn, "cuStreamBeginCapture_v2", consumer.handle, CU_CAPTURE_GLOBAL);
  records = counter("event_record");
  assert_int_equal(dl_sync_tensor_release(&kept, consumer), DL_SYNC_RELEASE_GRAPH);
  assert_int_equal(counter("event_record") - records, 0);
  assert_int_equal(counter("user_objects_live") - objects, 1);
  assert_int_equal(dl_sync_release_poll(), 0);
  void *graph = NULL;
  CU_OK(end_fn, "cuStreamEndCapture", consumer.handle, &graph);
  CU_OK(handle_fn, "cuGraphDestroy", graph);
  drain();
  assert_int_equal(dl_sync_release_poll(), 1);
  assert_int_equal(deleted, 4);
  assert_int_equal(counter("prohibited_calls") - prohibited, 0);

  /* A graph that refuses the tensor (cuGraphRetainUserObject's CUDA_ERROR_INVALID_VALUE):
     the error, and the tensor stays the caller's: its deleter never runs, not even once the
     user object given back is destroyed on the driver's thread. */
  DLManagedTensorVersioned refused = {
      .version = {1, 3}, .manager_ctx = &deleted, .deleter = release_deleter};
  refused.dl_tensor.device = d0;
  CU_OK(begin_fn, "cuStreamBeginCapture_v2", consumer.handle, CU_CAPTURE_GLOBAL);
  fail_next("cuGraphRetainUserObject", 1, 0);
  assert_int_equal(dl_sync_tensor_release(&refused, consumer), DL_SYNC_EBACKEND);
  graph = NULL;
  CU_OK(end_fn, "cuStreamEndCapture", consumer.handle, &graph);
  CU_OK(handle_fn, "cuGraphDestroy", graph);
  drain();
  assert_int_equal(dl_sync_release_poll(), 0);
  assert_int_equal(dl_sync_release_pending(), 0);
  assert_int_equal(deleted, 4);
  refused.deleter(&refused); /* the caller's to delete */
  assert_int_equal(deleted, 5);
}

/* Release ordering across contexts: what the producer meant is kept. A producer names its
   reuse stream with its own context current (record_reuse); a consumer releases with any
   context current, on any stream of the device. The wait lands on the reuse stream in the
   context the producer named it in (cuStreamGetCtx: "Specifying any of the special handles
   will return the context current to the calling thread": the producer's thread, not the
   consumer's), the record on the consumer's stream in its own; when the two are one stream
   nothing is recorded. A capturing reuse stream takes no wait: the release is deferred. A
   record of minor 2 (an older copy's), which does not say which context a legacy reuse
   stream is of, is deferred too, never ordered on the consumer's legacy stream. */
typedef struct release_case {
  int producer_caller, releaser, capture, minor2;
  named reuse, consumer;
} release_case;

/* The status expected, and the calls in want. */
static int expect_release(const release_case *rc, expected_call *want, int *count) {
  *count = 0;
  int reuse_context = oracle_context(&rc->reuse, rc->producer_caller);
  int consumer_context = oracle_context(&rc->consumer, rc->releaser);
  int same = rc->reuse.kind == rc->consumer.kind && reuse_context == consumer_context &&
             (rc->reuse.kind != EXPLICIT || rc->reuse.handle == rc->consumer.handle);
  int context_known = rc->reuse.kind == EXPLICIT || !rc->minor2;
  if (context_known && same) return DL_SYNC_RELEASED_ORDERED;
  want[(*count)++] = (expected_call){'r', rc->consumer.kind, consumer_context};
  if (!context_known || rc->capture) return DL_SYNC_RELEASE_DEFERRED;
  want[(*count)++] = (expected_call){'w', rc->reuse.kind, reuse_context};
  return DL_SYNC_RELEASED_ORDERED;
}

static int check_release(const release_case *rc, long *differs) {
  log_fn log = (log_fn)sym("fake_cuda_log");
  int deleted = 0;
  DLDevice d0 = {kDLCUDA, 0};
  DLManagedTensorVersioned tensor = {
      .version = {1, 3}, .manager_ctx = &deleted, .deleter = release_deleter};
  tensor.dl_tensor.device = d0;
  set_caller(rc->producer_caller);
  dl_sync_stream reuse = view(&rc->reuse);
  DL_OK(dl_sync_tensor_record_reuse(&tensor, reuse, reuse));
  if (rc->minor2) /* as an older copy writes it: no reuse context */
    ((dl_sync_tensor_event_owner *)tensor.manager_ctx)->size =
        offsetof(dl_sync_tensor_event_owner, reuse_context);
  int reuse_context = oracle_context(&rc->reuse, rc->producer_caller);
  void *capture_graph = NULL;
  if (rc->capture) { /* from the reuse stream's own context, where its handle names it */
    set_caller(reuse_context);
    CU_OK(begin_fn, "cuStreamBeginCapture_v2", rc->reuse.handle, CU_CAPTURE_GLOBAL);
  }
  set_caller(rc->releaser);
  log(-1, NULL, NULL, NULL);
  long dead = counter("dead_handles");
  int status = dl_sync_tensor_release(&tensor, view(&rc->consumer));
  char message[512];
  snprintf(message, sizeof message, "%s", dl_sync_last_error());
  expected_call got[8], want[8];
  int got_count = 0, want_count = 0, kind;
  void *context, *stream;
  for (int op; (op = log(got_count, &kind, &context, &stream)) > 0 && got_count < 8; got_count++)
    got[got_count] = (expected_call){(char)op, kind, caller_of(context)};
  void *after = current();
  if (rc->capture) {
    set_caller(reuse_context);
    CU_OK(end_fn, "cuStreamEndCapture", rc->reuse.handle, &capture_graph);
    if (capture_graph != NULL) CU_OK(handle_fn, "cuGraphDestroy", capture_graph);
  }
  set_caller(rc->releaser);
  if (status == DL_SYNC_RELEASE_DEFERRED) dl_sync_release_poll();
  int want_status = expect_release(rc, want, &want_count);
  int same_calls = got_count == want_count;
  for (int i = 0; i < want_count && same_calls; i++)
    same_calls =
        got[i].op == want[i].op && got[i].kind == want[i].kind && got[i].context == want[i].context;
  /* the case tells the producer's context from the releaser's */
  *differs +=
      rc->reuse.kind != EXPLICIT && reuse_context != oracle_context(&rc->reuse, rc->releaser);
  int held = status == want_status && same_calls && deleted == 1 &&
             after == (rc->releaser == NONE ? NULL : contexts[rc->releaser]) &&
             counter("dead_handles") == dead;
  if (held) return 1;
  char got_text[200], want_text[200];
  format_calls(got, got_count, got_text, sizeof got_text);
  format_calls(want, want_count, want_text, sizeof want_text);
  print_error(
      "reuse %s named in %s%s, released in %s on %s%s:\n  status %s (expected %s)%s%s\n"
      "  made %s\n  expected %s\n  deleted %d times\n",
      rc->reuse.name, rc->producer_caller == NONE ? "none" : context_names[rc->producer_caller],
      rc->minor2 ? " (a minor-2 record)" : "",
      rc->releaser == NONE ? "none" : context_names[rc->releaser], rc->consumer.name,
      rc->capture ? " (the reuse stream capturing)" : "", dl_sync_status_name(status),
      dl_sync_status_name(want_status), status < 0 ? ": " : "", status < 0 ? message : "", got_text,
      want_text, deleted);
  return 0;
}

static void test_a_reuse_stream_waits_in_the_producers_context(void **state) {
  (void)state;
  named all[16];
  int n = named_streams(all);
  long cases = 0, failed = 0, differs = 0;
  static const int device0_callers[] = {NONE, P0, X0};
  for (int r = 0; r < n; r++)
    for (int c = 0; c < n; c++) {
      if (all[r].device != 0 || all[c].device != 0 || all[r].kind == PER_THREAD) continue;
      if (is_green(all[r].context) || is_green(all[c].context)) continue; /* see Green below */
      for (int pc = 0; pc < 3; pc++)
        for (int rl = 0; rl < 3; rl++)
          for (int capture = 0; capture < 2; capture++)
            for (int minor2 = 0; minor2 < 2; minor2++) {
              release_case rc = {
                  device0_callers[pc], device0_callers[rl], capture, minor2, all[r], all[c]};
              if (capture && all[r].kind == LEGACY) continue;   /* cannot capture */
              if (capture && all[c].kind != EXPLICIT) continue; /* 906 on the legacy stream */
              if (capture && all[r].handle == all[c].handle) continue; /* itself captures */
              cases++;
              if (!check_release(&rc, &differs) && ++failed >= 20)
                fail_msg("20 combinations failed");
            }
    }
  print_message(
      "%ld release combinations (%ld where the producer's and the releaser's "
      "contexts name different legacy streams), %ld failed\n",
      cases, differs, failed);
  assert_true(differs > 0);
  assert_int_equal(failed, 0);
}

/* Releases that can never be asked about beside live ones: a consumer context destroyed
   (cuCtxDestroy: "Destroys and cleans up all resources associated with the context"), a
   primary context reset by its last release ("The context is automatically reset once the
   last reference to it is released", cuDevicePrimaryCtxRelease: its events go with it,
   its handle stays). Each is given up without a query of its dead event (a reset context
   is found by its identity; a destroyed one's identity is asked once), neither holds the
   live releases up, neither is asked again, and shutdown reports them once. Then a sticky
   error (CUDA_ERROR_ILLEGAL_ADDRESS: "any further CUDA work will return the same error"):
   every pending release is asked once, and reported. */
static void test_dead_releases_hold_no_other_up(void **state) {
  (void)state;
  DL_OK(dl_sync_shutdown()); /* dlsync holds no primary reference: the release resets P0 */
  greens_destroy();
  set_caller(P0);
  DLDevice d0 = {kDLCUDA, 0};
  enum { DEAD = 2, LIVE = 4, TENSORS = DEAD + LIVE };
  int deleted[TENSORS] = {0};
  DLManagedTensorVersioned tensors[TENSORS];
  for (int i = 0; i < TENSORS; i++) {
    tensors[i] = (DLManagedTensorVersioned){
        .version = {1, 3}, .manager_ctx = &deleted[i], .deleter = release_deleter};
    tensors[i].dl_tensor.device = d0;
  }
  void *doomed = NULL, *popped = NULL;
  CU_OK(ctx_create_fn, "cuCtxCreate_v2", &doomed, 0u, 0);
  CU(ctx_out_fn, "cuCtxPopCurrent_v2", &popped);
  set_caller(P0);
  CU_OK(ctx_fn, "cuCtxSetCurrent", doomed);
  void *in_doomed = NULL;
  CU_OK(stream_create_fn, "cuStreamCreate", &in_doomed, (unsigned)CU_STREAM_NON_BLOCKING);
  set_caller(P0);
  void *in_p0 = stream_in(P0);
  void *consumers[TENSORS] = {
      in_doomed,           in_p0, explicit_streams[X0], explicit_streams[P1], explicit_streams[X0],
      explicit_streams[X1]};
  for (int i = 0; i < TENSORS; i++) {
    DLDevice d = {kDLCUDA, i == 3 || i == 5 ? 1 : 0};
    tensors[i].dl_tensor.device = d;
    assert_int_equal(dl_sync_tensor_release(&tensors[i], dl_sync_stream_view(d, consumers[i])),
                     DL_SYNC_RELEASE_DEFERRED);
  }
  CU_OK(handle_fn, "cuCtxDestroy_v2", doomed);
  CU_OK(device_fn, "cuDevicePrimaryCtxRelease_v2", 0); /* the last reference: a reset */
  void *again = NULL;
  CU_OK(primary_retain_fn, "cuDevicePrimaryCtxRetain", &again, 0);
  long queries = counter("event_query"), dead_uses = counter("dead_handles");
  assert_int_equal(dl_sync_release_poll(), LIVE);
  for (int i = 0; i < TENSORS; i++) assert_int_equal(deleted[i], i >= DEAD);
  assert_int_equal(counter("event_query") - queries, LIVE); /* no dead event queried */
  long dead_asked = counter("dead_handles") - dead_uses;
  assert_true(dead_asked <= 1); /* the destroyed context's identity, once */
  for (int i = 0; i < 3; i++) assert_int_equal(dl_sync_release_poll(), 0);
  assert_int_equal(counter("event_query") - queries, LIVE); /* never asked again */
  assert_int_equal(counter("dead_handles") - dead_uses, dead_asked);
  assert_int_equal(dl_sync_release_pending(), 0);
  assert_int_equal(dl_sync_shutdown(), DL_SYNC_EBACKEND);
  assert_error_mentions("2 releases could not be finished");
  /* the shutdown asked nothing more of the destroyed context: its pool was found gone */
  assert_int_equal(counter("dead_handles") - dead_uses, dead_asked);
  DL_OK(dl_sync_shutdown());
  explicit_streams[P0] = stream_in(P0); /* the reset took the suite's streams of P0 */
  greens_make();

  /* A sticky error: every release asked once, none run, shutdown says so. */
  ((void (*)(int))sym("fake_cuda_sticky"))(700);
  for (int i = DEAD; i < TENSORS; i++) {
    deleted[i] = 0;
    DLDevice d = tensors[i].dl_tensor.device;
    assert_int_equal(dl_sync_tensor_release(&tensors[i], dl_sync_stream_view(d, consumers[i])),
                     DL_SYNC_RELEASE_DEFERRED);
  }
  queries = counter("event_query");
  assert_int_equal(dl_sync_release_poll(), 0);
  assert_int_equal(dl_sync_release_poll(), 0);
  assert_int_equal(counter("event_query") - queries, LIVE);
  ((void (*)(int))sym("fake_cuda_sticky"))(0);
  assert_int_equal(dl_sync_release_poll(), 0); /* given up: not asked once the error clears */
  for (int i = DEAD; i < TENSORS; i++) assert_int_equal(deleted[i], 0);
  assert_int_equal(dl_sync_shutdown(), DL_SYNC_EBACKEND);
  assert_error_mentions("4 releases could not be finished");
}

/* ---- green contexts ------------------------------------------------------------------ */

/* cuGreenCtxCreate: "a green context can be current to only one thread at a time". A
   framework thread has G0 current; another thread exports from a stream of G0 while G0's
   pool is empty. dlsync refuses (ENOTSUP, saying why and what to do) and never tries to
   make G0 current; once the framework thread has exported, the event it made serves the
   other thread, which makes none. The control: making G0 current on the other thread is
   what the fake answers with an error and counts ("green_second_thread"). */
typedef struct green_holder {
  phases steps; /* 1 make G0 current, 2 export once, 3 let it go */
  int status;
} green_holder;

static void *hold_green(void *arg) {
  green_holder *h = arg;
  for (int phase = 1; phase <= 3; phase++) {
    phases_await(&h->steps, phase);
    if (phase == 1) CU(ctx_fn, "cuCtxSetCurrent", contexts[G0]);
    if (phase == 2)
      h->status =
          dl_sync_push_dep(dl_sync_stream_view((DLDevice){kDLCUDA, 0}, explicit_streams[G0]),
                           dl_sync_stream_view((DLDevice){kDLCUDA, 0}, CU_LEGACY));
    if (phase == 3) CU(ctx_fn, "cuCtxSetCurrent", NULL);
    phases_done(&h->steps, phase);
  }
  return NULL;
}

static void test_a_green_contexts_pool_is_filled_only_where_it_is_current(void **state) {
  (void)state;
  if (context_count == G0) skip(); /* a driver without green contexts */
  DL_OK(dl_sync_shutdown());       /* every pool cold */
  set_caller(P0);
  green_holder h = {.steps = PHASES_INIT};
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, hold_green, &h), 0);
  phases_tell(&h.steps, 1);
  DLDevice d0 = {kDLCUDA, 0};
  dl_sync_stream green = dl_sync_stream_view(d0, explicit_streams[G0]);
  dl_sync_stream consumer = dl_sync_stream_view(d0, explicit_streams[P0]);
  long second = counter("green_second_thread");
  assert_int_not_equal(CU(ctx_fn, "cuCtxSetCurrent", contexts[G0]), 0); /* the control */
  assert_int_equal(counter("green_second_thread") - second, 1);
  assert_ptr_equal(current(), contexts[P0]);
  second = counter("green_second_thread");
  long created = counter("event_create");
  DLManagedTensorVersioned tensor = {.version = {1, 3}, .deleter = tensor_deleter};
  tensor.dl_tensor.device = d0;
  assert_int_equal(dl_sync_push_dep(green, consumer), DL_SYNC_ENOTSUP);
  print_message("%s\n", dl_sync_last_error());
  assert_error_mentions("current to only one thread at a time");
  assert_error_mentions("from the thread that has the green context current");
  assert_int_equal(dl_sync_tensor_record(&tensor, green), DL_SYNC_ENOTSUP);
  assert_int_equal(counter("event_create") - created, 0);
  assert_ptr_equal(current(), contexts[P0]);

  phases_tell(&h.steps, 2); /* the framework thread's own export warms G0's pool */
  assert_int_equal(h.status, DL_SYNC_OK);
  created = counter("event_create");
  for (int i = 0; i < 3; i++) {
    DL_OK(dl_sync_push_dep(green, consumer));
    DL_OK(dl_sync_export(green, dl_sync_stream_arg_int((int64_t)(intptr_t)consumer.handle)));
  }
  DL_OK(dl_sync_tensor_record(&tensor, green)); /* takes the one event */
  DLManagedTensorVersioned second_tensor = {.version = {1, 3}, .deleter = tensor_deleter};
  second_tensor.dl_tensor.device = d0;
  assert_int_equal(dl_sync_tensor_record(&second_tensor, green), DL_SYNC_ENOTSUP);
  assert_int_equal(counter("event_create") - created, 0);
  assert_int_equal(counter("green_second_thread") - second, 0);
  tensor.deleter(&tensor);
  phases_tell(&h.steps, 3);
  assert_int_equal(pthread_join(thread, NULL), 0);
}

/* DLPack's stream=2 with a green context current: cuStreamGetCtx_v2, CU_STREAM_PER_THREAD
   "will return CUDA_ERROR_INVALID_HANDLE if a green context is current to the calling
   thread". dlsync says so (EINVAL, never a silent success); with a created context current
   stream=2 is that context's per-thread stream (the control), and under the green context
   None is its legacy stream (the PyTorch pattern: cuStreamGetCtx: the special handles
   "return the context current to the calling thread"). */
static void test_stream_2_under_a_green_context_says_why(void **state) {
  (void)state;
  if (context_count == G0) skip();
  DLDevice d0 = {kDLCUDA, 0};
  log_fn log = (log_fn)sym("fake_cuda_log");
  set_caller(G0);
  long records = counter("event_record");
  assert_int_equal(
      dl_sync_export(dl_sync_stream_view(d0, explicit_streams[G0]), dl_sync_stream_arg_int(2)),
      DL_SYNC_EINVAL);
  print_message("%s\n", dl_sync_last_error());
  assert_error_mentions("green context is current");
  assert_error_mentions("stream=2");
  assert_int_equal(counter("event_record") - records, 0);
  assert_ptr_equal(current(), contexts[G0]);
  log(-1, NULL, NULL, NULL);
  DL_OK(dl_sync_export(dl_sync_stream_view(d0, explicit_streams[G0]), dl_sync_stream_arg_none()));
  int kind = -1;
  void *context = NULL, *stream = NULL;
  assert_int_equal(log(1, &kind, &context, &stream), 'w');
  assert_int_equal(kind, LEGACY);
  assert_ptr_equal(context, contexts[G0]);
  set_caller(X0);
  DL_OK(dl_sync_export(dl_sync_stream_view(d0, explicit_streams[X0]), dl_sync_stream_arg_int(2)));
}

/* cuEventRecord: "hEvent and hStream must be from the same context"; whether a green
   context's converted context and its primary context are one there, cuda.h leaves open
   (FAKE_CUDA_GREEN_EVENT_RULE). dlsync records only events of a stream's own context, so
   the combinations hold under both readings; this is what the strict one catches: an event
   made in P0 recorded on a stream of G0. */
typedef int (*record_on_fn)(void *event, void *stream);

static void test_the_green_event_rule_is_the_fakes_switch(void **state) {
  (void)state;
  if (context_count == G0) skip();
  const char *rule = getenv("FAKE_CUDA_GREEN_EVENT_RULE");
  int lenient = rule != NULL && strcmp(rule, "lenient") == 0;
  set_caller(P0);
  void *event = NULL;
  CU_OK(event_create_fn, "cuEventCreate", &event, 2u /* CU_EVENT_DISABLE_TIMING */);
  int code = CU(record_on_fn, "cuEventRecord", event, explicit_streams[G0]);
  print_message("an event of P0 recorded on a stream of G0 (%s): %d\n",
                lenient ? "lenient" : "strict", code);
  assert_int_equal(code, lenient ? 0 : 400 /* CUDA_ERROR_INVALID_HANDLE */);
  assert_int_equal(CU(record_on_fn, "cuEventRecord", event, explicit_streams[H0]), code);
  assert_int_equal(CU(record_on_fn, "cuEventRecord", event, explicit_streams[X0]), 400);
  CU_OK(handle_fn, "cuEventDestroy_v2", event);
}

/* A producer with G0 current names G0's legacy stream as its reuse stream. A release from
   another thread could order that stream only by making G0 current: dlsync does not name
   the green context, and the release is deferred behind the consumer's work. The control:
   named in a created context (X0), the same release is ordered. */
static int release_named_in(int producer_context, DLManagedTensorVersioned *tensor) {
  DLDevice d0 = {kDLCUDA, 0};
  tensor->dl_tensor.device = d0;
  set_caller(producer_context);
  DL_OK(dl_sync_tensor_record_reuse(tensor,
                                    dl_sync_stream_view(d0, explicit_streams[producer_context]),
                                    dl_sync_stream_view(d0, CU_LEGACY)));
  set_caller(P0);
  return dl_sync_tensor_release(tensor, dl_sync_stream_view(d0, explicit_streams[P0]));
}

static void test_a_green_legacy_reuse_stream_is_released_deferred(void **state) {
  (void)state;
  if (context_count == G0) skip();
  int deleted = 0;
  DLManagedTensorVersioned in_green = {
      .version = {1, 3}, .manager_ctx = &deleted, .deleter = release_deleter};
  DLManagedTensorVersioned in_created = in_green;
  long second = counter("green_second_thread"), switches = counter("ctx_set_current");
  assert_int_equal(release_named_in(G0, &in_green), DL_SYNC_RELEASE_DEFERRED);
  assert_int_equal(counter("green_second_thread") - second, 0);
  assert_int_equal(dl_sync_release_poll(), 1);
  assert_int_equal(deleted, 1);
  assert_int_equal(release_named_in(X0, &in_created), DL_SYNC_RELEASED_ORDERED);
  assert_int_equal(deleted, 2);
  assert_true(counter("ctx_set_current") > switches);
}

/* Copies before minor 3 read a reuse stream from reuse_stream and reuse_device alone, and
   would order a legacy one in their own thread's current context; a copy of minor 3 reads a
   green context's legacy stream there without its context. A default reuse stream named
   with contexts is therefore written only where such copies do not read it (minor 4's
   reuse_default_stream): there they find none, and defer the release; an explicit handle,
   which names its own context, stays where every copy reads it. This copy, reading its own
   record, still orders the legacy stream in the producer's context; cut to minor 3's size
   (as a minor-3 copy reads it), the record gives a deferred release. */
static void test_older_copies_find_no_legacy_reuse_stream(void **state) {
  (void)state;
  DLDevice d0 = {kDLCUDA, 0};
  struct {
    void *handle;
    int caller;
  } reuses[] = {{NULL, X0},
                {CU_LEGACY, X0},
                {CU_LEGACY, P0},
                {CU_LEGACY, NONE},
                {explicit_streams[X0], P0},
                {CU_LEGACY, G0}};
  int count = context_count > G0 ? 6 : 5;
  for (int i = 0; i < count; i++)
    for (int cut = 0; cut < 2; cut++) {
      int deleted = 0, is_explicit = reuses[i].handle == explicit_streams[X0];
      DLManagedTensorVersioned tensor = {
          .version = {1, 3}, .manager_ctx = &deleted, .deleter = release_deleter};
      tensor.dl_tensor.device = d0;
      set_caller(reuses[i].caller);
      dl_sync_stream reuse = dl_sync_stream_view(d0, reuses[i].handle);
      DL_OK(dl_sync_tensor_record_reuse(&tensor, reuse, reuse));
      const dl_sync_tensor_event_owner *record = tensor.manager_ctx;
      /* what a copy of minor 2 or 3 reads */
      int older_finds = record->reuse_device.device_type != 0;
      if (older_finds != is_explicit)
        fail_msg(
            "reuse stream %p named with %s current: an older copy %s it in the minor-2 "
            "fields",
            reuses[i].handle,
            reuses[i].caller == NONE ? "no context" : context_names[reuses[i].caller],
            older_finds ? "finds" : "does not find");
      assert_int_equal(record->reuse_default_device.device_type, is_explicit ? 0 : kDLCUDA);
      if (cut)
        ((dl_sync_tensor_event_owner *)tensor.manager_ctx)->size =
            offsetof(dl_sync_tensor_event_owner, reuse_default_stream);
      set_caller(X0); /* the releaser's context: another legacy stream than most producers' */
      int status = dl_sync_tensor_release(
          &tensor, dl_sync_stream_view(
                       d0, reuses[i].caller == X0 ? explicit_streams[P0] : explicit_streams[X0]));
      int ordered = is_explicit || (!cut && reuses[i].caller != G0);
      if (status != (ordered ? DL_SYNC_RELEASED_ORDERED : DL_SYNC_RELEASE_DEFERRED))
        fail_msg("reuse stream %p named with %s current%s: released %s", reuses[i].handle,
                 reuses[i].caller == NONE ? "no context" : context_names[reuses[i].caller],
                 cut ? ", the record read as minor 3" : "", dl_sync_status_name(status));
      dl_sync_release_poll();
      assert_int_equal(deleted, 1);
    }
  set_caller(P0);
}

/* ---- the reproducers --------------------------------------------------------------- */

/* A framework without a runtime (cuda.core, Numba) retains a primary context, exports,
   releases its last reference and retains it again: "The context is automatically reset
   once the last reference to it is released" (cuDevicePrimaryCtxRelease), which destroys
   its events; the handle stays. dlsync keys its pools by cuCtxGetId, so the exports after
   the reset make new events and never touch a dead one, nor does dl_sync_shutdown. */
static void test_a_reset_primary_context_gets_new_events(void **state) {
  (void)state;
  DL_OK(dl_sync_shutdown()); /* dlsync holds no reference of its own */
  greens_destroy();
  set_caller(P0);
  long retains = counter("primary_retain"), dead = counter("dead_handles");
  void *a = stream_in(P0), *b = stream_in(P0);
  unsigned long long before = 0, after = 0;
  CU_OK(id_fn, "cuCtxGetId", contexts[P0], &before);
  DL_OK(dl_sync_push_dep(dl_sync_stream_view((DLDevice){kDLCUDA, 0}, a),
                         dl_sync_stream_view((DLDevice){kDLCUDA, 0}, b)));
  assert_int_equal(counter("primary_retain") - retains, 0); /* explicit streams: none */
  CU_OK(device_fn, "cuDevicePrimaryCtxRelease_v2", 0);      /* the last reference: a reset */
  void *again = NULL;
  CU_OK(primary_retain_fn, "cuDevicePrimaryCtxRetain", &again, 0);
  assert_ptr_equal(again, contexts[P0]);
  CU_OK(id_fn, "cuCtxGetId", contexts[P0], &after);
  assert_true(after != before);
  long created = counter("event_create");
  a = stream_in(P0);
  b = stream_in(P0);
  for (int i = 0; i < 3; i++)
    DL_OK(dl_sync_export(dl_sync_stream_view((DLDevice){kDLCUDA, 0}, a),
                         dl_sync_stream_arg_int((int64_t)(intptr_t)b)));
  assert_int_equal(counter("event_create") - created, 1);
  DL_OK(dl_sync_shutdown());
  assert_int_equal(counter("dead_handles") - dead, 0);
  CU_OK(handle_fn, "cuStreamDestroy_v2", a);
  CU_OK(handle_fn, "cuStreamDestroy_v2", b);
  /* the reset took the suite's streams of P0 with it */
  explicit_streams[P0] = stream_in(P0);
  greens_make();
}

/* The other reading of a reset: cuda.h does not say whether a reset primary context comes
   back with a new cuCtxGetId, and with FAKE_CUDA_RESET_KEEPS_ID=1 the fake keeps it, as the
   handle is kept. The pool found by that Id holds the events the reset destroyed: a record
   on one answers that it is gone (CUDA_ERROR_INVALID_HANDLE), and dlsync drops the pool and
   records once more with a fresh one; another thread's cached events of it are never used
   again. The control: the pooled event of before, recorded after the reset, fails as
   every export would without the retry. */
typedef struct exporter {
  void *a, *b;
  phases steps; /* 1 export (its cache warm), 2 again, 3 end */
  int status[2];
} exporter;

static void *export_on_request(void *arg) {
  exporter *e = arg;
  CU(ctx_fn, "cuCtxSetCurrent", contexts[P0]);
  for (int phase = 1; phase <= 3; phase++) {
    phases_await(&e->steps, phase);
    if (phase < 3)
      e->status[phase - 1] = dl_sync_push_dep(dl_sync_stream_view((DLDevice){kDLCUDA, 0}, e->a),
                                              dl_sync_stream_view((DLDevice){kDLCUDA, 0}, e->b));
    else
      CU(ctx_fn, "cuCtxSetCurrent", NULL);
    phases_done(&e->steps, phase);
  }
  return NULL;
}

typedef int (*record_fn)(void *event, void *stream);

/* The fake's switches are read at each use: set here, in the process (NULL: unset). */
static void set_reading(const char *name, const char *value) {
#ifdef _WIN32
  _putenv_s(name, value != NULL ? value : ""); /* "" removes it */
#else
  if (value != NULL)
    setenv(name, value, 1);
  else
    unsetenv(name);
#endif
}

static void test_a_reset_primary_context_that_keeps_its_id_gets_fresh_events(void **state) {
  (void)state;
  DL_OK(dl_sync_shutdown()); /* dlsync holds no reference of its own */
  greens_destroy();
  set_reading("FAKE_CUDA_RESET_KEEPS_ID", "1");
  set_caller(P0);
  DLDevice d0 = {kDLCUDA, 0};
  void *a = stream_in(P0), *b = stream_in(P0);
  exporter other = {.steps = PHASES_INIT};
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, export_on_request, &other), 0);
  DL_OK(dl_sync_push_dep(dl_sync_stream_view(d0, a), dl_sync_stream_view(d0, b)));
  DLManagedTensorVersioned tensor = {.version = {1, 3}, .deleter = tensor_deleter};
  tensor.dl_tensor.device = d0;
  DL_OK(dl_sync_tensor_record(&tensor, dl_sync_stream_view(d0, a))); /* a pooled event */
  void *pooled = ((dl_sync_tensor_event_owner *)tensor.manager_ctx)->event;
  other.a = stream_in(P0);
  other.b = stream_in(P0);
  phases_tell(&other.steps, 1); /* the other thread's cache holds an event of the pool too */
  unsigned long long before = 0, after = 0;
  CU_OK(id_fn, "cuCtxGetId", contexts[P0], &before);
  CU_OK(device_fn, "cuDevicePrimaryCtxRelease_v2", 0); /* the last reference: a reset */
  void *again = NULL;
  CU_OK(primary_retain_fn, "cuDevicePrimaryCtxRetain", &again, 0);
  CU_OK(id_fn, "cuCtxGetId", contexts[P0], &after);
  assert_int_equal(after, before); /* this reading: the Id survives the reset */

  a = stream_in(P0); /* the reset took the streams with it */
  b = stream_in(P0);
  other.a = stream_in(P0);
  other.b = stream_in(P0);
  long dead = counter("dead_handles"), created = counter("event_create");
  /* the control: the pool's events are gone */
  assert_int_equal(CU(record_fn, "cuEventRecord", pooled, a), 400 /* INVALID_HANDLE */);
  assert_int_equal(counter("dead_handles") - dead, 1);
  dead = counter("dead_handles");
  for (int i = 0; i < 3; i++)
    DL_OK(dl_sync_push_dep(dl_sync_stream_view(d0, a), dl_sync_stream_view(d0, b)));
  assert_int_equal(counter("dead_handles") - dead, 1); /* the one record that told */
  assert_int_equal(counter("event_create") - created, 1);
  phases_tell(&other.steps, 2); /* its cached event of the dropped pool is never used */
  assert_int_equal(other.status[0], DL_SYNC_OK);
  assert_int_equal(other.status[1], DL_SYNC_OK);
  assert_int_equal(counter("dead_handles") - dead, 1);
  dl_sync_pool_stats stats;
  DL_OK(dl_sync_pool_stats_get(dl_sync_cuda_backend(), 0, &stats));
  assert_int_equal(stats.created, counter("event_create") - created); /* the fresh pool's */
  phases_tell(&other.steps, 3);
  assert_int_equal(pthread_join(thread, NULL), 0);
  tensor.deleter(&tensor); /* its event goes back to the dropped pool, never used again */
  DL_OK(dl_sync_shutdown());
  assert_int_equal(counter("dead_handles") - dead, 1); /* no dead event destroyed */
  set_reading("FAKE_CUDA_RESET_KEEPS_ID", NULL);
  CU_OK(handle_fn, "cuStreamDestroy_v2", a);
  CU_OK(handle_fn, "cuStreamDestroy_v2", b);
  CU_OK(handle_fn, "cuStreamDestroy_v2", other.a);
  CU_OK(handle_fn, "cuStreamDestroy_v2", other.b);
  explicit_streams[P0] = stream_in(P0);
  greens_make();
}

/* dlsync retains a primary context only to name a default stream for a caller with no
   context of that device current, once however often, and gives it back at shutdown:
   a framework's own last release then resets the device. */
static void test_primary_context_retained_once_and_released_at_shutdown(void **state) {
  (void)state;
  DL_OK(dl_sync_shutdown());
  long retains = counter("primary_retain"), releases = counter("primary_release");
  for (int i = 0; i < 50; i++) {
    set_caller(i % 2 == 0 ? NONE : X0);
    DL_OK(dl_sync_export(dl_sync_stream_view((DLDevice){kDLCUDA, 1}, CU_PER_THREAD),
                         dl_sync_stream_arg_none()));
    DL_OK(dl_sync_push_dep(dl_sync_stream_view((DLDevice){kDLCUDA, 0}, CU_LEGACY),
                           dl_sync_stream_view((DLDevice){kDLCUDA, 1}, CU_LEGACY)));
  }
  set_caller(P0);
  assert_int_equal(counter("primary_retain") - retains, 2); /* P1, then P0 (no context) */
  assert_int_equal(counter("primary_release") - releases, 0);
  DL_OK(dl_sync_shutdown());
  assert_int_equal(counter("primary_release") - releases, 2);
}

/* cuEventRecord: "hEvent and hStream must be from the same context". A tensor's event made
   in X0 re-recorded on a stream of P0 (the same device) is refused naming both contexts. */
static void test_rerecording_in_another_context_is_refused(void **state) {
  (void)state;
  DLManagedTensorVersioned tensor = {.version = {1, 3}, .deleter = tensor_deleter};
  tensor.dl_tensor.device = (DLDevice){kDLCUDA, 0};
  dl_sync_stream in_x0 = dl_sync_stream_view(tensor.dl_tensor.device, explicit_streams[X0]);
  dl_sync_stream in_p0 = dl_sync_stream_view(tensor.dl_tensor.device, explicit_streams[P0]);
  DL_OK(dl_sync_tensor_record(&tensor, in_x0));
  DL_OK(dl_sync_tensor_record(&tensor, in_x0)); /* its own context: fine */
  long dead = counter("dead_handles");
  assert_int_equal(dl_sync_tensor_record(&tensor, in_p0), DL_SYNC_EINVAL);
  print_message("%s\n", dl_sync_last_error());
  unsigned long long x0 = 0, p0 = 0;
  CU_OK(id_fn, "cuCtxGetId", contexts[X0], &x0);
  CU_OK(id_fn, "cuCtxGetId", contexts[P0], &p0);
  char both[96];
  snprintf(both, sizeof both, "context with id %llu", x0);
  assert_error_mentions(both);
  snprintf(both, sizeof both, "context with id %llu", p0);
  assert_error_mentions(both);
  assert_int_equal(counter("dead_handles") - dead, 0);
  DL_OK(dl_sync_tensor_wait(&tensor, in_p0)); /* a wait may cross contexts */
  tensor.deleter(&tensor);
}

/* An older copy's record of minor 1, exactly as long as that minor's fields: it names its
   event's context ("Minor 1 (present when size covers it)", context_id,
   dlsync/tensor_event.h), so re-recording it on a stream of another context of the device
   is refused as cuEventRecord requires ("hEvent and hStream must be from the same
   context"), and it records on a stream of its own context. */
static void test_a_minor_1_record_is_rerecorded_only_in_its_context(void **state) {
  (void)state;
  DLDevice d0 = {kDLCUDA, 0};
  set_caller(X0);
  void *event = NULL;
  CU_OK(event_create_fn, "cuEventCreate", &event, 2u /* CU_EVENT_DISABLE_TIMING */);
  set_caller(P0);
  unsigned long long x0 = 0;
  CU_OK(id_fn, "cuCtxGetId", contexts[X0], &x0);
  DLManagedTensorVersioned tensor = {.version = {1, 3}, .deleter = tensor_deleter};
  tensor.dl_tensor.device = d0;
  other_copy_event ctx;
  dl_sync_tensor_event_owner *record = other_copy_wrap(
      &tensor, event, d0, &ctx,
      (other_copy_fields){.minor = 1, .size = OTHER_COPY_MINOR_1_SIZE, .context_id = x0});
  assert_non_null(record);
  long dead = counter("dead_handles");
  assert_int_equal(dl_sync_tensor_record(&tensor, dl_sync_stream_view(d0, explicit_streams[P0])),
                   DL_SYNC_EINVAL);
  char mention[64];
  snprintf(mention, sizeof mention, "carries an event of the context with id %llu", x0);
  assert_error_mentions(mention);
  DL_OK(dl_sync_tensor_record(&tensor, dl_sync_stream_view(d0, explicit_streams[X0])));
  assert_int_equal(counter("dead_handles") - dead, 0);
  tensor.deleter(&tensor);
  assert_int_equal(atomic_load(&ctx.refs), 0);
  free(record);
  CU_OK(handle_fn, "cuEventDestroy_v2", event);
}

/* Another thread captures in the global mode; this thread, in the global mode too, waits
   for a tensor's event on the host. cuThreadExchangeStreamCaptureMode: in the global mode
   "if any other thread has a concurrent capture sequence initiated with
   CU_STREAM_CAPTURE_MODE_GLOBAL, this thread is prohibited from potentially unsafe API
   calls". dlsync synchronizes in the relaxed mode: the capture survives. */
typedef struct capturing_thread {
  void *stream;
  pthread_mutex_t lock;
  pthread_cond_t changed;
  int phase; /* 1: capturing; 2: told to end */
  int status_before_end;
} capturing_thread;

static void *capture_then_wait(void *arg) {
  capturing_thread *t = arg;
  CU(ctx_fn, "cuCtxSetCurrent", contexts[P0]);
  int code = CU(begin_fn, "cuStreamBeginCapture_v2", t->stream, CU_CAPTURE_GLOBAL);
  pthread_mutex_lock(&t->lock);
  t->phase = code == 0 ? 1 : -1;
  pthread_cond_broadcast(&t->changed);
  while (t->phase != 2) pthread_cond_wait(&t->changed, &t->lock);
  pthread_mutex_unlock(&t->lock);
  CU(is_capturing_fn, "cuStreamIsCapturing", t->stream, &t->status_before_end);
  void *graph = NULL;
  if (CU(end_fn, "cuStreamEndCapture", t->stream, &graph) == 0 && graph != NULL)
    CU(handle_fn, "cuGraphDestroy", graph);
  return NULL;
}

static void test_synchronize_keeps_another_threads_global_capture(void **state) {
  (void)state;
  DLManagedTensorVersioned tensor = {.version = {1, 3}, .deleter = tensor_deleter};
  tensor.dl_tensor.device = (DLDevice){kDLCUDA, 0};
  DL_OK(dl_sync_tensor_record(&tensor,
                              dl_sync_stream_view(tensor.dl_tensor.device, explicit_streams[P0])));
  capturing_thread t = {.stream = stream_in(P0),
                        .lock = PTHREAD_MUTEX_INITIALIZER,
                        .changed = PTHREAD_COND_INITIALIZER};
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, capture_then_wait, &t), 0);
  pthread_mutex_lock(&t.lock);
  while (t.phase == 0) pthread_cond_wait(&t.changed, &t.lock);
  pthread_mutex_unlock(&t.lock);
  long prohibited = counter("prohibited_calls");
  int status = dl_sync_tensor_synchronize(&tensor);
  char message[512];
  snprintf(message, sizeof message, "%s", dl_sync_last_error());
  /* the backend's event query, as a pool that queries before reuse calls it */
  const dl_sync_backend *b = dl_sync_cuda_backend();
  void *event = NULL;
  int complete = 0;
  CU_OK(event_create_fn, "cuEventCreate", &event, 2u /* CU_EVENT_DISABLE_TIMING */);
  int query_code = b->event_query(b->ctx, event, &complete);
  CU_OK(handle_fn, "cuEventDestroy_v2", event);
  pthread_mutex_lock(&t.lock);
  t.phase = 2;
  pthread_cond_broadcast(&t.changed);
  pthread_mutex_unlock(&t.lock);
  assert_int_equal(pthread_join(thread, NULL), 0);
  if (status != DL_SYNC_OK) fail_msg("%s", message);
  assert_int_equal(query_code, 0);
  assert_int_equal(complete, 1);
  assert_int_equal(counter("prohibited_calls") - prohibited, 0);
  assert_int_equal(t.status_before_end, 1); /* still capturing: not invalidated */
  tensor.deleter(&tensor);
  CU_OK(handle_fn, "cuStreamDestroy_v2", t.stream);
}

/* The calling thread's capture interaction mode, read as cuThreadExchangeStreamCaptureMode
   allows ("overwrites *mode with the previous mode for the thread") and put back. */
static int capture_mode_now(void) {
  int mode = CU_CAPTURE_RELAXED;
  CU_OK(mode_fn, "cuThreadExchangeStreamCaptureMode", &mode);
  int previous = mode;
  CU_OK(mode_fn, "cuThreadExchangeStreamCaptureMode", &mode);
  return previous;
}

static void set_capture_mode(int mode) {
  CU_OK(mode_fn, "cuThreadExchangeStreamCaptureMode", &mode);
}

/* dlsync's host queries and waits run in the relaxed mode ("the local thread is not
   prohibited from potentially unsafe API calls") and leave the caller in the mode it
   chose, whichever of the three: a tensor's synchronization (cuEventSynchronize) and a
   deferred release's poll (cuEventQuery). */
static void test_host_waits_leave_the_callers_capture_mode(void **state) {
  (void)state;
  static const char *const names[] = {"global", "thread-local", "relaxed"};
  DLDevice d0 = {kDLCUDA, 0};
  dl_sync_stream producer = dl_sync_stream_view(d0, explicit_streams[P0]);
  dl_sync_stream consumer = dl_sync_stream_view(d0, explicit_streams[X0]);
  set_caller(P0);
  for (int mode = CU_CAPTURE_GLOBAL; mode <= CU_CAPTURE_RELAXED; mode++) {
    set_capture_mode(mode);
    long queries = counter("event_query");
    DLManagedTensorVersioned tensor = {.version = {1, 3}, .deleter = tensor_deleter};
    tensor.dl_tensor.device = d0;
    DL_OK(dl_sync_tensor_record(&tensor, producer));
    DL_OK(dl_sync_tensor_synchronize(&tensor));
    if (capture_mode_now() != mode)
      fail_msg("the caller's %s mode is not back after dl_sync_tensor_synchronize", names[mode]);
    tensor.deleter(&tensor);
    int deleted = 0;
    DLManagedTensorVersioned foreign = {
        .version = {1, 3}, .manager_ctx = &deleted, .deleter = release_deleter};
    foreign.dl_tensor.device = d0;
    assert_int_equal(dl_sync_tensor_release(&foreign, consumer), DL_SYNC_RELEASE_DEFERRED);
    assert_int_equal(dl_sync_release_poll(), 1);
    assert_int_equal(deleted, 1);
    if (capture_mode_now() != mode)
      fail_msg("the caller's %s mode is not back after dl_sync_release_poll", names[mode]);
    assert_true(counter("event_query") > queries); /* the poll's query was made */
  }
  set_capture_mode(CU_CAPTURE_GLOBAL);
}

/* A call that cannot put the caller's mode back (cuThreadExchangeStreamCaptureMode's
   results include CUDA_ERROR_INVALID_VALUE) leaves the thread relaxed: the call fails and
   its message names the exchange, never OK. The same when the switch to relaxed fails. */
static void test_a_failed_capture_mode_exchange_is_reported(void **state) {
  (void)state;
  DLDevice d0 = {kDLCUDA, 0};
  set_caller(P0);
  DLManagedTensorVersioned tensor = {.version = {1, 3}, .deleter = tensor_deleter};
  tensor.dl_tensor.device = d0;
  DL_OK(dl_sync_tensor_record(&tensor, dl_sync_stream_view(d0, explicit_streams[P0])));
  for (int skip = 1; skip >= 0; skip--) { /* the restore, then the switch */
    set_capture_mode(CU_CAPTURE_GLOBAL);
    fail_next("cuThreadExchangeStreamCaptureMode", 1 /* CUDA_ERROR_INVALID_VALUE */, skip);
    int status = dl_sync_tensor_synchronize(&tensor);
    if (status >= 0)
      fail_msg("the %s exchange failed, and dl_sync_tensor_synchronize answered %d",
               skip ? "restoring" : "relaxing", status);
    assert_error_mentions("cuThreadExchangeStreamCaptureMode");
    assert_error_mentions("[CUDA_ERROR_INVALID_VALUE]");
  }
  set_capture_mode(CU_CAPTURE_GLOBAL);
  DL_OK(dl_sync_tensor_synchronize(&tensor));
  tensor.deleter(&tensor);
}

/* A graph's user-object destructor gives its event back on the driver's thread ("should
   avoid blocking") while dl_sync_shutdown destroys that pool's idle events: shutdown
   destroys them with no pool lock held, so the destructor never waits on it. */
static void test_shutdown_never_makes_a_destructor_wait(void **state) {
  (void)state;
  set_caller(P0);
  dl_sync_stream a = dl_sync_stream_view((DLDevice){kDLCUDA, 0}, explicit_streams[P0]);
  dl_sync_stream b = dl_sync_stream_view((DLDevice){kDLCUDA, 0}, stream_in(P0));
  DL_OK(dl_sync_push_dep(a, b)); /* an idle event for shutdown to destroy */
  CU_OK(begin_fn, "cuStreamBeginCapture_v2", b.handle, CU_CAPTURE_GLOBAL);
  DL_OK(dl_sync_push_dep(a, b)); /* a graph-owned event of the same pool */
  void *graph = NULL;
  CU_OK(end_fn, "cuStreamEndCapture", b.handle, &graph);
  void (*hold)(int, int) = (void (*)(int, int))sym("fake_cuda_hold_destructors");
  hold(1, 0);
  CU_OK(handle_fn, "cuGraphDestroy", graph); /* its destructor is due, held back */
  hold(1, 1);                                /* and runs during the first cuEventDestroy */
  long stalls = counter("destructor_stalls"), dead = counter("dead_handles");
  DL_OK(dl_sync_shutdown());
  drain();
  assert_int_equal(counter("destructor_stalls") - stalls, 0);
  assert_int_equal(counter("dead_handles") - dead, 0);
  CU_OK(handle_fn, "cuStreamDestroy_v2", b.handle);
}

static dl_sync_pool_stats pool_of(int device) {
  dl_sync_pool_stats stats;
  DL_OK(dl_sync_pool_stats_get(dl_sync_cuda_backend(), device, &stats));
  return stats;
}

/* The graph-owned event of an external wait goes back whatever fails after it was taken:
   cuGraphRetainUserObject ("CUDA_ERROR_INVALID_VALUE" is among its results) refusing the
   user object, or the switch to the consumer's context for the retain and the wait. */
static void test_a_failed_external_wait_gives_everything_back(void **state) {
  (void)state;
  set_caller(P0);
  dl_sync_stream a = dl_sync_stream_view((DLDevice){kDLCUDA, 0}, explicit_streams[P0]);
  dl_sync_stream b = dl_sync_stream_view((DLDevice){kDLCUDA, 0}, stream_in(P0));
  long objects = counter("user_objects_live");
  CU_OK(begin_fn, "cuStreamBeginCapture_v2", b.handle, CU_CAPTURE_GLOBAL);
  fail_next("cuGraphRetainUserObject", 1 /* CUDA_ERROR_INVALID_VALUE */, 0);
  assert_int_equal(dl_sync_push_dep(a, b), DL_SYNC_EBACKEND);
  assert_error_mentions("cuGraphRetainUserObject");
  void *graph = NULL;
  CU(end_fn, "cuStreamEndCapture", b.handle, &graph);
  if (graph != NULL) CU_OK(handle_fn, "cuGraphDestroy", graph);
  drain();
  assert_int_equal(counter("user_objects_live") - objects, 0);
  assert_int_equal(pool_of(0).outstanding, 0);

  /* The consumer: device 1's per-thread stream, capturing. With a cold pool the event is
     made in P0, so the retain needs P1 current again: the third switch of the call. */
  DL_OK(dl_sync_shutdown());
  CU_OK(ctx_fn, "cuCtxSetCurrent", contexts[P1]);
  CU_OK(begin_fn, "cuStreamBeginCapture_v2", CU_PER_THREAD, CU_CAPTURE_GLOBAL);
  CU_OK(ctx_fn, "cuCtxSetCurrent", contexts[P0]);
  fail_next("cuCtxSetCurrent", 201 /* CUDA_ERROR_INVALID_CONTEXT */, 2);
  assert_int_equal(dl_sync_push_dep(a, dl_sync_stream_view((DLDevice){kDLCUDA, 1}, CU_PER_THREAD)),
                   DL_SYNC_EBACKEND);
  assert_error_mentions("[cuCtxSetCurrent]");
  assert_ptr_equal(current(), contexts[P0]);
  assert_int_equal(pool_of(0).outstanding, 0);
  assert_int_equal(counter("user_objects_live") - objects, 0);
  CU_OK(ctx_fn, "cuCtxSetCurrent", contexts[P1]);
  graph = NULL;
  CU(end_fn, "cuStreamEndCapture", CU_PER_THREAD, &graph);
  if (graph != NULL) CU_OK(handle_fn, "cuGraphDestroy", graph);
  set_caller(P0);
  CU_OK(handle_fn, "cuStreamDestroy_v2", b.handle);
}

/* A call that fails, then fails to give the caller's context back, reports the first
   failure (the caller had none: the legacy stream was named in P0). */
static void test_a_failed_restore_reports_the_first_failure(void **state) {
  (void)state;
  set_caller(NONE);
  fail_next("cuStreamGetCaptureInfo", 1 /* CUDA_ERROR_INVALID_VALUE */, 0);
  fail_next("cuCtxSetCurrent", 201 /* CUDA_ERROR_INVALID_CONTEXT */, 1);
  assert_int_equal(
      dl_sync_push_dep(dl_sync_stream_view((DLDevice){kDLCUDA, 0}, CU_LEGACY),
                       dl_sync_stream_view((DLDevice){kDLCUDA, 0}, explicit_streams[P0])),
      DL_SYNC_EBACKEND);
  assert_error_mentions("[cuStreamGetCaptureInfo][CUDA_ERROR_INVALID_VALUE]");
  set_caller(P0);
}

/* DLPack's stream 2 is "the per-thread default stream of the calling thread": each thread's
   export records on its own (CU_STREAM_PER_THREAD: "an implicit stream with per-thread
   synchronization semantics"). */
typedef struct per_thread_run {
  int status;
  void *recorded;
} per_thread_run;

static void *export_per_thread(void *arg) {
  per_thread_run *run = arg;
  log_fn log = (log_fn)sym("fake_cuda_log");
  CU(ctx_fn, "cuCtxSetCurrent", contexts[P0]);
  log(-1, NULL, NULL, NULL);
  run->status = dl_sync_export(dl_sync_stream_view((DLDevice){kDLCUDA, 0}, CU_PER_THREAD),
                               dl_sync_stream_arg_none());
  int kind = -1;
  void *context = NULL;
  if (log(0, &kind, &context, &run->recorded) != 'r' || kind != PER_THREAD ||
      context != contexts[P0])
    run->recorded = NULL;
  return NULL;
}

static void test_each_thread_records_on_its_own_per_thread_stream(void **state) {
  (void)state;
  per_thread_run mine = {0}, other = {0};
  export_per_thread(&mine);
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, export_per_thread, &other), 0);
  assert_int_equal(pthread_join(thread, NULL), 0);
  assert_int_equal(mine.status, DL_SYNC_OK);
  assert_int_equal(other.status, DL_SYNC_OK);
  assert_non_null(mine.recorded);
  assert_non_null(other.recorded);
  assert_ptr_not_equal(mine.recorded, other.recorded);
}

/* A child forked after CUDA was initialized cannot use it: ENODEV, and the message says
   so rather than "no device". The child makes no cmocka call. */
static void test_a_forked_child_is_told_why(void **state) {
  (void)state;
#ifdef _WIN32
  skip(); /* no fork */
#else
  dl_sync_stream a = dl_sync_stream_view((DLDevice){kDLCUDA, 0}, explicit_streams[P0]);
  dl_sync_stream b = dl_sync_stream_view((DLDevice){kDLCUDA, 0}, explicit_streams[X0]);
  DL_OK(dl_sync_push_dep(a, b));
  pid_t child = fork();
  if (child == 0) {
    int status = dl_sync_push_dep(b, a);
    int told = strstr(dl_sync_last_error(), "forked after CUDA was initialized") != NULL;
    if (!told)
      fprintf(stderr, "child: %s: %s\n", dl_sync_status_name(status), dl_sync_last_error());
    _exit(status == DL_SYNC_ENODEV && told ? 0 : 1);
  }
  int status = 0;
  assert_int_equal(waitpid(child, &status, 0), child);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
#endif
}

/* Each context has its own legacy stream (cuStreamGetCtx: "Specifying any of the special
   handles will return the context current to the calling thread"): device 0's default stream
   released on with each of several contexts current names that context's legacy stream, and the
   releases of one wait for no other's. The first half's legacy streams are held by a wait on host
   memory (cuStreamWaitValue32) when their releases are made; the second half's releases are
   finished by a poll while the first half's wait. Many contexts, so that queues of several
   contexts share a hash bucket (with 24, a keying without the context queued 4 to 8 of the
   12 free releases behind held ones). Catches: the release queues keyed without the context
   (release_queue.c same_queue), which queues one context's release behind
   another's unfinished one. */
typedef int (*host_alloc_fn)(void **memory, size_t size, unsigned flags);
typedef int (*device_pointer_fn)(unsigned long long *pointer, void *memory, unsigned flags);
typedef int (*wait_value_fn)(void *stream, unsigned long long address, unsigned value,
                             unsigned flags);
enum { CU_MEMHOSTALLOC_DEVICEMAP = 0x02, CU_STREAM_WAIT_VALUE_GEQ = 0x0 };

static void test_legacy_streams_of_two_contexts_have_their_own_queues(void **state) {
  (void)state;
  enum { MADE = 24, HELD = MADE / 2 };
  void *made[MADE];
  for (int i = 0; i < MADE; i++) {
    void *popped = NULL;
    CU_OK(ctx_create_fn, "cuCtxCreate_v2", &made[i], 0u, 0);
    CU_OK(ctx_out_fn, "cuCtxPopCurrent_v2", &popped);
  }
  set_caller(P0);
  void *gate = NULL;
  unsigned long long gate_address = 0;
  CU_OK(host_alloc_fn, "cuMemHostAlloc", &gate, sizeof(uint32_t),
        (unsigned)CU_MEMHOSTALLOC_DEVICEMAP);
  *(volatile uint32_t *)gate = 0;
  CU_OK(device_pointer_fn, "cuMemHostGetDevicePointer_v2", &gate_address, gate, 0u);
  int deleted[MADE] = {0};
  DLManagedTensorVersioned tensors[MADE];
  DLDevice d0 = {kDLCUDA, 0};
  for (int i = 0; i < MADE; i++) {
    CU_OK(ctx_fn, "cuCtxSetCurrent", made[i]);
    if (i < HELD)
      CU_OK(wait_value_fn, "cuStreamWaitValue32_v2", CU_LEGACY, gate_address, 1u,
            (unsigned)CU_STREAM_WAIT_VALUE_GEQ);
    tensors[i] = (DLManagedTensorVersioned){
        .version = {1, 3}, .manager_ctx = &deleted[i], .deleter = release_deleter};
    tensors[i].dl_tensor.device = d0;
    assert_int_equal(dl_sync_tensor_release(&tensors[i], dl_sync_stream_view(d0, CU_LEGACY)),
                     DL_SYNC_RELEASE_DEFERRED);
  }
  set_caller(P0);
  int finished = dl_sync_release_poll(), ran_while_held[MADE];
  for (int i = 0; i < MADE; i++) ran_while_held[i] = deleted[i];
  *(volatile uint32_t *)gate = 1; /* before any assertion: shutdown would wait for it */
  int finished_after = dl_sync_release_poll();
  for (int i = 0; i < MADE; i++)
    if (ran_while_held[i] != (i >= HELD))
      fail_msg(
          "the release on context %d's legacy stream %s (the poll finished %d; contexts "
          "0 to %d hold theirs)",
          i, ran_while_held[i] ? "ran while its stream was held" : "waited behind another's",
          finished, HELD - 1);
  assert_int_equal(finished, MADE - HELD);
  assert_int_equal(finished_after, HELD);
  for (int i = 0; i < MADE; i++) assert_int_equal(deleted[i], 1);
  DL_OK(dl_sync_shutdown()); /* the pools made in those contexts, before they go */
  for (int i = 0; i < MADE; i++) CU_OK(handle_fn, "cuCtxDestroy_v2", made[i]);
  CU_OK(handle_fn, "cuMemFreeHost", gate);
  set_caller(P0);
}

/* A stream's releases are keyed by its cuStreamGetId ("The Id is unique for the life of the
   program"), not by its handle alone: a destroyed stream's handle may be a new stream's (the
   fake gives it, fake_cuda_reuse_stream_handles). A release on the old stream, held by a wait
   on host memory, and one on the new stream with the old handle: a poll finishes the new
   one while the old one waits. The control keys by handle only (the backend without
   stream_id): the new stream's release then waits behind the old one's, so the fake's reuse
   is what the test sees. Catches: same_queue without the id (release_queue.c), and a backend
   or release path that asks no id. */
static int release_on_a_reused_handle(const dl_sync_backend *backend) {
  set_caller(P0);
  DL_OK(dl_sync_set_backend(kDLCUDA, backend));
  void *gate = NULL;
  unsigned long long gate_address = 0;
  CU_OK(host_alloc_fn, "cuMemHostAlloc", &gate, sizeof(uint32_t),
        (unsigned)CU_MEMHOSTALLOC_DEVICEMAP);
  *(volatile uint32_t *)gate = 0;
  CU_OK(device_pointer_fn, "cuMemHostGetDevicePointer_v2", &gate_address, gate, 0u);
  ((void (*)(int))sym("fake_cuda_reuse_stream_handles"))(1);
  DLDevice d0 = {kDLCUDA, 0};
  int deleted[2] = {0};
  DLManagedTensorVersioned tensors[2];
  for (int i = 0; i < 2; i++) {
    tensors[i] = (DLManagedTensorVersioned){
        .version = {1, 3}, .manager_ctx = &deleted[i], .deleter = release_deleter};
    tensors[i].dl_tensor.device = d0;
  }
  void *old = stream_in(P0);
  CU_OK(wait_value_fn, "cuStreamWaitValue32_v2", old, gate_address, 1u,
        (unsigned)CU_STREAM_WAIT_VALUE_GEQ);
  assert_int_equal(dl_sync_tensor_release(&tensors[0], dl_sync_stream_view(d0, old)),
                   DL_SYNC_RELEASE_DEFERRED);
  CU_OK(handle_fn, "cuStreamDestroy_v2", old); /* its work still waits for the gate */
  void *reused = stream_in(P0);
  assert_ptr_equal(reused, old);
  assert_int_equal(dl_sync_tensor_release(&tensors[1], dl_sync_stream_view(d0, reused)),
                   DL_SYNC_RELEASE_DEFERRED);
  int finished = dl_sync_release_poll(), new_one_ran = deleted[1];
  assert_int_equal(deleted[0], 0);
  *(volatile uint32_t *)gate = 1; /* before any assertion on the new one: shutdown waits */
  int finished_after = dl_sync_release_poll();
  assert_int_equal(finished + finished_after, 2);
  assert_int_equal(deleted[0], 1);
  assert_int_equal(deleted[1], 1);
  DL_OK(dl_sync_shutdown());
  DL_OK(dl_sync_set_backend(kDLCUDA, NULL));
  ((void (*)(int))sym("fake_cuda_reuse_stream_handles"))(0);
  CU_OK(handle_fn, "cuStreamDestroy_v2", reused);
  CU_OK(handle_fn, "cuMemFreeHost", gate);
  set_caller(P0);
  assert_int_equal(finished, new_one_ran);
  return new_one_ran;
}

static void test_a_reused_stream_handle_brings_no_old_queue(void **state) {
  (void)state;
  static dl_sync_backend by_handle;
  by_handle = *dl_sync_cuda_backend();
  by_handle.stream_id = NULL;
  if (!release_on_a_reused_handle(dl_sync_cuda_backend()))
    fail_msg(
        "the release on a new stream waited behind the release of the destroyed stream "
        "whose handle it was given");
  if (release_on_a_reused_handle(&by_handle))
    fail_msg(
        "control: keyed by handle, the new stream's release did not wait behind the old "
        "one's: the fake gave no reused handle");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_every_combination_lands_where_cuda_h_says, teardown_each),
      cmocka_unit_test_teardown(test_random_sequences_on_threads_land_where_cuda_h_says,
                                teardown_each),
      cmocka_unit_test_teardown(test_steady_state_export_makes_six_driver_calls, teardown_each),
      cmocka_unit_test_teardown(test_release_calls, teardown_each),
      cmocka_unit_test_teardown(test_a_reuse_stream_waits_in_the_producers_context, teardown_each),
      cmocka_unit_test_teardown(test_a_reset_primary_context_gets_new_events, teardown_each),
      cmocka_unit_test_teardown(test_a_reset_primary_context_that_keeps_its_id_gets_fresh_events,
                                teardown_each),
      cmocka_unit_test_teardown(test_dead_releases_hold_no_other_up, teardown_each),
      cmocka_unit_test_teardown(test_older_copies_find_no_legacy_reuse_stream, teardown_each),
      cmocka_unit_test_teardown(test_legacy_streams_of_two_contexts_have_their_own_queues,
                                teardown_each),
      cmocka_unit_test_teardown(test_a_reused_stream_handle_brings_no_old_queue, teardown_each),
      cmocka_unit_test_teardown(test_primary_context_retained_once_and_released_at_shutdown,
                                teardown_each),
      cmocka_unit_test_teardown(test_rerecording_in_another_context_is_refused, teardown_each),
      cmocka_unit_test_teardown(test_a_minor_1_record_is_rerecorded_only_in_its_context,
                                teardown_each),
      cmocka_unit_test_teardown(test_synchronize_keeps_another_threads_global_capture,
                                teardown_each),
      cmocka_unit_test_teardown(test_host_waits_leave_the_callers_capture_mode, teardown_each),
      cmocka_unit_test_teardown(test_a_failed_capture_mode_exchange_is_reported, teardown_each),
      cmocka_unit_test_teardown(test_shutdown_never_makes_a_destructor_wait, teardown_each),
      cmocka_unit_test_teardown(test_a_failed_external_wait_gives_everything_back, teardown_each),
      cmocka_unit_test_teardown(test_a_failed_restore_reports_the_first_failure, teardown_each),
      cmocka_unit_test_teardown(test_each_thread_records_on_its_own_per_thread_stream,
                                teardown_each),
      cmocka_unit_test_teardown(test_a_forked_child_is_told_why, teardown_each),
      cmocka_unit_test_teardown(test_a_green_contexts_pool_is_filled_only_where_it_is_current,
                                teardown_each),
      cmocka_unit_test_teardown(test_stream_2_under_a_green_context_says_why, teardown_each),
      cmocka_unit_test_teardown(test_the_green_event_rule_is_the_fakes_switch, teardown_each),
      cmocka_unit_test_teardown(test_a_green_legacy_reuse_stream_is_released_deferred,
                                teardown_each),
  };
  return cmocka_run_group_tests_name("driver_contexts", tests, setup, NULL);
}
