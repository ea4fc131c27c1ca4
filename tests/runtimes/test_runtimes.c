/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The black-box suite over one runtime library, loaded through dlsync's own loader:
 *   test_runtimes cuda|hip <expected version> device|no-device|no-runtime|bad-override|found
 *   test_runtimes driver <expected version> device|no-device|stub|old-driver|no-driver|soname
 * "found" checks which library the loader picks by itself (no override): the one already
 * loaded in the process (TEST_LOAD_FIRST, loaded by the test before dlsync looks), else
 * the newest SONAME on the library path. The driver family runs over dl_sync_cuda_backend()
 * with DL_SYNC_LIBCUDA naming a fake libcuda.so.1; it talks to the driver by the entry
 * points cuGetProcAddress_v2 hands out, and reads the fake's fake_cuda_last hook.
 * The ctest entries run it over each fake runtime (tests/runtimes/CMakeLists.txt) with
 * DL_SYNC_CUDART / DL_SYNC_HIP, FAKE_GPU_DEVICES and, for no-runtime, a preload that
 * hides every runtime SONAME. The suite talks to the runtime by its real entry points
 * (dlsym on the library dlsync reports) plus the fakes' fake_gpu_* counters.
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
#ifndef _WIN32 /* fork, and the loader's list of objects */
#include <link.h>
#include <sys/wait.h>
#include <unistd.h>
#endif
#include <cmocka.h>

#include "dlsync/dlsync.h"
#include "../support/dynamic_library.h"
#include "../support/error_message.h"

static int cuda, driver;
static long expected_version;
static const dl_sync_backend *backend;
static DLDevice dev0, dev1;
static void *runtime;

typedef int (*stream_create_fn)(void **stream);
typedef int (*capture_begin_fn)(void *stream, int mode);
typedef int (*capture_end_fn)(void *stream, void **graph);
typedef int (*is_capturing_fn)(void *stream, int *status);
typedef int (*graph_destroy_fn)(void *graph);
typedef int (*last_error_fn)(void);
typedef int (*set_device_fn)(int device);
typedef int (*record_fn)(void *event, void *stream);
typedef int (*wait_fn)(void *stream, void *event, unsigned flags);
typedef int (*event_create_fn)(void **event, unsigned flags);
typedef int (*event_destroy_fn)(void *event);
typedef long (*counter_fn)(const char *name);
typedef int (*external_waits_fn)(const void *graph);
typedef int (*handle_fn)(void *handle); /* stream, event and graph destroy */

/* The runtime's own entry point prefix + name, e.g. "cuda" "StreamCreate". */
static void *entry(const char *name) {
  char full[96];
  snprintf(full, sizeof full, "%s%s", cuda ? "cuda" : "hip", name);
  void *address = test_library_symbol(runtime, full);
  if (address == NULL) fail_msg("the runtime lacks %s", full);
  return address;
}

#define CALL(type, name, ...) ((type)entry(name))(__VA_ARGS__)

static long counter(const char *name) {
  counter_fn read = (counter_fn)test_library_symbol(runtime, "fake_gpu_counter");
  assert_non_null(read);
  return read(name);
}

/* The CUDA driver's entry points, for the driver family (test_runtimes driver ...). */

typedef int (*cu_proc_address_fn)(const char *symbol, void **pfn, int version, uint64_t flags,
                                  int *status);
typedef int (*cu_init_fn)(unsigned flags);
typedef int (*cu_context_fn)(void *context);      /* cuCtxSetCurrent, cuCtxDestroy */
typedef int (*cu_context_out_fn)(void **context); /* cuCtxGetCurrent, cuCtxPopCurrent */
typedef int (*cu_primary_retain_fn)(void **context, int device);
typedef int (*cu_ctx_create_fn)(void **context, unsigned flags, int device);
typedef int (*cu_stream_create_fn)(void **stream, unsigned flags);
typedef int (*cu_begin_capture_fn)(void *stream, int mode);
typedef int (*cu_end_capture_fn)(void *stream, void **graph);
typedef int (*cu_is_capturing_fn)(void *stream, int *status);
typedef int (*cu_event_create_fn)(void **event, unsigned flags);
typedef int (*cu_record_fn)(void *event, void *stream);
typedef int (*cu_wait_fn)(void *stream, void *event, unsigned flags);
typedef int (*fake_last_fn)(const char *op, void **context);

/* The API version dlsync asks for; cuCtxCreate's 3-argument ABI is its 3020 one (the
   12000 one takes execution-affinity parameters). */
enum { CU_API = 12000, CU_CTX_CREATE_API = 3020, CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1 };
enum { CU_STREAM_DEFAULT_KIND = 0, CU_LEGACY_KIND = 1, CU_PER_THREAD_KIND = 2 };

static void *primary0, *primary1;
static long suite_inits;

static void *cu_entry(const char *name, int version) {
  cu_proc_address_fn lookup =
      (cu_proc_address_fn)test_library_symbol(runtime, "cuGetProcAddress_v2");
  if (lookup == NULL) fail_msg("the driver lacks cuGetProcAddress_v2");
  void *address = NULL;
  int found = -1;
  int code = lookup(name, &address, version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &found);
  if (code != 0 || address == NULL)
    fail_msg("cuGetProcAddress_v2(%s, %d): %d, symbol status %d", name, version, code, found);
  return address;
}

#define CU(type, name, ...) ((type)cu_entry(name, CU_API))(__VA_ARGS__)
#define CU_OK(type, name, ...) assert_int_equal(CU(type, name, __VA_ARGS__), 0)

static void *cu_current(void) {
  void *context = (void *)1;
  CU_OK(cu_context_out_fn, "cuCtxGetCurrent", &context);
  return context;
}

static void cu_set_current(void *context) {
  CU_OK(cu_context_fn, "cuCtxSetCurrent", context);
}

/* A stream of the current context. */
static void *cu_new_stream(void) {
  void *stream = NULL;
  CU_OK(cu_stream_create_fn, "cuStreamCreate", &stream, 0u);
  return stream;
}

/* A stream of context; the current context is left as it was. */
static void *cu_stream_in(void *context) {
  void *was = cu_current();
  cu_set_current(context);
  void *stream = cu_new_stream();
  cu_set_current(was);
  return stream;
}

static void cu_free_stream(void *stream) {
  CU_OK(handle_fn, "cuStreamDestroy", stream);
}

/* A context made by cuCtxCreate on device; the current context is left as it was. */
static void *cu_new_context(int device) {
  void *context = NULL, *popped = NULL;
  assert_int_equal(
      ((cu_ctx_create_fn)cu_entry("cuCtxCreate", CU_CTX_CREATE_API))(&context, 0u, device), 0);
  CU_OK(cu_context_out_fn, "cuCtxPopCurrent", &popped);
  assert_ptr_equal(popped, context);
  return context;
}

static int cu_capture_status(void *stream) {
  int status = -1;
  CU_OK(cu_is_capturing_fn, "cuStreamIsCapturing", stream, &status);
  return status;
}

static void cu_begin_capture(void *stream) {
  CU_OK(cu_begin_capture_fn, "cuStreamBeginCapture", stream, 0);
}

static void destroy_graph(void *graph);

static void cu_end_capture(void *stream, int expect_graph) {
  void *graph = NULL;
  int code = CU(cu_end_capture_fn, "cuStreamEndCapture", stream, &graph);
  if (expect_graph) {
    assert_int_equal(code, 0);
    assert_non_null(graph);
  }
  if (graph != NULL) destroy_graph(graph);
}

