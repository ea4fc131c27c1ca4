/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The consumer's side of the DLPack C exchange table on the simulated device: producers
 * written in C (ordering/table_producer.h) expose tables, consumers import through them
 * with dl_sync_exchange_import and dl_sync_group_add_exchange_import. Every ordering test
 * has its negative control, the same program with the table's bare conversion (what a
 * consumer gets without dlsync: the _NoSync tensor), caught by the race checker and by
 * value. Then the release path, threads, graph capture, what each call costs in runtime
 * calls, and what a consumer gets from a producer that misbehaves: a clear error, the
 * tensor given back through its deleter, the object untouched.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "dlsync/dlsync.h"
#include "ordering/ordering.h"
#include "ordering/table_producer.h"
#include "support/error_message.h"

static const DLDevice cuda0 = {kDLCUDA, 0}, cpu0 = {kDLCPU, 0};
enum { CANARY = 0x5eed };

/* The simulated device behind the CUDA and ROCm types, with its record, wait and capture
   queries counted. */
static atomic_long records, waits, external_waits, capture_queries;
static dl_sync_backend counted;

static int count_record(void *ctx, void *event, void *stream) {
  atomic_fetch_add(&records, 1);
  return dl_sync_sim_backend()->event_record(ctx, event, stream);
}
static int count_wait(void *ctx, void *stream, void *event) {
  atomic_fetch_add(&waits, 1);
  return dl_sync_sim_backend()->stream_wait(ctx, stream, event);
}
static int count_external_wait(void *ctx, void *stream, void *event) {
  atomic_fetch_add(&external_waits, 1);
  return dl_sync_sim_backend()->stream_wait_external(ctx, stream, event);
}
static int count_capture_query(void *ctx, void *stream, dl_sync_capture_info *out) {
  atomic_fetch_add(&capture_queries, 1);
  return dl_sync_sim_backend()->capture_info(ctx, stream, out);
}

static void reset_counts(void) {
  atomic_store(&records, 0);
  atomic_store(&waits, 0);
  atomic_store(&external_waits, 0);
  atomic_store(&capture_queries, 0);
}

static int setup(void **state) {
  use_sim(state);
  counted = *dl_sync_sim_backend();
  counted.event_record = count_record;
  counted.stream_wait = count_wait;
  counted.stream_wait_external = count_external_wait;
  counted.capture_info = count_capture_query;
  static const int32_t types[] = {kDLCUDA, kDLCUDAHost, kDLCUDAManaged, kDLROCM, kDLROCMHost};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
    dl_sync_set_backend(types[i], &counted);
  table_producers_reset();
  reset_counts();
  return 0;
}

