/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Release ordering on the simulated device: a consumer releases a tensor while its kernel
 * still reads it (held behind a gate), and the producer's stream-ordered pool hands the
 * block to a new write at once. With dl_sync_tensor_release the write waits for the read
 * (a participating producer), or the deleter waits for it (any other producer, a graph);
 * the negative controls call the deleter directly and are caught by the race checker and
 * by value, every time (the gate holds the read until the write ran).
 */
#define _POSIX_C_SOURCE 200809L /* pthread barriers */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#ifndef _WIN32 /* fork */
#include <sys/wait.h>
#endif
#include <unistd.h>
#include <cmocka.h>

#include "dlsync/dlsync.h"
#include "ordering/ordering.h"
#include "support/error_message.h"

static const DLDevice cuda0 = {kDLCUDA, 0};

/* A stream-ordered pool of one block, as cudaMallocAsync's: "The allocation must not be
   accessed after stream execution reaches the free" (cudaFreeAsync), and "Basic stream
   ordering allows future work submitted into the same stream to use the allocation"
   (cudaMallocAsync): a block freed on stream S is the next allocation on S, at once.
   The pool is thread safe, as the runtime's is: a deferred deleter runs on whichever
   thread's call finds the consumer's read done, while another thread frees into it. */
typedef struct block_pool {
  pattern *free_block;
  void *free_stream;
} block_pool;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;

static void pool_free(block_pool *pool, pattern *block, void *stream) {
  pthread_mutex_lock(&pool_lock);
  pool->free_block = block;
  pool->free_stream = stream;
  pthread_mutex_unlock(&pool_lock);
}

static pattern *pool_alloc(block_pool *pool, void *stream) {
  pthread_mutex_lock(&pool_lock);
  pattern *block = NULL;
  if (pool->free_block != NULL && pool->free_stream == stream) {
    block = pool->free_block;
    pool->free_block = NULL;
  }
  pthread_mutex_unlock(&pool_lock);
  return block;
}

/* The producer's tensor: its deleter frees the block on the producer's stream. */
typedef struct producer_tensor {
  DLManagedTensorVersioned tensor;
  block_pool *pool;
  pattern *block;
  void *stream;
  atomic_int deleted;
} producer_tensor;

static void free_on_producer_stream(DLManagedTensorVersioned *t) {
  producer_tensor *p = (producer_tensor *)((char *)t - offsetof(producer_tensor, tensor));
  pool_free(p->pool, p->block, p->stream);
  atomic_fetch_add(&p->deleted, 1);
}

static void make_tensor(producer_tensor *p, block_pool *pool, pattern *block, void *stream) {
  memset(p, 0, sizeof *p);
  p->tensor = (DLManagedTensorVersioned){.version = {1, 3}, .deleter = free_on_producer_stream};
  p->tensor.dl_tensor.device = cuda0;
  p->pool = pool;
  p->block = block;
  p->stream = stream;
}

enum { DIRECT, PARTICIPATING, FOREIGN };

typedef struct outcome {
  int released; /* dl_sync_tensor_release's result, or -100 for a direct deleter call */
  int deleted_before_the_read_ended;
  uint64_t races;
  int64_t mismatches;
} outcome;

/* A writes the block (value 1), the consumer B reads it behind a gate, then releases the
   tensor; A allocates again at once and writes 2 into the same block; the gate opens. */
