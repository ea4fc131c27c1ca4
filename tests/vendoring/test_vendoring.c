/* SPDX-License-Identifier: Apache-2.0 */
/* Two copies of dlsync in one process (two extension modules, each with its own static
   copy, loaded with RTLD_LOCAL) share per-tensor events: A records, B waits and is
   ordered (with the negative control), B's graph keeps A's event alive, deleters run once
   on foreign threads, B releases what A named its reuse stream for (and each copy finishes
   only its own deferred releases), a foreign tensor is never misread, and an event B cannot
   use is an error. A third copy linked with every symbol hidden shows the documented limit. */
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "dlsync/sim.h"
#include "vendored_copy.h"
#include "../support/error_message.h"

/* The simulator every copy drives, reached by dlsym (the test links no dlsync). */
typedef struct sim_api {
  const dl_sync_backend *(*backend)(void);
  void (*reset)(void);
  void (*set_jitter)(uint64_t seed, unsigned max_us);
  const char *(*error_name)(int error);
  int (*stream_create)(dl_sync_sim_stream **stream, unsigned flags);
  int (*stream_synchronize)(dl_sync_sim_stream *stream);
  int (*device_synchronize)(void);
  int (*launch)(dl_sync_sim_stream *stream, const char *name, void (*fn)(void *), void *arg,
                const dl_sync_sim_access *accesses, size_t count);
  int (*host_access)(const char *name, const void *buffer, int mode);
  uint64_t (*race_count)(void);
  int (*begin_capture)(dl_sync_sim_stream *stream, int mode);
  int (*end_capture)(dl_sync_sim_stream *stream, dl_sync_sim_graph **graph);
  int (*graph_instantiate)(dl_sync_sim_graph_exec **exec, dl_sync_sim_graph *graph);
  int (*graph_launch)(dl_sync_sim_graph_exec *exec, dl_sync_sim_stream *stream);
  int (*graph_destroy)(dl_sync_sim_graph *graph);
  int (*graph_exec_destroy)(dl_sync_sim_graph_exec *exec);
} sim_api;

static sim_api sim;
static const vendored_dlsync *a, *b, *hidden;

static void *load(const char *path) {
  void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL) fail_msg("dlopen %s: %s", path, dlerror());
  return handle;
}

static void *symbol(void *handle, const char *name) {
  void *address = dlsym(handle, name);
  if (address == NULL) fail_msg("dlsym %s: %s", name, dlerror());
  return address;
}

#define LOAD_SIM(field, name) *(void **)&sim.field = symbol(library, name)

static const vendored_dlsync *load_copy(const char *path) {
  vendored_dlsync_get_fn get;
  *(void **)&get = symbol(load(path), VENDORED_DLSYNC_GET);
  return get();
}

static const int32_t stream_types[] = {kDLCUDA, kDLCUDAHost, kDLCUDAManaged, kDLROCM, kDLROCMHost};

static int setup_process(void **state) {
  (void)state;
  void *library = load(SIM_LIBRARY);
  LOAD_SIM(backend, "dl_sync_sim_backend");
  LOAD_SIM(reset, "dl_sync_sim_reset");
  LOAD_SIM(set_jitter, "dl_sync_sim_set_jitter");
  LOAD_SIM(error_name, "dl_sync_sim_error_name");
  LOAD_SIM(stream_create, "dl_sync_sim_stream_create");
  LOAD_SIM(stream_synchronize, "dl_sync_sim_stream_synchronize");
  LOAD_SIM(device_synchronize, "dl_sync_sim_device_synchronize");
  LOAD_SIM(launch, "dl_sync_sim_launch");
  LOAD_SIM(host_access, "dl_sync_sim_host_access");
  LOAD_SIM(race_count, "dl_sync_sim_race_count");
  LOAD_SIM(begin_capture, "dl_sync_sim_stream_begin_capture");
  LOAD_SIM(end_capture, "dl_sync_sim_stream_end_capture");
  LOAD_SIM(graph_instantiate, "dl_sync_sim_graph_instantiate");
  LOAD_SIM(graph_launch, "dl_sync_sim_graph_launch");
  LOAD_SIM(graph_destroy, "dl_sync_sim_graph_destroy");
  LOAD_SIM(graph_exec_destroy, "dl_sync_sim_graph_exec_destroy");
  a = load_copy(COPY_A);
  b = load_copy(COPY_B);
  hidden = load_copy(COPY_HIDDEN);
  return 0;
}

