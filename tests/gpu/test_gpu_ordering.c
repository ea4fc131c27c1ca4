/* SPDX-License-Identifier: Apache-2.0 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, nanosleep, pthread_barrier */
/*
 * The ordering rules on a real CUDA or ROCm device (see gpu_runtime.h), with kernels and
 * deterministic negative controls.
 *
 * Every ordering scenario runs gated: a gate kernel holds the producer's stream on a
 * host-mapped flag until the host has enqueued the consumer and then given the consumer a
 * window to run. A consumer that is not ordered after the producer therefore always reads
 * the stale buffer and signals the host while the gate is still closed (a control run:
 * it must observe the race every time); an ordered consumer never can (an ordered run:
 * no signal while closed, no wrong value). The gate gives up after a bounded spin, so a
 * broken gate fails the suite instead of hanging it.
 *
 * Built twice per runtime: with the legacy default stream, and with kernels built by nvcc
 * --default-stream per-thread (hipcc -fgpu-default-stream=per-thread) and this file compiled
 * with CUDA_API_PER_THREAD_DEFAULT_STREAM (GPU_PER_THREAD_BUILD), where stream 0 is the
 * calling thread's default stream and is passed to dlsync as a user of that build would:
 * dl_sync_stream_view(device, 0).
 * Without a device every test is skipped with the runtime's reason (exit 77).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "gpu_suite.h"

enum {
  GRAPH_GATED = 3,    /* gated replays per graph */
  GRAPH_UNGATED = 40, /* replays with the gate left open */
  CAPTURE_THREADS = 2 /* threads capturing concurrently, per capture mode */
};

/* The modes: every scenario, each capture mode, threads. */
typedef enum suite_mode {
  MODE_STREAM_ARGUMENT,
  MODE_N0,
  MODE_N1,
  MODE_LEGACY_STREAM,
  MODE_PER_THREAD_STREAM,
  MODE_STREAM_ZERO,
  MODE_TWO_DEVICES,
  MODE_CAPTURE_GLOBAL,
  MODE_CAPTURE_THREAD_LOCAL,
  MODE_CAPTURE_RELAXED,
  MODE_EXTERNAL_WAIT,
  MODE_THREADS,
  MODES
} suite_mode;
static const char *const mode_names[MODES] = {"stream-argument",
                                              "n0",
                                              "n1",
                                              "legacy-stream",
                                              "per-thread-stream",
                                              "stream-0",
                                              "two-devices",
                                              "capture-global",
                                              "capture-thread-local",
                                              "capture-relaxed",
                                              "external-wait",
                                              "threads"};

/* An exchange: the producer writes on w->a after the gate, the consumer reads and signals.
 * With ordered == 0 the scenario leaves out exactly the dlsync calls it tests. */
typedef void (*exchange_fn)(world *w, int ordered, int seed);

static void run_exchange(const char *what, exchange_fn exchange) {
  world w;
  if (world_make(&w) != 0) fail_msg("%s: could not set up streams and buffers", what);
  for (int run = 0; run < CONTROL_GATED + ORDERED_GATED; run++) {
    int ordered = run >= CONTROL_GATED;
    CUDA_OK(world_reset(&w, 0));
    KERNEL_OK(gpu_gate(w.a, w.device_flags));
    exchange(&w, ordered, run);
    judge(what, ordered, world_release(&w, ordered));
  }
  CUDA_OK(world_reset(&w, 1));
  for (int run = 0; run < UNGATED; run++) {
    exchange(&w, 1, 100 + run);
    CUDA_OK(cudaDeviceSynchronize()); /* the next producer must not overwrite a read */
  }
  unsigned long long mismatches = 0;
  CUDA_OK(cudaMemcpy(&mismatches, w.mismatches, sizeof mismatches, cudaMemcpyDeviceToHost));
  world_free(&w);
  if (mismatches != 0)
    fail_msg("%s: %llu wrong values in %d ungated runs", what, mismatches, UNGATED);
  count_ordered(UNGATED);
}

