/* SPDX-License-Identifier: Apache-2.0 */
/* The backend registry: device type -> backend, readable from any thread. */
#include <stdatomic.h>
#include <stddef.h>

#include "internal.h"

enum { DL_SYNC__REGISTRY_SIZE = kDLTrn + 1 };

/* User-installed backends; NULL means the built-in default for the type. */
static _Atomic(const dl_sync_backend *) installed[DL_SYNC__REGISTRY_SIZE];

/* The first built-in backend serving device_type's family (the list's order is the
   defaults': the CUDA driver before the CUDA runtime). */
static const dl_sync_backend *default_backend(int32_t device_type) {
  int family = dl_sync__family(device_type);
  if (family != DL_SYNC__FAMILY_CUDA && family != DL_SYNC__FAMILY_ROCM) return NULL;
  int32_t served = 0;
  for (size_t i = 0;; i++) {
    const dl_sync_backend *b = dl_sync__builtin_backend(i, &served);
    if (b == NULL || dl_sync__family(served) == family) return b;
  }
}

/* The name of the first required callback that backend lacks, or NULL. */
static const char *missing_callback(const dl_sync_backend *b) {
  const struct {
    const char *name;
    int present;
  } required[] = {
      {"name", b->name != NULL},
      {"get_device", b->get_device != NULL},
      {"set_device", b->set_device != NULL},
      {"event_create", b->event_create != NULL},
      {"event_destroy", b->event_destroy != NULL},
      {"event_record", b->event_record != NULL},
      {"stream_wait", b->stream_wait != NULL},
      {"event_synchronize", b->event_synchronize != NULL},
      {"event_query", b->event_query != NULL},
      {"capture_info", b->capture_info != NULL},
      {"error_name", b->error_name != NULL},
      {"error_string", b->error_string != NULL},
      {"error_status", b->error_status != NULL},
  };
  for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
    if (!required[i].present) return required[i].name;
  const struct {
    const char *name;
    int present;
  } contexts[] = {
      {"get_context", b->get_context != NULL},
      {"set_context", b->set_context != NULL},
      {"stream_context", b->stream_context != NULL},
      {"primary_context", b->primary_context != NULL},
      {"context_id", b->context_id != NULL},
  };
  size_t present = 0;
  for (size_t i = 0; i < sizeof contexts / sizeof contexts[0]; i++) present += contexts[i].present;
  if (present != 0)
    for (size_t i = 0; i < sizeof contexts / sizeof contexts[0]; i++)
      if (!contexts[i].present) return contexts[i].name; /* the five come together */
  if (!dl_sync__backend_covers_own_stream(b)) return NULL;
  int own = (b->own_stream_create != NULL) + (b->own_stream_check != NULL) +
            (b->own_stream_destroy != NULL);
  if (own == 0 || own == 3) return NULL; /* the three come together */
  return b->own_stream_create == NULL  ? "own_stream_create"
         : b->own_stream_check == NULL ? "own_stream_check"
                                       : "own_stream_destroy";
}

int dl_sync_set_backend(int32_t device_type, const dl_sync_backend *backend) {
  static const char *const func = "dl_sync_set_backend";
  int family = dl_sync__family(device_type);
  if (family == DL_SYNC__FAMILY_UNKNOWN)
    return dl_sync__named(
        func, dl_sync__error(DL_SYNC_EINVAL,
                             "unknown device type %d: expected a DLDeviceType of DLPack 1.3",
                             (int)device_type));
  if (family == DL_SYNC__FAMILY_NONE)
    return dl_sync__named(
        func, dl_sync__error(DL_SYNC_EINVAL,
                             "device type %d (%s) has no streams: only CUDA and ROCm device "
                             "types take a backend",
                             (int)device_type, dl_sync__device_type_name(device_type)));
  if (backend != NULL && backend->abi != DL_SYNC_BACKEND_ABI)
    return dl_sync__named(
        func, dl_sync__error(DL_SYNC_EINVAL,
                             "the backend at %p does not begin with DL_SYNC_BACKEND_ABI (its "
                             "second word is 0x%08x): it was built against another "
                             "dlsync/backend.h; start its initializer with "
                             "DL_SYNC_BACKEND_INIT",
                             (const void *)backend, (unsigned)backend->abi));
  if (backend != NULL && backend->size < DL_SYNC__BACKEND_SIZE_FIRST)
    return dl_sync__named(
        func, dl_sync__error(DL_SYNC_EINVAL,
                             "the backend at %p says its size is %u bytes: the smallest "
                             "layout is %u (set size with DL_SYNC_BACKEND_INIT)",
                             (const void *)backend, (unsigned)backend->size,
                             (unsigned)DL_SYNC__BACKEND_SIZE_FIRST));
  const char *missing = backend != NULL ? missing_callback(backend) : NULL;
  if (missing != NULL)
    return dl_sync__named(
        func, dl_sync__error(DL_SYNC_EINVAL, "backend '%s' lacks the required callback %s",
                             backend->name != NULL ? backend->name : "(unnamed)", missing));
  atomic_store_explicit(&installed[device_type], backend, memory_order_release);
  return DL_SYNC_OK;
}

