/*
 * Per-tensor events owned by the deleter. dlsync wraps the tensor's manager_ctx and
 * deleter in place; its deleter restores them, drops its reference to the event and
 * calls the producer's deleter. Events are reference-counted (the tensor holds one
 * reference, each graph that waits on the event another) and go back to the pool, with
 * no runtime call, when the last reference goes.
 */
#include <stdatomic.h>
#include <stdlib.h>

#include "internal.h"

#define DL_SYNC__OWNER_MAGIC UINT64_C(0x646c73796e63746e) /* "dlsynctn" */

typedef struct tensor_event {
  atomic_uint refs;
  const dl_sync_backend *backend;
  dl_sync__pool *pool;
  void *event;
  DLDevice device; /* where the event lives: the producer's device */
} tensor_event;

/* Installed as the tensor's manager_ctx. */
typedef struct tensor_owner {
  uint64_t magic;
  void *manager_ctx;
  void (*versioned_deleter)(DLManagedTensorVersioned *);
  void (*legacy_deleter)(DLManagedTensor *);
  tensor_event *event;
} tensor_owner;

static void event_unref(void *object) {
  tensor_event *e = object;
  if (atomic_fetch_sub(&e->refs, 1) != 1) return;
  dl_sync__pool_release(e->pool, e->event);
  free(e);
}

static tensor_event *owner_release(tensor_owner *owner) {
  tensor_event *e = owner->event;
  owner->magic = 0;
  free(owner);
  return e;
}

static void versioned_deleter(DLManagedTensorVersioned *tensor) {
  tensor_owner *owner = tensor->manager_ctx;
  tensor->manager_ctx = owner->manager_ctx;
  tensor->deleter = owner->versioned_deleter;
  event_unref(owner_release(owner));
  if (tensor->deleter != NULL) tensor->deleter(tensor);
}

static void legacy_deleter(DLManagedTensor *tensor) {
  tensor_owner *owner = tensor->manager_ctx;
  tensor->manager_ctx = owner->manager_ctx;
  tensor->deleter = owner->legacy_deleter;
  event_unref(owner_release(owner));
  if (tensor->deleter != NULL) tensor->deleter(tensor);
}

/* Either kind of tensor, as the code below needs it. */
typedef struct tensor_view {
  const char *func;
  const void *tensor;
  void *const *manager_ctx;
  int ours; /* the deleter is dlsync's */
  DLDevice device;
} tensor_view;

static tensor_view view_versioned(const char *func, const DLManagedTensorVersioned *tensor) {
  return (tensor_view){func, tensor, &tensor->manager_ctx, tensor->deleter == versioned_deleter,
                       tensor->dl_tensor.device};
}

static tensor_view view_legacy(const char *func, const DLManagedTensor *tensor) {
  return (tensor_view){func, tensor, &tensor->manager_ctx, tensor->deleter == legacy_deleter,
                       tensor->dl_tensor.device};
}

static int null_tensor(const char *func) {
  return dl_sync__error(DL_SYNC_EINVAL, func, "tensor must not be NULL");
}

/* The owner dlsync installed, NULL for another producer's tensor, EINVAL when corrupt. */
static int owner_of(const tensor_view *v, tensor_owner **out) {
  *out = NULL;
  if (!v->ours) return DL_SYNC_OK;
  tensor_owner *owner = *v->manager_ctx;
  if (owner == NULL || owner->magic != DL_SYNC__OWNER_MAGIC)
    return dl_sync__error(DL_SYNC_EINVAL, v->func,
                          "tensor %p has dlsync's deleter but its manager_ctx %p is not "
                          "dlsync's: the tensor is corrupt (manager_ctx was overwritten or "
                          "the tensor was already deleted)",
                          v->tensor, (void *)owner);
  *out = owner;
  return DL_SYNC_OK;
}

static int check_stream(const tensor_view *v, const char *what, dl_sync_stream stream) {
  int status = dl_sync__check_device(v->func, what, stream.device);
  if (status != DL_SYNC_OK) return status;
  int family = dl_sync__family(stream.device.device_type);
  if (family == DL_SYNC__FAMILY_NONE)
    return dl_sync__error(DL_SYNC_EINVAL, v->func,
                          "the %s is on %s:%d, which has no streams: per-tensor events need a "
                          "CUDA or ROCm stream",
                          what, dl_sync__device_type_name(stream.device.device_type),
                          (int)stream.device.device_id);
  if (family != dl_sync__family(v->device.device_type))
    return dl_sync__error(DL_SYNC_EINVAL, v->func,
                          "tensor %p is on %s:%d but the %s is on %s:%d: expected a stream of "
                          "the tensor's device family",
                          v->tensor, dl_sync__device_type_name(v->device.device_type),
                          (int)v->device.device_id, what,
                          dl_sync__device_type_name(stream.device.device_type),
                          (int)stream.device.device_id);
  return DL_SYNC_OK;
}