static outcome reuse_after_release(int producer_kind) {
  static pattern block;
  block = (pattern){.racy = producer_kind == DIRECT};
  block_pool pool = {0};
  dl_sync_sim_stream *a, *b;
  CHECK_SIM(dl_sync_sim_stream_create(&a, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(dl_sync_sim_stream_create(&b, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  producer_tensor p;
  make_tensor(&p, &pool, &block, a);
  CHECK_SIM(launch_producer(a, &block, 1));
  if (producer_kind == PARTICIPATING)
    CHECK_DL(dl_sync_tensor_record_reuse(&p.tensor, sim_view(a, 0), sim_view(a, 0)));
  CHECK_DL(dl_sync_export(sim_view(a, 0), dl_sync_stream_arg_int((int64_t)(intptr_t)b)));
  CHECK_SIM(launch_gate(b));
  CHECK_SIM(launch_consumer(b, &block, 1));
  outcome out = {.released = -100};
  if (producer_kind == DIRECT)
    p.tensor.deleter(&p.tensor);
  else
    out.released = dl_sync_tensor_release(&p.tensor, sim_view(b, 0));
  if (out.released < 0 && out.released != -100) fail_msg("release: %s", dl_sync_last_error());
  out.deleted_before_the_read_ended = atomic_load(&p.deleted);
  if (producer_kind == FOREIGN) assert_int_equal(dl_sync_release_poll(), 0); /* still read */
  pattern *again = pool_alloc(&pool, a);
  if (again != NULL) CHECK_SIM(launch_producer(a, again, 2)); /* the pool's next user */
  /* Without the dependency, the reuse write lands while the read is held: then the read
     sees it every time. (With it, A waits for B: A cannot be waited for here.) */
  if (producer_kind == DIRECT) CHECK_SIM(dl_sync_sim_stream_synchronize(a));
  open_gate();
  if (producer_kind == FOREIGN) {
    /* The deleter runs once a later call finds the read done. The wait is bounded by time
       (30 s), not by a count of tries that a loaded machine could use up. */
    struct timespec ms = {0, 1000000};
    for (int i = 0; i < 30000 && dl_sync_release_poll() == 0; i++) nanosleep(&ms, NULL);
    assert_int_equal(atomic_load(&p.deleted), 1);
    again = pool_alloc(&pool, a);
    assert_non_null(again);
    CHECK_SIM(launch_producer(a, again, 2));
  }
  CHECK_SIM(dl_sync_sim_device_synchronize());
  dl_sync_sim_host_access("test reads mismatches", &block.mismatches, DL_SYNC_SIM_READ);
  out.races = dl_sync_sim_race_count();
  out.mismatches = block.mismatches;
  assert_int_equal(atomic_load(&p.deleted), 1);
  CHECK_SIM(dl_sync_sim_stream_destroy(a));
  CHECK_SIM(dl_sync_sim_stream_destroy(b));
  return out;
}

static void test_a_participating_producer_reuses_after_the_consumers_read(void **state) {
  (void)state;
  outcome out = reuse_after_release(PARTICIPATING);
  assert_int_equal(out.released, DL_SYNC_RELEASED_ORDERED);
  assert_int_equal(out.deleted_before_the_read_ended, 1); /* the deleter ran at once */
  assert_int_equal(out.races, 0);
  assert_int_equal(out.mismatches, 0);
}

static void test_a_foreign_producers_deleter_waits_for_the_consumers_read(void **state) {
  (void)state;
  outcome out = reuse_after_release(FOREIGN);
  assert_int_equal(out.released, DL_SYNC_RELEASE_DEFERRED);
  assert_int_equal(out.deleted_before_the_read_ended, 0);
  assert_int_equal(out.races, 0);
  assert_int_equal(out.mismatches, 0);
}

/* A record that names no reuse stream (dl_sync_tensor_record's: a record of minor 2 or
   later whose reuse device type is 0, "0 when the producer named none", dlsync/tensor_event.h) is a
   producer dlsync cannot order the reuse of: the deleter waits for the consumer's work
   (deferred), as for a tensor without a record, and no stream of device 0:0 is ordered. */
static void test_a_record_naming_no_reuse_stream_defers(void **state) {
  (void)state;
  static pattern block;
  block_pool pool = {0};
  dl_sync_sim_stream *a, *b;
  CHECK_SIM(dl_sync_sim_stream_create(&a, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(dl_sync_sim_stream_create(&b, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  producer_tensor p;
  make_tensor(&p, &pool, &block, a);
  CHECK_DL(dl_sync_tensor_record(&p.tensor, sim_view(a, 0)));
  const dl_sync_tensor_event_owner *record = p.tensor.manager_ctx;
  assert_true(record->abi_minor >= 2);
  assert_int_equal(record->reuse_device.device_type, 0);
  CHECK_SIM(launch_gate(b));
  assert_int_equal(dl_sync_tensor_release(&p.tensor, sim_view(b, 0)), DL_SYNC_RELEASE_DEFERRED);
  assert_int_equal(atomic_load(&p.deleted), 0);
  assert_int_equal(dl_sync_release_poll(), 0); /* the consumer's work is held */
  open_gate();
  CHECK_SIM(dl_sync_sim_stream_synchronize(b));
  assert_int_equal(dl_sync_release_poll(), 1);
  assert_int_equal(atomic_load(&p.deleted), 1);
  CHECK_SIM(dl_sync_sim_stream_destroy(a));
  CHECK_SIM(dl_sync_sim_stream_destroy(b));
}

/* A record naming a reuse stream of another device than the tensor's (an older or another
   copy's, or a corrupt one: this copy never writes one) is not ordered onto: the release is
   deferred, and no stream of that device waits. */
static void test_a_reuse_stream_of_another_device_is_not_ordered(void **state) {
  (void)state;
  static pattern block;
  block_pool pool = {0};
  dl_sync_sim_stream *a, *b;
  CHECK_SIM(dl_sync_sim_stream_create(&a, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(dl_sync_sim_stream_create(&b, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  static const DLDevice elsewhere[] = {{kDLCUDA, 1}, {kDLROCM, 0}};
  for (int i = 0; i < 2; i++) {
    producer_tensor p;
    make_tensor(&p, &pool, &block, a);
    CHECK_DL(dl_sync_tensor_record_reuse(&p.tensor, sim_view(a, 0), sim_view(a, 0)));
    dl_sync_tensor_event_owner *record = p.tensor.manager_ctx;
    record->reuse_device = elsewhere[i];
    assert_int_equal(dl_sync_tensor_release(&p.tensor, sim_view(b, 0)), DL_SYNC_RELEASE_DEFERRED);
    CHECK_SIM(dl_sync_sim_stream_synchronize(b));
    assert_int_equal(dl_sync_release_poll(), 1);
    assert_int_equal(atomic_load(&p.deleted), 1);
  }
  CHECK_SIM(dl_sync_sim_stream_destroy(a));
  CHECK_SIM(dl_sync_sim_stream_destroy(b));
}

/* The negative control: the deleter called directly, the reuse write races the read. */
static void test_negative_control_a_direct_deleter_call_races(void **state) {
  (void)state;
  outcome out = reuse_after_release(DIRECT);
  print_message("direct deleter call: %llu race(s), %lld wrong word(s) read\n",
                (unsigned long long)out.races, (long long)out.mismatches);
  assert_true(out.races > 0);
  assert_true(out.mismatches > 0);
  dl_sync_sim_race_reset();
}

/* The participating release is one export's work: a capture query of each stream, one
   record and one wait on a pooled event, none made once warm. */
static void test_a_participating_release_costs_one_record_and_one_wait(void **state) {
  (void)state;
  dl_sync_sim_stream *a, *b;
  CHECK_SIM(dl_sync_sim_stream_create(&a, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(dl_sync_sim_stream_create(&b, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  static pattern block;
  block_pool pool = {0};
  producer_tensor p;
  dl_sync_pool_stats before = {0}, after = {0};
  for (int round = 0; round < 3; round++) {
    make_tensor(&p, &pool, &block, a);
    CHECK_DL(dl_sync_tensor_record_reuse(&p.tensor, sim_view(a, 0), sim_view(a, 0)));
    if (round == 2) dl_sync_pool_stats_get(dl_sync_sim_backend(), 0, &before);
    assert_int_equal(dl_sync_tensor_release(&p.tensor, sim_view(b, 0)), DL_SYNC_RELEASED_ORDERED);
    pool_alloc(&pool, a);
  }
  dl_sync_pool_stats_get(dl_sync_sim_backend(), 0, &after);
  assert_int_equal(after.created - before.created, 0);
  assert_int_equal(after.acquired - before.acquired, 1); /* the release's one event */
  assert_int_equal(dl_sync_release_pending(), 0);
  CHECK_SIM(dl_sync_sim_device_synchronize());
  CHECK_SIM(dl_sync_sim_stream_destroy(a));
  CHECK_SIM(dl_sync_sim_stream_destroy(b));
}

/* A capturing consumer: the graph keeps the tensor; the deleter runs from a later call once
   the graph and its launches are gone, never before. */
static void test_a_capturing_consumers_graph_keeps_the_tensor(void **state) {
  (void)state;
  static pattern block;
  block = (pattern){0};
  block_pool pool = {0};
  dl_sync_sim_stream *a, *b, *launcher;
  CHECK_SIM(dl_sync_sim_stream_create(&a, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(dl_sync_sim_stream_create(&b, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(dl_sync_sim_stream_create(&launcher, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  producer_tensor p;
  make_tensor(&p, &pool, &block, a);
  CHECK_SIM(launch_producer(a, &block, 5));
  CHECK_DL(dl_sync_tensor_record_reuse(&p.tensor, sim_view(a, 0), sim_view(a, 0)));
  CHECK_SIM(dl_sync_sim_stream_begin_capture(b, DL_SYNC_SIM_CAPTURE_GLOBAL));
  CHECK_DL(dl_sync_tensor_wait(&p.tensor, sim_view(b, 0)));
  CHECK_SIM(launch_consumer(b, &block, 5));
  assert_int_equal(dl_sync_tensor_release(&p.tensor, sim_view(b, 0)), DL_SYNC_RELEASE_GRAPH);
  dl_sync_sim_graph *graph;
  CHECK_SIM(dl_sync_sim_stream_end_capture(b, &graph));
  dl_sync_sim_graph_exec *exec;
  CHECK_SIM(dl_sync_sim_graph_instantiate(&exec, graph));
  CHECK_SIM(dl_sync_sim_graph_destroy(graph));
  for (int i = 0; i < 3; i++) CHECK_SIM(dl_sync_sim_graph_launch(exec, launcher));
  CHECK_SIM(dl_sync_sim_stream_synchronize(launcher));
  assert_int_equal(dl_sync_release_poll(), 0); /* its executable graph still reads it */
  assert_int_equal(atomic_load(&p.deleted), 0);
  assert_int_equal(dl_sync_release_pending(), 1);
  CHECK_SIM(dl_sync_sim_graph_exec_destroy(exec));
  assert_int_equal(dl_sync_release_poll(), 1);
  assert_int_equal(atomic_load(&p.deleted), 1);
  dl_sync_sim_host_access("test reads mismatches", &block.mismatches, DL_SYNC_SIM_READ);
  assert_int_equal(block.mismatches, 0);
  assert_int_equal(dl_sync_sim_race_count(), 0);
  CHECK_SIM(dl_sync_sim_stream_destroy(a));
  CHECK_SIM(dl_sync_sim_stream_destroy(b));
  CHECK_SIM(dl_sync_sim_stream_destroy(launcher));
}

/* Releases a live graph keeps never stand in the way of the others: 20 kept by one graph,
   then a deferred one that completed is found by the next poll, and no other call runs
   it (an ordering between other streams). */
static void test_graphs_that_live_on_hold_up_no_other_release(void **state) {
  (void)state;
  enum { KEPT = 20 };
  static pattern block;
  block_pool pool = {0};
  dl_sync_sim_stream *b, *c;
  CHECK_SIM(dl_sync_sim_stream_create(&b, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(dl_sync_sim_stream_create(&c, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  static producer_tensor kept[KEPT];
  CHECK_SIM(dl_sync_sim_stream_begin_capture(b, DL_SYNC_SIM_CAPTURE_GLOBAL));
  for (int i = 0; i < KEPT; i++) {
    make_tensor(&kept[i], &pool, &block, NULL);
    assert_int_equal(dl_sync_tensor_release(&kept[i].tensor, sim_view(b, 0)),
                     DL_SYNC_RELEASE_GRAPH);
  }
  dl_sync_sim_graph *graph;
  CHECK_SIM(dl_sync_sim_stream_end_capture(b, &graph));
  for (int round = 0; round < 2; round++) {
    producer_tensor p;
    make_tensor(&p, &pool, &block, NULL);
    assert_int_equal(dl_sync_tensor_release(&p.tensor, sim_view(c, 0)), DL_SYNC_RELEASE_DEFERRED);
    CHECK_SIM(dl_sync_sim_stream_synchronize(c));
    if (round == 1) { /* an ordering runs no deleter, even with one done */
      CHECK_DL(dl_sync_push_dep(sim_view(b, 0), sim_view(c, 0)));
      assert_int_equal(atomic_load(&p.deleted), 0);
    }
    assert_int_equal(dl_sync_release_poll(), 1);
    assert_int_equal(atomic_load(&p.deleted), 1);
  }
  assert_int_equal(dl_sync_release_pending(), KEPT);
  CHECK_SIM(dl_sync_sim_graph_destroy(graph));
  assert_int_equal(dl_sync_release_poll(), KEPT);
  for (int i = 0; i < KEPT; i++) assert_int_equal(atomic_load(&kept[i].deleted), 1);
  CHECK_SIM(dl_sync_sim_stream_destroy(b));
  CHECK_SIM(dl_sync_sim_stream_destroy(c));
}

/* A deleter is another library's code (it may take a lock its caller holds, call the
   runtime, free memory): a deferred release's deleter runs only in the calls that name it
   (dl_sync_release_poll, dl_sync_shutdown, the release thread), never in another call
   that happens to find its work done: exports, dependencies, groups, tensor events, other
   releases, inside a capture or not. Here every such call is made with one release done;
   the deleter stands for a framework's allocator calling cudaFree, which a capture of
   the calling thread forbids. The control: the deleter's call made inside a capture is
   refused and invalidates it. */
static int deleter_call;
static void free_after_a_prohibited_call(DLManagedTensorVersioned *t) {
  deleter_call = dl_sync_sim_prohibited_call();
  free_on_producer_stream(t);
}

static void test_only_the_calls_that_name_them_run_deferred_deleters(void **state) {
  (void)state;
  static pattern block;
  block_pool pool = {0};
  dl_sync_sim_stream *c, *d, *e;
  dl_sync_sim_event *fork;
  CHECK_SIM(dl_sync_sim_stream_create(&c, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(dl_sync_sim_stream_create(&d, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(dl_sync_sim_stream_create(&e, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(dl_sync_sim_event_create(&fork));
  producer_tensor p, kept, other, recorded;
  make_tensor(&p, &pool, &block, NULL);
  make_tensor(&kept, &pool, &block, NULL);
  make_tensor(&other, &pool, &block, NULL);
  make_tensor(&recorded, &pool, &block, NULL);
  p.tensor.deleter = free_after_a_prohibited_call;
  deleter_call = -1;
  assert_int_equal(dl_sync_tensor_release(&p.tensor, sim_view(e, 0)), DL_SYNC_RELEASE_DEFERRED);
  CHECK_SIM(dl_sync_sim_stream_synchronize(e)); /* done: only a named call may run it */

  /* Inside a capture of this thread: a join, a release into the capture. */
  CHECK_SIM(dl_sync_sim_stream_begin_capture(c, DL_SYNC_SIM_CAPTURE_GLOBAL));
  CHECK_SIM(dl_sync_sim_event_record(fork, c, 0));
  CHECK_SIM(dl_sync_sim_stream_wait_event(d, fork, 0)); /* d joins the capture */
  CHECK_DL(dl_sync_push_dep(sim_view(d, 0), sim_view(c, 0)));
  assert_int_equal(dl_sync_tensor_release(&kept.tensor, sim_view(c, 0)), DL_SYNC_RELEASE_GRAPH);
  dl_sync_sim_graph *graph;
  CHECK_SIM(dl_sync_sim_stream_end_capture(c, &graph)); /* not invalidated */
  assert_non_null(graph);
  /* Outside any capture: every call that orders, waits or records, and another release. */
  CHECK_DL(dl_sync_push_dep(sim_view(d, 0), sim_view(e, 0)));
  CHECK_DL(dl_sync_export(sim_view(d, 0), dl_sync_stream_arg_int((int64_t)(intptr_t)e)));
  dl_sync_group group;
  CHECK_DL(dl_sync_group_init(&group, sim_view(e, 0)));
  CHECK_DL(dl_sync_group_add_stream(&group, sim_view(d, 0)));
  CHECK_DL(dl_sync_group_wait(&group));
  CHECK_DL(dl_sync_tensor_record(&recorded.tensor, sim_view(d, 0)));
  CHECK_DL(dl_sync_tensor_wait(&recorded.tensor, sim_view(e, 0)));
  CHECK_DL(dl_sync_tensor_synchronize(&recorded.tensor));
  assert_int_equal(
      dl_sync_tensor_release(&other.tensor, sim_view(DL_SYNC_STREAM_NOTHING_PENDING, 0)),
      DL_SYNC_RELEASED_NOW); /* its own deleter only */
  assert_int_equal(atomic_load(&other.deleted), 1);
  assert_int_equal(atomic_load(&p.deleted), 0);
  assert_int_equal(deleter_call, -1);
  assert_int_equal(dl_sync_release_poll(), 1); /* the call that names it */
  assert_int_equal(atomic_load(&p.deleted), 1);
  assert_int_equal(deleter_call, DL_SYNC_SIM_SUCCESS);
  CHECK_SIM(dl_sync_sim_graph_destroy(graph));
  assert_int_equal(dl_sync_release_poll(), 1);
  assert_int_equal(atomic_load(&kept.deleted), 1);
  recorded.tensor.deleter(&recorded.tensor);

  /* The control: the deleter's call made inside a capture. */
  CHECK_SIM(dl_sync_sim_stream_begin_capture(c, DL_SYNC_SIM_CAPTURE_GLOBAL));
  assert_int_equal(dl_sync_sim_prohibited_call(), DL_SYNC_SIM_ERROR_CAPTURE_UNSUPPORTED);
  assert_int_equal(dl_sync_sim_stream_end_capture(c, &graph),
                   DL_SYNC_SIM_ERROR_CAPTURE_INVALIDATED);
  CHECK_SIM(dl_sync_sim_event_destroy(fork));
  CHECK_SIM(dl_sync_sim_stream_destroy(c));
  CHECK_SIM(dl_sync_sim_stream_destroy(d));
  CHECK_SIM(dl_sync_sim_stream_destroy(e));
}

/* Nothing is pending on a device without streams, or when the consumer says so: the
   deleter runs now, with no runtime call. */
static void test_nothing_pending_releases_now(void **state) {
  (void)state;
  static pattern block;
  block_pool pool = {0};
  producer_tensor p;
  make_tensor(&p, &pool, &block, NULL);
  p.tensor.dl_tensor.device = (DLDevice){kDLCPU, 0};
  assert_int_equal(
      dl_sync_tensor_release(&p.tensor, dl_sync_stream_view(p.tensor.dl_tensor.device, NULL)),
      DL_SYNC_RELEASED_NOW);
  assert_int_equal(atomic_load(&p.deleted), 1);
  make_tensor(&p, &pool, &block, NULL);
  assert_int_equal(dl_sync_tensor_release(&p.tensor, sim_view(DL_SYNC_STREAM_NOTHING_PENDING, 0)),
                   DL_SYNC_RELEASED_NOW);
  assert_int_equal(atomic_load(&p.deleted), 1);
  dl_sync_pool_stats stats;
  dl_sync_pool_stats_get(dl_sync_sim_backend(), 0, &stats);
  assert_int_equal(stats.acquired, 0);
}

/* Bad input: an error naming the value, and the tensor still the caller's. */
static void test_bad_releases_leave_the_tensor_to_the_caller(void **state) {
  (void)state;
  static pattern block;
  block_pool pool = {0};
  dl_sync_sim_stream *b;
  CHECK_SIM(dl_sync_sim_stream_create(&b, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  producer_tensor p;
  make_tensor(&p, &pool, &block, NULL);
  assert_int_equal(dl_sync_tensor_release(NULL, sim_view(b, 0)), DL_SYNC_EINVAL);
  assert_error_mentions("dl_sync_tensor_release: tensor must not be NULL");
  assert_int_equal(dl_sync_tensor_release(&p.tensor, sim_view(NULL, 1)), DL_SYNC_EINVAL);
  assert_error_mentions("the consumer stream on cuda:1");
  /* a view of another device, even one without streams, as the header says */
  assert_int_equal(
      dl_sync_tensor_release(&p.tensor, dl_sync_stream_view((DLDevice){kDLCPU, 0}, NULL)),
      DL_SYNC_EINVAL);
  assert_error_mentions("the consumer stream on cpu:0");
  producer_tensor on_cpu;
  make_tensor(&on_cpu, &pool, &block, NULL);
  on_cpu.tensor.dl_tensor.device = (DLDevice){kDLCPU, 0};
  assert_int_equal(
      dl_sync_tensor_release(&on_cpu.tensor, dl_sync_stream_view((DLDevice){kDLCPU, 0}, b)),
      DL_SYNC_EINVAL);
  assert_error_mentions("which has no streams");
  assert_int_equal(atomic_load(&on_cpu.deleted), 0);
  assert_int_equal(atomic_load(&p.deleted), 0);
  CHECK_SIM(launch_gate(b));
  assert_int_equal(dl_sync_tensor_release(&p.tensor, sim_view(b, 0)), DL_SYNC_RELEASE_DEFERRED);
  assert_int_equal(dl_sync_tensor_release(&p.tensor, sim_view(b, 0)), DL_SYNC_EINVAL);
  assert_error_mentions("is already released");
  open_gate();
  CHECK_SIM(dl_sync_sim_stream_synchronize(b));
  assert_int_equal(dl_sync_release_poll(), 1);
  assert_int_equal(atomic_load(&p.deleted), 1);
  CHECK_SIM(dl_sync_sim_stream_destroy(b));
}

/* dl_sync_shutdown waits for the pending releases and runs their deleters. */
static void test_shutdown_runs_the_pending_releases(void **state) {
  (void)state;
  static pattern block;
  block_pool pool = {0};
  dl_sync_sim_stream *b;
  CHECK_SIM(dl_sync_sim_stream_create(&b, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  producer_tensor p;
  make_tensor(&p, &pool, &block, NULL);
  CHECK_SIM(launch_consumer(b, &block, 0));
  assert_int_equal(dl_sync_tensor_release(&p.tensor, sim_view(b, 0)), DL_SYNC_RELEASE_DEFERRED);
  assert_int_equal(dl_sync_shutdown(), DL_SYNC_OK);
  assert_int_equal(atomic_load(&p.deleted), 1);
  assert_int_equal(dl_sync_release_pending(), 0);
  CHECK_SIM(dl_sync_sim_stream_destroy(b));
}

#ifndef _WIN32
/* A forked child never runs the parent's pending release (its event is the parent's); the
   parent does. The child makes no cmocka call. */
static void test_a_forked_child_leaves_the_parents_releases(void **state) {
  (void)state;
  static pattern block;
  block_pool pool = {0};
  dl_sync_sim_stream *b;
  CHECK_SIM(dl_sync_sim_stream_create(&b, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  producer_tensor p;
  make_tensor(&p, &pool, &block, NULL);
  assert_int_equal(dl_sync_tensor_release(&p.tensor, sim_view(b, 0)), DL_SYNC_RELEASE_DEFERRED);
  CHECK_SIM(dl_sync_sim_stream_synchronize(b)); /* done: a child that kept it would run it */
  pid_t child = fork();
  if (child == 0) {
    int clean = dl_sync_release_pending() == 0 && dl_sync_release_poll() == 0 &&
                atomic_load(&p.deleted) == 0;
    _exit(clean ? 0 : 1);
  }
  int status = 0;
  assert_int_equal(waitpid(child, &status, 0), child);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  assert_int_equal(dl_sync_release_poll(), 1);
  assert_int_equal(atomic_load(&p.deleted), 1);
  CHECK_SIM(dl_sync_sim_stream_destroy(b));
}
#else
static void test_a_forked_child_leaves_the_parents_releases(void **state) {
  (void)state;
  skip(); /* Windows has no fork */
}
#endif

/* Many threads release at once, participating and foreign tensors alike; deferred
   deleters run on whichever thread's call finds them done. */
enum { RELEASERS = 4, RELEASES = 200 };

typedef struct releaser {
  pthread_barrier_t *start;
  producer_tensor tensors[RELEASES];
  block_pool pool;
  pattern block;
  int failures;
  char error[256];
} releaser;

static void *release_many(void *arg) {
  releaser *r = arg;
  dl_sync_sim_stream *a, *b;
  dl_sync_sim_stream_create(&a, DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_stream_create(&b, DL_SYNC_SIM_STREAM_NON_BLOCKING);
  pthread_barrier_wait(r->start);
  for (int i = 0; i < RELEASES; i++) {
    producer_tensor *p = &r->tensors[i];
    make_tensor(p, &r->pool, &r->block, a);
    int status = i % 2 == 0
                     ? dl_sync_tensor_record_reuse(&p->tensor, sim_view(a, 0), sim_view(a, 0))
                     : DL_SYNC_OK;
    if (status == DL_SYNC_OK) status = dl_sync_tensor_release(&p->tensor, sim_view(b, 0));
    if (status < 0 && r->failures++ == 0)
      snprintf(r->error, sizeof r->error, "%s", dl_sync_last_error());
  }
  dl_sync_sim_stream_synchronize(b);
  dl_sync_sim_device_synchronize();
  dl_sync_sim_stream_destroy(a);
  dl_sync_sim_stream_destroy(b);
  return NULL;
}

static void test_threads_release_at_once(void **state) {
  (void)state;
  static releaser runs[RELEASERS];
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, RELEASERS);
  pthread_t threads[RELEASERS];
  for (int i = 0; i < RELEASERS; i++) {
    memset(&runs[i], 0, sizeof runs[i]);
    runs[i].start = &start;
    assert_int_equal(pthread_create(&threads[i], NULL, release_many, &runs[i]), 0);
  }
  for (int i = 0; i < RELEASERS; i++) assert_int_equal(pthread_join(threads[i], NULL), 0);
  pthread_barrier_destroy(&start);
  while (dl_sync_release_poll() != 0) continue; /* their work is done: synchronized */
  for (int i = 0; i < RELEASERS; i++) {
    if (runs[i].failures) fail_msg("releaser %d: %s", i, runs[i].error);
    for (int j = 0; j < RELEASES; j++)
      assert_int_equal(atomic_load(&runs[i].tensors[j].deleted), 1);
  }
  assert_int_equal(dl_sync_release_pending(), 0);
}

#define RELEASE_TEST(name) cmocka_unit_test_setup_teardown(name, use_sim, leave_sim)

int main(void) {
  const struct CMUnitTest tests[] = {
      RELEASE_TEST(test_a_participating_producer_reuses_after_the_consumers_read),
      RELEASE_TEST(test_a_foreign_producers_deleter_waits_for_the_consumers_read),
      RELEASE_TEST(test_a_record_naming_no_reuse_stream_defers),
      RELEASE_TEST(test_a_reuse_stream_of_another_device_is_not_ordered),
      RELEASE_TEST(test_negative_control_a_direct_deleter_call_races),
      RELEASE_TEST(test_a_participating_release_costs_one_record_and_one_wait),
      RELEASE_TEST(test_a_capturing_consumers_graph_keeps_the_tensor),
      RELEASE_TEST(test_graphs_that_live_on_hold_up_no_other_release),
      RELEASE_TEST(test_only_the_calls_that_name_them_run_deferred_deleters),
      RELEASE_TEST(test_nothing_pending_releases_now),
      RELEASE_TEST(test_bad_releases_leave_the_tensor_to_the_caller),
      RELEASE_TEST(test_shutdown_runs_the_pending_releases),
      RELEASE_TEST(test_a_forked_child_leaves_the_parents_releases),
      RELEASE_TEST(test_threads_release_at_once),
  };
  return cmocka_run_group_tests_name("release", tests, NULL, NULL);
}