static void consume(world *w, cudaStream_t consumer, int seed) {
  KERNEL_OK(gpu_check(consumer, w->data, COUNT, seed, NULL, w->mismatches));
  KERNEL_OK(gpu_signal(consumer, w->device_flags));
}

/* Stream argument: the consumer passes its stream to the producer's __dlpack__. */
static void exchange_stream_argument(world *w, int ordered, int seed) {
  KERNEL_OK(gpu_produce(w->a, w->data, COUNT, seed, NULL));
  if (ordered) {
    dl_sync_stream_arg arg;
    DL_OK(dl_sync_stream_to_arg(on(w->b), &arg));
    DL_OK(dl_sync_export(on(w->a), arg));
  }
  consume(w, w->b, seed);
}

/* N0: the consumer asks the producer's exchange table for its current work stream and
 * runs there; the control runs on its own stream instead. */
static _Thread_local cudaStream_t producer_current_stream;
static int current_work_stream(DLDeviceType type, int32_t id, void **out) {
  (void)type;
  (void)id;
  *out = producer_current_stream;
  return 0;
}

static void exchange_n0(world *w, int ordered, int seed) {
  KERNEL_OK(gpu_produce(w->a, w->data, COUNT, seed, NULL));
  cudaStream_t consumer = w->b;
  if (ordered) {
    producer_current_stream = w->a;
    DLPackExchangeAPI api = {.header = {{1, 3}, NULL}, .current_work_stream = current_work_stream};
    dl_sync_stream stream;
    DL_OK(dl_sync_stream_from_exchange_api(&api, (DLDevice){GPU_DEVICE_TYPE, 0}, &stream));
    consumer = (cudaStream_t)stream.handle;
  }
  consume(w, consumer, seed);
}

/* N1: an event carried by the tensor, recorded at export, waited on by the consumer. */
static void tensor_deleter(DLManagedTensorVersioned *t) {
  (void)t;
}

static void exchange_n1(world *w, int ordered, int seed) {
  DLManagedTensorVersioned tensor = {.version = {1, 3}, .deleter = tensor_deleter};
  tensor.dl_tensor = (DLTensor){.data = w->data, .device = {GPU_DEVICE_TYPE, 0}, .ndim = 1};
  KERNEL_OK(gpu_produce(w->a, w->data, COUNT, seed, NULL));
  if (ordered) {
    DL_OK(dl_sync_tensor_record(&tensor, on(w->a)));
    DL_OK(dl_sync_tensor_wait(&tensor, on(w->b)));
  }
  consume(w, w->b, seed);
  tensor.deleter(&tensor);
}

/* stream=None: the legacy default stream (ROCm: the null stream). */
static void exchange_legacy_consumer(world *w, int ordered, int seed) {
  KERNEL_OK(gpu_produce(w->a, w->data, COUNT, seed, NULL));
  if (ordered) DL_OK(dl_sync_export(on(w->a), dl_sync_stream_arg_none()));
  consume(w, cudaStreamLegacy, seed);
}

/* stream=2: the calling thread's per-thread default stream. ROCm has no stream argument for
 * it, so there the consumer names it to dlsync directly. */
static void exchange_per_thread_consumer(world *w, int ordered, int seed) {
  KERNEL_OK(gpu_produce(w->a, w->data, COUNT, seed, NULL));
#ifdef DL_SYNC_TEST_HIP
  if (ordered) DL_OK(dl_sync_push_dep(on(w->a), on(cudaStreamPerThread)));
#else
  if (ordered) DL_OK(dl_sync_export(on(w->a), dl_sync_stream_arg_int(2)));
#endif
  consume(w, cudaStreamPerThread, seed);
}

/* Handle 0, what this build calls its default stream, given to dl_sync_stream_view. */
static void exchange_stream_zero_consumer(world *w, int ordered, int seed) {
  KERNEL_OK(gpu_produce(w->a, w->data, COUNT, seed, NULL));
  if (ordered) DL_OK(dl_sync_push_dep(on(w->a), on(0)));
  consume(w, 0, seed);
}

