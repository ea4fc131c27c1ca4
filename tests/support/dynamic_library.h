/* SPDX-License-Identifier: Apache-2.0 */
/* Opening a library and finding its symbols in a test, on POSIX (dlfcn) and on Windows
   (LoadLibrary), for the suites over the fake runtimes. */
#ifndef DL_SYNC_TEST_DYNAMIC_LIBRARY_H_
#define DL_SYNC_TEST_DYNAMIC_LIBRARY_H_

#include <string.h>

#ifdef _WIN32
#define WIN32_LEAN_AND_MEAN
#include <windows.h>

static inline void *test_library_open(const char *path) {
  return (void *)LoadLibraryA(path);
}
/* The library only if the process has it loaded already (dlopen's RTLD_NOLOAD). */
static inline void *test_library_loaded(const char *path) {
  HMODULE module = NULL;
  return GetModuleHandleExA(0, path, &module) ? (void *)module : NULL;
}
static inline void *test_library_symbol(void *library, const char *name) {
  FARPROC procedure = GetProcAddress((HMODULE)library, name);
  void *address;
  memcpy(&address, &procedure, sizeof address);
  return address;
}
static inline const char *test_library_error(void) {
  return "LoadLibrary failed";
}
#else
#include <dlfcn.h>

static inline void *test_library_open(const char *path) {
  return dlopen(path, RTLD_NOW);
}
static inline void *test_library_loaded(const char *path) {
  return dlopen(path, RTLD_NOW | RTLD_NOLOAD);
}
static inline void *test_library_symbol(void *library, const char *name) {
  return dlsym(library, name);
}
static inline const char *test_library_error(void) {
  return dlerror();
}
#endif

#endif /* DL_SYNC_TEST_DYNAMIC_LIBRARY_H_ */
