/* SPDX-License-Identifier: Apache-2.0 */
/* platform.h on POSIX systems: dlfcn, the dynamic loader's object list, pthreads,
   sched_yield and pthread_atfork. */
#ifndef _WIN32
#define _GNU_SOURCE /* dladdr, dlinfo, dl_iterate_phdr, RTLD_NOLOAD, RTLD_NODELETE */
#include "platform.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

void *dl_sync__library_open(const char *file, int only_if_loaded) {
  return dlopen(file, RTLD_NOW | RTLD_LOCAL | (only_if_loaded ? RTLD_NOLOAD : 0));
}

const char *dl_sync__library_error(void) {
  return dlerror();
}

void *dl_sync__library_symbol(void *library, const char *name) {
  return dlsym(library, name);
}

void dl_sync__library_close(void *library) {
  dlclose(library);
}

const char *dl_sync__library_file(void *library) {
  struct link_map *map = NULL;
  return dlinfo(library, RTLD_DI_LINKMAP, &map) == 0 && map != NULL && map->l_name != NULL &&
                 map->l_name[0] != '\0'
             ? map->l_name
             : NULL;
}

typedef struct loaded_visit {
  void (*visit)(const char *file, void *data);
  void *data;
} loaded_visit;

static int visit_loaded_object(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  const loaded_visit *v = data;
  if (info->dlpi_name != NULL && info->dlpi_name[0] != '\0') v->visit(info->dlpi_name, v->data);
  return 0;
}

void dl_sync__each_loaded_file(void (*visit)(const char *file, void *data), void *data) {
  loaded_visit v = {visit, data};
  dl_iterate_phdr(visit_loaded_object, &v);
}

const char *dl_sync__file_at(const void *address) {
  Dl_info info;
  return dladdr(address, &info) != 0 && info.dli_fname != NULL && info.dli_fname[0] != '\0'
             ? info.dli_fname
             : NULL;
}

const char *dl_sync__symbol_starting_at(const void *address) {
  Dl_info info;
  /* dladdr names the nearest exported symbol at or below the address: only an exact start
     counts, so an address inside a function (or in a hidden one placed after it) is never
     taken for that function. */
  return dladdr(address, &info) != 0 && info.dli_sname != NULL && info.dli_saddr == address
             ? info.dli_sname
             : NULL;
}

void dl_sync__pin_object_at(const void *address) {
  const char *file = dl_sync__file_at(address);
  if (file != NULL) dlopen(file, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
}

/* A pthread key: the key's destructor is the hook. Unloading
   this copy (or the process's exit) deletes the key: later thread exits run nothing. */
static pthread_key_t exit_key;
static int exit_key_made;

void dl_sync__thread_exit_make(void (*on_exit)(void *value)) {
  exit_key_made = pthread_key_create(&exit_key, on_exit) == 0;
}

int dl_sync__thread_exit_set(void *value) {
  if (!exit_key_made) return value != NULL ? -1 : 0;
  return pthread_setspecific(exit_key, value) == 0 ? 0 : -1;
}

__attribute__((destructor)) static void forget_thread_exit_key(void) {
  if (exit_key_made) pthread_key_delete(exit_key);
  exit_key_made = 0;
}

void dl_sync__yield(void) {
  sched_yield();
}

void dl_sync__cond_wait(dl_sync__cond *cond, dl_sync__mutex *mutex, int timeout_ms) {
  if (timeout_ms < 0) {
    pthread_cond_wait(cond, mutex);
    return;
  }
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until); /* the clock of a statically initialized condition */
  long nanoseconds = until.tv_nsec + (long)(timeout_ms % 1000) * 1000000L;
  until.tv_sec += timeout_ms / 1000 + nanoseconds / 1000000000L;
  until.tv_nsec = nanoseconds % 1000000000L;
  pthread_cond_timedwait(cond, mutex, &until);
}

void dl_sync__cond_signal(dl_sync__cond *cond) {
  pthread_cond_signal(cond);
}

void dl_sync__cond_renew(dl_sync__cond *cond) {
  pthread_cond_init(cond, NULL);
}

typedef struct started {
  void (*run)(void *arg);
  void *arg;
} started;

static void *run_started(void *arg) {
  started call = *(started *)arg;
  free(arg);
  call.run(call.arg);
  return NULL;
}

void *dl_sync__thread_start(void (*run)(void *arg), void *arg) {
  pthread_t *thread = malloc(sizeof *thread);
  started *call = malloc(sizeof *call);
  if (thread != NULL && call != NULL) {
    *call = (started){run, arg};
    if (pthread_create(thread, NULL, run_started, call) == 0) return thread;
  }
  free(thread);
  free(call);
  return NULL;
}

void dl_sync__thread_join(void *thread) {
  pthread_join(*(pthread_t *)thread, NULL);
  free(thread);
}

void dl_sync__thread_drop(void *thread) {
  free(thread);
}

void dl_sync__on_fork(void (*prepare)(void), void (*parent)(void), void (*child)(void)) {
  pthread_atfork(prepare, parent, child);
}

#else
/* ISO C wants a declaration in every file, this one empty on the other systems. */
typedef int dl_sync__platform_posix_not_built;
#endif /* !_WIN32 */
