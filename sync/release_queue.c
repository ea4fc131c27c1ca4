/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The releases that wait for their deleter (dlsync/release.h, docs/release.md), and the
 * calls that finish them: dl_sync_release_poll, the release thread and dl_sync_shutdown.
 *
 * A deferred release holds an event recorded on the consumer's stream. Releases recorded on
 * one stream wait in one queue, oldest first, and a poll asks only each queue's oldest
 * event: stream order makes the older ones complete first. A stream is its runtime's id where
 * the backend gives one (stream_id), else its handle: a destroyed stream's handle may come
 * back for a new stream, whose releases then have a queue of their own instead of waiting
 * behind the old stream's (keyed by handle alone, asking the oldest stays right, only
 * later). A poll therefore costs one
 * query per stream with releases waiting, plus one per release it finishes, whatever the
 * depth. A set of the tensors waiting makes the double-release check one lookup.
 *
 * A release a graph keeps is in no queue: the graph's user object, destroyed on a runtime
 * thread where nothing may block or call the runtime, only pushes it onto a lock-free stack
 * that the next poll takes whole. Deleters run with no lock held, only on the thread of a
 * call that names them.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "internal.h"

/* A graph's release: graph_state. The user object's release may run before the retain
   call returns (a runtime gives the object back on failure, now or later), so the outcome
   of the retain and the user object's release meet here: whichever comes second finishes. */
enum { RETAINING, KEPT, GONE, ABANDONED };

struct dl_sync__pending {
  dl_sync__pending *next;     /* in its queue, or in the list of those left */
  dl_sync__pending *set_next; /* in the tensor set's bucket */
  dl_sync__pending *gone_next;
  void *tensor;
  int legacy;
  unsigned generation; /* the fork generation it was made in: a parent's is never run */
  /* A deferred release: its event, of this pool and backend, recorded on queue's stream, or
     after its work on watch's own stream (release_watch.c). */
  dl_sync__pool *pool;
  void *event;
  dl_sync__watch *watch;
  struct release_queue *queue;
  int failed; /* asked about, and the answer was final: never finished (under the lock) */
  /* A graph's: RETAINING, then KEPT until its user object goes (GONE), or ABANDONED when
     the graph refused it (the tensor is the caller's again; the entry is freed by the user
     object's release, or by the retain's caller when that came first). */
  atomic_int graph_state;
};

/* The releases recorded on one consumer stream, oldest first. */
typedef struct release_queue {
  struct release_queue *map_next;    /* the queue map's bucket */
  struct release_queue *prev, *next; /* every queue, for polls */
  const dl_sync_backend *backend;
  dl_sync__bound stream; /* as the release bound it: handle, device, context */
  uint64_t stream_id;    /* the runtime's id of an explicit handle's stream, 0: none known */
  uint64_t thread; /* the per-thread default stream's thread (dl_sync__thread_number), else 0 */
  dl_sync__pending *head, *tail;
  int looked_at; /* a poll is asking its head (under the lock): it stays linked meanwhile */
} release_queue;

/* Chained hash tables, sized in powers of two, grown when loaded. */
typedef struct tensor_table {
  dl_sync__pending **buckets;
  size_t size, count;
} tensor_table;

typedef struct queue_table {
  release_queue **buckets;
  size_t size, count;
} queue_table;

static atomic_bool held;              /* everything below, but the gone stack */
static tensor_table tensors;          /* through set_next */
static atomic_size_t tensors_claimed; /* tensors.count, read without the lock */
static queue_table queues;            /* through map_next */
static release_queue *first_queue;
static release_queue *spare_queue;       /* the last one dropped, kept for the next new stream */
static dl_sync__pending *failed;         /* asked about and failed, not yet reported */
static dl_sync__pending *left;           /* reported, or the parent's in a forked child: leaked */
static atomic_int left_failed;           /* of them, failed here, not yet reported by shutdown */
static atomic_uint generation;           /* the forks this process's line went through */
static _Atomic(dl_sync__pending *) gone; /* graphs' releases whose graph is gone */
atomic_int dl_sync__releases_pending;    /* deferred and kept by graphs */
static atomic_int queued;                /* of them, deferred */

static void lock(void) {
  dl_sync__spin_lock(&held);
}

