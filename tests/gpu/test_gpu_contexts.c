/* SPDX-License-Identifier: Apache-2.0 */
#define _POSIX_C_SOURCE 200809L /* pthread_barrier */
/*
 * CUDA contexts on a real device, gated as the ordering suites are (gpu_suite.h): streams
 * of two created contexts exchanged both ways, default streams named while another
 * context is current, a primary context reset and used again (with a release pending
 * across the reset), a cold context's producer joining a capture, another thread's
 * global-mode capture across dl_sync_tensor_synchronize and across dl_sync_release_poll,
 * a producer's legacy reuse stream released from a thread with another context current,
 * and a green context's stream exchanged with the primary context's both ways (drivers of
 * CUDA 12.4 on). Every case runs in contexts made for it, so that its first
 * ordered run meets a cold pool (the suite checks that it made an event) and the later
 * ones a warm one.
 *
 * The driver's context calls come from libcuda.so.1, opened once a device answered (the
 * runtime has loaded it by then), under the versioned names every CUDA 12 and 13 driver
 * exports; the green-context calls only where the driver has them (12.4). Buffers that two
 * contexts share are host-mapped and portable: device memory of one context is not
 * another's.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

#include "gpu_suite.h"

typedef enum suite_mode {
  MODE_CREATED_CONTEXTS,
  MODE_DEFAULT_STREAM_OTHER_CONTEXT,
  MODE_RESET,
  MODE_CAPTURE_COLD_CONTEXT,
  MODE_CAPTURE_SURVIVES_SYNCHRONIZE,
  MODE_CAPTURE_SURVIVES_RELEASE_POLL,
  MODE_RELEASE_LEGACY_OTHER_CONTEXT,
  MODE_GREEN_CONTEXT,
  MODES
} suite_mode;
static const char *const mode_names[MODES] = {"created-contexts",
                                              "default-stream-other-context",
                                              "reset",
                                              "capture-cold-context",
                                              "capture-survives-synchronize",
                                              "capture-survives-release-poll",
                                              "release-legacy-other-context",
                                              "green-context"};

static struct {
  CUresult (*ctx_create)(CUcontext *, unsigned, CUdevice);
  CUresult (*ctx_destroy)(CUcontext);
  CUresult (*ctx_set_current)(CUcontext);
  CUresult (*ctx_get_current)(CUcontext *);
  CUresult (*ctx_pop_current)(CUcontext *);
  CUresult (*ctx_get_id)(CUcontext, unsigned long long *);
  CUresult (*ctx_synchronize)(void);
  CUresult (*device_get)(CUdevice *, int);
  CUresult (*get_error_name)(CUresult, const char **);
} cu;

/* Green contexts (CUDA 12.4), when the driver has them: every one or none. */
#if CUDA_VERSION >= 12040
static struct {
  CUresult (*get_resource)(CUdevice, CUdevResource *, CUdevResourceType);
  CUresult (*split)(CUdevResource *, unsigned *, const CUdevResource *, CUdevResource *, unsigned,
                    unsigned);
  CUresult (*generate_desc)(CUdevResourceDesc *, CUdevResource *, unsigned);
  CUresult (*create)(CUgreenCtx *, CUdevResourceDesc, CUdevice, unsigned);
  CUresult (*to_context)(CUcontext *, CUgreenCtx);
  CUresult (*destroy)(CUgreenCtx);
} green;
#endif

static const char *cu_name(CUresult code) {
  const char *name = NULL;
  return cu.get_error_name != NULL && cu.get_error_name(code, &name) == CUDA_SUCCESS ? name : "?";
}

#define CU_OK(call)                                                       \
  do {                                                                    \
    CUresult code_ = (call);                                              \
    if (code_ != CUDA_SUCCESS) fail_msg("%s: %s", #call, cu_name(code_)); \
  } while (0)

/* The driver's entry points, or a reason in no_device. */
static void load_driver(void) {
  void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  struct {
    const char *name;
    void *slot;
  } calls[] = {
      {"cuCtxCreate_v2", &cu.ctx_create},          {"cuCtxDestroy_v2", &cu.ctx_destroy},
      {"cuCtxSetCurrent", &cu.ctx_set_current},    {"cuCtxGetCurrent", &cu.ctx_get_current},
      {"cuCtxPopCurrent_v2", &cu.ctx_pop_current}, {"cuCtxGetId", &cu.ctx_get_id},
      {"cuCtxSynchronize", &cu.ctx_synchronize},   {"cuDeviceGet", &cu.device_get},
      {"cuGetErrorName", &cu.get_error_name},
  };
  for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
    void *symbol = driver != NULL ? dlsym(driver, calls[i].name) : NULL;
    if (symbol == NULL) {
      snprintf(no_device, sizeof no_device, "the CUDA driver has no %s (%s)", calls[i].name,
               driver != NULL ? "too old" : dlerror());
      return;
    }
    memcpy(calls[i].slot, &symbol, sizeof symbol);
  }
#if CUDA_VERSION >= 12040
  struct {
    const char *name;
    void *slot;
  } green_calls[] = {
      {"cuDeviceGetDevResource", &green.get_resource},
      {"cuDevSmResourceSplitByCount", &green.split},
      {"cuDevResourceGenerateDesc", &green.generate_desc},
      {"cuGreenCtxCreate", &green.create},
      {"cuCtxFromGreenCtx", &green.to_context},
      {"cuGreenCtxDestroy", &green.destroy},
  };
  size_t found = 0;
  for (size_t i = 0; i < sizeof green_calls / sizeof green_calls[0]; i++) {
    void *symbol = dlsym(driver, green_calls[i].name);
    found += symbol != NULL;
    memcpy(green_calls[i].slot, &symbol, sizeof symbol);
  }
  if (found != sizeof green_calls / sizeof green_calls[0]) green.create = NULL;
#endif
}

