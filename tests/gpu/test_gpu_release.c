/* SPDX-License-Identifier: Apache-2.0 */
#define _POSIX_C_SOURCE 200809L
/*
 * Release ordering on a real stream-ordered allocator (cudaMallocFromPoolAsync on a pool
 * that keeps its memory). The producer's deleter is what such an allocator's owner does:
 * the block goes back to the pool on the producer's stream a, and the producer's next
 * allocation of the same size on a, made at once, gets the same block (the suite asserts
 * it) and writes new values into it, then signals.
 *
 * The consumer reads the block on stream b behind a gate and releases the tensor. The gate
 * opens once the producer's new write has landed, or after the window: so a release that
 * does not order a's reuse after b's read lets the write land first, and b reads the new
 * values (the control, with the plain deleter: every value wrong, every run), while an
 * ordered release holds the write until b has read (no signal within the window, every
 * value right). Both producers: one that named its reuse stream (the reuse waits on the
 * device) and a foreign one (the deleter is deferred until b's read completed). A third
 * mode releases inside a capture: the deleter may run only once the graph and its
 * executions are gone, and every replay reads the block intact.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "gpu_suite.h"

typedef enum suite_mode { MODE_REUSE_STREAM, MODE_DEFERRED, MODE_CAPTURE, MODES } suite_mode;
static const char *const mode_names[MODES] = {"release-reuse-stream", "release-deferred",
                                              "release-capture"};

enum { RELEASE_UNGATED = 10, REPLAYS = 3 };

/* A pool that never gives its memory back to the device between runs. */
static cudaMemPool_t pool_of_device_0(void) {
  static cudaMemPool_t pool;
  if (pool != NULL) return pool;
  struct cudaMemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  CUDA_OK(cudaMemPoolCreate(&pool, &props));
  uint64_t keep = UINT64_MAX;
  CUDA_OK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  return pool;
}

typedef struct producer {
  cudaStream_t a;
  gpu_flags *device_flags; /* signalled once the write into the reused block landed */
  int *block;              /* the tensor's memory */
  int *again;              /* the next allocation, made by the deleter */
  int seed_again;          /* what the deleter's producer writes there */
  atomic_int deleted;
  cudaError_t error;
} producer;

static void producer_deleter(DLManagedTensorVersioned *tensor) {
  producer *p = tensor->manager_ctx;
  size_t bytes = COUNT * sizeof(int);
  cudaError_t e = cudaFreeAsync(p->block, p->a);
  if (e == cudaSuccess)
    e = cudaMallocFromPoolAsync((void **)&p->again, bytes, pool_of_device_0(), p->a);
  if (e == cudaSuccess) e = (cudaError_t)gpu_produce(p->a, p->again, COUNT, p->seed_again, NULL);
  if (e == cudaSuccess) e = (cudaError_t)gpu_signal(p->a, p->device_flags);
  p->error = e;
  atomic_store(&p->deleted, 1);
}

static DLManagedTensorVersioned tensor_of(producer *p) {
  DLManagedTensorVersioned tensor = {
      .version = {1, 3}, .manager_ctx = p, .deleter = producer_deleter};
  tensor.dl_tensor = (DLTensor){.data = p->block, .device = {GPU_DEVICE_TYPE, 0}, .ndim = 1};
  return tensor;
}

/* Waits for flag as seen_within does, running the deferred releases meanwhile as any
 * later dlsync call would. */
static int seen_polling(volatile int *flag, long long limit_ns) {
  long long end = now_ns() + limit_ns;
  do {
    if (seen_within(flag, 1000 * 1000)) return 1;
    dl_sync_release_poll();
  } while (now_ns() < end);
  return seen_within(flag, 0);
}

static void wait_deleted(producer *p, const char *what) {
  long long end = now_ns() + RUNS_SOON_NS;
  while (!atomic_load(&p->deleted) && now_ns() < end) dl_sync_release_poll();
  if (!atomic_load(&p->deleted))
    fail_msg("%s: the deleter had not run %lld ms after the consumer's work could complete", what,
             RUNS_SOON_NS / 1000000);
}

