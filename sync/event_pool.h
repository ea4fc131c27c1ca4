/* SPDX-License-Identifier: Apache-2.0 */
/* Between the event pool (event_pool.c) and the threads' caches in front of it
   (thread_cache.c); not installed. */
#ifndef DL_SYNC_EVENT_POOL_H_
#define DL_SYNC_EVENT_POOL_H_

#include <stdatomic.h>
#include <stdint.h>

#include "internal.h"

typedef struct spinlock {
  atomic_bool held;
} spinlock;

/* A stream of dlsync's own that the pool's deferred releases are watched on
   (release_watch.c makes it; the pool destroys it at dl_sync_shutdown and frees it). */
struct dl_sync__watch {
  void *stream;           /* dlsync's own, of the pool's device and context */
  atomic_int gone;        /* destroyed (a device reset, or dl_sync_shutdown) */
  atomic_uint checked;    /* the last poll pass that checked it */
  atomic_uint waiting;    /* releases deferred on it, not yet finished or failed */
  atomic_int retired;     /* dl_sync_shutdown retired its pool: the last release destroys it */
  dl_sync__watch *before; /* the pool's earlier one, gone; freed with the pool */
};

/* One pool: its key is read by the caches (which pool a slot holds events of); the rest
   is event_pool.c's, under lock. */
struct dl_sync__pool {
  spinlock lock;
  const dl_sync_backend *backend;
  DLDevice device;
  void *context;       /* NULL for backends without contexts */
  uint64_t context_id; /* its identity: the key (0 without contexts) */
  dl_sync__pool *next; /* the device's other pools (other contexts); set once */
  unsigned generation; /* fork_generation when made: a child's pools are its own */
  int exclusive;       /* its context is current to one thread at a time: no thread caches */
  atomic_int dropped;  /* left behind: its events died with its context (dl_sync__pool_drop) */
  int retired;         /* left behind by dl_sync_shutdown, under lock */
  void **ring;         /* idle events, oldest at head */
  size_t head, count, capacity;
  uint64_t created, destroyed, outstanding, acquired;
  _Atomic(dl_sync__watch *) watch; /* deferred releases' own stream (release_watch.c) */
};

/* event_pool.c: takes back a cache's events and its count of borrows (the caller holds the
   caches' lock). */
void dl_sync__pool_take_back(dl_sync__pool *pool, void *const *events, unsigned count,
                             uint64_t acquired);

/* event_pool.c, for lifecycle.c: the pools of backend's device (newest first, through
   next; NULL when none), one pool's counters added to out with what the caches hold of it,
   and every pool retired, its idle events destroyed (the first failure's status), and its
   own stream (release_watch.c) unless releases still wait there: then the last of them
   destroys it (dl_sync__watch_let_go). */
dl_sync__pool *dl_sync__pools_of(const dl_sync_backend *backend, int32_t device_id);
void dl_sync__pool_add_stats(dl_sync__pool *pool, uint64_t cached, uint64_t cached_acquired,
                             dl_sync_pool_stats *out);
int dl_sync__pools_drain_all(void);

/* thread_cache.c: the lock that keeps events from moving between the caches and the pools
   (statistics, shutdown); what the caches hold for pool (idle events, borrows not yet
   counted); every cache back to its pools (the caller holds the lock for the last two). */
void dl_sync__caches_lock(void);
void dl_sync__caches_unlock(void);
void dl_sync__caches_count(const dl_sync__pool *pool, uint64_t *idle, uint64_t *acquired);
void dl_sync__caches_flush_all(void);

#endif /* DL_SYNC_EVENT_POOL_H_ */
