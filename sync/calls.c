/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The backend calls that act on one stream, in one place for dependencies, tensor events
 * and groups: a default stream's context (device) is made current first (its handle names
 * that context's stream), and a failure becomes a status with its message.
 */
#include "internal.h"

int dl_sync__record_pooled(dl_sync__guard *guard, void *event, const dl_sync__bound *stream,
                           int *gone) {
  const dl_sync_backend *b = guard->backend;
  int status = dl_sync__guard_enter(guard, stream);
  if (status != DL_SYNC_OK) return status;
  int code = b->event_record(b->ctx, event, stream->stream.handle);
  if (code == 0) return DL_SYNC_OK;
  /* The stream was asked about before (its capture state), so the event is what is gone. */
  if (gone != NULL && dl_sync__backend_has_event_gone(b) && b->event_gone(b->ctx, code)) {
    *gone = 1;
    return DL_SYNC_EBACKEND;
  }
  return dl_sync__runtime_error(b, DL_SYNC_OP_EVENT_RECORD, code, stream->stream.device);
}

int dl_sync__record(dl_sync__guard *guard, void *event, const dl_sync__bound *stream) {
  return dl_sync__record_pooled(guard, event, stream, NULL);
}

int dl_sync__wait(dl_sync__guard *guard, const dl_sync__bound *stream, void *event) {
  const dl_sync_backend *b = guard->backend;
  int status = dl_sync__guard_enter(guard, stream);
  if (status != DL_SYNC_OK) return status;
  int code = b->stream_wait(b->ctx, stream->stream.handle, event);
  return code == 0 ? DL_SYNC_OK
                   : dl_sync__runtime_error(b, DL_SYNC_OP_STREAM_WAIT, code, stream->stream.device);
}

int dl_sync__graph_retain(dl_sync__guard *guard, const dl_sync__bound *stream, void *object,
                          void (*release)(void *object)) {
  const dl_sync_backend *b = guard->backend;
  /* The graph is the stream's: found in its context, where a default handle names it. */
  int status = dl_sync__guard_enter(guard, stream);
  if (status != DL_SYNC_OK) {
    release(object);
    return status;
  }
  dl_sync__pin_this_copy(); /* the graph calls release, maybe after a dlclose of this copy */
  int code = b->graph_retain(b->ctx, stream->stream.handle, object, release);
  return code == 0
             ? DL_SYNC_OK
             : dl_sync__runtime_error(b, DL_SYNC_OP_GRAPH_RETAIN, code, stream->stream.device);
}

int dl_sync__external_wait_usable(const dl_sync_backend *b, const void *consumer_stream) {
  int waits = dl_sync__backend_available(b, DL_SYNC_OP_STREAM_WAIT_EXTERNAL);
  if (waits && dl_sync__backend_available(b, DL_SYNC_OP_GRAPH_RETAIN)) return DL_SYNC_OK;
  return dl_sync__error(DL_SYNC_ENOTSUP,
                        "the consumer's stream %p is capturing a graph and the %s runtime has "
                        "no %s: capture the producer's work too, or export with stream=-1 "
                        "and synchronize before the capture",
                        consumer_stream, b->name,
                        waits ? "graph user objects" : "external event-wait nodes");
}

int dl_sync__wait_external(dl_sync__guard *guard, const dl_sync__bound *stream, void *event,
                           void *object, void (*release)(void *object)) {
  const dl_sync_backend *b = guard->backend;
  DLDevice device = stream->stream.device;
  int status = dl_sync__graph_retain(guard, stream, object, release);
  if (status != DL_SYNC_OK) return status;
  int code = b->stream_wait_external(b->ctx, stream->stream.handle, event);
  return code == 0 ? DL_SYNC_OK
                   : dl_sync__runtime_error(b, DL_SYNC_OP_STREAM_WAIT_EXTERNAL, code, device);
}
