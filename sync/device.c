/* SPDX-License-Identifier: Apache-2.0 */
/* Device validation, stream identity and the current-device (and context) guard. */
#include "internal.h"

int dl_sync__check_device(const char *what, DLDevice device) {
  if (dl_sync__family(device.device_type) == DL_SYNC__FAMILY_UNKNOWN)
    return dl_sync__error(DL_SYNC_EINVAL,
                          "%s has unknown device type %d: expected a DLDeviceType of "
                          "DLPack 1.3 (1-4, 7-18)",
                          what, (int)device.device_type);
  if (device.device_id < 0 || device.device_id >= DL_SYNC_MAX_DEVICES)
    return dl_sync__error(DL_SYNC_EINVAL, "%s has device id %d on %s: expected 0 to %d", what,
                          (int)device.device_id, dl_sync__device_type_name(device.device_type),
                          DL_SYNC_MAX_DEVICES - 1);
  return DL_SYNC_OK;
}

void *dl_sync__canonical_handle(DLDevice device, void *handle) {
  switch (dl_sync__family(device.device_type)) {
    case DL_SYNC__FAMILY_CUDA:
      return handle == NULL ? DL_SYNC_STREAM_LEGACY : handle;
    case DL_SYNC__FAMILY_ROCM:
      return handle == DL_SYNC_STREAM_LEGACY ? NULL : handle;
    default:
      return handle;
  }
}

int dl_sync__same_stream(dl_sync_stream a, dl_sync_stream b) {
  return a.handle == b.handle && a.device.device_id == b.device.device_id;
}

int dl_sync__is_default_stream(void *canonical_handle) {
  return canonical_handle == NULL || canonical_handle == DL_SYNC_STREAM_LEGACY ||
         canonical_handle == DL_SYNC_STREAM_PER_THREAD;
}

void dl_sync__device_guard_init(dl_sync__device_guard *guard, const dl_sync_backend *backend) {
  *guard = (dl_sync__device_guard){.backend = backend};
}

int dl_sync__context_error(const dl_sync_backend *backend, int which, int code, DLDevice device) {
  const char *call = backend->context_call_names[which];
  static const char *const roles[] = {"get_context", "set_context", "stream_context"};
  return dl_sync__runtime_call_error(backend, call != NULL ? call : roles[which], code, device);
}

/* With contexts, the caller's own context is what the end restores: asked for before the
   first switch, never after. */
static int save_context(dl_sync__device_guard *guard, DLDevice device) {
  const dl_sync_backend *b = guard->backend;
  if (b->get_context == NULL || guard->switched) return DL_SYNC_OK;
  int code = b->get_context(b->ctx, &guard->saved_context);
  return code == 0 ? DL_SYNC_OK : dl_sync__context_error(b, 0, code, device);
}

int dl_sync__device_guard_use(dl_sync__device_guard *guard, DLDevice device) {
  const dl_sync_backend *b = guard->backend;
  if (!guard->have_saved) {
    int code = b->get_device(b->ctx, &guard->saved);
    if (code != 0) return dl_sync__runtime_error(b, DL_SYNC_OP_GET_DEVICE, code, device);
    guard->have_saved = 1;
    guard->current = guard->saved;
  }
  if (guard->current == device.device_id) return DL_SYNC_OK;
  int status = save_context(guard, device);
  if (status != DL_SYNC_OK) return status;
  int code = b->set_device(b->ctx, device.device_id);
  if (code != 0) return dl_sync__runtime_error(b, DL_SYNC_OP_SET_DEVICE, code, device);
  guard->current = device.device_id;
  guard->switched = 1;
  guard->context_known = 0;
  return DL_SYNC_OK;
}

int dl_sync__device_guard_use_stream(dl_sync__device_guard *guard, dl_sync_stream stream) {
  if (!dl_sync__is_default_stream(stream.handle)) return DL_SYNC_OK;
  return dl_sync__device_guard_use(guard, stream.device);
}

int dl_sync__device_guard_use_context(dl_sync__device_guard *guard, DLDevice device,
                                      void *context) {
  const dl_sync_backend *b = guard->backend;
  if (b->get_context == NULL) return dl_sync__device_guard_use(guard, device);
  if (guard->context_known && guard->current_context == context) return DL_SYNC_OK;
  int status = save_context(guard, device);
  if (status != DL_SYNC_OK) return status;
  if (!guard->switched && guard->saved_context == context) {
    guard->current_context = context;
    guard->context_known = 1;
    return DL_SYNC_OK;
  }
  int code = b->set_context(b->ctx, context);
  if (code != 0) return dl_sync__context_error(b, 1, code, device);
  guard->switched = 1;
  guard->current_context = context;
  guard->context_known = 1;
  guard->have_saved = 1; /* the caller's device matters no more: its context is restored */
  guard->current = device.device_id;
  return DL_SYNC_OK;
}

int dl_sync__device_guard_restore(dl_sync__device_guard *guard, DLDevice device, int status) {
  const dl_sync_backend *b = guard->backend;
  int code;
  if (b->set_context != NULL) {
    if (guard->context_known && guard->current_context == guard->saved_context) return status;
    code = b->set_context(b->ctx, guard->saved_context);
    guard->current_context = guard->saved_context;
    guard->context_known = 1;
    if (code == 0 || status != DL_SYNC_OK) return status; /* never hide the first error */
    return dl_sync__context_error(b, 1, code, device);
  }
  if (guard->current == guard->saved) return status;
  code = b->set_device(b->ctx, guard->saved);
  guard->current = guard->saved;
  if (code == 0 || status != DL_SYNC_OK) return status;
  device.device_id = guard->saved;
  return dl_sync__runtime_error(b, DL_SYNC_OP_SET_DEVICE, code, device);
}
