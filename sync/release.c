/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Release ordering (dlsync/release.h, docs/release.md): a consumer's release of a tensor
 * after the work enqueued so far on its stream, before the producer hands the memory out
 * again, with no host synchronization. A release either orders the producer's reuse stream
 * after the consumer's work and runs the tensor's deleter now, or leaves the deleter to a
 * later call that names it (release_queue.c): behind an event of the consumer's work, or
 * until a capturing consumer's graph is gone. It runs no other tensor's deleter.
 */
#include <stdlib.h>

#include "internal.h"

DL_SYNC__COLD static int no_memory(void) {
  return dl_sync__error(DL_SYNC_ENOMEM, "cannot allocate a release");
}

/* The consumer captures: the graph keeps the tensor until it (and every launch of it) is
   gone. Work enqueued on the stream before the capture began is no part of the graph: the
   caller orders it (dlsync/release.h). When the graph refuses it, the tensor is the
   caller's again. */
DL_SYNC__COLD static int keep_in_graph(dl_sync__guard *guard, const dl_sync__bound *consumer,
                                       const dl_sync__release_target *t) {
  const dl_sync_backend *b = guard->backend;
  if (!dl_sync__backend_available(b, DL_SYNC_OP_GRAPH_RETAIN))
    return dl_sync__error(DL_SYNC_ENOTSUP,
                          "the consumer's stream %p is capturing a graph and the %s runtime has "
                          "no graph user objects to keep the tensor alive with: release it "
                          "after the capture, once the graph is destroyed",
                          consumer->stream.handle, b->name);
  dl_sync__pending *p = dl_sync__pending_new(t->tensor, t->legacy);
  if (p == NULL) return no_memory();
  int status = dl_sync__pending_keep(p);
  if (status != DL_SYNC_OK) {
    free(p);
    return status;
  }
  status = dl_sync__graph_retain(guard, consumer, p, dl_sync__pending_graph_gone);
  if (status != DL_SYNC_OK) {
    dl_sync__pending_abandon(p);
    return status;
  }
  dl_sync__pending_kept(p);
  return DL_SYNC_RELEASE_GRAPH;
}

/* Whether consumer captures now: asked after a capture refused the release's own stream
   its wait for the consumer's event (HIP refuses it while the event's recording stream
   captures, which another thread may begin at any moment). */
static int captures_now(dl_sync__guard *guard, const dl_sync__bound *consumer) {
  dl_sync_capture_info info = {0};
  dl_sync__quiet(1);
  int status = dl_sync__capture_query(guard, consumer, &info);
  dl_sync__quiet(0);
  return status == DL_SYNC_OK && info.status == DL_SYNC_CAPTURE_ACTIVE;
}

/* The runtime's identity of the consumer's stream, which keys its queue: a destroyed
   stream's handle may come back for a new stream, whose releases must not wait behind the
   old one's. A default stream keeps its key (its context, or its thread); no id, or a
   failed ask, leaves the handle alone as the key. */
static uint64_t stream_id_of(const dl_sync_backend *b, const dl_sync__bound *consumer) {
  uint64_t id = 0;
  if (consumer->is_default || !dl_sync__backend_has_stream_id(b)) return 0;
  return b->stream_id(b->ctx, consumer->stream.handle, &id) == 0 ? id : 0;
}

/* The producer does not order its reuse: the deleter waits for an event of the consumer's
   work, recorded on the consumer's stream, or, where the backend's queries read the
   recording stream (HIP), on a stream of dlsync's own after the consumer's work
   (release_watch.c). A capture begun on the consumer's stream since the release looked
   refuses that wait: the release then goes to the capture's graph, as one made a moment
   later would (its event is not asked about: that would break the capture). */
static int defer(dl_sync__guard *guard, dl_sync__bound *consumer,
                 const dl_sync__release_target *t) {
  dl_sync__pending *p = dl_sync__pending_new(t->tensor, t->legacy);
  if (p == NULL) return no_memory();
  dl_sync__pool *pool = NULL;
  dl_sync__watch *watch = NULL;
  void *event = NULL;
  int owns = dl_sync__backend_owns_streams(guard->backend);
  int status = owns ? dl_sync__watch_record(guard, consumer, &watch, &pool, &event)
                    : dl_sync__pool_acquire_recorded(guard, consumer, &pool, &event);
  if (status == DL_SYNC_ECAPTURE && owns && event == NULL && captures_now(guard, consumer)) {
    free(p);
    return keep_in_graph(guard, consumer, t);
  }
  if (status == DL_SYNC_OK)
    status = dl_sync__pending_defer(p, guard->backend, pool, event, watch, consumer,
                                    stream_id_of(guard->backend, consumer));
  if (status == DL_SYNC_OK) return DL_SYNC_RELEASE_DEFERRED;
  if (event != NULL) dl_sync__pool_release(pool, event);
  free(p);
  return status;
}

/* The reuse stream as the producer named it: a legacy one in the context that was current
   then (minor 3 of the owner record), never in the releasing thread's. 0 when it cannot be
   named now: a record that does not say which context (an older copy's), or a context
   destroyed or reset since (its memory went with it). */