/* Begins a capture on a and pulls b into it, as a framework forks work in a capture. */
static void cu_capture_both(void *a, void *b) {
  cu_begin_capture(a);
  void *fork = NULL;
  CU_OK(cu_event_create_fn, "cuEventCreate", &fork, 2u);
  CU_OK(cu_record_fn, "cuEventRecord", fork, a);
  CU_OK(cu_wait_fn, "cuStreamWaitEvent", b, fork, 0u);
  CU_OK(handle_fn, "cuEventDestroy", fork);
}

/* Where the driver's last record or wait went: its kind (CU_*_KIND), context in *context. */
static int cu_last(const char *op, void **context) {
  fake_last_fn last = (fake_last_fn)test_library_symbol(runtime, "fake_cuda_last");
  assert_non_null(last);
  return last(op, context);
}

static void assert_last(const char *op, int kind, void *context) {
  void *where = NULL;
  int got = cu_last(op, &where);
  if (got != kind || where != context)
    fail_msg("the last %s went to a stream of kind %d in context %p, expected kind %d in %p", op,
             got, where, kind, context);
}

/* The suite's own calls on the library under test: the runtime's, or the driver's. */
static void *new_stream(void) {
  if (driver) return cu_new_stream();
  void *stream = NULL;
  assert_int_equal(CALL(stream_create_fn, "StreamCreate", &stream), 0);
  return stream;
}

static void free_stream(void *stream) {
  if (driver)
    cu_free_stream(stream);
  else
    assert_int_equal(CALL(handle_fn, "StreamDestroy", stream), 0);
}

static void begin_capture(void *stream) {
  if (driver)
    cu_begin_capture(stream);
  else
    assert_int_equal(CALL(capture_begin_fn, "StreamBeginCapture", stream, 0), 0);
}

static int capture_status(void *stream) {
  if (driver) return cu_capture_status(stream);
  int status = -1;
  assert_int_equal(CALL(is_capturing_fn, "StreamIsCapturing", stream, &status), 0);
  return status;
}

static void end_capture(void *stream, int expect_graph) {
  if (driver) {
    cu_end_capture(stream, expect_graph);
    return;
  }
  void *graph = NULL;
  CALL(capture_end_fn, "StreamEndCapture", stream, &graph);
  CALL(last_error_fn, "GetLastError");
  if (expect_graph) assert_non_null(graph);
  if (graph != NULL) CALL(graph_destroy_fn, "GraphDestroy", graph);
}

/* Ends the capture on stream, which must succeed; its graph. */
static void *end_capture_graph(void *stream) {
  void *graph = NULL;
  if (driver)
    CU_OK(capture_end_fn, "cuStreamEndCapture", stream, &graph);
  else
    assert_int_equal(CALL(capture_end_fn, "StreamEndCapture", stream, &graph), 0);
  assert_non_null(graph);
  return graph;
}

/* Destroys graph; the driver's user-object destructors have run when it returns (they run
   later, on a thread of the driver's). */
static void destroy_graph(void *graph) {
  if (driver) {
    CU_OK(handle_fn, "cuGraphDestroy", graph);
    ((void (*)(void))test_library_symbol(runtime, "fake_cuda_drain_destructors"))();
  } else
    assert_int_equal(CALL(graph_destroy_fn, "GraphDestroy", graph), 0);
}

/* Begins a capture on a and pulls b into it, as a framework forks work in a capture. */
static void capture_both(void *a, void *b) {
  if (driver) {
    cu_capture_both(a, b);
    return;
  }
  begin_capture(a);
  void *fork = NULL;
  assert_int_equal(CALL(event_create_fn, "EventCreateWithFlags", &fork, 2u), 0);
  assert_int_equal(CALL(record_fn, "EventRecord", fork, a), 0);
  assert_int_equal(CALL(wait_fn, "StreamWaitEvent", b, fork, 0u), 0);
  assert_int_equal(CALL(event_destroy_fn, "EventDestroy", fork), 0);
}

/* Makes device current as the suite's framework would: the runtime's set-device, or the
   device's primary context. */
static void use_device(int device) {
  if (driver)
    cu_set_current(device == 0 ? primary0 : primary1);
  else
    assert_int_equal(CALL(set_device_fn, "SetDevice", device), 0);
}

static dl_sync_stream on(DLDevice device, void *handle) {
  return dl_sync_stream_view(device, handle);
}

static int teardown(void **state) {
  (void)state;
  CALL(last_error_fn, "GetLastError");
  return dl_sync_shutdown() == DL_SYNC_OK ? 0 : -1;
}

/* ---- device ---------------------------------------------------------------------- */

static void test_reports_the_runtime_it_loaded(void **state) {
  (void)state;
  dl_sync_runtime_info info;
  DL_OK(dl_sync_backend_runtime(backend, &info));
  print_message("%s runtime: %s, version %d (%d.%d)\n", backend->name, info.path, (int)info.version,
                (int)info.major, (int)info.minor);
  assert_int_equal(info.version, expected_version);
  assert_string_equal(info.path, getenv(cuda ? "DL_SYNC_CUDART" : "DL_SYNC_HIP"));
  assert_int_equal(info.major, cuda ? expected_version / 1000 : expected_version / 10000000);
  /* CUDA 12030 is 12.3; HIP 50422804 is 5.4 (patch 22804): decoded here on their own. */
  assert_int_equal(info.minor,
                   cuda ? expected_version / 10 % 100 : expected_version % 10000000 / 100000);
}

/* One export per stream argument: the calls it costs on the runtime. */
static void test_stream_argument_table(void **state) {
  (void)state;
  void *a = new_stream(), *b = new_stream();
  struct row {
    const char *what;
    dl_sync_stream_arg arg;
    int status;
    long records; /* = waits */
  } rows_cuda[] =
      {
          {"None (legacy)", dl_sync_stream_arg_none(), DL_SYNC_OK, 1},
          {"-1 (no sync)", dl_sync_stream_arg_int(-1), DL_SYNC_OK, 0},
          {"0 (ambiguous)", dl_sync_stream_arg_int(0), DL_SYNC_EINVAL, 0},
          {"1 (legacy)", dl_sync_stream_arg_int(1), DL_SYNC_OK, 1},
          {"2 (per-thread)", dl_sync_stream_arg_int(2), DL_SYNC_OK, 1},
          {"another stream", dl_sync_stream_arg_int((int64_t)(intptr_t)b), DL_SYNC_OK, 1},
          {"the same stream", dl_sync_stream_arg_int((int64_t)(intptr_t)a), DL_SYNC_OK, 0},
      },
    rows_hip[] = {
        {"None (null stream)", dl_sync_stream_arg_none(), DL_SYNC_OK, 1},
        {"-1 (no sync)", dl_sync_stream_arg_int(-1), DL_SYNC_OK, 0},
        {"0 (null stream)", dl_sync_stream_arg_int(0), DL_SYNC_OK, 1},
        {"1 (no such handle)", dl_sync_stream_arg_int(1), DL_SYNC_EINVAL, 0},
        {"another stream", dl_sync_stream_arg_int((int64_t)(intptr_t)b), DL_SYNC_OK, 1},
        {"the same stream", dl_sync_stream_arg_int((int64_t)(intptr_t)a), DL_SYNC_OK, 0},
    };
  int cuda_rows = cuda || driver;
  struct row *rows = cuda_rows ? rows_cuda : rows_hip;
  size_t count = cuda_rows ? sizeof rows_cuda / sizeof *rows : sizeof rows_hip / sizeof *rows;
  for (size_t i = 0; i < count; i++) {
    long records = counter("event_record"), waits = counter("stream_wait");
    int status = dl_sync_export(on(dev0, a), rows[i].arg);
    if (status != rows[i].status)
      fail_msg("%s: %s, expected %s: %s", rows[i].what, dl_sync_status_name(status),
               dl_sync_status_name(rows[i].status), dl_sync_last_error());
    assert_int_equal(counter("event_record") - records, rows[i].records);
    assert_int_equal(counter("stream_wait") - waits, rows[i].records);
  }
  if (driver) {
    assert_last("wait", CU_STREAM_DEFAULT_KIND, primary0); /* the last synchronized row: b */
    assert_ptr_equal(cu_current(), primary0);
  }
  free_stream(a);
  free_stream(b);
}

