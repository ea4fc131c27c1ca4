/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Release ordering (dlsync/release.h, docs/design.md): a consumer's release of a tensor
 * after the work enqueued so far on its stream, before the producer hands the memory out
 * again, with no host synchronization.
 *
 * The releases that cannot run their deleter now wait in one list, oldest first: a
 * deferred one holds an event recorded on the consumer's stream and is done once a query
 * says it completed; one a graph keeps is done once the graph's user object is destroyed
 * (which only sets a flag: it runs on a runtime thread, where no runtime call and no
 * blocking is allowed). Later dlsync calls take a few done ones each; their deleters run
 * with no lock held.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "internal.h"

typedef struct pending {
  struct pending *next;
  void *tensor;
  int legacy;
  int taken;          /* being looked at by a poll, under the list's lock */
  unsigned looked_at; /* the last poll that looked at it, under the list's lock */
  int abandoned;      /* a graph refused it: its tensor stays the caller's, no deleter */
  /* A deferred release: its event, of this pool and backend; a graph's: none. */
  const dl_sync_backend *backend;
  dl_sync__pool *pool;
  void *event;
  atomic_int graph_gone; /* a graph's: its user object was destroyed */
} pending;

atomic_int dl_sync__releases_pending;
static atomic_bool list_held;
static pending *list_head;
static unsigned polls; /* numbers each poll, under the list's lock */

static void list_lock(void) {
  dl_sync__spin_lock(&list_held);
}

static void list_unlock(void) {
  dl_sync__spin_unlock(&list_held);
}

/* In a child after fork() the parent's releases are never run: their events are the
   parent's, and the list may have been held by a thread the child does not have. Their
   tensors are leaked, kept where a leak checker sees them reachable. */
static pending *volatile parents_releases; /* written only: volatile, so the stores stay */

static void forget_in_child(void) {
  atomic_store(&list_held, 0);
  if (list_head != NULL) { /* an older fork's go after them: all stay reachable */
    pending *last = list_head;
    while (last->next != NULL) last = last->next;
    last->next = parents_releases;
    parents_releases = list_head;
  }
  list_head = NULL;
  atomic_store(&dl_sync__releases_pending, 0);
}

static void register_fork_handler(void) {
  dl_sync__on_fork(NULL, NULL, forget_in_child);
}

static int already_released(const void *tensor) {
  return dl_sync__error(DL_SYNC_EINVAL,
                        "tensor %p is already released: its deleter runs once the consumer's "
                        "work on it completed (a tensor is released once)",
                        tensor);
}

/* Appends entry (oldest first). Unless always, EINVAL when its tensor already waits; a
   graph's entry is appended always (the graph holds it already). */
static int enqueue(pending *entry, int always) {
  static dl_sync__once once = DL_SYNC__ONCE_INIT;
  dl_sync__once_run(&once, register_fork_handler);
  list_lock();
  pending **at = &list_head;
  int known = 0;
  for (; *at != NULL; at = &(*at)->next) known |= (*at)->tensor == entry->tensor;
  if (always || !known) {
    *at = entry;
    atomic_fetch_add_explicit(&dl_sync__releases_pending, 1, memory_order_relaxed);
  }
  list_unlock();
  return always || !known ? DL_SYNC_OK : already_released(entry->tensor);
}

static int is_pending(const void *tensor) {
  if (atomic_load_explicit(&dl_sync__releases_pending, memory_order_relaxed) == 0) return 0;
  list_lock();
  pending *at = list_head;
  while (at != NULL && at->tensor != tensor) at = at->next;
  list_unlock();
  return at != NULL;
}

/* Runs a done release: its event back to its pool (no runtime call), then the deleter
   (none for an abandoned one). */
static void finish(pending *entry) {
  if (entry->event != NULL) dl_sync__pool_release(entry->pool, entry->event);
  if (!entry->abandoned) dl_sync__tensor_delete(entry->tensor, entry->legacy);
  atomic_fetch_sub_explicit(&dl_sync__releases_pending, 1, memory_order_relaxed);
  free(entry);
}

/* Whether entry is done; with wait, waits for a deferred one's work on the host. */
static int done(const pending *entry, int wait) {
  if (entry->event == NULL) return atomic_load_explicit(&entry->graph_gone, memory_order_acquire);
  const dl_sync_backend *b = entry->backend;
  int complete = 0;
  int code = wait ? b->event_synchronize(b->ctx, entry->event)
                  : b->event_query(b->ctx, entry->event, &complete);
  /* A query that fails says nothing of the work: the release waits for a later one. */
  return code == 0 && (wait || complete);
}

/* Whether a poll looks at entry now: a graph's only once the graph is gone (one load, no
   runtime call), so that graphs that live on never stand in the way of the others. */
static int worth_a_look(const pending *entry, unsigned poll_number) {
  return !entry->taken && entry->looked_at != poll_number &&
         (entry->event != NULL || atomic_load_explicit(&entry->graph_gone, memory_order_acquire));
}

/* Looks at up to most releases worth a look (oldest first; most < 0: every one, each once),
   waiting for each with wait, and runs the deleters of those done. Returns how many ran. */