static void unlock(void) {
  dl_sync__spin_unlock(&held);
}

void (*dl_sync__release_grow_hook)(void);

static size_t hash_pointer(const void *p) {
  uint64_t x = (uint64_t)(uintptr_t)p * UINT64_C(0x9e3779b97f4a7c15);
  return (size_t)(x ^ (x >> 29));
}

/* --- the tensor set ---------------------------------------------------------------- */

static dl_sync__pending **tensor_bucket(const void *tensor) {
  return &tensors.buckets[hash_pointer(tensor) & (tensors.size - 1)];
}

static dl_sync__pending *tensor_find(const void *tensor) {
  if (tensors.size == 0) return NULL;
  dl_sync__pending *p = *tensor_bucket(tensor);
  while (p != NULL && p->tensor != tensor) p = p->set_next;
  return p;
}

/* Doubles the buckets when they hold twice as many entries: amortized O(1). Without memory
   the table stays as it is, only slower. */
static void tensor_grow(void) {
  if (tensors.count < 2 * tensors.size) return;
  size_t size = tensors.size ? 2 * tensors.size : 64;
  /* an array of pointers */
  dl_sync__pending **buckets =
      calloc(size, sizeof *buckets); /* NOLINT(bugprone-sizeof-expression) */
  if (buckets == NULL) return;
  for (size_t i = 0; i < tensors.size; i++)
    for (dl_sync__pending *p = tensors.buckets[i], *next; p != NULL; p = next) {
      next = p->set_next;
      dl_sync__pending **at = &buckets[hash_pointer(p->tensor) & (size - 1)];
      p->set_next = *at;
      *at = p;
    }
  free(tensors.buckets);
  if (dl_sync__release_grow_hook != NULL) dl_sync__release_grow_hook();
  tensors.buckets = buckets;
  tensors.size = size;
}

/* Adds p's tensor unless it waits already: 0 when it does, or without memory for the set. */
static int tensor_claim(dl_sync__pending *p) {
  if (tensor_find(p->tensor) != NULL) return 0;
  tensor_grow();
  if (tensors.size == 0) return 0;
  dl_sync__pending **at = tensor_bucket(p->tensor);
  p->set_next = *at;
  *at = p;
  atomic_store_explicit(&tensors_claimed, ++tensors.count, memory_order_relaxed);
  return 1;
}

static void tensor_unclaim(dl_sync__pending *p) {
  dl_sync__pending **at = tensor_bucket(p->tensor);
  while (*at != p) at = &(*at)->set_next;
  *at = p->set_next;
  atomic_store_explicit(&tensors_claimed, --tensors.count, memory_order_relaxed);
}

/* --- the queues -------------------------------------------------------------------- */

/* A stream's releases share a queue: one handle, device, context, thread (a per-thread
   default stream's), and one runtime id, so that a new stream given a destroyed one's handle
   has a queue of its own. */
static int same_queue(const release_queue *q, const dl_sync_backend *b, const dl_sync__bound *s,
                      uint64_t stream_id, uint64_t thread) {
  return q->backend == b && q->stream.stream.handle == s->stream.handle &&
         q->stream_id == stream_id &&
         q->stream.stream.device.device_type == s->stream.device.device_type &&
         q->stream.stream.device.device_id == s->stream.device.device_id &&
         q->stream.context_id == s->context_id && q->thread == thread;
}

static release_queue **queue_bucket(const dl_sync__bound *s) {
  size_t h =
      hash_pointer(s->stream.handle) ^ (size_t)s->context_id ^ (size_t)s->stream.device.device_id;
  return &queues.buckets[hash_pointer((void *)(uintptr_t)h) & (queues.size - 1)];
}

static void queue_grow(void) {
  if (queues.count < queues.size) return;
  size_t size = queues.size ? 2 * queues.size : 16;
  /* an array of pointers */
  release_queue **buckets = calloc(size, sizeof *buckets); /* NOLINT(bugprone-sizeof-expression) */
  if (buckets == NULL) return;
  queue_table old = queues;
  queues.buckets = buckets;
  queues.size = size;
  for (size_t i = 0; i < old.size; i++)
    for (release_queue *q = old.buckets[i], *next; q != NULL; q = next) {
      next = q->map_next;
      release_queue **at = queue_bucket(&q->stream);
      q->map_next = *at;
      *at = q;
    }
  free(old.buckets);
}