int dl_sync__backend_available(const dl_sync_backend *b, dl_sync_op op) {
  int set = op == DL_SYNC_OP_GRAPH_RETAIN           ? b->graph_retain != NULL
            : op == DL_SYNC_OP_STREAM_WAIT_EXTERNAL ? b->stream_wait_external != NULL
                                                    : 1;
  return set && (b->available == NULL || b->available(b->ctx, op));
}

int dl_sync__backend_covers_own_stream(const dl_sync_backend *b) {
  return b->size >= offsetof(dl_sync_backend, own_stream_destroy) + sizeof b->own_stream_destroy;
}

int dl_sync__backend_owns_streams(const dl_sync_backend *b) {
  return dl_sync__backend_covers_own_stream(b) && b->own_stream_create != NULL &&
         (b->available == NULL || b->available(b->ctx, DL_SYNC_OP_OWN_STREAM_CREATE));
}

int dl_sync__backend_has_context_exclusive(const dl_sync_backend *b) {
  size_t needed = offsetof(dl_sync_backend, context_exclusive_call_name) +
                  sizeof b->context_exclusive_call_name;
  return b->size >= needed && b->context_exclusive != NULL;
}

int dl_sync__backend_has_event_synchronize_disturbs(const dl_sync_backend *b) {
  size_t needed =
      offsetof(dl_sync_backend, event_synchronize_disturbs) + sizeof b->event_synchronize_disturbs;
  return b->size >= needed && b->event_synchronize_disturbs != NULL;
}

int dl_sync__backend_has_event_gone(const dl_sync_backend *b) {
  size_t needed = offsetof(dl_sync_backend, event_gone) + sizeof b->event_gone;
  return b->size >= needed && b->event_gone != NULL;
}

int dl_sync__backend_has_release_contexts(const dl_sync_backend *b) {
  size_t needed = offsetof(dl_sync_backend, release_contexts) + sizeof b->release_contexts;
  return b->size >= needed && b->release_contexts != NULL;
}

static int release_backend_contexts(const dl_sync_backend *b, int32_t device_type) {
  if (!dl_sync__backend_has_release_contexts(b)) return DL_SYNC_OK;
  int32_t device_id = 0;
  const char *call = NULL;
  int code = b->release_contexts(b->ctx, &device_id, &call);
  if (code == 0) return DL_SYNC_OK;
  return dl_sync__runtime_call_error(b, call != NULL ? call : "release_contexts", code,
                                     (DLDevice){(DLDeviceType)device_type, device_id});
}

/* The built-in backends first, then the installed ones, each once (one installed for
   several device types, or a built-in one installed, is asked once). */
int dl_sync__backends_release_contexts(void) {
  const dl_sync_backend *asked[DL_SYNC__REGISTRY_SIZE + 8];
  size_t count = 0;
  int status = DL_SYNC_OK;
  int32_t device_type = 0;
  for (size_t i = 0; count < 8; i++) {
    const dl_sync_backend *b = dl_sync__builtin_backend(i, &device_type);
    if (b == NULL) break;
    int first = release_backend_contexts(b, device_type);
    if (status == DL_SYNC_OK) status = first;
    asked[count++] = b;
  }
  for (int32_t type = 0; type < DL_SYNC__REGISTRY_SIZE; type++) {
    const dl_sync_backend *b = atomic_load_explicit(&installed[type], memory_order_acquire);
    int seen = b == NULL;
    for (size_t i = 0; i < count && !seen; i++) seen = asked[i] == b;
    if (seen) continue;
    int first = release_backend_contexts(b, type);
    if (status == DL_SYNC_OK) status = first;
    asked[count++] = b;
  }
  return status;
}

const dl_sync_backend *dl_sync_get_backend(int32_t device_type) {
  if (device_type < 0 || device_type >= DL_SYNC__REGISTRY_SIZE) return NULL;
  const dl_sync_backend *b = atomic_load_explicit(&installed[device_type], memory_order_acquire);
  return b != NULL ? b : default_backend(device_type);
}

int dl_sync__backend_for(DLDevice device, const dl_sync_backend **out) {
  *out = dl_sync_get_backend(device.device_type);
  if (*out != NULL) return DL_SYNC_OK;
  return dl_sync__error(DL_SYNC_ENOTSUP,
                        "no backend for %s:%d: its device type has no runtime backend and none "
                        "was installed with dl_sync_set_backend",
                        dl_sync__device_type_name(device.device_type), (int)device.device_id);
}

int dl_sync__backend_has_stream_id(const dl_sync_backend *b) {
  return b->size >= offsetof(dl_sync_backend, stream_id) + sizeof b->stream_id &&
         b->stream_id != NULL;
}