/* A default stream names the current device's: an ordering from device 1's default stream,
   made while device 0 is current, records there (an event of device 1 on device 0's
   stream is the runtime's invalid resource handle), every time, the event from the
   thread's cache included. */
static void test_another_devices_default_stream_records_there(void **state) {
  (void)state;
  use_device(0);
  for (int i = 0; i < 3; i++) {
    DL_OK(dl_sync_push_dep(on(dev1, DL_SYNC_STREAM_LEGACY), on(dev0, DL_SYNC_STREAM_LEGACY)));
    if (driver) {
      assert_last("record", CU_LEGACY_KIND, primary1);
      assert_last("wait", CU_LEGACY_KIND, primary0);
    }
  }
}

/* Steady state: one record and one wait per export, no event made, none queried (a HIP
   query could invalidate a capture, see the capture rows), none with timing. */
static void test_steady_state_is_one_record_and_one_wait(void **state) {
  (void)state;
  void *a = new_stream(), *b = new_stream();
  DL_OK(dl_sync_export(on(dev0, a), dl_sync_stream_arg_int((int64_t)(intptr_t)b)));
  long created = counter("event_create"), records = counter("event_record"),
       waits = counter("stream_wait"), queries = counter("event_query");
  long switches = driver ? counter("ctx_set_current") : 0,
       lookups = driver ? counter("stream_get_ctx") : 0;
  for (int i = 0; i < 100; i++) {
    DL_OK(dl_sync_export(on(dev0, a), dl_sync_stream_arg_int((int64_t)(intptr_t)b)));
    DL_OK(dl_sync_push_dep(on(dev0, b), on(dev0, a)));
  }
  if (driver)
    print_message("200 orderings: %ld cuCtxSetCurrent, %ld cuStreamGetCtx\n",
                  counter("ctx_set_current") - switches, counter("stream_get_ctx") - lookups);
  assert_int_equal(counter("event_create") - created, 0);
  assert_int_equal(counter("event_record") - records, 200);
  assert_int_equal(counter("stream_wait") - waits, 200);
  assert_int_equal(counter("event_query") - queries, 0);
  assert_int_equal(counter("timing_events"), 0);
  free_stream(a);
  free_stream(b);
}

/* Capture rows. Same capture: ordered inside the graph, and the capture survives even
   though the pooled event was last recorded on the producer before it began capturing. */
static void test_capture_same_graph_survives_a_warm_pool(void **state) {
  (void)state;
  void *a = new_stream(), *b = new_stream();
  DL_OK(dl_sync_push_dep(on(dev0, a), on(dev0, b))); /* warm: the pool's event was on a */
  capture_both(a, b);
  DL_OK(dl_sync_push_dep(on(dev0, a), on(dev0, b)));
  DL_OK(dl_sync_push_dep(on(dev0, b), on(dev0, a))); /* the join */
  assert_int_equal(capture_status(a), 1);
  assert_int_equal(capture_status(b), 1);
  end_capture(a, 1);
  free_stream(a);
  free_stream(b);
}

static void test_capture_two_graphs_are_refused_and_both_survive(void **state) {
  (void)state;
  void *a = new_stream(), *c = new_stream();
  begin_capture(a);
  begin_capture(c);
  assert_int_equal(dl_sync_push_dep(on(dev0, a), on(dev0, c)), DL_SYNC_ECAPTURE);
  assert_error_mentions("two different graphs");
  assert_int_equal(capture_status(a), 1);
  assert_int_equal(capture_status(c), 1);
  end_capture(a, 1);
  end_capture(c, 1);
  free_stream(a);
  free_stream(c);
}

/* CUDA has them; HIP from ROCm 6.4.2 (TEST_ROCM_RELEASE: the release the fake models, which
   its reported version cannot tell from 6.4.1). */
static int has_external_waits(void) {
  const char *release = getenv("TEST_ROCM_RELEASE");
  return cuda || driver || (release != NULL && atol(release) >= 60402);
}

/* Producer not capturing, consumer capturing: an external wait node in the consumer's
   graph, which owns the event until it is destroyed (the driver's user-object destructor
   makes no driver call). Without external waits (ROCm before 6.4.2) a plain wait would
   silently drop the dependency: ENOTSUP, capture untouched. */
static void test_capture_external_wait_is_owned_by_the_graph(void **state) {
  (void)state;
  void *a = new_stream(), *b = new_stream();
  long destructor_calls = driver ? counter("destructor_calls") : 0;
  begin_capture(b);
  int status = dl_sync_push_dep(on(dev0, a), on(dev0, b));
  if (!has_external_waits()) {
    assert_int_equal(status, DL_SYNC_ENOTSUP);
    assert_error_mentions("external event-wait nodes");
    assert_int_equal(capture_status(b), 1);
    end_capture(b, 1);
    free_stream(a);
    free_stream(b);
    return;
  }
  if (status != DL_SYNC_OK) fail_msg("%s", dl_sync_last_error());
  if (!cuda && !driver) /* never hipEventWaitExternal, which corrupts the heap */
    assert_int_equal(counter("defective_external_wait_calls"), 0);
  assert_int_equal(capture_status(b), 1);
  void *graph = end_capture_graph(b);
  external_waits_fn external_waits =
      (external_waits_fn)test_library_symbol(runtime, "fake_gpu_graph_external_waits");
  assert_int_equal(external_waits(graph), 1);
  dl_sync_pool_stats stats;
  DL_OK(dl_sync_pool_stats_get(backend, 0, &stats));
  assert_int_equal(stats.outstanding, 1);
  destroy_graph(graph);
  assert_int_equal(counter("user_objects_live"), 0);
  if (driver) assert_int_equal(counter("destructor_calls") - destructor_calls, 0);
  DL_OK(dl_sync_pool_stats_get(backend, 0, &stats));
  assert_int_equal(stats.outstanding, 0);
  free_stream(a);
  free_stream(b);
}

/* The consumer is the per-thread default stream of device 1, capturing: the graph user
   object must be made (and, on the driver, the capture state read and the wait made) while
   device 1 is current, where that handle names it. */
static void test_capture_external_wait_on_another_devices_default_stream(void **state) {
  (void)state;
  if (!has_external_waits()) skip();
  void *a = new_stream();
  use_device(1);
  begin_capture(DL_SYNC_STREAM_PER_THREAD);
  use_device(0);
  DL_OK(dl_sync_push_dep(on(dev0, a), on(dev1, DL_SYNC_STREAM_PER_THREAD)));
  if (driver) {
    assert_ptr_equal(cu_current(), primary0);
    assert_last("wait", CU_PER_THREAD_KIND, primary1);
  }
  use_device(1);
  assert_int_equal(capture_status(DL_SYNC_STREAM_PER_THREAD), 1);
  end_capture(DL_SYNC_STREAM_PER_THREAD, 1);
  use_device(0);
  assert_int_equal(counter("user_objects_live"), 0);
  free_stream(a);
}