/* The queue of stream, made when it has none (spare: a queue allocated before the lock was
   taken, used or left to the caller). NULL without memory. */
static release_queue *queue_of(const dl_sync_backend *b, const dl_sync__bound *stream,
                               uint64_t stream_id, release_queue **spare) {
  uint64_t thread =
      stream->stream.handle == DL_SYNC_STREAM_PER_THREAD ? dl_sync__thread_number() : 0;
  if (queues.size != 0)
    for (release_queue *q = *queue_bucket(stream); q != NULL; q = q->map_next)
      if (same_queue(q, b, stream, stream_id, thread)) return q;
  queue_grow();
  release_queue *q = *spare;
  if (q == NULL || queues.size == 0) return NULL;
  *spare = NULL;
  *q = (release_queue){.backend = b,
                       .stream = *stream,
                       .stream_id = stream_id,
                       .thread = thread,
                       .next = first_queue};
  if (first_queue != NULL) first_queue->prev = q;
  first_queue = q;
  release_queue **at = queue_bucket(stream);
  q->map_next = *at;
  *at = q;
  queues.count++;
  return q;
}

/* Unlinks an empty queue that no poll looks at, and frees it (or keeps it as the spare). */
static void queue_drop(release_queue *q) {
  release_queue **at = queue_bucket(&q->stream);
  while (*at != q) at = &(*at)->map_next;
  *at = q->map_next;
  if (q->prev != NULL)
    q->prev->next = q->next;
  else
    first_queue = q->next;
  if (q->next != NULL) q->next->prev = q->prev;
  queues.count--;
  if (spare_queue == NULL)
    spare_queue = q; /* a stream's releases come and go: no allocation each time */
  else
    free(q);
}

/* --- what the release calls use ---------------------------------------------------- */

/* its_release_failed: it was asked about and failed for good (reported by the next
   dl_sync_shutdown). */
static int already_released(const void *tensor, int its_release_failed) {
  if (its_release_failed)
    return dl_sync__error(DL_SYNC_EINVAL,
                          "tensor %p is already released, and that release failed: whether "
                          "the consumer's work on it completed cannot be known (its context "
                          "destroyed or reset, the device lost or reset), so its deleter never "
                          "runs and the tensor is leaked (a tensor is released once)",
                          tensor);
  return dl_sync__error(DL_SYNC_EINVAL,
                        "tensor %p is already released: its deleter runs once the consumer's "
                        "work on it completed (a tensor is released once)",
                        tensor);
}

/* The tensor's release, under the lock: EINVAL saying how it stands, or OK when none. */
static int check_new(const void *tensor) {
  const dl_sync__pending *p = tensor_find(tensor);
  return p != NULL ? already_released(tensor, p->failed) : DL_SYNC_OK;
}

int dl_sync__release_check_new(const void *tensor) {
  if (atomic_load_explicit(&tensors_claimed, memory_order_relaxed) == 0) return DL_SYNC_OK;
  lock();
  int status = check_new(tensor);
  unlock();
  return status;
}

dl_sync__pending *dl_sync__pending_new(void *tensor, int legacy) {
  dl_sync__pending *p = calloc(1, sizeof *p);
  if (p != NULL) {
    p->tensor = tensor;
    p->legacy = legacy;
    p->generation = atomic_load_explicit(&generation, memory_order_relaxed);
  }
  return p;
}

static void forget_in_child(void);

/* Threads waiting for releases to finish (the release thread): woken when one is queued,
   or by dl_sync__release_wake. waiting and the counts are sequentially consistent, so that
   a release queued while a waiter goes to sleep is seen by one side or the other. */
static dl_sync__mutex waiters_lock = DL_SYNC__MUTEX_INIT;
static dl_sync__cond waiters = DL_SYNC__COND_INIT;
static atomic_int waiting;

void dl_sync__release_wake(void) {
  dl_sync__mutex_lock(&waiters_lock);
  dl_sync__cond_signal(&waiters);
  dl_sync__mutex_unlock(&waiters_lock);
}