static void test_stream_argument(void **state) {
  (void)state;
  skip_without_device();
  suite_set_mode(MODE_STREAM_ARGUMENT);
  run_exchange("stream argument", exchange_stream_argument);
}

static void test_n0_current_work_stream(void **state) {
  (void)state;
  skip_without_device();
  suite_set_mode(MODE_N0);
  run_exchange("N0 (producer's current work stream)", exchange_n0);
}

static void test_n1_per_tensor_event(void **state) {
  (void)state;
  skip_without_device();
  suite_set_mode(MODE_N1);
  run_exchange("N1 (per-tensor event)", exchange_n1);
}

static void test_legacy_default_stream_consumer(void **state) {
  (void)state;
  skip_without_device();
  suite_set_mode(MODE_LEGACY_STREAM);
#if defined(DL_SYNC_TEST_HIP) && defined(GPU_PER_THREAD_BUILD)
  skip_mode("a HIP per-thread build has no handle for the null stream");
#endif
  run_exchange("legacy default stream consumer (stream=None)", exchange_legacy_consumer);
}

static void test_per_thread_default_stream_consumer(void **state) {
  (void)state;
  skip_without_device();
  suite_set_mode(MODE_PER_THREAD_STREAM);
  run_exchange("per-thread default stream consumer (stream=2)", exchange_per_thread_consumer);
}

static void test_stream_zero_consumer(void **state) {
  (void)state;
  skip_without_device();
  suite_set_mode(MODE_STREAM_ZERO);
  run_exchange("stream 0 consumer (" DL_SYNC_TEST_VARIANT " build)", exchange_stream_zero_consumer);
}

/* Another thread launches a signal on its own stream 0 while this thread's dependency
 * for its stream 0 waits behind a closed gate. Per-thread build: the other thread's
 * default stream is independent, so the signal arrives (a dependency put on the legacy
 * stream instead would hold it, through the legacy stream's implicit synchronization).
 * Legacy build, the control: stream 0 is the one legacy stream, so it cannot arrive. */
typedef struct other_thread {
  gpu_flags *device_flags;
  cudaError_t error;
  volatile int launched; /* set once its launch call returned */
} other_thread;

static void *signal_on_stream_zero(void *arg) {
  other_thread *t = arg;
  t->error = cudaSetDevice(0);
  if (t->error == cudaSuccess) t->error = (cudaError_t)gpu_signal(0, t->device_flags);
  flag_set(&t->launched, 1);
  return NULL;
}

static void test_stream_zero_dependency_holds_only_its_own_stream(void **state) {
  (void)state;
  skip_without_device();
#ifdef GPU_PER_THREAD_BUILD
  const int per_thread_build = 1;
#else
  const int per_thread_build = 0;
#endif
  suite_set_mode(MODE_STREAM_ZERO);
  world w;
  gpu_flags *other_flags, *other_device_flags;
  if (world_make(&w) != 0) fail_msg("could not set up streams and buffers");
  KERNEL_OK(gpu_flags_create(&other_flags, &other_device_flags));
  CUDA_OK(world_reset(&w, 0));
  KERNEL_OK(gpu_gate(w.a, w.device_flags));
  KERNEL_OK(gpu_produce(w.a, w.data, COUNT, 1, NULL));
  DL_OK(dl_sync_push_dep(on(w.a), on(0)));
  consume(&w, 0, 1);
  other_thread t = {.device_flags = other_device_flags};
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, signal_on_stream_zero, &t), 0);
  /* The window starts once the other launch was made, so that the control's "it waited"
   * means something. */
  int other_launched = seen_within(&t.launched, RUNS_SOON_NS);
  int other_ran = other_launched && seen_within(&other_flags->signalled,
                                                per_thread_build ? RUNS_SOON_NS : RACE_WINDOW_NS);
  verdict v = world_release(&w, 1);
  pthread_join(thread, NULL); /* only now: its stream 0 outlives nothing it launched */
  CUDA_OK(t.error);
  CUDA_OK(cudaDeviceSynchronize());
  gpu_flags_destroy(other_flags);
  world_free(&w);
  if (!other_launched) fail_msg("the other thread did not launch its kernel");
  if (per_thread_build && !other_ran)
    fail_msg(
        "per-thread build: a dependency for this thread's stream 0 held another thread's "
        "default stream: dlsync waited on the legacy default stream");
  if (!per_thread_build && other_ran)
    fail_msg("legacy build: another thread's stream 0 ran past this thread's dependency");
  judge("stream 0 dependency", 1, v);
  print_message(
      "%s build: another thread's stream 0 %s\n", DL_SYNC_TEST_VARIANT,
      other_ran ? "ran while the dependency waited" : "waited with it (one legacy stream)");
}