static unsigned long long context_id(CUcontext context) {
  unsigned long long id = 0;
  CU_OK(cu.ctx_get_id(context, &id));
  return id;
}

static uint64_t events_created(void) {
  dl_sync_pool_stats stats;
  DL_OK(dl_sync_pool_stats_get(GPU_BACKEND(), 0, &stats));
  return stats.created;
}

/* A created context with the runtime's state (kernels loaded) made in it, current. The
 * creation pushes it on the thread's stack of contexts, where cuCtxSetCurrent(NULL) would
 * find it again ("If ctx is NULL, this function pops the current context"): it is popped,
 * and set current instead, so that NULL later means no context. */
static CUcontext context_new(void) {
  CUdevice device;
  CUcontext context = NULL, popped = NULL;
  CU_OK(cu.device_get(&device, 0));
  CU_OK(cu.ctx_create(&context, 0, device));
  CU_OK(cu.ctx_pop_current(&popped));
  CU_OK(cu.ctx_set_current(context));
  CUDA_OK(cudaFree(NULL)); /* the runtime's first call in it */
  return context;
}

/* A producer on stream a of one context, a consumer in another: a buffer both reach,
 * the consumer's counters in its own context, the gate's flags. */
typedef struct pair {
  CUcontext producer, consumer; /* consumer may be the producer's */
  cudaStream_t a, b;            /* b: NULL when the case's consumer uses a default stream */
  int *data;
  unsigned long long *mismatches;
  gpu_flags *flags, *device_flags;
} pair;

static void pair_make(pair *p, CUcontext producer, CUcontext consumer, int consumer_stream) {
  *p = (pair){.producer = producer, .consumer = consumer};
  CU_OK(cu.ctx_set_current(producer));
  CUDA_OK(cudaStreamCreateWithFlags(&p->a, cudaStreamNonBlocking));
  CUDA_OK(cudaHostAlloc((void **)&p->data, COUNT * sizeof(int),
                        cudaHostAllocMapped | cudaHostAllocPortable));
  KERNEL_OK(gpu_flags_create(&p->flags, &p->device_flags));
  gate_register(p->flags, NULL);
  CU_OK(cu.ctx_set_current(consumer));
  if (consumer_stream) CUDA_OK(cudaStreamCreateWithFlags(&p->b, cudaStreamNonBlocking));
  CUDA_OK(cudaMalloc((void **)&p->mismatches, sizeof *p->mismatches));
}

static void pair_synchronize(const pair *p) {
  CU_OK(cu.ctx_set_current(p->producer));
  CU_OK(cu.ctx_synchronize());
  CU_OK(cu.ctx_set_current(p->consumer));
  CU_OK(cu.ctx_synchronize());
}

static void pair_free(pair *p) {
  pair_synchronize(p);
  cudaFree(p->mismatches);
  if (p->b != NULL) cudaStreamDestroy(p->b);
  CU_OK(cu.ctx_set_current(p->producer));
  cudaStreamDestroy(p->a);
  gate_register(NULL, p->flags);
  gpu_flags_destroy(p->flags);
  cudaFreeHost(p->data);
}

static void pair_reset(pair *p) {
  pair_synchronize(p);                        /* current: the consumer's */
  memset(p->data, 0xff, COUNT * sizeof(int)); /* GPU_STALE */
  CUDA_OK(cudaMemset(p->mismatches, 0, sizeof *p->mismatches));
  CUDA_OK(cudaDeviceSynchronize());
  p->flags->signalled = 0;
  flag_set(&p->flags->open, 0);
}

static verdict pair_release(pair *p, int ordered) {
  verdict v = {0};
  v.raced = seen_within(&p->flags->signalled, ordered ? RACE_WINDOW_NS : RUNS_SOON_NS);
  flag_set(&p->flags->open, 1);
  pair_synchronize(p);
  v.error = cudaMemcpy(&v.mismatches, p->mismatches, sizeof v.mismatches, cudaMemcpyDeviceToHost);
  v.gate_timeouts = p->flags->gate_timeouts;
  return v;
}