static void wake_waiters(void) {
  if (atomic_load(&waiting) != 0) dl_sync__release_wake();
}

void dl_sync__release_wait(int timeout_ms, const atomic_int *stop) {
  dl_sync__mutex_lock(&waiters_lock);
  atomic_fetch_add(&waiting, 1);
  if (!atomic_load(stop) && (timeout_ms >= 0 || atomic_load(&dl_sync__releases_pending) == 0))
    dl_sync__cond_wait(&waiters, &waiters_lock, timeout_ms);
  atomic_fetch_sub(&waiting, 1);
  dl_sync__mutex_unlock(&waiters_lock);
}

/* A fork holds the lock meanwhile, so that the child never copies the tables half changed
   (a tensor table growing, its old buckets freed and not yet replaced). */
static void hold_for_fork(void) {
  lock();
}

static void let_go_after_fork(void) {
  unlock();
}

static void register_fork_handler(void) {
  dl_sync__on_fork(hold_for_fork, let_go_after_fork, forget_in_child);
}

static void watch_fork(void) {
  static dl_sync__once once = DL_SYNC__ONCE_INIT;
  dl_sync__once_run(&once, register_fork_handler);
}

int dl_sync__pending_defer(dl_sync__pending *p, const dl_sync_backend *b, dl_sync__pool *pool,
                           void *event, dl_sync__watch *watch, const dl_sync__bound *consumer,
                           uint64_t stream_id) {
  watch_fork();
  p->pool = pool;
  p->event = event;
  p->watch = watch;
  if (watch != NULL) dl_sync__watch_hold(watch); /* before a poll can see p */
  release_queue *fresh = NULL;
  lock();
  int claimed = tensor_claim(p);
  release_queue *q = claimed ? queue_of(b, consumer, stream_id, &spare_queue) : NULL;
  if (claimed && q == NULL) { /* a new stream and no spare: allocated with no lock held */
    unlock();
    fresh = malloc(sizeof *fresh);
    lock();
    q = queue_of(b, consumer, stream_id, &fresh);
  }
  if (q != NULL) {
    p->queue = q;
    if (q->tail != NULL)
      q->tail->next = p;
    else
      q->head = p;
    q->tail = p;
    atomic_fetch_add_explicit(&queued, 1, memory_order_relaxed);
    atomic_fetch_add(&dl_sync__releases_pending, 1); /* before waiting is read */
  } else if (claimed) {
    tensor_unclaim(p);
  }
  int known = claimed ? DL_SYNC_OK : check_new(p->tensor);
  unlock();
  free(fresh);
  if (q != NULL) {
    wake_waiters();
    return DL_SYNC_OK;
  }
  if (watch != NULL) dl_sync__watch_let_go(pool, watch); /* not queued: none waits on it */
  return known != DL_SYNC_OK ? known : dl_sync__error(DL_SYNC_ENOMEM, "cannot allocate a release");
}

int dl_sync__pending_keep(dl_sync__pending *p) {
  watch_fork();
  lock();
  int claimed = tensor_claim(p);
  int known = claimed ? DL_SYNC_OK : check_new(p->tensor);
  if (claimed) atomic_fetch_add(&dl_sync__releases_pending, 1);
  unlock();
  if (claimed) wake_waiters(); /* so that it polls while the graph lives, and finds it gone */
  if (claimed) return DL_SYNC_OK;
  return known != DL_SYNC_OK ? known : dl_sync__error(DL_SYNC_ENOMEM, "cannot allocate a release");
}

static void push_gone(dl_sync__pending *p) {
  dl_sync__pending *top = atomic_load(&gone);
  do p->gone_next = top;
  while (!atomic_compare_exchange_weak(&gone, &top, p));
}

/* The graph's user object is released, on a runtime thread: no lock, no runtime call. */
void dl_sync__pending_graph_gone(void *object) {
  dl_sync__pending *p = object;
  int state = atomic_load(&p->graph_state);
  while (state != ABANDONED && !atomic_compare_exchange_weak(&p->graph_state, &state, GONE)) {
  }
  if (state == KEPT) push_gone(p); /* a poll runs the deleter */
  if (state == ABANDONED) free(p); /* refused: the tensor is the caller's */
}

