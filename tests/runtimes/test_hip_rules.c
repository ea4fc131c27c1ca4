/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What dlsync does about the HIP runtime's own rules, release by release, over the fake
 * HIP runtimes (fake_amdhip64.c; DL_SYNC_HIP names the one to load):
 *   test_hip_rules ROCM_RELEASE [TEST_NAME]
 * ROCM_RELEASE is the release the fake models (major * 10000 + minor * 100 + patch); a
 * test name runs that test alone (the ones that leave a release pending for good run in a
 * process of their own). Each rule is shown with its negative control: the raw runtime
 * call, or the HIP backend without its own stream (own_stream_create), does what dlsync
 * avoids.
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
#include <cmocka.h>

#include "dlsync/dlsync.h"
#include "../support/dynamic_library.h"
#include "../support/error_message.h"
#include "../support/phases.h"

static long release; /* the ROCm release modelled */
static void *runtime;
static const DLDevice dev0 = {kDLROCM, 0};

#define AT_LEAST(major, minor, patch) (release >= (major)*10000 + (minor)*100 + (patch))

enum { MODE_GLOBAL = 0, MODE_RELAXED = 2 };
enum { WAIT_EXTERNAL = 0x1 };
enum { NONE = 0, ACTIVE = 1, INVALIDATED = 2 };

typedef int (*stream_create_fn)(void **stream);
typedef int (*handle_fn)(void *handle);
typedef int (*begin_fn)(void *stream, int mode);
typedef int (*end_fn)(void *stream, void **graph);
typedef int (*is_capturing_fn)(void *stream, int *status);
typedef int (*record_fn)(void *event, void *stream);
typedef int (*wait_fn)(void *stream, void *event, unsigned flags);
typedef int (*event_create_fn)(void **event, unsigned flags);
typedef int (*int_fn)(void);
typedef int (*set_device_fn)(int device);
typedef int (*host_fn_fn)(void *stream, void (*fn)(void *), void *data);
typedef long (*counter_fn)(const char *name);
typedef const char *(*nodes_fn)(const void *graph, char *text, size_t size);
typedef void (*hold_fn)(int hold);

static void *sym(const char *name) {
  void *address = test_library_symbol(runtime, name);
  if (address == NULL) fail_msg("the fake runtime lacks %s", name);
  return address;
}

#define HIP(type, name, ...) (((type)sym(name))(__VA_ARGS__))
#define HIP_OK(type, name, ...)                              \
  do {                                                       \
    int code_ = HIP(type, name, __VA_ARGS__);                \
    if (code_ != 0) fail_msg("%s answered %d", name, code_); \
  } while (0)

static long counter(const char *name) {
  return ((counter_fn)sym("fake_gpu_counter"))(name);
}

static void *new_stream(void) {
  void *stream = NULL;
  HIP_OK(stream_create_fn, "hipStreamCreate", &stream);
  return stream;
}

static void *new_event(void) {
  void *event = NULL;
  HIP_OK(event_create_fn, "hipEventCreateWithFlags", &event, 2u);
  return event;
}

static int status_of(void *stream) {
  int status = -1;
  HIP_OK(is_capturing_fn, "hipStreamIsCapturing", stream, &status);
  return status;
}

/* Ends the capture on stream (begun by this thread); its graph, NULL when invalidated. */
static void *end_capture(void *stream) {
  void *graph = NULL;
  HIP(end_fn, "hipStreamEndCapture", stream, &graph);
  HIP(int_fn, "hipGetLastError");
  return graph;
}

static void destroy_graph(void *graph) {
  if (graph != NULL) HIP_OK(handle_fn, "hipGraphDestroy", graph);
}

static dl_sync_stream on(void *handle) {
  return dl_sync_stream_view(dev0, handle);
}

/* A tensor on device 0 whose deleter counts its calls in *deleted. */
static void count_deletion(DLManagedTensorVersioned *tensor) {
  (*(int *)tensor->manager_ctx)++;
}

static DLManagedTensorVersioned tensor_counting(int *deleted) {
  DLManagedTensorVersioned tensor = {
      .version = {1, 3}, .manager_ctx = deleted, .deleter = count_deletion};
  tensor.dl_tensor.device = dev0;
  return tensor;
}

static void nothing_to_do(void *data) {
  (void)data;
}

static void end_other_capture(void);

static int teardown(void **state) {
  (void)state;
  end_other_capture();
  HIP(int_fn, "hipGetLastError");
  ((hold_fn)sym("fake_hip_hold_work"))(0);
  dl_sync_set_backend(kDLROCM, NULL);
  int status = dl_sync_shutdown();
  if (status != DL_SYNC_OK) fprintf(stderr, "dl_sync_shutdown: %s\n", dl_sync_last_error());
  return status == DL_SYNC_OK ? 0 : -1;
}

/* The HIP backend without its own stream (own_stream_create): a release's event is the one
   recorded on the consumer's stream, asked whatever that stream does, as before dlsync knew
   better (the negative control of the release rules). */
static dl_sync_backend unguarded;

static void install_unguarded(void) {
  unguarded = *dl_sync_hip_backend();
  unguarded.own_stream_create = NULL;
  unguarded.own_stream_check = NULL;
  unguarded.own_stream_destroy = NULL;
  DL_OK(dl_sync_set_backend(kDLROCM, &unguarded));
}

/* ---- another thread's global-mode capture -------------------------------------------- */

/* A thread that begins a global-mode capture on its stream, waits to be told, and ends it:
   whether its graph survived what the main thread did meanwhile. */
typedef struct capturer {
  pthread_t thread;
  phases steps; /* 1 begin the capture, 2 end it */
  void *stream;
  int begin_code;
  void *graph;
} capturer;

static void *capture_until_told(void *arg) {
  capturer *c = arg;
  phases_await(&c->steps, 1);
  c->begin_code = HIP(begin_fn, "hipStreamBeginCapture", c->stream, MODE_GLOBAL);
  phases_done(&c->steps, 1);
  phases_await(&c->steps, 2);
  c->graph = end_capture(c->stream);
  phases_done(&c->steps, 2);
  return NULL;
}

