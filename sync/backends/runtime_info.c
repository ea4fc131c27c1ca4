/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dl_sync_backend_runtime and dl_sync_bind_runtime: which library a built-in backend uses,
 * and binding one; and the list of the built-in backends, the core's one way to them.
 * Here, not in the loader, which knows no backend.
 */
#include <stdio.h>

#include "loader.h"

static dl_sync__runtime *runtime_of(const dl_sync_backend *backend) {
  dl_sync__runtime *rt = dl_sync__cuda_driver_of(backend);
  if (rt == NULL) rt = dl_sync__cudart_of(backend);
  if (rt == NULL) rt = dl_sync__hip_runtime_of(backend);
  return rt;
}

const dl_sync_backend *dl_sync__builtin_backend(size_t i, int32_t *device_type) {
  switch (i) {
    case 0:
      *device_type = kDLCUDA;
      return dl_sync_cuda_backend();
    case 1:
      *device_type = kDLCUDA;
      return dl_sync_cudart_backend();
    case 2:
      *device_type = kDLROCM;
      return dl_sync_hip_backend();
    default:
      return NULL;
  }
}

int dl_sync__backend_is_builtin(const dl_sync_backend *backend) {
  return runtime_of(backend) != NULL;
}

static const char *backend_name(const dl_sync_backend *backend) {
  return backend->name != NULL ? backend->name : "(unnamed)";
}

int dl_sync_backend_runtime(const dl_sync_backend *backend, dl_sync_runtime_info *out) {
  static const char *const func = "dl_sync_backend_runtime";
  if (backend == NULL || out == NULL)
    return dl_sync__named(
        func, dl_sync__error(DL_SYNC_EINVAL, "backend (%p) and out (%p) must not be NULL",
                             (const void *)backend, (void *)out));
  *out = (dl_sync_runtime_info){0};
  dl_sync__runtime *rt = runtime_of(backend);
  if (rt == NULL)
    return dl_sync__named(func,
                          dl_sync__error(DL_SYNC_ENOTSUP,
                                         "backend '%s' is not one of dlsync's built-in backends "
                                         "(dl_sync_cuda_backend(), dl_sync_cudart_backend(), "
                                         "dl_sync_hip_backend())",
                                         backend_name(backend)));
  if (!dl_sync__runtime_find(rt, 0))
    return dl_sync__named(func, dl_sync__error(DL_SYNC_ENODEV, "no %s: %s", rt->family, rt->why));
  int hip = dl_sync__hip_runtime_of(backend) != NULL;
  out->path = rt->path;
  out->version = rt->version;
  out->major = hip ? rt->version / 10000000 : rt->version / 1000;
  out->minor = hip ? rt->version / 100000 % 100 : rt->version % 1000 / 10;
  return DL_SYNC_OK;
}

static int bind_runtime(const dl_sync_backend *backend,
                        void *(*lookup)(void *user, const char *name), void *user) {
  if (backend == NULL || (lookup == NULL && user == NULL))
    return dl_sync__error(DL_SYNC_EINVAL,
                          "backend (%p) must not be NULL, and user (%p) must be a dlopen "
                          "handle when lookup is NULL",
                          (const void *)backend, user);
  dl_sync__runtime *rt = dl_sync__cudart_of(backend);
  if (rt == NULL) rt = dl_sync__hip_runtime_of(backend);
  if (rt == NULL)
    return dl_sync__error(DL_SYNC_ENOTSUP,
                          "backend '%s' takes no runtime: only dl_sync_cudart_backend() and "
                          "dl_sync_hip_backend() do (the CUDA driver backend needs none)",
                          backend_name(backend));
  dl_sync__runtime_lock(rt);
  int state = atomic_load_explicit(&rt->state, memory_order_relaxed);
  int status = DL_SYNC_OK;
  if (state == DL_SYNC__RUNTIME_READY) {
    status =
        dl_sync__error(DL_SYNC_EINVAL, "the %s backend already uses %s: bind before its first use",
                       backend_name(backend), rt->path);
  } else {
    rt->handle = lookup == NULL ? user : NULL;
    rt->lookup = lookup;
    rt->user = user;
    if (lookup == NULL)
      dl_sync__runtime_set_path(rt, user, "(a dlopen handle)");
    else
      snprintf(rt->path, sizeof rt->path, "(bound by the caller)");
    state = rt->resolve(rt) == 0 ? DL_SYNC__RUNTIME_READY : DL_SYNC__RUNTIME_UNFOUND;
    if (state == DL_SYNC__RUNTIME_READY) {
      rt->why[0] = '\0';
      /* Where a statically linked runtime lives. */
      void *entry = lookup != NULL ? lookup(user, rt->version_call) : NULL;
      const char *file = entry != NULL ? dl_sync__file_at(entry) : NULL;
      if (file != NULL) snprintf(rt->path, sizeof rt->path, "%s (bound by the caller)", file);
    } else {
      status = dl_sync__error(DL_SYNC_ENODEV, "the bound %s does not do: %s", rt->family, rt->why);
    }
    atomic_store_explicit(&rt->state, state, memory_order_release);
  }
  dl_sync__mutex_unlock(&rt->lock);
  return status;
}

int dl_sync_bind_runtime(const dl_sync_backend *backend,
                         void *(*lookup)(void *user, const char *name), void *user) {
  return dl_sync__named("dl_sync_bind_runtime", bind_runtime(backend, lookup, user));
}