static int invalidated(const char *func, dl_sync_stream stream, int32_t state) {
  if (state != DL_SYNC_CAPTURE_INVALIDATED) return DL_SYNC_OK;
  return dl_sync__error(DL_SYNC_ECAPTURE, func,
                        "stream %p belongs to an invalidated graph capture", stream.handle);
}

static int capture_state(const char *func, const dl_sync_backend *b, dl_sync__device_guard *guard,
                         dl_sync_stream stream, int32_t *state) {
  int status = dl_sync__device_guard_use_stream(guard, func, stream);
  if (status != DL_SYNC_OK) return status;
  dl_sync_capture_info info = {0};
  int code = b->capture_info(b->ctx, stream.handle, &info);
  if (code != 0) return dl_sync__runtime_error(func, b, DL_SYNC_OP_CAPTURE_INFO, code, stream.device);
  *state = info.status;
  return invalidated(func, stream, info.status);
}

/* Records e on producer; the caller has checked the capture state. */
static int record_event(const tensor_view *v, dl_sync__device_guard *guard, tensor_event *e,
                        dl_sync_stream producer) {
  int status = dl_sync__device_guard_use_stream(guard, v->func, producer);
  if (status != DL_SYNC_OK) return status;
  int code = e->backend->event_record(e->backend->ctx, e->event, producer.handle);
  if (code == 0) return DL_SYNC_OK;
  return dl_sync__runtime_error(v->func, e->backend, DL_SYNC_OP_EVENT_RECORD, code, producer.device);
}

/* A new owner with a pooled event; NULL (and a status) on failure. */
static tensor_owner *new_owner(const tensor_view *v, const dl_sync_backend *b,
                               dl_sync__device_guard *guard, dl_sync_stream producer, int *status) {
  tensor_owner *owner = calloc(1, sizeof *owner);
  tensor_event *e = calloc(1, sizeof *e);
  *status = owner == NULL || e == NULL
                ? dl_sync__error(DL_SYNC_ENOMEM, v->func, "cannot allocate a tensor event")
                : DL_SYNC_OK;
  if (*status == DL_SYNC_OK) *status = dl_sync__pool_get(v->func, b, producer.device, &e->pool);
  if (*status == DL_SYNC_OK) *status = dl_sync__pool_acquire(e->pool, v->func, guard, &e->event);
  if (*status != DL_SYNC_OK) {
    free(owner);
    free(e);
    return NULL;
  }
  atomic_init(&e->refs, 1);
  e->backend = b;
  e->device = producer.device;
  *owner = (tensor_owner){.magic = DL_SYNC__OWNER_MAGIC, .event = e};
  return owner;
}

static int recordable(const tensor_view *v, tensor_owner *owner, const dl_sync_backend *b,
                      dl_sync__device_guard *guard, dl_sync_stream producer) {
  if (owner != NULL && (owner->event->backend != b ||
                        owner->event->device.device_id != producer.device.device_id))
    return dl_sync__error(DL_SYNC_EINVAL, v->func,
                          "tensor %p carries an event of device %d ('%s' backend); it cannot "
                          "be re-recorded on %s:%d",
                          v->tensor, (int)owner->event->device.device_id,
                          owner->event->backend->name,
                          dl_sync__device_type_name(producer.device.device_type),
                          (int)producer.device.device_id);
  int32_t state = DL_SYNC_CAPTURE_NONE;
  int status = capture_state(v->func, b, guard, producer, &state);
  if (status != DL_SYNC_OK || state == DL_SYNC_CAPTURE_NONE) return status;
  return dl_sync__error(DL_SYNC_ECAPTURE, v->func,
                        "the producer's stream %p is capturing a graph: a per-tensor event "
                        "recorded now would belong to the capture. Record it after the "
                        "capture, or exchange on the producer's current work stream",
                        producer.handle);
}