/* The one running, which a failed test's teardown still ends (its thread waits). */
static capturer other;
static int other_running;

static void capturer_start(capturer *c) {
  *c = (capturer){.steps = PHASES_INIT, .stream = new_stream()};
  other_running = 1;
  assert_int_equal(pthread_create(&c->thread, NULL, capture_until_told, c), 0);
  phases_tell(&c->steps, 1);
  assert_int_equal(c->begin_code, 0);
}

/* Tells the thread to end its capture and joins it: pthread_join's answer. */
static int capturer_join(capturer *c) {
  phases_tell(&c->steps, 2);
  int joined = pthread_join(c->thread, NULL);
  other_running = 0;
  return joined;
}

/* Ends the thread's capture: whether it came back with a graph. */
static int capturer_finish(capturer *c) {
  assert_int_equal(capturer_join(c), 0);
  int survived = c->graph != NULL;
  destroy_graph(c->graph);
  HIP_OK(handle_fn, "hipStreamDestroy", c->stream);
  return survived;
}

static void end_other_capture(void) {
  if (other_running) capturer_join(&other);
}

/* A release's query (dl_sync_release_poll), a tensor's synchronization and the
   synchronization of dl_sync_shutdown are made in the relaxed mode: another thread's
   global-mode capture survives them on every release. 5.7 and 6.0 refuse a synchronization
   while any thread captures in the global mode, whatever the caller's mode (their
   StreamCaptureOngoing reads no thread mode): the tensor's synchronization says so
   (ECAPTURE), and shutdown leaves the release waiting (a capture's refusal is asked again)
   until a poll after the capture finishes it. */
static void test_another_threads_global_capture_survives_dlsync(void **state) {
  (void)state;
  int refused = AT_LEAST(5, 7, 0) && !AT_LEAST(6, 1, 0);
  void *p = new_stream(), *c = new_stream();
  int deleted = 0, produced = 0;
  DLManagedTensorVersioned made = tensor_counting(&produced);
  DL_OK(dl_sync_tensor_record(&made, on(p)));
  DLManagedTensorVersioned released = tensor_counting(&deleted);
  assert_int_equal(dl_sync_tensor_release(&released, on(c)), DL_SYNC_RELEASE_DEFERRED);
  capturer_start(&other);
  assert_int_equal(dl_sync_release_poll(), 1);
  assert_int_equal(deleted, 1);
  assert_int_equal(dl_sync_tensor_synchronize(&made), refused ? DL_SYNC_ECAPTURE : DL_SYNC_OK);
  DLManagedTensorVersioned later = tensor_counting(&deleted);
  assert_int_equal(dl_sync_tensor_release(&later, on(c)), DL_SYNC_RELEASE_DEFERRED);
  assert_int_equal(dl_sync_shutdown(), refused ? DL_SYNC_EBACKEND : DL_SYNC_OK);
  if (refused) assert_error_mentions("1 releases still wait");
  assert_int_equal(deleted, refused ? 1 : 2);
  assert_true(capturer_finish(&other));
  if (refused) assert_int_equal(dl_sync_release_poll(), 1);
  assert_int_equal(deleted, 2);
  made.deleter(&made);
  HIP_OK(handle_fn, "hipStreamDestroy", p);
  HIP_OK(handle_fn, "hipStreamDestroy", c);
}

/* The control: the same calls made raw, in the global mode (the default), invalidate the
   other thread's capture where the runtime checks the mode: a synchronization from 6.2
   (StreamCaptureOngoing), a query from 7.0; 5.7 to 6.1 refuse the synchronization without
   invalidating anything; 5.2 to 5.5 check neither. */
static void test_raw_calls_in_the_global_mode_invalidate_it(void **state) {
  (void)state;
  void *c = new_stream(), *event = new_event();
  HIP_OK(record_fn, "hipEventRecord", event, c);
  struct {
    const char *call;
    int invalidates;
    int refuses;
  } rows[] = {{"hipEventQuery", AT_LEAST(7, 0, 0), AT_LEAST(7, 0, 0)},
              {"hipEventSynchronize", AT_LEAST(6, 2, 0), AT_LEAST(5, 7, 0)}};
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    capturer_start(&other);
    int code = HIP(handle_fn, rows[i].call, event);
    HIP(int_fn, "hipGetLastError");
    int survived = capturer_finish(&other);
    print_message("%s in the global mode: %d, the other thread's capture %s\n", rows[i].call, code,
                  survived ? "survived" : "was invalidated");
    assert_int_equal(survived, !rows[i].invalidates);
    assert_int_equal(code, rows[i].refuses ? 900 : 0); /* StreamCaptureUnsupported */
  }
  HIP_OK(handle_fn, "hipEventDestroy", event);
  HIP_OK(handle_fn, "hipStreamDestroy", c);
}

/* ---- the consumer stream captures, or is destroyed, after a deferred release ----------- */

/* A deferred release's event is recorded on a stream of dlsync's own, after a wait for the
   consumer's work (dlsync/backend.h own_stream_create), on every release: the runtime's
   query reads only that stream. */
static int own_streams(void) {
  return (int)counter("streams_created");
}

/* A deferred release's consumer stream that begins capturing: the release is finished
   while the capture goes on, and the capture survives, on every release (from 6.2 to 7.2.0
   a query of an event recorded on the capturing stream would invalidate it). */
static void test_a_release_finishes_while_its_stream_captures(void **state) {
  (void)state;
  void *c = new_stream();
  int deleted = 0;
  DLManagedTensorVersioned tensor = tensor_counting(&deleted);
  assert_int_equal(dl_sync_tensor_release(&tensor, on(c)), DL_SYNC_RELEASE_DEFERRED);
  HIP_OK(begin_fn, "hipStreamBeginCapture", c, MODE_GLOBAL);
  assert_int_equal(dl_sync_release_poll(), 1);
  assert_int_equal(deleted, 1);
  assert_int_equal(dl_sync_release_pending(), 0);
  assert_int_equal(status_of(c), ACTIVE);
  void *graph = end_capture(c);
  assert_non_null(graph);
  destroy_graph(graph);
  HIP_OK(handle_fn, "hipStreamDestroy", c);
}

