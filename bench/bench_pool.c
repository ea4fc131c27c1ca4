/*
 * The event pool alone: acquire + release per thread, 1 to 8 threads spread over 1 or 2
 * devices, and heap allocations per operation (the binary wraps malloc). Linked with the
 * static library, whose internal pool functions it calls. Prints "name<TAB>value<TAB>unit".
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "dlsync/dlsync.h"
#include "internal.h"

void *__real_malloc(size_t size);
void *__wrap_malloc(size_t size);
static atomic_long allocations;
void *__wrap_malloc(size_t size) {
  atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
  return __real_malloc(size);
}

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void report(const char *name, double value, const char *unit) {
  printf("%s\t%.2f\t%s\n", name, value, unit);
}

/* --- a null backend: every call returns at once and is counted ----------------------- */
static _Thread_local long thread_calls[DL_SYNC_OP_COUNT];
static int n_get_device(void *c, int32_t *d) { (void)c; thread_calls[DL_SYNC_OP_GET_DEVICE]++; *d = 0; return 0; }
static int n_set_device(void *c, int32_t d) { (void)c; (void)d; thread_calls[DL_SYNC_OP_SET_DEVICE]++; return 0; }
static int n_event_create(void *c, void **e) { (void)c; thread_calls[DL_SYNC_OP_EVENT_CREATE]++; *e = (void *)0x1; return 0; }
static int n_event_destroy(void *c, void *e) { (void)c; (void)e; thread_calls[DL_SYNC_OP_EVENT_DESTROY]++; return 0; }
static int n_event_record(void *c, void *e, void *s) { (void)c; (void)e; (void)s; thread_calls[DL_SYNC_OP_EVENT_RECORD]++; return 0; }
static int n_stream_wait(void *c, void *s, void *e) { (void)c; (void)e; (void)s; thread_calls[DL_SYNC_OP_STREAM_WAIT]++; return 0; }
static int n_event_synchronize(void *c, void *e) { (void)c; (void)e; thread_calls[DL_SYNC_OP_EVENT_SYNCHRONIZE]++; return 0; }
static int n_event_query(void *c, void *e, int *done) { (void)c; (void)e; thread_calls[DL_SYNC_OP_EVENT_QUERY]++; *done = 1; return 0; }
static int n_capture_info(void *c, void *s, dl_sync_capture_info *o) {
  (void)c;
  (void)s;
  thread_calls[DL_SYNC_OP_CAPTURE_INFO]++;
  o->status = DL_SYNC_CAPTURE_NONE;
  return 0;
}
static const char *n_error_name(void *c, int e) { (void)c; (void)e; return "nullError"; }
static int n_error_status(void *c, int e) { (void)c; (void)e; return DL_SYNC_EBACKEND; }

static dl_sync_backend null_backend = {
    .name = "null", .get_device = n_get_device, .set_device = n_set_device,
    .event_create = n_event_create, .event_destroy = n_event_destroy,
    .event_record = n_event_record, .stream_wait = n_stream_wait,
    .event_synchronize = n_event_synchronize, .event_query = n_event_query,
    .capture_info = n_capture_info, .error_name = n_error_name, .error_string = n_error_name,
    .error_status = n_error_status,
};

/* The event pool alone: acquire + release, threads spread over 1 or 2 devices. */
typedef struct pool_run {
  pthread_t thread;
  dl_sync__pool *pool;
  double ns_per_op;
} pool_run;

static atomic_int pool_go;

static void *time_pool(void *arg) {
  pool_run *r = arg;
  enum { POOL_OPS = 1000000 };
  dl_sync__device_guard guard;
  dl_sync__device_guard_init(&guard, &null_backend);
  while (!atomic_load(&pool_go)) {
  }
  double start = now_ns();
  for (int i = 0; i < POOL_OPS; i++) {
    void *event;
    dl_sync__pool_acquire(r->pool, "bench", &guard, &event);
    dl_sync__pool_release(r->pool, event);
  }
  r->ns_per_op = (now_ns() - start) / POOL_OPS;
  return NULL;
}

static void bench_pool(void) {
  for (int devices = 1; devices <= 2; devices++) {
    for (int threads = 1; threads <= 8; threads *= 2) {
      pool_run runs[8];
      atomic_store(&pool_go, 0);
      for (int t = 0; t < threads; t++) {
        dl_sync__pool_get("bench", &null_backend, (DLDevice){kDLCUDA, t % devices}, &runs[t].pool);
        pthread_create(&runs[t].thread, NULL, time_pool, &runs[t]);
      }
      long allocations_before = atomic_load(&allocations);
      atomic_store(&pool_go, 1);
      double ns = 0;
      for (int t = 0; t < threads; t++) {
        pthread_join(runs[t].thread, NULL);
        ns += runs[t].ns_per_op / threads;
      }
      long allocated = atomic_load(&allocations) - allocations_before;
      char name[96];
      snprintf(name, sizeof name, "pool acquire+release, %d thread%s, %d device%s", threads,
               threads > 1 ? "s" : "", devices, devices > 1 ? "s" : "");
      report(name, ns, "ns/op");
      snprintf(name, sizeof name, "pool allocations per op, %d threads, %d devices", threads, devices);
      report(name, (double)allocated / (threads * 1000000.0), "allocs/op");
    }
  }
}

int main(void) {
  bench_pool();
  dl_sync_shutdown();
  return 0;
}
