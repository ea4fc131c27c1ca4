/* SPDX-License-Identifier: Apache-2.0 */
/* A stream's graph-capture state, as every path asks for it (docs/design.md, "Capture"). */
#include "internal.h"

int dl_sync__capture_usable(dl_sync_stream stream, const dl_sync_capture_info *info) {
  if (info->status != DL_SYNC_CAPTURE_INVALIDATED) return DL_SYNC_OK;
  return dl_sync__error(DL_SYNC_ECAPTURE,
                        "stream %p on %s:%d belongs to an invalidated graph capture: end that "
                        "capture and start again",
                        stream.handle, dl_sync__device_type_name(stream.device.device_type),
                        (int)stream.device.device_id);
}

int dl_sync__capture_query(dl_sync__guard *guard, const dl_sync__bound *stream,
                           dl_sync_capture_info *info) {
  const dl_sync_backend *b = guard->backend;
  int status = dl_sync__guard_enter(guard, stream);
  if (status != DL_SYNC_OK) return status;
  *info = (dl_sync_capture_info){0};
  int code = b->capture_info(b->ctx, stream->stream.handle, info);
  if (code != 0)
    return dl_sync__runtime_error(b, DL_SYNC_OP_CAPTURE_INFO, code, stream->stream.device);
  return dl_sync__capture_usable(stream->stream, info);
}
