/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Preloaded by the no-runtime tests: a machine without any GPU runtime, on a machine that
 * may have one. dlopen fails for the CUDA and HIP runtime SONAMEs, as it does where none
 * is installed, and dlerror says so.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char hidden[256];

static int is_runtime(const char *name) {
  if (name == NULL) return 0;
  const char *base = strrchr(name, '/') != NULL ? strrchr(name, '/') + 1 : name;
  return strncmp(base, "libcudart.so", 12) == 0 || strncmp(base, "libamdhip64.so", 14) == 0;
}

__attribute__((visibility("default"))) void *dlopen(const char *name, int flags) {
  void *(*real)(const char *, int) = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
  if (!is_runtime(name)) return real(name, flags);
  snprintf(hidden, sizeof hidden, "%s: cannot open shared object file: hidden by the test", name);
  return NULL;
}

__attribute__((visibility("default"))) char *dlerror(void) {
  char *(*real)(void) = (char *(*)(void))dlsym(RTLD_NEXT, "dlerror");
  if (hidden[0] == '\0') return real();
  static _Thread_local char message[256];
  memcpy(message, hidden, sizeof message);
  hidden[0] = '\0';
  return message;
}