/* One case: where the dlsync call runs from (caller: the context current for it, NULL for
 * none) and what it is; the consumer's stream (b, or a default stream of its context). */
enum { CALLER_NONE, CALLER_CONSUMER, CALLER_PRODUCER };
typedef struct context_case {
  const char *what;
  int consumer_stream; /* 0: the consumer's default stream (below) */
  cudaStream_t default_stream;
  void (*order)(const pair *p); /* the dlsync calls under test */
  int caller;                   /* CALLER_*: whose context is current for the call */
} context_case;

static void order_by_stream_argument(const pair *p) {
  dl_sync_stream_arg arg;
  DL_OK(dl_sync_stream_to_arg(on(p->b), &arg));
  DL_OK(dl_sync_export(on(p->a), arg));
}

static void order_by_push_dep(const pair *p) {
  DL_OK(dl_sync_push_dep(on(p->a), on(p->b)));
}

static void order_to_legacy_stream(const pair *p) {
  DL_OK(dl_sync_export(on(p->a), dl_sync_stream_arg_none()));
}

static void order_to_per_thread_stream(const pair *p) {
  DL_OK(dl_sync_export(on(p->a), dl_sync_stream_arg_int(2)));
}

static void run_case(const context_case *c, pair *p, int ordered, int seed) {
  pair_reset(p);
  CU_OK(cu.ctx_set_current(p->producer));
  KERNEL_OK(gpu_gate(p->a, p->device_flags));
  KERNEL_OK(gpu_produce(p->a, p->data, COUNT, seed, NULL));
  if (ordered) {
    CUcontext caller = c->caller == CALLER_CONSUMER   ? p->consumer
                       : c->caller == CALLER_PRODUCER ? p->producer
                                                      : NULL;
    CUcontext current = NULL;
    CU_OK(cu.ctx_set_current(caller));
    CU_OK(cu.ctx_get_current(&current));
    if (current != caller)
      fail_msg("%s: context %p current for the call, not %p", c->what, (void *)current,
               (void *)caller);
    c->order(p);
  }
  CU_OK(cu.ctx_set_current(p->consumer));
  cudaStream_t consumer = c->consumer_stream ? p->b : c->default_stream;
  KERNEL_OK(gpu_check(consumer, p->data, COUNT, seed, NULL, p->mismatches));
  KERNEL_OK(gpu_signal(consumer, p->device_flags));
  judge(c->what, ordered, pair_release(p, ordered));
}

/* The case from producer to consumer: controls, then ordered runs of which the first
 * meets the producer context's pool cold (dlsync has made no event in it). */
static void run_case_between(const context_case *c, CUcontext producer, CUcontext consumer) {
  pair p;
  pair_make(&p, producer, consumer, c->consumer_stream);
  for (int run = 0; run < CONTROL_GATED; run++) run_case(c, &p, 0, run);
  uint64_t before = events_created();
  run_case(c, &p, 1, 10);
  uint64_t cold = events_created() - before;
  if (cold == 0) fail_msg("%s: the first ordered run in a new context made no event", c->what);
  for (int run = 1; run < ORDERED_GATED; run++) run_case(c, &p, 1, 10 + run);
  uint64_t warm = events_created() - before - cold;
  print_message("%s: events made by the cold run %llu, by %d warm runs %llu\n", c->what,
                (unsigned long long)cold, ORDERED_GATED - 1, (unsigned long long)warm);
  pair_free(&p);
}

/* Cases between contexts x and y: cases[i] from x to y when i is even, from y to x when
 * odd. */
static void run_cases_in(const context_case *cases, size_t count, CUcontext x, CUcontext y) {
  for (size_t i = 0; i < count; i++) run_case_between(&cases[i], i % 2 ? y : x, i % 2 ? x : y);
}

/* The same between two contexts made for them. */
static void run_cases(const context_case *cases, size_t count) {
  CUcontext x = context_new();
  CUcontext y = context_new();
  run_cases_in(cases, count, x, y);
  DL_OK(dl_sync_shutdown()); /* before destroying contexts dlsync used (dl_sync_shutdown) */
  CU_OK(cu.ctx_set_current(NULL));
  CU_OK(cu.ctx_destroy(y));
  CU_OK(cu.ctx_destroy(x));
}

static void test_streams_of_two_created_contexts_both_ways(void **state) {
  (void)state;
  skip_without_device();
  suite_set_mode(MODE_CREATED_CONTEXTS);
  const context_case cases[] = {
      {"context x to context y (stream argument, no context current)", 1, NULL,
       order_by_stream_argument, CALLER_NONE},
      {"context y to context x (push_dep, the consumer's context current)", 1, NULL,
       order_by_push_dep, CALLER_CONSUMER},
  };
  run_cases(cases, sizeof cases / sizeof cases[0]);
}

/* stream=None and stream=2 while a created context of the device is current: the default
 * streams are that context's (the caller's), not the primary context's. */
