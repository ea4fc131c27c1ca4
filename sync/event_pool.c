/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The event pool: per backend, device and context (for runtimes with contexts), events
 * created once with timing disabled and reused for ever. Taking or giving back an event locks the
 * pool and moves a pointer: no allocation and no runtime call (DL_SYNC_BACKEND_QUERY_BEFORE_REUSE
 * backends add one event query).
 *
 * Every live event has a slot reserved in its pool's ring when it is created, so giving
 * one back never allocates and never fails: that is what lets graph user-object
 * destructors, which run where no runtime call is allowed, return events.
 *
 * In front of the pools stand the threads' caches (thread_cache.c), except for a context
 * current to one thread at a time (a CUDA green context): only the thread that has it
 * current can make its events, so they go back to the pool, where every thread finds them.
 *
 * A pool whose events answer a record as gone (its context was reset and kept its
 * identity: cuda.h does not say whether a reset primary context gets a new cuCtxGetId) is
 * dropped, and a fresh one takes its key.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "event_pool.h"
#include "internal.h"

enum { DL_SYNC__MAX_BACKENDS = 16 };

static void lock(spinlock *l) {
  dl_sync__spin_lock(&l->held);
}

static void unlock(spinlock *l) {
  dl_sync__spin_unlock(&l->held);
}

typedef struct pool_set {
  _Atomic(const dl_sync_backend *) backend;
  _Atomic(dl_sync__pool *) pools[DL_SYNC_MAX_DEVICES]; /* per device, newest context first */
} pool_set;

static pool_set pool_sets[DL_SYNC__MAX_BACKENDS];
/* Counts the forks this process's line went through: a pool of another generation is a
   parent's, copied into a forked child, and the child never touches it (its lock may have
   been held by a thread the child does not have). */
static atomic_uint fork_generation;
static void watch_fork(void);

static pool_set *find_set(const dl_sync_backend *backend, int claim) {
  for (size_t i = 0; i < DL_SYNC__MAX_BACKENDS; i++) {
    const dl_sync_backend *owner =
        atomic_load_explicit(&pool_sets[i].backend, memory_order_acquire);
    if (owner == backend) return &pool_sets[i];
    if (owner == NULL && claim) {
      const dl_sync_backend *expected = NULL;
      if (atomic_compare_exchange_strong(&pool_sets[i].backend, &expected, backend) ||
          expected == backend)
        return &pool_sets[i];
    }
  }
  return NULL;
}

static atomic_long pools_allocated; /* made and not freed, of this process's line */

long dl_sync__pools_allocated(void) {
  return atomic_load(&pools_allocated);
}

static dl_sync__pool *pool_new(const dl_sync_backend *backend, DLDevice device, void *context,
                               uint64_t context_id) {
  dl_sync__pool *pool = calloc(1, sizeof *pool);
  if (pool == NULL) return NULL;
  atomic_fetch_add(&pools_allocated, 1);
  pool->backend = backend;
  pool->device = device;
  pool->context = context;
  pool->context_id = context_id;
  pool->generation = atomic_load_explicit(&fork_generation, memory_order_relaxed);
  return pool;
}

/* The pool's own streams (release_watch.c), freed with it. */
static void watches_free(dl_sync__pool *pool) {
  dl_sync__watch *w = atomic_load(&pool->watch);
  while (w != NULL) {
    dl_sync__watch *before = w->before;
    free(w);
    w = before;
  }
}

static void pool_free(dl_sync__pool *pool) {
  atomic_fetch_sub(&pools_allocated, 1);
  watches_free(pool);
  free(pool->ring);
  free(pool);
}

int dl_sync__pool_dropped(const dl_sync__pool *pool) {
  return atomic_load_explicit(&pool->dropped, memory_order_relaxed);
}

void dl_sync__pool_drop(dl_sync__pool *pool) {
  atomic_store(&pool->dropped, 1);
}

int dl_sync__pool_shared_only(const dl_sync__pool *pool) {
  return pool->exclusive;
}