/* The block back to the pool once the run is judged. */
static void producer_settle(producer *p, const char *what) {
  CUDA_OK(cudaStreamSynchronize(p->a));
  if (p->error != cudaSuccess) fail_msg("%s: the producer: %s", what, cudaGetErrorName(p->error));
  if (p->again != p->block)
    fail_msg(
        "%s: the pool gave the next allocation %p, not the freed block %p: the run shows "
        "nothing about reuse",
        what, (void *)p->again, (void *)p->block);
  CUDA_OK(cudaFreeAsync(p->again, p->a));
  CUDA_OK(cudaStreamSynchronize(p->a));
}

/* One exchange and release; gated: b's read waits behind the gate (else it runs at once). */
static void release_run(world *w, int participating, int ordered, int gated, int seed) {
  const char *what = participating ? "release, producer naming its reuse stream"
                                   : "release, foreign producer (deferred)";
  producer p = {.a = w->a, .device_flags = w->device_flags, .seed_again = seed + 1000};
  CUDA_OK(world_reset(w, !gated));
  CUDA_OK(
      cudaMallocFromPoolAsync((void **)&p.block, COUNT * sizeof(int), pool_of_device_0(), w->a));
  KERNEL_OK(gpu_produce(w->a, p.block, COUNT, seed, NULL));
  DLManagedTensorVersioned tensor = tensor_of(&p);
  if (participating)
    DL_OK(dl_sync_tensor_record_reuse(&tensor, on(w->a), on(w->a)));
  else
    DL_OK(dl_sync_tensor_record(&tensor, on(w->a)));
  DL_OK(dl_sync_tensor_wait(&tensor, on(w->b))); /* the write before the read: not under test */
  KERNEL_OK(gpu_gate(w->b, w->device_flags));
  KERNEL_OK(gpu_check(w->b, p.block, COUNT, seed, NULL, w->mismatches));
  if (ordered) {
    int how = dl_sync_tensor_release(&tensor, on(w->b));
    int expected = participating ? DL_SYNC_RELEASED_ORDERED : DL_SYNC_RELEASE_DEFERRED;
    if (how != expected) {
      char why[256];
      snprintf(why, sizeof why, "%s", how < 0 ? dl_sync_last_error() : "");
      flag_set(&w->flags->open, 1);
      if (how < 0) tensor.deleter(&tensor); /* still the caller's */
      wait_deleted(&p, what);               /* nothing pending on this frame's tensor */
      fail_msg("%s: dl_sync_tensor_release answered %d, expected %d (%s)", what, how, expected,
               why);
    }
  } else {
    tensor.deleter(&tensor); /* the plain release */
  }
  verdict v = {0};
  v.raced = seen_polling(&w->flags->signalled, ordered ? RACE_WINDOW_NS : RUNS_SOON_NS);
  flag_set(&w->flags->open, 1);
  wait_deleted(&p, what);
  v.error = cudaDeviceSynchronize();
  if (v.error == cudaSuccess)
    v.error = cudaMemcpy(&v.mismatches, w->mismatches, sizeof v.mismatches, cudaMemcpyDeviceToHost);
  v.gate_timeouts = w->flags->gate_timeouts;
  producer_settle(&p, what);
  if (gated) {
    judge(what, ordered, v);
  } else {
    if (v.error != cudaSuccess) fail_msg("%s: %s", what, cudaGetErrorName(v.error));
    if (v.mismatches != 0) fail_msg("%s, ungated: %llu wrong values", what, v.mismatches);
    count_ordered(1);
  }
}

static void run_release(int participating) {
  world w;
  if (world_make(&w) != 0) fail_msg("could not set up streams and buffers");
  for (int run = 0; run < CONTROL_GATED + ORDERED_GATED; run++)
    release_run(&w, participating, run >= CONTROL_GATED, 1, run);
  for (int run = 0; run < RELEASE_UNGATED; run++) release_run(&w, participating, 1, 0, 100 + run);
  if (dl_sync_release_pending() != 0)
    fail_msg("%d releases still pending after every run", dl_sync_release_pending());
  world_free(&w);
}

static void test_release_to_a_producer_that_named_its_reuse_stream(void **state) {
  (void)state;
  skip_without_device();
  suite_set_mode(MODE_REUSE_STREAM);
  run_release(1);
}

static void test_release_to_a_foreign_producer_is_deferred(void **state) {
  (void)state;
  skip_without_device();
  suite_set_mode(MODE_DEFERRED);
  run_release(0);
}

