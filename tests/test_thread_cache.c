/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The per-thread event caches next to graphs, on the simulated device: an event that a
 * captured graph owns goes back to the shared pool when the graph is destroyed, never
 * into the cache of the thread that happens to destroy it (a runtime thread, in CUDA,
 * may never exit and never call dlsync again).
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dlsync/dlsync.h"
#include "ordering/ordering.h"

static dl_sync_pool_stats stats_of_device0(void) {
  dl_sync_pool_stats stats;
  assert_int_equal(dl_sync_pool_stats_get(dl_sync_sim_backend(), 0, &stats), DL_SYNC_OK);
  return stats;
}

/* A thread that destroys a graph and stays alive until released, as a runtime thread. */
typedef struct destroyer {
  dl_sync_sim_graph *graph;
  int error;
  atomic_int step; /* 1: destroyed; 2: may exit */
} destroyer;

static void *destroy_graph(void *arg) {
  destroyer *d = arg;
  d->error = dl_sync_sim_graph_destroy(d->graph);
  atomic_store(&d->step, 1);
  while (atomic_load(&d->step) != 2) sched_yield();
  return NULL;
}

static void test_a_graph_gives_its_event_to_the_pool_not_to_a_thread_cache(void **state) {
  (void)state;
  dl_sync_sim_stream *producer, *consumer;
  CHECK_SIM(dl_sync_sim_stream_create(&producer, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(dl_sync_sim_stream_create(&consumer, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  /* The consumer captures; the producer does not: the graph owns a pooled event. */
  CHECK_SIM(dl_sync_sim_stream_begin_capture(consumer, DL_SYNC_SIM_CAPTURE_THREAD_LOCAL));
  CHECK_DL(dl_sync_push_dep(sim_view(producer, 0), sim_view(consumer, 0)));
  dl_sync_sim_graph *graph = NULL;
  CHECK_SIM(dl_sync_sim_stream_end_capture(consumer, &graph));
  assert_non_null(graph);
  assert_int_equal(stats_of_device0().outstanding, 1);

  /* Destroyed on another thread, which stays alive meanwhile. */
  static destroyer d;
  d = (destroyer){.graph = graph};
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, destroy_graph, &d), 0);
  while (atomic_load(&d.step) != 1) sched_yield();
  assert_int_equal(d.error, 0);
  /* The event is in the pool itself, where a tensor (which takes events from the pool,
     not from a cache) finds it without creating one. */
  dl_sync_pool_stats stats = stats_of_device0();
  assert_int_equal(stats.outstanding, 0);
  assert_int_equal(stats.created, 1);
  DLManagedTensorVersioned tensor = {.version = {1, 3}};
  tensor.dl_tensor.device = (DLDevice){kDLCUDA, 0};
  CHECK_DL(dl_sync_tensor_record(&tensor, sim_view(producer, 0)));
  assert_int_equal(stats_of_device0().created, 1);
  atomic_store(&d.step, 2);
  pthread_join(thread, NULL);
  tensor.deleter(&tensor);
  CHECK_SIM(dl_sync_sim_stream_synchronize(producer));
  CHECK_SIM(dl_sync_sim_stream_destroy(producer));
  CHECK_SIM(dl_sync_sim_stream_destroy(consumer));
}

static void test_a_graph_destroyed_on_the_capturing_thread_also_skips_its_cache(void **state) {
  (void)state;
  dl_sync_sim_stream *producer, *consumer;
  CHECK_SIM(dl_sync_sim_stream_create(&producer, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(dl_sync_sim_stream_create(&consumer, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(dl_sync_sim_stream_begin_capture(consumer, DL_SYNC_SIM_CAPTURE_THREAD_LOCAL));
  CHECK_DL(dl_sync_push_dep(sim_view(producer, 0), sim_view(consumer, 0)));
  dl_sync_sim_graph *graph = NULL;
  CHECK_SIM(dl_sync_sim_stream_end_capture(consumer, &graph));
  CHECK_SIM(dl_sync_sim_graph_destroy(graph));
  DLManagedTensorVersioned tensor = {.version = {1, 3}};
  tensor.dl_tensor.device = (DLDevice){kDLCUDA, 0};
  CHECK_DL(dl_sync_tensor_record(&tensor, sim_view(producer, 0)));
  assert_int_equal(stats_of_device0().created, 1);
  tensor.deleter(&tensor);
  CHECK_SIM(dl_sync_sim_stream_synchronize(producer));
  CHECK_SIM(dl_sync_sim_stream_destroy(producer));
  CHECK_SIM(dl_sync_sim_stream_destroy(consumer));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(
          test_a_graph_gives_its_event_to_the_pool_not_to_a_thread_cache, use_sim, leave_sim),
      cmocka_unit_test_setup_teardown(
          test_a_graph_destroyed_on_the_capturing_thread_also_skips_its_cache, use_sim, leave_sim),
  };
  return cmocka_run_group_tests_name("thread_cache", tests, NULL, NULL);
}