/* Keyed by the context's identity, never its handle: a reset primary context keeps its
   handle and loses its events, and a destroyed context's handle can come back for a new
   one. A pool of a context that is gone is never found again; shutdown forgets it. */
static dl_sync__pool *find_pool(dl_sync__pool *pool, uint64_t context_id) {
  while (pool != NULL && (pool->context_id != context_id || dl_sync__pool_dropped(pool)))
    pool = pool->next;
  return pool;
}

/* The pool of stream's context (identified), made when there is none. */
static int pool_get(dl_sync__guard *guard, const dl_sync__bound *stream, dl_sync__pool **out) {
  const dl_sync_backend *backend = guard->backend;
  DLDevice device = stream->stream.device;
  uint64_t context_id = stream->context_id;
  pool_set *set = find_set(backend, 1);
  if (set == NULL)
    return dl_sync__error(DL_SYNC_ENOMEM,
                          "more than %d distinct backends used: call dl_sync_shutdown() "
                          "before replacing backends",
                          DL_SYNC__MAX_BACKENDS);
  _Atomic(dl_sync__pool *) *slot = &set->pools[device.device_id];
  dl_sync__pool *first = atomic_load_explicit(slot, memory_order_acquire);
  *out = find_pool(first, context_id);
  if (*out != NULL) return DL_SYNC_OK;
  watch_fork(); /* registered at first use: nothing runs at library load */
  int exclusive = 0;
  int status = dl_sync__context_exclusive(guard, stream, &exclusive);
  if (status != DL_SYNC_OK) return status;
  dl_sync__pool *fresh = pool_new(backend, device, stream->context, context_id);
  if (fresh == NULL)
    return dl_sync__error(DL_SYNC_ENOMEM, "cannot allocate the event pool of %s:%d",
                          dl_sync__device_type_name(device.device_type), (int)device.device_id);
  fresh->exclusive = exclusive;
  for (;;) {
    fresh->next = first;
    if (atomic_compare_exchange_strong(slot, &first, fresh)) {
      *out = fresh;
      return DL_SYNC_OK;
    }
    *out = find_pool(first, context_id); /* first is the new head: another thread's pool? */
    if (*out != NULL) {
      pool_free(fresh);
      return DL_SYNC_OK;
    }
  }
}

int dl_sync__pool_for_stream(dl_sync__guard *guard, dl_sync__bound *stream, dl_sync__pool **out) {
  int status = dl_sync__identify(guard, stream);
  return status != DL_SYNC_OK ? status : pool_get(guard, stream, out);
}

static void *ring_pop(dl_sync__pool *pool, int oldest) {
  void *event;
  if (oldest) {
    event = pool->ring[pool->head];
    pool->head = (pool->head + 1) % pool->capacity;
  } else {
    event = pool->ring[(pool->head + pool->count - 1) % pool->capacity];
  }
  pool->count--;
  return event;
}

static void ring_push(dl_sync__pool *pool, void *event) {
  pool->ring[(pool->head + pool->count) % pool->capacity] = event;
  pool->count++;
}

/* Makes room for one more live event; called with the lock held. */
static int ring_reserve(dl_sync__pool *pool) {
  size_t live = (size_t)(pool->created - pool->destroyed);
  if (live < pool->capacity) return 0;
  size_t capacity = pool->capacity != 0 ? pool->capacity * 2 : 16;
  void **ring = malloc(capacity * sizeof *ring);
  if (ring == NULL) return -1;
  /* idle events imply a ring: capacity is not 0 where count is not (the analyzer cannot
     follow the invariant across calls) */
  for (size_t i = 0; i < pool->count; i++)
    ring[i] =
        pool->ring[(pool->head + i) % pool->capacity]; /* NOLINT(clang-analyzer-core.DivideZero) */
  free(pool->ring);
  pool->ring = ring;
  pool->head = 0;
  pool->capacity = capacity;
  return 0;
}

