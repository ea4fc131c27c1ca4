/*
 * The black-box suite over one runtime library, loaded through dlsync's own loader:
 *   test_runtimes cuda|hip <expected version> device|no-device|no-runtime|bad-override|found
 * "found" checks which library the loader picks by itself (no override): the one already
 * loaded in the process (TEST_LOAD_FIRST, loaded by the test before dlsync looks), else
 * the newest SONAME on the library path.
 * The ctest entries run it over each fake runtime (tests/runtimes/CMakeLists.txt) with
 * DL_SYNC_CUDART / DL_SYNC_HIP, FAKE_GPU_DEVICES and, for no-runtime, a preload that
 * hides every runtime SONAME. The suite talks to the runtime by its real entry points
 * (dlsym on the library dlsync reports) plus the fakes' fake_gpu_* counters.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "dlsync/dlsync.h"
#include "../support/error_message.h"

static int cuda;
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

/* The runtime's own entry point prefix + name, e.g. "cuda" "StreamCreate". */
static void *entry(const char *name) {
  char full[96];
  snprintf(full, sizeof full, "%s%s", cuda ? "cuda" : "hip", name);
  void *address = dlsym(runtime, full);
  if (address == NULL) fail_msg("the runtime lacks %s", full);
  return address;
}

#define CALL(type, name, ...) ((type)entry(name))(__VA_ARGS__)

static long counter(const char *name) {
  counter_fn read = (counter_fn)dlsym(runtime, "fake_gpu_counter");
  assert_non_null(read);
  return read(name);
}

static void *new_stream(void) {
  void *stream = NULL;
  assert_int_equal(CALL(stream_create_fn, "StreamCreate", &stream), 0);
  return stream;
}

static int capture_status(void *stream) {
  int status = -1;
  assert_int_equal(CALL(is_capturing_fn, "StreamIsCapturing", stream, &status), 0);
  return status;
}

static void end_capture(void *stream, int expect_graph) {
  void *graph = NULL;
  CALL(capture_end_fn, "StreamEndCapture", stream, &graph);
  CALL(last_error_fn, "GetLastError");
  if (expect_graph) assert_non_null(graph);
  if (graph != NULL) CALL(graph_destroy_fn, "GraphDestroy", graph);
}

/* Begins a capture on a and pulls b into it, as a framework forks work in a capture. */
static void capture_both(void *a, void *b) {
  assert_int_equal(CALL(capture_begin_fn, "StreamBeginCapture", a, 0), 0);
  void *fork = NULL;
  assert_int_equal(CALL(event_create_fn, "EventCreateWithFlags", &fork, 2u), 0);
  assert_int_equal(CALL(record_fn, "EventRecord", fork, a), 0);
  assert_int_equal(CALL(wait_fn, "StreamWaitEvent", b, fork, 0u), 0);
  assert_int_equal(CALL(event_destroy_fn, "EventDestroy", fork), 0);
}

static dl_sync_stream on(DLDevice device, void *handle) {
  return dl_sync_stream_view(device, handle);
}

