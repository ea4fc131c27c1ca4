/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer: the stream-argument conventions for any device type, id and value. A decoded
   stream must encode back to an argument that decodes to the same stream. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dlsync/dlsync.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct {
    int32_t device_type, device_id;
    uint8_t is_none;
    int64_t value;
  } in = {0};
  memcpy(&in, data, size < sizeof in ? size : sizeof in);
  DLDevice device = {(DLDeviceType)in.device_type, in.device_id};
  dl_sync_stream_arg arg =
      in.is_none & 1 ? dl_sync_stream_arg_none() : dl_sync_stream_arg_int(in.value);
  dl_sync_stream stream;
  int needs_sync = 0;
  int status = dl_sync_stream_from_arg(device, arg, &stream, &needs_sync);
  if (dl_sync_last_error() == NULL || dl_sync_status_name(status) == NULL) abort();
  if (status != DL_SYNC_OK || !needs_sync) return 0;
  dl_sync_stream_arg again;
  if (dl_sync_stream_to_arg(stream, &again) != DL_SYNC_OK) abort();
  dl_sync_stream decoded;
  if (dl_sync_stream_from_arg(device, again, &decoded, &needs_sync) != DL_SYNC_OK) abort();
  if (!needs_sync || decoded.handle != stream.handle) abort();
  return 0;
}