/* Another thread begins a capture on the consumer's stream between the release's record
   there (E1) and its own stream's wait for it. From 5.7 HIP refuses that wait
   (hipErrorStreamCaptureIsolation: the event's recording stream captures now; clr rocm-6.2.0
   hip_stream.cpp hipStreamWaitEvent_common), and asking about E1 would break the capture:
   the consumer captures now, so the release goes to the capture's graph, as one a moment
   later would, and its deleter runs once the graph is gone. 5.5 has no such check: the wait
   is enqueued and the release deferred. */
static dl_sync_backend capture_before_wait;
static void *capture_target; /* the stream another thread begins a capture on, once */

static void begin_the_other_threads_capture(void) {
  if (capture_target == NULL) return;
  HIP_OK(begin_fn, "hipStreamBeginCapture", capture_target, MODE_RELAXED);
  capture_target = NULL;
}

static int wait_after_a_capture_begins(void *ctx, void *stream, void *event) {
  begin_the_other_threads_capture();
  return dl_sync_hip_backend()->stream_wait(ctx, stream, event);
}

static void test_a_capture_begun_before_the_own_streams_wait_keeps_the_tensor(void **state) {
  (void)state;
  capture_before_wait = *dl_sync_hip_backend();
  capture_before_wait.stream_wait = wait_after_a_capture_begins;
  DL_OK(dl_sync_set_backend(kDLROCM, &capture_before_wait));
  void *c = new_stream();
  capture_target = c;
  int deleted = 0;
  DLManagedTensorVersioned tensor = tensor_counting(&deleted);
  int refused = AT_LEAST(5, 7, 0);
  assert_int_equal(dl_sync_tensor_release(&tensor, on(c)),
                   refused ? DL_SYNC_RELEASE_GRAPH : DL_SYNC_RELEASE_DEFERRED);
  assert_null(capture_target);
  assert_int_equal(status_of(c), ACTIVE);
  void *graph = end_capture(c);
  assert_non_null(graph); /* the capture survived */
  assert_int_equal(deleted, 0);
  destroy_graph(graph);
  assert_int_equal(dl_sync_release_poll(), 1);
  assert_int_equal(deleted, 1);
  HIP_OK(handle_fn, "hipStreamDestroy", c);
}

/* Another thread begins a capture on the consumer's stream right before the release's
   record there (E1): the record joins the capture, and a wait for a captured event pulls
   the waiting stream into that capture (clr rocm-6.2.0 hip_stream.cpp
   hipStreamWaitEvent_common, IsEventCaptured): dlsync's own stream would capture, its
   later events would be queried inside a capture, and the consumer's capture would end
   with a stream never joined. The release sees the capture after its record and goes to
   the capture's graph; the own stream stays out of it (a release after finishes). */
static int record_after_a_capture_begins(void *ctx, void *event, void *stream) {
  if (stream == capture_target) begin_the_other_threads_capture();
  return dl_sync_hip_backend()->event_record(ctx, event, stream);
}

static void test_a_capture_begun_before_the_record_keeps_the_own_stream_out(void **state) {
  (void)state;
  capture_before_wait = *dl_sync_hip_backend();
  capture_before_wait.event_record = record_after_a_capture_begins;
  DL_OK(dl_sync_set_backend(kDLROCM, &capture_before_wait));
  const dl_sync_backend *hip = dl_sync_hip_backend();
  int kept = hip->available(hip->ctx, DL_SYNC_OP_GRAPH_RETAIN); /* else ENOTSUP, the caller's */
  void *c = new_stream(), *d = new_stream();
  capture_target = c;
  int deleted = 0, later_deleted = 0;
  DLManagedTensorVersioned tensor = tensor_counting(&deleted);
  DLManagedTensorVersioned later = tensor_counting(&later_deleted);
  assert_int_equal(dl_sync_tensor_release(&tensor, on(c)),
                   kept ? DL_SYNC_RELEASE_GRAPH : DL_SYNC_ENOTSUP);
  assert_null(capture_target);
  assert_int_equal(dl_sync_tensor_release(&later, on(d)), DL_SYNC_RELEASE_DEFERRED);
  assert_int_equal(dl_sync_release_poll(), 1); /* the own stream captures nothing */
  assert_int_equal(later_deleted, 1);
  assert_int_equal(status_of(c), ACTIVE);
  void *graph = end_capture(c);
  assert_non_null(graph); /* the capture survived */
  assert_int_equal(deleted, 0);
  destroy_graph(graph);
  if (!kept) assert_int_equal(dl_sync_tensor_release(&tensor, on(c)), DL_SYNC_RELEASE_DEFERRED);
  assert_int_equal(dl_sync_release_poll(), 1);
  assert_int_equal(deleted, 1);
  HIP_OK(handle_fn, "hipStreamDestroy", c);
  HIP_OK(handle_fn, "hipStreamDestroy", d);
}

/* The control: asked on the consumer's stream, the event's query invalidates the consumer's
   capture from 6.2 to 7.2.0 (hipErrorCapturedEvent); 5.x and 7.2.1 ask without harm (an
   event recorded outside the capture). The capture's refusal is no final answer: the
   release is asked again once the capture ended, and finished (dl_sync_shutdown). */
