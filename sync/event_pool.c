/*
 * The event pool: per backend and device, events created once with timing disabled and
 * reused for ever. Steady state takes a mutex and moves a pointer: no allocation and no
 * runtime call (DL_SYNC_BACKEND_QUERY_BEFORE_REUSE backends add one event query).
 *
 * Every live event has a slot reserved in its pool's ring when it is created, so giving
 * one back never allocates and never fails: that is what lets graph user-object
 * destructors, which run where no runtime call is allowed, return events.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "internal.h"

enum { DL_SYNC__MAX_BACKENDS = 16 };

/* The critical sections are a few loads and stores: a spinlock that yields when the
   holder is descheduled costs less than a mutex, uncontended and contended. */
typedef struct spinlock {
  atomic_bool held;
} spinlock;

static void lock(spinlock *l) {
  for (unsigned spins = 0;; spins++) {
    if (!atomic_load_explicit(&l->held, memory_order_relaxed) &&
        !atomic_exchange_explicit(&l->held, 1, memory_order_acquire))
      return;
    if (spins >= 64) sched_yield();
  }
}

static void unlock(spinlock *l) { atomic_store_explicit(&l->held, 0, memory_order_release); }

struct dl_sync__pool {
  spinlock lock;
  const dl_sync_backend *backend;
  DLDevice device;
  void **ring; /* idle events, oldest at head */
  size_t head, count, capacity;
  uint64_t created, destroyed, outstanding, acquired;
};

typedef struct pool_set {
  _Atomic(const dl_sync_backend *) backend;
  _Atomic(dl_sync__pool *) pools[DL_SYNC_MAX_DEVICES];
} pool_set;

static pool_set pool_sets[DL_SYNC__MAX_BACKENDS];

