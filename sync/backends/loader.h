/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The GPU libraries a backend uses, found at run time. A runtime (libcudart, libamdhip64)
 * is never loaded by dlsync: it is the one the caller bound (dl_sync_bind_runtime), the
 * one an environment variable names, or the one the process has loaded; it is looked for
 * again until found. The CUDA driver (libcuda.so.1, one per process, part of the driver
 * install) is loaded when needed. See docs/runtimes.md.
 */
#ifndef DL_SYNC_LOADER_H_
#define DL_SYNC_LOADER_H_

#include <stdatomic.h>

#include "../internal.h"

enum { DL_SYNC__RUNTIME_UNFOUND, DL_SYNC__RUNTIME_READY, DL_SYNC__RUNTIME_REJECTED };

typedef struct dl_sync__runtime dl_sync__runtime;
struct dl_sync__runtime {
  const char *family;         /* "CUDA driver", "CUDA runtime", "HIP runtime": for messages */
  const char *env;            /* the override variable, e.g. "DL_SYNC_CUDART" */
  const char *const *sonames; /* a loadable library's SONAMEs, NULL-terminated; else NULL */
  const char *file_prefix;    /* a loaded object whose file name starts so is one */
  int loadable;               /* the driver: loaded by SONAME when the process has none */
  const char *version_call;   /* an entry point every version has, e.g. cuDriverGetVersion */
  /* Binds the entry points once the library is open; 0, or dl_sync__runtime_reject. */
  int (*resolve)(dl_sync__runtime *rt);

  dl_sync__mutex lock;
  atomic_int state;                              /* DL_SYNC__RUNTIME_* */
  void *handle;                                  /* the dlopen handle, unless bound by lookup */
  void *(*lookup)(void *user, const char *name); /* bound by the caller */
  void *user;
  char path[4096]; /* the file used */
  int version;     /* as the library reports it */
  char why[1024];  /* unless READY: what was tried and why it did not do */
};

/* 1 when rt is ready, looking for it first unless it was found (or rejected) before.
   may_load: the driver may be loaded now (a runtime never is). */
int dl_sync__runtime_find(dl_sync__runtime *rt, int may_load);
/* Takes rt's lock for a change of its library outside a search (a binding). */
void dl_sync__runtime_lock(dl_sync__runtime *rt);
/* rt->path from handle's file, else name. */
void dl_sync__runtime_set_path(dl_sync__runtime *rt, void *handle, const char *name);
/* The address of name in rt's library, or NULL. */
void *dl_sync__runtime_symbol(const dl_sync__runtime *rt, const char *name);
/* Stores the address of name into the function pointer at pointer (size bytes); 0 when
   the library lacks it. */
int dl_sync__runtime_bind(const dl_sync__runtime *rt, const char *name, void *pointer, size_t size);
/* Gives rt's library up after a failure found once it was open; fmt says why. Returns -1. */
int dl_sync__runtime_reject(dl_sync__runtime *rt, const char *fmt, ...) DL_SYNC__PRINTF(2, 3);

/* A runtime backend's callback begins so: without its runtime (found, never loaded) the
   call answers DL_SYNC__NO_RUNTIME, which error_status makes ENODEV. */
#define DL_SYNC__NEED_RUNTIME(rt) \
  if (!dl_sync__runtime_find((rt), 0)) return DL_SYNC__NO_RUNTIME

/* The status of a runtime code that a backend's error_status names no case for: every
   runtime numbers its capture errors as one range (cuda.h, driver_types.h,
   hip_runtime_api.h: "StreamCaptureUnsupported" to "StreamCaptureWrongThread"), which is
   ECAPTURE; anything else is EBACKEND. */
static inline int dl_sync__other_error_status(int code, int first_capture, int last_capture) {
  return code >= first_capture && code <= last_capture ? DL_SYNC_ECAPTURE : DL_SYNC_EBACKEND;
}

/* A potentially unsafe call (an event query or synchronization) made in the relaxed capture
   interaction mode, the caller's mode put back after: the runtimes' ThreadExchange-
   StreamCaptureMode calls, where in the global mode (the default) a thread "is prohibited
   from potentially unsafe API calls" while another thread captures in global mode, and in
   the relaxed one it "is not prohibited". The call's answer, or, when the call answered
   (success or not_ready), the restoring exchange's failure: the caller is never left in
   the relaxed mode without being told. */
static inline int dl_sync__relaxed(int (*exchange)(int *mode), int relaxed_mode,
                                   int (*call)(void *event), void *event, int not_ready) {
  int mode = relaxed_mode;
  int code = exchange(&mode);
  if (code != 0) return code;
  code = call(event);
  int restored = exchange(&mode);
  return (code == 0 || code == not_ready) && restored != 0 ? restored : code;
}

/* The library of backend when it is a built-in one (cuda_driver.c, cudart.c, hip.c), else
   NULL. Used by runtime_info.c, never by the loader. */
dl_sync__runtime *dl_sync__cuda_driver_of(const dl_sync_backend *backend);
dl_sync__runtime *dl_sync__cudart_of(const dl_sync_backend *backend);
dl_sync__runtime *dl_sync__hip_runtime_of(const dl_sync_backend *backend);

#endif /* DL_SYNC_LOADER_H_ */
