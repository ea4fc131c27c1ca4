/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The watched event of a deferred release, for a backend whose event queries read the
 * event's last recording stream (own_stream_create: HIP). Asking about an event recorded on
 * the consumer's stream would then read a stream dlsync does not own: one another thread
 * may begin capturing at any moment (the query invalidates that capture), one destroyed
 * since (freed memory), or a per-thread stream the asking thread cannot name. So the
 * release records an event on the consumer's stream (E1), makes a stream of dlsync's own
 * wait for it, and records there the event it keeps (E2): polls, the release thread and
 * dl_sync_shutdown ask only E2, whose stream never captures, lives as long as dlsync and
 * is the same stream from every thread. One wait, one record and one capture query of the
 * consumer's stream (after its record: release.c's came before) more per deferred release.
 *
 * One such stream per event pool (device and context), made at the pool's first deferred
 * release and destroyed by dl_sync_shutdown with the pool, or, when releases still wait on it
 * then, by the poll that finishes the last of them; a forked child forgets it with
 * the pools. The stream runs the waits in order, so a release is finished no earlier than
 * the releases deferred before it on the same device, whatever their consumer streams.
 * Only a device reset, which destroys every stream of the device (dl_sync_shutdown is to
 * come first), takes it from dlsync: a poll checks it once per pass before asking its
 * events, and a stream found gone is never read again (its releases are final failures).
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "event_pool.h"
#include "internal.h"

static int make_watch(dl_sync__guard *guard, dl_sync__pool *pool, dl_sync__watch *before,
                      dl_sync__watch **out) {
  const dl_sync_backend *b = pool->backend;
  dl_sync__watch *w = calloc(1, sizeof *w);
  if (w == NULL)
    return dl_sync__error(DL_SYNC_ENOMEM, "cannot allocate the release stream of %s:%d",
                          dl_sync__device_type_name(pool->device.device_type),
                          (int)pool->device.device_id);
  int status = dl_sync__guard_use_to_create(guard, pool->device, pool->context, pool->context_id,
                                            pool->exclusive);
  int code = status == DL_SYNC_OK ? b->own_stream_create(b->ctx, &w->stream) : 0;
  if (code != 0)
    status = dl_sync__runtime_error(b, DL_SYNC_OP_OWN_STREAM_CREATE, code, pool->device);
  if (status != DL_SYNC_OK) {
    free(w);
    return status;
  }
  w->before = before;
  dl_sync__watch *expected = before;
  if (atomic_compare_exchange_strong(&pool->watch, &expected, w)) {
    *out = w;
    return DL_SYNC_OK;
  }
  b->own_stream_destroy(b->ctx, w->stream); /* another thread made one first */
  free(w);
  *out = expected;
  return DL_SYNC_OK;
}

/* The pool's stream, made when it has none or its last one is gone. */
static int watch_of(dl_sync__guard *guard, dl_sync__pool *pool, dl_sync__watch **out) {
  dl_sync__watch *w = atomic_load_explicit(&pool->watch, memory_order_acquire);
  if (w != NULL && !atomic_load_explicit(&w->gone, memory_order_relaxed)) {
    *out = w;
    return DL_SYNC_OK;
  }
  return make_watch(guard, pool, w, out);
}

static dl_sync__bound watch_bound(const dl_sync__pool *pool, const dl_sync__watch *w) {
  return (dl_sync__bound){.stream = dl_sync_stream_view(pool->device, w->stream),
                          .context = pool->context,
                          .context_id = pool->context_id,
                          .identified = 1};
}

/* The own stream waits for the consumer's work (E1, a borrowed event given back at once:
   the wait binds the record it holds now). A wait refused because the stream is gone
   (a device reset) makes a new one, once. A capture another thread began on the consumer's
   stream before the record took E1 into it, and a wait for a captured event would pull the
   own stream into that capture (HIP: clr rocm-6.2.0 hip_stream.cpp
   hipStreamWaitEvent_common): the consumer's capture state is asked after the record, and
   a capture refuses the release here (ECAPTURE: release.c gives it to the graph). One
   begun after that question makes HIP refuse the wait itself (the same ECAPTURE). */
static int wait_on_own_stream(dl_sync__guard *guard, dl_sync__bound *consumer,
                              dl_sync__watch **watch, dl_sync__pool **pool) {
  dl_sync__borrowed e1;
  int status = dl_sync__pool_borrow_recorded(guard, consumer, &e1);
  if (status != DL_SYNC_OK) return status;
  *pool = e1.pool;
  const dl_sync_backend *b = guard->backend;
  dl_sync_capture_info info = {0};
  status = dl_sync__capture_query(guard, consumer, &info);
  if (status == DL_SYNC_OK && info.status != DL_SYNC_CAPTURE_NONE)
    status = dl_sync__error(DL_SYNC_ECAPTURE,
                            "the consumer's stream %p began a capture during the release: "
                            "dlsync's own stream may not wait for its work",
                            consumer->stream.handle);
  for (int attempt = 0; status == DL_SYNC_OK; attempt++) {
    status = watch_of(guard, e1.pool, watch);
    if (status != DL_SYNC_OK) break;
    dl_sync__bound own = watch_bound(e1.pool, *watch);
    int code = 0;
    status = dl_sync__guard_enter(guard, &own);
    if (status == DL_SYNC_OK) code = b->stream_wait(b->ctx, own.stream.handle, e1.event);
    if (code == 0) break;
    if (attempt == 0 && b->own_stream_check(b->ctx, (*watch)->stream) != 0) {
      atomic_store(&(*watch)->gone, 1);
      continue;
    }
    status = dl_sync__runtime_error(b, DL_SYNC_OP_STREAM_WAIT, code, own.stream.device);
    break;
  }
  dl_sync__pool_return(&e1);
  return status;
}

int dl_sync__watch_record(dl_sync__guard *guard, dl_sync__bound *consumer, dl_sync__watch **watch,
                          dl_sync__pool **pool, void **event) {
  *watch = NULL;
  *event = NULL;
  dl_sync__pool *consumer_pool = NULL;
  int status = wait_on_own_stream(guard, consumer, watch, &consumer_pool);
  if (status != DL_SYNC_OK) return status;
  dl_sync__bound own = watch_bound(consumer_pool, *watch);
  return dl_sync__pool_acquire_recorded(guard, &own, pool, event);
}

int dl_sync__watch_usable(const dl_sync_backend *b, dl_sync__watch *w, unsigned pass) {
  if (atomic_load_explicit(&w->gone, memory_order_relaxed)) return 0;
  if (atomic_exchange_explicit(&w->checked, pass, memory_order_relaxed) == pass) return 1;
  if (b->own_stream_check(b->ctx, w->stream) == 0) return 1;
  atomic_store(&w->gone, 1);
  return 0;
}
