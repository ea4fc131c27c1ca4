/* SPDX-License-Identifier: Apache-2.0 */
/* A framework's library that links its own CUDA runtime (the libcudart.so.13 next to it,
   found through its RPATH $ORIGIN), as wheels ship theirs. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

__attribute__((visibility("default"))) int framework_runtime_version(void);
__attribute__((visibility("default"))) const char *framework_runtime_path(void);

int cudaRuntimeGetVersion(int *version);

int framework_runtime_version(void) {
  int version = 0;
  return cudaRuntimeGetVersion(&version) == 0 ? version : -1;
}

/* The file the runtime this library is bound to was loaded from. */
const char *framework_runtime_path(void) {
  Dl_info info;
  int (*entry)(int *) = cudaRuntimeGetVersion;
  void *address;
  __builtin_memcpy(&address, &entry, sizeof address);
  return dladdr(address, &info) != 0 && info.dli_fname != NULL ? info.dli_fname : "(unknown)";
}
