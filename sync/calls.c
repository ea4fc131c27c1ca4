/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The backend calls that act on one stream, in one place for dependencies, tensor events
 * and groups: a default stream's device is made current first (its handle names that
 * device's stream), and a failure becomes a status with its message.
 */
#include "internal.h"

int dl_sync__record(const dl_sync_backend *b, dl_sync__device_guard *guard, void *event,
                    dl_sync_stream stream) {
  int status = dl_sync__device_guard_use_stream(guard, stream);
  if (status != DL_SYNC_OK) return status;
  int code = b->event_record(b->ctx, event, stream.handle);
  return code == 0 ? DL_SYNC_OK
                   : dl_sync__runtime_error(b, DL_SYNC_OP_EVENT_RECORD, code, stream.device);
}

int dl_sync__wait(const dl_sync_backend *b, dl_sync__device_guard *guard, dl_sync_stream stream,
                  void *event) {
  int status = dl_sync__device_guard_use_stream(guard, stream);
  if (status != DL_SYNC_OK) return status;
  int code = b->stream_wait(b->ctx, stream.handle, event);
  return code == 0 ? DL_SYNC_OK
                   : dl_sync__runtime_error(b, DL_SYNC_OP_STREAM_WAIT, code, stream.device);
}

int dl_sync__wait_external(const dl_sync_backend *b, dl_sync__device_guard *guard,
                           dl_sync_stream stream, void *event, void *object,
                           void (*release)(void *object)) {
  /* The graph is the stream's: made on its device, where a default handle names it. */
  int status = dl_sync__device_guard_use_stream(guard, stream);
  if (status != DL_SYNC_OK) {
    release(object);
    return status;
  }
  dl_sync__pin_code(); /* the graph calls release, maybe after a dlclose of this copy */
  int code = b->graph_retain(b->ctx, stream.handle, object, release);
  if (code != 0) return dl_sync__runtime_error(b, DL_SYNC_OP_GRAPH_RETAIN, code, stream.device);
  code = b->stream_wait_external(b->ctx, stream.handle, event);
  return code == 0
             ? DL_SYNC_OK
             : dl_sync__runtime_error(b, DL_SYNC_OP_STREAM_WAIT_EXTERNAL, code, stream.device);
}