static void test_unguarded_the_query_invalidates_the_capture(void **state) {
  (void)state;
  int invalidates = AT_LEAST(6, 2, 0) && !AT_LEAST(7, 2, 1);
  install_unguarded();
  void *c = new_stream();
  int deleted = 0;
  DLManagedTensorVersioned tensor = tensor_counting(&deleted);
  assert_int_equal(dl_sync_tensor_release(&tensor, on(c)), DL_SYNC_RELEASE_DEFERRED);
  HIP_OK(begin_fn, "hipStreamBeginCapture", c, MODE_GLOBAL);
  dl_sync_release_poll();
  assert_int_equal(status_of(c), invalidates ? INVALIDATED : ACTIVE);
  void *graph = end_capture(c);
  assert_int_equal(graph != NULL, !invalidates);
  destroy_graph(graph);
  assert_int_equal(deleted, !invalidates);
  DL_OK(dl_sync_shutdown());
  assert_int_equal(deleted, 1);
  HIP_OK(handle_fn, "hipStreamDestroy", c);
}

/* Whether dlsync asks about the stream a tensor's event was recorded on before it
   synchronizes the event (event_synchronize_disturbs): where hipEventSynchronize reads that
   stream, from 5.7 (5.2 to 5.5 read none: hipamd rocm-5.5.0 src/hip_event.cpp
   hipEventSynchronize). */
static int stream_asked_first(void) {
  return AT_LEAST(5, 7, 0);
}

/* A tensor synchronized while the stream its event was recorded on captures: from 6.2 to
   7.2.0 hipEventSynchronize would invalidate that capture. The owner record names the
   stream (minor 4): dlsync asks it first (from 5.7, where hipEventSynchronize reads it) and
   refuses (ECAPTURE); the capture survives, and once it ended the synchronization is made. The
   control: the record cut to minor 3, which does not say the stream, is synchronized
   unasked, and breaks the capture from 6.2 to 7.2.0. */
static void test_a_tensor_synchronize_keeps_its_streams_capture(void **state) {
  (void)state;
  int asks = stream_asked_first(), invalidates = AT_LEAST(6, 2, 0) && !AT_LEAST(7, 2, 1);
  for (int control = 0; control < 2; control++) {
    void *p = new_stream();
    int produced = 0;
    DLManagedTensorVersioned made = tensor_counting(&produced);
    DL_OK(dl_sync_tensor_record(&made, on(p)));
    dl_sync_tensor_event_owner *record = made.manager_ctx;
    if (control) record->size = offsetof(dl_sync_tensor_event_owner, reuse_default_stream);
    HIP_OK(begin_fn, "hipStreamBeginCapture", p, MODE_GLOBAL);
    int status = dl_sync_tensor_synchronize(&made);
    int breaks = control && invalidates;
    assert_int_equal(status_of(p), breaks ? INVALIDATED : ACTIVE);
    if (!control) assert_int_equal(status, asks ? DL_SYNC_ECAPTURE : DL_SYNC_OK);
    void *graph = end_capture(p);
    assert_int_equal(graph != NULL, !breaks);
    destroy_graph(graph);
    if (!control) DL_OK(dl_sync_tensor_synchronize(&made));
    made.deleter(&made);
    assert_int_equal(produced, 1);
    HIP_OK(handle_fn, "hipStreamDestroy", p);
  }
}

/* A deferred release's consumer stream destroyed: the release is finished without a read
   of that stream (from 5.7 HIP would read it to answer a query of an event recorded there;
   7.0 validates no handle), once, on every release. */
static void test_a_destroyed_consumer_stream_is_never_read(void **state) {
  (void)state;
  void *c = new_stream();
  int deleted = 0;
  DLManagedTensorVersioned tensor = tensor_counting(&deleted);
  assert_int_equal(dl_sync_tensor_release(&tensor, on(c)), DL_SYNC_RELEASE_DEFERRED);
  HIP_OK(handle_fn, "hipStreamDestroy", c);
  long reads = counter("destroyed_stream_reads");
  assert_int_equal(dl_sync_release_poll(), 1);
  DL_OK(dl_sync_shutdown());
  assert_int_equal(counter("destroyed_stream_reads") - reads, 0);
  assert_int_equal(dl_sync_release_pending(), 0);
  assert_int_equal(deleted, 1);
}

/* A deferred release keys its queue by the stream's hipStreamGetId where the runtime has it
   (7.1 on): asked once, of an explicit handle only (the null stream keeps its key). Catches:
   the HIP backend not binding hipStreamGetId, or the release asking a default stream's. */
static void test_a_deferred_release_asks_its_streams_id_once(void **state) {
  (void)state;
  void *c = new_stream();
  int deleted = 0;
  DLManagedTensorVersioned tensor = tensor_counting(&deleted);
  DLManagedTensorVersioned on_null = tensor_counting(&deleted);
  long asks = counter("stream_get_id");
  assert_int_equal(dl_sync_tensor_release(&tensor, on(c)), DL_SYNC_RELEASE_DEFERRED);
  assert_int_equal(counter("stream_get_id") - asks, AT_LEAST(7, 1, 0) ? 1 : 0);
  asks = counter("stream_get_id");
  assert_int_equal(dl_sync_tensor_release(&on_null, on(NULL)), DL_SYNC_RELEASE_DEFERRED);
  assert_int_equal(counter("stream_get_id") - asks, 0);
  assert_int_equal(dl_sync_release_poll(), 2);
  assert_int_equal(deleted, 2);
  HIP_OK(handle_fn, "hipStreamDestroy", c);
}

/* The control: asked on the consumer's stream, the query reads the destroyed stream from 6.2
   (5.x's query reads no stream). */
static void test_unguarded_the_query_reads_the_destroyed_stream(void **state) {
  (void)state;
  install_unguarded();
  void *c = new_stream();
  int deleted = 0;
  DLManagedTensorVersioned tensor = tensor_counting(&deleted);
  assert_int_equal(dl_sync_tensor_release(&tensor, on(c)), DL_SYNC_RELEASE_DEFERRED);
  HIP_OK(handle_fn, "hipStreamDestroy", c);
  long reads = counter("destroyed_stream_reads");
  dl_sync_release_poll();
  assert_int_equal(counter("destroyed_stream_reads") - reads, AT_LEAST(6, 2, 0) ? 1 : 0);
}