static void test_default_streams_named_while_another_context_is_current(void **state) {
  (void)state;
  skip_without_device();
  suite_set_mode(MODE_DEFAULT_STREAM_OTHER_CONTEXT);
  const context_case cases[] = {
      {"legacy default stream of the current created context (stream=None)", 0, cudaStreamLegacy,
       order_to_legacy_stream, CALLER_CONSUMER},
      {"per-thread default stream of the current created context (stream=2)", 0,
       cudaStreamPerThread, order_to_per_thread_stream, CALLER_CONSUMER},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_cases(&cases[i], 1);
}

static void count_deletion(DLManagedTensorVersioned *t) {
  (*(int *)t->manager_ctx)++;
}

/* The primary context: an exchange, the runtime's reset of it (cudaDeviceReset), the
 * runtime retaining it again, the same exchange. dlsync keys its pools by cuCtxGetId,
 * which must change at the reset: the events of before are gone with it. */
static void primary_exchanges(const char *what, int *first_ordered_made) {
  world w;
  if (world_make(&w) != 0) fail_msg("%s: could not set up streams and buffers", what);
  for (int run = 0; run < CONTROL_GATED + ORDERED_GATED; run++) {
    int ordered = run >= CONTROL_GATED;
    int legacy = run % 2; /* both an explicit consumer stream and stream=None */
    cudaStream_t consumer = legacy ? cudaStreamLegacy : w.b;
    CUDA_OK(world_reset(&w, 0));
    KERNEL_OK(gpu_gate(w.a, w.device_flags));
    KERNEL_OK(gpu_produce(w.a, w.data, COUNT, run, NULL));
    uint64_t before = events_created();
    if (ordered && legacy) DL_OK(dl_sync_export(on(w.a), dl_sync_stream_arg_none()));
    if (ordered && !legacy) DL_OK(dl_sync_push_dep(on(w.a), on(w.b)));
    if (ordered && run == CONTROL_GATED) *first_ordered_made = events_created() > before;
    KERNEL_OK(gpu_check(consumer, w.data, COUNT, run, NULL, w.mismatches));
    KERNEL_OK(gpu_signal(consumer, w.device_flags));
    judge(what, ordered, world_release(&w, ordered));
  }
  world_free(&w);
}

static void test_a_reset_primary_context_is_used_again(void **state) {
  (void)state;
  skip_without_device();
  suite_set_mode(MODE_RESET);
  CUDA_OK(cudaSetDevice(0));
  CUDA_OK(cudaFree(NULL));
  CUcontext primary = NULL;
  CU_OK(cu.ctx_get_current(&primary));
  int made = 0;
  primary_exchanges("primary context before its reset", &made);
  unsigned long long before = context_id(primary);
  if (gates_registered() != 0)
    fail_msg("a gate of an earlier test is still registered: the reset would free it");
  /* A release pending across the reset: its event goes with the context. It is given up
     (never asked about on a dead event, its deleter never run), and shutdown says so. */
  cudaStream_t pending_on;
  CUDA_OK(cudaStreamCreateWithFlags(&pending_on, cudaStreamNonBlocking));
  int pending_deleted = 0;
  DLManagedTensorVersioned pending = {
      .version = {1, 3}, .manager_ctx = &pending_deleted, .deleter = count_deletion};
  pending.dl_tensor.device = (DLDevice){GPU_DEVICE_TYPE, 0};
  int how = dl_sync_tensor_release(&pending, on(pending_on));
  if (how != DL_SYNC_RELEASE_DEFERRED)
    fail_msg("a release before the reset answered %d (%s), expected DL_SYNC_RELEASE_DEFERRED", how,
             how < 0 ? dl_sync_last_error() : "");
  CUDA_OK(cudaDeviceReset());
  CUDA_OK(cudaFree(NULL)); /* the runtime retains the primary context again */
  CUcontext again = NULL;
  CU_OK(cu.ctx_get_current(&again));
  unsigned long long after = context_id(again);
  print_message("primary context %p, Id %llu; after its reset %p, Id %llu\n", (void *)primary,
                before, (void *)again, after);
  if (after == before)
    fail_msg(
        "the reset primary context kept its Id %llu: dlsync's pools, keyed by it, would "
        "hand out the events the reset destroyed",
        before);
  int ran = dl_sync_release_poll();
  if (ran != 0 || pending_deleted != 0)
    fail_msg("the release pending across the reset ran its deleter (%d ran)", ran);
  primary_exchanges("primary context after its reset", &made);
  if (!made) fail_msg("after the reset, dlsync made no event: it used one of before the reset");
  /* forgets the pool of the Id gone, destroys none of its events; reports the release */
  int status = dl_sync_shutdown();
  char message[256];
  snprintf(message, sizeof message, "%s", dl_sync_last_error());
  if (status != DL_SYNC_EBACKEND || strstr(message, "1 releases could not be finished") == NULL)
    fail_msg("dl_sync_shutdown after a reset with a release pending: %d (%s)", status, message);
  print_message("the release pending across the reset: %s\n", message);
  DL_OK(dl_sync_shutdown());
}

/* Captured on b in a context dlsync has not used: a is forked into the capture (an event
 * of the test's own: dlsync refuses to order a capturing stream before one that does not
 * capture), the producer writes on a, and dlsync joins a back into b before the consumer
 * reads (the control joins only after it): dlsync's first event in the context is made
 * while the capture runs. The capture is always ended, so that a failure leaves none. */
static cudaGraphExec_t capture_in_cold_context(world *w, cudaEvent_t fork, int ordered,
                                               uint64_t *made) {
  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec = NULL;
  uint64_t before = events_created();
  char failed[160] = "";
  CUDA_OK(cudaStreamBeginCapture(w->b, cudaStreamCaptureModeGlobal));
  int e = cudaEventRecord(fork, w->b);
  if (e == 0) e = cudaStreamWaitEvent(w->a, fork, 0);
  if (e == 0) e = gpu_gate(w->a, w->device_flags);
  if (e == 0) e = gpu_produce(w->a, w->data, COUNT, 7, NULL);
  if (e != 0)
    snprintf(failed, sizeof failed, "the fork and the producer: %s",
             cudaGetErrorName((cudaError_t)e));
  if (!failed[0] && ordered && dl_sync_push_dep(on(w->a), on(w->b)) != DL_SYNC_OK)
    snprintf(failed, sizeof failed, "dl_sync_push_dep(a, b): %s", dl_sync_last_error());
  if (!failed[0] && ((e = gpu_check(w->b, w->data, COUNT, 7, NULL, w->mismatches)) != 0 ||
                     (e = gpu_signal(w->b, w->device_flags)) != 0))
    snprintf(failed, sizeof failed, "the consumer: %s", cudaGetErrorName((cudaError_t)e));
  if (!failed[0] && !ordered && dl_sync_push_dep(on(w->a), on(w->b)) != DL_SYNC_OK)
    snprintf(failed, sizeof failed, "dl_sync_push_dep(a, b) after the consumer: %s",
             dl_sync_last_error());
  cudaError_t ended = cudaStreamEndCapture(w->b, &graph);
  if (failed[0]) {
    if (graph != NULL) cudaGraphDestroy(graph);
    fail_msg("capture in a cold context: %s", failed);
  }
  CUDA_OK(ended);
  *made = events_created() - before;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_OK(cudaGraphDestroy(graph));
  return exec;
}

static void test_a_cold_contexts_producer_joins_a_capture(void **state) {
  (void)state;
  skip_without_device();
  suite_set_mode(MODE_CAPTURE_COLD_CONTEXT);
  CUcontext context = context_new();
  world w;
  cudaStream_t launcher;
  cudaEvent_t fork;
  if (world_make(&w) != 0) fail_msg("could not set up streams and buffers");
  CUDA_OK(cudaStreamCreateWithFlags(&launcher, cudaStreamNonBlocking));
  CUDA_OK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  uint64_t cold = 0, warm = 0;
  cudaGraphExec_t ordered_exec = capture_in_cold_context(&w, fork, 1, &cold);
  cudaGraphExec_t control_exec = capture_in_cold_context(&w, fork, 0, &warm);
  if (cold == 0) fail_msg("the capture in a new context made no event");
  for (int run = 0; run < CONTROL_GATED + ORDERED_GATED; run++) {
    int ordered = run >= CONTROL_GATED;
    CUDA_OK(world_reset(&w, 0));
    CUDA_OK(cudaGraphLaunch(ordered ? ordered_exec : control_exec, launcher));
    judge("capture in a cold context", ordered, world_release(&w, ordered));
  }
  CUDA_OK(cudaGraphExecDestroy(ordered_exec));
  CUDA_OK(cudaGraphExecDestroy(control_exec));
  cudaEventDestroy(fork);
  cudaStreamDestroy(launcher);
  world_free(&w);
  DL_OK(dl_sync_shutdown()); /* before destroying a context dlsync used */
  CU_OK(cu.ctx_set_current(NULL));
  CU_OK(cu.ctx_destroy(context));
}

/* Another thread captures in global mode, during which this thread waits for a tensor's
 * event: dl_sync_tensor_synchronize (the relaxed mode around its query and wait) must leave
 * the capture valid. The control makes the runtime's own calls, cudaEventQuery and
 * cudaEventSynchronize, in this thread's global mode: potentially unsafe calls while
 * another thread captures in global mode ("this thread is prohibited from potentially
 * unsafe API calls"), which break the capture or are refused. Every run is recorded and
 * judged once the other thread is joined, so that a failure strands no thread. */
enum { SYNCHRONIZE_RUNS = CONTROL_GATED + ORDERED_GATED };

typedef struct capturer {
  pthread_barrier_t barrier;
  int *data;
  cudaError_t ended[SYNCHRONIZE_RUNS]; /* cudaStreamEndCapture's result, per run */
} capturer;

static void *capture_across(void *arg) {
  capturer *c = arg;
  cudaStream_t s = NULL;
  cudaError_t error = cudaSetDevice(0);
  if (error == cudaSuccess) error = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  for (int run = 0; run < SYNCHRONIZE_RUNS; run++) {
    cudaGraph_t graph = NULL;
    pthread_barrier_wait(&c->barrier); /* the other thread's tensor is ready */
    cudaError_t begun =
        error == cudaSuccess ? cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) : error;
    pthread_barrier_wait(&c->barrier); /* capturing */
    pthread_barrier_wait(&c->barrier); /* the other thread waited */
    if (begun == cudaSuccess) gpu_produce(s, c->data, COUNT, run, NULL);
    c->ended[run] = begun == cudaSuccess ? cudaStreamEndCapture(s, &graph) : begun;
    if (graph != NULL) cudaGraphDestroy(graph);
    cudaGetLastError();
    pthread_barrier_wait(&c->barrier); /* ended */
  }
  if (s != NULL) cudaStreamDestroy(s);
  return NULL;
}