static int poll(int most, int wait) {
  pending *look[16];
  int ran = 0;
  list_lock();
  unsigned poll_number = ++polls;
  list_unlock();
  for (;;) {
    int n = 0, cap = most < 0 || most > 16 ? 16 : most;
    list_lock();
    for (pending *at = list_head; at != NULL && n < cap; at = at->next)
      if (worth_a_look(at, poll_number)) {
        at->taken = 1;
        at->looked_at = poll_number;
        look[n++] = at;
      }
    list_unlock();
    if (n == 0) return ran;
    int finished[16] = {0};
    for (int i = 0; i < n; i++) finished[i] = done(look[i], wait);
    list_lock();
    for (int i = 0; i < n; i++) {
      look[i]->taken = 0;
      if (!finished[i]) continue;
      pending **at = &list_head;
      while (*at != look[i]) at = &(*at)->next;
      *at = look[i]->next;
    }
    list_unlock();
    for (int i = 0; i < n; i++)
      if (finished[i]) {
        ran += !look[i]->abandoned;
        finish(look[i]);
      }
    if (most >= 0) {
      most -= n;
      if (most <= 0) return ran;
    }
  }
}

void dl_sync__release_poll_some(int most) {
  poll(most, 0);
}

void dl_sync__release_drain(void) {
  poll(-1, 1);
}

int dl_sync_release_poll(void) {
  return poll(-1, 0);
}

int dl_sync_release_pending(void) {
  return atomic_load(&dl_sync__releases_pending);
}

/* A graph's user object: destroyed on a runtime thread, it only marks the release done. */
static void graph_gone(void *object) {
  pending *entry = object;
  atomic_store_explicit(&entry->graph_gone, 1, memory_order_release);
}

/* Only a release that waits is allocated: an ordered one costs no allocation. */
static pending *new_entry(const dl_sync__release_target *t) {
  pending *entry = calloc(1, sizeof *entry);
  if (entry != NULL) {
    entry->tensor = t->tensor;
    entry->legacy = t->legacy;
  }
  return entry;
}

DL_SYNC__COLD static int no_memory(void) {
  return dl_sync__error(DL_SYNC_ENOMEM, "cannot allocate a release");
}

/* The consumer captures: the graph keeps the tensor until it (and every launch of it) is
   gone. Work enqueued on the stream before the capture began is no part of the graph: the
   caller orders it (dlsync/release.h). When the retain fails, the user object is given
   back too, now or later: its entry waits for that as an abandoned one, with no deleter,
   and the tensor stays the caller's. */
DL_SYNC__COLD static int keep_in_graph(dl_sync__guard *guard, const dl_sync__bound *consumer,
                                       const dl_sync__release_target *t) {
  const dl_sync_backend *b = guard->backend;
  if (!dl_sync__backend_available(b, DL_SYNC_OP_GRAPH_RETAIN))
    return dl_sync__error(DL_SYNC_ENOTSUP,
                          "the consumer's stream %p is capturing a graph and the %s runtime has "
                          "no graph user objects to keep the tensor alive with: release it "
                          "after the capture, once the graph is destroyed",
                          consumer->stream.handle, b->name);
  pending *entry = new_entry(t);
  if (entry == NULL) return no_memory();
  int status = dl_sync__graph_retain(guard, consumer, entry, graph_gone);
  entry->abandoned = status != DL_SYNC_OK;
  enqueue(entry, 1); /* polls see it from here on */
  return status == DL_SYNC_OK ? DL_SYNC_RELEASE_GRAPH : status;
}

/* The producer does not order its reuse: the deleter waits for an event of the
   consumer's work. */
static int defer(dl_sync__guard *guard, dl_sync__bound *consumer,
                 const dl_sync__release_target *t) {
  pending *entry = new_entry(t);
  if (entry == NULL) return no_memory();
  dl_sync__pool *pool = NULL;
  int status = dl_sync__pool_for_stream(guard, consumer, &pool);
  if (status == DL_SYNC_OK) status = dl_sync__pool_acquire(pool, guard, &entry->event);
  if (status == DL_SYNC_OK) status = dl_sync__record(guard, entry->event, consumer);
  if (status == DL_SYNC_OK) {
    entry->backend = guard->backend;
    entry->pool = pool;
    status = enqueue(entry, 0);
  }
  if (status == DL_SYNC_OK) return DL_SYNC_RELEASE_DEFERRED;
  if (entry->event != NULL) dl_sync__pool_release(pool, entry->event);
  free(entry);
  return status;
}

/* The producer named its reuse stream: it waits for the consumer's work (one record,
   one wait, a pooled event), unless it is capturing (then the release is deferred). */
static int order_reuse(dl_sync__guard *guard, dl_sync__bound *consumer,
                       const dl_sync__release_target *t) {
  dl_sync__bound bound;
  int status = dl_sync__bind(guard, dl_sync_stream_view(t->reuse.device, t->reuse.handle), &bound);
  if (status != DL_SYNC_OK || dl_sync__same_stream(bound.stream, consumer->stream))
    return status == DL_SYNC_OK ? DL_SYNC_RELEASED_ORDERED : status;
  dl_sync_capture_info info;
  status = dl_sync__capture_query(guard, &bound, &info);
  if (status != DL_SYNC_OK) return status;
  if (info.status == DL_SYNC_CAPTURE_ACTIVE) return defer(guard, consumer, t);
  status = dl_sync__record_and_wait(guard, consumer, &bound);
  return status == DL_SYNC_OK ? DL_SYNC_RELEASED_ORDERED : status;
}

