/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fault injection: a backend that wraps the simulated device and fails its N-th call.
 * For every call of every scenario in turn: dlsync returns the status the runtime's error
 * maps to, names the failed call, leaks no event, leaves the pool usable, and a later
 * exchange is still ordered (no event left recorded that it could wait on by mistake).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "dlsync/dlsync.h"
#include "ordering/ordering.h"

static const dl_sync_backend *inner;
static dl_sync_backend faulty;
static long calls, fail_at;
static dl_sync_op failed_op;
static int failed_code;

/* The error each operation fails with: one of each status kind. */
static int error_for(dl_sync_op op) {
  switch (op) {
    case DL_SYNC_OP_EVENT_CREATE:
      return DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION;
    case DL_SYNC_OP_CAPTURE_INFO:
      return DL_SYNC_SIM_ERROR_CAPTURE_IMPLICIT;
    case DL_SYNC_OP_STREAM_WAIT_EXTERNAL:
      return DL_SYNC_SIM_ERROR_CAPTURE_ISOLATION;
    default:
      return DL_SYNC_SIM_ERROR_INVALID_HANDLE;
  }
}

static int inject(dl_sync_op op) {
  if (++calls != fail_at) return 0;
  failed_op = op;
  failed_code = error_for(op);
  return failed_code;
}

#define FORWARD(op, call)                \
  do {                                   \
    int injected = inject(op);           \
    return injected ? injected : (call); \
  } while (0)

static int f_get_device(void *c, int32_t *d) {
  (void)c;
  FORWARD(DL_SYNC_OP_GET_DEVICE, inner->get_device(inner->ctx, d));
}
static int f_set_device(void *c, int32_t d) {
  (void)c;
  FORWARD(DL_SYNC_OP_SET_DEVICE, inner->set_device(inner->ctx, d));
}
static int f_event_create(void *c, void **e) {
  (void)c;
  FORWARD(DL_SYNC_OP_EVENT_CREATE, inner->event_create(inner->ctx, e));
}
static int f_event_destroy(void *c, void *e) {
  (void)c;
  return inner->event_destroy(inner->ctx, e);
}
static int f_event_record(void *c, void *e, void *s) {
  (void)c;
  FORWARD(DL_SYNC_OP_EVENT_RECORD, inner->event_record(inner->ctx, e, s));
}
static int f_stream_wait(void *c, void *s, void *e) {
  (void)c;
  FORWARD(DL_SYNC_OP_STREAM_WAIT, inner->stream_wait(inner->ctx, s, e));
}
static int f_stream_wait_external(void *c, void *s, void *e) {
  (void)c;
  FORWARD(DL_SYNC_OP_STREAM_WAIT_EXTERNAL, inner->stream_wait_external(inner->ctx, s, e));
}
static int f_event_synchronize(void *c, void *e) {
  (void)c;
  FORWARD(DL_SYNC_OP_EVENT_SYNCHRONIZE, inner->event_synchronize(inner->ctx, e));
}
static int f_event_query(void *c, void *e, int *done) {
  (void)c;
  FORWARD(DL_SYNC_OP_EVENT_QUERY, inner->event_query(inner->ctx, e, done));
}
static int f_capture_info(void *c, void *s, dl_sync_capture_info *o) {
  (void)c;
  FORWARD(DL_SYNC_OP_CAPTURE_INFO, inner->capture_info(inner->ctx, s, o));
}
static int f_graph_retain(void *c, void *s, void *o, void (*r)(void *)) {
  (void)c;
  int injected = inject(DL_SYNC_OP_GRAPH_RETAIN);
  if (injected) r(o); /* the contract: ownership moves even on failure */
  return injected ? injected : inner->graph_retain(inner->ctx, s, o, r);
}

static void install_faulty(void) {
  inner = dl_sync_sim_backend();
  faulty = *inner;
  faulty.name = "faulty-sim";
  faulty.get_device = f_get_device;
  faulty.set_device = f_set_device;
  faulty.event_create = f_event_create;
  faulty.event_destroy = f_event_destroy;
  faulty.event_record = f_event_record;
  faulty.stream_wait = f_stream_wait;
  faulty.stream_wait_external = f_stream_wait_external;
  faulty.event_synchronize = f_event_synchronize;
  faulty.event_query = f_event_query;
  faulty.capture_info = f_capture_info;
  faulty.graph_retain = f_graph_retain;
  dl_sync_sim_reset();
  assert_int_equal(dl_sync_set_backend(kDLCUDA, &faulty), DL_SYNC_OK);
}

/* Streams of one scenario run: the producer writes on a, then the step under test. */
typedef struct world {
  dl_sync_sim_stream *a, *b;
  pattern data;
  DLManagedTensorVersioned tensor;
  dl_sync_sim_graph *graph;
} world;

typedef int (*scenario)(world *w);

static int plain_dep(world *w) {
  return dl_sync_push_dep(sim_view(w->a, 0), sim_view(w->b, 0));
}

static int export_to_legacy_of_other_device(world *w) {
  /* src's legacy stream on device 1 while device 0 is current: device switches. */
  (void)w;
  return dl_sync_export(sim_view(NULL, 1), dl_sync_stream_arg_int(2));
}

