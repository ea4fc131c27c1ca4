/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Thread creation and join as happens-before edges, as ThreadSanitizer's interceptors make
 * them. The simulator's libraries define pthread_create and pthread_join, which call the
 * definitions they stand in front of (the C library's, or a sanitizer's):
 *
 * - pthread_create hands the new thread what its creator knew (the creator's host clock,
 *   or what the creator itself inherited); the thread's host agent starts from it when it
 *   first uses the simulator. What the creator does afterwards is not included.
 * - A thread created so files its clock when it exits (a pthread key destructor, so that
 *   pthread_exit and cancellation count too); pthread_join, once the next definition has
 *   returned, orders the joining thread after that clock.
 *
 * The shared library's definitions interpose on the C library's for the whole process
 * when the program links dlsync_sim; the static library's are hidden and serve the
 * program (or shared object) it is linked into. Both are weak: a sanitizer runtime linked
 * into the same program keeps its own, and in the shared case calls these next.
 *
 * dl_sync_sim_thread_create and dl_sync_sim_thread_join make the same edges without
 * interposition: Windows has none (there the simulator's own threads are made by the C
 * library's pthread_create, winpthreads'), and a sanitized static copy leaves the
 * program's definitions alone.
 */
#ifndef _WIN32
#define _GNU_SOURCE /* RTLD_NEXT, RTLD_DEFAULT */
#include <dlfcn.h>
#endif
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

/* A static copy built with a sanitizer leaves the program's definitions alone: linked into
   the same program, the sanitizer's must stay the ones every thread is created through
   (it registers each thread, whose stack its leak checker scans). */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer) || __has_feature(hwaddress_sanitizer)
#define DL_SYNC__SIM_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DL_SYNC__SIM_SANITIZED 1
#endif
#if !defined(_WIN32) && (defined(DL_SYNC_BUILDING_SHARED) || !defined(DL_SYNC__SIM_SANITIZED))
#define DL_SYNC__SIM_INTERCEPTS 1
#endif

