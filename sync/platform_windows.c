/* SPDX-License-Identifier: Apache-2.0 */
/* platform.h on Windows: LoadLibraryExW, the process's module list, GetModuleHandleExW.
   There is no fork, and no exported-symbol lookup by address (dladdr): another copy's
   tensors are then recognized only through the stream argument (docs/vendoring.md). */
#ifdef _WIN32
#include "platform.h"

#define WIN32_LEAN_AND_MEAN
#include <windows.h>
#include <psapi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DL_SYNC__PATH_BYTES = 1024 };

static DL_SYNC__THREAD_LOCAL char last_error[256];
static DL_SYNC__THREAD_LOCAL char file_name[DL_SYNC__PATH_BYTES];

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

/* A fiber-local storage slot, whose callback is the hook: Windows calls it when a thread
   (or fiber) with a value set exits. The slot is never freed: freeing it while the process
   exits (DLL detach) would run the callback on other threads' values, and could wait for a
   lock a thread killed by the exit still holds. Instead the module holding this copy is
   pinned when the slot is made, so that the hook's code stays mapped for every thread that
   exits later. */
static DWORD exit_slot = FLS_OUT_OF_INDEXES;
static void (*exit_hook)(void *value);
static const char exit_slot_marker; /* an address inside this copy's module */

static void WINAPI run_exit_hook(void *value) {
  if (value != NULL) exit_hook(value);
}

void dl_sync__thread_exit_make(void (*on_exit)(void *value)) {
  exit_hook = on_exit;
  exit_slot = FlsAlloc(run_exit_hook);
  if (exit_slot != FLS_OUT_OF_INDEXES) dl_sync__pin_object_at(&exit_slot_marker);
}

int dl_sync__thread_exit_set(void *value) {
  if (exit_slot == FLS_OUT_OF_INDEXES) return value != NULL ? -1 : 0;
  return FlsSetValue(exit_slot, value) ? 0 : -1;
}

/* The lock and the one-time call share the layout of the system's objects (a pointer);
   both start as zero (SRWLOCK_INIT, INIT_ONCE_STATIC_INIT). */
_Static_assert(sizeof(dl_sync__mutex) == sizeof(SRWLOCK), "dl_sync__mutex is an SRWLOCK");
_Static_assert(sizeof(dl_sync__once) == sizeof(INIT_ONCE), "dl_sync__once is an INIT_ONCE");

void dl_sync__mutex_lock(dl_sync__mutex *mutex) {
  AcquireSRWLockExclusive((SRWLOCK *)mutex);
}

int dl_sync__mutex_trylock(dl_sync__mutex *mutex) {
  return TryAcquireSRWLockExclusive((SRWLOCK *)mutex) != 0;
}

void dl_sync__mutex_unlock(dl_sync__mutex *mutex) {
  ReleaseSRWLockExclusive((SRWLOCK *)mutex);
}

void dl_sync__mutex_renew(dl_sync__mutex *mutex) {
  InitializeSRWLock((SRWLOCK *)mutex);
}

struct once_call {
  void (*function)(void);
};

static BOOL CALLBACK run_once(INIT_ONCE *once, void *parameter, void **context) {
  (void)once;
  (void)context;
  ((struct once_call *)parameter)->function();
  return TRUE;
}

void dl_sync__once_run(dl_sync__once *once, void (*function)(void)) {
  struct once_call call = {function};
  InitOnceExecuteOnce((INIT_ONCE *)once, run_once, &call, NULL);
}

void dl_sync__yield(void) {
  SwitchToThread();
}

_Static_assert(sizeof(dl_sync__cond) == sizeof(CONDITION_VARIABLE),
               "dl_sync__cond is a CONDITION_VARIABLE");

void dl_sync__cond_wait(dl_sync__cond *cond, dl_sync__mutex *mutex, int timeout_ms) {
  SleepConditionVariableSRW((CONDITION_VARIABLE *)cond, (SRWLOCK *)mutex,
                            timeout_ms < 0 ? INFINITE : (DWORD)timeout_ms, 0);
}

void dl_sync__cond_signal(dl_sync__cond *cond) {
  WakeConditionVariable((CONDITION_VARIABLE *)cond);
}

void dl_sync__cond_renew(dl_sync__cond *cond) {
  InitializeConditionVariable((CONDITION_VARIABLE *)cond);
}

typedef struct started {
  void (*run)(void *arg);
  void *arg;
} started;

static DWORD WINAPI run_started(void *arg) {
  started call = *(started *)arg;
  free(arg);
  call.run(call.arg);
  return 0;
}

void *dl_sync__thread_start(void (*run)(void *arg), void *arg) {
  started *call = malloc(sizeof *call);
  if (call == NULL) return NULL;
  *call = (started){run, arg};
  HANDLE thread = CreateThread(NULL, 0, run_started, call, 0, NULL);
  if (thread == NULL) free(call);
  return thread;
}

void dl_sync__thread_join(void *thread) {
  WaitForSingleObject((HANDLE)thread, INFINITE);
  CloseHandle((HANDLE)thread);
}

void dl_sync__thread_drop(void *thread) {
  CloseHandle((HANDLE)thread);
}

void dl_sync__on_fork(void (*prepare)(void), void (*parent)(void), void (*child)(void)) {
  (void)prepare;
  (void)parent;
  (void)child;
}

#else
/* ISO C wants a declaration in every file, this one empty on the other systems. */
typedef int dl_sync__platform_windows_not_built;
#endif /* _WIN32 */