/* Producer on device 0, consumer on device 1 reading device 0's memory (peer access). */
static void test_two_devices(void **state) {
  (void)state;
  skip_without_device();
  int can_access = 0;
  suite_set_mode(MODE_TWO_DEVICES);
  if (device_count < 2)
    skip_mode("one " GPU_RUNTIME_NAME " device (the two-device scenario needs two)");
  CUDA_OK(cudaDeviceCanAccessPeer(&can_access, 1, 0));
  if (!can_access) skip_mode("device 1 cannot access device 0's memory (no peer access)");
  CUDA_OK(cudaSetDevice(1));
  cudaError_t peer = cudaDeviceEnablePeerAccess(0, 0);
  if (peer != cudaErrorPeerAccessAlreadyEnabled) CUDA_OK(peer);
  cudaStream_t b1;
  unsigned long long *mismatches1;
  CUDA_OK(cudaStreamCreateWithFlags(&b1, cudaStreamNonBlocking));
  CUDA_OK(cudaMalloc((void **)&mismatches1, sizeof *mismatches1));
  CUDA_OK(cudaSetDevice(0));
  world w;
  if (world_make(&w) != 0) fail_msg("could not set up streams and buffers");
  for (int run = 0; run < CONTROL_GATED + ORDERED_GATED; run++) {
    int ordered = run >= CONTROL_GATED;
    CUDA_OK(world_reset(&w, 0));
    CUDA_OK(cudaSetDevice(1));
    CUDA_OK(cudaMemset(mismatches1, 0, sizeof *mismatches1));
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaSetDevice(0));
    KERNEL_OK(gpu_gate(w.a, w.device_flags));
    KERNEL_OK(gpu_produce(w.a, w.data, COUNT, run, NULL));
    if (ordered) DL_OK(dl_sync_push_dep(on_device(0, w.a), on_device(1, b1)));
    CUDA_OK(cudaSetDevice(1));
    KERNEL_OK(gpu_check(b1, w.data, COUNT, run, NULL, mismatches1));
    KERNEL_OK(gpu_signal(b1, w.device_flags));
    CUDA_OK(cudaSetDevice(0));
    verdict v = world_release(&w, ordered);
    CUDA_OK(cudaStreamSynchronize(b1));
    if (v.error == cudaSuccess)
      v.error = cudaMemcpy(&v.mismatches, mismatches1, sizeof v.mismatches, cudaMemcpyDeviceToHost);
    judge("two devices", ordered, v);
  }
  world_free(&w);
  cudaFree(mismatches1);
  cudaStreamDestroy(b1);
}

/* Capture: a producer and a consumer forked into one capture, joined by dlsync, a launch
 * counter bumped at the end; every replay writes and checks that launch's values. */
typedef struct capture_job {
  enum cudaStreamCaptureMode mode;
  int ordered;
  pthread_barrier_t *barrier;
  char failure[256];
  int raced[GRAPH_GATED]; /* per gated replay: the consumer finished while the gate held */
  unsigned long long mismatches[SLOTS]; /* per replay */
} capture_job;

