/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dl_sync_push_dep and dl_sync_export: order a producer's stream before a consumer's,
 * following the capture table (docs/design.md, "Capture").
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "internal.h"

static atomic_int capture_policy = DL_SYNC_CAPTURE_STRICT;

typedef dl_sync__dep dep;

int dl_sync__dep_dst_capture(dep *d, const dl_sync_capture_info **info) {
  if (!d->dst_queried) {
    int status = dl_sync__capture_query(&d->guard, &d->dst, &d->dst_capture);
    if (status != DL_SYNC_OK) return status;
    d->dst_queried = 1;
  }
  *info = &d->dst_capture;
  return DL_SYNC_OK;
}

/* The steady-state path: a pooled event, recorded, waited on, given back at once. */
int dl_sync__record_and_wait(dl_sync__guard *guard, dl_sync__bound *src,
                             const dl_sync__bound *dst) {
  dl_sync__borrowed event;
  int status = dl_sync__identify(guard, src);
  if (status == DL_SYNC_OK) status = dl_sync__pool_borrow_recorded(guard, src, &event);
  if (status != DL_SYNC_OK) return status;
  status = dl_sync__wait(guard, dst, event.event);
  dl_sync__pool_return(&event);
  return status;
}

static int record_and_wait(dep *d) {
  return dl_sync__record_and_wait(&d->guard, &d->src, &d->dst);
}

/* An event owned by a captured graph until the graph is destroyed. */
typedef struct graph_event {
  dl_sync__pool *pool;
  void *event;
} graph_event;

/* Runs where no runtime call is allowed, on any thread: straight back to the pool, never
   to the cache of the thread it happens to run on. */
static void graph_event_release(void *object) {
  graph_event *owned = object;
  dl_sync__pool_release(owned->pool, owned->event);
  free(owned);
}

/* src is not capturing, dst is: a plain wait would break dst's capture (isolation), so
   the graph gets an external event-wait node on an event that it owns. */
DL_SYNC__COLD static int wait_external(dep *d) {
  int status = dl_sync__external_wait_usable(d->backend, d->dst.stream.handle);
  if (status != DL_SYNC_OK) return status;
  graph_event *owned = malloc(sizeof *owned);
  if (owned == NULL) return dl_sync__error(DL_SYNC_ENOMEM, "cannot allocate a graph-owned event");
  status = dl_sync__pool_acquire_recorded(&d->guard, &d->src, &owned->pool, &owned->event);
  if (status != DL_SYNC_OK) {
    free(owned);
    return status;
  }
  /* The graph owns the event from here on, whatever happens next. */
  return dl_sync__wait_external(&d->guard, &d->dst, owned->event, owned, graph_event_release);
}

DL_SYNC__COLD static int legacy_stream_under_capture(dep *d) {
  if (d->none_arg && atomic_load(&capture_policy) == DL_SYNC_CAPTURE_NONE_IS_NO_SYNC)
    return DL_SYNC_OK;
  return dl_sync__error(
      DL_SYNC_ECAPTURE,
      "the consumer asked for the legacy default stream (stream=None, or "
      "%s) while the producer's stream %p is capturing a graph, and the "
      "legacy stream cannot join a capture: pass the producer's current "
      "work stream, or -1",
      dl_sync__family(d->dst.stream.device.device_type) == DL_SYNC__FAMILY_ROCM ? "0" : "1",
      d->src.stream.handle);
}

static int is_legacy(dl_sync_stream stream) {
  return stream.handle == (dl_sync__family(stream.device.device_type) == DL_SYNC__FAMILY_CUDA
                               ? DL_SYNC_STREAM_LEGACY
                               : NULL);
}