/* The consumer's read is captured and the tensor released in the capture; the graph runs
 * REPLAYS times after the producer's write completed. The control releases with the plain
 * deleter once the capture ended: the block is reused and written before the replays. */
static void release_in_capture(world *w, cudaStream_t launcher, int ordered, int seed) {
  const char *what = "release in a capture";
  producer p = {.a = w->a, .device_flags = w->device_flags, .seed_again = seed + 1000};
  CUDA_OK(world_reset(w, 1));
  CUDA_OK(
      cudaMallocFromPoolAsync((void **)&p.block, COUNT * sizeof(int), pool_of_device_0(), w->a));
  KERNEL_OK(gpu_produce(w->a, p.block, COUNT, seed, NULL));
  CUDA_OK(cudaStreamSynchronize(w->a)); /* before the capture: no part of the graph */
  DLManagedTensorVersioned tensor = tensor_of(&p);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_OK(cudaStreamBeginCapture(w->b, cudaStreamCaptureModeGlobal));
  int read = gpu_check(w->b, p.block, COUNT, seed, NULL, w->mismatches);
  int how = read != 0 ? -1
            : ordered ? dl_sync_tensor_release(&tensor, on(w->b))
                      : DL_SYNC_RELEASE_GRAPH;
  char why[256];
  snprintf(why, sizeof why, "%s", how < 0 ? dl_sync_last_error() : "");
  cudaError_t ended = cudaStreamEndCapture(w->b, &graph); /* ended before any failure */
  if (read != 0 || how != DL_SYNC_RELEASE_GRAPH) {
    if (graph != NULL) cudaGraphDestroy(graph);
    if (how < 0) tensor.deleter(&tensor);
    wait_deleted(&p, what);
    if (read != 0) fail_msg("%s: the captured read: %s", what, cudaGetErrorName((cudaError_t)read));
    fail_msg("%s: dl_sync_tensor_release answered %d, expected DL_SYNC_RELEASE_GRAPH (%s)", what,
             how, why);
  }
  CUDA_OK(ended);
  if (!ordered) tensor.deleter(&tensor);
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_OK(cudaStreamSynchronize(w->a)); /* a reuse the release allowed has landed */
  for (int replay = 0; replay < REPLAYS; replay++) CUDA_OK(cudaGraphLaunch(exec, launcher));
  CUDA_OK(cudaStreamSynchronize(launcher));
  dl_sync_release_poll();
  int early = atomic_load(&p.deleted);
  CUDA_OK(cudaGraphExecDestroy(exec));
  dl_sync_release_poll();
  early |= atomic_load(&p.deleted); /* the graph still holds the tensor */
  CUDA_OK(cudaGraphDestroy(graph));
  wait_deleted(&p, what);
  unsigned long long mismatches = 0;
  CUDA_OK(cudaMemcpy(&mismatches, w->mismatches, sizeof mismatches, cudaMemcpyDeviceToHost));
  producer_settle(&p, what);
  char detail[160];
  snprintf(detail, sizeof detail, "the deleter ran %s, %llu wrong values in %d replays",
           early ? "while the graph lived" : "once the graph was gone", mismatches, REPLAYS);
  /* The control runs the deleter itself, so only what the replays read can show its
     hazard: the new owner's values, everywhere, in every replay. */
  int hazard =
      ordered ? early || mismatches != 0 : mismatches == (unsigned long long)COUNT * REPLAYS;
  judge_outcome(what, ordered, hazard, detail);
}

static void test_release_in_a_capture_waits_for_the_graph(void **state) {
  (void)state;
  skip_without_device();
  suite_set_mode(MODE_CAPTURE);
  world w;
  cudaStream_t launcher;
  if (world_make(&w) != 0) fail_msg("could not set up streams and buffers");
  CUDA_OK(cudaStreamCreateWithFlags(&launcher, cudaStreamNonBlocking));
  for (int run = 0; run < CONTROL_GATED + ORDERED_GATED; run++)
    release_in_capture(&w, launcher, run >= CONTROL_GATED, run);
  cudaStreamDestroy(launcher);
  world_free(&w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_release_to_a_producer_that_named_its_reuse_stream, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_release_to_a_foreign_producer_is_deferred, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(test_release_in_a_capture_waits_for_the_graph, setup,
                                      teardown),
  };
  return suite_run("gpu_release", mode_names, MODES, tests, sizeof tests / sizeof tests[0], NULL);
}
