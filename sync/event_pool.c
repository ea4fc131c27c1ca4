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
 * In front of the pools, each thread keeps a few idle events per pool (the thread cache),
 * so that threads pushing dependencies on one device do not contend for its pool's lock:
 * in steady state a dependency takes no lock at all.
 * Only events borrowed and given back within one call go through it; a thread's cache
 * returns to the pools when the thread exits (the platform's thread-exit hook, which makes no
 * runtime call) and at dl_sync_shutdown. Backends that query before reuse bypass it: the
 * pool alone knows which idle event is the oldest.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

enum { DL_SYNC__MAX_BACKENDS = 16 };

typedef struct spinlock {
  atomic_bool held;
} spinlock;

static void lock(spinlock *l) {
  dl_sync__spin_lock(&l->held);
}

static void unlock(spinlock *l) {
  dl_sync__spin_unlock(&l->held);
}

struct dl_sync__pool {
  spinlock lock;
  const dl_sync_backend *backend;
  DLDevice device;
  void *context;       /* NULL for backends without contexts */
  uint64_t context_id; /* its identity: the key (0 without contexts) */
  dl_sync__pool *next; /* the device's other pools (other contexts); set once */
  unsigned generation; /* fork_generation when made: a child's pools are its own */
  int retired;         /* left behind by dl_sync_shutdown, under lock */
  void **ring;         /* idle events, oldest at head */
  size_t head, count, capacity;
  uint64_t created, destroyed, outstanding, acquired;
};

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

static void pool_free(dl_sync__pool *pool) {
  atomic_fetch_sub(&pools_allocated, 1);
  free(pool->ring);
  free(pool);
}

/* Keyed by the context's identity, never its handle: a reset primary context keeps its
   handle and loses its events, and a destroyed context's handle can come back for a new
   one. A pool of a context that is gone is never found again; shutdown forgets it. */
static dl_sync__pool *find_pool(dl_sync__pool *pool, uint64_t context_id) {
  while (pool != NULL && pool->context_id != context_id) pool = pool->next;
  return pool;
}

