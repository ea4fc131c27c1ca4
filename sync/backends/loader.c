/* SPDX-License-Identifier: Apache-2.0 */
/* GPU libraries found at run time; see loader.h and docs/runtimes.md. */
#include "loader.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void dl_sync__runtime_set_path(dl_sync__runtime *rt, void *handle, const char *name) {
  const char *path = dl_sync__library_file(handle);
  snprintf(rt->path, sizeof rt->path, "%s", path != NULL ? path : name);
}

static int open_file(dl_sync__runtime *rt, const char *file, int only_if_loaded) {
  void *handle = dl_sync__library_open(file, only_if_loaded);
  if (handle == NULL) return -1;
  rt->handle = handle;
  dl_sync__runtime_set_path(rt, handle, file);
  return 0;
}

/* Loaded objects whose file name starts with the runtime's prefix: a framework's copy may
   carry a renamed SONAME ("libamdhip64-3a1f.so"). */
typedef struct loaded_runtimes {
  const char *prefix;
  size_t count;
  const char *paths[4]; /* the loader's own names, valid while the objects are loaded */
} loaded_runtimes;

static void note_loaded(const char *path, void *data) {
  loaded_runtimes *found = data;
  const char *base = path; /* the file name: after the last '/' (and on Windows '\\') */
  for (const char *c = path; *c != '\0'; c++)
    if (*c == '/' || (DL_SYNC__PATHS_HAVE_BACKSLASHES && *c == '\\')) base = c + 1;
  if (strncmp(base, found->prefix, strlen(found->prefix)) != 0) return;
  for (size_t i = 0; i < found->count && i < 4; i++)
    if (strcmp(found->paths[i], path) == 0) return;
  if (found->count < 4) found->paths[found->count] = path;
  found->count++;
}

/* The one runtime the process has loaded; -1 (why set) for none or several. */
static int open_loaded(dl_sync__runtime *rt) {
  loaded_runtimes found = {.prefix = rt->file_prefix};
  dl_sync__each_loaded_file(note_loaded, &found);
  if (found.count == 1 && open_file(rt, found.paths[0], 1) == 0) return 0;
  if (found.count <= 1) {
    snprintf(rt->why, sizeof rt->why,
             "no %s (%s*) is loaded in this process (dlsync uses the one a framework loaded, "
             "never loads one itself: load it first, name it with %s=<path>, or bind it "
             "with dl_sync_bind_runtime)",
             rt->family, rt->file_prefix, rt->env);
    return -1;
  }
  int n = snprintf(rt->why, sizeof rt->why, "%zu %s libraries are loaded in this process (",
                   found.count, rt->family);
  for (size_t i = 0; i < found.count && i < 4 && n > 0 && (size_t)n < sizeof rt->why; i++)
    n += snprintf(rt->why + n, sizeof rt->why - (size_t)n, "%s%s", i > 0 ? ", " : "",
                  found.paths[i]);
  if (n > 0 && (size_t)n < sizeof rt->why)
    snprintf(rt->why + n, sizeof rt->why - (size_t)n,
             "): their streams are not each other's, so dlsync picks none. Bind the one "
             "your streams belong to with dl_sync_bind_runtime, or name it with %s=<path>",
             rt->env);
  return -1;
}

/* The driver: the one loaded, else the one its SONAME finds. */
static int open_by_soname(dl_sync__runtime *rt, int may_load) {
  for (const char *const *name = rt->sonames; *name != NULL; name++)
    if (open_file(rt, *name, 1) == 0) return 0;
  if (!may_load) {
    snprintf(rt->why, sizeof rt->why, "%s is not loaded yet (dlsync loads it at its first call)",
             rt->sonames[0]);
    return -1;
  }
  for (const char *const *name = rt->sonames; *name != NULL; name++) {
    if (open_file(rt, *name, 0) == 0) return 0;
    const char *reason = dl_sync__library_error();
    snprintf(rt->why, sizeof rt->why, "%s (no NVIDIA driver is installed?)",
             reason != NULL ? reason : *name);
  }
  return -1;
}

