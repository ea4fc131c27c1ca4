/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The threads' caches in front of the event pools: each thread keeps a few idle events
 * per pool, so that threads pushing dependencies on one device do not contend for its
 * pool's lock; in steady state a dependency takes no lock at all. Only events borrowed and
 * given back within one call go through it. A thread's cache returns to the pools when the
 * thread exits (the platform's thread-exit hook, which makes no runtime call) and at
 * dl_sync_shutdown. Backends that query before reuse bypass it: the pool alone knows which
 * idle event is the oldest; so do pools of a context current to one thread at a time,
 * whose events only that thread can make. A slot of a pool that was dropped (its events
 * died with its context) is never used again: the next binding takes it over.
 */
#include <stdatomic.h>
#include <string.h>

#include "event_pool.h"
#include "internal.h"

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
  dl_sync__pool_take_back(pool, slot->events, atomic_load_explicit(&slot->count, DL_SYNC__RELAXED),
                          atomic_load_explicit(&slot->acquired, DL_SYNC__RELAXED));
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

static void register_fork_handler(void) {
  dl_sync__on_fork(NULL, NULL, forget_caches_in_child);
}

/* The thread's first use: its cache joins the list. */
DL_SYNC__COLD static thread_cache *new_cache(thread_cache *cache) {
  if (cache->state == CACHE_GONE) return NULL;
  static dl_sync__once once = DL_SYNC__ONCE_INIT;
  dl_sync__once_run(&once, make_cache_key);
  static dl_sync__once fork_once = DL_SYNC__ONCE_INIT;
  dl_sync__once_run(&fork_once, register_fork_handler);
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

/* A free slot of cache for pool: an unbound one, else one of a dropped pool, else one in
   turn (flushed first). */
DL_SYNC__COLD static cache_slot *bind_slot(thread_cache *cache, dl_sync__pool *pool) {
  cache_slot *unbound = NULL;
  for (size_t i = 0; i < DL_SYNC__CACHE_POOLS && unbound == NULL; i++)
    if (atomic_load_explicit(&cache->slots[i].pool, DL_SYNC__RELAXED) == NULL)
      unbound = &cache->slots[i];
  for (size_t i = 0; i < DL_SYNC__CACHE_POOLS && unbound == NULL; i++)
    if (dl_sync__pool_dropped(atomic_load_explicit(&cache->slots[i].pool, DL_SYNC__RELAXED)))
      unbound = &cache->slots[i];
  if (unbound == NULL) /* more pools than slots: the bound ones give way in turn */
    unbound = &cache->slots[cache->next_victim++ % DL_SYNC__CACHE_POOLS];
  if (atomic_load_explicit(&unbound->pool, DL_SYNC__RELAXED) != NULL) {
    dl_sync__mutex_lock(&caches_lock); /* stats see the events in one place or the other */
    slot_flush(unbound);
    dl_sync__mutex_unlock(&caches_lock);
  }
  atomic_store_explicit(&unbound->pool, pool, DL_SYNC__RELAXED);
  return unbound;
}

/* The slot of this thread bound to the live pool of (backend, device, context identity),
   or NULL. */
static cache_slot *bound_slot(thread_cache *cache, const dl_sync_backend *backend,
                              int32_t device_id, uint64_t context_id) {
  for (size_t i = 0; i < DL_SYNC__CACHE_POOLS; i++) {
    dl_sync__pool *pool = atomic_load_explicit(&cache->slots[i].pool, DL_SYNC__RELAXED);
    if (pool != NULL && pool->backend == backend && pool->device.device_id == device_id &&
        pool->context_id == context_id && !dl_sync__pool_dropped(pool))
      return &cache->slots[i];
  }
  return NULL;
}

int dl_sync__pool_borrow(dl_sync__guard *guard, dl_sync__bound *stream, dl_sync__borrowed *out) {
  const dl_sync_backend *backend = guard->backend;
  out->slot = NULL;
  thread_cache *cache =
      (backend->flags & DL_SYNC_BACKEND_QUERY_BEFORE_REUSE) == 0 ? cache_of_this_thread() : NULL;
  cache_slot *slot = cache != NULL ? bound_slot(cache, backend, stream->stream.device.device_id,
                                                stream->context_id)
                                   : NULL;
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
  int status = dl_sync__pool_for_stream(guard, stream, &out->pool);
  if (status == DL_SYNC_OK) status = dl_sync__pool_acquire(out->pool, guard, &out->event);
  if (status == DL_SYNC_OK && cache != NULL && !dl_sync__pool_shared_only(out->pool))
    out->slot = slot != NULL ? slot : bind_slot(cache, out->pool);
  return status;
}

int dl_sync__pool_borrow_recorded(dl_sync__guard *guard, dl_sync__bound *stream,
                                  dl_sync__borrowed *out) {
  for (int attempt = 0;; attempt++) {
    int status = dl_sync__pool_borrow(guard, stream, out);
    if (status != DL_SYNC_OK) return status;
    int gone = 0;
    status = dl_sync__record_pooled(guard, out->event, stream, attempt == 0 ? &gone : NULL);
    if (status == DL_SYNC_OK) return status;
    if (!gone) {
      dl_sync__pool_return(out);
      return status;
    }
    dl_sync__pool_drop(out->pool);
    dl_sync__pool_release(out->pool, out->event); /* into the dropped pool, never used again */
  }
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
void dl_sync__caches_count(const dl_sync__pool *pool, uint64_t *idle, uint64_t *acquired) {
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
void dl_sync__caches_flush_all(void) {
  for (thread_cache *cache = caches; cache != NULL; cache = cache->next)
    for (size_t i = 0; i < DL_SYNC__CACHE_POOLS; i++) slot_flush(&cache->slots[i]);
}

void dl_sync__caches_lock(void) {
  dl_sync__mutex_lock(&caches_lock);
}

void dl_sync__caches_unlock(void) {
  dl_sync__mutex_unlock(&caches_lock);
}