/* HIP 7.14's streams of a destroyed execution context answer every work or synchronization
   call with hipErrorStreamDetached (916; rocm-systems CHANGELOG): the stream is gone. The
   backend takes it as a final failure (not a capture's refusal, which would be asked
   again), and says it in dlsync's words. (No fake models execution contexts: no tagged
   source of them was read.) */
static void test_a_detached_stream_is_gone_in_dlsyncs_words(void **state) {
  (void)state;
  const dl_sync_backend *b = dl_sync_hip_backend();
  assert_int_equal(b->error_status(b->ctx, 916), DL_SYNC_EBACKEND);
  const char *said = b->error_string(b->ctx, 916);
  print_message("hipErrorStreamDetached: %s\n", said);
  assert_non_null(strstr(said, "execution context that was destroyed"));
  assert_non_null(strstr(said, "it is gone"));
}

/* dl_sync_shutdown synchronizes a release whose consumer stream was destroyed: from 5.7 a
   synchronization reads the event's recording stream (hipEventSynchronize, clr rocm-5.7.0),
   a query only from 6.2; the release's event is on dlsync's own stream, so nothing
   destroyed is read on any release. */
static void test_shutdown_reads_no_destroyed_consumer_stream(void **state) {
  (void)state;
  void *c = new_stream();
  int deleted = 0;
  DLManagedTensorVersioned tensor = tensor_counting(&deleted);
  assert_int_equal(dl_sync_tensor_release(&tensor, on(c)), DL_SYNC_RELEASE_DEFERRED);
  HIP_OK(handle_fn, "hipStreamDestroy", c);
  long reads = counter("destroyed_stream_reads");
  DL_OK(dl_sync_shutdown());
  assert_int_equal(counter("destroyed_stream_reads") - reads, 0);
  assert_int_equal(deleted, 1);
}

/* The control: synchronized on the consumer's stream, the event reads it from 5.7. */
static void test_unguarded_shutdown_reads_the_destroyed_stream(void **state) {
  (void)state;
  install_unguarded();
  void *c = new_stream();
  int deleted = 0;
  DLManagedTensorVersioned tensor = tensor_counting(&deleted);
  assert_int_equal(dl_sync_tensor_release(&tensor, on(c)), DL_SYNC_RELEASE_DEFERRED);
  HIP_OK(handle_fn, "hipStreamDestroy", c);
  long reads = counter("destroyed_stream_reads");
  dl_sync_shutdown();
  assert_int_equal(counter("destroyed_stream_reads") - reads, AT_LEAST(5, 7, 0) ? 1 : 0);
}

/* A release onto a thread's per-thread stream, finished by another thread: hipStreamPerThread
   names the calling thread's own stream (the control below), so the poller must name no
   per-thread stream: it asks only the event on dlsync's own stream. The poller's own
   per-thread stream captures meanwhile, and its capture survives. */
typedef struct per_thread_release {
  DLManagedTensorVersioned tensor;
  int deleted, status;
} per_thread_release;

static void *release_on_per_thread_stream(void *arg) {
  per_thread_release *r = arg;
  r->tensor = tensor_counting(&r->deleted);
  r->status = dl_sync_tensor_release(&r->tensor, on(DL_SYNC_STREAM_PER_THREAD));
  return NULL;
}

static void test_another_threads_per_thread_release_is_finished_without_its_handle(void **state) {
  (void)state;
  static per_thread_release r;
  memset(&r, 0, sizeof r);
  pthread_t releaser;
  assert_int_equal(pthread_create(&releaser, NULL, release_on_per_thread_stream, &r), 0);
  assert_int_equal(pthread_join(releaser, NULL), 0);
  assert_int_equal(r.status, DL_SYNC_RELEASE_DEFERRED);
  HIP_OK(begin_fn, "hipStreamBeginCapture", DL_SYNC_STREAM_PER_THREAD, MODE_RELAXED);
  long uses = counter("per_thread_handle_uses");
  assert_int_equal(dl_sync_release_poll(), 1);
  assert_int_equal(counter("per_thread_handle_uses") - uses, 0);
  assert_int_equal(r.deleted, 1);
  assert_int_equal(status_of(DL_SYNC_STREAM_PER_THREAD), ACTIVE);
  void *graph = end_capture(DL_SYNC_STREAM_PER_THREAD);
  assert_non_null(graph);
  destroy_graph(graph);
}

/* The control: the handle names the asking thread's own per-thread stream. Asked from this
   thread while this thread's per-thread stream captures, it answers "capturing" whatever
   another thread's per-thread stream does. */
static void *capture_state_of_own_per_thread_stream(void *arg) {
  *(int *)arg = status_of(DL_SYNC_STREAM_PER_THREAD);
  return NULL;
}

static void test_the_per_thread_handle_names_the_asking_threads_stream(void **state) {
  (void)state;
  HIP_OK(begin_fn, "hipStreamBeginCapture", DL_SYNC_STREAM_PER_THREAD, MODE_RELAXED);
  int seen_there = -1;
  pthread_t asker;
  assert_int_equal(
      pthread_create(&asker, NULL, capture_state_of_own_per_thread_stream, &seen_there), 0);
  assert_int_equal(pthread_join(asker, NULL), 0);
  assert_int_equal(seen_there, NONE);
  assert_int_equal(status_of(DL_SYNC_STREAM_PER_THREAD), ACTIVE);
  destroy_graph(end_capture(DL_SYNC_STREAM_PER_THREAD));
}

/* ---- hipDeviceReset without dl_sync_shutdown ---------------------------------------- */

/* hipDeviceReset destroys the device's streams and no event: dlsync's pooled events stay
   valid and are used again (no event is made, none used destroyed). The reset destroys
   dlsync's own stream too: a poll checks it (hipStreamGetCaptureInfo_v2 validates the
   handle) and never reads it again; the release pending there fails for good, on every
   release (no version may say that asking is safe), and shutdown reports it. A release
   after the reset gets a new own stream and is finished. A tensor event recorded on a
   stream the reset destroyed is not synchronized where HIP would read that stream (from
   5.7; its record names the stream): refused, and nothing reads it. Its own process: the
   release never finishes. */