/* Pops an idle event, or returns NULL. */
static void *take_idle(dl_sync__pool *pool, int oldest) {
  lock(&pool->lock);
  void *event = NULL;
  if (pool->count > 0) {
    event = ring_pop(pool, oldest);
    pool->outstanding++;
    pool->acquired++;
  }
  unlock(&pool->lock);
  return event;
}

static int create_event(dl_sync__pool *pool, dl_sync__guard *guard, void **event) {
  const dl_sync_backend *b = pool->backend;
  int status = dl_sync__guard_use_to_create(guard, pool->device, pool->context, pool->context_id,
                                            pool->exclusive);
  if (status != DL_SYNC_OK) return status;
  int code = b->event_create(b->ctx, event);
  if (code != 0) return dl_sync__runtime_error(b, DL_SYNC_OP_EVENT_CREATE, code, pool->device);

  lock(&pool->lock);
  int reserved = ring_reserve(pool);
  if (reserved == 0) {
    pool->created++;
    pool->outstanding++;
    pool->acquired++;
  }
  unlock(&pool->lock);
  if (reserved == 0) return DL_SYNC_OK;
  b->event_destroy(b->ctx, *event);
  return dl_sync__error(DL_SYNC_ENOMEM, "cannot grow the event pool of %s:%d",
                        dl_sync__device_type_name(pool->device.device_type),
                        (int)pool->device.device_id);
}

/* HIP may not re-record a pending event: with DL_SYNC_BACKEND_QUERY_BEFORE_REUSE the oldest
   idle event is handed out only once it is complete; a pending one goes back and a new
   event is made instead. It goes back last: giving it back may free the pool, when
   dl_sync_shutdown retired it meanwhile (from the query's own callback, say). */
int dl_sync__pool_acquire(dl_sync__pool *pool, dl_sync__guard *guard, void **event) {
  const dl_sync_backend *b = pool->backend;
  int query = (b->flags & DL_SYNC_BACKEND_QUERY_BEFORE_REUSE) != 0;
  void *idle = take_idle(pool, query);
  if (idle == NULL) return create_event(pool, guard, event);
  if (!query) {
    *event = idle;
    return DL_SYNC_OK;
  }
  int complete = 0;
  int code = b->event_query(b->ctx, idle, &complete);
  if (code == 0 && complete) {
    *event = idle;
    return DL_SYNC_OK;
  }
  int status = code == 0 ? create_event(pool, guard, event)
                         : dl_sync__runtime_error(b, DL_SYNC_OP_EVENT_QUERY, code, pool->device);
  dl_sync__pool_release(pool, idle);
  return status;
}

/* An event whose record failed goes back; when it was gone, its pool is dropped first. */
static void record_failed(dl_sync__pool *pool, void *event, int gone) {
  if (gone) dl_sync__pool_drop(pool);
  dl_sync__pool_release(pool, event);
}

int dl_sync__pool_acquire_recorded(dl_sync__guard *guard, dl_sync__bound *stream,
                                   dl_sync__pool **pool, void **event) {
  for (int attempt = 0;; attempt++) {
    *event = NULL;
    int status = dl_sync__pool_for_stream(guard, stream, pool);
    if (status == DL_SYNC_OK) status = dl_sync__pool_acquire(*pool, guard, event);
    if (status != DL_SYNC_OK) return status;
    int gone = 0;
    status = dl_sync__record_pooled(guard, *event, stream, attempt == 0 ? &gone : NULL);
    if (status == DL_SYNC_OK) return status;
    /* The pool that just handed out *event is not retired (only dl_sync_shutdown retires
       pools, never during another call), so the acquire freed nothing.
       NOLINTNEXTLINE(clang-analyzer-unix.Malloc) */
    record_failed(*pool, *event, gone);
    *event = NULL;
    if (!gone) return status;
  }
}

/* After dl_sync_shutdown left the pool behind, its events are never handed out again
   (a device reset may have destroyed them): the pool goes with its last one. */