static int job_fail(capture_job *job, const char *what, int code) {
  if (job->failure[0] == '\0')
    snprintf(job->failure, sizeof job->failure, "%s: %s", what,
             code > 0 ? cudaGetErrorName((cudaError_t)code) : dl_sync_last_error());
  return -1;
}

static int capture_fork_join(capture_job *job, world *w, cudaEvent_t fork, cudaGraph_t *graph) {
  int failed = 0;
  cudaError_t e = cudaStreamBeginCapture(w->a, job->mode);
  if (e != cudaSuccess) return job_fail(job, "cudaStreamBeginCapture", e);
  if ((e = cudaEventRecord(fork, w->a)) != cudaSuccess ||
      (e = cudaStreamWaitEvent(w->b, fork, 0)) != cudaSuccess)
    failed = job_fail(job, "fork", e);
  if (!failed && ((e = gpu_gate(w->a, w->device_flags)) != 0 ||
                  (e = gpu_produce(w->a, w->data, COUNT, 5, w->launch)) != 0))
    failed = job_fail(job, "producer", e);
  if (!failed && job->ordered && dl_sync_push_dep(on(w->a), on(w->b)) != DL_SYNC_OK)
    failed = job_fail(job, "dl_sync_push_dep(a, b) in the capture", 0);
  if (!failed && ((e = gpu_check(w->b, w->data, COUNT, 5, w->launch, w->mismatches)) != 0 ||
                  (e = gpu_signal(w->b, w->device_flags)) != 0))
    failed = job_fail(job, "consumer", e);
  if (!failed && dl_sync_push_dep(on(w->b), on(w->a)) != DL_SYNC_OK) /* the join */
    failed = job_fail(job, "dl_sync_push_dep(b, a) joining the capture", 0);
  if (!failed && (e = gpu_count_launch(w->a, w->launch)) != 0)
    failed = job_fail(job, "launch counter", e);
  e = cudaStreamEndCapture(w->a, graph);
  if (!failed && e != cudaSuccess) failed = job_fail(job, "cudaStreamEndCapture", e);
  return failed;
}

static void *run_capture_job(void *arg) {
  capture_job *job = arg;
  world w = {0};
  cudaEvent_t fork = NULL;
  cudaStream_t launcher = NULL;
  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec = NULL;
  int failed = cudaSetDevice(0) != cudaSuccess || world_make(&w) != 0 ||
               cudaEventCreateWithFlags(&fork, cudaEventDisableTiming) != cudaSuccess ||
               cudaStreamCreateWithFlags(&launcher, cudaStreamNonBlocking) != cudaSuccess ||
               world_reset(&w, 0) != cudaSuccess;
  if (failed) job_fail(job, "setup", cudaErrorUnknown);
  /* Every thread captures at the same time; nothing else runs on the device meanwhile
   * (in global mode another thread's unsafe call would fail the capture). */
  pthread_barrier_wait(job->barrier);
  if (!failed) failed = capture_fork_join(job, &w, fork, &graph);
  pthread_barrier_wait(job->barrier);
  cudaError_t e;
  if (!failed && (e = cudaGraphInstantiate(&exec, graph, 0)) != cudaSuccess)
    failed = job_fail(job, "cudaGraphInstantiate", e);
  for (int launch = 0; !failed && launch < GRAPH_GATED + (job->ordered ? GRAPH_UNGATED : 0);
       launch++) {
    int gated = launch < GRAPH_GATED;
    w.flags->signalled = 0;
    flag_set(&w.flags->open, !gated);
    if ((e = cudaGraphLaunch(exec, launcher)) != cudaSuccess) {
      failed = job_fail(job, "cudaGraphLaunch", e);
      break;
    }
    if (!gated) continue;
    job->raced[launch] =
        seen_within(&w.flags->signalled, job->ordered ? RACE_WINDOW_NS : RUNS_SOON_NS);
    flag_set(&w.flags->open, 1);
    if ((e = cudaStreamSynchronize(launcher)) != cudaSuccess) failed = job_fail(job, "replay", e);
  }
  if (!failed && (e = cudaStreamSynchronize(launcher)) != cudaSuccess)
    failed = job_fail(job, "replays", e);
  if (!failed && (e = cudaMemcpy(job->mismatches, w.mismatches, sizeof job->mismatches,
                                 cudaMemcpyDeviceToHost)) != cudaSuccess)
    failed = job_fail(job, "reading the counters", e);
  if (!failed && w.flags->gate_timeouts != 0)
    snprintf(job->failure, sizeof job->failure, "the gate timed out (the host never opened it)");
  if (exec != NULL) cudaGraphExecDestroy(exec);
  if (graph != NULL) cudaGraphDestroy(graph);
  if (fork != NULL) cudaEventDestroy(fork);
  if (launcher != NULL) cudaStreamDestroy(launcher);
  world_free(&w);
  return NULL;
}

