/* SPDX-License-Identifier: Apache-2.0 */
/* platform.h on Windows: LoadLibraryExW, the process's module list, GetModuleHandleExW.
   There is no fork, and no exported-symbol lookup by address (dladdr): another copy's
   tensors are then recognized only through the stream argument (docs/vendoring.md). */
#ifdef _WIN32
#include "platform.h"

#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#include <psapi.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

enum { DL_SYNC__PATH_BYTES = 1024 };

static _Thread_local char last_error[256];
static _Thread_local char file_name[DL_SYNC__PATH_BYTES];

static void note_error(const char *what, const char *file) {
  snprintf(last_error, sizeof last_error, "%s %s: Windows error %lu", what, file,
           (unsigned long)GetLastError());
}

/* UTF-8 (as the library's callers name files) to the wide path Windows takes. */
static int widen(const char *file, wchar_t *out, int count) {
  return MultiByteToWideChar(CP_UTF8, 0, file, -1, out, count) > 0;
}

static const char *narrow(const wchar_t *path) {
  return WideCharToMultiByte(CP_UTF8, 0, path, -1, file_name, sizeof file_name, NULL, NULL) > 0
             ? file_name
             : NULL;
}

void *dl_sync__library_open(const char *file, int only_if_loaded) {
  wchar_t path[DL_SYNC__PATH_BYTES];
  if (!widen(file, path, DL_SYNC__PATH_BYTES)) {
    note_error("cannot name", file);
    return NULL;
  }
  HMODULE module = NULL;
  if (only_if_loaded) {
    /* GetModuleHandleExW adds a reference, as a dlopen with RTLD_NOLOAD does. */
    if (!GetModuleHandleExW(0, path, &module)) module = NULL;
  } else {
    module = LoadLibraryExW(path, NULL, LOAD_LIBRARY_SEARCH_DEFAULT_DIRS);
  }
  if (module == NULL) note_error(only_if_loaded ? "not loaded:" : "cannot load", file);
  return (void *)module;
}

const char *dl_sync__library_error(void) {
  return last_error[0] != '\0' ? last_error : NULL;
}

void *dl_sync__library_symbol(void *library, const char *name) {
  FARPROC address = GetProcAddress((HMODULE)library, name);
  void *symbol;
  memcpy(&symbol, &address, sizeof symbol); /* a function's address as the data pointer */
  return symbol;
}

void dl_sync__library_close(void *library) {
  FreeLibrary((HMODULE)library);
}

const char *dl_sync__library_file(void *library) {
  wchar_t path[DL_SYNC__PATH_BYTES];
  DWORD n = GetModuleFileNameW((HMODULE)library, path, DL_SYNC__PATH_BYTES);
  return n > 0 && n < DL_SYNC__PATH_BYTES ? narrow(path) : NULL;
}

void dl_sync__each_loaded_file(void (*visit)(const char *file, void *data), void *data) {
  HMODULE modules[1024];
  DWORD bytes = 0;
  if (!EnumProcessModules(GetCurrentProcess(), modules, sizeof modules, &bytes)) return;
  for (DWORD i = 0; i < bytes / sizeof modules[0] && i < 1024; i++) {
    const char *file = dl_sync__library_file(modules[i]);
    if (file != NULL) visit(file, data);
  }
}

static HMODULE module_at(const void *address, DWORD flags) {
  HMODULE module = NULL;
  return GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | flags, (LPCWSTR)address,
                            &module)
             ? module
             : NULL;
}

const char *dl_sync__file_at(const void *address) {
  HMODULE module = module_at(address, GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT);
  return module != NULL ? dl_sync__library_file(module) : NULL;
}

const char *dl_sync__symbol_starting_at(const void *address) {
  (void)address;
  return NULL;
}

void dl_sync__pin_object_at(const void *address) {
  module_at(address, GET_MODULE_HANDLE_EX_FLAG_PIN);
}

/* A pthread key (winpthreads'), whose destructor is the hook. It is never deleted: a key
   deleted while the process exits (DLL detach) could wait for a lock a thread killed by
   the exit still holds. Instead the module holding this copy is pinned when the key is
   made, so that the hook's code stays mapped for every thread that exits later. */
static pthread_key_t exit_key;
static int exit_key_made;
static const char exit_key_marker; /* an address inside this copy's module */

void dl_sync__thread_exit_make(void (*on_exit)(void *value)) {
  exit_key_made = pthread_key_create(&exit_key, on_exit) == 0;
  if (exit_key_made) dl_sync__pin_object_at(&exit_key_marker);
}

int dl_sync__thread_exit_set(void *value) {
  if (!exit_key_made) return value != NULL ? -1 : 0;
  return pthread_setspecific(exit_key, value) == 0 ? 0 : -1;
}

void dl_sync__yield(void) {
  SwitchToThread();
}

void dl_sync__on_fork(void (*prepare)(void), void (*parent)(void), void (*child)(void)) {
  (void)prepare;
  (void)parent;
  (void)child;
}

#endif /* _WIN32 */
