/* SPDX-License-Identifier: Apache-2.0 */
/*
 * platform.h: what dlsync asks of the operating system beyond C11: loading
 * libraries and finding the loaded ones, the identity of the code at an address, keeping
 * this copy's code mapped, a thread-exit hook, yielding the processor, fork, and the
 * threads, locks, conditions, one-time calls and thread-local storage the library uses.
 * platform_posix.c holds the POSIX answers (dlfcn, the dynamic loader's list of objects, pthreads),
 * platform_windows.c the Windows ones, platform.c what is the same on both; the rest of
 * the library includes no operating system header.
 */
#ifndef DL_SYNC_PLATFORM_H_
#define DL_SYNC_PLATFORM_H_

#include <stddef.h>
#include <stdint.h>

/* Opens the library file (binding every symbol now, none into the process's namespace);
   only_if_loaded: only when the process has it loaded already. NULL when it does not
   open, and dl_sync__library_error() says why. */
void *dl_sync__library_open(const char *file, int only_if_loaded);
/* Why the last dl_sync__library_open on this thread failed, or NULL. */
const char *dl_sync__library_error(void);
void *dl_sync__library_symbol(void *library, const char *name);
void dl_sync__library_close(void *library);
/* The file library was loaded from (the loader's own name for it), or NULL. */
const char *dl_sync__library_file(void *library);
/* Calls visit for each object loaded in the process that has a file name; the name is
   valid while that object stays loaded. */
void dl_sync__each_loaded_file(void (*visit)(const char *file, void *data), void *data);

/* The file of the object whose code or data holds address, or NULL. */
const char *dl_sync__file_at(const void *address);
/* The name of the exported symbol that starts exactly at address, or NULL (where the
   platform cannot tell, always NULL). */
const char *dl_sync__symbol_starting_at(const void *address);
/* Keeps the object holding address mapped for the rest of the process: an unload of it
   leaves its code in place, for callbacks (graph destructors) that outlive it. */
void dl_sync__pin_object_at(const void *address);
/* Keeps the object holding this copy of dlsync mapped for good (once): before a graph or a
   tensor may call back into it after its holder was unloaded. */
void dl_sync__pin_this_copy(void);

/* The thread-exit hook, one per copy of dlsync: make it once (on_exit runs on a thread
   that exits with a value set, and is given it), then set the calling thread's value
   (NULL: nothing to run at its exit); -1 when there is none. When the library holding
   this copy is unloaded, the hook is forgotten, so that no thread runs its code after. */
void dl_sync__thread_exit_make(void (*on_exit)(void *value));
int dl_sync__thread_exit_set(void *value);

/* Lets another thread run (a spin lock's contended wait). */
void dl_sync__yield(void);

/* The calling thread's number in this copy: drawn once per thread, never 0 and never given
   to another thread (an exited thread's thread-locals, and so their addresses, may be a
   new thread's). */
uint64_t dl_sync__thread_number(void);

/* Locks and one-time calls, both initialized statically (DL_SYNC__MUTEX_INIT,
   DL_SYNC__ONCE_INIT): pthreads where there are, the system's own on Windows (a slim
   reader/writer lock held exclusively, a one-time initialization), so that the library
   needs no pthreads library there. dl_sync__mutex_trylock takes the lock only where it is
   free, and says whether it did (1) or not (0). dl_sync__mutex_renew is for a fork child: a
   lock a thread of the parent held at the fork (a thread the child does not have) is made
   anew. */
#ifdef _WIN32
typedef struct dl_sync__mutex {
  void *state; /* an SRWLOCK */
} dl_sync__mutex;
typedef struct dl_sync__once {
  void *state; /* an INIT_ONCE */
} dl_sync__once;
#define DL_SYNC__MUTEX_INIT \
  { 0 }
#define DL_SYNC__ONCE_INIT \
  { 0 }