static const char *mode_name(enum cudaStreamCaptureMode mode) {
  return mode == cudaStreamCaptureModeGlobal        ? "global"
         : mode == cudaStreamCaptureModeThreadLocal ? "thread-local"
                                                    : "relaxed";
}

static void test_capture_fork_join_in_every_mode(void **state) {
  (void)state;
  skip_without_device();
  const enum cudaStreamCaptureMode modes[] = {
      cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeRelaxed};
  for (int m = 0; m < 3; m++) {
    suite_set_mode(MODE_CAPTURE_GLOBAL + m);
    for (int ordered = 0; ordered <= 1; ordered++) {
      capture_job jobs[CAPTURE_THREADS];
      pthread_t threads[CAPTURE_THREADS];
      pthread_barrier_t barrier;
      pthread_barrier_init(&barrier, NULL, CAPTURE_THREADS);
      for (int t = 0; t < CAPTURE_THREADS; t++) {
        jobs[t] = (capture_job){.mode = modes[m], .ordered = ordered, .barrier = &barrier};
        assert_int_equal(pthread_create(&threads[t], NULL, run_capture_job, &jobs[t]), 0);
      }
      for (int t = 0; t < CAPTURE_THREADS; t++) pthread_join(threads[t], NULL);
      pthread_barrier_destroy(&barrier);
      for (int t = 0; t < CAPTURE_THREADS; t++) {
        capture_job *job = &jobs[t];
        if (job->failure[0] != '\0')
          fail_msg("capture %s, thread %d: %s", mode_name(modes[m]), t, job->failure);
        int launches = GRAPH_GATED + (ordered ? GRAPH_UNGATED : 0);
        for (int launch = 0; launch < launches; launch++) {
          verdict v = {.mismatches = job->mismatches[launch]};
          if (launch >= GRAPH_GATED) { /* ungated replays: ordered only */
            if (v.mismatches != 0)
              fail_msg("capture %s, thread %d, replay %d: %llu wrong values", mode_name(modes[m]),
                       t, launch, v.mismatches);
            count_ordered(1);
            continue;
          }
          v.raced = job->raced[launch];
          char what[96];
          snprintf(what, sizeof what, "capture %s, thread %d, gated replay %d", mode_name(modes[m]),
                   t, launch);
          judge(what, ordered, v);
        }
      }
    }
  }
}