typedef int create_fn(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
typedef int join_fn(pthread_t, void **);

/* What an exited thread knew, for its join: its host agent's clock (read at the join: only
   the thread itself advanced it), else what it inherited at birth. */
struct sim_thread_exit {
  pthread_t thread;
  uint64_t serial;     /* filing order */
  uint64_t generation; /* of what it knew (0: nothing); stale after a reset */
  int agent;           /* its host agent, or -1: clock below */
  sim_clock clock;
  struct sim_thread_exit *next;
};

/* Records filed by exiting threads, not yet taken into dl_sync__sim.thread_exits: a
   thread's exit hook takes no lock of the simulator's, which creates threads (stream
   workers, created threads) with its lock held. winpthreads runs key destructors
   (_pthread_cleanup_dest) holding a lock that its pthread_create waits for
   (pop_pthread_mem): a backtrace of the deadlock under Wine, mingw-w64 winpthreads as
   Debian 12 ships it. */
static struct sim_thread_exit *_Atomic filed;
static _Atomic uint64_t filings;

#if defined(DL_SYNC__SIM_INTERCEPTS)
static create_fn *next_create;
static join_fn *next_join;
#endif
/* The births of the threads created, freed by the creation after their thread exits
   (lock held): a forked child, which has none of its parent's other threads, still
   reaches theirs. */
static sim_birth *births;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t birth_key;
static int key_made;

/* The definition the simulator's stands in front of. The shared library's interpose on
   the process's (a sanitizer's interceptor calls them in turn): the next definition after
   the library, the C library's. The static library's are hidden and stand in for the
   process's definition only in the program or shared object they are linked into: the
   process's own (a sanitizer's or the C library's), which a default lookup finds since
   hidden definitions are not in it. */
#if defined(DL_SYNC__SIM_INTERCEPTS)
#ifndef DL_SYNC_BUILDING_SHARED
/* A fully static executable has no dynamic section, so nothing can be looked up at run
   time: linking the static library into one fails on this reference instead, and the
   linker's message names this function. */
extern char _DYNAMIC[];
__attribute__((noinline)) static const void *
dl_sync_sim_static_library_needs_a_dynamically_linked_program(void) {
  const void *section = _DYNAMIC;
  __asm__("" : "+r"(section)); /* opaque: the compiler may not take it for non-null */
  return section;
}
#endif

static void next_symbol(const char *name, void *function_pointer, size_t size) {
#ifdef DL_SYNC_BUILDING_SHARED
  void *symbol = dlsym(RTLD_NEXT, name);
#else
  void *symbol = dl_sync_sim_static_library_needs_a_dynamically_linked_program() != NULL
                     ? dlsym(RTLD_DEFAULT, name)
                     : NULL;
#endif
  if (symbol == NULL) {
    const char *why = dlerror();
    /* A static PIE has a dynamic section but no dynamic loader to search. */
    fprintf(stderr,
            "dlsync_sim: no %s after the simulator's: %s (the simulated device finds the C "
            "library's at run time, which a fully static executable cannot: link the "
            "program dynamically)\n",
            name, why ? why : "?");
    abort();
  }
  /* POSIX makes dlsym's object pointer a function's; ISO C converts neither way. */
  memcpy(function_pointer, &symbol, size);
}
#endif

static _Thread_local int own_thread_call;

void dl_sync__sim_own_thread_call(int own) {
  own_thread_call = own;
}

#if defined(DL_SYNC__SIM_INTERCEPTS)
static int next_pthread_create(pthread_t *thread, const pthread_attr_t *attr,
                               void *(*start)(void *), void *arg) {
  create_fn *create = __atomic_load_n(&next_create, __ATOMIC_ACQUIRE);
  if (create == NULL) {
    next_symbol("pthread_create", &create, sizeof create);
    __atomic_store_n(&next_create, create, __ATOMIC_RELEASE);
  }
  return create(thread, attr, start, arg);
}

static int next_pthread_join(pthread_t thread, void **result) {
  join_fn *join = __atomic_load_n(&next_join, __ATOMIC_ACQUIRE);
  if (join == NULL) {
    next_symbol("pthread_join", &join, sizeof join);
    __atomic_store_n(&next_join, join, __ATOMIC_RELEASE);
  }
  return join(thread, result);
}
#endif

/* The calling thread's birth, when it was created through pthread_create below (NULL
   in the key's destructor, which is passed it). */
static const sim_birth *own_birth(void) {
  return key_made ? pthread_getspecific(birth_key) : NULL;
}

/* The calling host thread's agent; stale when its generation differs from
   dl_sync__sim.generation. */
static _Thread_local struct {
  uint64_t generation;
  int agent; /* -1: none yet */
} host;

static void refresh_host(void) {
  if (host.generation == dl_sync__sim.generation) return;
  host.generation = dl_sync__sim.generation;
  host.agent = -1;
}

/* A new host agent's clock starts from what its thread inherited at its creation. */
static void inherit(sim_clock *clock) {
  const sim_birth *birth = own_birth();
  if (birth != NULL && birth->generation == dl_sync__sim.generation)
    dl_sync__sim_clock_join(clock, &birth->clock);
}

int dl_sync__sim_host_agent(sim_clock **clock) {
  refresh_host();
  if (host.agent < 0) {
    int agent = dl_sync__sim_new_agent();
    if (agent < 0) return -1;
    dl_sync__sim.host_clocks[agent] = calloc(1, sizeof(sim_clock));
    if (dl_sync__sim.host_clocks[agent] == NULL) return -1;
    host.agent = agent;
    inherit(dl_sync__sim.host_clocks[agent]);
  }
  *clock = dl_sync__sim.host_clocks[host.agent];
  return host.agent;
}

/* The calling thread's agent without making one: -1 when it has none since the last reset. */
static int existing_host_agent(sim_clock **clock) {
  refresh_host();
  if (host.agent >= 0) *clock = dl_sync__sim.host_clocks[host.agent];
  return host.agent;
}

/* What the calling thread knows (lock held): its host clock, else what it inherited at
   birth if nothing reset the simulator since; NULL when nothing. */
static const sim_clock *knowledge(const sim_birth *birth) {
  sim_clock *clock = NULL;
  if (existing_host_agent(&clock) >= 0) return clock;
  return birth != NULL && birth->generation == dl_sync__sim.generation ? &birth->clock : NULL;
}

/* The key's destructor: the thread is exiting; what it knew waits for pthread_join. No
   lock (see filed); a record that cannot be allocated leaves the join without its edge. */
static void thread_exit(void *object) {
  sim_birth *birth = object;
  struct sim_thread_exit *record = malloc(sizeof *record);
  if (record != NULL) {
    record->thread = pthread_self();
    record->agent = -1;
    record->generation = 0;
    if (host.generation != 0 && host.agent >= 0) {
      record->agent = host.agent;
      record->generation = host.generation;
    } else if (birth != NULL && birth->generation != 0) {
      record->clock = birth->clock;
      record->generation = birth->generation;
    }
    record->serial = atomic_fetch_add(&filings, 1);
    record->next = atomic_load(&filed);
    while (!atomic_compare_exchange_weak(&filed, &record->next, record)) continue;
  }
  if (birth != NULL) atomic_store(&birth->exited, 1); /* its last use here */
}

/* Frees the births of the threads that exited (lock held). */
static void free_exited_births(void) {
  for (sim_birth **at = &births; *at != NULL;) {
    sim_birth *birth = *at;
    if (atomic_load(&birth->exited)) {
      *at = birth->next;
      free(birth);
    } else {
      at = &birth->next;
    }
  }
}

static void make_key(void) {
  key_made = pthread_key_create(&birth_key, thread_exit) == 0;
}

/* The library is unloaded (or the process exits): threads that live on must not run
   thread_exit, whose code goes away with it. */
__attribute__((destructor)) static void forget_key(void) {
  if (key_made) pthread_key_delete(birth_key);
  key_made = 0;
}

/* The records filed since, into dl_sync__sim.thread_exits (lock held). */
static void take_filed(void) {
  struct sim_thread_exit *record = atomic_exchange(&filed, NULL);
  while (record != NULL) {
    struct sim_thread_exit *next = record->next;
    record->next = dl_sync__sim.thread_exits;
    dl_sync__sim.thread_exits = record;
    record = next;
  }
}

/* Removes and returns thread's record filed last before serial (UINT64_MAX: any), or NULL
   (lock held). */
static struct sim_thread_exit *take_exit(pthread_t thread, uint64_t before) {
  take_filed();
  struct sim_thread_exit **last = NULL;
  for (struct sim_thread_exit **link = &dl_sync__sim.thread_exits; *link != NULL;
       link = &(*link)->next)
    if (pthread_equal((*link)->thread, thread) && (*link)->serial < before &&
        (last == NULL || (*link)->serial > (*last)->serial))
      last = link;
  if (last == NULL) return NULL;
  struct sim_thread_exit *record = *last;
  *last = record->next;
  return record;
}

/* What record says its thread knew, or NULL: nothing, or stale (lock held). */
static const sim_clock *exit_knowledge(const struct sim_thread_exit *record) {
  if (record->generation != dl_sync__sim.generation) return NULL;
  return record->agent >= 0 ? dl_sync__sim.host_clocks[record->agent] : &record->clock;
}

void dl_sync__sim_thread_exits_free(void) {
  take_filed();
  while (dl_sync__sim.thread_exits != NULL) {
    struct sim_thread_exit *next = dl_sync__sim.thread_exits->next;
    free(dl_sync__sim.thread_exits);
    dl_sync__sim.thread_exits = next;
  }
}

/* A creation with its edge: create is the definition that makes the thread. */
static int create_with_edges(create_fn *create, pthread_t *thread, const pthread_attr_t *attr,
                             void *(*start)(void *), void *arg) {
  pthread_once(&key_once, make_key);
  sim_birth *birth = key_made ? malloc(sizeof *birth) : NULL;
  /* Records of earlier threads with the new thread's id are dropped once it is known: those
     filed before the creation began (the new thread's own comes later). */
  uint64_t before = atomic_load(&filings);
  pthread_mutex_lock(&dl_sync__sim.lock);
  if (birth != NULL) {
    birth->start = start;
    birth->arg = arg;
    birth->key = birth_key;
    birth->generation = 0;
    atomic_init(&birth->exited, 0);
    /* A copy: what this thread does next is not handed over (each of its accesses
       advances its own component first). */
    const sim_clock *known = knowledge(own_birth());
    if (known != NULL) {
      birth->clock = *known;
      birth->generation = dl_sync__sim.generation;
    }
  }
  /* Without memory for the birth the thread is made without the edges (stricter). */
  int error = birth != NULL ? create(thread, attr, dl_sync__sim_thread_start, birth)
                            : create(thread, attr, start, arg);
  for (struct sim_thread_exit *stale; error == 0 && (stale = take_exit(*thread, before)) != NULL;)
    free(stale);
  free_exited_births();
  if (error == 0 && birth != NULL) {
    birth->next = births;
    births = birth;
  }
  pthread_mutex_unlock(&dl_sync__sim.lock);
  if (error != 0) free(birth);
  return error;
}

/* A join with its edge: join is the definition that joins. */
static int join_with_edges(join_fn *join, pthread_t thread, void **result) {
  int error = join(thread, result);
  if (error != 0) return error;
  pthread_mutex_lock(&dl_sync__sim.lock);
  struct sim_thread_exit *record = take_exit(thread, UINT64_MAX);
  const sim_clock *known = record != NULL ? exit_knowledge(record) : NULL;
  sim_clock *clock = NULL;
  if (known != NULL && dl_sync__sim_host_agent(&clock) >= 0) dl_sync__sim_clock_join(clock, known);
  pthread_mutex_unlock(&dl_sync__sim.lock);
  free(record);
  return 0;
}

#if defined(DL_SYNC__SIM_INTERCEPTS)
DL_SYNC_API __attribute__((weak)) int pthread_create(pthread_t *thread, const pthread_attr_t *attr,
                                                     void *(*start)(void *), void *arg) {
  if (own_thread_call) return next_pthread_create(thread, attr, start, arg);
  return create_with_edges(next_pthread_create, thread, attr, start, arg);
}

DL_SYNC_API __attribute__((weak)) int pthread_join(pthread_t thread, void **result) {
  if (own_thread_call) return next_pthread_join(thread, result);
  return join_with_edges(next_pthread_join, thread, result);
}
#endif

/* The process's definitions, from the top: a sanitizer's interceptor sees the thread too.
   Where the simulator's own come next, they only pass the call on (own_thread_call). */
static int process_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *),
                          void *arg) {
  int own = own_thread_call;
  own_thread_call = 1;
  int error = pthread_create(thread, attr, start, arg);
  own_thread_call = own;
  return error;
}

static int process_join(pthread_t thread, void **result) {
  int own = own_thread_call;
  own_thread_call = 1;
  int error = pthread_join(thread, result);
  own_thread_call = own;
  return error;
}

/* The same edges where no definition can be interposed on (Windows, a sanitized static
   copy), or for a program that wants them explicit. */
int dl_sync_sim_thread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *),
                              void *arg) {
  return create_with_edges(process_create, thread, attr, start, arg);
}

int dl_sync_sim_thread_join(pthread_t thread, void **result) {
  return join_with_edges(process_join, thread, result);
}