static dl_sync_sim_stream *new_stream(void) {
  dl_sync_sim_stream *s = NULL;
  CHECK_SIM(dl_sync_sim_stream_create(&s, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  return s;
}

static pattern *data_of(const DLManagedTensorVersioned *t) {
  return (pattern *)t->dl_tensor.data; /* the array's pattern: words come first */
}

/* --- ordering, from threads --------------------------------------------------------- */

enum { THREADS = 4, ITERATIONS = 200, CONTROL_ITERATIONS = 60 };

typedef struct import_worker {
  pthread_t thread;
  int bare; /* the control: the table's conversion alone */
  int iterations;
  table_array array;
  int imported, released, failures;
  char error[256];
} import_worker;

/* One argument: the producer writes on its current stream A, the consumer imports onto B
   and reads, then releases the tensor after its read and hands the array back to A. */
static int one_import(import_worker *w, dl_sync_sim_stream *a, dl_sync_sim_stream *b, int32_t i) {
  const DLPackExchangeAPI *api = &table_producers[0].api;
  int status = launch_producer(a, &w->array.data, i);
  DLManagedTensorVersioned *t = NULL;
  if (status == 0)
    status = w->bare ? api->managed_tensor_from_py_object_no_sync(&w->array, &t)
                     : dl_sync_exchange_import(api, &w->array, sim_view(b, 0), &t);
  if (status != 0) return status;
  w->imported++;
  status = launch_consumer(b, data_of(t), i);
  if (status == 0 && dl_sync_tensor_release(t, sim_view(b, 0)) >= 0) w->released++;
  if (status == 0) status = dl_sync_push_dep(sim_view(b, 0), sim_view(a, 0)); /* hand back */
  return status;
}

static void *run_imports(void *arg) {
  import_worker *w = arg;
  dl_sync_sim_stream *a = NULL, *b = NULL;
  if (dl_sync_sim_stream_create(&a, DL_SYNC_SIM_STREAM_NON_BLOCKING) ||
      dl_sync_sim_stream_create(&b, DL_SYNC_SIM_STREAM_NON_BLOCKING)) {
    w->failures++;
    return NULL;
  }
  table_producer_use_stream(0, a); /* the producer's current stream, on this thread */
  for (int i = 0; i < w->iterations; i++) {
    int status = one_import(w, a, b, i * 7);
    if (status != 0 && w->failures++ == 0)
      snprintf(w->error, sizeof w->error, "iteration %d: %d %s", i, status, dl_sync_last_error());
  }
  dl_sync_sim_stream_synchronize(a);
  dl_sync_sim_stream_synchronize(b);
  dl_sync_sim_host_access("test reads mismatches", &w->array.data.mismatches, DL_SYNC_SIM_READ);
  return NULL;
}

static void run_workers(import_worker *workers, int bare, int iterations) {
  for (int t = 0; t < THREADS; t++) {
    workers[t] = (import_worker){.bare = bare, .iterations = iterations};
    table_array_init(&workers[t].array, cuda0);
    workers[t].array.data.racy = bare;
    assert_int_equal(pthread_create(&workers[t].thread, NULL, run_imports, &workers[t]), 0);
  }
  for (int t = 0; t < THREADS; t++) pthread_join(workers[t].thread, NULL);
  for (int t = 0; t < THREADS; t++)
    if (workers[t].failures) fail_msg("thread %d: %s", t, workers[t].error);
  while (dl_sync_release_pending() > 0) dl_sync_release_poll();
}

static void test_an_import_orders_the_producers_current_stream_before_the_consumer(void **state) {
  (void)state;
  dl_sync_sim_set_jitter(21, 50);
  static import_worker workers[THREADS];
  run_workers(workers, 0, ITERATIONS);
  print_races("imported through dlsync");
  assert_int_equal(dl_sync_sim_race_count(), 0);
  for (int t = 0; t < THREADS; t++) {
    assert_int_equal(workers[t].array.data.mismatches, 0);
    assert_int_equal(workers[t].imported, ITERATIONS);
    assert_int_equal(workers[t].released, ITERATIONS);
    /* every tensor given back once, through the release path */
    assert_int_equal(atomic_load(&workers[t].array.taken), ITERATIONS);
    assert_int_equal(atomic_load(&workers[t].array.deleted), ITERATIONS);
  }
  assert_int_equal(atomic_load(&table_producers[0].asked), THREADS * ITERATIONS);
}

static void test_negative_control_the_bare_conversion_races(void **state) {
  (void)state;
  dl_sync_sim_set_jitter(22, 400);
  static import_worker workers[THREADS];
  run_workers(workers, 1, CONTROL_ITERATIONS);
  print_races("the table's bare conversion");
  assert_true(dl_sync_sim_race_count() >= (uint64_t)THREADS * CONTROL_ITERATIONS);
  int64_t wrong = 0;
  for (int t = 0; t < THREADS; t++) wrong += workers[t].array.data.mismatches;
  print_message("wrong words read under jitter: %lld\n", (long long)wrong);
  assert_true(wrong > 0);
  dl_sync_sim_race_reset();
}

/* --- by value, every time: the producer's stream held ---------------------------------- */

/* The producer's stream is held before its write: without the ordering the consumer's
   read certainly runs first. Returns the wrong words the consumer read. */
static int64_t held_producer(int bare) {
  static table_array array;
  table_array_init(&array, cuda0);
  array.data.racy = bare;
  dl_sync_sim_stream *a = new_stream(), *b = new_stream();
  table_producer_use_stream(0, a);
  CHECK_SIM(launch_gate(a));
  CHECK_SIM(launch_producer(a, &array.data, 40));
  const DLPackExchangeAPI *api = &table_producers[0].api;
  DLManagedTensorVersioned *t = NULL;
  if (bare)
    assert_int_equal(api->managed_tensor_from_py_object_no_sync(&array, &t), 0);
  else
    CHECK_DL(dl_sync_exchange_import(api, &array, sim_view(b, 0), &t));
  CHECK_SIM(launch_consumer(b, data_of(t), 40));
  if (bare) CHECK_SIM(dl_sync_sim_stream_synchronize(b)); /* the read is done: it saw zeros */
  open_gate();
  CHECK_SIM(dl_sync_sim_device_synchronize());
  dl_sync_sim_host_access("test reads mismatches", &array.data.mismatches, DL_SYNC_SIM_READ);
  assert_int_equal(
      dl_sync_tensor_release(t, dl_sync_stream_view(cuda0, DL_SYNC_STREAM_NOTHING_PENDING)),
      DL_SYNC_RELEASED_NOW);
  assert_int_equal(atomic_load(&array.deleted), 1);
  return array.data.mismatches;
}

static void test_a_held_producer_is_waited_for(void **state) {
  (void)state;
  assert_int_equal(held_producer(0), 0);
  assert_int_equal(dl_sync_sim_race_count(), 0);
}

static void test_negative_control_held_producer_bare_conversion_reads_stale_words(void **state) {
  (void)state;
  assert_int_equal(held_producer(1), PATTERN_WORDS); /* every word stale */
  assert_true(dl_sync_sim_race_count() > 0);
  dl_sync_sim_race_reset();
}

/* --- what it costs ------------------------------------------------------------------- */

static void test_on_the_producers_stream_an_import_makes_no_runtime_call(void **state) {
  (void)state;
  static table_array array;
  table_array_init(&array, cuda0);
  dl_sync_sim_stream *a = new_stream(), *b = new_stream();
  table_producer_use_stream(0, a);
  DLManagedTensorVersioned *t = NULL;
  CHECK_DL(dl_sync_exchange_import(&table_producers[0].api, &array, sim_view(a, 0), &t));
  assert_int_equal(atomic_load(&capture_queries) + atomic_load(&records) + atomic_load(&waits), 0);
  t->deleter(t);
  /* another stream: one record and one wait (and each stream's capture state, once) */
  CHECK_DL(dl_sync_exchange_import(&table_producers[0].api, &array, sim_view(b, 0), &t));
  assert_int_equal(atomic_load(&records), 1);
  assert_int_equal(atomic_load(&waits), 1);
  assert_int_equal(atomic_load(&capture_queries), 2);
  t->deleter(t);
  /* the legacy stream names itself both ways: NULL and 1 are one stream */
  table_producer_use_stream(0, NULL);
  reset_counts();
  CHECK_DL(dl_sync_exchange_import(&table_producers[0].api, &array,
                                   sim_view(DL_SYNC_STREAM_LEGACY, 0), &t));
  assert_int_equal(atomic_load(&records) + atomic_load(&waits), 0);
  t->deleter(t);
  assert_int_equal(atomic_load(&array.deleted), 3);
}

static void test_a_cpu_tensor_needs_no_stream_work(void **state) {
  (void)state;
  static table_array array;
  table_array_init(&array, cpu0);
  dl_sync_sim_stream *b = new_stream();
  DLManagedTensorVersioned *t = NULL;
  /* a CUDA consumer, a CPU consumer: the producer is not even asked for its stream */
  CHECK_DL(dl_sync_exchange_import(&table_producers[0].api, &array, sim_view(b, 0), &t));
  assert_int_equal(dl_sync_tensor_release(t, dl_sync_stream_view(cpu0, NULL)),
                   DL_SYNC_RELEASED_NOW);
  CHECK_DL(dl_sync_exchange_import(&table_producers[0].api, &array, dl_sync_stream_view(cpu0, NULL),
                                   &t));
  assert_int_equal(dl_sync_tensor_release(t, dl_sync_stream_view(cpu0, NULL)),
                   DL_SYNC_RELEASED_NOW);
  assert_int_equal(atomic_load(&table_producers[0].asked), 0);
  assert_int_equal(atomic_load(&capture_queries) + atomic_load(&records) + atomic_load(&waits), 0);
  assert_int_equal(atomic_load(&array.deleted), 2);
  /* nor does the table need a current_work_stream for it */
  table_producers[0].api.current_work_stream = NULL;
  CHECK_DL(dl_sync_exchange_import(&table_producers[0].api, &array, sim_view(b, 0), &t));
  t->deleter(t);
}

/* --- f(a, b, c, d) through a group ---------------------------------------------------- */

/* a and b from producer 0 (current stream A1), c from producer 1 (A2), d from producer 2
   on the CPU, consumed on B. skip_wait: the control, the group never waited on. */
typedef struct group_call {
  table_array a, b, c, d;
  DLManagedTensorVersioned *tensors[4];
  long wait_records, wait_waits; /* the runtime calls of the group waits */
} group_call;

static void group_round(group_call *call, dl_sync_sim_stream *a1, dl_sync_sim_stream *a2,
                        dl_sync_sim_stream *b, int32_t i, int skip_wait) {
  CHECK_SIM(launch_producer(a1, &call->a.data, i));
  CHECK_SIM(launch_producer(a1, &call->b.data, i + 1));
  CHECK_SIM(launch_producer(a2, &call->c.data, i + 2));
  dl_sync_group group;
  CHECK_DL(dl_sync_group_init(&group, sim_view(b, 0)));
  table_array *arrays[4] = {&call->a, &call->b, &call->c, &call->d};
  const int producer_of[4] = {0, 0, 1, 2};
  for (int k = 0; k < 4; k++)
    CHECK_DL(dl_sync_group_add_exchange_import(&group, &table_producers[producer_of[k]].api,
                                               arrays[k], &call->tensors[k]));
  long before_records = atomic_load(&records), before_waits = atomic_load(&waits);
  if (!skip_wait) CHECK_DL(dl_sync_group_wait(&group));
  call->wait_records += atomic_load(&records) - before_records;
  call->wait_waits += atomic_load(&waits) - before_waits;
  for (int k = 0; k < 3; k++) CHECK_SIM(launch_consumer(b, data_of(call->tensors[k]), i + k));
  for (int k = 0; k < 3; k++)
    assert_true(dl_sync_tensor_release(call->tensors[k], sim_view(b, 0)) >= 0);
  call->tensors[3]->deleter(call->tensors[3]); /* the CPU one: nothing of B reads it */
  CHECK_DL(dl_sync_push_dep(sim_view(b, 0), sim_view(a1, 0)));
  CHECK_DL(dl_sync_push_dep(sim_view(b, 0), sim_view(a2, 0)));
}

static group_call *run_group(int skip_wait, int rounds) {
  static group_call call;
  call.wait_records = call.wait_waits = 0;
  table_array_init(&call.a, cuda0);
  table_array_init(&call.b, cuda0);
  table_array_init(&call.c, cuda0);
  table_array_init(&call.d, cpu0);
  call.a.data.racy = call.b.data.racy = call.c.data.racy = skip_wait;
  dl_sync_sim_stream *a1 = new_stream(), *a2 = new_stream(), *b = new_stream();
  table_producer_use_stream(0, a1);
  table_producer_use_stream(1, a2);
  for (int i = 0; i < rounds; i++) group_round(&call, a1, a2, b, i * 5, skip_wait);
  CHECK_SIM(dl_sync_sim_device_synchronize());
  while (dl_sync_release_pending() > 0) dl_sync_release_poll();
  table_array *arrays[3] = {&call.a, &call.b, &call.c};
  for (int k = 0; k < 3; k++)
    dl_sync_sim_host_access("test reads mismatches", &arrays[k]->data.mismatches, DL_SYNC_SIM_READ);
  return &call;
}

static void test_a_group_orders_several_producers_at_one_dependency_each(void **state) {
  (void)state;
  dl_sync_sim_set_jitter(23, 50);
  group_call *call = run_group(0, ITERATIONS);
  assert_int_equal(dl_sync_sim_race_count(), 0);
  assert_int_equal(call->a.data.mismatches + call->b.data.mismatches + call->c.data.mismatches, 0);
  /* per call: producer 0 asked once for a and b, producer 1 once, the CPU producer never;
     the wait: one record and one wait per producer stream */
  assert_int_equal(atomic_load(&table_producers[0].asked), ITERATIONS);
  assert_int_equal(atomic_load(&table_producers[1].asked), ITERATIONS);
  assert_int_equal(atomic_load(&table_producers[2].asked), 0);
  assert_int_equal(call->wait_records, 2 * ITERATIONS);
  assert_int_equal(call->wait_waits, 2 * ITERATIONS);
  table_array *arrays[4] = {&call->a, &call->b, &call->c, &call->d};
  for (int k = 0; k < 4; k++) {
    assert_int_equal(atomic_load(&arrays[k]->taken), ITERATIONS);
    assert_int_equal(atomic_load(&arrays[k]->deleted), ITERATIONS);
  }
}

static void test_negative_control_a_group_never_waited_on_races(void **state) {
  (void)state;
  dl_sync_sim_set_jitter(24, 400);
  group_call *call = run_group(1, CONTROL_ITERATIONS);
  print_races("the group never waited on");
  assert_true(dl_sync_sim_race_count() >= 3 * CONTROL_ITERATIONS);
  assert_true(call->a.data.mismatches + call->b.data.mismatches + call->c.data.mismatches > 0);
  dl_sync_sim_race_reset();
}

/* --- the release path ----------------------------------------------------------------- */

/* A stream-ordered pool of one block: the block freed on stream S is the next allocation on
   S, at once (as cudaMallocAsync's). The producer's tensor frees its block on the stream it
   names as its reuse stream; the release then orders that stream after the consumer's
   read. The consumer's read is held; the producer reuses the block as soon as the deleter
   ran, and writes 2 into it. direct: the control, the consumer calls the deleter. */
static void release_then_reuse(int direct, int *released, int64_t *mismatches, uint64_t *races) {
  static table_array array;
  table_array_init(&array, cuda0);
  array.data.racy = direct;
  table_producers[0].name_reuse = 1;
  dl_sync_sim_stream *a = new_stream(), *b = new_stream();
  table_producer_use_stream(0, a);
  CHECK_SIM(launch_producer(a, &array.data, 1));
  DLManagedTensorVersioned *t = NULL;
  CHECK_DL(dl_sync_exchange_import(&table_producers[0].api, &array, sim_view(b, 0), &t));
  CHECK_SIM(launch_gate(b));
  CHECK_SIM(launch_consumer(b, data_of(t), 1));
  if (direct) {
    t->deleter(t);
    *released = -100;
  } else {
    *released = dl_sync_tensor_release(t, sim_view(b, 0));
  }
  assert_int_equal(atomic_load(&array.deleted), 1);         /* the block is the pool's again */
  CHECK_SIM(launch_producer(a, &array.data, 2));            /* its next user, on A at once */
  if (direct) CHECK_SIM(dl_sync_sim_stream_synchronize(a)); /* the write landed */
  open_gate();
  CHECK_SIM(dl_sync_sim_device_synchronize());
  dl_sync_sim_host_access("test reads mismatches", &array.data.mismatches, DL_SYNC_SIM_READ);
  *mismatches = array.data.mismatches;
  *races = dl_sync_sim_race_count();
}

static void test_the_release_orders_the_producers_reuse_after_the_consumers_read(void **state) {
  (void)state;
  int released;
  int64_t mismatches;
  uint64_t races;
  release_then_reuse(0, &released, &mismatches, &races);
  assert_int_equal(released, DL_SYNC_RELEASED_ORDERED);
  assert_int_equal(mismatches, 0);
  assert_int_equal(races, 0);
}

static void test_negative_control_the_deleter_called_directly_lets_the_reuse_overwrite(
    void **state) {
  (void)state;
  int released;
  int64_t mismatches;
  uint64_t races;
  release_then_reuse(1, &released, &mismatches, &races);
  print_message("the deleter called directly: %llu race(s), %lld wrong word(s)\n",
                (unsigned long long)races, (long long)mismatches);
  assert_int_equal(mismatches, PATTERN_WORDS);
  assert_true(races > 0);
  dl_sync_sim_race_reset();
}

/* A producer that names no reuse stream: the deleter runs once the read completed, once. */
static void test_a_release_of_another_producers_tensor_is_deferred(void **state) {
  (void)state;
  static table_array array;
  table_array_init(&array, cuda0);
  dl_sync_sim_stream *a = new_stream(), *b = new_stream();
  table_producer_use_stream(0, a);
  DLManagedTensorVersioned *t = NULL;
  CHECK_DL(dl_sync_exchange_import(&table_producers[0].api, &array, sim_view(b, 0), &t));
  CHECK_SIM(launch_gate(b));
  assert_int_equal(dl_sync_tensor_release(t, sim_view(b, 0)), DL_SYNC_RELEASE_DEFERRED);
  assert_int_equal(dl_sync_release_poll(), 0);
  assert_int_equal(atomic_load(&array.deleted), 0);
  open_gate();
  CHECK_SIM(dl_sync_sim_stream_synchronize(b));
  assert_int_equal(dl_sync_release_poll(), 1);
  assert_int_equal(dl_sync_release_poll(), 0);
  assert_int_equal(atomic_load(&array.deleted), 1);
}

/* --- graph capture -------------------------------------------------------------------- */

static void test_a_capturing_consumer_gets_an_external_wait(void **state) {
  (void)state;
  static table_array array;
  table_array_init(&array, cuda0);
  dl_sync_sim_stream *a = new_stream(), *b = new_stream();
  table_producer_use_stream(0, a);
  CHECK_SIM(launch_producer(a, &array.data, 3));
  CHECK_SIM(dl_sync_sim_stream_begin_capture(b, DL_SYNC_SIM_CAPTURE_GLOBAL));
  DLManagedTensorVersioned *t = NULL;
  CHECK_DL(dl_sync_exchange_import(&table_producers[0].api, &array, sim_view(b, 0), &t));
  CHECK_SIM(launch_consumer(b, data_of(t), 3));
  dl_sync_sim_graph *graph = NULL;
  CHECK_SIM(dl_sync_sim_stream_end_capture(b, &graph));
  size_t external = 0;
  CHECK_SIM(dl_sync_sim_graph_count_nodes(graph, NULL, &external, NULL));
  assert_int_equal(external, 1);
  dl_sync_sim_graph_exec *exec = NULL;
  CHECK_SIM(dl_sync_sim_graph_instantiate(&exec, graph));
  CHECK_SIM(dl_sync_sim_graph_launch(exec, b));
  CHECK_SIM(dl_sync_sim_stream_synchronize(b));
  CHECK_SIM(dl_sync_sim_graph_exec_destroy(exec));
  CHECK_SIM(dl_sync_sim_graph_destroy(graph));
  dl_sync_sim_host_access("test reads mismatches", &array.data.mismatches, DL_SYNC_SIM_READ);
  assert_int_equal(array.data.mismatches, 0);
  assert_int_equal(dl_sync_sim_race_count(), 0);
  t->deleter(t);
}

static void test_a_capturing_producer_is_refused_and_its_tensor_given_back(void **state) {
  (void)state;
  static table_array array;
  table_array_init(&array, cuda0);
  array.canary = CANARY;
  dl_sync_sim_stream *a = new_stream(), *b = new_stream();
  table_producer_use_stream(0, a);
  CHECK_SIM(dl_sync_sim_stream_begin_capture(a, DL_SYNC_SIM_CAPTURE_GLOBAL));
  DLManagedTensorVersioned *untouched = (DLManagedTensorVersioned *)&array, *t = untouched;
  assert_int_equal(dl_sync_exchange_import(&table_producers[0].api, &array, sim_view(b, 0), &t),
                   DL_SYNC_ECAPTURE);
  assert_error_mentions("dl_sync_exchange_import: ordering the stream");
  assert_error_mentions("is capturing a graph");
  dl_sync_sim_graph *graph = NULL;
  CHECK_SIM(dl_sync_sim_stream_end_capture(a, &graph));
  CHECK_SIM(dl_sync_sim_graph_destroy(graph));
  assert_ptr_equal(t, untouched);
  assert_int_equal(atomic_load(&array.taken), 1);
  assert_int_equal(atomic_load(&array.deleted), 1);
  assert_int_equal(array.canary, CANARY);
}

/* --- a producer that misbehaves -------------------------------------------------------- */

typedef struct failure_case {
  const char *what;
  table_fault fault;
  DLDevice array_device;
  DLDevice consumer_device;
  int status;
  const char *message;
  int taken; /* a tensor was made (and must have been given back) */
} failure_case;

/* Runs one failing import (group: through a group); checks the status and message, that
 *out is untouched, the tensor made given back once and the object untouched. */
static void check_failure(const failure_case *c, void *answer, int group) {
  table_producers_reset();
  table_producers[0].fault = c->fault;
  table_producers[0].answer = answer;
  static table_array array;
  table_array_init(&array, c->array_device);
  array.canary = CANARY;
  table_producer_use_stream(0, new_stream());
  DLManagedTensorVersioned *untouched = (DLManagedTensorVersioned *)&array, *t = untouched;
  dl_sync_stream consumer = dl_sync_stream_view(c->consumer_device, new_stream());
  int status;
  if (group) {
    dl_sync_group g;
    CHECK_DL(dl_sync_group_init(&g, consumer));
    status = dl_sync_group_add_exchange_import(&g, &table_producers[0].api, &array, &t);
    assert_int_equal(g.stream_count + g.table_count, 0); /* the group is as it was */
  } else {
    status = dl_sync_exchange_import(&table_producers[0].api, &array, consumer, &t);
  }
  if (status != c->status)
    fail_msg("%s: %s, expected %s (%s)", c->what, dl_sync_status_name(status),
             dl_sync_status_name(c->status), dl_sync_last_error());
  assert_error_mentions(c->message);
  assert_error_mentions(group ? "dl_sync_group_add_exchange_import: "
                              : "dl_sync_exchange_import: ");
  assert_ptr_equal(t, untouched);
  assert_int_equal(atomic_load(&array.taken), c->taken);
  assert_int_equal(atomic_load(&array.deleted), c->taken);
  assert_int_equal(array.canary, CANARY);
}

static const failure_case failures[] = {
    {"current_work_stream fails",
     TABLE_FAULT_STREAM_FAILS,
     {kDLCUDA, 0},
     {kDLCUDA, 0},
     DL_SYNC_EBACKEND,
     "current_work_stream(cuda, 0) failed with -1",
     1},
    {"the conversion fails",
     TABLE_FAULT_CONVERSION_FAILS,
     {kDLCUDA, 0},
     {kDLCUDA, 0},
     DL_SYNC_EBACKEND,
     "managed_tensor_from_py_object_no_sync failed with -1",
     0},
    {"the conversion returns no tensor",
     TABLE_FAULT_NO_TENSOR,
     {kDLCUDA, 0},
     {kDLCUDA, 0},
     DL_SYNC_EBACKEND,
     "returned 0 and no tensor",
     0},
    {"a tensor of DLPack 2.0",
     TABLE_FAULT_TENSOR_MAJOR_2,
     {kDLCUDA, 0},
     {kDLCUDA, 0},
     DL_SYNC_EINVAL,
     "is of DLPack version 2.3: expected major version 1",
     1},
    {"a tensor of device type 42",
     TABLE_FAULT_TENSOR_UNKNOWN_TYPE,
     {kDLCUDA, 0},
     {kDLCUDA, 0},
     DL_SYNC_EINVAL,
     "the producer's tensor has unknown device type 42",
     1},
};

static void test_a_failing_producer_gets_a_clear_error_and_its_tensor_back(void **state) {
  (void)state;
  for (int group = 0; group < 2; group++)
    for (size_t i = 0; i < sizeof failures / sizeof failures[0]; i++)
      check_failure(&failures[i], NULL, group);
}

static void test_a_tensor_of_another_family_than_the_consumer_is_refused(void **state) {
  (void)state;
  const failure_case single = {"CUDA tensor, ROCm consumer",
                               TABLE_FAULT_NONE,
                               {kDLCUDA, 0},
                               {kDLROCM, 0},
                               DL_SYNC_EINVAL,
                               "expected a consumer stream of the tensor's device family",
                               1};
  check_failure(&single, NULL, 0);
  const failure_case grouped = {"CUDA tensor, ROCm group",
                                TABLE_FAULT_NONE,
                                {kDLCUDA, 0},
                                {kDLROCM, 0},
                                DL_SYNC_EINVAL,
                                "expected a device of the consumer's family",
                                1};
  check_failure(&grouped, NULL, 1);
}

/* current_work_stream answers a stream of device 1 for a tensor of device 0: the runtime
   refuses the record (an event of device 0), and the message names the stream answered. */
static void test_a_stream_of_another_device_is_named_in_the_error(void **state) {
  (void)state;
  CHECK_SIM(dl_sync_sim_set_device(1));
  dl_sync_sim_stream *elsewhere = new_stream();
  CHECK_SIM(dl_sync_sim_set_device(0));
  char expected[128];
  snprintf(expected, sizeof expected,
           "ordering the stream %p that the producer's "
           "current_work_stream answered for cuda:0",
           (void *)elsewhere);
  const failure_case c = {"a stream of device 1",
                          TABLE_FAULT_STREAM_ANSWERS,
                          {kDLCUDA, 0},
                          {kDLCUDA, 0},
                          DL_SYNC_EBACKEND,
                          expected,
                          1};
  check_failure(&c, elsewhere, 0);
}

static void test_tables_dlsync_cannot_use_are_refused_before_any_conversion(void **state) {
  (void)state;
  static table_array array;
  table_array_init(&array, cuda0);
  dl_sync_stream consumer = sim_view(new_stream(), 0);
  DLManagedTensorVersioned *t = NULL;
  DLPackExchangeAPI newer = table_producers[0].api;
  newer.header.version = (DLPackVersion){2, 0};
  assert_int_equal(dl_sync_exchange_import(&newer, &array, consumer, &t), DL_SYNC_ENOTSUP);
  assert_error_mentions("no exchange table of major version 1 in the chain (newest is 2.0)");
  DLPackExchangeAPI cyclic = newer;
  cyclic.header.prev_api = &cyclic.header;
  assert_int_equal(dl_sync_exchange_import(&cyclic, &array, consumer, &t), DL_SYNC_EINVAL);
  assert_error_mentions("cyclic or corrupt");
  DLPackExchangeAPI no_conversion = table_producers[0].api;
  no_conversion.managed_tensor_from_py_object_no_sync = NULL;
  assert_int_equal(dl_sync_exchange_import(&no_conversion, &array, consumer, &t), DL_SYNC_ENOTSUP);
  assert_error_mentions("has no managed_tensor_from_py_object_no_sync");
  DLPackExchangeAPI no_stream = table_producers[0].api;
  no_stream.current_work_stream = NULL; /* a CUDA tensor needs it: given back */
  assert_int_equal(dl_sync_exchange_import(&no_stream, &array, consumer, &t), DL_SYNC_ENOTSUP);
  assert_error_mentions("has no current_work_stream");
  assert_int_equal(dl_sync_exchange_import(NULL, &array, consumer, &t), DL_SYNC_EINVAL);
  assert_int_equal(dl_sync_exchange_import(&table_producers[0].api, NULL, consumer, &t),
                   DL_SYNC_EINVAL);
  assert_int_equal(dl_sync_exchange_import(&table_producers[0].api, &array, consumer, NULL),
                   DL_SYNC_EINVAL);
  assert_null(t);
  assert_int_equal(atomic_load(&array.taken), 1);
  assert_int_equal(atomic_load(&array.deleted), 1);
}

#define TEST(name) cmocka_unit_test_setup_teardown(name, setup, leave_sim)

int main(void) {
  const struct CMUnitTest tests[] = {
      TEST(test_an_import_orders_the_producers_current_stream_before_the_consumer),
      TEST(test_negative_control_the_bare_conversion_races),
      TEST(test_a_held_producer_is_waited_for),
      TEST(test_negative_control_held_producer_bare_conversion_reads_stale_words),
      TEST(test_on_the_producers_stream_an_import_makes_no_runtime_call),
      TEST(test_a_cpu_tensor_needs_no_stream_work),
      TEST(test_a_group_orders_several_producers_at_one_dependency_each),
      TEST(test_negative_control_a_group_never_waited_on_races),
      TEST(test_the_release_orders_the_producers_reuse_after_the_consumers_read),
      TEST(test_negative_control_the_deleter_called_directly_lets_the_reuse_overwrite),
      TEST(test_a_release_of_another_producers_tensor_is_deferred),
      TEST(test_a_capturing_consumer_gets_an_external_wait),
      TEST(test_a_capturing_producer_is_refused_and_its_tensor_given_back),
      TEST(test_a_failing_producer_gets_a_clear_error_and_its_tensor_back),
      TEST(test_a_tensor_of_another_family_than_the_consumer_is_refused),
      TEST(test_a_stream_of_another_device_is_named_in_the_error),
      TEST(test_tables_dlsync_cannot_use_are_refused_before_any_conversion),
  };
  return cmocka_run_group_tests_name("exchange_import", tests, NULL, NULL);
}