/* Records on producer; *installed receives a new owner for the caller to install. */
static int record(const tensor_view *v, dl_sync_stream producer, tensor_owner **installed) {
  *installed = NULL;
  tensor_owner *owner = NULL;
  int status = check_stream(v, "producer stream", producer);
  if (status == DL_SYNC_OK) status = owner_of(v, &owner);
  const dl_sync_backend *b = NULL;
  if (status == DL_SYNC_OK) status = dl_sync__backend_for(v->func, producer.device, &b);
  if (status != DL_SYNC_OK) return status;
  producer = dl_sync_stream_view(producer.device, producer.handle);
  dl_sync__device_guard guard;
  dl_sync__device_guard_init(&guard, b);
  status = recordable(v, owner, b, &guard, producer);
  int fresh = status == DL_SYNC_OK && owner == NULL;
  if (fresh) owner = new_owner(v, b, &guard, producer, &status);
  if (status == DL_SYNC_OK) status = record_event(v, &guard, owner->event, producer);
  if (fresh && status != DL_SYNC_OK && owner != NULL) event_unref(owner_release(owner));
  else if (fresh) *installed = owner;
  return dl_sync__device_guard_end(&guard, v->func, producer.device, status);
}

static int wait_external(const char *func, tensor_event *e, dl_sync__device_guard *guard,
                         dl_sync_stream consumer) {
  const dl_sync_backend *b = e->backend;
  if (b->stream_wait_external == NULL || b->graph_retain == NULL)
    return dl_sync__error(DL_SYNC_ENOTSUP, func,
                          "the consumer's stream %p is capturing a graph and the %s runtime "
                          "cannot wait on an outside event from a capture",
                          consumer.handle, b->name);
  atomic_fetch_add(&e->refs, 1); /* the graph's reference */
  int code = b->graph_retain(b->ctx, consumer.handle, e, event_unref);
  if (code != 0) return dl_sync__runtime_error(func, b, DL_SYNC_OP_GRAPH_RETAIN, code, consumer.device);
  int status = dl_sync__device_guard_use_stream(guard, func, consumer);
  if (status != DL_SYNC_OK) return status;
  code = b->stream_wait_external(b->ctx, consumer.handle, e->event);
  if (code == 0) return DL_SYNC_OK;
  return dl_sync__runtime_error(func, b, DL_SYNC_OP_STREAM_WAIT_EXTERNAL, code, consumer.device);
}

static int find_event(const tensor_view *v, dl_sync__tensor_event_ref *out, int *found) {
  tensor_owner *owner = NULL;
  *found = 0;
  int status = owner_of(v, &owner);
  if (status != DL_SYNC_OK || owner == NULL) return status;
  tensor_event *e = owner->event;
  *out = (dl_sync__tensor_event_ref){.event = e->event, .device = e->device, .owner = e};
  *found = 1;
  return DL_SYNC_OK;
}

int dl_sync__tensor_event_find(const char *func, const DLManagedTensorVersioned *versioned,
                               const DLManagedTensor *legacy, dl_sync__tensor_event_ref *out,
                               int *found) {
  *found = 0;
  if (versioned == NULL && legacy == NULL) return null_tensor(func);
  tensor_view v = versioned != NULL ? view_versioned(func, versioned) : view_legacy(func, legacy);
  return find_event(&v, out, found);
}

int dl_sync__tensor_event_wait(const char *func, const dl_sync__tensor_event_ref *ref,
                               dl_sync_stream consumer,
                               const dl_sync_capture_info *consumer_capture) {
  tensor_event *e = ref->owner;
  if (dl_sync_get_backend(consumer.device.device_type) != e->backend)
    return dl_sync__error(DL_SYNC_EINVAL, func,
                          "the consumer stream's backend is not the '%s' backend that recorded "
                          "the tensor's event",
                          e->backend->name);
  consumer = dl_sync_stream_view(consumer.device, consumer.handle);
  dl_sync__device_guard guard;
  dl_sync__device_guard_init(&guard, e->backend);
  int32_t state = DL_SYNC_CAPTURE_NONE;
  int status = DL_SYNC_OK;
  if (consumer_capture != NULL) {
    state = consumer_capture->status;
    status = invalidated(func, consumer, state);
  } else {
    status = capture_state(func, e->backend, &guard, consumer, &state);
  }
  if (status == DL_SYNC_OK && state == DL_SYNC_CAPTURE_ACTIVE) {
    status = wait_external(func, e, &guard, consumer);
  } else if (status == DL_SYNC_OK) {
    status = dl_sync__device_guard_use_stream(&guard, func, consumer);
    int code = status == DL_SYNC_OK ? e->backend->stream_wait(e->backend->ctx, consumer.handle, e->event) : 0;
    if (code != 0)
      status = dl_sync__runtime_error(func, e->backend, DL_SYNC_OP_STREAM_WAIT, code, consumer.device);
  }
  return dl_sync__device_guard_end(&guard, func, consumer.device, status);
}