void dl_sync__mutex_lock(dl_sync__mutex *mutex);
int dl_sync__mutex_trylock(dl_sync__mutex *mutex);
void dl_sync__mutex_unlock(dl_sync__mutex *mutex);
void dl_sync__mutex_renew(dl_sync__mutex *mutex);
void dl_sync__once_run(dl_sync__once *once, void (*function)(void));
#else
#include <pthread.h>
typedef pthread_mutex_t dl_sync__mutex;
typedef pthread_once_t dl_sync__once;
#define DL_SYNC__MUTEX_INIT PTHREAD_MUTEX_INITIALIZER
#define DL_SYNC__ONCE_INIT PTHREAD_ONCE_INIT
static inline void dl_sync__mutex_lock(dl_sync__mutex *mutex) {
  pthread_mutex_lock(mutex);
}
static inline int dl_sync__mutex_trylock(dl_sync__mutex *mutex) {
  return pthread_mutex_trylock(mutex) == 0;
}
static inline void dl_sync__mutex_unlock(dl_sync__mutex *mutex) {
  pthread_mutex_unlock(mutex);
}
static inline void dl_sync__mutex_renew(dl_sync__mutex *mutex) {
  if (dl_sync__mutex_trylock(mutex))
    pthread_mutex_unlock(mutex);
  else
    pthread_mutex_init(mutex, NULL);
}
static inline void dl_sync__once_run(dl_sync__once *once, void (*function)(void)) {
  pthread_once(once, function);
}
#endif

/* Condition variables for a dl_sync__mutex, initialized statically (DL_SYNC__COND_INIT).
   dl_sync__cond_wait waits for a signal, or at most timeout_ms milliseconds (< 0: no
   limit); it may also return early, as both systems' waits may. */
#ifdef _WIN32
typedef struct dl_sync__cond {
  void *state; /* a CONDITION_VARIABLE */
} dl_sync__cond;
#define DL_SYNC__COND_INIT \
  { 0 }
#else
typedef pthread_cond_t dl_sync__cond;
#define DL_SYNC__COND_INIT PTHREAD_COND_INITIALIZER
#endif
void dl_sync__cond_wait(dl_sync__cond *cond, dl_sync__mutex *mutex, int timeout_ms);
void dl_sync__cond_signal(dl_sync__cond *cond);
/* For a fork child, as dl_sync__mutex_renew. */
void dl_sync__cond_renew(dl_sync__cond *cond);

/* A thread of dlsync's own, running run(arg): its handle, or NULL when none could be made;
   joined once. */
void *dl_sync__thread_start(void (*run)(void *arg), void *arg);
void dl_sync__thread_join(void *thread);
/* Releases the handle of a thread that is not in this process: a forked child's copy of
   its parent's. */
void dl_sync__thread_drop(void *thread);

/* Thread-local storage: C11's, or MSVC's own storage class (which has it in every
   version, in DLLs too). */
#if defined(_MSC_VER) && !defined(__clang__)
#define DL_SYNC__THREAD_LOCAL __declspec(thread)
#else
#define DL_SYNC__THREAD_LOCAL _Thread_local
#endif

/* Registers handlers run around fork(): prepare in the parent before, parent and child
   after (any may be NULL). Nothing where processes do not fork. */
void dl_sync__on_fork(void (*prepare)(void), void (*parent)(void), void (*child)(void));

/* The GPU libraries' file names: the CUDA driver's, and the prefixes of the CUDA runtime's
   and HIP's (a framework's copy may carry a version or a hash after it). */
#ifdef _WIN32
#define DL_SYNC__PATHS_HAVE_BACKSLASHES 1
#define DL_SYNC__CUDA_DRIVER_FILE "nvcuda.dll"
#define DL_SYNC__CUDART_FILE_PREFIX "cudart64_"
#define DL_SYNC__HIP_FILE_PREFIX "amdhip64"
#else
#define DL_SYNC__PATHS_HAVE_BACKSLASHES 0
#define DL_SYNC__CUDA_DRIVER_FILE "libcuda.so.1"
#define DL_SYNC__CUDART_FILE_PREFIX "libcudart.so"
#define DL_SYNC__HIP_FILE_PREFIX "libamdhip64"
#endif

#endif /* DL_SYNC_PLATFORM_H_ */