static void test_a_device_reset_keeps_the_pools(void **state) {
  (void)state;
  void *a = new_stream(), *b = new_stream(), *c = new_stream();
  DL_OK(dl_sync_push_dep(on(a), on(b)));
  int deleted = 0, produced = 0, deleted_after = 0;
  DLManagedTensorVersioned made = tensor_counting(&produced);
  DL_OK(dl_sync_tensor_record(&made, on(a)));
  DLManagedTensorVersioned released = tensor_counting(&deleted);
  assert_int_equal(dl_sync_tensor_release(&released, on(c)), DL_SYNC_RELEASE_DEFERRED);
  HIP_OK(int_fn, "hipDeviceReset");
  long reads = counter("destroyed_stream_reads"), created = counter("event_create");
  long own = own_streams();
  assert_int_equal(dl_sync_release_poll(), 0);
  assert_int_equal(counter("destroyed_stream_reads") - reads, 0);
  void *a2 = new_stream(), *b2 = new_stream();
  DL_OK(dl_sync_push_dep(on(a2), on(b2)));
  DL_OK(dl_sync_export(on(b2), dl_sync_stream_arg_int((int64_t)(intptr_t)a2)));
  assert_int_equal(counter("event_create") - created, 0);
  DLManagedTensorVersioned after = tensor_counting(&deleted_after);
  assert_int_equal(dl_sync_tensor_release(&after, on(b2)), DL_SYNC_RELEASE_DEFERRED);
  assert_int_equal(own_streams() - own, 1);
  assert_int_equal(dl_sync_release_poll(), 1);
  assert_int_equal(deleted_after, 1);
  assert_int_equal(counter("destroyed_stream_reads") - reads, 0);
  /* the record names its stream: asked first, and refused where HIP would read it */
  assert_int_equal(dl_sync_tensor_synchronize(&made),
                   stream_asked_first() ? DL_SYNC_ECAPTURE : DL_SYNC_OK);
  assert_int_equal(counter("destroyed_stream_reads") - reads, 0);
  assert_int_equal(dl_sync_shutdown(), DL_SYNC_EBACKEND);
  assert_error_mentions("1 releases could not be finished");
  assert_int_equal(counter("destroyed_event_uses"), 0);
  assert_int_equal(deleted, 0);
  made.deleter(&made);
}

/* ---- the thread's last error ------------------------------------------------------- */

/* Where the runtime stores errors only (7.0; 6.4 with DEBUG_HIP_7_PREVIEW bit 0x1, which its
   version does not show), a caller's error survives a poll whose query answered
   hipErrorNotReady: dlsync consumes nothing there. Where every status is stored, dlsync's
   calls leave hipSuccess (the caller's error was overwritten by them, as by any call). */
static void test_a_not_ready_query_leaves_the_callers_error(void **state) {
  (void)state;
  const char *preview = getenv("DEBUG_HIP_7_PREVIEW");
  int errors_only =
      AT_LEAST(7, 0, 0) || (AT_LEAST(6, 4, 0) && preview != NULL && (atoi(preview) & 1));
  void *c = new_stream();
  int deleted = 0;
  DLManagedTensorVersioned tensor = tensor_counting(&deleted);
  ((hold_fn)sym("fake_hip_hold_work"))(1);
  assert_int_equal(dl_sync_tensor_release(&tensor, on(c)), DL_SYNC_RELEASE_DEFERRED);
  HIP(int_fn, "hipGetLastError");
  assert_int_equal(HIP(set_device_fn, "hipSetDevice", 99), 101); /* the caller's error */
  long queries = counter("event_query");
  assert_int_equal(dl_sync_release_poll(), 0);
  assert_int_equal(counter("event_query") - queries, 1); /* it answered hipErrorNotReady */
  int left = HIP(int_fn, "hipGetLastError");
  print_message("the caller's hipErrorInvalidDevice after the poll: %d (%s)\n", left,
                errors_only ? "errors only" : "every status");
  assert_int_equal(left, errors_only ? 101 : 0);
  ((hold_fn)sym("fake_hip_hold_work"))(0);
  assert_int_equal(dl_sync_release_poll(), 1);
  HIP_OK(handle_fn, "hipStreamDestroy", c);
}

/* The backend's first look at the runtime (made in main, before any test) asks whether it
   stores errors only with an error of its own making (hipThreadExchangeStreamCaptureMode
   with NULL: hipErrorInvalidValue), and clears it: the thread is left without an error on
   every release (where errors only are stored, the marker would otherwise stay). */
static int error_left_by_the_first_look = -1;

static void test_the_first_look_leaves_no_error(void **state) {
  (void)state;
  assert_int_equal(error_left_by_the_first_look, 0);
}

/* ---- a tensor recorded before its stream began capturing ---------------------------- */

/* Waiting on it is hipErrorStreamCaptureIsolation from 5.7 (legal on CUDA): ECAPTURE saying
   why and what to do, for dl_sync_tensor_wait and the group wait; the producer's capture
   is untouched. 5.x takes the wait. */