static void test_capture_legacy_consumer_of_a_capturing_producer_is_refused(void **state) {
  (void)state;
  void *a = new_stream(), *b = new_stream();
  capture_both(a, b);
  assert_int_equal(dl_sync_export(on(dev0, a), dl_sync_stream_arg_none()), DL_SYNC_ECAPTURE);
  assert_error_mentions("legacy default stream");
  assert_int_equal(capture_status(a), 1);
  end_capture(a, 1);
  free_stream(a);
  free_stream(b);
}

/* Another thread's global-mode capture across every call that asks whether an event
   completed: a poll finishing a done release, dl_sync_tensor_synchronize, dl_sync_shutdown.
   cudaThreadExchangeStreamCaptureMode (and the driver's): in the global mode, while "any
   other thread has a concurrent capture sequence initiated with cudaStreamCaptureModeGlobal,
   this thread is prohibited from potentially unsafe API calls"; dlsync asks in the relaxed
   mode and the capture survives. The control, the runtime's own query in this thread's
   global mode, breaks it. (HIP's rules by version: tests/runtimes, the HIP families.) */
typedef struct other_thread_capture {
  pthread_t thread;
  pthread_barrier_t begun, end;
  void *stream, *context;
  int began, ended;
} other_thread_capture;

static void *capture_until_told(void *arg) {
  other_thread_capture *c = arg;
  if (driver) ((cu_context_fn)cu_entry("cuCtxSetCurrent", CU_API))(c->context);
  c->began = driver ? ((cu_begin_capture_fn)cu_entry("cuStreamBeginCapture", CU_API))(c->stream, 0)
                    : ((capture_begin_fn)entry("StreamBeginCapture"))(c->stream, 0);
  pthread_barrier_wait(&c->begun);
  pthread_barrier_wait(&c->end);
  void *graph = NULL;
  c->ended = driver ? ((cu_end_capture_fn)cu_entry("cuStreamEndCapture", CU_API))(c->stream, &graph)
                    : ((capture_end_fn)entry("StreamEndCapture"))(c->stream, &graph);
  if (!driver) ((last_error_fn)entry("GetLastError"))();
  if (graph != NULL) {
    if (driver)
      ((handle_fn)cu_entry("cuGraphDestroy", CU_API))(graph);
    else
      ((graph_destroy_fn)entry("GraphDestroy"))(graph);
  }
  return NULL;
}

static void other_thread_capture_begin(other_thread_capture *c) {
  c->stream = new_stream();
  c->context = driver ? primary0 : NULL;
  pthread_barrier_init(&c->begun, NULL, 2);
  pthread_barrier_init(&c->end, NULL, 2);
  pthread_create(&c->thread, NULL, capture_until_told, c);
  pthread_barrier_wait(&c->begun);
  assert_int_equal(c->began, 0);
}

static int other_thread_capture_end(other_thread_capture *c) {
  pthread_barrier_wait(&c->end);
  pthread_join(c->thread, NULL);
  pthread_barrier_destroy(&c->begun);
  pthread_barrier_destroy(&c->end);
  free_stream(c->stream);
  return c->ended;
}

static void count_deletion(DLManagedTensorVersioned *t) {
  (*(int *)t->manager_ctx)++;
}

/* A deferred release asks its consumer stream's id once (cudaStreamGetId, cuStreamGetId:
   the key of its queue), and none for a default stream, which keeps its key. Catches: the
   backend not binding the call, or the release asking a default stream's. HIP's: in
   test_hip_rules (7.1 on). */
static void test_a_deferred_release_asks_its_streams_id_once(void **state) {
  (void)state;
  if (!cuda && !driver) skip();
  void *consumer = new_stream();
  int deleted = 0;
  DLManagedTensorVersioned tensor = {
      .version = {1, 3}, .manager_ctx = &deleted, .deleter = count_deletion};
  tensor.dl_tensor.device = dev0;
  DLManagedTensorVersioned on_default = tensor;
  long asks = counter("stream_get_id");
  assert_int_equal(dl_sync_tensor_release(&tensor, on(dev0, consumer)), DL_SYNC_RELEASE_DEFERRED);
  assert_int_equal(counter("stream_get_id") - asks, 1);
  asks = counter("stream_get_id");
  assert_int_equal(dl_sync_tensor_release(&on_default, on(dev0, DL_SYNC_STREAM_LEGACY)),
                   DL_SYNC_RELEASE_DEFERRED);
  assert_int_equal(counter("stream_get_id") - asks, 0);
  assert_int_equal(dl_sync_release_poll(), 2);
  assert_int_equal(deleted, 2);
  free_stream(consumer);
}

static void test_asking_about_events_leaves_another_threads_capture(void **state) {
  (void)state;
  if (!cuda && !driver) skip(); /* the HIP families test HIP's own rules */
  void *consumer = new_stream();
  for (int call = 0; call < 4; call++) { /* poll, synchronize, shutdown; the control */
    int deleted = 0;
    DLManagedTensorVersioned tensor = {
        .version = {1, 3}, .manager_ctx = &deleted, .deleter = count_deletion};
    tensor.dl_tensor.device = dev0;
    if (call == 1)
      DL_OK(dl_sync_tensor_record(&tensor, on(dev0, consumer)));
    else if (call != 3)
      assert_int_equal(dl_sync_tensor_release(&tensor, on(dev0, consumer)),
                       DL_SYNC_RELEASE_DEFERRED);
    void *raw = NULL;
    if (call == 3) {
      if (driver)
        CU_OK(cu_event_create_fn, "cuEventCreate", &raw, 2u);
      else
        assert_int_equal(CALL(event_create_fn, "EventCreateWithFlags", &raw, 2u), 0);
    }
    other_thread_capture c = {0};
    other_thread_capture_begin(&c);
    int status = call == 0   ? dl_sync_release_poll() == 1 && deleted == 1 ? 0 : -100
                 : call == 1 ? dl_sync_tensor_synchronize(&tensor)
                 : call == 2 ? dl_sync_shutdown()
                 : driver    ? CU(handle_fn, "cuEventQuery", raw)
                             : CALL(handle_fn, "EventQuery", raw);
    int ended = other_thread_capture_end(&c);
    if (call < 3) {
      if (status != 0 || ended != 0)
        fail_msg("call %d: answered %d (%s), and the other thread's capture ended with %d", call,
                 status, dl_sync_last_error(), ended);
      if (call == 2) assert_int_equal(deleted, 1);
      if (call == 1) tensor.deleter(&tensor);
    } else {
      assert_true(status != 0); /* prohibited */
      assert_true(ended != 0);  /* and the capture broken */
      if (driver)
        CU_OK(handle_fn, "cuEventDestroy", raw);
      else
        CALL(event_destroy_fn, "EventDestroy", raw);
      CALL(last_error_fn, "GetLastError");
    }
  }
  free_stream(consumer);
}

/* A failure dlsync reports as a status is not left behind as the thread's last runtime
   error, where the caller's next check would take it for its own. */