/* consumer: a valid stream of the tensor's device. */
static int release_after(const dl_sync__release_target *t, dl_sync_stream consumer,
                         const dl_sync_backend *b) {
  dl_sync__guard guard;
  dl_sync__guard_init(&guard, b);
  dl_sync__bound bound;
  int status = dl_sync__bind(&guard, dl_sync_stream_view(consumer.device, consumer.handle), &bound);
  dl_sync_capture_info info;
  if (status == DL_SYNC_OK) status = dl_sync__capture_query(&guard, &bound, &info);
  if (status == DL_SYNC_OK)
    status = info.status == DL_SYNC_CAPTURE_ACTIVE ? keep_in_graph(&guard, &bound, t)
             : t->has_reuse                        ? order_reuse(&guard, &bound, t)
                                                   : defer(&guard, &bound, t);
  return dl_sync__guard_end(&guard, consumer.device, status);
}

/* Whether the consumer's stream captures: asked only when releases are pending, whose
   deleters must not run now if it does. */
DL_SYNC__COLD static int captures(dl_sync_stream consumer) {
  const dl_sync_backend *b = NULL;
  if (dl_sync__backend_for(consumer.device, &b) != DL_SYNC_OK) return 0;
  dl_sync__guard guard;
  dl_sync__guard_init(&guard, b);
  dl_sync__bound bound;
  dl_sync_capture_info info = {0};
  int status = dl_sync__bind(&guard, dl_sync_stream_view(consumer.device, consumer.handle), &bound);
  if (status == DL_SYNC_OK) status = dl_sync__capture_query(&guard, &bound, &info);
  status = dl_sync__guard_end(&guard, consumer.device, status);
  return status == DL_SYNC_OK && info.status == DL_SYNC_CAPTURE_ACTIVE;
}

static int check_consumer(const dl_sync__release_target *t, dl_sync_stream consumer) {
  int status = dl_sync__check_device("consumer stream", consumer.device);
  if (status != DL_SYNC_OK) return status;
  if (dl_sync__family(consumer.device.device_type) == DL_SYNC__FAMILY_NONE) {
    if (consumer.handle == NULL || consumer.handle == DL_SYNC_STREAM_NOTHING_PENDING)
      return DL_SYNC_OK;
    return dl_sync__error(DL_SYNC_EINVAL,
                          "the consumer stream %p is on %s:%d, which has no streams: pass NULL "
                          "(nothing is pending there)",
                          consumer.handle, dl_sync__device_type_name(consumer.device.device_type),
                          (int)consumer.device.device_id);
  }
  if (consumer.device.device_type == t->device.device_type &&
      consumer.device.device_id == t->device.device_id)
    return DL_SYNC_OK;
  return dl_sync__error(
      DL_SYNC_EINVAL,
      "tensor %p is on %s:%d and the consumer stream on %s:%d: release it "
      "after the work of a stream of its own device",
      t->tensor, dl_sync__device_type_name(t->device.device_type), (int)t->device.device_id,
      dl_sync__device_type_name(consumer.device.device_type), (int)consumer.device.device_id);
}

static int release(void *tensor, int legacy, dl_sync_stream consumer) {
  dl_sync__release_target t;
  int status = dl_sync__tensor_release_target(tensor, legacy, &t);
  if (status == DL_SYNC_OK) status = check_consumer(&t, consumer);
  if (status == DL_SYNC_OK && is_pending(tensor)) status = already_released(tensor);
  if (status != DL_SYNC_OK) return status;
  int streams = dl_sync__family(consumer.device.device_type) != DL_SYNC__FAMILY_NONE;
  int waits = streams && consumer.handle != DL_SYNC_STREAM_NOTHING_PENDING;
  if (atomic_load_explicit(&dl_sync__releases_pending, memory_order_relaxed) != 0)
    dl_sync__release_poll_later(waits && captures(consumer)); /* earlier releases, done */
  if (waits) {
    const dl_sync_backend *b = NULL;
    status = dl_sync__backend_for(consumer.device, &b);
    if (status == DL_SYNC_OK) status = release_after(&t, consumer, b);
  }
  if (status == DL_SYNC_OK || status == DL_SYNC_RELEASED_ORDERED)
    dl_sync__tensor_delete(tensor, legacy); /* no lock held, on the caller's thread */
  return status;
}

int dl_sync_tensor_release(DLManagedTensorVersioned *tensor, dl_sync_stream consumer) {
  return dl_sync__named("dl_sync_tensor_release", release(tensor, 0, consumer));
}

int dl_sync_legacy_tensor_release(DLManagedTensor *tensor, dl_sync_stream consumer) {
  return dl_sync__named("dl_sync_legacy_tensor_release", release(tensor, 1, consumer));
}