static void test_a_tensor_recorded_before_its_stream_captures_is_refused_saying_why(void **state) {
  (void)state;
  void *p = new_stream(), *c = new_stream();
  int produced = 0;
  DLManagedTensorVersioned made = tensor_counting(&produced);
  DL_OK(dl_sync_tensor_record(&made, on(p)));
  HIP_OK(begin_fn, "hipStreamBeginCapture", p, MODE_GLOBAL);
  int refused = AT_LEAST(5, 7, 0);
  int status = dl_sync_tensor_wait(&made, on(c));
  print_message("dl_sync_tensor_wait: %s: %s\n", dl_sync_status_name(status),
                status != DL_SYNC_OK ? dl_sync_last_error() : "");
  dl_sync_group group;
  DL_OK(dl_sync_group_init(&group, on(c)));
  DL_OK(dl_sync_group_add_tensor(&group, &made));
  int group_status = dl_sync_group_wait(&group);
  const char *group_message = group_status != DL_SYNC_OK ? dl_sync_last_error() : "";
  print_message("dl_sync_group_wait: %s: %s\n", dl_sync_status_name(group_status), group_message);
  if (refused) {
    assert_int_equal(group_status, DL_SYNC_ECAPTURE);
    assert_error_mentions("recorded on a stream that is now capturing");
    assert_error_mentions("record the tensor after the capture ends");
    assert_error_mentions("hipErrorStreamCaptureIsolation");
  }
  assert_int_equal(status, refused ? DL_SYNC_ECAPTURE : DL_SYNC_OK);
  assert_int_equal(group_status, status);
  assert_int_equal(status_of(p), ACTIVE);
  void *graph = end_capture(p);
  assert_non_null(graph);
  destroy_graph(graph);
  made.deleter(&made);
  HIP_OK(handle_fn, "hipStreamDestroy", p);
  HIP_OK(handle_fn, "hipStreamDestroy", c);
}

/* The message says so for dl_sync_tensor_wait too. */
static void test_the_tensor_wait_says_why(void **state) {
  (void)state;
  if (!AT_LEAST(5, 7, 0)) skip();
  void *p = new_stream(), *c = new_stream();
  int produced = 0;
  DLManagedTensorVersioned made = tensor_counting(&produced);
  DL_OK(dl_sync_tensor_record(&made, on(p)));
  HIP_OK(begin_fn, "hipStreamBeginCapture", p, MODE_GLOBAL);
  assert_int_equal(dl_sync_tensor_wait(&made, on(c)), DL_SYNC_ECAPTURE);
  assert_error_mentions("dl_sync_tensor_wait: the tensor's event");
  assert_error_mentions("exchange on the producer's stream");
  destroy_graph(end_capture(p));
  made.deleter(&made);
  HIP_OK(handle_fn, "hipStreamDestroy", p);
  HIP_OK(handle_fn, "hipStreamDestroy", c);
}

/* ---- hipStreamLegacy --------------------------------------------------------------- */

/* A view naming handle 1 (DL_SYNC_STREAM_LEGACY) on ROCm reaches the runtime as the null
   stream, for a wait, a record, a tensor record and a tensor wait: 6.2 refuses
   hipStreamLegacy, 6.3.0 and 6.3.1 crash on it. */
static void test_the_legacy_handle_reaches_the_runtime_as_the_null_stream(void **state) {
  (void)state;
  void *a = new_stream();
  long records = counter("null_stream_records"), waits = counter("null_stream_waits");
  DL_OK(dl_sync_push_dep(on(a), on(DL_SYNC_STREAM_LEGACY)));
  DL_OK(dl_sync_push_dep(on(DL_SYNC_STREAM_LEGACY), on(a)));
  int produced = 0;
  DLManagedTensorVersioned made = tensor_counting(&produced);
  DL_OK(dl_sync_tensor_record(&made, on(DL_SYNC_STREAM_LEGACY)));
  DL_OK(dl_sync_tensor_wait(&made, on(DL_SYNC_STREAM_LEGACY)));
  assert_int_equal(counter("null_stream_records") - records, 2);
  assert_int_equal(counter("null_stream_waits") - waits, 2);
  assert_int_equal(counter("legacy_handle_uses"), 0);
  made.deleter(&made);
  HIP_OK(handle_fn, "hipStreamDestroy", a);
}

/* The control: the fake sees the handle when it is passed, and 6.2 (and 5.x) refuse it. */
static void test_the_runtime_sees_hip_stream_legacy(void **state) {
  (void)state;
  void *event = new_event();
  long uses = counter("legacy_handle_uses");
  int code = HIP(record_fn, "hipEventRecord", event, (void *)1);
  HIP(int_fn, "hipGetLastError");
  assert_int_equal(counter("legacy_handle_uses") - uses, 1);
  assert_int_equal(code, AT_LEAST(6, 3, 2) ? 0 : 709); /* hipErrorContextIsDestroyed */
  HIP_OK(handle_fn, "hipEventDestroy", event);
}

/* ---- external event waits ---------------------------------------------------------- */

static const char *graph_nodes(void *graph, char *text, size_t size) {
  return ((nodes_fn)sym("fake_gpu_graph_nodes"))(graph, text, size);
}

/* From 6.4.2 a dependency into a capturing consumer is an event-wait node after the
   consumer's captured work, which the work captured next depends on, made with the graph
   calls; hipEventWaitExternal, whose implementation corrupts the heap, is never passed.
   Before 6.4.2: ENOTSUP. */