static void test_failures_reported_as_statuses_leave_no_last_error(void **state) {
  (void)state;
  void *a = new_stream(), *c = new_stream();
  CALL(last_error_fn, "GetLastError");
  /* A bad device id: the runtime's InvalidDevice, a plain backend error (not ENODEV). */
  DLDevice missing = {dev0.device_type, 5};
  assert_int_equal(dl_sync_push_dep(on(missing, a), on(missing, c)), DL_SYNC_EBACKEND);
  assert_error_mentions("InvalidDevice");
  assert_int_equal(CALL(last_error_fn, "GetLastError"), 0);
  /* The legacy stream's capture query while another stream captures. */
  if (cuda || expected_version >= 50500000) {
    assert_int_equal(CALL(capture_begin_fn, "StreamBeginCapture", c, 0), 0);
    assert_int_equal(dl_sync_export(on(dev0, a), dl_sync_stream_arg_none()), DL_SYNC_ECAPTURE);
    assert_int_equal(CALL(last_error_fn, "GetLastError"), 0);
    end_capture(c, 1);
  }
}

/* ---- no device, no runtime, bad override -------------------------------------------- */

static void test_no_device_is_enodev(void **state) {
  (void)state;
  assert_int_equal(dl_sync_export(on(dev0, DL_SYNC_STREAM_PER_THREAD), dl_sync_stream_arg_none()),
                   DL_SYNC_ENODEV);
  print_message("%s\n", dl_sync_last_error());
  assert_error_mentions(cuda ? "[cudaGetDevice][cudaErrorNoDevice]"
                             : "[hipGetDevice][hipErrorNoDevice]");
  assert_int_equal(CALL(last_error_fn, "GetLastError"), 0);
}

#ifndef _WIN32
static int count_runtimes(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  const char *base = strrchr(info->dlpi_name, '/');
  base = base != NULL ? base + 1 : info->dlpi_name;
  if (strncmp(base, "libcudart", 9) == 0 || strncmp(base, "libamdhip64", 11) == 0) (*(int *)data)++;
  return 0;
}
#endif

/* A runtime is never loaded by dlsync, even with one on the library path (the ctest entry
   puts the fake there): a framework imported later would get dlsync's pick for its own
   DT_NEEDED. Without one loaded every call is ENODEV saying so, and nothing was mapped. */
static void test_no_runtime_is_enodev_and_nothing_is_loaded(void **state) {
  (void)state;
  dl_sync_runtime_info info;
  assert_int_equal(dl_sync_backend_runtime(backend, &info), DL_SYNC_ENODEV);
  print_message("%s\n", dl_sync_last_error());
  assert_error_mentions(cuda ? "no CUDA runtime (libcudart.so*) is loaded"
                             : "no HIP runtime (libamdhip64*) is loaded");
  assert_int_equal(dl_sync_push_dep(on(dev0, DL_SYNC_STREAM_PER_THREAD), on(dev0, NULL)),
                   DL_SYNC_ENODEV);
  assert_error_mentions(cuda ? "no CUDA runtime" : "no HIP runtime");
#ifndef _WIN32
  int mapped = 0;
  dl_iterate_phdr(count_runtimes, &mapped);
  assert_int_equal(mapped, 0);
#endif
}

/* The loader holds its search locks around fork() and gives them back in the child too:
   a child searches again (the runtime is still not loaded) and gets its answer. The child
   makes no cmocka call; a search that never returns is ended by the alarm. */
static void test_a_forked_child_can_search_again(void **state) {
  (void)state;
#ifdef _WIN32
  skip(); /* no fork */
#else
  dl_sync_runtime_info info;
  assert_int_equal(dl_sync_backend_runtime(backend, &info), DL_SYNC_ENODEV);
  pid_t child = fork();
  if (child == 0) {
    alarm(10);
    _exit(dl_sync_backend_runtime(backend, &info) == DL_SYNC_ENODEV ? 0 : 1);
  }
  int status = 0;
  assert_int_equal(waitpid(child, &status, 0), child);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fail_msg("the child's search %s", WIFSIGNALED(status) ? "never returned" : "failed");
#endif
}

/* A runtime whose version query fails is refused, and the failure it recorded as the
   thread's last error is not left for the framework to find. */
static void test_a_failed_version_query_leaves_no_last_error(void **state) {
  (void)state;
  dl_sync_runtime_info info;
  assert_int_equal(dl_sync_backend_runtime(backend, &info), DL_SYNC_ENODEV);
  print_message("%s\n", dl_sync_last_error());
  assert_error_mentions(cuda ? "answered cudaRuntimeGetVersion" : "answered hipRuntimeGetVersion");
  void *library = test_library_loaded(getenv(cuda ? "DL_SYNC_CUDART" : "DL_SYNC_HIP"));
  assert_non_null(library);
  last_error_fn get_last =
      (last_error_fn)test_library_symbol(library, cuda ? "cudaGetLastError" : "hipGetLastError");
  assert_non_null(get_last);
  assert_int_equal(get_last(), 0);
}

static void test_bad_override_is_enodev_naming_the_path(void **state) {
  (void)state;
  const char *path = getenv(cuda ? "DL_SYNC_CUDART" : "DL_SYNC_HIP");
  dl_sync_runtime_info info;
  assert_int_equal(dl_sync_backend_runtime(backend, &info), DL_SYNC_ENODEV);
  print_message("%s\n", dl_sync_last_error());
  assert_error_mentions(path);
  assert_int_equal(dl_sync_export(on(dev0, DL_SYNC_STREAM_PER_THREAD), dl_sync_stream_arg_none()),
                   DL_SYNC_ENODEV);
  assert_error_mentions(path);
}

static void *nothing(void *user, const char *name) {
  (void)user;
  (void)name;
  return NULL;
}

/* Before the backend's first use, a bind that fails (a lookup that finds nothing: ENODEV)
   keeps neither its lookup nor a verdict: the runtime the process loads is found, with
   the CUDA runtime also when the process had loaded it before the bind. */
static void test_a_failed_bind_hides_nothing(void **state) {
  (void)state;
  const char *path = getenv("TEST_LOAD_AFTER");
  if (path == NULL) path = getenv("TEST_LOAD_FIRST");
  int status = dl_sync_bind_runtime(backend, nothing, NULL);
  print_message("%s\n", dl_sync_last_error());
  assert_int_equal(status, DL_SYNC_ENODEV);
  if (getenv("TEST_LOAD_AFTER") != NULL) assert_non_null(test_library_open(path));
  dl_sync_runtime_info info;
  DL_OK(dl_sync_backend_runtime(backend, &info));
  assert_string_equal(info.path, path);
  assert_int_equal(info.version, expected_version);
}

static void test_found_the_expected_runtime(void **state) {
  (void)state;
  dl_sync_runtime_info info;
  DL_OK(dl_sync_backend_runtime(backend, &info));
  print_message("%s runtime found: %s, version %d\n", backend->name, info.path, (int)info.version);
  assert_int_equal(info.version, expected_version);
  /* The file the framework loaded, by its path (not the SONAME it answers to). */
  if (getenv("TEST_LOAD_FIRST") != NULL) assert_string_equal(info.path, getenv("TEST_LOAD_FIRST"));
}

/* ---- the CUDA driver (test_runtimes driver ...): the shared rows above, and these ---- */

/* What dlsync's first runtime call did, on the main thread with no context current. */
static struct {
  int status;
  char message[512];
  int get_current_code;
  void *context_after;
  long inits, records, waits;
} first;

/* dlsync's first runtime call loads the driver: the per-thread default stream of device 0
   exported to its legacy stream, from a thread with no context current. Then the suite's
   own setup: cuInit, device 0 and 1's primary contexts, device 0's current. */