/* Each test: one simulator, installed in every copy. */
static int use_sim(void **state) {
  (void)state;
  sim.reset();
  const vendored_dlsync *copies[] = {a, b, hidden};
  for (size_t c = 0; c < 3; c++)
    for (size_t i = 0; i < sizeof stream_types / sizeof stream_types[0]; i++)
      copies[c]->set_backend(stream_types[i], sim.backend());
  return 0;
}

static int leave_sim(void **state) {
  (void)state;
  const vendored_dlsync *copies[] = {a, b, hidden};
  for (size_t c = 0; c < 3; c++) copies[c]->shutdown();
  sim.reset();
  return 0;
}

#define CHECK_SIM(call)                                                 \
  do {                                                                  \
    int error_ = (call);                                                \
    if (error_ != 0) fail_msg("%s: %s", #call, sim.error_name(error_)); \
  } while (0)
#define CHECK_COPY(copy, call)                                                 \
  do {                                                                         \
    if ((call) != DL_SYNC_OK) fail_msg("%s: %s", #call, (copy)->last_error()); \
  } while (0)

static void assert_copy_error_mentions(const vendored_dlsync *copy, const char *text) {
  assert_message_mentions(copy->last_error(), text);
}

static const DLDevice cuda0 = {kDLCUDA, 0};

static dl_sync_stream view(dl_sync_sim_stream *stream) {
  return (dl_sync_stream){cuda0, stream};
}

static uint64_t outstanding(const vendored_dlsync *copy) {
  dl_sync_pool_stats stats = {0};
  copy->pool_stats_get(sim.backend(), 0, &stats);
  return stats.outstanding;
}

/* Kernels: the producer writes value + i, the consumer counts words that differ. The
   negative control races on purpose, with relaxed atomics so the race is well defined. */
enum { WORDS = 64 };
typedef struct buffer {
  int32_t words[WORDS];
  int racy;
  int64_t mismatches;
} buffer;

typedef struct job {
  buffer *data;
  int32_t value;
} job;

static void produce(void *arg) {
  job *j = arg;
  for (int i = 0; i < WORDS; i++) {
    if (j->data->racy)
      __atomic_store_n(&j->data->words[i], j->value + i, __ATOMIC_RELAXED);
    else
      j->data->words[i] = j->value + i;
  }
}

static void consume(void *arg) {
  job *j = arg;
  for (int i = 0; i < WORDS; i++) {
    int32_t word =
        j->data->racy ? __atomic_load_n(&j->data->words[i], __ATOMIC_RELAXED) : j->data->words[i];
    if (word != j->value + i) j->data->mismatches++;
  }
}

static int launch_producer(dl_sync_sim_stream *stream, job *j) {
  dl_sync_sim_access access = {j->data->words, DL_SYNC_SIM_WRITE};
  return sim.launch(stream, "A.produce", produce, j, &access, 1);
}

static int launch_consumer(dl_sync_sim_stream *stream, job *j) {
  dl_sync_sim_access accesses[] = {{j->data->words, DL_SYNC_SIM_READ},
                                   {&j->data->mismatches, DL_SYNC_SIM_READ | DL_SYNC_SIM_WRITE}};
  return sim.launch(stream, "B.consume", consume, j, accesses, 2);
}

/* A producer's tensor whose deleters count their calls and check what they receive. */
typedef struct producer_tensor {
  DLManagedTensorVersioned versioned;
  DLManagedTensor legacy;
  int marker;
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

static void make_tensor(producer_tensor *p) {
  memset(p, 0, sizeof *p);
  p->versioned = (DLManagedTensorVersioned){
      .version = {1, 3}, .manager_ctx = &p->marker, .deleter = producer_deleter};
  p->versioned.dl_tensor.device = cuda0;
  p->legacy = (DLManagedTensor){.manager_ctx = &p->marker, .deleter = producer_legacy_deleter};
  p->legacy.dl_tensor.device = cuda0;
}

static void test_the_copies_are_distinct_and_visible(void **state) {
  (void)state;
  assert_ptr_not_equal(a, b);
  assert_ptr_not_equal(a->tensor_record, b->tensor_record);
  assert_ptr_not_equal(a->tensor_event_deleter, b->tensor_event_deleter);
  assert_int_equal(a->tensor_events_visible(), 1);
  assert_int_equal(b->tensor_events_visible(), 1);
  assert_int_equal(hidden->tensor_events_visible(), 0);
  /* Both deleters must be visible: one alone leaves the other kind of tensor unknown. */
  const vendored_dlsync *half = load_copy(COPY_HALF_VISIBLE);
  assert_int_equal(half->tensor_events_visible(), 0);
}

/* A writes on its stream and records the tensor's event; B waits (or not) on its own. */
static void exchange_across_copies(int legacy, int wait, int iterations) {
  static buffer data;
  static job jobs[2][200];
  data = (buffer){.racy = !wait};
  dl_sync_sim_stream *sa, *sb;
  CHECK_SIM(sim.stream_create(&sa, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(sim.stream_create(&sb, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  sim.set_jitter(21, 300);
  for (int i = 0; i < iterations; i++) {
    producer_tensor p;
    make_tensor(&p);
    jobs[0][i] = (job){&data, i * WORDS};
    jobs[1][i] = jobs[0][i];
    CHECK_SIM(launch_producer(sa, &jobs[0][i]));
    if (legacy) {
      CHECK_COPY(a, a->legacy_tensor_record(&p.legacy, view(sa)));
      assert_int_equal(b->legacy_tensor_has_event(&p.legacy), 1);
      if (wait) CHECK_COPY(b, b->legacy_tensor_wait(&p.legacy, view(sb)));
    } else {
      CHECK_COPY(a, a->tensor_record(&p.versioned, view(sa)));
      assert_int_equal(b->tensor_has_event(&p.versioned), 1);
      if (wait) CHECK_COPY(b, b->tensor_wait(&p.versioned, view(sb)));
    }
    CHECK_SIM(launch_consumer(sb, &jobs[1][i]));
    if (legacy)
      p.legacy.deleter(&p.legacy); /* B is done: the tensor goes at once */
    else
      p.versioned.deleter(&p.versioned);
    assert_int_equal(atomic_load(&p.deleted), 1);
    assert_int_equal(atomic_load(&p.wrong_ctx), 0);
    CHECK_COPY(b, b->push_dep(view(sb), view(sa))); /* A's next write after B's read */
  }
  CHECK_SIM(sim.device_synchronize());
  sim.host_access("test reads mismatches", &data.mismatches, DL_SYNC_SIM_READ);
  if (wait) {
    assert_int_equal(sim.race_count(), 0);
    assert_int_equal(data.mismatches, 0);
  } else {
    assert_int_equal(sim.race_count(), (uint64_t)iterations);
    print_message("B without the wait: %llu races, %lld wrong words\n",
                  (unsigned long long)sim.race_count(), (long long)data.mismatches);
  }
  assert_int_equal(outstanding(a), 0);
  assert_int_equal(outstanding(b), 0);
}

static void test_b_waits_on_the_event_a_recorded(void **state) {
  (void)state;
  exchange_across_copies(0, 1, 200);
}

static void test_b_waits_on_the_event_a_recorded_on_a_legacy_tensor(void **state) {
  (void)state;
  exchange_across_copies(1, 1, 200);
}

static void test_negative_control_b_skips_the_wait_and_races(void **state) {
  (void)state;
  exchange_across_copies(0, 0, 100);
}

static void test_b_graph_keeps_a_event_after_the_tensor_is_deleted(void **state) {
  (void)state;
  static buffer data;
  static job produced, consumed;
  data = (buffer){0};
  produced = consumed = (job){&data, 700};
  dl_sync_sim_stream *sa, *sb, *launcher;
  CHECK_SIM(sim.stream_create(&sa, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(sim.stream_create(&sb, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(sim.stream_create(&launcher, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  sim.set_jitter(22, 400);
  producer_tensor p;
  make_tensor(&p);
  CHECK_SIM(launch_producer(sa, &produced));
  CHECK_COPY(a, a->tensor_record(&p.versioned, view(sa)));
  CHECK_SIM(sim.begin_capture(sb, DL_SYNC_SIM_CAPTURE_GLOBAL));
  CHECK_COPY(b, b->tensor_wait(&p.versioned, view(sb)));
  CHECK_SIM(launch_consumer(sb, &consumed));
  dl_sync_sim_graph *graph;
  CHECK_SIM(sim.end_capture(sb, &graph));
  p.versioned.deleter(&p.versioned); /* A's tensor goes first */
  assert_int_equal(atomic_load(&p.deleted), 1);
  assert_int_equal(outstanding(a), 1); /* B's graph holds A's event, through A */
  assert_int_equal(outstanding(b), 0); /* never through B's own pool */
  dl_sync_sim_graph_exec *exec;
  CHECK_SIM(sim.graph_instantiate(&exec, graph));
  CHECK_SIM(sim.graph_destroy(graph));
  for (int i = 0; i < 10; i++) CHECK_SIM(sim.graph_launch(exec, launcher));
  CHECK_SIM(sim.stream_synchronize(launcher));
  sim.host_access("test reads mismatches", &data.mismatches, DL_SYNC_SIM_READ);
  assert_int_equal(sim.race_count(), 0);
  assert_int_equal(data.mismatches, 0);
  assert_int_equal(outstanding(a), 1);
  CHECK_SIM(sim.graph_exec_destroy(exec));
  assert_int_equal(outstanding(a), 0);
}

/* A records on its threads; B waits and deletes on others, while exports go on. */
enum { PRODUCERS = 2, CONSUMERS = 2, TENSORS_PER_PRODUCER = 300 };

typedef struct handoff {
  pthread_mutex_t lock;
  pthread_cond_t ready;
  producer_tensor *queue[PRODUCERS * TENSORS_PER_PRODUCER];
  size_t head, tail;
  int producers_done;
} handoff;

typedef struct worker {
  pthread_t thread;
  handoff *h;
  producer_tensor *tensors;
  int failures;
  char error[256];
} worker;

static void failed(worker *w, const vendored_dlsync *copy) {
  if (w->failures++ == 0) snprintf(w->error, sizeof w->error, "%s", copy->last_error());
}

static void *a_produces(void *arg) {
  worker *w = arg;
  dl_sync_sim_stream *s;
  sim.stream_create(&s, DL_SYNC_SIM_STREAM_NON_BLOCKING);
  for (int i = 0; i < TENSORS_PER_PRODUCER; i++) {
    producer_tensor *p = &w->tensors[i];
    make_tensor(p);
    if (a->tensor_record(&p->versioned, view(s)) != DL_SYNC_OK) failed(w, a);
    pthread_mutex_lock(&w->h->lock);
    w->h->queue[w->h->tail++] = p;
    pthread_cond_signal(&w->h->ready);
    pthread_mutex_unlock(&w->h->lock);
  }
  return NULL;
}

static void *b_consumes_and_deletes(void *arg) {
  worker *w = arg;
  dl_sync_sim_stream *s, *other;
  sim.stream_create(&s, DL_SYNC_SIM_STREAM_NON_BLOCKING);
  sim.stream_create(&other, DL_SYNC_SIM_STREAM_NON_BLOCKING);
  for (;;) {
    pthread_mutex_lock(&w->h->lock);
    while (w->h->head == w->h->tail && !w->h->producers_done)
      pthread_cond_wait(&w->h->ready, &w->h->lock);
    producer_tensor *p = w->h->head < w->h->tail ? w->h->queue[w->h->head++] : NULL;
    pthread_mutex_unlock(&w->h->lock);
    if (p == NULL) return NULL;
    if (b->tensor_wait(&p->versioned, view(s)) != DL_SYNC_OK) failed(w, b);
    if (b->push_dep(view(s), view(other)) != DL_SYNC_OK) failed(w, b); /* B's own exports */
    p->versioned.deleter(&p->versioned); /* A's deleter, on B's thread */
  }
}

static void test_deleters_run_once_on_the_other_copy_threads(void **state) {
  (void)state;
  static handoff h = {.lock = PTHREAD_MUTEX_INITIALIZER, .ready = PTHREAD_COND_INITIALIZER};
  static producer_tensor tensors[PRODUCERS][TENSORS_PER_PRODUCER];
  worker producers[PRODUCERS], consumers[CONSUMERS];
  for (int i = 0; i < CONSUMERS; i++) {
    consumers[i] = (worker){.h = &h};
    pthread_create(&consumers[i].thread, NULL, b_consumes_and_deletes, &consumers[i]);
  }
  for (int i = 0; i < PRODUCERS; i++) {
    producers[i] = (worker){.h = &h, .tensors = tensors[i]};
    pthread_create(&producers[i].thread, NULL, a_produces, &producers[i]);
  }
  for (int i = 0; i < PRODUCERS; i++) pthread_join(producers[i].thread, NULL);
  pthread_mutex_lock(&h.lock);
  h.producers_done = 1;
  pthread_cond_broadcast(&h.ready);
  pthread_mutex_unlock(&h.lock);
  for (int i = 0; i < CONSUMERS; i++) pthread_join(consumers[i].thread, NULL);
  for (int i = 0; i < PRODUCERS; i++)
    if (producers[i].failures) fail_msg("A, thread %d: %s", i, producers[i].error);
  for (int i = 0; i < CONSUMERS; i++)
    if (consumers[i].failures) fail_msg("B, thread %d: %s", i, consumers[i].error);
  for (int i = 0; i < PRODUCERS; i++) {
    for (int j = 0; j < TENSORS_PER_PRODUCER; j++) {
      assert_int_equal(atomic_load(&tensors[i][j].deleted), 1);
      assert_int_equal(atomic_load(&tensors[i][j].wrong_ctx), 0);
    }
  }
  CHECK_SIM(sim.device_synchronize());
  assert_int_equal(outstanding(a), 0);
  assert_int_equal(outstanding(b), 0);
}

/* A names its reuse stream in the owner record; B, another copy, releases: the reuse stream
   waits for B's work and A's deleter runs at once. A tensor without a reuse stream is
   deferred in B's queue: A's polls never run it (B's releases are B's), B's poll does. */
static void test_b_releases_what_a_named_its_reuse_stream_for(void **state) {
  (void)state;
  dl_sync_sim_stream *sa, *sb;
  CHECK_SIM(sim.stream_create(&sa, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(sim.stream_create(&sb, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  producer_tensor named, foreign;
  make_tensor(&named);
  make_tensor(&foreign);
  CHECK_COPY(a, a->tensor_record_reuse(&named.versioned, view(sa), view(sa)));
  CHECK_COPY(a, a->tensor_record(&foreign.versioned, view(sa)));
  assert_int_equal(b->tensor_release(&named.versioned, view(sb)), DL_SYNC_RELEASED_ORDERED);
  assert_int_equal(atomic_load(&named.deleted), 1);
  assert_int_equal(b->tensor_release(&foreign.versioned, view(sb)), DL_SYNC_RELEASE_DEFERRED);
  CHECK_SIM(sim.device_synchronize());
  assert_int_equal(a->release_pending(), 0);
  assert_int_equal(a->release_poll(), 0);
  assert_int_equal(atomic_load(&foreign.deleted), 0);
  assert_int_equal(b->release_pending(), 1);
  assert_int_equal(b->release_poll(), 1);
  assert_int_equal(atomic_load(&foreign.deleted), 1);
  assert_int_equal(atomic_load(&named.wrong_ctx) + atomic_load(&foreign.wrong_ctx), 0);
  CHECK_SIM(sim.device_synchronize());
  assert_int_equal(outstanding(a), 0);
  assert_int_equal(outstanding(b), 0);
}

/* Another producer's deleter, defined in this program. */ /* Another producer's deleter, defined in
                                                              this program. */
static void foreign_deleter(DLManagedTensorVersioned *t) {
  (void)t;
}

static void test_a_foreign_tensor_is_never_misread(void **state) {
  (void)state;
  producer_tensor p;
  make_tensor(&p);
  assert_int_equal(b->tensor_has_event(&p.versioned), 0);
  assert_int_equal(b->tensor_wait(NULL, view(NULL)), DL_SYNC_EINVAL);
  assert_int_equal(b->tensor_wait(&p.versioned, view(NULL)), DL_SYNC_OK); /* nothing to wait for */
  assert_copy_error_mentions(b, "tensor must not be NULL"); /* a success writes no message */
  /* manager_ctx is unmapped: reading it would crash. */
  DLManagedTensorVersioned t = {.manager_ctx = (void *)8, .deleter = foreign_deleter};
  t.dl_tensor.device = cuda0;
  assert_int_equal(b->tensor_has_event(&t), 0);
  assert_int_equal(a->tensor_has_event(&t), 0);
  /* One byte past A's deleter is inside A's code, not A's deleter. */
  t.deleter = (void (*)(DLManagedTensorVersioned *))((uintptr_t)a->tensor_event_deleter + 1);
  assert_int_equal(b->tensor_has_event(&t), 0);
}

static void test_an_event_b_cannot_use_is_an_error(void **state) {
  (void)state;
  producer_tensor p;
  make_tensor(&p);
  CHECK_COPY(a, a->tensor_record(&p.versioned, view(NULL)));
  dl_sync_tensor_event_owner *record = p.versioned.manager_ctx;
  record->abi_major = 2;
  assert_int_equal(b->tensor_has_event(&p.versioned), DL_SYNC_ENOTSUP);
  assert_int_equal(b->tensor_wait(&p.versioned, view(NULL)), DL_SYNC_ENOTSUP);
  assert_copy_error_mentions(b,
                             "owner record is of ABI major 2, expected tensor-event ABI major 1");
  record->abi_major = DL_SYNC_TENSOR_EVENT_ABI_MAJOR;
  record->runtime_family = DL_SYNC_RUNTIME_FAMILY_ROCM;
  assert_int_equal(b->tensor_wait(&p.versioned, view(NULL)), DL_SYNC_ENOTSUP);
  assert_copy_error_mentions(b, "is an event of the ROCm runtime");
  record->runtime_family = DL_SYNC_RUNTIME_FAMILY_CUDA;
  CHECK_COPY(b, b->tensor_synchronize(&p.versioned));
  CHECK_COPY(b, b->tensor_record(&p.versioned, view(NULL))); /* B re-records A's event */
  p.versioned.deleter(&p.versioned);
  assert_int_equal(atomic_load(&p.deleted), 1);
  assert_int_equal(outstanding(a), 0);
  assert_int_equal(outstanding(b), 0);
}

/* The documented limit: a copy whose symbols are all hidden cannot be recognized. It
   says so to its producer (tensor_events_visible() == 0, checked above); other copies see
   no event. */
static void test_a_hidden_copy_is_invisible_to_the_others(void **state) {
  (void)state;
  producer_tensor p;
  make_tensor(&p);
  CHECK_COPY(hidden, hidden->tensor_record(&p.versioned, view(NULL)));
  assert_int_equal(hidden->tensor_has_event(&p.versioned), 1);
  assert_int_equal(b->tensor_has_event(&p.versioned), 0);
  assert_int_equal(b->tensor_wait(&p.versioned, view(NULL)), DL_SYNC_OK); /* no wait */
  p.versioned.deleter(&p.versioned);
  assert_int_equal(atomic_load(&p.deleted), 1);
}

#define COPIES_TEST(name) cmocka_unit_test_setup_teardown(name, use_sim, leave_sim)

int main(void) {
  const struct CMUnitTest tests[] = {
      COPIES_TEST(test_the_copies_are_distinct_and_visible),
      COPIES_TEST(test_b_waits_on_the_event_a_recorded),
      COPIES_TEST(test_b_waits_on_the_event_a_recorded_on_a_legacy_tensor),
      COPIES_TEST(test_negative_control_b_skips_the_wait_and_races),
      COPIES_TEST(test_b_graph_keeps_a_event_after_the_tensor_is_deleted),
      COPIES_TEST(test_deleters_run_once_on_the_other_copy_threads),
      COPIES_TEST(test_b_releases_what_a_named_its_reuse_stream_for),
      COPIES_TEST(test_a_foreign_tensor_is_never_misread),
      COPIES_TEST(test_an_event_b_cannot_use_is_an_error),
      COPIES_TEST(test_a_hidden_copy_is_invisible_to_the_others),
  };
  return cmocka_run_group_tests_name("vendoring", tests, setup_process, NULL);
}