/* The consumer captures, the producer does not: dlsync captures an external event wait. */
static void test_capturing_consumer_gets_an_external_wait(void **state) {
  (void)state;
  skip_without_device();
  world w;
  cudaStream_t launcher;
  suite_set_mode(MODE_EXTERNAL_WAIT);
  if (world_make(&w) != 0) fail_msg("could not set up streams and buffers");
  CUDA_OK(cudaStreamCreateWithFlags(&launcher, cudaStreamNonBlocking));
  for (int run = 0; run < CONTROL_GATED + ORDERED_GATED; run++) {
    int ordered = run >= CONTROL_GATED;
    CUDA_OK(world_reset(&w, 0));
    KERNEL_OK(gpu_gate(w.a, w.device_flags));
    KERNEL_OK(gpu_produce(w.a, w.data, COUNT, run, NULL));
    CUDA_OK(cudaStreamBeginCapture(w.b, cudaStreamCaptureModeGlobal));
    if (ordered) DL_OK(dl_sync_push_dep(on(w.a), on(w.b)));
    KERNEL_OK(gpu_check(w.b, w.data, COUNT, run, NULL, w.mismatches));
    KERNEL_OK(gpu_signal(w.b, w.device_flags));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_OK(cudaStreamEndCapture(w.b, &graph));
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_OK(cudaGraphLaunch(exec, launcher));
    judge("external wait in a capture", ordered, world_release(&w, ordered));
    if (ordered) { /* later replays read the same, finished data */
      for (int i = 0; i < 10; i++) CUDA_OK(cudaGraphLaunch(exec, launcher));
      CUDA_OK(cudaStreamSynchronize(launcher));
      unsigned long long mismatches = 0;
      CUDA_OK(cudaMemcpy(&mismatches, w.mismatches, sizeof mismatches, cudaMemcpyDeviceToHost));
      assert_int_equal(mismatches, 0);
      count_ordered(10);
    }
    CUDA_OK(cudaGraphExecDestroy(exec));
    CUDA_OK(cudaGraphDestroy(graph));
  }
  cudaStreamDestroy(launcher);
  world_free(&w);
}

static void test_capture_errors(void **state) {
  (void)state;
  skip_without_device();
  world w;
  if (world_make(&w) != 0) fail_msg("could not set up streams and buffers");
  CUDA_OK(cudaStreamBeginCapture(w.a, cudaStreamCaptureModeGlobal));
  KERNEL_OK(gpu_produce(w.a, w.data, COUNT, 1, NULL));
  assert_int_equal(dl_sync_push_dep(on(w.a), on(w.b)), DL_SYNC_ECAPTURE);
  assert_int_equal(dl_sync_export(on(w.a), dl_sync_stream_arg_none()), DL_SYNC_ECAPTURE);
  DL_OK(dl_sync_set_capture_policy(DL_SYNC_CAPTURE_NONE_IS_NO_SYNC));
  assert_int_equal(dl_sync_export(on(w.a), dl_sync_stream_arg_none()), DL_SYNC_OK);
  DL_OK(dl_sync_set_capture_policy(DL_SYNC_CAPTURE_STRICT));
  cudaGraph_t graph;
  CUDA_OK(cudaStreamEndCapture(w.a, &graph)); /* the capture survived */
  cudaGraphDestroy(graph);
  world_free(&w);
}

/* Eight threads at once, each with its own streams and gate, sharing dlsync's event pool:
 * gated runs first (controls without the dependency, then ordered ones; all threads in
 * them at the same time), then ordered runs back to back. cmocka's checks only work on
 * the main thread, so the workers record what they saw and the main thread judges it. */
enum { WORKERS = 8, WORKER_UNGATED = 100 };

typedef struct worker {
  pthread_t thread;
  pthread_barrier_t *barrier;
  verdict gated[CONTROL_GATED + ORDERED_GATED];
  unsigned long long mismatches; /* of the ungated runs */
  int failures;                  /* runtime or dlsync calls that failed */
} worker;

