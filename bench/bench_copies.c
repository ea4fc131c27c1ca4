/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-tensor events across two copies of dlsync (two modules, each with its own static
 * copy, dlopen'ed RTLD_LOCAL as extension modules are), measured side by side in one run
 * on the null backend: has_event and wait on a tensor of the calling copy, of the other
 * copy (recognized by name once, then from the per-address cache) and of a producer that
 * never used dlsync. Prints "name<TAB>value<TAB>unit" lines for bench/run.sh.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "null_backend.h"
#include "vendored_copy.h"

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void report(const char *name, double value, const char *unit) {
  printf("%s\t%.2f\t%s\n", name, value, unit);
}

static const vendored_dlsync *load_copy(const char *path) {
  void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  vendored_dlsync_get_fn get = NULL;
  if (handle != NULL) *(void **)&get = dlsym(handle, VENDORED_DLSYNC_GET);
  if (get == NULL) {
    fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
    exit(1);
  }
  return get();
}

enum { ITERATIONS = 2000000 };
static const DLDevice cuda0 = {kDLCUDA, 0};

static void producer_deleter(DLManagedTensorVersioned *t) {
  (void)t;
}

static double time_has_event(const vendored_dlsync *copy, const DLManagedTensorVersioned *t) {
  int sum = 0;
  double start = now_ns();
  for (int i = 0; i < ITERATIONS; i++) sum += copy->tensor_has_event(t);
  double ns = (now_ns() - start) / ITERATIONS;
  if (sum != 0 && sum != ITERATIONS) abort();
  return ns;
}

static double time_wait(const vendored_dlsync *copy, const DLManagedTensorVersioned *t) {
  dl_sync_stream consumer = {cuda0, (void *)0x100};
  double start = now_ns();
  for (int i = 0; i < ITERATIONS; i++)
    if (copy->tensor_wait(t, consumer) != DL_SYNC_OK) abort();
  return (now_ns() - start) / ITERATIONS;
}

int main(void) {
  const vendored_dlsync *a = load_copy(COPY_A), *b = load_copy(COPY_B);
  a->set_backend(kDLCUDA, &null_backend);
  b->set_backend(kDLCUDA, &null_backend);
  DLManagedTensorVersioned tensor = {.version = {1, 3}, .deleter = producer_deleter};
  tensor.dl_tensor.device = cuda0;
  DLManagedTensorVersioned foreign = tensor;
  if (a->tensor_record(&tensor, (dl_sync_stream){cuda0, (void *)0x200}) != DL_SYNC_OK) abort();

  double own = time_has_event(a, &tensor), other = time_has_event(b, &tensor);
  double none = time_has_event(b, &foreign);
  report("has_event, the calling copy's tensor", own, "ns/op");
  report("has_event, another copy's tensor", other, "ns/op");
  report("has_event, a tensor without dlsync", none, "ns/op");
  report("has_event, another copy's / the calling copy's", other / own, "ratio");
  double wait_own = time_wait(a, &tensor), wait_other = time_wait(b, &tensor);
  report("tensor wait, the calling copy's tensor (2 backend calls)", wait_own, "ns/op");
  report("tensor wait, another copy's tensor (2 backend calls)", wait_other, "ns/op");
  report("tensor wait, another copy's / the calling copy's", wait_other / wait_own, "ratio");
  tensor.deleter(&tensor);
  return 0;
}