static void test_an_external_wait_node_follows_the_captured_work(void **state) {
  (void)state;
  void *a = new_stream(), *b = new_stream(), *d = new_stream();
  struct {
    const char *what;
    int fork; /* d joins b's capture, and both capture work before the wait */
    const char *nodes;
  } rows[] = {
      {"no captured work yet", 0, "0:wait 1:host<0"},
      {"one captured node", 0, "0:host 1:wait<0 2:host<1"},
      {"two branches joined", 1, "0:host 1:host 2:wait<0<1 3:host<2"},
  };
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
    HIP_OK(begin_fn, "hipStreamBeginCapture", b, MODE_GLOBAL);
    if (rows[i].fork) {
      void *fork = new_event(), *join = new_event();
      HIP_OK(record_fn, "hipEventRecord", fork, b);
      HIP_OK(wait_fn, "hipStreamWaitEvent", d, fork, 0u);
      HIP_OK(host_fn_fn, "hipLaunchHostFunc", b, nothing_to_do, NULL);
      HIP_OK(host_fn_fn, "hipLaunchHostFunc", d, nothing_to_do, NULL);
      HIP_OK(record_fn, "hipEventRecord", join, d);
      HIP_OK(wait_fn, "hipStreamWaitEvent", b, join, 0u);
      HIP_OK(handle_fn, "hipEventDestroy", fork);
      HIP_OK(handle_fn, "hipEventDestroy", join);
    } else if (i == 1) {
      HIP_OK(host_fn_fn, "hipLaunchHostFunc", b, nothing_to_do, NULL);
    }
    int status = dl_sync_push_dep(on(a), on(b));
    if (!AT_LEAST(6, 4, 2)) {
      assert_int_equal(status, DL_SYNC_ENOTSUP);
      destroy_graph(end_capture(b));
      continue;
    }
    if (status != DL_SYNC_OK) fail_msg("%s: %s", rows[i].what, dl_sync_last_error());
    HIP_OK(host_fn_fn, "hipLaunchHostFunc", b, nothing_to_do, NULL);
    void *graph = end_capture(b);
    assert_non_null(graph);
    char text[256];
    print_message("%s: %s\n", rows[i].what, graph_nodes(graph, text, sizeof text));
    assert_string_equal(graph_nodes(graph, text, sizeof text), rows[i].nodes);
    destroy_graph(graph);
  }
  assert_int_equal(counter("defective_external_wait_calls"), 0);
  assert_int_equal(counter("user_objects_live"), 0);
  HIP_OK(handle_fn, "hipStreamDestroy", a);
  HIP_OK(handle_fn, "hipStreamDestroy", b);
  HIP_OK(handle_fn, "hipStreamDestroy", d);
}

/* The control: hipEventWaitExternal itself reaches the defective node (no edge from the
   captured work) from 6.4.2, and is hipErrorInvalidValue before. */
static void test_hip_event_wait_external_is_what_the_fake_flags(void **state) {
  (void)state;
  void *a = new_stream(), *b = new_stream(), *event = new_event();
  HIP_OK(record_fn, "hipEventRecord", event, a);
  HIP_OK(begin_fn, "hipStreamBeginCapture", b, MODE_GLOBAL);
  HIP_OK(host_fn_fn, "hipLaunchHostFunc", b, nothing_to_do, NULL);
  long calls = counter("defective_external_wait_calls");
  int code = HIP(wait_fn, "hipStreamWaitEvent", b, event, (unsigned)WAIT_EXTERNAL);
  HIP(int_fn, "hipGetLastError");
  void *graph = end_capture(b);
  assert_non_null(graph);
  char text[256];
  graph_nodes(graph, text, sizeof text);
  print_message("hipStreamWaitEvent(hipEventWaitExternal): %d, nodes %s\n", code, text);
  if (AT_LEAST(6, 4, 2)) {
    assert_int_equal(code, 0);
    assert_int_equal(counter("defective_external_wait_calls") - calls, 1);
    assert_string_equal(text, "0:host 1:wait");
  } else {
    assert_int_equal(code, 1); /* hipErrorInvalidValue */
    assert_string_equal(text, "0:host");
  }
  destroy_graph(graph);
  HIP_OK(handle_fn, "hipEventDestroy", event);
  HIP_OK(handle_fn, "hipStreamDestroy", a);
  HIP_OK(handle_fn, "hipStreamDestroy", b);
}

#define TEST(name) cmocka_unit_test_teardown(name, teardown)

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s ROCM_RELEASE [TEST_NAME]\n", argv[0]);
    return 2;
  }
  release = strtol(argv[1], NULL, 10);
  dl_sync_runtime_info info;
  if (dl_sync_backend_runtime(dl_sync_hip_backend(), &info) != DL_SYNC_OK ||
      (runtime = test_library_loaded(info.path)) == NULL) {
    fprintf(stderr, "no HIP runtime: %s\n", dl_sync_last_error());
    return 1;
  }
  error_left_by_the_first_look = HIP(int_fn, "hipGetLastError");
  if (argc > 2) cmocka_set_test_filter(argv[2]);
  const struct CMUnitTest tests[] = {
      TEST(test_another_threads_global_capture_survives_dlsync),
      TEST(test_raw_calls_in_the_global_mode_invalidate_it),
      TEST(test_a_release_finishes_while_its_stream_captures),
      TEST(test_a_capture_begun_before_the_own_streams_wait_keeps_the_tensor),
      TEST(test_a_capture_begun_before_the_record_keeps_the_own_stream_out),
      TEST(test_a_destroyed_consumer_stream_is_never_read),
      TEST(test_a_deferred_release_asks_its_streams_id_once),
      TEST(test_unguarded_the_query_invalidates_the_capture),
      TEST(test_unguarded_the_query_reads_the_destroyed_stream),
      TEST(test_a_tensor_synchronize_keeps_its_streams_capture),
      TEST(test_a_not_ready_query_leaves_the_callers_error),
      TEST(test_the_first_look_leaves_no_error),
      TEST(test_a_detached_stream_is_gone_in_dlsyncs_words),
      TEST(test_shutdown_reads_no_destroyed_consumer_stream),
      TEST(test_unguarded_shutdown_reads_the_destroyed_stream),
      TEST(test_another_threads_per_thread_release_is_finished_without_its_handle),
      TEST(test_the_per_thread_handle_names_the_asking_threads_stream),
      TEST(test_a_tensor_recorded_before_its_stream_captures_is_refused_saying_why),
      TEST(test_the_tensor_wait_says_why),
      TEST(test_the_legacy_handle_reaches_the_runtime_as_the_null_stream),
      TEST(test_the_runtime_sees_hip_stream_legacy),
      TEST(test_an_external_wait_node_follows_the_captured_work),
      TEST(test_hip_event_wait_external_is_what_the_fake_flags),
      /* This one leaves a release failed for good: it runs alone (TEST_NAME). */
      cmocka_unit_test(test_a_device_reset_keeps_the_pools),
  };
  if (argc <= 2) cmocka_set_skip_filter("test_a_device_reset*");
  return cmocka_run_group_tests_name("hip_rules", tests, NULL, NULL);
}