static void *run_worker(void *arg) {
  worker *k = arg;
  world w;
  int ready = cudaSetDevice(0) == cudaSuccess && world_make(&w) == 0;
  k->failures += !ready;
  pthread_barrier_wait(k->barrier); /* every thread's gated runs overlap the others' */
  if (!ready) return NULL;
  for (int run = 0; run < CONTROL_GATED + ORDERED_GATED; run++) {
    int ordered = run >= CONTROL_GATED;
    k->failures += world_reset(&w, 0) != cudaSuccess;
    k->failures += gpu_gate(w.a, w.device_flags) != 0;
    k->failures += gpu_produce(w.a, w.data, COUNT, run, NULL) != 0;
    if (ordered) k->failures += dl_sync_push_dep(on(w.a), on(w.b)) != DL_SYNC_OK;
    k->failures += gpu_check(w.b, w.data, COUNT, run, NULL, w.mismatches) != 0;
    k->failures += gpu_signal(w.b, w.device_flags) != 0;
    k->gated[run] = world_release(&w, ordered);
  }
  k->failures += world_reset(&w, 1) != cudaSuccess;
  for (int i = 0; i < WORKER_UNGATED; i++) {
    k->failures += gpu_produce(w.a, w.data, COUNT, i, NULL) != 0;
    k->failures += dl_sync_push_dep(on(w.a), on(w.b)) != DL_SYNC_OK;
    k->failures += gpu_check(w.b, w.data, COUNT, i, NULL, w.mismatches) != 0;
    k->failures += dl_sync_push_dep(on(w.b), on(w.a)) != DL_SYNC_OK; /* before the next write */
  }
  k->failures += cudaStreamSynchronize(w.b) != cudaSuccess;
  k->failures += cudaMemcpy(&k->mismatches, w.mismatches, sizeof k->mismatches,
                            cudaMemcpyDeviceToHost) != cudaSuccess;
  world_free(&w);
  return NULL;
}

static void test_eight_threads_share_the_event_pool(void **state) {
  (void)state;
  skip_without_device();
  suite_set_mode(MODE_THREADS);
  worker workers[WORKERS];
  pthread_barrier_t barrier;
  pthread_barrier_init(&barrier, NULL, WORKERS);
  for (int t = 0; t < WORKERS; t++) {
    workers[t] = (worker){.barrier = &barrier};
    assert_int_equal(pthread_create(&workers[t].thread, NULL, run_worker, &workers[t]), 0);
  }
  for (int t = 0; t < WORKERS; t++) pthread_join(workers[t].thread, NULL);
  pthread_barrier_destroy(&barrier);
  for (int t = 0; t < WORKERS; t++) {
    if (workers[t].failures != 0)
      fail_msg("thread %d: %d runtime or dlsync calls failed", t, workers[t].failures);
    for (int run = 0; run < CONTROL_GATED + ORDERED_GATED; run++) {
      char what[64];
      snprintf(what, sizeof what, "thread %d of %d, gated run %d", t, WORKERS, run);
      judge(what, run >= CONTROL_GATED, workers[t].gated[run]);
    }
    if (workers[t].mismatches != 0)
      fail_msg("thread %d: %llu wrong values in %d ungated runs", t, workers[t].mismatches,
               WORKER_UNGATED);
  }
  count_ordered(WORKERS * WORKER_UNGATED);
  dl_sync_pool_stats stats;
  DL_OK(dl_sync_pool_stats_get(GPU_BACKEND(), 0, &stats));
  print_message("%d threads: %llu dependencies, %llu events created\n", WORKERS,
                (unsigned long long)stats.acquired, (unsigned long long)stats.created);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_stream_argument, setup, teardown),
      cmocka_unit_test_setup_teardown(test_n0_current_work_stream, setup, teardown),
      cmocka_unit_test_setup_teardown(test_n1_per_tensor_event, setup, teardown),
      cmocka_unit_test_setup_teardown(test_legacy_default_stream_consumer, setup, teardown),
      cmocka_unit_test_setup_teardown(test_per_thread_default_stream_consumer, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stream_zero_consumer, setup, teardown),
      cmocka_unit_test_setup_teardown(test_stream_zero_dependency_holds_only_its_own_stream, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_two_devices, setup, teardown),
      cmocka_unit_test_setup_teardown(test_capture_fork_join_in_every_mode, setup, teardown),
      cmocka_unit_test_setup_teardown(test_capturing_consumer_gets_an_external_wait, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_capture_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_eight_threads_share_the_event_pool, setup, teardown),
  };
  return suite_run("gpu_ordering_" DL_SYNC_TEST_VARIANT, mode_names, MODES, tests,
                   sizeof tests / sizeof tests[0], NULL);
}