void dl_sync__pool_release(dl_sync__pool *pool, void *event) {
  if (pool->generation != atomic_load_explicit(&fork_generation, memory_order_relaxed))
    return; /* a forked child's copy of a parent's pool: its event is the parent's */
  lock(&pool->lock);
  pool->outstanding--;
  if (!pool->retired) {
    ring_push(pool, event);
    unlock(&pool->lock);
    return;
  }
  int last = pool->outstanding == 0;
  unlock(&pool->lock);
  if (last) pool_free(pool);
}

/* Gives a thread cache's events and its count of borrows back to pool (thread_cache.c;
   the caller holds the caches' lock). No runtime call: safe in a thread's exit. */
void dl_sync__pool_take_back(dl_sync__pool *pool, void *const *events, unsigned count,
                             uint64_t acquired) {
  lock(&pool->lock);
  for (unsigned i = 0; i < count; i++) ring_push(pool, events[i]);
  pool->outstanding -= count;
  pool->acquired += acquired;
  unlock(&pool->lock);
}

/* --- what statistics and shutdown ask of the pools (lifecycle.c) --------------------- */

dl_sync__pool *dl_sync__pools_of(const dl_sync_backend *backend, int32_t device_id) {
  pool_set *set = find_set(backend, 0);
  return set != NULL ? atomic_load(&set->pools[device_id]) : NULL;
}

void dl_sync__pool_add_stats(dl_sync__pool *pool, uint64_t cached, uint64_t cached_acquired,
                             dl_sync_pool_stats *out) {
  if (dl_sync__pool_dropped(pool)) return; /* its events died with its context */
  /* Events in thread caches are idle, not outstanding, as if they were in the pool. */
  lock(&pool->lock);
  out->created += pool->created;
  out->destroyed += pool->destroyed;
  out->idle += pool->count + cached;
  out->outstanding += pool->outstanding - cached;
  out->acquired += pool->acquired + cached_acquired;
  unlock(&pool->lock);
}

/* Whether pool's context is still the one its events were made in: a context destroyed
   or reset since (another framework released a primary context's last reference) took
   them with it, and destroying them again would act on dead handles. */
static int context_alive(const dl_sync_backend *b, void *context, uint64_t context_id) {
  uint64_t now = 0;
  return b->context_id == NULL || (b->context_id(b->ctx, context, &now) == 0 && now == context_id);
}

/* A pool found gone is dropped: its context, perhaps destroyed (its handle dead), is asked
   about once, never again by a later release or by dl_sync_shutdown. */
int dl_sync__pool_alive(dl_sync__pool *pool) {
  if (dl_sync__pool_dropped(pool)) return 0;
  if (context_alive(pool->backend, pool->context, pool->context_id)) return 1;
  dl_sync__pool_drop(pool);
  return 0;
}

/* Claims the destruction of w, the pool's own stream: its handle, once (NULL when it was
   claimed or found gone before: a device reset may have destroyed it). */
static void *own_stream_claim(dl_sync__watch *w) {
  return atomic_exchange(&w->gone, 1) ? NULL : w->stream;
}

/* Destroys a claimed own stream of b's device (alive: its context still is). */
static int own_stream_destroy(const dl_sync_backend *b, DLDevice device, void *stream, int alive) {
  int code = stream != NULL && alive ? b->own_stream_destroy(b->ctx, stream) : 0;
  return code == 0 ? DL_SYNC_OK
                   : dl_sync__runtime_error(b, DL_SYNC_OP_OWN_STREAM_DESTROY, code, device);
}

/* The pool's own stream goes with dl_sync_shutdown, or, while releases still wait on it (a
   capture refused their question), with the last of them (dl_sync__watch_let_go): whichever
   of the two sees the other's mark claims it (sequentially consistent, so one does). Under
   the pool's lock, which keeps the pool (and w) from being freed meanwhile: the claimed
   stream is destroyed after it, with no lock held. */
static void *own_stream_retire(dl_sync__pool *pool) {
  dl_sync__watch *w = atomic_load(&pool->watch);
  if (w == NULL) return NULL;
  atomic_store(&w->retired, 1);
  return atomic_load(&w->waiting) == 0 ? own_stream_claim(w) : NULL;
}