int dl_sync__dep_order(dep *d) {
  dl_sync_capture_info src_capture;
  const dl_sync_capture_info *dst_capture = NULL;
  int status = dl_sync__capture_query(&d->guard, &d->src, &src_capture);
  if (status != DL_SYNC_OK) return status;
  int src_capturing = src_capture.status == DL_SYNC_CAPTURE_ACTIVE;
  if (src_capturing && is_legacy(d->dst.stream)) return legacy_stream_under_capture(d);

  status = dl_sync__dep_dst_capture(d, &dst_capture);
  if (status != DL_SYNC_OK) return status;
  /* A query that answers DL_SYNC_OK has filled the capture state (capture.c, which the
     analyzer does not see). NOLINTNEXTLINE(clang-analyzer-core.UndefinedBinaryOperatorResult) */
  int dst_capturing = dst_capture->status == DL_SYNC_CAPTURE_ACTIVE;
  if (!src_capturing) return dst_capturing ? wait_external(d) : record_and_wait(d);
  if (dst_capturing && dst_capture->id == src_capture.id) return record_and_wait(d);
  if (dst_capturing)
    return dl_sync__error(DL_SYNC_ECAPTURE,
                          "the producer's stream %p and the consumer's stream %p are "
                          "capturing two different graphs, which cannot be joined: capture "
                          "both in one graph",
                          d->src.stream.handle, d->dst.stream.handle);
  return dl_sync__error(DL_SYNC_ECAPTURE,
                        "the producer's stream %p is capturing a graph and the consumer's "
                        "stream %p is not: the wait would pull the consumer's stream into "
                        "the capture. Run the consumer on the producer's current work "
                        "stream, or capture both",
                        d->src.stream.handle, d->dst.stream.handle);
}

int dl_sync__dep_init(dep *d, const dl_sync_backend *backend, dl_sync_stream dst, int none_arg) {
  d->backend = backend;
  d->none_arg = none_arg;
  d->dst_queried = 0;
  dl_sync__guard_init(&d->guard, backend);
  return dl_sync__bind(&d->guard, dst, &d->dst);
}

int dl_sync__dep_set_source(dep *d, dl_sync_stream src) {
  return dl_sync__bind(&d->guard, src, &d->src);
}

/* src before dst: canonical views of valid devices of one family with streams, served by
   backend, two different streams. */
static int order(const dl_sync_backend *backend, dl_sync_stream src, dl_sync_stream dst,
                 int none_arg) {
  dep d;
  int status = dl_sync__dep_init(&d, backend, dst, none_arg);
  if (status == DL_SYNC_OK) status = dl_sync__dep_set_source(&d, src);
  if (status == DL_SYNC_OK) status = dl_sync__dep_order(&d);
  return dl_sync__guard_end(&d.guard, src.device, status);
}

int dl_sync__push_dep(dl_sync_stream src, dl_sync_stream dst) {
  int status = dl_sync__check_device("src", src.device);
  if (status == DL_SYNC_OK) status = dl_sync__check_device("dst", dst.device);
  if (status != DL_SYNC_OK) return status;
  int family = dl_sync__family(src.device.device_type);
  if (family != dl_sync__family(dst.device.device_type))
    return dl_sync__error(
        DL_SYNC_EINVAL,
        "src is on %s:%d and dst on %s:%d: streams of different device families cannot wait on "
        "each other",
        dl_sync__device_type_name(src.device.device_type), (int)src.device.device_id,
        dl_sync__device_type_name(dst.device.device_type), (int)dst.device.device_id);
  if (family == DL_SYNC__FAMILY_NONE) return DL_SYNC_OK; /* no streams, nothing to order */
  src = dl_sync_stream_view(src.device, src.handle);
  dst = dl_sync_stream_view(dst.device, dst.handle);
  if (dl_sync__same_stream(src, dst)) return DL_SYNC_OK; /* ordered with itself */

  const dl_sync_backend *backend = NULL;
  status = dl_sync__backend_for(src.device, &backend);
  if (status != DL_SYNC_OK) return status;
  const dl_sync_backend *dst_backend = dl_sync_get_backend(dst.device.device_type);
  if (dst_backend != backend)
    return dl_sync__error(DL_SYNC_EINVAL,
                          "src (%s) and dst (%s) are served by different backends ('%s' and '%s')",
                          dl_sync__device_type_name(src.device.device_type),
                          dl_sync__device_type_name(dst.device.device_type), backend->name,
                          dst_backend != NULL ? dst_backend->name : "none");
  return order(backend, src, dst, 0);
}

int dl_sync_push_dep(dl_sync_stream src, dl_sync_stream dst) {
  return dl_sync__named("dl_sync_push_dep", dl_sync__push_dep(src, dst));
}

/* A valid device of a family with streams: the stream argument is then read by the table
   alone. */
