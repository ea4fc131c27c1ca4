/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Host-side costs of dlsync, measured side by side in one run. Prints one line per
 * figure: "name<TAB>value<TAB>unit". bench/run.sh repeats runs and tabulates medians.
 *   - dl_sync_export on a null backend (calls return at once): fast paths with 1 and 2
 *     threads, the cross-stream path with 1, 2, 4 and 8 threads on one device (per-thread
 *     cost and aggregate throughput, as ratios), next to an empty call through a function
 *     pointer;
 *   - f(a, b, c) from one producer stream: a dependency group against one export per
 *     tensor, in runtime calls and ns;
 *   - the consumer's release of a tensor (participating and deferred) next to the bare
 *     deleter call and an export;
 *   - the consumer's import through a DLPack exchange table next to the table's bare
 *     conversion: on the producer's stream, cross-stream, f(a, b, c) through a group, with
 *     the runtime calls each makes;
 *   - runtime calls per exchange for three strategies (pooled event, fresh event, host sync);
 *   - exchanges per second end to end on the simulated device.
 */
#define _GNU_SOURCE
/* Linked with the shared library, as frameworks use it. The event pool alone is measured
   by bench_pool. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dlsync/dlsync.h"
#include "dlsync/sim.h"
#include "null_backend.h"

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* CPU time of the calling thread: unlike wall time, not inflated when other processes
   share the cores, yet it still counts spinning and cache-line transfers. */
static double thread_cpu_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void report(const char *name, double value, const char *unit) {
  printf("%s\t%.2f\t%s\n", name, value, unit);
}

static long calls_total(void) {
  long total = 0;
  for (int op = 0; op < DL_SYNC_OP_COUNT; op++) total += thread_calls[op];
  return total;
}

/* The baseline: an empty call through a function pointer the compiler cannot see through. */
static int empty(void *ctx, void *a, void *b) {
  (void)ctx;
  (void)a;
  (void)b;
  return 0;
}
static int (*volatile empty_call)(void *, void *, void *) = empty;

enum { ITERATIONS = 2000000 };

static double time_empty_call(void) {
  double start = now_ns();
  for (int i = 0; i < ITERATIONS; i++) empty_call(NULL, NULL, NULL);
  return (now_ns() - start) / ITERATIONS;
}

typedef enum path { SAME_STREAM, NO_SYNC, CPU, CROSS_STREAM } path;

typedef struct export_run {
  pthread_t thread;
  atomic_int *go; /* NULL: start at once */
  path which;
  double ns_per_op;
  double cpu_ns_per_op;
  double calls_per_op;
} export_run;

static void *time_export(void *context) {
  export_run *r = context;
  DLDevice device = r->which == CPU ? (DLDevice){kDLCPU, 0} : (DLDevice){kDLCUDA, 0};
  static _Thread_local int streams[2]; /* distinct handles per thread */
  dl_sync_stream producer = dl_sync_stream_view(device, r->which == CPU ? NULL : &streams[0]);
  dl_sync_stream_arg arg = r->which == SAME_STREAM ? dl_sync_stream_arg_int((intptr_t)&streams[0])
                           : r->which == NO_SYNC   ? dl_sync_stream_arg_int(-1)
                           : r->which == CPU       ? dl_sync_stream_arg_none()
                                                   : dl_sync_stream_arg_int((intptr_t)&streams[1]);
  dl_sync_export(producer, arg); /* warm the pool */
  while (r->go != NULL && !atomic_load(r->go)) {
  }
  long calls_before = calls_total();
  double cpu_start = thread_cpu_ns();
  double start = now_ns();
  for (int i = 0; i < ITERATIONS; i++) dl_sync_export(producer, arg);
  r->ns_per_op = (now_ns() - start) / ITERATIONS;
  r->cpu_ns_per_op = (thread_cpu_ns() - cpu_start) / ITERATIONS;
  r->calls_per_op = (double)(calls_total() - calls_before) / ITERATIONS;
  return NULL;
}

