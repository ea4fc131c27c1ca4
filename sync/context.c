/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where each call on a stream runs (docs/design.md, "Contexts"). A call binds every stream
 * it names from what the caller had current when it came in, before anything is switched,
 * and nothing later asks what is current now: a default stream of device N names the
 * caller's context when that is N's, else N's primary context (backends with contexts), or
 * device N (backends without). A call on a default stream runs with its place current, a
 * pool's events are made with the pool's context current, and the caller's exact context
 * (or device) is current again at the end. Explicit handles carry their context: calls on
 * them switch nothing. A context current to one thread at a time (a CUDA green context) is
 * made current only where the caller has it: elsewhere another thread may.
 */
#include "internal.h"

enum { GET_CONTEXT, SET_CONTEXT, STREAM_CONTEXT, PRIMARY_CONTEXT, CONTEXT_ID };

int dl_sync__context_error(const dl_sync_backend *backend, int which, int code, DLDevice device) {
  static const char *const roles[] = {"get_context", "set_context", "stream_context",
                                      "primary_context", "context_id"};
  const char *call = backend->context_call_names[which];
  return dl_sync__runtime_call_error(backend, call != NULL ? call : roles[which], code, device);
}

/* What the caller has current, asked once and before the first switch. */
static int know_caller(dl_sync__guard *guard, DLDevice device) {
  if (guard->caller_known) return DL_SYNC_OK;
  const dl_sync_backend *b = guard->backend;
  guard->caller_context = NULL;
  guard->caller_device = -1;
  if (guard->contexts) {
    int code = b->get_context(b->ctx, &guard->caller_context);
    if (code != 0) return dl_sync__context_error(b, GET_CONTEXT, code, device);
  }
  if (!guard->contexts || guard->caller_context != NULL) {
    int code = b->get_device(b->ctx, &guard->caller_device);
    if (code != 0) return dl_sync__runtime_error(b, DL_SYNC_OP_GET_DEVICE, code, device);
  }
  guard->caller_known = 1;
  guard->current_context = guard->caller_context;
  guard->current_device = guard->caller_device;
  return DL_SYNC_OK;
}

int dl_sync__bind_default(dl_sync__guard *guard, dl_sync__bound *out) {
  DLDevice device = out->stream.device;
  int status = know_caller(guard, device);
  if (status != DL_SYNC_OK) return status;
  if (guard->caller_context != NULL && guard->caller_device == device.device_id) {
    out->context = guard->caller_context;
    return DL_SYNC_OK;
  }
  const dl_sync_backend *b = guard->backend;
  int code = b->primary_context(b->ctx, device.device_id, &out->context);
  return code == 0 ? DL_SYNC_OK : dl_sync__context_error(b, PRIMARY_CONTEXT, code, device);
}

int dl_sync__identify_context(dl_sync__guard *guard, dl_sync__bound *bound) {
  const dl_sync_backend *b = guard->backend;
  DLDevice device = bound->stream.device;
  int code = 0;
  if (!bound->is_default) code = b->stream_context(b->ctx, bound->stream.handle, &bound->context);
  if (code != 0) return dl_sync__context_error(b, STREAM_CONTEXT, code, device);
  code = b->context_id(b->ctx, bound->context, &bound->context_id);
  if (code != 0) return dl_sync__context_error(b, CONTEXT_ID, code, device);
  bound->identified = 1;
  return DL_SYNC_OK;
}

int dl_sync__guard_use(dl_sync__guard *guard, DLDevice device, void *context) {
  int status = know_caller(guard, device);
  if (status != DL_SYNC_OK) return status;
  const dl_sync_backend *b = guard->backend;
  if (guard->contexts) {
    if (guard->current_context == context) return DL_SYNC_OK;
    int code = b->set_context(b->ctx, context);
    if (code != 0) return dl_sync__context_error(b, SET_CONTEXT, code, device);
    guard->current_context = context;
  } else {
    if (guard->current_device == device.device_id) return DL_SYNC_OK;
    int code = b->set_device(b->ctx, device.device_id);
    if (code != 0) return dl_sync__runtime_error(b, DL_SYNC_OP_SET_DEVICE, code, device);
    guard->current_device = device.device_id;
  }
  guard->switched = 1;
  return DL_SYNC_OK;
}

