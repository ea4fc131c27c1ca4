/* GPU libraries found at run time; see loader.h and docs/runtimes.md. */
#define _GNU_SOURCE /* dlinfo, dl_iterate_phdr, RTLD_NOLOAD */
#include "loader.h"

#include <dlfcn.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void set_path(dl_sync__runtime *rt, void *handle, const char *name) {
  struct link_map *map = NULL;
  const char *path = dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != NULL &&
                             map->l_name != NULL && map->l_name[0] != '\0'
                         ? map->l_name
                         : name;
  snprintf(rt->path, sizeof rt->path, "%s", path);
}

static int open_file(dl_sync__runtime *rt, const char *file, int flags) {
  void *handle = dlopen(file, RTLD_NOW | RTLD_LOCAL | flags);
  if (handle == NULL) return -1;
  rt->handle = handle;
  set_path(rt, handle, file);
  return 0;
}

/* Loaded objects whose file name starts with the runtime's prefix: a framework's copy may
   carry a renamed SONAME ("libamdhip64-3a1f.so"). */
typedef struct loaded_runtimes {
  const char *prefix;
  size_t count;
  char paths[4][256];
} loaded_runtimes;

static int note_loaded(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  loaded_runtimes *found = data;
  const char *path = info->dlpi_name;
  if (path == NULL || path[0] == '\0') return 0;
  const char *base = strrchr(path, '/') != NULL ? strrchr(path, '/') + 1 : path;
  if (strncmp(base, found->prefix, strlen(found->prefix)) != 0) return 0;
  for (size_t i = 0; i < found->count && i < 4; i++)
    if (strcmp(found->paths[i], path) == 0) return 0;
  if (found->count < 4) snprintf(found->paths[found->count], sizeof found->paths[0], "%s", path);
  found->count++;
  return 0;
}