static void bench_export(void) {
  static const char *names[] = {"export same stream", "export stream=-1", "export cpu",
                                "export cross-stream"};
  for (int which = SAME_STREAM; which < CROSS_STREAM; which++) {
    for (int threads = 1; threads <= 2; threads++) {
      export_run runs[2] = {{.which = (path)which}, {.which = (path)which}};
      for (int t = 0; t < threads; t++)
        pthread_create(&runs[t].thread, NULL, time_export, &runs[t]);
      double ns = 0, calls = 0;
      for (int t = 0; t < threads; t++) {
        pthread_join(runs[t].thread, NULL);
        ns += runs[t].ns_per_op / threads;
        calls = runs[t].calls_per_op;
      }
      char name[96];
      snprintf(name, sizeof name, "%s, %d thread%s", names[which], threads, threads > 1 ? "s" : "");
      report(name, ns, "ns/op");
      (void)calls;
    }
  }
}

/* The cross-stream export from 1, 2, 4 and 8 threads on one device, started together:
   each thread's cost per export, and exports per second of all threads together. The
   thread counts take turns for a few rounds and each figure is the median of its rounds,
   so a change in what else runs on the machine does not land on one thread count. */
typedef struct thread_figures {
  double ns, cpu_ns, calls, aggregate;
} thread_figures;

static thread_figures run_export_threads(int threads) {
  enum { MAX_THREADS = 8 };
  static atomic_int go;
  atomic_store(&go, 0);
  export_run runs[MAX_THREADS];
  for (int t = 0; t < threads; t++) {
    runs[t] = (export_run){.which = CROSS_STREAM, .go = &go};
    pthread_create(&runs[t].thread, NULL, time_export, &runs[t]);
  }
  double start = now_ns();
  atomic_store(&go, 1);
  thread_figures f = {0};
  for (int t = 0; t < threads; t++) {
    pthread_join(runs[t].thread, NULL);
    f.ns += runs[t].ns_per_op / threads;
    f.cpu_ns += runs[t].cpu_ns_per_op / threads;
    f.calls = runs[t].calls_per_op;
  }
  f.aggregate = (double)threads * ITERATIONS / ((now_ns() - start) / 1e9) / 1e6;
  return f;
}

static double median3(double a, double b, double c) {
  return a > b ? (b > c ? b : (a > c ? c : a)) : (a > c ? a : (b > c ? c : b));
}

static void bench_export_threads(double baseline) {
  enum { COUNTS = 4, ROUNDS = 3 };
  static const int counts[COUNTS] = {1, 2, 4, 8};
  thread_figures rounds[COUNTS][ROUNDS], f[COUNTS];
  for (int round = 0; round < ROUNDS; round++)
    for (int c = 0; c < COUNTS; c++) rounds[c][round] = run_export_threads(counts[c]);
  for (int c = 0; c < COUNTS; c++) {
    thread_figures *r = rounds[c];
    f[c] = (thread_figures){median3(r[0].ns, r[1].ns, r[2].ns),
                            median3(r[0].cpu_ns, r[1].cpu_ns, r[2].cpu_ns), r[0].calls,
                            median3(r[0].aggregate, r[1].aggregate, r[2].aggregate)};
    const char *plural = counts[c] > 1 ? "s" : "";
    char name[96];
    snprintf(name, sizeof name, "export cross-stream, %d thread%s", counts[c], plural);
    report(name, f[c].ns, "ns/op");
    snprintf(name, sizeof name, "export cross-stream, %d thread%s: beyond its %.0f backend calls",
             counts[c], plural, f[c].calls);
    report(name, f[c].ns - f[c].calls * baseline, "ns/op");
    snprintf(name, sizeof name, "export cross-stream, %d thread%s: thread CPU time", counts[c],
             plural);
    report(name, f[c].cpu_ns, "ns/op");
    snprintf(name, sizeof name, "export cross-stream, %d thread%s: all threads together", counts[c],
             plural);
    report(name, f[c].aggregate, "Mexports/s");
  }
  report("export cross-stream, 2 threads / 1 thread, ns per export", f[1].ns / f[0].ns, "ratio");
  report("export cross-stream, 2 threads / 1 thread, CPU ns per export", f[1].cpu_ns / f[0].cpu_ns,
         "ratio");
  report("export cross-stream, throughput 4 threads / 2 threads", f[2].aggregate / f[1].aggregate,
         "ratio");
  report("export cross-stream, throughput 8 threads / 4 threads", f[3].aggregate / f[2].aggregate,
         "ratio");
}

