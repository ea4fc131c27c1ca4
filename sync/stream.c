/* SPDX-License-Identifier: Apache-2.0 */
/* Stream views and the __dlpack__(stream=...) conventions (docs/design.md, "The ideas"). */
#include <stdint.h>

#include "internal.h"

dl_sync_stream dl_sync_stream_view(DLDevice device, void *native_stream) {
  return (dl_sync_stream){.device = device,
                          .handle = dl_sync__canonical_handle(device, native_stream)};
}

dl_sync_stream dl_sync_stream_view_per_thread_default(DLDevice device, void *native_stream) {
  if (native_stream == NULL && dl_sync__family(device.device_type) != DL_SYNC__FAMILY_NONE &&
      dl_sync__family(device.device_type) != DL_SYNC__FAMILY_UNKNOWN)
    native_stream = DL_SYNC_STREAM_PER_THREAD;
  return dl_sync_stream_view(device, native_stream);
}

dl_sync_stream_arg dl_sync_stream_arg_none(void) {
  return (dl_sync_stream_arg){.is_none = 1};
}

dl_sync_stream_arg dl_sync_stream_arg_int(int64_t value) {
  return (dl_sync_stream_arg){.is_none = 0, .value = value};
}

static int handle_from_value(DLDevice device, int64_t value, void **out) {
  if ((uint64_t)value > (uint64_t)UINTPTR_MAX)
    return dl_sync__error(DL_SYNC_EINVAL, "stream=%lld does not fit a pointer on %s:%d",
                          (long long)value, dl_sync__device_type_name(device.device_type),
                          (int)device.device_id);
  *out = (void *)(uintptr_t)value;
  return DL_SYNC_OK;
}

/* The table's other rows, with the error for each value it refuses. */
static int cuda_from_value(DLDevice device, int64_t value, void **out) {
  const char *type = dl_sync__device_type_name(device.device_type);
  switch (value) {
    case 0:
      return dl_sync__error(DL_SYNC_EINVAL,
                            "stream=0 is ambiguous on %s:%d: pass 1 (legacy default), "
                            "2 (per-thread default) or a stream handle",
                            type, (int)device.device_id);
    case 1:
      *out = DL_SYNC_STREAM_LEGACY;
      return DL_SYNC_OK;
    case 2:
      *out = DL_SYNC_STREAM_PER_THREAD;
      return DL_SYNC_OK;
    default:
      if (value < 0)
        return dl_sync__error(DL_SYNC_EINVAL,
                              "stream=%lld is invalid on %s:%d: expected None, -1 (no "
                              "sync), 1 (legacy default), 2 (per-thread default) or a "
                              "stream handle > 2",
                              (long long)value, type, (int)device.device_id);
      return handle_from_value(device, value, out);
  }
}

static int rocm_from_value(DLDevice device, int64_t value, void **out) {
  if (value == 0) {
    *out = NULL;
    return DL_SYNC_OK;
  }
  if (value < 0 || value == 1 || value == 2)
    return dl_sync__error(DL_SYNC_EINVAL,
                          "stream=%lld is invalid on %s:%d: expected None or 0 (the null "
                          "stream), -1 (no sync) or a stream handle > 2",
                          (long long)value, dl_sync__device_type_name(device.device_type),
                          (int)device.device_id);
  return handle_from_value(device, value, out);
}

int dl_sync__stream_from_arg(DLDevice device, dl_sync_stream_arg arg, dl_sync_stream *out,
                             int *out_needs_sync) {
  if (out == NULL || out_needs_sync == NULL)
    return dl_sync__error(DL_SYNC_EINVAL, "out (%p) and out_needs_sync (%p) must not be NULL",
                          (void *)out, (void *)out_needs_sync);
  int status = dl_sync__check_device("device", device);
  if (status != DL_SYNC_OK) return status;

  int family = dl_sync__family(device.device_type);
  *out = (dl_sync_stream){.device = device, .handle = NULL};
  *out_needs_sync = 0;
  if (family == DL_SYNC__FAMILY_NONE) {
    if (arg.is_none) return DL_SYNC_OK;
    return dl_sync__error(DL_SYNC_EINVAL,
                          "stream=%lld is invalid on %s:%d, which has no streams: expected "
                          "None",
                          (long long)arg.value, dl_sync__device_type_name(device.device_type),
                          (int)device.device_id);
  }
  if (dl_sync__arg_asks_no_sync(arg)) return DL_SYNC_OK;

  void *handle = NULL;
  if (arg.is_none)
    handle = family == DL_SYNC__FAMILY_CUDA ? DL_SYNC_STREAM_LEGACY : NULL;
  else
    status = family == DL_SYNC__FAMILY_CUDA ? cuda_from_value(device, arg.value, &handle)
                                            : rocm_from_value(device, arg.value, &handle);
  if (status != DL_SYNC_OK) return status;
  out->handle = handle;
  *out_needs_sync = 1;
  return DL_SYNC_OK;
}

int dl_sync_stream_from_arg(DLDevice device, dl_sync_stream_arg arg, dl_sync_stream *out,
                            int *out_needs_sync) {
  return dl_sync__named("dl_sync_stream_from_arg",
                        dl_sync__stream_from_arg(device, arg, out, out_needs_sync));
}

static int stream_to_arg(dl_sync_stream consumer, dl_sync_stream_arg *out) {
  if (out == NULL) return dl_sync__error(DL_SYNC_EINVAL, "out must not be NULL");
  int status = dl_sync__check_device("consumer stream", consumer.device);
  if (status != DL_SYNC_OK) return status;

  int family = dl_sync__family(consumer.device.device_type);
  void *handle = dl_sync__canonical_handle(consumer.device, consumer.handle);
  if (family == DL_SYNC__FAMILY_NONE) {
    *out = dl_sync_stream_arg_none();
    return DL_SYNC_OK;
  }
  if (family == DL_SYNC__FAMILY_ROCM && handle == DL_SYNC_STREAM_PER_THREAD)
    return dl_sync__error(DL_SYNC_EINVAL,
                          "the per-thread default stream has no stream argument on %s:%d "
                          "(1 and 2 are invalid on ROCm): pass the stream's own handle",
                          dl_sync__device_type_name(consumer.device.device_type),
                          (int)consumer.device.device_id);
  /* Handles 1 and 2 are CUDA's legacy and per-thread streams, whose arguments are
     their values; ROCm's null stream is 0. */
  *out = dl_sync_stream_arg_int((int64_t)(uintptr_t)handle);
  return DL_SYNC_OK;
}

int dl_sync_stream_to_arg(dl_sync_stream consumer, dl_sync_stream_arg *out) {
  return dl_sync__named("dl_sync_stream_to_arg", stream_to_arg(consumer, out));
}
