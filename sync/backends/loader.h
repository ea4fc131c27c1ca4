/*
 * Finding a GPU runtime library at run time, once, at the first use of its backend:
 * the one already loaded in the process (newest SONAME first), else the first SONAME that
 * loads; an environment variable naming a path overrides both.
 */
#ifndef DL_SYNC_LOADER_H_
#define DL_SYNC_LOADER_H_

#include "../internal.h"

/* The code a runtime backend's callbacks return when no runtime could be loaded: below
   every runtime's own codes (those are >= 0). */
enum { DL_SYNC__NO_RUNTIME = -1 };

typedef struct dl_sync__runtime {
  const char *family;         /* "CUDA", "HIP": for messages */
  const char *env;            /* the override variable, e.g. "DL_SYNC_CUDART" */
  const char *const *sonames; /* newest first, NULL-terminated */
  void *handle;               /* NULL when none was loaded */
  char path[512];             /* the file loaded */
  int version;                /* as the runtime reports it */
  char why[384];              /* when handle is NULL: what was tried and why not */
} dl_sync__runtime;

/* Opens rt's library; returns 0, or -1 with rt->why set. Not thread-safe: callers run it
   under pthread_once. */
int dl_sync__runtime_open(dl_sync__runtime *rt);
/* The address of name in rt's library, or NULL. */
void *dl_sync__runtime_symbol(const dl_sync__runtime *rt, const char *name);
/* Stores the address of name into the function pointer at pointer (size bytes); 0 when
   the library lacks it. */
int dl_sync__runtime_bind(const dl_sync__runtime *rt, const char *name, void *pointer, size_t size);
/* Gives rt's library up after a failure found once it was open; fmt says why. Returns -1. */
int dl_sync__runtime_reject(dl_sync__runtime *rt, const char *fmt, ...) DL_SYNC__PRINTF(2, 3);

/* The runtime of backend when it is the built-in CUDA (cuda.c) or HIP (hip.c) backend,
   loaded on first call; NULL for any other backend. */
const dl_sync__runtime *dl_sync__cuda_runtime_of(const dl_sync_backend *backend);
const dl_sync__runtime *dl_sync__hip_runtime_of(const dl_sync_backend *backend);

#endif /* DL_SYNC_LOADER_H_ */