void dl_sync__pending_kept(dl_sync__pending *p) {
  int retaining = RETAINING;
  if (!atomic_compare_exchange_strong(&p->graph_state, &retaining, KEPT))
    push_gone(p); /* its graph went already */
}

void dl_sync__pending_abandon(dl_sync__pending *p) {
  lock();
  tensor_unclaim(p);
  atomic_fetch_sub_explicit(&dl_sync__releases_pending, 1, memory_order_relaxed);
  unlock();
  int retaining = RETAINING;
  if (!atomic_compare_exchange_strong(&p->graph_state, &retaining, ABANDONED))
    free(p); /* its user object was released already */
}

/* --- finishing them ---------------------------------------------------------------- */

/* A finished release, to run once no lock is held. */
static void finish(dl_sync__pending *p) {
  if (p->event != NULL) dl_sync__pool_release(p->pool, p->event);
  dl_sync__tensor_delete(p->tensor, p->legacy);
  free(p);
}

/* The graphs' releases whose graph is gone: out of the set, onto done. */
static int take_gone(dl_sync__pending **done) {
  dl_sync__pending *p = atomic_exchange(&gone, NULL);
  if (p == NULL) return 0;
  int n = 0;
  unsigned now = atomic_load_explicit(&generation, memory_order_relaxed);
  lock();
  for (dl_sync__pending *next; p != NULL; p = next) {
    next = p->gone_next;
    if (p->generation != now) { /* a graph of the parent's, gone in a forked child */
      p->next = left;
      left = p;
      continue;
    }
    tensor_unclaim(p);
    p->next = *done;
    *done = p;
    n++;
  }
  atomic_fetch_sub_explicit(&dl_sync__releases_pending, n, memory_order_relaxed);
  unlock();
  return n;
}

enum { NOT_YET, DONE, FAILED };

/* Whether p's work completed; with wait, waits for it on the host. Only an event dlsync may
   ask about is asked: one recorded on the consumer's stream where the backend's queries
   read no stream, else one on dlsync's own stream (release_watch.c), checked once per
   pass. An answer is classified where it comes: a capture that refuses the call now
   (ECAPTURE) is asked again at the next poll; any other failure is final, the entry never
   asked again (a destroyed or reset context, the own stream destroyed by a device reset, a
   stream of a destroyed execution context, a sticky error). */
static int ask(const dl_sync__pending *p, int wait, unsigned pass) {
  const dl_sync_backend *b = p->queue->backend;
  if (!dl_sync__pool_alive(p->pool)) return FAILED; /* its event went with its context */
  if (p->watch != NULL && !dl_sync__watch_usable(b, p->watch, pass)) return FAILED;
  int complete = 0;
  int code =
      wait ? b->event_synchronize(b->ctx, p->event) : b->event_query(b->ctx, p->event, &complete);
  if (code != 0) return b->error_status(b->ctx, code) == DL_SYNC_ECAPTURE ? NOT_YET : FAILED;
  return wait || complete ? DONE : NOT_YET;
}

/* Takes q's oldest releases while they are done (under the lock on entry and exit; not
   while asking). Failed ones go to the left list. Returns how many finished. */
static int drain_queue(release_queue *q, int wait, unsigned pass, dl_sync__pending **done) {
  int n = 0;
  q->looked_at = 1;
  for (dl_sync__pending *p = q->head; p != NULL; p = q->head) {
    unlock();
    int answer = ask(p, wait, pass);
    if (answer != NOT_YET && p->watch != NULL) dl_sync__watch_let_go(p->pool, p->watch);
    lock();
    if (answer == NOT_YET) break;
    q->head = p->next;
    if (q->head == NULL) q->tail = NULL;
    atomic_fetch_sub_explicit(&queued, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&dl_sync__releases_pending, 1, memory_order_relaxed);
    if (answer == FAILED) {
      p->failed = 1;
      p->next = failed; /* its tensor stays in the set until reported: released once */
      failed = p;
      atomic_fetch_add_explicit(&left_failed, 1, memory_order_relaxed);
      continue;
    }
    tensor_unclaim(p);
    p->next = *done;
    *done = p;
    n++;
  }
  q->looked_at = 0;
  return n;
}