static void tensor_deleter(DLManagedTensorVersioned *t) {
  (void)t;
}

static int capture_mode_release_poll; /* the run waits through a pending release instead */

/* This thread's side of one run, between the barriers; never fails (the other thread waits
 * at each barrier): what went wrong is written to how. Returns whether the wait did. */
static int wait_beside_capture(capturer *c, world *w, cudaEvent_t raw, int run, char *how,
                               size_t size) {
  int ordered = run >= CONTROL_GATED;
  DLManagedTensorVersioned tensor = {.version = {1, 3}, .deleter = tensor_deleter};
  tensor.dl_tensor = (DLTensor){.data = w->data, .device = {GPU_DEVICE_TYPE, 0}, .ndim = 1};
  int deleted = 0;
  DLManagedTensorVersioned released = {
      .version = {1, 3}, .manager_ctx = &deleted, .deleter = count_deletion};
  released.dl_tensor.device = (DLDevice){GPU_DEVICE_TYPE, 0};
  int ready = gpu_produce(w->a, w->data, COUNT, run, NULL) == 0 &&
              dl_sync_tensor_record(&tensor, on(w->a)) == DL_SYNC_OK &&
              cudaEventRecord(raw, w->a) == cudaSuccess &&
              (!capture_mode_release_poll || !ordered ||
               dl_sync_tensor_release(&released, on(w->a)) == DL_SYNC_RELEASE_DEFERRED) &&
              cudaStreamSynchronize(w->a) == cudaSuccess;
  pthread_barrier_wait(&c->barrier); /* ready */
  pthread_barrier_wait(&c->barrier); /* the other thread captures */
  cudaError_t query = cudaSuccess, wait = cudaSuccess;
  int status = DL_SYNC_OK;
  if (ordered && capture_mode_release_poll) {
    status = dl_sync_release_poll() == 1 && deleted == 1 ? DL_SYNC_OK : DL_SYNC_EBACKEND;
  } else if (ordered) {
    status = dl_sync_tensor_synchronize(&tensor);
  } else {
    query = cudaEventQuery(raw);
    wait = cudaEventSynchronize(raw);
  }
  cudaGetLastError();
  pthread_barrier_wait(&c->barrier);
  pthread_barrier_wait(&c->barrier); /* it ended its capture */
  tensor.deleter(&tensor);
  int waited = ready && status == DL_SYNC_OK && query == cudaSuccess && wait == cudaSuccess;
  if (ordered)
    snprintf(how, size, "%s; %s: %s; the capture ended with %s",
             ready ? "ready" : "the tensor could not be made ready",
             capture_mode_release_poll ? "dl_sync_release_poll running the done release"
                                       : "dl_sync_tensor_synchronize",
             status == DL_SYNC_OK ? "ok" : dl_sync_last_error(), cudaGetErrorName(c->ended[run]));
  else
    snprintf(how, size, "cudaEventQuery: %s, cudaEventSynchronize: %s; the capture ended with %s",
             cudaGetErrorName(query), cudaGetErrorName(wait), cudaGetErrorName(c->ended[run]));
  return waited;
}