static pool_set *find_set(const dl_sync_backend *backend, int claim) {
  for (size_t i = 0; i < DL_SYNC__MAX_BACKENDS; i++) {
    const dl_sync_backend *owner = atomic_load_explicit(&pool_sets[i].backend, memory_order_acquire);
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

static dl_sync__pool *pool_new(const dl_sync_backend *backend, DLDevice device) {
  dl_sync__pool *pool = calloc(1, sizeof *pool);
  if (pool == NULL) return NULL;
  pool->backend = backend;
  pool->device = device;
  return pool;
}

static void pool_free(dl_sync__pool *pool) {
  free(pool->ring);
  free(pool);
}

int dl_sync__pool_get(const char *func, const dl_sync_backend *backend, DLDevice device,
                      dl_sync__pool **out) {
  pool_set *set = find_set(backend, 1);
  if (set == NULL)
    return dl_sync__error(DL_SYNC_ENOMEM, func,
                          "more than %d distinct backends used: call dl_sync_shutdown() "
                          "before replacing backends",
                          DL_SYNC__MAX_BACKENDS);
  _Atomic(dl_sync__pool *) *slot = &set->pools[device.device_id];
  dl_sync__pool *pool = atomic_load_explicit(slot, memory_order_acquire);
  if (pool != NULL) {
    *out = pool;
    return DL_SYNC_OK;
  }
  dl_sync__pool_watch_fork(); /* registered at first use: nothing runs at library load */
  dl_sync__pool *fresh = pool_new(backend, device);
  if (fresh == NULL)
    return dl_sync__error(DL_SYNC_ENOMEM, func, "cannot allocate the event pool of %s:%d",
                          dl_sync__device_type_name(device.device_type), (int)device.device_id);
  if (atomic_compare_exchange_strong(slot, &pool, fresh)) {
    *out = fresh;
  } else {
    pool_free(fresh); /* another thread won; pool holds its pool */
    *out = pool;
  }
  return DL_SYNC_OK;
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
  for (size_t i = 0; i < pool->count; i++)
    ring[i] = pool->ring[(pool->head + i) % pool->capacity];
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

/* HIP may not re-record a pending event: hand out the oldest idle one only once it is
   complete; a pending one goes back and a new event is made instead. */
static int reusable(dl_sync__pool *pool, const char *func, void *event, int *ok) {
  const dl_sync_backend *b = pool->backend;
  int complete = 0;
  int code = b->event_query(b->ctx, event, &complete);
  *ok = code == 0 && complete;
  if (*ok) return DL_SYNC_OK;
  dl_sync__pool_release(pool, event);
  return code == 0 ? DL_SYNC_OK
                   : dl_sync__runtime_error(func, b, DL_SYNC_OP_EVENT_QUERY, code, pool->device);
}

static int create_event(dl_sync__pool *pool, const char *func, dl_sync__device_guard *guard,
                        void **event) {
  const dl_sync_backend *b = pool->backend;
  int status = dl_sync__device_guard_use(guard, func, pool->device);
  if (status != DL_SYNC_OK) return status;
  int code = b->event_create(b->ctx, event);
  if (code != 0) return dl_sync__runtime_error(func, b, DL_SYNC_OP_EVENT_CREATE, code, pool->device);

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
  return dl_sync__error(DL_SYNC_ENOMEM, func, "cannot grow the event pool of %s:%d",
                        dl_sync__device_type_name(pool->device.device_type),
                        (int)pool->device.device_id);
}

int dl_sync__pool_acquire(dl_sync__pool *pool, const char *func, dl_sync__device_guard *guard,
                          void **event) {
  int query = (pool->backend->flags & DL_SYNC_BACKEND_QUERY_BEFORE_REUSE) != 0;
  void *idle = take_idle(pool, query);
  if (idle != NULL) {
    int ok = 1;
    int status = query ? reusable(pool, func, idle, &ok) : DL_SYNC_OK;
    if (status != DL_SYNC_OK) return status;
    if (ok) {
      *event = idle;
      return DL_SYNC_OK;
    }
  }
  return create_event(pool, func, guard, event);
}

void dl_sync__pool_release(dl_sync__pool *pool, void *event) {
  lock(&pool->lock);
  ring_push(pool, event);
  pool->outstanding--;
  unlock(&pool->lock);
}

int dl_sync_pool_stats_get(const dl_sync_backend *backend, int32_t device_id,
                           dl_sync_pool_stats *out) {
  static const char *const func = "dl_sync_pool_stats_get";
  if (backend == NULL || out == NULL)
    return dl_sync__error(DL_SYNC_EINVAL, func, "backend (%p) and out (%p) must not be NULL",
                          (const void *)backend, (void *)out);
  if (device_id < 0 || device_id >= DL_SYNC_MAX_DEVICES)
    return dl_sync__error(DL_SYNC_EINVAL, func, "device id %d: expected 0 to %d", (int)device_id,
                          DL_SYNC_MAX_DEVICES - 1);
  *out = (dl_sync_pool_stats){0};
  pool_set *set = find_set(backend, 0);
  dl_sync__pool *pool = set != NULL ? atomic_load(&set->pools[device_id]) : NULL;
  if (pool == NULL) return DL_SYNC_OK;
  lock(&pool->lock);
  *out = (dl_sync_pool_stats){.created = pool->created,
                              .destroyed = pool->destroyed,
                              .idle = pool->count,
                              .outstanding = pool->outstanding,
                              .acquired = pool->acquired};
  unlock(&pool->lock);
  return DL_SYNC_OK;
}

/* Destroys the idle events of pool; returns the first failure's status. *in_use is set
   to whether events are still out (owned by graphs), read under the pool's lock: a graph
   user-object destructor giving back the last one holds that lock until its last touch of
   the pool, so a pool seen here with none out can no longer be reached and may be freed. */
static int drain(dl_sync__pool *pool, int status, int *in_use) {
  const dl_sync_backend *b = pool->backend;
  lock(&pool->lock);
  while (pool->count > 0) {
    void *event = ring_pop(pool, 1);
    int code = b->event_destroy(b->ctx, event);
    pool->destroyed++;
    if (code != 0 && status == DL_SYNC_OK)
      status = dl_sync__runtime_error("dl_sync_shutdown", b, DL_SYNC_OP_EVENT_DESTROY, code,
                                      pool->device);
  }
  *in_use = pool->outstanding != 0;
  unlock(&pool->lock);
  return status;
}

int dl_sync_shutdown(void) {
  int status = DL_SYNC_OK;
  for (size_t i = 0; i < DL_SYNC__MAX_BACKENDS; i++) {
    pool_set *set = &pool_sets[i];
    if (atomic_load(&set->backend) == NULL) continue;
    int kept = 0;
    for (size_t d = 0; d < DL_SYNC_MAX_DEVICES; d++) {
      dl_sync__pool *pool = atomic_load(&set->pools[d]);
      if (pool == NULL) continue;
      int in_use = 0;
      status = drain(pool, status, &in_use);
      if (in_use) {
        kept = 1; /* owned by graphs: they give their events back here later */
        continue;
      }
      atomic_store(&set->pools[d], NULL);
      pool_free(pool);
    }
    if (!kept) atomic_store(&set->backend, NULL);
  }
  return status;
}

/* In a child after fork() the parent's events mean nothing (a runtime does not carry
   over), and a lock may have been held by a thread that the child does not have: the
   child forgets every pool without touching it (their memory is the parent's copy). */
static void forget_pools_in_child(void) {
  for (size_t i = 0; i < DL_SYNC__MAX_BACKENDS; i++) {
    for (size_t d = 0; d < DL_SYNC_MAX_DEVICES; d++) atomic_store(&pool_sets[i].pools[d], NULL);
    atomic_store(&pool_sets[i].backend, NULL);
  }
}

static void register_fork_handler(void) {
  pthread_atfork(NULL, NULL, forget_pools_in_child);
}

void dl_sync__pool_watch_fork(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, register_fork_handler);
}
