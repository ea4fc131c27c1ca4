/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The event pool alone: acquire + release per thread, 1 to 8 threads spread over 1 or 2
 * devices, directly and through the thread caches (borrow + return), and heap allocations
 * per operation (the binary wraps malloc). Linked with the
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
#include "null_backend.h"

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

/* CPU time of the calling thread: not inflated when other processes share the cores,
   yet it counts spinning and cache-line transfers. */
static double thread_cpu_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void report(const char *name, double value, const char *unit) {
  printf("%s\t%.2f\t%s\n", name, value, unit);
}

/* The event pool alone: acquire + release, threads spread over 1 or 2 devices. */
typedef struct pool_run {
  pthread_t thread;
  dl_sync__pool *pool;
  DLDevice device;
  int cached; /* borrow + return through the thread cache */
  double ns_per_op;
  double cpu_ns_per_op;
} pool_run;

static atomic_int pool_go;

static void *time_pool(void *arg) {
  pool_run *r = arg;
  enum { POOL_OPS = 1000000 };
  dl_sync__guard guard;
  dl_sync__guard_init(&guard, &null_backend);
  static int stream; /* any explicit handle: the null backend records nothing */
  dl_sync__bound bound;
  dl_sync__bind(&guard, dl_sync_stream_view(r->device, &stream), &bound);
  while (!atomic_load(&pool_go)) {
  }
  double cpu_start = thread_cpu_ns();
  double start = now_ns();
  for (int i = 0; i < POOL_OPS; i++) {
    void *event;
    if (r->cached) {
      dl_sync__borrowed borrowed;
      dl_sync__pool_borrow(&guard, &bound, &borrowed);
      dl_sync__pool_return(&borrowed);
    } else {
      dl_sync__pool_acquire(r->pool, &guard, &event);
      dl_sync__pool_release(r->pool, event);
    }
  }
  r->ns_per_op = (now_ns() - start) / POOL_OPS;
  r->cpu_ns_per_op = (thread_cpu_ns() - cpu_start) / POOL_OPS;
  return NULL;
}

static void bench_pool(int cached) {
  for (int devices = 1; devices <= 2; devices++) {
    for (int threads = 1; threads <= 8; threads *= 2) {
      pool_run runs[8];
      atomic_store(&pool_go, 0);
      for (int t = 0; t < threads; t++) {
        runs[t].cached = cached;
        runs[t].device = (DLDevice){kDLCUDA, t % devices};
        dl_sync__guard guard;
        dl_sync__guard_init(&guard, &null_backend);
        static int stream;
        dl_sync__bound bound;
        dl_sync__bind(&guard, dl_sync_stream_view(runs[t].device, &stream), &bound);
        dl_sync__pool_for_stream(&guard, &bound, &runs[t].pool);
        pthread_create(&runs[t].thread, NULL, time_pool, &runs[t]);
      }
      long allocations_before = atomic_load(&allocations);
      atomic_store(&pool_go, 1);
      double ns = 0, cpu_ns = 0;
      for (int t = 0; t < threads; t++) {
        pthread_join(runs[t].thread, NULL);
        ns += runs[t].ns_per_op / threads;
        cpu_ns += runs[t].cpu_ns_per_op / threads;
      }
      long allocated = atomic_load(&allocations) - allocations_before;
      char name[96];
      snprintf(name, sizeof name, "%s, %d thread%s, %d device%s",
               cached ? "thread cache borrow+return" : "pool acquire+release", threads,
               threads > 1 ? "s" : "", devices, devices > 1 ? "s" : "");
      report(name, ns, "ns/op");
      snprintf(name, sizeof name, "%s, %d thread%s, %d device%s: thread CPU time",
               cached ? "thread cache borrow+return" : "pool acquire+release", threads,
               threads > 1 ? "s" : "", devices, devices > 1 ? "s" : "");
      report(name, cpu_ns, "ns/op");
      snprintf(name, sizeof name, "%s allocations per op, %d threads, %d devices",
               cached ? "thread cache" : "pool", threads, devices);
      report(name, (double)allocated / (threads * 1000000.0), "allocs/op");
    }
  }
}

int main(void) {
  bench_pool(0);
  bench_pool(1);
  dl_sync_shutdown();
  return 0;
}