static void capture_survives(void) {
  static world w;
  static capturer c;
  cudaEvent_t raw;
  if (world_make(&w) != 0) fail_msg("could not set up streams and buffers");
  CUDA_OK(cudaEventCreateWithFlags(&raw, cudaEventDisableTiming));
  CUDA_OK(world_reset(&w, 1));
  memset(&c, 0, sizeof c);
  c.data = w.data;
  pthread_barrier_init(&c.barrier, NULL, 2);
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, capture_across, &c), 0);
  int waited[SYNCHRONIZE_RUNS];
  char how[SYNCHRONIZE_RUNS][256];
  for (int run = 0; run < SYNCHRONIZE_RUNS; run++)
    waited[run] = wait_beside_capture(&c, &w, raw, run, how[run], sizeof how[run]);
  pthread_join(thread, NULL);
  pthread_barrier_destroy(&c.barrier);
  cudaEventDestroy(raw);
  world_free(&w);
  for (int run = 0; run < SYNCHRONIZE_RUNS; run++) {
    int ordered = run >= CONTROL_GATED;
    print_message("run %d (%s): %s\n", run, ordered ? "dlsync" : "control", how[run]);
    judge_outcome(capture_mode_release_poll
                      ? "a release poll beside another thread's global capture"
                      : "a wait beside another thread's global capture",
                  ordered, !waited[run] || c.ended[run] != cudaSuccess, how[run]);
  }
}