#define DL_OK(call)                                                                      \
  do {                                                                                   \
    int status_ = (call);                                                                \
    if (status_ != DL_SYNC_OK)                                                           \
      fail_msg("%s: %s: %s", #call, dl_sync_status_name(status_), dl_sync_last_error()); \
  } while (0)

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
  struct row *rows = cuda ? rows_cuda : rows_hip;
  size_t count = cuda ? sizeof rows_cuda / sizeof *rows : sizeof rows_hip / sizeof *rows;
  for (size_t i = 0; i < count; i++) {
    long records = counter("event_record"), waits = counter("stream_wait");
    int status = dl_sync_export(on(dev0, a), rows[i].arg);
    if (status != rows[i].status)
      fail_msg("%s: %s, expected %s: %s", rows[i].what, dl_sync_status_name(status),
               dl_sync_status_name(rows[i].status), dl_sync_last_error());
    assert_int_equal(counter("event_record") - records, rows[i].records);
    assert_int_equal(counter("stream_wait") - waits, rows[i].records);
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
  for (int i = 0; i < 100; i++) {
    DL_OK(dl_sync_export(on(dev0, a), dl_sync_stream_arg_int((int64_t)(intptr_t)b)));
    DL_OK(dl_sync_push_dep(on(dev0, b), on(dev0, a)));
  }
  assert_int_equal(counter("event_create") - created, 0);
  assert_int_equal(counter("event_record") - records, 200);
  assert_int_equal(counter("stream_wait") - waits, 200);
  assert_int_equal(counter("event_query") - queries, 0);
  assert_int_equal(counter("timing_events"), 0);
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
}

static void test_capture_two_graphs_are_refused_and_both_survive(void **state) {
  (void)state;
  void *a = new_stream(), *c = new_stream();
  assert_int_equal(CALL(capture_begin_fn, "StreamBeginCapture", a, 0), 0);
  assert_int_equal(CALL(capture_begin_fn, "StreamBeginCapture", c, 0), 0);
  assert_int_equal(dl_sync_push_dep(on(dev0, a), on(dev0, c)), DL_SYNC_ECAPTURE);
  assert_error_mentions("two different graphs");
  assert_int_equal(capture_status(a), 1);
  assert_int_equal(capture_status(c), 1);
  end_capture(a, 1);
  end_capture(c, 1);
}

static int has_external_waits(void) {
  return cuda || expected_version >= 70000000;
}

/* Producer not capturing, consumer capturing: an external wait node in the consumer's
   graph, which owns the event until it is destroyed. Without external waits (ROCm before
   6.4.2) a plain wait would silently drop the dependency: ENOTSUP, capture untouched. */
static void test_capture_external_wait_is_owned_by_the_graph(void **state) {
  (void)state;
  void *a = new_stream(), *b = new_stream();
  assert_int_equal(CALL(capture_begin_fn, "StreamBeginCapture", b, 0), 0);
  int status = dl_sync_push_dep(on(dev0, a), on(dev0, b));
  if (!has_external_waits()) {
    assert_int_equal(status, DL_SYNC_ENOTSUP);
    assert_error_mentions("external event-wait nodes");
    assert_int_equal(capture_status(b), 1);
    end_capture(b, 1);
    return;
  }
  if (status != DL_SYNC_OK) fail_msg("%s", dl_sync_last_error());
  assert_int_equal(capture_status(b), 1);
  void *graph = NULL;
  assert_int_equal(CALL(capture_end_fn, "StreamEndCapture", b, &graph), 0);
  assert_non_null(graph);
  external_waits_fn external_waits =
      (external_waits_fn)dlsym(runtime, "fake_gpu_graph_external_waits");
  assert_int_equal(external_waits(graph), 1);
  dl_sync_pool_stats stats;
  DL_OK(dl_sync_pool_stats_get(backend, 0, &stats));
  assert_int_equal(stats.outstanding, 1);
  assert_int_equal(CALL(graph_destroy_fn, "GraphDestroy", graph), 0);
  assert_int_equal(counter("user_objects_live"), 0);
  DL_OK(dl_sync_pool_stats_get(backend, 0, &stats));
  assert_int_equal(stats.outstanding, 0);
}

/* The consumer is the per-thread default stream of device 1, capturing: the graph user
   object must be made while device 1 is current, where that handle names it. */
static void test_capture_external_wait_on_another_devices_default_stream(void **state) {
  (void)state;
  if (!has_external_waits()) skip();
  void *a = new_stream();
  assert_int_equal(CALL(set_device_fn, "SetDevice", 1), 0);
  assert_int_equal(CALL(capture_begin_fn, "StreamBeginCapture", (void *)2, 0), 0);
  assert_int_equal(CALL(set_device_fn, "SetDevice", 0), 0);
  DL_OK(dl_sync_push_dep(on(dev0, a), on(dev1, DL_SYNC_STREAM_PER_THREAD)));
  assert_int_equal(CALL(set_device_fn, "SetDevice", 1), 0);
  assert_int_equal(capture_status((void *)2), 1);
  end_capture((void *)2, 1);
  assert_int_equal(CALL(set_device_fn, "SetDevice", 0), 0);
}

static void test_capture_legacy_consumer_of_a_capturing_producer_is_refused(void **state) {
  (void)state;
  void *a = new_stream(), *b = new_stream();
  capture_both(a, b);
  assert_int_equal(dl_sync_export(on(dev0, a), dl_sync_stream_arg_none()), DL_SYNC_ECAPTURE);
  assert_error_mentions("legacy default stream");
  assert_int_equal(capture_status(a), 1);
  end_capture(a, 1);
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

static void test_no_runtime_is_enodev_naming_what_was_tried(void **state) {
  (void)state;
  dl_sync_runtime_info info;
  assert_int_equal(dl_sync_backend_runtime(backend, &info), DL_SYNC_ENODEV);
  print_message("%s\n", dl_sync_last_error());
  assert_error_mentions(cuda ? "libcudart.so.13: " : "libamdhip64.so.7: ");
  assert_error_mentions(cuda ? "libcudart.so.12: " : "libamdhip64.so.5: ");
  assert_error_mentions("hidden by the test");
  assert_int_equal(dl_sync_push_dep(on(dev0, DL_SYNC_STREAM_PER_THREAD), on(dev0, NULL)),
                   DL_SYNC_ENODEV);
  assert_error_mentions(cuda ? "no CUDA runtime" : "no HIP runtime");
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

static void test_found_the_expected_runtime(void **state) {
  (void)state;
  dl_sync_runtime_info info;
  DL_OK(dl_sync_backend_runtime(backend, &info));
  print_message("%s runtime found: %s, version %d\n", backend->name, info.path, (int)info.version);
  assert_int_equal(info.version, expected_version);
}

int main(int argc, char **argv) {
  if (argc != 4 || (strcmp(argv[1], "cuda") != 0 && strcmp(argv[1], "hip") != 0)) {
    fprintf(stderr, "usage: %s cuda|hip VERSION device|no-device|no-runtime|bad-override|found\n",
            argv[0]);
    return 2;
  }
  cuda = strcmp(argv[1], "cuda") == 0;
  expected_version = strtol(argv[2], NULL, 10);
  const char *mode = argv[3];
  if (getenv("TEST_LOAD_FIRST") != NULL && dlopen(getenv("TEST_LOAD_FIRST"), RTLD_NOW) == NULL) {
    fprintf(stderr, "cannot load %s: %s\n", getenv("TEST_LOAD_FIRST"), dlerror());
    return 1;
  }
  backend = cuda ? dl_sync_cuda_backend() : dl_sync_hip_backend();
  dev0 = (DLDevice){cuda ? kDLCUDA : kDLROCM, 0};
  dev1 = (DLDevice){dev0.device_type, 1};
  dl_sync_runtime_info info;
  if (dl_sync_backend_runtime(backend, &info) == DL_SYNC_OK)
    runtime = dlopen(info.path, RTLD_NOW | RTLD_NOLOAD);

  if (strcmp(mode, "no-runtime") == 0) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_runtime_is_enodev_naming_what_was_tried)};
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
      cmocka_unit_test_teardown(test_capture_same_graph_survives_a_warm_pool, teardown),
      cmocka_unit_test_teardown(test_capture_two_graphs_are_refused_and_both_survive, teardown),
      cmocka_unit_test_teardown(test_capture_external_wait_is_owned_by_the_graph, teardown),
      cmocka_unit_test_teardown(test_capture_external_wait_on_another_devices_default_stream,
                                teardown),
      cmocka_unit_test_teardown(test_capture_legacy_consumer_of_a_capturing_producer_is_refused,
                                teardown),
      cmocka_unit_test_teardown(test_failures_reported_as_statuses_leave_no_last_error, teardown),
  };
  return cmocka_run_group_tests_name("device", tests, NULL, NULL);
}