static int bind_reuse(dl_sync__guard *guard, const dl_sync__release_target *t,
                      dl_sync__bound *out) {
  dl_sync_stream reuse = dl_sync_stream_view(t->reuse.device, t->reuse.handle);
  if (t->reuse.device.device_id != t->device.device_id ||
      dl_sync__family(t->reuse.device.device_type) != dl_sync__family(t->device.device_type))
    return 0; /* a record (another copy's) naming a stream of another device: not ours to order */
  if (!guard->contexts || !dl_sync__is_default_stream(reuse.handle))
    return dl_sync__bind(guard, reuse, out) == DL_SYNC_OK;
  const dl_sync_backend *b = guard->backend;
  uint64_t now = 0;
  if (t->reuse_context_id == 0 || b->context_id(b->ctx, t->reuse_context, &now) != 0 ||
      now != t->reuse_context_id)
    return 0;
  *out = (dl_sync__bound){.stream = reuse,
                          .is_default = 1,
                          .context = t->reuse_context,
                          .context_id = t->reuse_context_id,
                          .identified = 1};
  return 1;
}

/* One stream: one handle of one device, and for default handles one context. */
static int same_stream(const dl_sync__bound *a, const dl_sync__bound *b) {
  return dl_sync__same_stream(a->stream, b->stream) && (!a->is_default || a->context == b->context);
}

/* The producer named its reuse stream: it waits for the consumer's work (one record, one
   wait, a pooled event). A reuse stream that cannot be named, or is capturing (the wait
   would pull it into the capture, or break it), or whose state cannot be asked, gets no
   wait: the release is deferred instead. */
static int order_reuse(dl_sync__guard *guard, dl_sync__bound *consumer,
                       const dl_sync__release_target *t) {
  dl_sync__bound reuse;
  dl_sync_capture_info info = {0};
  dl_sync__quiet(1); /* a reuse stream that cannot be ordered is deferred, not an error */
  int usable = bind_reuse(guard, t, &reuse) &&
               (same_stream(&reuse, consumer) ||
                (dl_sync__capture_query(guard, &reuse, &info) == DL_SYNC_OK &&
                 info.status == DL_SYNC_CAPTURE_NONE));
  dl_sync__quiet(0);
  if (!usable) return defer(guard, consumer, t);
  if (same_stream(&reuse, consumer)) return DL_SYNC_RELEASED_ORDERED;
  int status = dl_sync__record_and_wait(guard, consumer, &reuse);
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

/* The consumer's stream is one of the tensor's own device; on a device without streams,
   none (NULL or DL_SYNC_STREAM_NOTHING_PENDING). */
static int check_consumer(const dl_sync__release_target *t, dl_sync_stream consumer) {
  int status = dl_sync__check_device("consumer stream", consumer.device);
  if (status != DL_SYNC_OK) return status;
  if (consumer.device.device_type != t->device.device_type ||
      consumer.device.device_id != t->device.device_id)
    return dl_sync__error(
        DL_SYNC_EINVAL,
        "tensor %p is on %s:%d and the consumer stream on %s:%d: release it "
        "after the work of a stream of its own device (DL_SYNC_STREAM_NOTHING_PENDING on it "
        "when no work of yours reads it)",
        t->tensor, dl_sync__device_type_name(t->device.device_type), (int)t->device.device_id,
        dl_sync__device_type_name(consumer.device.device_type), (int)consumer.device.device_id);
  if (dl_sync__family(consumer.device.device_type) != DL_SYNC__FAMILY_NONE ||
      consumer.handle == NULL || consumer.handle == DL_SYNC_STREAM_NOTHING_PENDING)
    return DL_SYNC_OK;
  return dl_sync__error(DL_SYNC_EINVAL,
                        "the consumer stream %p is on %s:%d, which has no streams: pass NULL "
                        "(nothing is pending there)",
                        consumer.handle, dl_sync__device_type_name(consumer.device.device_type),
                        (int)consumer.device.device_id);
}

static int release(void *tensor, int legacy, dl_sync_stream consumer) {
  dl_sync__release_target t;
  int status = dl_sync__tensor_release_target(tensor, legacy, &t);
  if (status == DL_SYNC_OK) status = check_consumer(&t, consumer);
  if (status == DL_SYNC_OK) status = dl_sync__release_check_new(tensor);
  if (status != DL_SYNC_OK) return status;
  if (dl_sync__family(consumer.device.device_type) != DL_SYNC__FAMILY_NONE &&
      consumer.handle != DL_SYNC_STREAM_NOTHING_PENDING) {
    const dl_sync_backend *b = NULL;
    status = dl_sync__backend_for(consumer.device, &b);
    if (status == DL_SYNC_OK) status = release_after(&t, consumer, b);
  }
  if (status == DL_SYNC_RELEASED_NOW || status == DL_SYNC_RELEASED_ORDERED)
    dl_sync__tensor_delete(tensor, legacy); /* its own deleter: no lock held, this thread */
  return status;
}

int dl_sync_tensor_release(DLManagedTensorVersioned *tensor, dl_sync_stream consumer) {
  return dl_sync__named("dl_sync_tensor_release", release(tensor, 0, consumer));
}

int dl_sync_legacy_tensor_release(DLManagedTensor *tensor, dl_sync_stream consumer) {
  return dl_sync__named("dl_sync_legacy_tensor_release", release(tensor, 1, consumer));
}