static void test_another_threads_capture_survives_tensor_synchronize(void **state) {
  (void)state;
  skip_without_device();
  suite_set_mode(MODE_CAPTURE_SURVIVES_SYNCHRONIZE);
  capture_mode_release_poll = 0;
  capture_survives();
}

/* The same with a release pending and done: dl_sync_release_poll asks about its event in
   the relaxed mode and runs its deleter, and the other thread's capture survives. */
static void test_another_threads_capture_survives_a_release_poll(void **state) {
  (void)state;
  skip_without_device();
  suite_set_mode(MODE_CAPTURE_SURVIVES_RELEASE_POLL);
  capture_mode_release_poll = 1;
  capture_survives();
  capture_mode_release_poll = 0;
}

/* A producer in the primary context names its legacy default stream as the reuse stream
   (as a framework does for default-stream tensors); the consumer reads on b behind the
   gate and releases from a thread whose current context is another of the device (a
   created one). cuda.h: "Specifying any of the special handles will return the context
   current to the calling thread": only the producer's context, kept in the owner record,
   names the stream the producer meant. The producer then reuses the block on its legacy
   stream (its pool's next allocation there), with the primary context current. Ordered,
   that write waits for b's read (held by the gate); the control releases with the plain
   deleter, and the write lands while b still waits to read. */
static void release_legacy_run(world *w, CUcontext other, int ordered, int seed) {
  const char *what = "legacy reuse stream released with another context current";
  CUcontext primary = NULL;
  CU_OK(cu.ctx_get_current(&primary));
  CUDA_OK(world_reset(w, 0));
  KERNEL_OK(gpu_produce(w->a, w->data, COUNT, seed, NULL));
  int deleted = 0;
  DLManagedTensorVersioned tensor = {
      .version = {1, 3}, .manager_ctx = &deleted, .deleter = count_deletion};
  tensor.dl_tensor = (DLTensor){.data = w->data, .device = {GPU_DEVICE_TYPE, 0}, .ndim = 1};
  DL_OK(dl_sync_tensor_record_reuse(&tensor, on(w->a), on(cudaStreamLegacy)));
  DL_OK(dl_sync_tensor_wait(&tensor, on(w->b))); /* the write before the read: not tested */
  KERNEL_OK(gpu_gate(w->b, w->device_flags));
  KERNEL_OK(gpu_check(w->b, w->data, COUNT, seed, NULL, w->mismatches));
  if (ordered) {
    CU_OK(cu.ctx_set_current(other));
    int how = dl_sync_tensor_release(&tensor, on(w->b));
    char why[256];
    snprintf(why, sizeof why, "%s", how < 0 ? dl_sync_last_error() : "");
    CU_OK(cu.ctx_set_current(primary));
    if (how != DL_SYNC_RELEASED_ORDERED) {
      flag_set(&w->flags->open, 1);
      if (how < 0) tensor.deleter(&tensor);
      fail_msg("%s: dl_sync_tensor_release answered %d, expected DL_SYNC_RELEASED_ORDERED (%s)",
               what, how, why);
    }
  } else {
    tensor.deleter(&tensor);
  }
  if (deleted != 1) fail_msg("%s: the deleter ran %d times", what, deleted);
  /* the producer's reuse of the block, on its legacy stream, in its own context */
  KERNEL_OK(gpu_produce(cudaStreamLegacy, w->data, COUNT, seed + 1000, NULL));
  KERNEL_OK(gpu_signal(cudaStreamLegacy, w->device_flags));
  judge(what, ordered, world_release(w, ordered));
}

static void test_a_legacy_reuse_stream_is_the_producers_context(void **state) {
  (void)state;
  skip_without_device();
  suite_set_mode(MODE_RELEASE_LEGACY_OTHER_CONTEXT);
  CUDA_OK(cudaSetDevice(0));
  CUDA_OK(cudaFree(NULL));
  CUcontext primary = NULL;
  CU_OK(cu.ctx_get_current(&primary));
  CUcontext other = context_new();
  CU_OK(cu.ctx_set_current(primary));
  world w;
  if (world_make(&w) != 0) fail_msg("could not set up streams and buffers");
  for (int run = 0; run < CONTROL_GATED + ORDERED_GATED; run++)
    release_legacy_run(&w, other, run >= CONTROL_GATED, 40 + run);
  world_free(&w);
  DL_OK(dl_sync_shutdown()); /* before destroying a context dlsync used */
  CU_OK(cu.ctx_set_current(NULL));
  CU_OK(cu.ctx_destroy(other));
  CU_OK(cu.ctx_set_current(primary));
}