/* Opens the library; 0, or -1 with why set; *final: the failure will not change. */
static int open_library(dl_sync__runtime *rt, int may_load, int *final) {
  *final = 1;
  if (rt->lookup != NULL) {
    snprintf(rt->path, sizeof rt->path, "(bound by the caller)");
    return 0;
  }
  const char *override = getenv(rt->env);
  if (override != NULL && override[0] != '\0') {
    if (open_file(rt, override, 0) == 0) return 0;
    const char *reason = dl_sync__library_error();
    snprintf(rt->why, sizeof rt->why, "%s=%s does not load: %s", rt->env, override,
             reason != NULL ? reason : "unknown reason");
    return -1;
  }
  if (rt->loadable) {
    *final = may_load;
    return open_by_soname(rt, may_load);
  }
  *final = 0; /* a framework may load its runtime later */
  return open_loaded(rt);
}

/* The libraries searched for, whose locks are held around fork(), so that a child never
   inherits one held by a thread it does not have (a search holds it only while a library
   is looked for). Each registers itself at its first search. */
enum { DL_SYNC__RUNTIMES = 8 };
static _Atomic(dl_sync__runtime *) searched[DL_SYNC__RUNTIMES];

static void lock_all(void) {
  for (size_t i = 0; i < DL_SYNC__RUNTIMES; i++) {
    dl_sync__runtime *rt = atomic_load(&searched[i]);
    if (rt != NULL) dl_sync__mutex_lock(&rt->lock);
  }
}
static void unlock_all(void) {
  for (size_t i = DL_SYNC__RUNTIMES; i-- > 0;) {
    dl_sync__runtime *rt = atomic_load(&searched[i]);
    if (rt != NULL) dl_sync__mutex_unlock(&rt->lock);
  }
}
static void watch_fork(void) {
  dl_sync__on_fork(lock_all, unlock_all, unlock_all);
}

/* Called before rt's lock is first taken; a fork meanwhile does not hold it yet, which is
   safe: no search of rt has begun. */
static void register_search(dl_sync__runtime *rt) {
  static dl_sync__once once = DL_SYNC__ONCE_INIT;
  dl_sync__once_run(&once, watch_fork); /* at the first search: nothing runs at load */
  for (size_t i = 0; i < DL_SYNC__RUNTIMES; i++) {
    dl_sync__runtime *expected = NULL;
    if (atomic_load(&searched[i]) == rt ||
        atomic_compare_exchange_strong(&searched[i], &expected, rt) || expected == rt)
      return;
  }
}

int dl_sync__runtime_find(dl_sync__runtime *rt, int may_load) {
  int state = atomic_load_explicit(&rt->state, memory_order_acquire);
  if (state != DL_SYNC__RUNTIME_UNFOUND) return state == DL_SYNC__RUNTIME_READY;
  register_search(rt);
  dl_sync__mutex_lock(&rt->lock);
  state = atomic_load_explicit(&rt->state, memory_order_relaxed);
  if (state == DL_SYNC__RUNTIME_UNFOUND) {
    int final = 1;
    if (open_library(rt, may_load, &final) == 0)
      state = rt->resolve(rt) == 0 ? DL_SYNC__RUNTIME_READY : DL_SYNC__RUNTIME_REJECTED;
    else if (final)
      state = DL_SYNC__RUNTIME_REJECTED;
    if (state == DL_SYNC__RUNTIME_READY) rt->why[0] = '\0';
    atomic_store_explicit(&rt->state, state, memory_order_release);
  }
  dl_sync__mutex_unlock(&rt->lock);
  return state == DL_SYNC__RUNTIME_READY;
}

void dl_sync__runtime_lock(dl_sync__runtime *rt) {
  register_search(rt);
  dl_sync__mutex_lock(&rt->lock);
}

void *dl_sync__runtime_symbol(const dl_sync__runtime *rt, const char *name) {
  if (rt->lookup != NULL) return rt->lookup(rt->user, name);
  return rt->handle != NULL ? dl_sync__library_symbol(rt->handle, name) : NULL;
}

int dl_sync__runtime_bind(const dl_sync__runtime *rt, const char *name, void *pointer,
                          size_t size) {
  void *address = dl_sync__runtime_symbol(rt, name);
  if (address == NULL || size != sizeof address) return 0;
  memcpy(pointer, &address, size); /* POSIX: a data pointer converts to a function pointer */
  return 1;
}

int dl_sync__runtime_reject(dl_sync__runtime *rt, const char *fmt, ...) {
  va_list args;
  va_start(args, fmt);
  vsnprintf(rt->why, sizeof rt->why, fmt, args);
  va_end(args);
  if (rt->handle != NULL) dl_sync__library_close(rt->handle);
  rt->handle = NULL;
  rt->lookup = NULL;
  return -1;
}