/* f(a, b, c), all three written on one producer stream, consumed on another. */
static void bench_group(void) {
  enum { CALLS = 1000000 };
  int a, b;
  dl_sync_stream producer = dl_sync_stream_view((DLDevice){kDLCUDA, 0}, &a);
  dl_sync_stream consumer = dl_sync_stream_view((DLDevice){kDLCUDA, 0}, &b);
  dl_sync_stream_arg consumer_arg = dl_sync_stream_arg_int((intptr_t)&b);
  dl_sync_export(producer, consumer_arg); /* warm the pool */
  long calls_before = calls_total();
  double start = now_ns();
  for (int i = 0; i < CALLS; i++)
    for (int tensor = 0; tensor < 3; tensor++) dl_sync_export(producer, consumer_arg);
  double per_tensor_ns = (now_ns() - start) / CALLS;
  double per_tensor_calls = (double)(calls_total() - calls_before) / CALLS;

  calls_before = calls_total();
  start = now_ns();
  for (int i = 0; i < CALLS; i++) {
    dl_sync_group group;
    dl_sync_group_init(&group, consumer);
    for (int tensor = 0; tensor < 3; tensor++) dl_sync_group_add_stream(&group, producer);
    dl_sync_group_wait(&group);
  }
  double grouped_ns = (now_ns() - start) / CALLS;
  double grouped_calls = (double)(calls_total() - calls_before) / CALLS;
  report("f(a,b,c) one export per tensor: runtime calls", per_tensor_calls, "calls");
  report("f(a,b,c) group: runtime calls", grouped_calls, "calls");
  report("f(a,b,c) one export per tensor", per_tensor_ns, "ns/call");
  report("f(a,b,c) group", grouped_ns, "ns/call");
  report("f(a,b,c) per tensor / group, ns", per_tensor_ns / grouped_ns, "ratio");
}

/* The consumer's release of a tensor, next to the bare deleter call: a participating
   producer's (its reuse stream named: one record and one wait) against one export, and a
   deferred one (one record, then a query per poll until it completed: the null backend's
   events complete at once, so one poll finds each). */
static int released;
static void count_release(DLManagedTensorVersioned *t) {
  (void)t;
  released++;
}

static void bench_release(void) {
  enum { RELEASES = 200000 };
  int a, b;
  DLDevice device = {kDLCUDA, 0};
  dl_sync_stream producer = dl_sync_stream_view(device, &a),
                 consumer = dl_sync_stream_view(device, &b);
  DLManagedTensorVersioned tensor = {.version = {1, 3}, .deleter = count_release};
  tensor.dl_tensor.device = device;
  double start = now_ns();
  for (int i = 0; i < RELEASES; i++) tensor.deleter(&tensor);
  double bare_ns = (now_ns() - start) / RELEASES;

  dl_sync_tensor_record_reuse(&tensor, producer, producer); /* warm the pools */
  dl_sync_tensor_release(&tensor, consumer);
  /* Tensors recorded in batches (not timed), each batch released in one timed loop. */
  enum { BATCH = 1000 };
  static DLManagedTensorVersioned batch[BATCH];
  double ordered_ns = 0, deferred_ns = 0, ordered_calls = 0, deferred_calls = 0;
  double event_deleter_ns = 0; /* the deleter of a tensor that carries an event, called directly */
  for (int round = 0; round < RELEASES / BATCH; round++) {
    for (int i = 0; i < BATCH; i++) {
      batch[i] = (DLManagedTensorVersioned){.version = {1, 3}, .deleter = count_release};
      batch[i].dl_tensor.device = device;
      dl_sync_tensor_record_reuse(&batch[i], producer, producer);
    }
    double t0 = now_ns();
    for (int i = 0; i < BATCH; i++) batch[i].deleter(&batch[i]);
    event_deleter_ns += now_ns() - t0;
  }
  event_deleter_ns /= RELEASES;
  for (int kind = 0; kind < 2; kind++) {
    double spent = 0;
    long calls = 0;
    for (int round = 0; round < RELEASES / BATCH; round++) {
      for (int i = 0; i < BATCH; i++) {
        batch[i] = (DLManagedTensorVersioned){.version = {1, 3}, .deleter = count_release};
        batch[i].dl_tensor.device = device;
        if (kind == 0) dl_sync_tensor_record_reuse(&batch[i], producer, producer);
      }
      long before = calls_total();
      double t0 = now_ns();
      for (int i = 0; i < BATCH; i++) {
        dl_sync_tensor_release(&batch[i], consumer);
        if (kind == 1) dl_sync_release_poll();
      }
      spent += now_ns() - t0;
      calls += calls_total() - before;
    }
    *(kind == 0 ? &ordered_ns : &deferred_ns) = spent / RELEASES;
    *(kind == 0 ? &ordered_calls : &deferred_calls) = (double)calls / RELEASES;
  }
  int c;
  dl_sync_stream_arg consumer_arg = dl_sync_stream_arg_int((intptr_t)&c);
  start = now_ns();
  for (int i = 0; i < RELEASES; i++) dl_sync_export(producer, consumer_arg);
  double export_ns = (now_ns() - start) / RELEASES;
  report("release: the bare deleter call", bare_ns, "ns/op");
  report("release: the deleter call of a tensor with an event", event_deleter_ns, "ns/op");
  report("release, participating producer", ordered_ns, "ns/op");
  report("release, participating producer: runtime calls", ordered_calls, "calls");
  report("release, deferred, with the poll that runs it", deferred_ns, "ns/op");
  report("release, deferred: runtime calls", deferred_calls, "calls");
  report("export cross-stream, same run", export_ns, "ns/op");
  report("release participating, beyond its deleter call / export cross-stream",
         (ordered_ns - event_deleter_ns) / export_ns, "ratio");
}

