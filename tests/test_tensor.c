/* SPDX-License-Identifier: Apache-2.0 */
/* Per-tensor events owned by the deleter, on the simulated device: ordering (with a
   negative control), identity and ownership, deleters on foreign threads, bad input. */
#define _POSIX_C_SOURCE 200809L /* pthread barriers */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "dlsync/dlsync.h"
#include "ordering/ordering.h"
#include "support/error_message.h"
#include "support/other_copy_record.h"

/* A producer's tensor: its own manager_ctx and deleter, which count their calls. */
typedef struct producer_tensor {
  DLManagedTensorVersioned versioned;
  DLManagedTensor legacy;
  int marker; /* what manager_ctx points to */
  atomic_int deleted;
  atomic_int wrong_ctx;
} producer_tensor;

static void producer_deleter(DLManagedTensorVersioned *t) {
  producer_tensor *p = (producer_tensor *)((char *)t - offsetof(producer_tensor, versioned));
  if (t->manager_ctx != &p->marker || t->deleter != producer_deleter)
    atomic_fetch_add(&p->wrong_ctx, 1);
  atomic_fetch_add(&p->deleted, 1);
}

static void producer_legacy_deleter(DLManagedTensor *t) {
  producer_tensor *p = (producer_tensor *)((char *)t - offsetof(producer_tensor, legacy));
  if (t->manager_ctx != &p->marker || t->deleter != producer_legacy_deleter)
    atomic_fetch_add(&p->wrong_ctx, 1);
  atomic_fetch_add(&p->deleted, 1);
}

static void make_tensor(producer_tensor *p, DLDevice device) {
  memset(p, 0, sizeof *p);
  p->versioned = (DLManagedTensorVersioned){
      .version = {1, 3}, .manager_ctx = &p->marker, .deleter = producer_deleter};
  p->versioned.dl_tensor.device = device;
  p->legacy = (DLManagedTensor){.manager_ctx = &p->marker, .deleter = producer_legacy_deleter};
  p->legacy.dl_tensor.device = device;
}

static const DLDevice cuda0 = {kDLCUDA, 0};

static dl_sync_pool_stats pool(void) {
  dl_sync_pool_stats stats;
  dl_sync_pool_stats_get(dl_sync_sim_backend(), 0, &stats);
  return stats;
}