/* One pass over the queues no other poll looks at; the finished ones onto done. A pass
   checks each own stream once (release_watch.c). */
static atomic_uint passes;

static int drain_queues(int wait, dl_sync__pending **done) {
  int n = 0;
  unsigned pass = atomic_fetch_add_explicit(&passes, 1, memory_order_relaxed) + 1;
  lock();
  for (release_queue *q = first_queue, *next; q != NULL; q = next) {
    if (q->looked_at) {
      next = q->next;
      continue;
    }
    n += drain_queue(q, wait, pass, done);
    next = q->next; /* q stayed linked while its head was asked */
    if (q->head == NULL) queue_drop(q);
  }
  unlock();
  return n;
}

/* Runs the finished releases, oldest first where one queue gave several. */
static void run_done(dl_sync__pending *done) {
  dl_sync__pending *order = NULL;
  while (done != NULL) {
    dl_sync__pending *next = done->next;
    done->next = order;
    order = done;
    done = next;
  }
  while (order != NULL) {
    dl_sync__pending *next = order->next;
    finish(order);
    order = next;
  }
}

int dl_sync__release_finish(int wait) {
  dl_sync__pending *done = NULL;
  int n = take_gone(&done);
  if (atomic_load_explicit(&dl_sync__releases_pending, memory_order_relaxed) != 0)
    n += drain_queues(wait, &done);
  run_done(done);
  return n;
}

int dl_sync_release_poll(void) {
  return dl_sync__release_finish(0);
}

int dl_sync_release_pending(void) {
  return atomic_load(&dl_sync__releases_pending);
}

int dl_sync__releases_queued(void) {
  return atomic_load_explicit(&queued, memory_order_relaxed);
}

int dl_sync__release_report_left(void) {
  int failures = atomic_exchange(&left_failed, 0);
  lock();
  for (dl_sync__pending *p = failed, *next; p != NULL; p = next) { /* reported: forgotten */
    next = p->next;
    tensor_unclaim(p);
    p->next = left;
    left = p;
  }
  failed = NULL;
  int unasked = 0;
  for (release_queue *q = first_queue; q != NULL; q = q->next)
    for (dl_sync__pending *p = q->head; p != NULL; p = p->next) unasked++;
  unlock();
  if (failures == 0 && unasked == 0) return DL_SYNC_OK;
  return dl_sync__error(
      DL_SYNC_EBACKEND,
      "%d releases could not be finished: asking whether their consumer's work completed "
      "failed for good (its context destroyed or reset, the device lost or reset); their "
      "deleters never run, their tensors are leaked. %d releases still wait: the runtime "
      "answered that a capture refuses the question now; a poll after the capture ends "
      "finishes them",
      failures, unasked);
}

/* In a child after fork() the parent's releases are never run: their events are the
   parent's, and the lock may have been held by a thread the child does not have. Their
   tensors are leaked, kept reachable for a leak checker. The handler runs on the child's
   only thread. */
static void forget_in_child(void) {
  atomic_store(&held, 0);
  dl_sync__mutex_renew(&waiters_lock);
  dl_sync__cond_renew(&waiters);
  atomic_store(&waiting, 0);
  atomic_fetch_add(&generation, 1);
  for (release_queue *q = first_queue, *next; q != NULL; q = next) {
    next = q->next;
    if (q->tail != NULL) {
      q->tail->next = left;
      left = q->head;
    }
    free(q);
  }
  for (dl_sync__pending *p = atomic_exchange(&gone, NULL), *next; p != NULL; p = next) {
    next = p->gone_next;
    p->next = left;
    left = p;
  }
  for (dl_sync__pending *p = failed, *next; p != NULL; p = next) {
    next = p->next;
    p->next = left;
    left = p;
  }
  failed = NULL;
  free(queues.buckets);
  free(tensors.buckets);
  queues = (queue_table){0};
  tensors = (tensor_table){0};
  atomic_store(&tensors_claimed, 0);
  first_queue = NULL;
  free(spare_queue); /* memory of the child's own, unused */
  spare_queue = NULL;
  atomic_store(&left_failed, 0);
  atomic_store(&queued, 0);
  atomic_store(&dl_sync__releases_pending, 0);
}