int dl_sync__pool_get(const dl_sync_backend *backend, DLDevice device, void *context,
                      uint64_t context_id, dl_sync__pool **out) {
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
  dl_sync__pool *fresh = pool_new(backend, device, context, context_id);
  if (fresh == NULL)
    return dl_sync__error(DL_SYNC_ENOMEM, "cannot allocate the event pool of %s:%d",
                          dl_sync__device_type_name(device.device_type), (int)device.device_id);
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
  return status != DL_SYNC_OK ? status
                              : dl_sync__pool_get(guard->backend, stream->stream.device,
                                                  stream->context, stream->context_id, out);
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
  for (size_t i = 0; i < pool->count; i++) ring[i] = pool->ring[(pool->head + i) % pool->capacity];
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
  int status = dl_sync__guard_use(guard, pool->device, pool->context);
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

/* --- the thread cache ------------------------------------------------------------- */

/* A thread rarely works with more than a few devices at once, and it borrows one event
   at a time (returned before the next is borrowed), so one idle event per pool is the
   steady state; a spare slot keeps a return from ever needing the pool's lock. */
enum { DL_SYNC__CACHE_POOLS = 4, DL_SYNC__CACHE_EVENTS = 2 };

/* Idle events of one pool. The owning thread is the only writer while it lives; stats
   read pool, count and acquired from other threads, hence the atomics (relaxed: a
   snapshot). events is read by other threads only at shutdown, which callers keep apart
   from every other dlsync call. */
typedef struct cache_slot {
  _Atomic(dl_sync__pool *) pool;
  atomic_uint count;
  atomic_uint_fast64_t acquired; /* borrows served here, not yet counted by the pool */
  void *events[DL_SYNC__CACHE_EVENTS];
} cache_slot;

/* Aligned to a cache line so that no two threads' caches share one. A cache lives in
   the thread's own storage: nothing to free, so a thread that outlives the library
   holding dlsync (dlclose) leaves nothing behind. */
enum { CACHE_NONE, CACHE_LIVE, CACHE_GONE };
typedef struct thread_cache {
  _Alignas(64) struct thread_cache *prev, *next; /* all live caches, under caches_lock */
  unsigned state;                                /* CACHE_*; GONE once its thread exits */
  unsigned next_victim;
  cache_slot slots[DL_SYNC__CACHE_POOLS];
} thread_cache;

static dl_sync__mutex caches_lock = DL_SYNC__MUTEX_INIT;
static thread_cache *caches;
static DL_SYNC__THREAD_LOCAL thread_cache this_thread;

#define DL_SYNC__RELAXED memory_order_relaxed

void (*dl_sync__cache_flush_hook)(void);

/* Gives the slot's events and its count of borrows to its pool and unbinds it. No runtime
   call: safe in a thread's exit. The caller holds caches_lock: statistics never see the
   events in the pool and in the slot at once. */
static void slot_flush(cache_slot *slot) {
  dl_sync__pool *pool = atomic_load_explicit(&slot->pool, DL_SYNC__RELAXED);
  if (pool == NULL) return;
  unsigned count = atomic_load_explicit(&slot->count, DL_SYNC__RELAXED);
  lock(&pool->lock);
  for (unsigned i = 0; i < count; i++) ring_push(pool, slot->events[i]);
  pool->outstanding -= count;
  pool->acquired += atomic_load_explicit(&slot->acquired, DL_SYNC__RELAXED);
  unlock(&pool->lock);
  if (dl_sync__cache_flush_hook != NULL) dl_sync__cache_flush_hook();
  atomic_store_explicit(&slot->count, 0, DL_SYNC__RELAXED);
  atomic_store_explicit(&slot->acquired, 0, DL_SYNC__RELAXED);
  atomic_store_explicit(&slot->pool, NULL, DL_SYNC__RELAXED);
}

/* The thread-exit hook: the thread is exiting. A dlsync call from a later
   destructor of the same thread goes to the pools directly. */
static void cache_destroy(void *object) {
  thread_cache *cache = object;
  dl_sync__mutex_lock(&caches_lock);
  if (cache->prev != NULL)
    cache->prev->next = cache->next;
  else
    caches = cache->next;
  if (cache->next != NULL) cache->next->prev = cache->prev;
  for (size_t i = 0; i < DL_SYNC__CACHE_POOLS; i++) slot_flush(&cache->slots[i]);
  dl_sync__mutex_unlock(&caches_lock);
  cache->state = CACHE_GONE;
}

/* Made once, at the first thread's first use. When the library holding this copy is
   unloaded (or the process exits), the platform forgets the key: threads that live on
   must not run cache_destroy, whose code goes away with it, and their events are left to
   the runtime. */
static void make_cache_key(void) {
  dl_sync__thread_exit_make(cache_destroy);
}

/* The thread's first use: its cache joins the list. */
DL_SYNC__COLD static thread_cache *new_cache(thread_cache *cache) {
  if (cache->state == CACHE_GONE) return NULL;
  static dl_sync__once once = DL_SYNC__ONCE_INIT;
  dl_sync__once_run(&once, make_cache_key);
  if (dl_sync__thread_exit_set(cache) != 0) return NULL;
  dl_sync__mutex_lock(&caches_lock);
  cache->prev = NULL;
  cache->next = caches;
  if (caches != NULL) caches->prev = cache;
  caches = cache;
  dl_sync__mutex_unlock(&caches_lock);
  cache->state = CACHE_LIVE;
  return cache;
}

/* This thread's cache, or NULL when none can be made (the pools then serve directly). */
static thread_cache *cache_of_this_thread(void) {
  thread_cache *cache = &this_thread;
  return cache->state == CACHE_LIVE ? cache : new_cache(cache);
}

/* A free slot of cache for pool, flushing one in turn when all are bound. */
DL_SYNC__COLD static cache_slot *bind_slot(thread_cache *cache, dl_sync__pool *pool) {
  cache_slot *unbound = NULL;
  for (size_t i = 0; i < DL_SYNC__CACHE_POOLS && unbound == NULL; i++)
    if (atomic_load_explicit(&cache->slots[i].pool, DL_SYNC__RELAXED) == NULL)
      unbound = &cache->slots[i];
  if (unbound == NULL) { /* more pools than slots: the bound ones give way in turn */
    unbound = &cache->slots[cache->next_victim++ % DL_SYNC__CACHE_POOLS];
    dl_sync__mutex_lock(&caches_lock); /* stats see the events in one place or the other */
    slot_flush(unbound);
    dl_sync__mutex_unlock(&caches_lock);
  }
  atomic_store_explicit(&unbound->pool, pool, DL_SYNC__RELAXED);
  return unbound;
}

/* The slot of this thread bound to the pool of (backend, device, context identity), or
   NULL. */
static cache_slot *bound_slot(thread_cache *cache, const dl_sync_backend *backend,
                              int32_t device_id, uint64_t context_id) {
  for (size_t i = 0; i < DL_SYNC__CACHE_POOLS; i++) {
    dl_sync__pool *pool = atomic_load_explicit(&cache->slots[i].pool, DL_SYNC__RELAXED);
    if (pool != NULL && pool->backend == backend && pool->device.device_id == device_id &&
        pool->context_id == context_id)
      return &cache->slots[i];
  }
  return NULL;
}

int dl_sync__pool_borrow(const dl_sync_backend *backend, DLDevice device, void *context,
                         uint64_t context_id, dl_sync__guard *guard, dl_sync__borrowed *out) {
  out->slot = NULL;
  thread_cache *cache =
      (backend->flags & DL_SYNC_BACKEND_QUERY_BEFORE_REUSE) == 0 ? cache_of_this_thread() : NULL;
  cache_slot *slot =
      cache != NULL ? bound_slot(cache, backend, device.device_id, context_id) : NULL;
  unsigned count = slot != NULL ? atomic_load_explicit(&slot->count, DL_SYNC__RELAXED) : 0;
  if (count != 0) { /* the steady state: no lock, no pool lookup */
    out->event = slot->events[count - 1];
    out->pool = atomic_load_explicit(&slot->pool, DL_SYNC__RELAXED);
    out->slot = slot;
    atomic_store_explicit(&slot->count, count - 1, DL_SYNC__RELAXED);
    uint_fast64_t acquired = atomic_load_explicit(&slot->acquired, DL_SYNC__RELAXED);
    atomic_store_explicit(&slot->acquired, acquired + 1, DL_SYNC__RELAXED);
    return DL_SYNC_OK;
  }
  int status = dl_sync__pool_get(backend, device, context, context_id, &out->pool);
  if (status == DL_SYNC_OK) status = dl_sync__pool_acquire(out->pool, guard, &out->event);
  if (status == DL_SYNC_OK && cache != NULL)
    out->slot = slot != NULL ? slot : bind_slot(cache, out->pool);
  return status;
}

void dl_sync__pool_return(const dl_sync__borrowed *borrowed) {
  cache_slot *slot = borrowed->slot;
  unsigned count =
      slot != NULL ? atomic_load_explicit(&slot->count, DL_SYNC__RELAXED) : DL_SYNC__CACHE_EVENTS;
  if (count == DL_SYNC__CACHE_EVENTS) {
    dl_sync__pool_release(borrowed->pool, borrowed->event);
    return;
  }
  slot->events[count] = borrowed->event;
  atomic_store_explicit(&slot->count, count + 1, DL_SYNC__RELAXED);
}

/* What the thread caches hold for pool: idle events and borrows not yet counted. The
   caller holds caches_lock, so no event moves between a cache and the pool meanwhile. */
static void cached_for(dl_sync__pool *pool, uint64_t *idle, uint64_t *acquired) {
  *idle = *acquired = 0;
  for (thread_cache *cache = caches; cache != NULL; cache = cache->next)
    for (size_t i = 0; i < DL_SYNC__CACHE_POOLS; i++) {
      cache_slot *slot = &cache->slots[i];
      if (atomic_load_explicit(&slot->pool, DL_SYNC__RELAXED) != pool) continue;
      *idle += atomic_load_explicit(&slot->count, DL_SYNC__RELAXED);
      *acquired += atomic_load_explicit(&slot->acquired, DL_SYNC__RELAXED);
    }
}

/* Every thread's cache back to the pools; caller holds caches_lock. */
static void flush_all_caches(void) {
  for (thread_cache *cache = caches; cache != NULL; cache = cache->next)
    for (size_t i = 0; i < DL_SYNC__CACHE_POOLS; i++) slot_flush(&cache->slots[i]);
}

/* --- statistics and shutdown ------------------------------------------------------- */

/* Adds pool's counters to out; the caller holds caches_lock. */
static void add_stats(dl_sync__pool *pool, dl_sync_pool_stats *out) {
  /* Events in thread caches are idle, not outstanding, as if they were in the pool. */
  uint64_t cached = 0, cached_acquired = 0;
  cached_for(pool, &cached, &cached_acquired);
  lock(&pool->lock);
  out->created += pool->created;
  out->destroyed += pool->destroyed;
  out->idle += pool->count + cached;
  out->outstanding += pool->outstanding - cached;
  out->acquired += pool->acquired + cached_acquired;
  unlock(&pool->lock);
}

int dl_sync_pool_stats_get(const dl_sync_backend *backend, int32_t device_id,
                           dl_sync_pool_stats *out) {
  static const char *const func = "dl_sync_pool_stats_get";
  if (backend == NULL || out == NULL)
    return dl_sync__named(
        func, dl_sync__error(DL_SYNC_EINVAL, "backend (%p) and out (%p) must not be NULL",
                             (const void *)backend, (void *)out));
  if (device_id < 0 || device_id >= DL_SYNC_MAX_DEVICES)
    return dl_sync__named(func, dl_sync__error(DL_SYNC_EINVAL, "device id %d: expected 0 to %d",
                                               (int)device_id, DL_SYNC_MAX_DEVICES - 1));
  *out = (dl_sync_pool_stats){0};
  pool_set *set = find_set(backend, 0);
  if (set == NULL) return DL_SYNC_OK;
  dl_sync__mutex_lock(&caches_lock);
  for (dl_sync__pool *pool = atomic_load(&set->pools[device_id]); pool != NULL; pool = pool->next)
    add_stats(pool, out);
  dl_sync__mutex_unlock(&caches_lock);
  return DL_SYNC_OK;
}

/* Whether pool's context is still the one its events were made in: a context destroyed
   or reset since (another framework released a primary context's last reference) took
   them with it, and destroying them again would act on dead handles. */
static int context_alive(const dl_sync_backend *b, void *context, uint64_t context_id) {
  uint64_t now = 0;
  return b->context_id == NULL || (b->context_id(b->ctx, context, &now) == 0 && now == context_id);
}

/* Retires pool and destroys its idle events. They are taken out under its lock and
   destroyed with none held, so that a graph's user-object destructor giving an event back
   (on the driver's thread, which "should avoid blocking") never waits on the runtime.
   Returns the first failure's status in *status, and whether the pool may be freed now
   (else its last outstanding event frees it: dl_sync__pool_release). */
static int drain(dl_sync__pool *pool, int *status) {
  const dl_sync_backend *b = pool->backend;
  DLDevice device = pool->device;
  int alive = context_alive(b, pool->context, pool->context_id);
  lock(&pool->lock);
  void **ring = pool->ring;
  size_t head = pool->head, count = pool->count, capacity = pool->capacity;
  pool->count = 0;
  pool->destroyed += count;
  pool->retired = 1; /* no event is put in the ring again */
  int unused = pool->outstanding == 0;
  /* With events still out, a graph may free the pool from here on: the ring leaves it. */
  if (!unused) pool->ring = NULL;
  unlock(&pool->lock);
  for (size_t i = 0; i < count && alive; i++) {
    int code = b->event_destroy(b->ctx, ring[(head + i) % capacity]);
    if (code != 0 && *status == DL_SYNC_OK)
      *status = dl_sync__runtime_error(b, DL_SYNC_OP_EVENT_DESTROY, code, device);
  }
  if (!unused) free(ring);
  return unused;
}

int dl_sync_shutdown(void) {
  int status = DL_SYNC_OK;
  dl_sync__release_drain();          /* their events go back to the pools first */
  dl_sync__mutex_lock(&caches_lock); /* held throughout: exiting threads flush into pools */
  flush_all_caches();
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
  dl_sync__mutex_unlock(&caches_lock);
  int released = dl_sync__cuda_driver_release_contexts(); /* after the events made in them */
  if (status == DL_SYNC_OK) status = released;
  return dl_sync__named("dl_sync_shutdown", status);
}

/* The caches of a child after fork(): their events are the parent's. The list is made
   empty; its lock, if a thread of the parent held it at fork time (a thread the child
   does not have), is made anew. The forking thread's own cache is reset, and its key
   value cleared so that its exit flushes nothing. */
static void forget_caches_in_child(void) {
  dl_sync__mutex_renew(&caches_lock);
  caches = NULL;
  memset(&this_thread, 0, sizeof this_thread);
  dl_sync__thread_exit_set(NULL);
}

/* In a child after fork() the parent's events mean nothing (a runtime does not carry
   over), and a pool's lock may have been held by a thread that the child does not have:
   the child forgets every pool without touching it (a tensor deleted in the child gives
   its event to no pool: see dl_sync__pool_release), and the thread caches. The handler
   runs on the child's only thread, the one that forked. */
static void forget_pools_in_child(void) {
  atomic_fetch_add(&fork_generation, 1);
  for (size_t i = 0; i < DL_SYNC__MAX_BACKENDS; i++) {
    for (size_t d = 0; d < DL_SYNC_MAX_DEVICES; d++) atomic_store(&pool_sets[i].pools[d], NULL);
    atomic_store(&pool_sets[i].backend, NULL);
  }
  forget_caches_in_child();
}

static void register_fork_handler(void) {
  dl_sync__on_fork(NULL, NULL, forget_pools_in_child);
}

static void watch_fork(void) {
  static dl_sync__once once = DL_SYNC__ONCE_INIT;
  dl_sync__once_run(&once, register_fork_handler);
}

/* --- unloading ---------------------------------------------------------------------- */

static const char code_marker; /* an address inside the object that holds this copy */

static void pin(void) {
  dl_sync__pin_object_at(&code_marker);
}

/* A graph (or a tensor) that calls back into dlsync may outlive a dlclose of the library
   holding it: from then on that object stays mapped. */
void dl_sync__pin_code(void) {
  static dl_sync__once once = DL_SYNC__ONCE_INIT;
  dl_sync__once_run(&once, pin);
}