static int driver_setup(void **state) {
  (void)state;
  const char *path = getenv("DL_SYNC_LIBCUDA");
  first.status = dl_sync_export(on(dev0, DL_SYNC_STREAM_PER_THREAD), dl_sync_stream_arg_none());
  snprintf(first.message, sizeof first.message, "%s", dl_sync_last_error());
  runtime = test_library_loaded(path);
  if (runtime == NULL) {
    fprintf(stderr, "dlsync's first call did not load %s: %s: %s\n", path,
            dl_sync_status_name(first.status), first.message);
    return -1;
  }
  first.inits = counter("init");
  first.records = counter("event_record");
  first.waits = counter("stream_wait");
  first.get_current_code = CU(cu_context_out_fn, "cuCtxGetCurrent", &first.context_after);
  CU_OK(cu_init_fn, "cuInit", 0u);
  suite_inits++;
  CU_OK(cu_primary_retain_fn, "cuDevicePrimaryCtxRetain", &primary0, 0);
  CU_OK(cu_primary_retain_fn, "cuDevicePrimaryCtxRetain", &primary1, 1);
  cu_set_current(primary0);
  return 0;
}

/* Each test ends with the main thread on device 0's primary context alone, and no pools. */
static int driver_teardown(void **state) {
  (void)state;
  cu_context_out_fn pop = (cu_context_out_fn)cu_entry("cuCtxPopCurrent", CU_API);
  void *popped = NULL;
  while (pop(&popped) == 0) continue;
  cu_set_current(primary0);
  return dl_sync_shutdown() == DL_SYNC_OK ? 0 : -1;
}

static void test_driver_first_call_loads_and_initializes_it(void **state) {
  (void)state;
  if (first.status != DL_SYNC_OK)
    fail_msg("first export: %s: %s", dl_sync_status_name(first.status), first.message);
  assert_int_equal(first.inits, 1);
  assert_int_equal(first.records, 1);
  assert_int_equal(first.waits, 1);
  /* The thread had no context current, and has none after. */
  assert_int_equal(first.get_current_code, 0);
  assert_null(first.context_after);
}

static void test_driver_reports_the_library(void **state) {
  (void)state;
  dl_sync_runtime_info info;
  DL_OK(dl_sync_backend_runtime(backend, &info));
  print_message("%s driver: %s, version %d (%d.%d)\n", backend->name, info.path, (int)info.version,
                (int)info.major, (int)info.minor);
#ifdef _WIN32 /* the module's own name for its file (Wine's: Z:\...), the one loaded */
  assert_non_null(test_library_loaded(info.path));
  assert_ptr_equal(test_library_loaded(info.path), test_library_loaded(getenv("DL_SYNC_LIBCUDA")));
#else
  assert_string_equal(info.path, getenv("DL_SYNC_LIBCUDA"));
#endif
  assert_int_equal(info.version, expected_version);
  assert_int_equal(info.major, expected_version / 1000);
  assert_int_equal(info.minor, expected_version % 1000 / 10);
}

/* A device the driver does not have: its default streams cannot be named. A plain backend
   error naming the driver's code; the caller's context is left current. */
static void test_driver_bad_device_is_a_backend_error(void **state) {
  (void)state;
  for (int id = 2; id <= 5; id += 3) { /* the device count (2), and past it */
    DLDevice missing = {kDLCUDA, id};
    assert_int_equal(dl_sync_push_dep(on(missing, DL_SYNC_STREAM_PER_THREAD),
                                      on(missing, DL_SYNC_STREAM_LEGACY)),
                     DL_SYNC_EBACKEND);
    print_message("%s\n", dl_sync_last_error());
    assert_error_mentions("CUDA_ERROR_INVALID_DEVICE");
    assert_ptr_equal(cu_current(), primary0);
  }
}

/* ---- contexts ---- */

/* (a) A created context current on device 0: orderings with device 1's streams, created
   and default, switch to device 1's primary context where a default stream must be named
   and leave the created context current. A default stream of device 0 is the current
   context's. */
static void test_driver_context_created_context_stays_current(void **state) {
  (void)state;
  void *x = cu_new_context(0);
  void *s1 = cu_stream_in(primary1);
  cu_set_current(x);
  void *sx = cu_new_stream();
  DL_OK(dl_sync_push_dep(on(dev0, sx), on(dev1, s1)));
  assert_last("record", CU_STREAM_DEFAULT_KIND, x);
  assert_last("wait", CU_STREAM_DEFAULT_KIND, primary1);
  assert_ptr_equal(cu_current(), x);
  DL_OK(dl_sync_push_dep(on(dev0, sx), on(dev1, DL_SYNC_STREAM_PER_THREAD)));
  assert_last("wait", CU_PER_THREAD_KIND, primary1);
  assert_ptr_equal(cu_current(), x);
  DL_OK(dl_sync_push_dep(on(dev0, sx), on(dev1, DL_SYNC_STREAM_LEGACY)));
  assert_last("wait", CU_LEGACY_KIND, primary1);
  assert_ptr_equal(cu_current(), x);
  DL_OK(dl_sync_push_dep(on(dev1, DL_SYNC_STREAM_PER_THREAD), on(dev0, sx)));
  assert_last("record", CU_PER_THREAD_KIND, primary1);
  assert_last("wait", CU_STREAM_DEFAULT_KIND, x);
  assert_ptr_equal(cu_current(), x);
  DL_OK(dl_sync_export(on(dev0, sx), dl_sync_stream_arg_none()));
  assert_last("wait", CU_LEGACY_KIND, x);
  assert_ptr_equal(cu_current(), x);
  cu_set_current(primary0);
  DL_OK(dl_sync_shutdown()); /* the pooled events of x go before x does */
  cu_free_stream(sx);
  cu_free_stream(s1);
  CU_OK(cu_context_fn, "cuCtxDestroy", x);
}

/* (b) A created context and the primary context of one device: an ordering between their
   streams records on an event of the producer's own context (a pooled event of the other
   context is the driver's CUDA_ERROR_INVALID_HANDLE), in both directions and whichever is
   current; once warm, no event is made. */
static void test_driver_context_orderings_between_contexts_of_one_device(void **state) {
  (void)state;
  void *x = cu_new_context(0);
  void *sx = cu_stream_in(x), *sp = cu_new_stream();
  for (int round = 0; round < 2; round++) {
    void *caller = round == 0 ? primary0 : x;
    cu_set_current(caller);
    DL_OK(dl_sync_push_dep(on(dev0, sx), on(dev0, sp)));
    assert_last("record", CU_STREAM_DEFAULT_KIND, x);
    assert_last("wait", CU_STREAM_DEFAULT_KIND, primary0);
    DL_OK(dl_sync_push_dep(on(dev0, sp), on(dev0, sx)));
    assert_last("record", CU_STREAM_DEFAULT_KIND, primary0);
    assert_last("wait", CU_STREAM_DEFAULT_KIND, x);
    DL_OK(dl_sync_export(on(dev0, sx), dl_sync_stream_arg_int((int64_t)(intptr_t)sp)));
    DL_OK(dl_sync_export(on(dev0, sp), dl_sync_stream_arg_int((int64_t)(intptr_t)sx)));
    assert_ptr_equal(cu_current(), caller);
  }
  long created = counter("event_create"), records = counter("event_record");
  for (int i = 0; i < 50; i++) {
    cu_set_current(i % 2 == 0 ? primary0 : x);
    DL_OK(dl_sync_push_dep(on(dev0, sx), on(dev0, sp)));
    DL_OK(dl_sync_export(on(dev0, sp), dl_sync_stream_arg_int((int64_t)(intptr_t)sx)));
  }
  assert_int_equal(counter("event_create") - created, 0);
  assert_int_equal(counter("event_record") - records, 100);
  cu_set_current(primary0);
  DL_OK(dl_sync_shutdown());
  cu_free_stream(sx);
  cu_free_stream(sp);
  CU_OK(cu_context_fn, "cuCtxDestroy", x);
}