/* A green context of device 0 on part of its SMs and the primary context, a stream of
 * each, exchanged both ways, each case with the call made where cuda.h lets it be made: a
 * green context "can be current to only one thread at a time", and dlsync makes its pool's
 * events only with it current, so the green producer's export runs with the green context
 * current (the framework thread that owns it); the primary producer's with the green
 * consumer current; and stream=None under the green context is its legacy stream, the
 * PyTorch pattern (cuStreamGetCtx: the special handles name "the context current to the
 * calling thread"). The streams are the runtime's, made with the converted context current
 * (cuStreamGetGreenCtx: a stream made while "the context that was active in the calling
 * thread was obtained with cuCtxFromGreenCtx" is the green context's). */
static void test_a_green_contexts_stream_exchanges_with_the_primary_both_ways(void **state) {
  (void)state;
  skip_without_device();
  suite_set_mode(MODE_GREEN_CONTEXT);
#if CUDA_VERSION < 12040
  skip_mode("built with a CUDA toolkit older than 12.4, which has no green contexts");
#else
  if (green.create == NULL)
    skip_mode("the CUDA driver has no green contexts (cuGreenCtxCreate came with CUDA 12.4)");
  DL_OK(dl_sync_shutdown()); /* every case's first ordered run meets a cold pool */
  CUDA_OK(cudaSetDevice(0));
  CUDA_OK(cudaFree(NULL)); /* the primary context, retained by the runtime */
  CUcontext primary = NULL;
  CU_OK(cu.ctx_get_current(&primary));
  CUdevice device;
  CU_OK(cu.device_get(&device, 0));
  /* cuda.h's steps: the device's SMs, split ("Splits CU_DEV_RESOURCE_TYPE_SM resources into
     nbGroups, adhering to the minimum SM count specified in minCount"), a descriptor of one
     group, the green context ("CU_GREEN_CTX_DEFAULT_STREAM is required") */
  CUdevResource sms, group;
  unsigned groups = 1;
  CU_OK(green.get_resource(device, &sms, CU_DEV_RESOURCE_TYPE_SM));
  CU_OK(green.split(&group, &groups, &sms, NULL, 0, sms.sm.smCount / 2));
  if (groups != 1) fail_msg("cuDevSmResourceSplitByCount made %u groups of half the SMs", groups);
  CUdevResourceDesc desc = NULL;
  CU_OK(green.generate_desc(&desc, &group, 1));
  CUgreenCtx made = NULL;
  CU_OK(green.create(&made, desc, device, CU_GREEN_CTX_DEFAULT_STREAM));
  CUcontext converted = NULL;
  CU_OK(green.to_context(&converted, made));
  print_message("green context of %u of %u SMs, converted context %p (Id %llu), primary %p\n",
                group.sm.smCount, sms.sm.smCount, (void *)converted, context_id(converted),
                (void *)primary);
  CU_OK(cu.ctx_set_current(converted));
  CUDA_OK(cudaFree(NULL)); /* the runtime's first call in it */
  const context_case cases[] = {
      {"green context to the primary context (stream argument, the green context current)", 1, NULL,
       order_by_stream_argument, CALLER_PRODUCER},
      {"primary context to the green context (push_dep, the green context current)", 1, NULL,
       order_by_push_dep, CALLER_CONSUMER},
  };
  run_cases_in(cases, 2, converted, primary);
  DL_OK(dl_sync_shutdown()); /* the primary context's pool cold again */
  const context_case legacy = {
      "primary context to the green context's legacy stream (stream=None, the green context "
      "current)",
      0, cudaStreamLegacy, order_to_legacy_stream, CALLER_CONSUMER};
  run_case_between(&legacy, primary, converted);
  DL_OK(dl_sync_shutdown()); /* before destroying a context dlsync used */
  CU_OK(cu.ctx_set_current(primary));
  CU_OK(green.destroy(made));
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_streams_of_two_created_contexts_both_ways, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_default_streams_named_while_another_context_is_current,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_a_cold_contexts_producer_joins_a_capture, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_another_threads_capture_survives_tensor_synchronize,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(test_another_threads_capture_survives_a_release_poll, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_a_legacy_reuse_stream_is_the_producers_context, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(
          test_a_green_contexts_stream_exchanges_with_the_primary_both_ways, setup, teardown),
      /* last: it ends with dl_sync_shutdown */
      cmocka_unit_test_setup_teardown(test_a_reset_primary_context_is_used_again, setup, teardown),
  };
  return suite_run("gpu_contexts", mode_names, MODES, tests, sizeof tests / sizeof tests[0],
                   load_driver);
}