static int wait_for(const tensor_view *v, dl_sync_stream consumer) {
  dl_sync__tensor_event_ref ref;
  int found = 0;
  int status = find_event(v, &ref, &found);
  if (status != DL_SYNC_OK) return status;
  if (!found)
    return dl_sync__error(DL_SYNC_OK, v->func,
                          "tensor %p carries no dlsync event (its deleter is not dlsync's): "
                          "nothing to wait for",
                          v->tensor);
  status = check_stream(v, "consumer stream", consumer);
  if (status != DL_SYNC_OK) return status;
  return dl_sync__tensor_event_wait(v->func, &ref, consumer, NULL);
}

static int synchronize(const tensor_view *v) {
  tensor_owner *owner = NULL;
  int status = owner_of(v, &owner);
  if (status != DL_SYNC_OK || owner == NULL) return status;
  const dl_sync_backend *b = owner->event->backend;
  int code = b->event_synchronize(b->ctx, owner->event->event);
  if (code == 0) return DL_SYNC_OK;
  return dl_sync__runtime_error(v->func, b, DL_SYNC_OP_EVENT_SYNCHRONIZE, code, owner->event->device);
}

static int has_event(const tensor_view *v) {
  tensor_owner *owner = NULL;
  int status = owner_of(v, &owner);
  return status != DL_SYNC_OK ? status : owner != NULL;
}

int dl_sync_tensor_record(DLManagedTensorVersioned *tensor, dl_sync_stream producer) {
  static const char *const func = "dl_sync_tensor_record";
  if (tensor == NULL) return null_tensor(func);
  tensor_view v = view_versioned(func, tensor);
  tensor_owner *installed = NULL;
  int status = record(&v, producer, &installed);
  if (installed != NULL) {
    installed->manager_ctx = tensor->manager_ctx;
    installed->versioned_deleter = tensor->deleter;
    tensor->manager_ctx = installed;
    tensor->deleter = versioned_deleter;
  }
  return status;
}

int dl_sync_legacy_tensor_record(DLManagedTensor *tensor, dl_sync_stream producer) {
  static const char *const func = "dl_sync_legacy_tensor_record";
  if (tensor == NULL) return null_tensor(func);
  tensor_view v = view_legacy(func, tensor);
  tensor_owner *installed = NULL;
  int status = record(&v, producer, &installed);
  if (installed != NULL) {
    installed->manager_ctx = tensor->manager_ctx;
    installed->legacy_deleter = tensor->deleter;
    tensor->manager_ctx = installed;
    tensor->deleter = legacy_deleter;
  }
  return status;
}

int dl_sync_tensor_wait(const DLManagedTensorVersioned *tensor, dl_sync_stream consumer) {
  static const char *const func = "dl_sync_tensor_wait";
  if (tensor == NULL) return null_tensor(func);
  tensor_view v = view_versioned(func, tensor);
  return wait_for(&v, consumer);
}

int dl_sync_legacy_tensor_wait(const DLManagedTensor *tensor, dl_sync_stream consumer) {
  static const char *const func = "dl_sync_legacy_tensor_wait";
  if (tensor == NULL) return null_tensor(func);
  tensor_view v = view_legacy(func, tensor);
  return wait_for(&v, consumer);
}

int dl_sync_tensor_synchronize(const DLManagedTensorVersioned *tensor) {
  static const char *const func = "dl_sync_tensor_synchronize";
  if (tensor == NULL) return null_tensor(func);
  tensor_view v = view_versioned(func, tensor);
  return synchronize(&v);
}

int dl_sync_legacy_tensor_synchronize(const DLManagedTensor *tensor) {
  static const char *const func = "dl_sync_legacy_tensor_synchronize";
  if (tensor == NULL) return null_tensor(func);
  tensor_view v = view_legacy(func, tensor);
  return synchronize(&v);
}

int dl_sync_tensor_has_event(const DLManagedTensorVersioned *tensor) {
  static const char *const func = "dl_sync_tensor_has_event";
  if (tensor == NULL) return null_tensor(func);
  tensor_view v = view_versioned(func, tensor);
  return has_event(&v);
}

int dl_sync_legacy_tensor_has_event(const DLManagedTensor *tensor) {
  static const char *const func = "dl_sync_legacy_tensor_has_event";
  if (tensor == NULL) return null_tensor(func);
  tensor_view v = view_legacy(func, tensor);
  return has_event(&v);
}