/* (c) A thread with no context current: orderings between created streams, and between
   device 0's default streams, leave it with none. The thread makes no cmocka call. */
typedef struct thread_run {
  cu_context_out_fn get_current;
  void *a, *b;
  int before_code, after_code;
  void *before, *after[3];
  int status[3];
  char message[3][256];
} thread_run;

static void *thread_orders(void *arg) {
  thread_run *run = arg;
  run->before_code = run->get_current(&run->before);
  run->status[0] = dl_sync_push_dep(on(dev0, run->a), on(dev0, run->b));
  snprintf(run->message[0], sizeof run->message[0], "%s", dl_sync_last_error());
  run->get_current(&run->after[0]);
  run->status[1] =
      dl_sync_export(on(dev0, run->a), dl_sync_stream_arg_int((int64_t)(intptr_t)run->b));
  snprintf(run->message[1], sizeof run->message[1], "%s", dl_sync_last_error());
  run->get_current(&run->after[1]);
  run->status[2] = dl_sync_export(on(dev0, DL_SYNC_STREAM_PER_THREAD), dl_sync_stream_arg_none());
  snprintf(run->message[2], sizeof run->message[2], "%s", dl_sync_last_error());
  run->after_code = run->get_current(&run->after[2]);
  return NULL;
}

static void test_driver_context_a_thread_without_one_is_left_without(void **state) {
  (void)state;
  thread_run run = {.get_current = (cu_context_out_fn)cu_entry("cuCtxGetCurrent", CU_API),
                    .a = cu_new_stream(),
                    .b = cu_new_stream(),
                    .before = (void *)1,
                    .after = {(void *)1, (void *)1, (void *)1}};
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, thread_orders, &run), 0);
  assert_int_equal(pthread_join(thread, NULL), 0);
  assert_int_equal(run.before_code, 0);
  assert_null(run.before);
  for (int i = 0; i < 3; i++) {
    if (run.status[i] != DL_SYNC_OK)
      fail_msg("ordering %d: %s: %s", i, dl_sync_status_name(run.status[i]), run.message[i]);
    if (run.after[i] != NULL)
      fail_msg("after ordering %d the thread has context %p", i, run.after[i]);
  }
  assert_int_equal(run.after_code, 0);
  assert_last("record", CU_PER_THREAD_KIND, primary0);
  assert_last("wait", CU_LEGACY_KIND, primary0);
  assert_ptr_equal(cu_current(), primary0);
  cu_free_stream(run.a);
  cu_free_stream(run.b);
}

/* (d) The pool statistics of device 0 count the events of all its contexts. */
static void test_driver_context_pool_stats_count_every_context(void **state) {
  (void)state;
  void *x = cu_new_context(0);
  void *sx = cu_stream_in(x), *sp = cu_new_stream();
  dl_sync_pool_stats before, after;
  DL_OK(dl_sync_pool_stats_get(backend, 0, &before));
  long created = counter("event_create");
  DL_OK(dl_sync_push_dep(on(dev0, sx), on(dev0, sp)));
  assert_last("record", CU_STREAM_DEFAULT_KIND, x);
  DL_OK(dl_sync_push_dep(on(dev0, sp), on(dev0, sx)));
  assert_last("record", CU_STREAM_DEFAULT_KIND, primary0);
  DL_OK(dl_sync_pool_stats_get(backend, 0, &after));
  long made = counter("event_create") - created;
  print_message("device 0: %ld events made, pool stats: created %llu, idle %llu, acquired %llu\n",
                made, (unsigned long long)after.created, (unsigned long long)after.idle,
                (unsigned long long)after.acquired);
  assert_true(made >= 2); /* one context's event cannot record on the other's stream */
  assert_int_equal(after.created - before.created, made);
  assert_int_equal(after.acquired - before.acquired, 2);
  assert_int_equal(after.outstanding, 0);
  DL_OK(dl_sync_shutdown());
  cu_free_stream(sx);
  cu_free_stream(sp);
  CU_OK(cu_context_fn, "cuCtxDestroy", x);
}

/* Over the whole group: dlsync ran cuInit once and asked for legacy-stream entry points
   only (a per-thread lookup would hand a real driver's _ptsz forms out). */
static void test_driver_initialized_once_with_legacy_entry_points(void **state) {
  (void)state;
  assert_int_equal(counter("init") - suite_inits, 1);
  assert_int_equal(counter("proc_address_per_thread"), 0);
  assert_int_equal(counter("destructor_calls"), 0);
}

/* ---- no device, the stub library, a driver older than 12.0, no driver ---- */

static void test_driver_unusable_is_enodev(void **state) {
  const char *mode = *state;
  const char *path = getenv("DL_SYNC_LIBCUDA");
  int no_device = strcmp(mode, "no-device") == 0, stub = strcmp(mode, "stub") == 0,
      old = strcmp(mode, "old-driver") == 0;
  const char *mentions[2] = {path, NULL};
  if (no_device) mentions[0] = "CUDA_ERROR_NO_DEVICE";
  if (stub) mentions[0] = "CUDA_ERROR_STUB_LIBRARY";
  if (old) {
    mentions[0] = "cuGetProcAddress_v2";
    mentions[1] = "older than CUDA 12.0";
  }
  /* A driver that loads but whose device cannot be used (FAKE_CUDA_INIT_ERROR,
     FAKE_CUDA_COMPUTE_PROHIBITED): the driver's words, and the library is reported. */
  int loads = no_device || strcmp(mode, "unusable") == 0;
  if (strcmp(mode, "unusable") == 0) {
    mentions[0] = getenv("EXPECT_MENTION");
    mentions[1] = getenv("EXPECT_MENTION_TOO");
  }
  assert_int_equal(dl_sync_export(on(dev0, DL_SYNC_STREAM_PER_THREAD), dl_sync_stream_arg_none()),
                   DL_SYNC_ENODEV);
  print_message("export: %s\n", dl_sync_last_error());
  assert_error_mentions(mentions[0]);
  assert_error_mentions(mentions[1]);
  dl_sync_runtime_info info;
  int status = dl_sync_backend_runtime(backend, &info);
  print_message("dl_sync_backend_runtime: %s: %s\n", dl_sync_status_name(status),
                status == DL_SYNC_OK ? info.path : dl_sync_last_error());
  if (loads) return; /* the driver itself loaded */
  assert_int_equal(status, DL_SYNC_ENODEV);
  assert_error_mentions(mentions[0]);
  assert_error_mentions(mentions[1]);
}

/* No override: the driver found by its SONAME on the library path (as on a machine with
   the NVIDIA driver installed), reported by the file's own path. */
static void test_driver_found_by_its_soname(void **state) {
  (void)state;
  dl_sync_runtime_info info;
  assert_int_equal(dl_sync_backend_runtime(backend, &info), DL_SYNC_ENODEV);
  assert_error_mentions("libcuda.so.1 is not loaded yet");
  DL_OK(dl_sync_export(on(dev0, DL_SYNC_STREAM_PER_THREAD), dl_sync_stream_arg_int(1)));
  DL_OK(dl_sync_backend_runtime(backend, &info));
  print_message("driver found: %s, version %d\n", info.path, (int)info.version);
  assert_int_equal(info.version, expected_version);
  assert_true(info.path[0] == '/');
  const char *base = strrchr(info.path, '/') + 1;
  assert_string_equal(base, "libcuda.so.1");
  DL_OK(dl_sync_shutdown());
}