/* The one runtime the process has loaded; -1 (why set) for none or several. */
static int open_loaded(dl_sync__runtime *rt) {
  loaded_runtimes found = {.prefix = rt->file_prefix};
  dl_iterate_phdr(note_loaded, &found);
  if (found.count == 1 && open_file(rt, found.paths[0], RTLD_NOLOAD) == 0) return 0;
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
    if (open_file(rt, *name, RTLD_NOLOAD) == 0) return 0;
  if (!may_load) {
    snprintf(rt->why, sizeof rt->why, "%s is not loaded yet (dlsync loads it at its first call)",
             rt->sonames[0]);
    return -1;
  }
  for (const char *const *name = rt->sonames; *name != NULL; name++) {
    if (open_file(rt, *name, 0) == 0) return 0;
    const char *reason = dlerror();
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
    const char *reason = dlerror();
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

/* The libraries' locks are held around fork(), so that a child never inherits one held by
   a thread it does not have (a search takes them only while a library is looked for). */
static dl_sync__runtime *every_runtime(size_t i) {
  return i == 0 ? dl_sync__cuda_driver() : i == 1 ? dl_sync__cudart_runtime() : dl_sync__hip_runtime();
}
static void lock_all(void) {
  for (size_t i = 0; i < 3; i++) pthread_mutex_lock(&every_runtime(i)->lock);
}
static void unlock_all(void) {
  for (size_t i = 3; i-- > 0;) pthread_mutex_unlock(&every_runtime(i)->lock);
}
static void watch_fork(void) { pthread_atfork(lock_all, unlock_all, unlock_all); }

int dl_sync__runtime_find(dl_sync__runtime *rt, int may_load) {
  int state = atomic_load_explicit(&rt->state, memory_order_acquire);
  if (state != DL_SYNC__RUNTIME_UNFOUND) return state == DL_SYNC__RUNTIME_READY;
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, watch_fork); /* at the first search: nothing runs at load */
  pthread_mutex_lock(&rt->lock);
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
  pthread_mutex_unlock(&rt->lock);
  return state == DL_SYNC__RUNTIME_READY;
}

void *dl_sync__runtime_symbol(const dl_sync__runtime *rt, const char *name) {
  if (rt->lookup != NULL) return rt->lookup(rt->user, name);
  return rt->handle != NULL ? dlsym(rt->handle, name) : NULL;
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
  if (rt->handle != NULL) dlclose(rt->handle);
  rt->handle = NULL;
  rt->lookup = NULL;
  return -1;
}

static dl_sync__runtime *runtime_of(const dl_sync_backend *backend) {
  dl_sync__runtime *rt = dl_sync__cuda_driver_of(backend);
  if (rt == NULL) rt = dl_sync__cudart_of(backend);
  if (rt == NULL) rt = dl_sync__hip_runtime_of(backend);
  return rt;
}

static const char *backend_name(const dl_sync_backend *backend) {
  return backend->name != NULL ? backend->name : "(unnamed)";
}

int dl_sync_backend_runtime(const dl_sync_backend *backend, dl_sync_runtime_info *out) {
  static const char *const func = "dl_sync_backend_runtime";
  if (backend == NULL || out == NULL)
    return dl_sync__error(DL_SYNC_EINVAL, func, "backend (%p) and out (%p) must not be NULL",
                          (const void *)backend, (void *)out);
  *out = (dl_sync_runtime_info){0};
  dl_sync__runtime *rt = runtime_of(backend);
  if (rt == NULL)
    return dl_sync__error(DL_SYNC_ENOTSUP, func,
                          "backend '%s' is not one of dlsync's built-in backends "
                          "(dl_sync_cuda_backend(), dl_sync_cudart_backend(), "
                          "dl_sync_hip_backend())",
                          backend_name(backend));
  if (!dl_sync__runtime_find(rt, 0))
    return dl_sync__error(DL_SYNC_ENODEV, func, "no %s: %s", rt->family, rt->why);
  int hip = dl_sync__hip_runtime_of(backend) != NULL;
  out->path = rt->path;
  out->version = rt->version;
  out->major = hip ? rt->version / 10000000 : rt->version / 1000;
  out->minor = hip ? rt->version / 100000 % 100 : rt->version % 1000 / 10;
  return DL_SYNC_OK;
}

int dl_sync_bind_runtime(const dl_sync_backend *backend,
                         void *(*lookup)(void *user, const char *name), void *user) {
  static const char *const func = "dl_sync_bind_runtime";
  if (backend == NULL || (lookup == NULL && user == NULL))
    return dl_sync__error(DL_SYNC_EINVAL, func,
                          "backend (%p) must not be NULL, and user (%p) must be a dlopen "
                          "handle when lookup is NULL",
                          (const void *)backend, user);
  dl_sync__runtime *rt = dl_sync__cudart_of(backend);
  if (rt == NULL) rt = dl_sync__hip_runtime_of(backend);
  if (rt == NULL)
    return dl_sync__error(DL_SYNC_ENOTSUP, func,
                          "backend '%s' takes no runtime: only dl_sync_cudart_backend() and "
                          "dl_sync_hip_backend() do (the CUDA driver backend needs none)",
                          backend_name(backend));
  pthread_mutex_lock(&rt->lock);
  int state = atomic_load_explicit(&rt->state, memory_order_relaxed);
  int status = DL_SYNC_OK;
  if (state == DL_SYNC__RUNTIME_READY) {
    status = dl_sync__error(DL_SYNC_EINVAL, func,
                            "the %s backend already uses %s: bind before its first use",
                            backend_name(backend), rt->path);
  } else {
    rt->handle = lookup == NULL ? user : NULL;
    rt->lookup = lookup;
    rt->user = user;
    if (lookup == NULL)
      set_path(rt, user, "(a dlopen handle)");
    else
      snprintf(rt->path, sizeof rt->path, "(bound by the caller)");
    state = rt->resolve(rt) == 0 ? DL_SYNC__RUNTIME_READY : DL_SYNC__RUNTIME_UNFOUND;
    if (state == DL_SYNC__RUNTIME_READY) {
      rt->why[0] = '\0';
      Dl_info info; /* where a statically linked runtime lives */
      void *entry = lookup != NULL ? lookup(user, rt->version_call) : NULL;
      if (entry != NULL && dladdr(entry, &info) != 0 && info.dli_fname != NULL)
        snprintf(rt->path, sizeof rt->path, "%s (bound by the caller)", info.dli_fname);
    } else {
      status =
          dl_sync__error(DL_SYNC_ENODEV, func, "the bound %s does not do: %s", rt->family, rt->why);
    }
    atomic_store_explicit(&rt->state, state, memory_order_release);
  }
  pthread_mutex_unlock(&rt->lock);
  return status;
}
