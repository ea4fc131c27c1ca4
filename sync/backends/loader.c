/* Runtime libraries found at run time; see loader.h and docs/runtimes.md. */
#define _GNU_SOURCE /* dlinfo, RTLD_NOLOAD */
#include "loader.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Appends "; reason" to rt->why, truncating quietly (the message has a fixed size).
   dlerror's reasons name the file they are about. */
static void note_failure(dl_sync__runtime *rt, const char *name, const char *reason) {
  size_t used = strlen(rt->why);
  if (used >= sizeof rt->why - 1) return;
  snprintf(rt->why + used, sizeof rt->why - used, "%s%s", used != 0 ? "; " : "",
           reason != NULL ? reason : name);
}

static void keep(dl_sync__runtime *rt, void *handle, const char *name) {
  rt->handle = handle;
  struct link_map *map = NULL;
  const char *path = dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != NULL &&
                             map->l_name != NULL && map->l_name[0] != '\0'
                         ? map->l_name
                         : name;
  snprintf(rt->path, sizeof rt->path, "%s", path);
}

int dl_sync__runtime_open(dl_sync__runtime *rt) {
  rt->handle = NULL;
  rt->why[0] = '\0';
  const char *override = getenv(rt->env);
  if (override != NULL && override[0] != '\0') {
    void *handle = dlopen(override, RTLD_NOW | RTLD_LOCAL);
    if (handle != NULL) {
      keep(rt, handle, override);
      return 0;
    }
    const char *reason = dlerror();
    snprintf(rt->why, sizeof rt->why, "%s=%s does not load: %s", rt->env, override,
             reason != NULL ? reason : "unknown reason");
    return -1;
  }
  /* A runtime the process already has (a framework's own) comes first: two copies of one
     runtime in a process do not share streams or events. */
  for (const char *const *name = rt->sonames; *name != NULL; name++) {
    void *handle = dlopen(*name, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (handle != NULL) {
      keep(rt, handle, *name);
      return 0;
    }
  }
  for (const char *const *name = rt->sonames; *name != NULL; name++) {
    void *handle = dlopen(*name, RTLD_NOW | RTLD_LOCAL);
    if (handle != NULL) {
      keep(rt, handle, *name);
      return 0;
    }
    note_failure(rt, *name, dlerror());
  }
  return -1;
}

void *dl_sync__runtime_symbol(const dl_sync__runtime *rt, const char *name) {
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
  return -1;
}

int dl_sync_backend_runtime(const dl_sync_backend *backend, dl_sync_runtime_info *out) {
  static const char *const func = "dl_sync_backend_runtime";
  if (backend == NULL || out == NULL)
    return dl_sync__error(DL_SYNC_EINVAL, func, "backend (%p) and out (%p) must not be NULL",
                          (const void *)backend, (void *)out);
  *out = (dl_sync_runtime_info){0};
  const dl_sync__runtime *cuda = dl_sync__cuda_runtime_of(backend);
  const dl_sync__runtime *rt = cuda != NULL ? cuda : dl_sync__hip_runtime_of(backend);
  if (rt == NULL)
    return dl_sync__error(DL_SYNC_ENOTSUP, func,
                          "backend '%s' is not one of dlsync's runtime backends "
                          "(dl_sync_cuda_backend(), dl_sync_hip_backend())",
                          backend->name != NULL ? backend->name : "(unnamed)");
  if (rt->handle == NULL)
    return dl_sync__error(DL_SYNC_ENODEV, func, "no %s runtime: %s", rt->family, rt->why);
  out->path = rt->path;
  out->version = rt->version;
  out->major = cuda != NULL ? rt->version / 1000 : rt->version / 10000000;
  out->minor = cuda != NULL ? rt->version % 1000 / 10 : rt->version / 100000 % 100;
  return DL_SYNC_OK;
}
