/* SPDX-License-Identifier: Apache-2.0 */
/* Two libraries, each with a copy of dlsync compiled from the one-file dlsync.c; the
   first is loaded RTLD_GLOBAL, so its symbols join the global scope, the second
   RTLD_LOCAL. The copies must stay independent: each answers with its own built-in
   backends, and a backend installed in one is not seen by the other. A copy whose API
   were exported (dlsync.c compiled with DL_SYNC_BUILDING_SHARED: the negative control,
   run with --expect-interposition) has the second library's references bound to the
   first's definitions, and this program fails.

   usage: interposition COPY_A.so COPY_B.so [--expect-interposition] */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "copy_table.h"

static const copy_table *load(const char *path, int flags) {
  void *handle = dlopen(path, RTLD_NOW | flags);
  if (handle == NULL) {
    fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
    return NULL;
  }
  const copy_table *(*get)(void);
  void *entry = dlsym(handle, "amalgamation_copy");
  if (entry == NULL) {
    fprintf(stderr, "dlsym amalgamation_copy in %s: %s\n", path, dlerror());
    return NULL;
  }
  memcpy(&get, &entry, sizeof get);
  return get();
}

static const char *file_of(const void *address) {
  Dl_info info;
  return dladdr(address, &info) != 0 && info.dli_fname != NULL ? info.dli_fname : "?";
}

/* 0 when the copies are independent, the number of failed checks otherwise. */
static int independent(const copy_table *a, const copy_table *b) {
  int failed = 0;
  if (a->cuda_backend() == b->cuda_backend()) {
    printf("the copies share one CUDA backend (in %s)\n", file_of(a->cuda_backend()));
    failed++;
  }
  const dl_sync_backend *b_cuda = b->get_backend(kDLCUDA);
  if (b_cuda != b->cuda_backend()) {
    printf("copy B's default CUDA backend is not its own (it is in %s)\n", file_of(b_cuda));
    failed++;
  }
  /* An install in A is A's only. */
  if (a->set_backend(kDLCUDA, a->hip_backend()) != DL_SYNC_OK) {
    printf("dl_sync_set_backend in copy A failed\n");
    return failed + 1;
  }
  if (a->get_backend(kDLCUDA) != a->hip_backend()) {
    printf("copy A does not answer with the backend installed in it\n");
    failed++;
  }
  if (b->get_backend(kDLCUDA) != b_cuda) {
    printf("a backend installed in copy A changed what copy B answers\n");
    failed++;
  }
  a->set_backend(kDLCUDA, NULL);
  return failed;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s COPY_A.so COPY_B.so [--expect-interposition]\n", argv[0]);
    return 2;
  }
  int expect_interposition = argc > 3 && strcmp(argv[3], "--expect-interposition") == 0;
  const copy_table *a = load(argv[1], RTLD_GLOBAL), *b = load(argv[2], RTLD_LOCAL);
  if (a == NULL || b == NULL) return 2;
  int failed = independent(a, b);
  printf("copy A (RTLD_GLOBAL): %s; copy B (RTLD_LOCAL): %s; %s\n", file_of(a->set_backend),
         file_of(b->set_backend), failed ? "NOT independent" : "independent");
  return expect_interposition ? (failed ? 0 : 1) : (failed ? 1 : 0);
}