/* A default stream is bound to the caller's context or to a primary context (never a green
   one): only the caller's needs asking, with it current, through the legacy handle. */
int dl_sync__context_exclusive(dl_sync__guard *guard, const dl_sync__bound *stream,
                               int *exclusive) {
  *exclusive = 0;
  if (!guard->contexts) return DL_SYNC_OK;
  void *handle = stream->stream.handle;
  if (stream->is_default) {
    if (stream->context != guard->caller_context) return DL_SYNC_OK;
    int status = dl_sync__guard_enter(guard, stream);
    if (status != DL_SYNC_OK) return status;
    handle = DL_SYNC_STREAM_LEGACY;
  }
  const dl_sync_backend *b = guard->backend;
  if (!dl_sync__backend_has_context_exclusive(b)) return DL_SYNC_OK;
  int code = b->context_exclusive(b->ctx, handle, exclusive);
  if (code == 0) return DL_SYNC_OK;
  *exclusive = 0;
  const char *call = b->context_exclusive_call_name;
  return dl_sync__runtime_call_error(b, call != NULL ? call : "context_exclusive", code,
                                     stream->stream.device);
}

/* cuGreenCtxCreate: "a green context can be current to only one thread at a time": a
   thread that does not have it current cannot know that no other thread has, and never
   makes it current; its pool's events are made where it is current. */
int dl_sync__guard_use_to_create(dl_sync__guard *guard, DLDevice device, void *context,
                                 uint64_t context_id, int exclusive) {
  int status = know_caller(guard, device);
  if (status != DL_SYNC_OK || !exclusive || context == guard->caller_context)
    return status != DL_SYNC_OK ? status : dl_sync__guard_use(guard, device, context);
  return dl_sync__error(
      DL_SYNC_ENOTSUP,
      "the event pool of the green context with id %llu on %s:%d has no idle event, and "
      "making one needs that context current on this thread, which may not be done while "
      "another thread has it current (cuda.h: \"a green context can be current to only one "
      "thread at a time\"): make this call from the thread that has the green context "
      "current, or warm its pool there first (one export of one of its streams from that "
      "thread leaves an event every thread can use)",
      (unsigned long long)context_id, dl_sync__device_type_name(device.device_type),
      (int)device.device_id);
}

int dl_sync__guard_restore(dl_sync__guard *guard, DLDevice device, int status) {
  const dl_sync_backend *b = guard->backend;
  int code = 0;
  if (guard->contexts && guard->current_context != guard->caller_context) {
    code = b->set_context(b->ctx, guard->caller_context);
    guard->current_context = guard->caller_context;
    if (code != 0 && status == DL_SYNC_OK) /* never hide the first error */
      return dl_sync__context_error(b, SET_CONTEXT, code, device);
  } else if (!guard->contexts && guard->current_device != guard->caller_device &&
             guard->caller_device >= 0) {
    code = b->set_device(b->ctx, guard->caller_device);
    guard->current_device = guard->caller_device;
    device.device_id = guard->caller_device;
    if (code != 0 && status == DL_SYNC_OK)
      return dl_sync__runtime_error(b, DL_SYNC_OP_SET_DEVICE, code, device);
  }
  return status;
}

int dl_sync__check_sim_handle(const dl_sync__guard *guard, dl_sync_stream stream) {
  const dl_sync_backend *backend = guard->backend;
  if (!dl_sync__backend_is_builtin(backend))
    return DL_SYNC_OK; /* the simulator's own backend, or one that wraps it */
  return dl_sync__error(DL_SYNC_EINVAL,
                        "stream %p on %s:%d is a stream of dlsync's simulated device, given to "
                        "the '%s' backend: install the simulated device into this copy of "
                        "dlsync (dl_sync_set_backend; from Python, dl_sync_testing_install), "
                        "or pass a stream of the real device",
                        stream.handle, dl_sync__device_type_name(stream.device.device_type),
                        (int)stream.device.device_id, backend->name);
}