/* Producer writes on a and records the tensor's event; consumer waits (or not) on b. */
static void exchange_through_tensor_event(int legacy, int wait, int iterations) {
  static pattern data;
  data = (pattern){.racy = !wait};
  dl_sync_sim_stream *a, *b;
  CHECK_SIM(dl_sync_sim_stream_create(&a, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(dl_sync_sim_stream_create(&b, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  dl_sync_sim_set_jitter(11, 300);
  for (int i = 0; i < iterations; i++) {
    producer_tensor p;
    make_tensor(&p, cuda0);
    CHECK_SIM(launch_producer(a, &data, i));
    if (legacy)
      CHECK_DL(dl_sync_legacy_tensor_record(&p.legacy, sim_view(a, 0)));
    else
      CHECK_DL(dl_sync_tensor_record(&p.versioned, sim_view(a, 0)));
    assert_int_equal(legacy ? dl_sync_legacy_tensor_has_event(&p.legacy)
                            : dl_sync_tensor_has_event(&p.versioned),
                     1);
    if (wait && legacy) CHECK_DL(dl_sync_legacy_tensor_wait(&p.legacy, sim_view(b, 0)));
    if (wait && !legacy) CHECK_DL(dl_sync_tensor_wait(&p.versioned, sim_view(b, 0)));
    CHECK_SIM(launch_consumer(b, &data, i));
    /* The consumer is done with the tensor: the deleter may run right away. */
    if (legacy)
      p.legacy.deleter(&p.legacy);
    else
      p.versioned.deleter(&p.versioned);
    assert_int_equal(atomic_load(&p.deleted), 1);
    assert_int_equal(atomic_load(&p.wrong_ctx), 0);
    CHECK_DL(dl_sync_push_dep(sim_view(b, 0), sim_view(a, 0)));
  }
  CHECK_SIM(dl_sync_sim_device_synchronize());
  dl_sync_sim_host_access("test reads mismatches", &data.mismatches, DL_SYNC_SIM_READ);
  if (wait) {
    assert_int_equal(dl_sync_sim_race_count(), 0);
    assert_int_equal(data.mismatches, 0);
    assert_int_equal(pool().outstanding, 0);
  } else {
    assert_int_equal(dl_sync_sim_race_count(), (uint64_t)iterations);
    print_message("without the wait: %llu races, %lld wrong words\n",
                  (unsigned long long)dl_sync_sim_race_count(), (long long)data.mismatches);
  }
}

static void test_tensor_event_orders_the_consumer(void **state) {
  (void)state;
  exchange_through_tensor_event(0, 1, 200);
}

static void test_legacy_tensor_event_orders_the_consumer(void **state) {
  (void)state;
  exchange_through_tensor_event(1, 1, 200);
}

static void test_negative_control_without_the_wait_races(void **state) {
  (void)state;
  exchange_through_tensor_event(0, 0, 100);
}

static void test_identity_and_deleter_contract(void **state) {
  (void)state;
  producer_tensor p;
  make_tensor(&p, cuda0);
  DLManagedTensorVersioned *before = &p.versioned;
  CHECK_DL(dl_sync_tensor_record(&p.versioned, sim_view(NULL, 0)));
  assert_ptr_not_equal(p.versioned.manager_ctx, &p.marker); /* wrapped in place */
  assert_ptr_not_equal(p.versioned.deleter, producer_deleter);
  CHECK_DL(dl_sync_tensor_record(&p.versioned, sim_view(NULL, 0))); /* re-record */
  assert_int_equal(pool().created, 1);
  CHECK_DL(dl_sync_tensor_synchronize(&p.versioned));
  before->deleter(before);
  assert_int_equal(atomic_load(&p.deleted), 1);
  assert_int_equal(atomic_load(&p.wrong_ctx), 0);
  assert_ptr_equal(p.versioned.manager_ctx, &p.marker); /* restored */
  assert_ptr_equal(p.versioned.deleter, producer_deleter);
  assert_int_equal(pool().outstanding, 0);
}

static void test_null_original_deleter_stays_legal(void **state) {
  (void)state;
  DLManagedTensorVersioned t = {.version = {1, 3}};
  t.dl_tensor.device = cuda0;
  DLManagedTensor legacy = {.dl_tensor = {.device = cuda0}};
  CHECK_DL(dl_sync_tensor_record(&t, sim_view(NULL, 0)));
  CHECK_DL(dl_sync_legacy_tensor_record(&legacy, sim_view(NULL, 0)));
  t.deleter(&t);
  legacy.deleter(&legacy);
  assert_null(t.deleter);
  assert_null(t.manager_ctx);
  assert_null(legacy.deleter);
  assert_int_equal(pool().outstanding, 0);
}

static void test_foreign_tensor_wait_is_a_noop(void **state) {
  (void)state;
  producer_tensor p;
  make_tensor(&p, cuda0);
  assert_int_equal(dl_sync_tensor_has_event(&p.versioned), 0);
  assert_int_equal(dl_sync_tensor_wait(NULL, sim_view(NULL, 0)), DL_SYNC_EINVAL);
  assert_int_equal(dl_sync_tensor_wait(&p.versioned, sim_view(NULL, 0)), DL_SYNC_OK);
  assert_error_mentions("dl_sync_tensor_wait: tensor must not be NULL"); /* success: no message */
  assert_int_equal(dl_sync_legacy_tensor_wait(&p.legacy, sim_view(NULL, 0)), DL_SYNC_OK);
  assert_int_equal(dl_sync_tensor_synchronize(&p.versioned), DL_SYNC_OK);
  assert_int_equal(pool().created, 0);
}

static void test_tensor_freed_before_the_graph_that_waits_on_its_event(void **state) {
  (void)state;
  static pattern data;
  dl_sync_sim_stream *a, *b, *launcher;
  CHECK_SIM(dl_sync_sim_stream_create(&a, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(dl_sync_sim_stream_create(&b, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(dl_sync_sim_stream_create(&launcher, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  dl_sync_sim_set_jitter(12, 400);
  producer_tensor p;
  make_tensor(&p, cuda0);
  CHECK_SIM(launch_producer(a, &data, 3));
  CHECK_DL(dl_sync_tensor_record(&p.versioned, sim_view(a, 0)));
  CHECK_SIM(dl_sync_sim_stream_begin_capture(b, DL_SYNC_SIM_CAPTURE_GLOBAL));
  CHECK_DL(dl_sync_tensor_wait(&p.versioned, sim_view(b, 0)));
  CHECK_SIM(launch_consumer(b, &data, 3));
  dl_sync_sim_graph *graph;
  CHECK_SIM(dl_sync_sim_stream_end_capture(b, &graph));
  p.versioned.deleter(&p.versioned); /* the tensor goes first */
  assert_int_equal(atomic_load(&p.deleted), 1);
  assert_int_equal(pool().outstanding, 1); /* the graph still holds the event */
  dl_sync_sim_graph_exec *exec;
  CHECK_SIM(dl_sync_sim_graph_instantiate(&exec, graph));
  CHECK_SIM(dl_sync_sim_graph_destroy(graph));
  for (int i = 0; i < 10; i++) CHECK_SIM(dl_sync_sim_graph_launch(exec, launcher));
  CHECK_SIM(dl_sync_sim_stream_synchronize(launcher));
  dl_sync_sim_host_access("test reads mismatches", &data.mismatches, DL_SYNC_SIM_READ);
  assert_int_equal(dl_sync_sim_race_count(), 0);
  assert_int_equal(data.mismatches, 0);
  assert_int_equal(pool().outstanding, 1);
  CHECK_SIM(dl_sync_sim_graph_exec_destroy(exec));
  assert_int_equal(pool().outstanding, 0);
}

/* Producers record on their threads; the tensors are deleted on other threads, while
   other exports go on. */
enum { PRODUCERS = 4, DELETERS = 4, TENSORS_PER_PRODUCER = 500 };

typedef struct handoff {
  pthread_mutex_t lock;
  pthread_cond_t ready;
  producer_tensor *queue[PRODUCERS * TENSORS_PER_PRODUCER];
  size_t head, tail;
  int producers_done;
} handoff;

typedef struct thread_arg {
  pthread_t thread;
  handoff *h;
  producer_tensor *tensors;
  int failures;
  char error[256];
} thread_arg;

static void *produce_tensors(void *arg) {
  thread_arg *t = arg;
  dl_sync_sim_stream *a, *b;
  dl_sync_sim_stream_create(&a, DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_stream_create(&b, DL_SYNC_SIM_STREAM_NON_BLOCKING);
  for (int i = 0; i < TENSORS_PER_PRODUCER; i++) {
    producer_tensor *p = &t->tensors[i];
    make_tensor(p, cuda0);
    int status = dl_sync_tensor_record(&p->versioned, sim_view(a, 0));
    if (status == 0) status = dl_sync_tensor_wait(&p->versioned, sim_view(b, 0));
    if (status == 0) status = dl_sync_push_dep(sim_view(b, 0), sim_view(a, 0)); /* exports too */
    if (status != 0 && t->failures++ == 0)
      snprintf(t->error, sizeof t->error, "%s", dl_sync_last_error());
    pthread_mutex_lock(&t->h->lock);
    t->h->queue[t->h->tail++] = p;
    pthread_cond_signal(&t->h->ready);
    pthread_mutex_unlock(&t->h->lock);
  }
  return NULL;
}

static void *delete_tensors(void *arg) {
  thread_arg *t = arg;
  for (;;) {
    pthread_mutex_lock(&t->h->lock);
    while (t->h->head == t->h->tail && !t->h->producers_done)
      pthread_cond_wait(&t->h->ready, &t->h->lock);
    producer_tensor *p = t->h->head < t->h->tail ? t->h->queue[t->h->head++] : NULL;
    pthread_mutex_unlock(&t->h->lock);
    if (p == NULL) return NULL;
    p->versioned.deleter(&p->versioned);
  }
}

static void test_deleters_run_on_foreign_threads_during_exports(void **state) {
  (void)state;
  static handoff h = {.lock = PTHREAD_MUTEX_INITIALIZER, .ready = PTHREAD_COND_INITIALIZER};
  static producer_tensor tensors[PRODUCERS][TENSORS_PER_PRODUCER];
  thread_arg producers[PRODUCERS], deleters[DELETERS];
  for (int i = 0; i < DELETERS; i++) {
    deleters[i] = (thread_arg){.h = &h};
    pthread_create(&deleters[i].thread, NULL, delete_tensors, &deleters[i]);
  }
  for (int i = 0; i < PRODUCERS; i++) {
    producers[i] = (thread_arg){.h = &h, .tensors = tensors[i]};
    pthread_create(&producers[i].thread, NULL, produce_tensors, &producers[i]);
  }
  for (int i = 0; i < PRODUCERS; i++) pthread_join(producers[i].thread, NULL);
  pthread_mutex_lock(&h.lock);
  h.producers_done = 1;
  pthread_cond_broadcast(&h.ready);
  pthread_mutex_unlock(&h.lock);
  for (int i = 0; i < DELETERS; i++) pthread_join(deleters[i].thread, NULL);
  for (int i = 0; i < PRODUCERS; i++) {
    if (producers[i].failures) fail_msg("producer %d: %s", i, producers[i].error);
    for (int j = 0; j < TENSORS_PER_PRODUCER; j++) {
      assert_int_equal(atomic_load(&tensors[i][j].deleted), 1);
      assert_int_equal(atomic_load(&tensors[i][j].wrong_ctx), 0);
    }
  }
  dl_sync_pool_stats stats = pool();
  print_message("%d tensors deleted on foreign threads, %llu events created\n",
                PRODUCERS * TENSORS_PER_PRODUCER, (unsigned long long)stats.created);
  assert_int_equal(stats.outstanding, 0);
  assert_int_equal(stats.idle, stats.created);
}

/* Deleters no thread has seen before, each a function of its own (its index kept, so that
   no two fold into one). */
static volatile int foreign_deleted;
#define FOREIGN_DELETER(i)                                       \
  static void foreign_deleter_##i(DLManagedTensorVersioned *t) { \
    (void)t;                                                     \
    foreign_deleted = i;                                         \
  }
/* clang-format off */
FOREIGN_DELETER(0) FOREIGN_DELETER(1) FOREIGN_DELETER(2) FOREIGN_DELETER(3)
FOREIGN_DELETER(4) FOREIGN_DELETER(5) FOREIGN_DELETER(6) FOREIGN_DELETER(7)
static void (*const foreign_deleters[])(DLManagedTensorVersioned *) = {
    foreign_deleter_0, foreign_deleter_1, foreign_deleter_2, foreign_deleter_3,
    foreign_deleter_4, foreign_deleter_5, foreign_deleter_6, foreign_deleter_7};
/* clang-format on */
enum { FOREIGN = sizeof foreign_deleters / sizeof *foreign_deleters, RECOGNIZERS = 8 };

typedef struct recognizer {
  pthread_barrier_t *start;
  int wrong;
} recognizer;

static void *recognize_new_deleters(void *arg) {
  recognizer *r = arg;
  for (int i = 0; i < FOREIGN; i++) {
    DLManagedTensorVersioned tensor = {.version = {1, 3}, .deleter = foreign_deleters[i]};
    tensor.dl_tensor.device = cuda0;
    pthread_barrier_wait(r->start); /* every thread meets deleter i for the first time */
    if (dl_sync_tensor_has_event(&tensor) != 0) r->wrong++;
  }
  return NULL;
}

/* Several threads see a new deleter at once: one publishes its verdict in the recognition
   cache while the others read it (a race checker build sees a slot published before its
   verdict), and every answer is "no event". */
static void test_threads_recognize_a_new_deleter_at_once(void **state) {
  (void)state;
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, RECOGNIZERS);
  recognizer runs[RECOGNIZERS];
  pthread_t threads[RECOGNIZERS];
  for (int i = 0; i < RECOGNIZERS; i++) {
    runs[i] = (recognizer){.start = &start};
    assert_int_equal(pthread_create(&threads[i], NULL, recognize_new_deleters, &runs[i]), 0);
  }
  for (int i = 0; i < RECOGNIZERS; i++) assert_int_equal(pthread_join(threads[i], NULL), 0);
  pthread_barrier_destroy(&start);
  for (int i = 0; i < RECOGNIZERS; i++) assert_int_equal(runs[i].wrong, 0);
}

static void test_bad_input_gets_clear_errors(void **state) {
  (void)state;
  assert_int_equal(dl_sync_tensor_record(NULL, sim_view(NULL, 0)), DL_SYNC_EINVAL);
  assert_error_mentions("dl_sync_tensor_record: tensor must not be NULL");
  assert_int_equal(dl_sync_tensor_wait(NULL, sim_view(NULL, 0)), DL_SYNC_EINVAL);
  assert_int_equal(dl_sync_legacy_tensor_wait(NULL, sim_view(NULL, 0)), DL_SYNC_EINVAL);
  assert_int_equal(dl_sync_tensor_synchronize(NULL), DL_SYNC_EINVAL);
  assert_int_equal(dl_sync_tensor_has_event(NULL), DL_SYNC_EINVAL);
  assert_int_equal(dl_sync_legacy_tensor_has_event(NULL), DL_SYNC_EINVAL);

  producer_tensor cpu;
  make_tensor(&cpu, (DLDevice){kDLCPU, 0});
  assert_int_equal(dl_sync_tensor_record(&cpu.versioned, sim_view(NULL, 0)), DL_SYNC_EINVAL);
  assert_error_mentions("is on cpu:0 but the producer stream is on cuda:0");
  assert_int_equal(dl_sync_tensor_record(&cpu.versioned,
                                         dl_sync_stream_view(cpu.versioned.dl_tensor.device, NULL)),
                   DL_SYNC_EINVAL);
  assert_error_mentions("which has no streams");
  producer_tensor rocm;
  make_tensor(&rocm, (DLDevice){kDLROCM, 0});
  assert_int_equal(dl_sync_tensor_record(&rocm.versioned, sim_view(NULL, 0)), DL_SYNC_EINVAL);
  assert_int_equal(dl_sync_tensor_record(
                       &rocm.versioned, dl_sync_stream_view((DLDevice){(DLDeviceType)99, 0}, NULL)),
                   DL_SYNC_EINVAL);
  assert_error_mentions("unknown device type 99");

  /* A corrupt tensor: dlsync's deleter, someone else's manager_ctx. */
  producer_tensor p;
  make_tensor(&p, cuda0);
  CHECK_DL(dl_sync_tensor_record(&p.versioned, sim_view(NULL, 0)));
  void *owner = p.versioned.manager_ctx;
  int garbage[16] = {0};
  p.versioned.manager_ctx = garbage;
  assert_int_equal(dl_sync_tensor_has_event(&p.versioned), DL_SYNC_EINVAL);
  assert_error_mentions("the tensor is corrupt");
  assert_int_equal(dl_sync_tensor_wait(&p.versioned, sim_view(NULL, 0)), DL_SYNC_EINVAL);
  assert_int_equal(dl_sync_tensor_record(&p.versioned, sim_view(NULL, 0)), DL_SYNC_EINVAL);
  assert_int_equal(dl_sync_tensor_synchronize(&p.versioned), DL_SYNC_EINVAL);
  p.versioned.manager_ctx = owner;
  p.versioned.deleter(&p.versioned);

  /* A capturing producer. */
  dl_sync_sim_stream *a;
  CHECK_SIM(dl_sync_sim_stream_create(&a, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(dl_sync_sim_stream_begin_capture(a, DL_SYNC_SIM_CAPTURE_GLOBAL));
  make_tensor(&p, cuda0);
  assert_int_equal(dl_sync_tensor_record(&p.versioned, sim_view(a, 0)), DL_SYNC_ECAPTURE);
  assert_int_equal(dl_sync_tensor_has_event(&p.versioned), 0);
  dl_sync_sim_graph *graph;
  CHECK_SIM(dl_sync_sim_stream_end_capture(a, &graph));
  CHECK_SIM(dl_sync_sim_graph_destroy(graph));

  /* Re-recording on another device. */
  make_tensor(&p, cuda0);
  CHECK_DL(dl_sync_tensor_record(&p.versioned, sim_view(NULL, 0)));
  assert_int_equal(dl_sync_tensor_record(&p.versioned, sim_view(NULL, 1)), DL_SYNC_EINVAL);
  assert_error_mentions("cannot be re-recorded on cuda:1");
  p.versioned.deleter(&p.versioned);
  assert_int_equal(pool().outstanding, 0);
}

static dl_sync_tensor_event_owner *record_of(producer_tensor *p) {
  return p->versioned.manager_ctx;
}

/* An event dlsync cannot use is an error that says why, never "no event". */
static void test_event_of_an_unknown_abi_major_is_an_error(void **state) {
  (void)state;
  producer_tensor p;
  make_tensor(&p, cuda0);
  CHECK_DL(dl_sync_tensor_record(&p.versioned, sim_view(NULL, 0)));
  record_of(&p)->abi_major = 2;
  assert_int_equal(dl_sync_tensor_has_event(&p.versioned), DL_SYNC_ENOTSUP);
  assert_error_mentions("owner record is of ABI major 2, expected tensor-event ABI major 1");
  assert_int_equal(dl_sync_tensor_wait(&p.versioned, sim_view(NULL, 0)), DL_SYNC_ENOTSUP);
  assert_error_mentions("carries a dlsync event this copy cannot use");
  assert_int_equal(dl_sync_tensor_synchronize(&p.versioned), DL_SYNC_ENOTSUP);
  assert_int_equal(dl_sync_tensor_record(&p.versioned, sim_view(NULL, 0)), DL_SYNC_ENOTSUP);
  record_of(&p)->abi_major = DL_SYNC_TENSOR_EVENT_ABI_MAJOR;
  p.versioned.deleter(&p.versioned);
  assert_int_equal(atomic_load(&p.deleted), 1);
  assert_int_equal(pool().outstanding, 0);
}

static void test_event_of_another_runtime_family_is_an_error(void **state) {
  (void)state;
  producer_tensor p;
  make_tensor(&p, cuda0);
  CHECK_DL(dl_sync_tensor_record(&p.versioned, sim_view(NULL, 0)));
  record_of(&p)->runtime_family = 7;
  assert_int_equal(dl_sync_tensor_has_event(&p.versioned), DL_SYNC_ENOTSUP);
  assert_error_mentions("its event is of runtime family 7");
  assert_int_equal(dl_sync_tensor_wait(&p.versioned, sim_view(NULL, 0)), DL_SYNC_ENOTSUP);
  /* A ROCm event on a CUDA tensor: known, but no CUDA stream can wait on it. */
  record_of(&p)->runtime_family = DL_SYNC_RUNTIME_FAMILY_ROCM;
  assert_int_equal(dl_sync_tensor_has_event(&p.versioned), 1);
  assert_int_equal(dl_sync_tensor_wait(&p.versioned, sim_view(NULL, 0)), DL_SYNC_ENOTSUP);
  assert_error_mentions(
      "is an event of the ROCm runtime (recorded on device 0); the consumer "
      "stream on cuda:0 cannot wait on it");
  record_of(&p)->runtime_family = DL_SYNC_RUNTIME_FAMILY_CUDA;
  CHECK_DL(dl_sync_tensor_wait(&p.versioned, sim_view(NULL, 0)));
  p.versioned.deleter(&p.versioned);
  assert_int_equal(pool().outstanding, 0);
}

/* A record shorter than the ABI's (a corrupt or truncated one) is never read past its size
   claim: EINVAL naming the size, for every call that reads it. */
static void test_a_short_owner_record_is_corrupt(void **state) {
  (void)state;
  producer_tensor p;
  make_tensor(&p, cuda0);
  CHECK_DL(dl_sync_tensor_record(&p.versioned, sim_view(NULL, 0)));
  record_of(&p)->size = offsetof(dl_sync_tensor_event_owner, context_id) - 8; /* 1.0: 96 */
  assert_int_equal(dl_sync_tensor_has_event(&p.versioned), DL_SYNC_EINVAL);
  assert_error_mentions("owner record of 88 bytes (expected at least 96)");
  assert_int_equal(dl_sync_tensor_wait(&p.versioned, sim_view(NULL, 0)), DL_SYNC_EINVAL);
  record_of(&p)->size = sizeof(dl_sync_tensor_event_owner);
  p.versioned.deleter(&p.versioned);
  assert_int_equal(pool().outstanding, 0);
}

/* Records of the older minors, as older copies write them (exactly their size): "within a
   major, fields are only added at the end, and size says how many bytes are valid"
   (dlsync/tensor_event.h). Each is a live event: has_event says so, a wait orders the
   consumer after the producer's work, and a release (none names a reuse stream) defers
   the deleter until the consumer's work is done. */
static void test_records_of_older_minors_are_events(void **state) {
  (void)state;
  static pattern data;
  static const other_copy_fields minors[] = {{.minor = 0, .size = OTHER_COPY_MINOR_0_SIZE},
                                             {.minor = 1, .size = OTHER_COPY_MINOR_1_SIZE}};
  dl_sync_sim_stream *a, *b;
  CHECK_SIM(dl_sync_sim_stream_create(&a, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(dl_sync_sim_stream_create(&b, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  dl_sync_sim_set_jitter(5, 300);
  for (size_t m = 0; m < sizeof minors / sizeof *minors; m++) {
    data = (pattern){0};
    dl_sync_sim_event *event;
    CHECK_SIM(dl_sync_sim_event_create(&event));
    CHECK_SIM(launch_producer(a, &data, (int32_t)m));
    CHECK_SIM(dl_sync_sim_event_record(event, a, 0)); /* the other copy's record */
    producer_tensor p;
    make_tensor(&p, cuda0);
    other_copy_event ctx;
    dl_sync_tensor_event_owner *record =
        other_copy_wrap(&p.versioned, event, cuda0, &ctx, minors[m]);
    assert_non_null(record);
    if (dl_sync_tensor_has_event(&p.versioned) != 1)
      fail_msg("minor %u: has_event: %s", minors[m].minor, dl_sync_last_error());
    if (dl_sync_tensor_wait(&p.versioned, sim_view(b, 0)) != DL_SYNC_OK)
      fail_msg("minor %u: wait: %s", minors[m].minor, dl_sync_last_error());
    CHECK_SIM(launch_consumer(b, &data, (int32_t)m));
    int released = dl_sync_tensor_release(&p.versioned, sim_view(b, 0));
    if (released != DL_SYNC_RELEASE_DEFERRED)
      fail_msg("minor %u: release answered %d, expected DL_SYNC_RELEASE_DEFERRED: %s",
               minors[m].minor, released, dl_sync_last_error());
    CHECK_SIM(dl_sync_sim_stream_synchronize(b));
    assert_int_equal(dl_sync_release_poll(), 1);
    assert_int_equal(atomic_load(&p.deleted), 1);
    assert_int_equal(atomic_load(&p.wrong_ctx), 0);
    assert_int_equal(atomic_load(&ctx.refs), 0);
    free(record);
    CHECK_SIM(dl_sync_sim_event_destroy(event));
  }
  CHECK_SIM(dl_sync_sim_device_synchronize());
  dl_sync_sim_host_access("test reads mismatches", &data.mismatches, DL_SYNC_SIM_READ);
  assert_int_equal(dl_sync_sim_race_count(), 0);
  assert_int_equal(data.mismatches, 0);
  CHECK_SIM(dl_sync_sim_stream_destroy(a));
  CHECK_SIM(dl_sync_sim_stream_destroy(b));
}

/* Another copy's record is "read-only for every other copy" (dlsync/tensor_event.h): a
   reuse stream named through this copy is refused, and not one byte of the record moves. */
static void test_record_reuse_never_writes_another_copys_record(void **state) {
  (void)state;
  dl_sync_sim_stream *a;
  CHECK_SIM(dl_sync_sim_stream_create(&a, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  dl_sync_sim_event *event;
  CHECK_SIM(dl_sync_sim_event_create(&event));
  producer_tensor p;
  make_tensor(&p, cuda0);
  other_copy_event ctx;
  dl_sync_tensor_event_owner *record =
      other_copy_wrap(&p.versioned, event, cuda0, &ctx,
                      (other_copy_fields){.minor = 2, .size = OTHER_COPY_MINOR_2_SIZE});
  assert_non_null(record);
  dl_sync_tensor_event_owner before;
  memcpy(&before, record, OTHER_COPY_MINOR_2_SIZE);
  assert_int_equal(dl_sync_tensor_record_reuse(&p.versioned, sim_view(a, 0), sim_view(a, 0)),
                   DL_SYNC_EINVAL);
  assert_error_mentions("recorded by another copy of dlsync");
  assert_memory_equal(record, &before, OTHER_COPY_MINOR_2_SIZE);
  p.versioned.deleter(&p.versioned);
  assert_int_equal(atomic_load(&p.deleted), 1);
  assert_int_equal(atomic_load(&ctx.refs), 0);
  free(record);
  CHECK_SIM(dl_sync_sim_stream_synchronize(a));
  CHECK_SIM(dl_sync_sim_event_destroy(event));
  CHECK_SIM(dl_sync_sim_stream_destroy(a));
}

/* A copy of a tensor taken before it was deleted: its manager_ctx still points at the
   owner record, which a graph's reference keeps alive. The deletion marks the record, so
   the stale copy reads as corrupt, never as a live event of the producer. */
static void test_a_deleted_tensors_record_reads_as_corrupt(void **state) {
  (void)state;
  producer_tensor p;
  make_tensor(&p, cuda0);
  CHECK_DL(dl_sync_tensor_record(&p.versioned, sim_view(NULL, 0)));
  const dl_sync_tensor_event_owner *r = record_of(&p);
  r->retain(r->event_ctx); /* as a graph waiting on the event would */
  void (*release)(void *) = r->release;
  void *event_ctx = r->event_ctx;
  DLManagedTensorVersioned stale = p.versioned;
  p.versioned.deleter(&p.versioned);
  assert_int_equal(atomic_load(&p.deleted), 1);
  assert_int_equal(dl_sync_tensor_has_event(&stale), DL_SYNC_EINVAL);
  assert_error_mentions("the tensor was already deleted");
  release(event_ctx);
  assert_int_equal(pool().outstanding, 0);
}

static void test_owner_record_is_the_public_abi(void **state) {
  (void)state;
  producer_tensor p;
  make_tensor(&p, cuda0);
  CHECK_DL(dl_sync_tensor_record(&p.versioned, sim_view(NULL, 0)));
  const dl_sync_tensor_event_owner *r = record_of(&p);
  assert_ptr_equal(p.versioned.deleter, dl_sync_tensor_event_deleter_v1);
  assert_true(r->magic == DL_SYNC_TENSOR_EVENT_MAGIC);
  assert_int_equal(r->abi_major, DL_SYNC_TENSOR_EVENT_ABI_MAJOR);
  assert_int_equal(r->abi_minor, DL_SYNC_TENSOR_EVENT_ABI_MINOR);
  assert_int_equal(r->size, sizeof *r);
  assert_ptr_equal(r->manager_ctx, &p.marker);
  assert_ptr_equal(r->versioned_deleter, producer_deleter);
  assert_null(r->legacy_deleter);
  assert_int_equal(r->device.device_type, kDLCUDA);
  assert_int_equal(r->runtime_family, DL_SYNC_RUNTIME_FAMILY_CUDA);
  assert_non_null(r->event);
  /* retain/release keep the event out of the pool past the tensor. */
  r->retain(r->event_ctx);
  void (*release)(void *) = r->release;
  void *event_ctx = r->event_ctx;
  p.versioned.deleter(&p.versioned);
  assert_int_equal(atomic_load(&p.deleted), 1);
  assert_int_equal(pool().outstanding, 1);
  release(event_ctx);
  assert_int_equal(pool().outstanding, 0);

  producer_tensor q;
  make_tensor(&q, (DLDevice){kDLROCM, 1});
  CHECK_DL(
      dl_sync_legacy_tensor_record(&q.legacy, dl_sync_stream_view((DLDevice){kDLROCM, 1}, NULL)));
  const dl_sync_tensor_event_owner *l = q.legacy.manager_ctx;
  assert_ptr_equal(q.legacy.deleter, dl_sync_legacy_tensor_event_deleter_v1);
  assert_ptr_equal(l->legacy_deleter, producer_legacy_deleter);
  assert_null(l->versioned_deleter);
  assert_int_equal(l->runtime_family, DL_SYNC_RUNTIME_FAMILY_ROCM);
  assert_int_equal(l->device.device_id, 1);
  q.legacy.deleter(&q.legacy);
  assert_int_equal(atomic_load(&q.deleted), 1);
}

/* Exported by this executable (ENABLE_EXPORTS): a deleter of a future ABI major, as a
   newer copy of dlsync would export it. It is never called. */
#ifdef _WIN32
#define EXPORTED __declspec(dllexport)
#else
#define EXPORTED DL_SYNC_RECOGNIZED_API
#endif
EXPORTED void dl_sync_tensor_event_deleter_v2(DLManagedTensorVersioned *tensor);
void dl_sync_tensor_event_deleter_v2(DLManagedTensorVersioned *tensor) {
  (void)tensor;
}

static void test_deleter_of_a_future_abi_major_is_an_error_without_reading_the_tensor(
    void **state) {
  (void)state;
#ifdef _WIN32
  skip(); /* other copies' deleters are recognized by name through dladdr, absent on Windows */
#endif
  DLManagedTensorVersioned t = {
      .version = {1, 3}, .manager_ctx = (void *)1, .deleter = dl_sync_tensor_event_deleter_v2};
  t.dl_tensor.device = cuda0;
  assert_int_equal(dl_sync_tensor_has_event(&t), DL_SYNC_ENOTSUP);
  assert_error_mentions("its deleter is of tensor-event ABI major 2");
  assert_int_equal(dl_sync_tensor_wait(&t, sim_view(NULL, 0)), DL_SYNC_ENOTSUP);
}

/* Addresses near dlsync's deleters, other exported functions and the other kind's deleter
   are not dlsync's deleter: manager_ctx (here unmapped) is never read. */
static void test_near_misses_of_the_deleter_are_foreign(void **state) {
  (void)state;
  typedef void (*deleter_fn)(DLManagedTensorVersioned *);
  typedef void (*legacy_fn)(DLManagedTensor *);
  const char *starts[] = {(const char *)(uintptr_t)dl_sync_tensor_event_deleter_v1,
                          (const char *)(uintptr_t)dl_sync_legacy_tensor_event_deleter_v1};
  for (size_t s = 0; s < 2; s++) {
    for (uintptr_t k = 1; k < 256; k++) {
      if (starts[s] + k == starts[0] || starts[s] + k == starts[1]) continue; /* the real ones */
      DLManagedTensorVersioned t = {.manager_ctx = (void *)1,
                                    .deleter = (deleter_fn)(uintptr_t)(starts[s] + k)};
      t.dl_tensor.device = cuda0;
      DLManagedTensor l = {.manager_ctx = (void *)1,
                           .deleter = (legacy_fn)(uintptr_t)(starts[s] + k)};
      l.dl_tensor.device = cuda0;
      assert_int_equal(dl_sync_tensor_has_event(&t), 0);
      assert_int_equal(dl_sync_legacy_tensor_has_event(&l), 0);
    }
  }
  DLManagedTensorVersioned t = {
      .manager_ctx = (void *)1,
      .deleter = (deleter_fn)(uintptr_t)dl_sync_legacy_tensor_event_deleter_v1};
  t.dl_tensor.device = cuda0;
  assert_int_equal(dl_sync_tensor_has_event(&t), 0);
  t.deleter = (deleter_fn)(uintptr_t)dl_sync_tensor_record;
  assert_int_equal(dl_sync_tensor_has_event(&t), 0);
  assert_int_equal(dl_sync_tensor_wait(&t, sim_view(NULL, 0)), DL_SYNC_OK); /* not dlsync's */
  DLManagedTensor l = {.manager_ctx = (void *)1,
                       .deleter = (legacy_fn)(uintptr_t)dl_sync_tensor_event_deleter_v1};
  l.dl_tensor.device = cuda0;
  assert_int_equal(dl_sync_legacy_tensor_has_event(&l), 0);
  assert_int_equal(pool().created, 0);
}

static void test_the_shared_library_deleters_are_visible_to_other_copies(void **state) {
  (void)state;
#ifdef _WIN32
  skip(); /* no dladdr: another copy cannot name this copy's deleters on Windows */
#endif
  assert_int_equal(dl_sync_tensor_events_visible(), 1);
}

/* HIP's rules (5.7 to 7.2.0): a synchronization of an event reads its last recording stream
   and invalidates that stream's capture, and reads a destroyed one's freed memory. The
   record names that stream (minor 4): dl_sync_tensor_synchronize asks it first, and refuses
   (ECAPTURE, saying why) while it captures, once it is destroyed, or where it is another
   thread's per-thread stream; the capture survives and ends. The control: the same record
   cut to minor 3's size (an older copy's, which does not say the stream) breaks the capture
   and reads the destroyed stream, as the runtime does. */
typedef struct synchronizer {
  const DLManagedTensorVersioned *tensor;
  int status;
} synchronizer;

static void *synchronize_here(void *arg) {
  synchronizer *s = arg;
  s->status = dl_sync_tensor_synchronize(s->tensor);
  return NULL;
}

static void test_synchronize_asks_the_producers_stream_first(void **state) {
  (void)state;
  CHECK_SIM(dl_sync_sim_set_query_rules(DL_SYNC_SIM_QUERY_RULES_HIP));
  for (int control = 0; control < 2; control++) {
    dl_sync_sim_stream *a;
    CHECK_SIM(dl_sync_sim_stream_create(&a, DL_SYNC_SIM_STREAM_NON_BLOCKING));
    producer_tensor p;
    make_tensor(&p, cuda0);
    CHECK_DL(dl_sync_tensor_record(&p.versioned, sim_view(a, 0)));
    dl_sync_tensor_event_owner *record = p.versioned.manager_ctx;
    assert_ptr_equal(record->producer_stream, a);
    uint64_t size = record->size;
    if (control) record->size = OTHER_COPY_MINOR_3_SIZE;
    CHECK_SIM(dl_sync_sim_stream_begin_capture(a, DL_SYNC_SIM_CAPTURE_RELAXED));
    int status = dl_sync_tensor_synchronize(&p.versioned);
    int32_t capture = -1;
    CHECK_SIM(dl_sync_sim_stream_capture_info(a, &capture, NULL, NULL));
    dl_sync_sim_graph *graph = NULL;
    int ended = dl_sync_sim_stream_end_capture(a, &graph);
    if (graph != NULL) CHECK_SIM(dl_sync_sim_graph_destroy(graph));
    if (control) {
      assert_int_equal(capture, DL_SYNC_CAPTURE_INVALIDATED); /* what the rule protects */
      assert_int_not_equal(ended, DL_SYNC_SIM_SUCCESS);
    } else {
      assert_int_equal(status, DL_SYNC_ECAPTURE);
      assert_error_mentions("capturing a graph now");
      assert_int_equal(capture, DL_SYNC_CAPTURE_ACTIVE);
      assert_int_equal(ended, DL_SYNC_SIM_SUCCESS);
      CHECK_DL(dl_sync_tensor_synchronize(&p.versioned)); /* the capture ended */
      /* another thread cannot name this thread's per-thread stream */
      CHECK_DL(dl_sync_tensor_record(&p.versioned, sim_view(DL_SYNC_SIM_STREAM_PER_THREAD, 0)));
      CHECK_DL(dl_sync_tensor_synchronize(&p.versioned));
      synchronizer other = {&p.versioned, -1};
      pthread_t thread;
      pthread_create(&thread, NULL, synchronize_here, &other);
      pthread_join(thread, NULL);
      assert_int_equal(other.status, DL_SYNC_ECAPTURE);
      CHECK_DL(dl_sync_tensor_record(&p.versioned, sim_view(a, 0)));
    }
    CHECK_SIM(dl_sync_sim_stream_synchronize(a));
    CHECK_SIM(dl_sync_sim_stream_destroy(a));
    uint64_t reads = dl_sync_sim_destroyed_stream_reads();
    status = dl_sync_tensor_synchronize(&p.versioned);
    assert_int_equal(dl_sync_sim_destroyed_stream_reads() - reads, control ? 1 : 0);
    if (!control) assert_int_equal(status, DL_SYNC_ECAPTURE);
    record->size = size;
    p.versioned.deleter(&p.versioned);
    assert_int_equal(atomic_load(&p.deleted), 1);
  }
  CHECK_SIM(dl_sync_sim_set_query_rules(DL_SYNC_SIM_QUERY_RULES_CUDA));
}

/* event_synchronize_disturbs, a member appended to the table, is read only where a backend's size
   covers it: a backend built before it (its size ending there) is never asked, and its
   synchronization is the runtime's (under HIP's rules: the producer's capture broken). The
   control: the same backend with the size that covers it is asked, once, and refuses. */
static int disturbs_asked;

static int counting_disturbs(void *ctx, void *stream, int *disturbs) {
  disturbs_asked++;
  return dl_sync_sim_backend()->event_synchronize_disturbs(ctx, stream, disturbs);
}

static dl_sync_backend sized_backends[2]; /* valid until the teardown's shutdown */

static void test_synchronize_asks_only_a_backend_whose_size_covers_the_question(void **state) {
  (void)state;
  CHECK_SIM(dl_sync_sim_set_query_rules(DL_SYNC_SIM_QUERY_RULES_HIP));
  for (int covered = 0; covered < 2; covered++) {
    dl_sync_backend *b = &sized_backends[covered];
    *b = *dl_sync_sim_backend();
    b->event_synchronize_disturbs = counting_disturbs;
    if (!covered) b->size = (uint32_t)offsetof(dl_sync_backend, event_synchronize_disturbs);
    CHECK_DL(dl_sync_set_backend(kDLCUDA, b));
    disturbs_asked = 0;
    dl_sync_sim_stream *a;
    CHECK_SIM(dl_sync_sim_stream_create(&a, DL_SYNC_SIM_STREAM_NON_BLOCKING));
    producer_tensor p;
    make_tensor(&p, cuda0);
    CHECK_DL(dl_sync_tensor_record(&p.versioned, sim_view(a, 0)));
    CHECK_SIM(dl_sync_sim_stream_begin_capture(a, DL_SYNC_SIM_CAPTURE_RELAXED));
    int status = dl_sync_tensor_synchronize(&p.versioned);
    int32_t capture = -1;
    CHECK_SIM(dl_sync_sim_stream_capture_info(a, &capture, NULL, NULL));
    dl_sync_sim_graph *graph = NULL;
    (void)dl_sync_sim_stream_end_capture(a, &graph);
    if (graph != NULL) CHECK_SIM(dl_sync_sim_graph_destroy(graph));
    assert_int_equal(disturbs_asked, covered);
    assert_int_equal(capture, covered ? DL_SYNC_CAPTURE_ACTIVE : DL_SYNC_CAPTURE_INVALIDATED);
    if (covered) assert_int_equal(status, DL_SYNC_ECAPTURE);
    CHECK_SIM(dl_sync_sim_stream_synchronize(a));
    p.versioned.deleter(&p.versioned);
    assert_int_equal(atomic_load(&p.deleted), 1);
    CHECK_SIM(dl_sync_sim_stream_destroy(a));
  }
  CHECK_SIM(dl_sync_sim_set_query_rules(DL_SYNC_SIM_QUERY_RULES_CUDA));
}

#define TENSOR_TEST(name) cmocka_unit_test_setup_teardown(name, use_sim, leave_sim)

int main(void) {
  const struct CMUnitTest tests[] = {
      TENSOR_TEST(test_tensor_event_orders_the_consumer),
      TENSOR_TEST(test_legacy_tensor_event_orders_the_consumer),
      TENSOR_TEST(test_negative_control_without_the_wait_races),
      TENSOR_TEST(test_identity_and_deleter_contract),
      TENSOR_TEST(test_null_original_deleter_stays_legal),
      TENSOR_TEST(test_foreign_tensor_wait_is_a_noop),
      TENSOR_TEST(test_tensor_freed_before_the_graph_that_waits_on_its_event),
      TENSOR_TEST(test_deleters_run_on_foreign_threads_during_exports),
      TENSOR_TEST(test_threads_recognize_a_new_deleter_at_once),
      TENSOR_TEST(test_bad_input_gets_clear_errors),
      TENSOR_TEST(test_event_of_an_unknown_abi_major_is_an_error),
      TENSOR_TEST(test_event_of_another_runtime_family_is_an_error),
      TENSOR_TEST(test_owner_record_is_the_public_abi),
      TENSOR_TEST(test_a_short_owner_record_is_corrupt),
      TENSOR_TEST(test_a_deleted_tensors_record_reads_as_corrupt),
      TENSOR_TEST(test_records_of_older_minors_are_events),
      TENSOR_TEST(test_record_reuse_never_writes_another_copys_record),
      TENSOR_TEST(test_synchronize_asks_the_producers_stream_first),
      TENSOR_TEST(test_synchronize_asks_only_a_backend_whose_size_covers_the_question),
      TENSOR_TEST(test_deleter_of_a_future_abi_major_is_an_error_without_reading_the_tensor),
      TENSOR_TEST(test_near_misses_of_the_deleter_are_foreign),
      TENSOR_TEST(test_the_shared_library_deleters_are_visible_to_other_copies),
  };
  return cmocka_run_group_tests_name("tensor", tests, NULL, NULL);
}