/* Cost flat in what is pending: a deferred release with a poll after it, with none, 1 k and
   64 k releases pending (their consumer's work never completes: the null backend's queries
   on that stream answer "not yet"), side by side in one run, as ratios to none. The
   measured releases go to another consumer stream, whose work completes, so each poll
   finishes one; and, on the stream where nothing completes, the event queries a poll after
   each release makes (per release). Each figure is the median of batches. */
static double median(double *values, int n) {
  for (int a = 0; a < n; a++)
    for (int b = a + 1; b < n; b++)
      if (values[b] < values[a]) {
        double t = values[a];
        values[a] = values[b];
        values[b] = t;
      }
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

static void fresh_tensors(DLManagedTensorVersioned *tensors, int n, DLDevice device) {
  for (int i = 0; i < n; i++) {
    tensors[i] = (DLManagedTensorVersioned){.version = {1, 3}, .deleter = count_release};
    tensors[i].dl_tensor.device = device;
  }
}

static void bench_release_depth(const char *model) {
  enum { BATCH = 1000, BATCHES = 15, DEEPEST = 65536, DEPTHS = 3 };
  static const int depths[DEPTHS] = {0, 1000, DEEPEST};
  static DLManagedTensorVersioned piled[DEEPEST + BATCH], batch[BATCH];
  int slow, fast;
  DLDevice device = {kDLCUDA, 0};
  dl_sync_stream slow_stream = dl_sync_stream_view(device, &slow),
                 consumer = dl_sync_stream_view(device, &fast);
  atomic_store(&null_slow_stream, (void *)&slow);
  double per_release[DEPTHS], batch_ns[BATCHES], queries = 0;
  for (int d = 0; d < DEPTHS; d++) {
    fresh_tensors(piled, depths[d], device);
    for (int i = 0; i < depths[d]; i++) dl_sync_tensor_release(&piled[i], slow_stream);
    for (int round = 0; round < BATCHES; round++) {
      fresh_tensors(batch, BATCH, device);
      double t0 = now_ns();
      for (int i = 0; i < BATCH; i++) {
        dl_sync_tensor_release(&batch[i], consumer);
        dl_sync_release_poll();
      }
      batch_ns[round] = (now_ns() - t0) / BATCH;
    }
    per_release[d] = median(batch_ns, BATCHES);
    if (d == DEPTHS - 1) { /* one more batch behind the pile: nothing of it completes */
      fresh_tensors(&piled[DEEPEST], BATCH, device);
      long before = thread_calls[DL_SYNC_OP_EVENT_QUERY];
      for (int i = 0; i < BATCH; i++) {
        dl_sync_tensor_release(&piled[DEEPEST + i], slow_stream);
        dl_sync_release_poll();
      }
      queries = (double)(thread_calls[DL_SYNC_OP_EVENT_QUERY] - before) / BATCH;
    }
    atomic_store(&null_slow_stream, NULL);
    dl_sync_release_poll(); /* the pile finishes */
    atomic_store(&null_slow_stream, (void *)&slow);
  }
  atomic_store(&null_slow_stream, NULL);
  char name[160];
  snprintf(name, sizeof name, "release deferred + poll, none pending%s", model);
  report(name, per_release[0], "ns/op");
  snprintf(name, sizeof name, "release deferred + poll, 1 k pending%s", model);
  report(name, per_release[1], "ns/op");
  snprintf(name, sizeof name, "release deferred + poll, 64 k pending%s", model);
  report(name, per_release[2], "ns/op");
  snprintf(name, sizeof name, "release at 1 k pending / none%s", model);
  report(name, per_release[1] / per_release[0], "ratio");
  snprintf(name, sizeof name, "release at 64 k pending / none%s", model);
  report(name, per_release[2] / per_release[0], "ratio");
  snprintf(name, sizeof name,
           "poll after each release, 64 k pending on one stream, nothing done: event "
           "queries%s",
           model);
  report(name, queries, "calls/release");
}

/* The runtime calls of one deferred release and the poll that finishes it, with the
   backend's own stream (HIP) and without (CUDA), side by side: rounds alternate between
   the two, and the time is each one's median round. */
static void bench_release_calls_per_model(void) {
  enum { RELEASES = 20000, ROUNDS = 7 };
  static DLManagedTensorVersioned tensors[RELEASES];
  int b;
  DLDevice device = {kDLCUDA, 0};
  dl_sync_stream consumer = dl_sync_stream_view(device, &b);
  double calls[2], rounds[2][ROUNDS], waits[2], records[2], checks[2], queries[2];
  for (int round = 0; round < ROUNDS; round++)
    for (int hip = 0; hip < 2; hip++) {
      dl_sync_set_backend(kDLCUDA, hip ? &null_hip_backend : &null_backend);
      fresh_tensors(tensors, 1, device);
      dl_sync_tensor_release(&tensors[0], consumer); /* warm: the pool and the own stream */
      dl_sync_release_poll();
      fresh_tensors(tensors, RELEASES, device);
      long before = calls_total(), wait0 = thread_calls[DL_SYNC_OP_STREAM_WAIT],
           record0 = thread_calls[DL_SYNC_OP_EVENT_RECORD],
           check0 = thread_calls[DL_SYNC_OP_OWN_STREAM_CHECK],
           query0 = thread_calls[DL_SYNC_OP_CAPTURE_INFO];
      double t0 = now_ns();
      for (int i = 0; i < RELEASES; i++) {
        dl_sync_tensor_release(&tensors[i], consumer);
        dl_sync_release_poll();
      }
      rounds[hip][round] = (now_ns() - t0) / RELEASES;
      calls[hip] = (double)(calls_total() - before) / RELEASES;
      waits[hip] = (double)(thread_calls[DL_SYNC_OP_STREAM_WAIT] - wait0) / RELEASES;
      records[hip] = (double)(thread_calls[DL_SYNC_OP_EVENT_RECORD] - record0) / RELEASES;
      checks[hip] = (double)(thread_calls[DL_SYNC_OP_OWN_STREAM_CHECK] - check0) / RELEASES;
      queries[hip] = (double)(thread_calls[DL_SYNC_OP_CAPTURE_INFO] - query0) / RELEASES;
      dl_sync_shutdown();
    }
  dl_sync_set_backend(kDLCUDA, &null_backend);
  double ns[2] = {median(rounds[0], ROUNDS), median(rounds[1], ROUNDS)};
  report("release deferred + poll, consumer's event asked (CUDA)", ns[0], "ns/op");
  report("release deferred + poll, own stream's event asked (HIP)", ns[1], "ns/op");
  report("release deferred + poll, HIP / CUDA", ns[1] / ns[0], "ratio");
  report("release deferred + poll: runtime calls (CUDA)", calls[0], "calls");
  report("release deferred + poll: runtime calls (HIP)", calls[1], "calls");
  report("release deferred + poll: HIP's extra waits", waits[1] - waits[0], "calls");
  report("release deferred + poll: HIP's extra records", records[1] - records[0], "calls");
  report("release deferred + poll: HIP's own-stream checks", checks[1] - checks[0], "calls");
  report("release deferred + poll: HIP's extra capture queries", queries[1] - queries[0], "calls");
}

/* A deferred release and its poll with the consumer's queue keyed by the runtime's stream id
   (stream_id) and by the handle alone (the backend without stream_id), side by side: rounds
   alternate, the time is each one's median round. */
static void bench_release_stream_id(void) {
  enum { RELEASES = 20000, ROUNDS = 31 };
  static DLManagedTensorVersioned tensors[RELEASES];
  static dl_sync_backend by_handle;
  by_handle = null_backend;
  by_handle.stream_id = NULL;
  int b;
  DLDevice device = {kDLCUDA, 0};
  dl_sync_stream consumer = dl_sync_stream_view(device, &b);
  double rounds[2][ROUNDS], calls[2];
  for (int round = 0; round < ROUNDS; round++)
    for (int id = 0; id < 2; id++) {
      dl_sync_set_backend(kDLCUDA, id ? &null_backend : &by_handle);
      fresh_tensors(tensors, 1, device);
      dl_sync_tensor_release(&tensors[0], consumer); /* warm: the pool */
      dl_sync_release_poll();
      fresh_tensors(tensors, RELEASES, device);
      long before = calls_total();
      double t0 = now_ns();
      for (int i = 0; i < RELEASES; i++) {
        dl_sync_tensor_release(&tensors[i], consumer);
        dl_sync_release_poll();
      }
      rounds[id][round] = (now_ns() - t0) / RELEASES;
      calls[id] = (double)(calls_total() - before) / RELEASES;
      dl_sync_shutdown();
    }
  dl_sync_set_backend(kDLCUDA, &null_backend);
  double ns[2] = {median(rounds[0], ROUNDS), median(rounds[1], ROUNDS)};
  report("release deferred + poll, queue keyed by handle", ns[0], "ns/op");
  report("release deferred + poll, queue keyed by stream id", ns[1], "ns/op");
  report("release deferred + poll, stream id / handle", ns[1] / ns[0], "ratio");
  report("release deferred + poll: stream id's extra calls", calls[1] - calls[0], "calls");
}

/* The consumer's import through a producer's DLPack exchange table, per argument, next to
   the table's bare conversion (managed_tensor_from_py_object_no_sync, the _NoSync tensor a
   consumer gets without dlsync), each with the deleter call that gives the tensor back:
   on the producer's current stream (nothing to order), on another stream (one record and
   one wait, counted on the null backend), and f(a, b, c) from one producer stream through
   a group. The producer allocates each tensor, as a framework's conversion does. The
   kinds take turns in rounds; each figure is the median of its rounds. */
typedef struct import_tensor {
  DLManagedTensorVersioned tensor;
  int64_t shape[1];
} import_tensor;

static int import_object; /* the "Python object": the producer's array */
static _Thread_local int producer_current_stream;

static void import_tensor_deleter(DLManagedTensorVersioned *t) {
  free(t);
}

static int import_from_py_object(void *object, DLManagedTensorVersioned **out) {
  import_tensor *made = malloc(sizeof *made);
  if (made == NULL) return -1;
  made->shape[0] = 1024;
  made->tensor = (DLManagedTensorVersioned){.version = {1, 3}, .deleter = import_tensor_deleter};
  made->tensor.dl_tensor = (DLTensor){.data = object,
                                      .device = {kDLCUDA, 0},
                                      .ndim = 1,
                                      .dtype = {kDLFloat, 32, 1},
                                      .shape = made->shape};
  *out = &made->tensor;
  return 0;
}

static int import_current_work_stream(DLDeviceType type, int32_t id, void **out) {
  (void)type;
  (void)id;
  *out = &producer_current_stream;
  return 0;
}

static DLPackExchangeAPI import_api = {
    .header = {{1, 3}, NULL},
    .managed_tensor_from_py_object_no_sync = import_from_py_object,
    .current_work_stream = import_current_work_stream,
};

enum { IMPORT_BARE, IMPORT_SAME_STREAM, IMPORT_CROSS_STREAM, IMPORT_GROUP, IMPORT_KINDS };

/* ns per argument of one kind, n arguments; *calls: the runtime calls per argument, by op. */
static double time_imports(int kind, int n, double *calls) {
  static int consumer_stream;
  DLDevice device = {kDLCUDA, 0};
  dl_sync_stream consumer = dl_sync_stream_view(
      device, kind == IMPORT_SAME_STREAM ? (void *)&producer_current_stream : &consumer_stream);
  long before[DL_SYNC_OP_COUNT];
  memcpy(before, thread_calls, sizeof before);
  DLManagedTensorVersioned *t[3];
  double start = now_ns();
  if (kind == IMPORT_GROUP) {
    for (int i = 0; i < n; i += 3) { /* f(a, b, c) */
      dl_sync_group group;
      dl_sync_group_init(&group, consumer);
      for (int k = 0; k < 3; k++)
        dl_sync_group_add_exchange_import(&group, &import_api, &import_object, &t[k]);
      dl_sync_group_wait(&group);
      for (int k = 0; k < 3; k++) t[k]->deleter(t[k]);
    }
  } else {
    for (int i = 0; i < n; i++) {
      if (kind == IMPORT_BARE)
        import_api.managed_tensor_from_py_object_no_sync(&import_object, &t[0]);
      else
        dl_sync_exchange_import(&import_api, &import_object, consumer, &t[0]);
      t[0]->deleter(t[0]);
    }
  }
  double ns = (now_ns() - start) / n;
  for (int op = 0; op < DL_SYNC_OP_COUNT; op++)
    calls[op] = (double)(thread_calls[op] - before[op]) / n;
  return ns;
}

static void bench_exchange_import(void) {
  enum { ARGUMENTS = 300000, ROUNDS = 9 };
  double rounds[IMPORT_KINDS][ROUNDS], calls[IMPORT_KINDS][DL_SYNC_OP_COUNT];
  for (int kind = 0; kind < IMPORT_KINDS; kind++) time_imports(kind, 3000, calls[kind]); /* warm */
  for (int round = 0; round < ROUNDS; round++)
    for (int kind = 0; kind < IMPORT_KINDS; kind++)
      rounds[kind][round] = time_imports(kind, ARGUMENTS, calls[kind]);
  double ns[IMPORT_KINDS];
  for (int kind = 0; kind < IMPORT_KINDS; kind++) ns[kind] = median(rounds[kind], ROUNDS);
  report("import: the bare conversion + deleter, per argument", ns[IMPORT_BARE], "ns/op");
  report("import on the producer's stream + deleter, per argument", ns[IMPORT_SAME_STREAM],
         "ns/op");
  report("import cross-stream + deleter, per argument", ns[IMPORT_CROSS_STREAM], "ns/op");
  report("import f(a,b,c) through a group + deleters, per argument", ns[IMPORT_GROUP], "ns/op");
  report("import on the producer's stream / bare conversion",
         ns[IMPORT_SAME_STREAM] / ns[IMPORT_BARE], "ratio");
  report("import cross-stream / bare conversion", ns[IMPORT_CROSS_STREAM] / ns[IMPORT_BARE],
         "ratio");
  report("import f(a,b,c) group / bare conversion, per argument",
         ns[IMPORT_GROUP] / ns[IMPORT_BARE], "ratio");
  static const struct {
    int op;
    const char *name;
  } ops[] = {{DL_SYNC_OP_EVENT_RECORD, "records"},
             {DL_SYNC_OP_STREAM_WAIT, "waits"},
             {DL_SYNC_OP_CAPTURE_INFO, "capture queries"},
             {DL_SYNC_OP_EVENT_CREATE, "event creations"}};
  static const char *kinds[IMPORT_KINDS] = {"bare conversion", "import on the producer's stream",
                                            "import cross-stream", "import f(a,b,c) group"};
  for (int kind = 0; kind < IMPORT_KINDS; kind++)
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
      char name[128];
      double per = calls[kind][ops[o].op] * (kind == IMPORT_GROUP ? 3 : 1);
      snprintf(name, sizeof name, "%s: runtime %s per %s", kinds[kind], ops[o].name,
               kind == IMPORT_GROUP ? "call of f(a,b,c)" : "argument");
      report(name, per, "calls");
    }
}