static int dep_into_capture(world *w) {
  if (dl_sync_sim_stream_begin_capture(w->b, DL_SYNC_SIM_CAPTURE_GLOBAL)) return -100;
  int status = plain_dep(w);
  dl_sync_sim_stream_end_capture(w->b, &w->graph); /* a failed wait may invalidate it */
  return status;
}

static int tensor_record_and_wait(world *w) {
  w->tensor = (DLManagedTensorVersioned){.version = {1, 3}};
  w->tensor.dl_tensor.device = (DLDevice){kDLCUDA, 0};
  int status = dl_sync_tensor_record(&w->tensor, sim_view(w->a, 0));
  if (status == DL_SYNC_OK) status = dl_sync_tensor_wait(&w->tensor, sim_view(w->b, 0));
  if (status == DL_SYNC_OK) status = dl_sync_tensor_synchronize(&w->tensor);
  return status;
}

static int run(scenario step, world *w, long fail) {
  calls = 0;
  fail_at = fail;
  memset(w, 0, sizeof *w);
  /* A failed device restore leaves another device current, as in CUDA: the streams below
     are device 0's (the event record of a stream of another device is refused). */
  dl_sync_sim_set_device(0);
  dl_sync_sim_stream_create(&w->a, DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_stream_create(&w->b, DL_SYNC_SIM_STREAM_NON_BLOCKING);
  launch_producer(w->a, &w->data, 1);
  return step(w);
}

static void cleanup(world *w) {
  if (w->tensor.deleter != NULL) w->tensor.deleter(&w->tensor);
  if (w->graph != NULL) dl_sync_sim_graph_destroy(w->graph);
  dl_sync_sim_device_synchronize();
  dl_sync_sim_stream_destroy(w->a);
  dl_sync_sim_stream_destroy(w->b);
}

/* After a failure the pool must still order a plain exchange. */
static void assert_still_ordered(void) {
  world w;
  dl_sync_sim_race_reset();
  int status = run(plain_dep, &w, 0);
  if (status != DL_SYNC_OK) fail_msg("%s", dl_sync_last_error());
  launch_consumer(w.b, &w.data, 1);
  cleanup(&w);
  assert_int_equal(dl_sync_sim_race_count(), 0);
  assert_int_equal(w.data.mismatches, 0);
}

static void assert_no_outstanding_events(void) {
  for (int32_t d = 0; d < 2; d++) {
    dl_sync_pool_stats stats;
    assert_int_equal(dl_sync_pool_stats_get(&faulty, d, &stats), DL_SYNC_OK);
    assert_int_equal(stats.outstanding, 0);
    assert_int_equal(stats.idle + stats.destroyed, stats.created);
  }
}

static int injection_points;

static void inject_everywhere(const char *name, scenario step) {
  install_faulty();
  world w;
  assert_int_equal(dl_sync_shutdown(), DL_SYNC_OK); /* empty pools: the creation path too */
  if (run(step, &w, 0) != DL_SYNC_OK)
    fail_msg("%s fails without injection: %s", name, dl_sync_last_error());
  long clean_calls = calls;
  cleanup(&w);
  for (long n = 1; n <= clean_calls; n++) {
    assert_int_equal(dl_sync_shutdown(), DL_SYNC_OK);
    int status = run(step, &w, n);
    if (calls < n) { /* the scenario ended before call n */
      cleanup(&w);
      continue;
    }
    injection_points++;
    int expected = inner->error_status(inner->ctx, failed_code);
    if (status != expected)
      fail_msg("%s, call %ld (%s) failed with %s: got %s (%s)", name, n,
               faulty.call_names[failed_op], dl_sync_sim_error_name(failed_code),
               dl_sync_status_name(status), dl_sync_last_error());
    if (strstr(dl_sync_last_error(), faulty.call_names[failed_op]) == NULL)
      fail_msg("%s, call %ld: message does not name %s: %s", name, n, faulty.call_names[failed_op],
               dl_sync_last_error());
    cleanup(&w);
    fail_at = 0;
    assert_no_outstanding_events();
    assert_still_ordered();
  }
  print_message("%s: %ld runtime calls, each failed in turn\n", name, clean_calls);
  dl_sync_sim_reset();
  dl_sync_shutdown();
  dl_sync_set_backend(kDLCUDA, NULL);
}

static void test_faults_in_a_cross_stream_dependency(void **state) {
  (void)state;
  inject_everywhere("push_dep", plain_dep);
}

static void test_faults_with_device_switches(void **state) {
  (void)state;
  inject_everywhere("export to another device's legacy stream", export_to_legacy_of_other_device);
}

static void test_faults_in_a_dependency_into_a_capture(void **state) {
  (void)state;
  inject_everywhere("push_dep into a capture", dep_into_capture);
}

static void test_faults_in_tensor_events(void **state) {
  (void)state;
  inject_everywhere("tensor record, wait, synchronize", tensor_record_and_wait);
  print_message("%d injection points in all\n", injection_points);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_faults_in_a_cross_stream_dependency),
      cmocka_unit_test(test_faults_with_device_switches),
      cmocka_unit_test(test_faults_in_a_dependency_into_a_capture),
      cmocka_unit_test(test_faults_in_tensor_events),
  };
  return cmocka_run_group_tests_name("fault_injection", tests, NULL, NULL);
}