static int driver_main(const char *mode) {
  backend = dl_sync_cuda_backend();
  dev0 = (DLDevice){kDLCUDA, 0};
  dev1 = (DLDevice){kDLCUDA, 1};
  if (strcmp(mode, "device") == 0) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_driver_first_call_loads_and_initializes_it, driver_teardown),
        cmocka_unit_test_teardown(test_driver_reports_the_library, driver_teardown),
        cmocka_unit_test_teardown(test_stream_argument_table, driver_teardown),
        cmocka_unit_test_teardown(test_steady_state_is_one_record_and_one_wait, driver_teardown),
        cmocka_unit_test_teardown(test_another_devices_default_stream_records_there,
                                  driver_teardown),
        cmocka_unit_test_teardown(test_capture_same_graph_survives_a_warm_pool, driver_teardown),
        cmocka_unit_test_teardown(test_capture_two_graphs_are_refused_and_both_survive,
                                  driver_teardown),
        cmocka_unit_test_teardown(test_capture_external_wait_is_owned_by_the_graph,
                                  driver_teardown),
        cmocka_unit_test_teardown(test_capture_external_wait_on_another_devices_default_stream,
                                  driver_teardown),
        cmocka_unit_test_teardown(test_capture_legacy_consumer_of_a_capturing_producer_is_refused,
                                  driver_teardown),
        cmocka_unit_test_teardown(test_driver_bad_device_is_a_backend_error, driver_teardown),
        cmocka_unit_test_teardown(test_driver_context_created_context_stays_current,
                                  driver_teardown),
        cmocka_unit_test_teardown(test_driver_context_orderings_between_contexts_of_one_device,
                                  driver_teardown),
        cmocka_unit_test_teardown(test_driver_context_a_thread_without_one_is_left_without,
                                  driver_teardown),
        cmocka_unit_test_teardown(test_driver_context_pool_stats_count_every_context,
                                  driver_teardown),
        cmocka_unit_test_teardown(test_driver_initialized_once_with_legacy_entry_points,
                                  driver_teardown),
    };
    return cmocka_run_group_tests_name("driver_device", tests, driver_setup, NULL);
  }
  if (strcmp(mode, "soname") == 0) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_driver_found_by_its_soname)};
    return cmocka_run_group_tests_name("driver_soname", tests, NULL, NULL);
  }
  if (strcmp(mode, "no-device") == 0 || strcmp(mode, "stub") == 0 ||
      strcmp(mode, "unusable") == 0 || strcmp(mode, "old-driver") == 0 ||
      strcmp(mode, "no-driver") == 0) {
    const struct CMUnitTest tests[] = {
        {"test_driver_unusable_is_enodev", test_driver_unusable_is_enodev, NULL, NULL,
         (void *)mode},
    };
    return cmocka_run_group_tests_name("driver_unusable", tests, NULL, NULL);
  }
  fprintf(stderr, "unknown driver mode %s\n", mode);
  return 2;
}

int main(int argc, char **argv) {
  if (argc != 4 || (strcmp(argv[1], "cuda") != 0 && strcmp(argv[1], "hip") != 0 &&
                    strcmp(argv[1], "driver") != 0)) {
    fprintf(stderr,
            "usage: %s cuda|hip VERSION device|no-device|no-runtime|bad-override|found\n"
            "       %s driver VERSION device|no-device|stub|old-driver|no-driver|soname\n",
            argv[0], argv[0]);
    return 2;
  }
  cuda = strcmp(argv[1], "cuda") == 0;
  driver = strcmp(argv[1], "driver") == 0;
  expected_version = strtol(argv[2], NULL, 10);
  const char *mode = argv[3];
  if (driver) return driver_main(mode);
  if (getenv("TEST_LOAD_FIRST") != NULL && test_library_open(getenv("TEST_LOAD_FIRST")) == NULL) {
    fprintf(stderr, "cannot load %s: %s\n", getenv("TEST_LOAD_FIRST"), test_library_error());
    return 1;
  }
  /* The CUDA runtime backend is an explicit choice: installed for the CUDA types here. */
  backend = cuda ? dl_sync_cudart_backend() : dl_sync_hip_backend();
  if (strcmp(mode, "version-error") == 0) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_failed_version_query_leaves_no_last_error)};
    return cmocka_run_group_tests_name("version_error", tests, NULL, NULL);
  }
  if (strcmp(mode, "failed-bind") == 0) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_a_failed_bind_hides_nothing)};
    return cmocka_run_group_tests_name("failed_bind", tests, NULL, NULL);
  }
  if (cuda && dl_sync_set_backend(kDLCUDA, backend) != DL_SYNC_OK) return 1;
  dev0 = (DLDevice){cuda ? kDLCUDA : kDLROCM, 0};
  dev1 = (DLDevice){dev0.device_type, 1};
  dl_sync_runtime_info info;
  if (dl_sync_backend_runtime(backend, &info) == DL_SYNC_OK)
    runtime = test_library_loaded(info.path);

  if (strcmp(mode, "no-runtime") == 0) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_runtime_is_enodev_and_nothing_is_loaded),
        cmocka_unit_test(test_a_forked_child_can_search_again)};
    return cmocka_run_group_tests_name("no_runtime", tests, NULL, NULL);
  }
  if (strcmp(mode, "bad-override") == 0) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_override_is_enodev_naming_the_path)};
    return cmocka_run_group_tests_name("bad_override", tests, NULL, NULL);
  }
  if (strcmp(mode, "found") == 0) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_found_the_expected_runtime)};
    return cmocka_run_group_tests_name("found", tests, NULL, NULL);
  }
  if (runtime == NULL) {
    fprintf(stderr, "no runtime: %s\n", dl_sync_last_error());
    return 1;
  }
  if (strcmp(mode, "no-device") == 0) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_no_device_is_enodev)};
    return cmocka_run_group_tests_name("no_device", tests, NULL, NULL);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_reports_the_runtime_it_loaded, teardown),
      cmocka_unit_test_teardown(test_stream_argument_table, teardown),
      cmocka_unit_test_teardown(test_steady_state_is_one_record_and_one_wait, teardown),
      cmocka_unit_test_teardown(test_another_devices_default_stream_records_there, teardown),
      cmocka_unit_test_teardown(test_capture_same_graph_survives_a_warm_pool, teardown),
      cmocka_unit_test_teardown(test_capture_two_graphs_are_refused_and_both_survive, teardown),
      cmocka_unit_test_teardown(test_capture_external_wait_is_owned_by_the_graph, teardown),
      cmocka_unit_test_teardown(test_capture_external_wait_on_another_devices_default_stream,
                                teardown),
      cmocka_unit_test_teardown(test_capture_legacy_consumer_of_a_capturing_producer_is_refused,
                                teardown),
      cmocka_unit_test_teardown(test_failures_reported_as_statuses_leave_no_last_error, teardown),
      cmocka_unit_test_teardown(test_asking_about_events_leaves_another_threads_capture, teardown),
      cmocka_unit_test_teardown(test_a_deferred_release_asks_its_streams_id_once, teardown),
  };
  return cmocka_run_group_tests_name("device", tests, NULL, NULL);
}