/* Runtime calls per exchange: dlsync's pooled event, a fresh event per exchange (what
   PyTorch and CuPy do today), and host synchronization. */
static void bench_strategies(void) {
  enum { EXCHANGES = 100000 };
  int a, b;
  dl_sync_stream producer = dl_sync_stream_view((DLDevice){kDLCUDA, 0}, &a);
  dl_sync_stream_arg consumer = dl_sync_stream_arg_int((intptr_t)&b);
  dl_sync_export(producer, consumer);
  memset(thread_calls, 0, sizeof thread_calls);
  for (int i = 0; i < EXCHANGES; i++) dl_sync_export(producer, consumer);
  report("pooled event: runtime calls per exchange", (double)calls_total() / EXCHANGES, "calls");
  report("pooled event: event creations per exchange",
         (double)thread_calls[DL_SYNC_OP_EVENT_CREATE] / EXCHANGES, "calls");
  double pooled = (double)calls_total() / EXCHANGES;
  memset(thread_calls, 0, sizeof thread_calls);
  for (int i = 0; i < EXCHANGES; i++) {
    void *event;
    null_backend.event_create(NULL, &event);
    null_backend.event_record(NULL, event, &a);
    null_backend.stream_wait(NULL, &b, event);
    null_backend.event_destroy(NULL, event);
  }
  double fresh = (double)calls_total() / EXCHANGES;
  report("fresh event: runtime calls per exchange", fresh, "calls");
  report("fresh event: event creations per exchange",
         (double)thread_calls[DL_SYNC_OP_EVENT_CREATE] / EXCHANGES, "calls");
  report("host sync: runtime calls per exchange (record + synchronize, host blocks)", 2, "calls");
  report("fresh event / pooled event, runtime calls", fresh / pooled, "ratio");
}