void dl_sync__watch_hold(dl_sync__watch *w) {
  atomic_fetch_add(&w->waiting, 1);
}

/* Called while the release's event is out: pool and w stay allocated. */
void dl_sync__watch_let_go(dl_sync__pool *pool, dl_sync__watch *w) {
  if (atomic_fetch_sub(&w->waiting, 1) == 1 && atomic_load(&w->retired))
    (void)own_stream_destroy(pool->backend, pool->device, own_stream_claim(w),
                             dl_sync__pool_alive(pool)); /* a poll reports nothing */
}

/* Retires pool and destroys its idle events. They are taken out under its lock and
   destroyed with none held, so that a graph's user-object destructor giving an event back
   (on the driver's thread, which "should avoid blocking") never waits on the runtime.
   Returns the first failure's status in *status, and whether the pool may be freed now
   (else its last outstanding event frees it: dl_sync__pool_release). */
static int drain(dl_sync__pool *pool, int *status) {
  const dl_sync_backend *b = pool->backend;
  DLDevice device = pool->device;
  int alive = dl_sync__pool_alive(pool);
  lock(&pool->lock);
  void **ring = pool->ring;
  size_t head = pool->head, count = pool->count, capacity = pool->capacity;
  pool->count = 0;
  pool->destroyed += count;
  pool->retired = 1; /* no event is put in the ring again */
  int unused = pool->outstanding == 0;
  /* With events still out, a graph may free the pool from here on: the ring leaves it. */
  if (!unused) pool->ring = NULL;
  void *own = own_stream_retire(pool);
  unlock(&pool->lock);
  for (size_t i = 0; i < count && alive; i++) {
    int code = b->event_destroy(b->ctx, ring[(head + i) % capacity]);
    if (code != 0 && *status == DL_SYNC_OK)
      *status = dl_sync__runtime_error(b, DL_SYNC_OP_EVENT_DESTROY, code, device);
  }
  if (!unused) free(ring);
  int watch = own_stream_destroy(b, device, own, alive);
  if (*status == DL_SYNC_OK) *status = watch;
  return unused;
}

int dl_sync__pools_drain_all(void) {
  int status = DL_SYNC_OK;
  for (size_t i = 0; i < DL_SYNC__MAX_BACKENDS; i++) {
    pool_set *set = &pool_sets[i];
    if (atomic_load(&set->backend) == NULL) continue;
    for (size_t d = 0; d < DL_SYNC_MAX_DEVICES; d++) {
      dl_sync__pool *pool = atomic_exchange(&set->pools[d], NULL);
      while (pool != NULL) {
        dl_sync__pool *next = pool->next;
        if (drain(pool, &status)) pool_free(pool);
        pool = next;
      }
    }
    atomic_store(&set->backend, NULL);
  }
  return status;
}

/* In a child after fork() the parent's events mean nothing (a runtime does not carry
   over), and a pool's lock may have been held by a thread that the child does not have:
   the child forgets every pool without touching it (a tensor deleted in the child gives
   its event to no pool: see dl_sync__pool_release); the thread caches forget theirs
   (thread_cache.c). The handler runs on the child's only thread, the one that forked. */
static void forget_pools_in_child(void) {
  atomic_fetch_add(&fork_generation, 1);
  for (size_t i = 0; i < DL_SYNC__MAX_BACKENDS; i++) {
    for (size_t d = 0; d < DL_SYNC_MAX_DEVICES; d++) atomic_store(&pool_sets[i].pools[d], NULL);
    atomic_store(&pool_sets[i].backend, NULL);
  }
}

static void register_fork_handler(void) {
  dl_sync__on_fork(NULL, NULL, forget_pools_in_child);
}

static void watch_fork(void) {
  static dl_sync__once once = DL_SYNC__ONCE_INIT;
  dl_sync__once_run(&once, register_fork_handler);
}