static int streams_on(DLDevice device) {
  uint32_t type = (uint32_t)device.device_type;
  return type < 32 && ((DL_SYNC__CUDA_TYPES | DL_SYNC__ROCM_TYPES) >> type & 1u) &&
         device.device_id >= 0 && device.device_id < DL_SYNC_MAX_DEVICES;
}

/* The cases that need no runtime: -1, and the producer's own stream. */
static int needs_no_sync(dl_sync_stream producer, dl_sync_stream_arg consumer) {
  return streams_on(producer.device) && (dl_sync__arg_asks_no_sync(consumer) ||
                                         (dl_sync__arg_is_handle(consumer) &&
                                          (uintptr_t)consumer.value == (uintptr_t)producer.handle));
}

/* The consumer's stream, read from the table alone; *needs_order is 0 when there is
   nothing to order (-1, a device without streams, the producer's own stream). */
static int resolve(dl_sync_stream *producer, dl_sync_stream_arg consumer,
                   dl_sync_stream *consumer_stream, int *needs_order) {
  *consumer_stream = (dl_sync_stream){producer->device, (void *)(uintptr_t)consumer.value};
  *needs_order = 0;
  if (!streams_on(producer->device) || !dl_sync__arg_is_handle(consumer)) {
    int needs_sync = 0;
    int status = dl_sync__stream_from_arg(producer->device, consumer, consumer_stream, &needs_sync);
    if (status != DL_SYNC_OK || !needs_sync) return status;
  }
  /* The device is valid now, and the consumer's is the producer's. */
  *producer = dl_sync_stream_view(producer->device, producer->handle);
  *needs_order = producer->handle != consumer_stream->handle;
  return DL_SYNC_OK;
}

static int export_through_backend(dl_sync_stream producer, dl_sync_stream_arg consumer) {
  dl_sync_stream consumer_stream;
  int needs_order = 0;
  int status = resolve(&producer, consumer, &consumer_stream, &needs_order);
  if (status != DL_SYNC_OK || !needs_order) return status;
  const dl_sync_backend *backend = NULL;
  status = dl_sync__backend_for(producer.device, &backend);
  if (status != DL_SYNC_OK) return status;
  return order(backend, producer, consumer_stream, consumer.is_none);
}

/* Kept out of line, so that the cases without a runtime call pay for no stack frame;
   flatten: the whole ordering inlined here, the hot path without calls of its own. */
DL_SYNC__NOINLINE DL_SYNC__FLATTEN static int export_named(dl_sync_stream producer,
                                                           dl_sync_stream_arg consumer) {
  return dl_sync__named("dl_sync_export", export_through_backend(producer, consumer));
}

int dl_sync_export(dl_sync_stream producer, dl_sync_stream_arg consumer) {
  return needs_no_sync(producer, consumer) ? DL_SYNC_OK : export_named(producer, consumer);
}

int dl_sync_export_calls_runtime(dl_sync_stream producer, dl_sync_stream_arg consumer) {
  if (!streams_on(producer.device) || needs_no_sync(producer, consumer)) return 0;
  if (dl_sync__arg_is_handle(consumer)) return 1; /* another stream than the producer's */
  dl_sync_stream consumer_stream;
  int needs_order = 0;
  dl_sync__quiet(1); /* an argument the export refuses is the export's to report */
  int status = resolve(&producer, consumer, &consumer_stream, &needs_order);
  dl_sync__quiet(0);
  return status == DL_SYNC_OK && needs_order;
}

int dl_sync_set_capture_policy(int policy) {
  if (policy != DL_SYNC_CAPTURE_STRICT && policy != DL_SYNC_CAPTURE_NONE_IS_NO_SYNC)
    return dl_sync__named("dl_sync_set_capture_policy",
                          dl_sync__error(DL_SYNC_EINVAL,
                                         "policy %d: expected DL_SYNC_CAPTURE_STRICT (0) or "
                                         "DL_SYNC_CAPTURE_NONE_IS_NO_SYNC (1)",
                                         policy));
  atomic_store(&capture_policy, policy);
  return DL_SYNC_OK;
}

int dl_sync_get_capture_policy(void) {
  return atomic_load(&capture_policy);
}