/* End to end on the simulated device: produce, export, consume, hand back. */
typedef struct sim_run {
  pthread_t thread;
  int32_t word;
  double exchanges_per_s;
} sim_run;

static void touch(void *arg) {
  (*(volatile int32_t *)arg)++;
}

static void *time_sim(void *arg) {
  sim_run *r = arg;
  enum { SIM_EXCHANGES = 3000 };
  dl_sync_sim_stream *a, *b;
  dl_sync_sim_stream_create(&a, DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_stream_create(&b, DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_stream producer = dl_sync_stream_view((DLDevice){kDLCUDA, 0}, a);
  dl_sync_stream consumer = dl_sync_stream_view((DLDevice){kDLCUDA, 0}, b);
  dl_sync_sim_access w = {&r->word, DL_SYNC_SIM_WRITE},
                     rd = {&r->word, DL_SYNC_SIM_READ | DL_SYNC_SIM_WRITE};
  double start = now_ns();
  for (int i = 0; i < SIM_EXCHANGES; i++) {
    dl_sync_sim_launch(a, "produce", touch, &r->word, &w, 1);
    dl_sync_export(producer, dl_sync_stream_arg_int((intptr_t)b));
    dl_sync_sim_launch(b, "consume", touch, &r->word, &rd, 1);
    dl_sync_push_dep(consumer, producer);
  }
  dl_sync_sim_stream_synchronize(a);
  dl_sync_sim_stream_synchronize(b);
  r->exchanges_per_s = SIM_EXCHANGES / ((now_ns() - start) / 1e9);
  return NULL;
}

static void bench_sim(void) {
  dl_sync_set_backend(kDLCUDA, dl_sync_sim_backend());
  for (int threads = 1; threads <= 4; threads++) {
    dl_sync_sim_reset();
    dl_sync_shutdown();
    sim_run runs[4] = {{0}};
    for (int t = 0; t < threads; t++) pthread_create(&runs[t].thread, NULL, time_sim, &runs[t]);
    double total = 0;
    for (int t = 0; t < threads; t++) {
      pthread_join(runs[t].thread, NULL);
      total += runs[t].exchanges_per_s;
    }
    char name[64];
    snprintf(name, sizeof name, "sim end to end, %d thread%s", threads, threads > 1 ? "s" : "");
    report(name, total, "exchanges/s");
  }
  if (dl_sync_sim_race_count() != 0) fprintf(stderr, "unexpected races in the benchmark\n");
  dl_sync_sim_reset();
  dl_sync_shutdown();
}

int main(void) {
  dl_sync_set_backend(kDLCUDA, &null_backend);
  double baseline = time_empty_call();
  report("empty call through a function pointer", baseline, "ns/op");
  bench_export();
  bench_export_threads(baseline);
  bench_group();
  bench_release();
  bench_release_depth("");
  dl_sync_shutdown();
  dl_sync_set_backend(kDLCUDA, &null_hip_backend);
  bench_release_depth(" (HIP: own stream)");
  dl_sync_shutdown();
  dl_sync_set_backend(kDLCUDA, &null_backend);
  bench_release_calls_per_model();
  bench_release_stream_id();
  bench_exchange_import();
  bench_strategies();
  dl_sync_shutdown();
  bench_sim();
  return 0;
}
