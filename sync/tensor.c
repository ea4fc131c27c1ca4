/*
 * Per-tensor events owned by the deleter. dlsync wraps the tensor's manager_ctx and
 * deleter in place: manager_ctx points to an owner record (dlsync/tensor_event.h), the
 * ABI every copy of dlsync in the process reads, and the deleter is an exported,
 * versioned function. The deleter restores the producer's manager_ctx and deleter, drops
 * the tensor's reference to the event and calls the producer's deleter. The event is
 * reference-counted (the tensor holds one reference, each graph that waits on it
 * another) and goes back to the owner copy's pool, with no runtime call, when the last
 * reference goes. Any copy waits on it with its own backend on the native handle.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "internal.h"

/* The record and what only the owner copy needs, in one allocation that lives until the
   last reference (the tensor's or a graph's) goes. */
typedef struct tensor_owner {
  dl_sync_tensor_event_owner record; /* first: the tensor's manager_ctx points here */
  atomic_uint refs;
  dl_sync__pool *pool;
} tensor_owner;

static void owner_retain(void *event_ctx) {
  tensor_owner *owner = event_ctx;
  atomic_fetch_add(&owner->refs, 1);
}

static void owner_release(void *event_ctx) {
  tensor_owner *owner = event_ctx;
  if (atomic_fetch_sub(&owner->refs, 1) != 1) return;
  dl_sync__pool_release(owner->pool, owner->record.event);
  free(owner);
}

/* Restores the producer's fields from the record; the tensor's reference goes. */
static void *unwrap(dl_sync_tensor_event_owner *record) {
  void *manager_ctx = record->manager_ctx;
  record->magic = 0; /* a use after deletion reads as corrupt, not as an event */
  owner_release(record->event_ctx);
  return manager_ctx;
}

void dl_sync_tensor_event_deleter_v1(DLManagedTensorVersioned *tensor) {
  dl_sync_tensor_event_owner *record = tensor->manager_ctx;
  tensor->deleter = record->versioned_deleter;
  tensor->manager_ctx = unwrap(record);
  if (tensor->deleter != NULL) tensor->deleter(tensor);
}

void dl_sync_legacy_tensor_event_deleter_v1(DLManagedTensor *tensor) {
  dl_sync_tensor_event_owner *record = tensor->manager_ctx;
  tensor->deleter = record->legacy_deleter;
  tensor->manager_ctx = unwrap(record);
  if (tensor->deleter != NULL) tensor->deleter(tensor);
}

/* Either kind of tensor, as the code below needs it. */
typedef struct tensor_view {
  const char *func;
  const void *tensor;
  void *const *manager_ctx;
  uintptr_t deleter;
  int major; /* ABI major of the dlsync deleter it carries (any copy's); 0: not dlsync's */
  DLDevice device;
} tensor_view;

static tensor_view view_versioned(const char *func, const DLManagedTensorVersioned *tensor) {
  int major = tensor->deleter == dl_sync_tensor_event_deleter_v1
                  ? DL_SYNC_TENSOR_EVENT_ABI_MAJOR
                  : dl_sync__deleter_major((uintptr_t)tensor->deleter, 0);
  return (tensor_view){func,
                       tensor,
                       &tensor->manager_ctx,
                       (uintptr_t)tensor->deleter,
                       major,
                       tensor->dl_tensor.device};
}

static tensor_view view_legacy(const char *func, const DLManagedTensor *tensor) {
  int major = tensor->deleter == dl_sync_legacy_tensor_event_deleter_v1
                  ? DL_SYNC_TENSOR_EVENT_ABI_MAJOR
                  : dl_sync__deleter_major((uintptr_t)tensor->deleter, 1);
  return (tensor_view){func,
                       tensor,
                       &tensor->manager_ctx,
                       (uintptr_t)tensor->deleter,
                       major,
                       tensor->dl_tensor.device};
}

static int null_tensor(const char *func) {
  return dl_sync__error(DL_SYNC_EINVAL, func, "tensor must not be NULL");
}

static const char *family_name(int32_t family) {
  return family == DL_SYNC_RUNTIME_FAMILY_CUDA   ? "CUDA"
         : family == DL_SYNC_RUNTIME_FAMILY_ROCM ? "ROCm"
                                                 : "unknown";
}

static int unusable(const tensor_view *v, const char *what, long long value) {
  return dl_sync__error(DL_SYNC_ENOTSUP, v->func,
                        "tensor %p carries a dlsync event this copy cannot use: %s %lld, "
                        "expected tensor-event ABI major %d with a CUDA (%d) or ROCm (%d) "
                        "runtime family (this copy is dlsync %d.%d.%d)",
                        v->tensor, what, value, DL_SYNC_TENSOR_EVENT_ABI_MAJOR,
                        DL_SYNC_RUNTIME_FAMILY_CUDA, DL_SYNC_RUNTIME_FAMILY_ROCM,
                        DL_SYNC_VERSION_MAJOR, DL_SYNC_VERSION_MINOR, DL_SYNC_VERSION_PATCH);
}

/* The record of a tensor with a dlsync deleter (any copy's): NULL for another producer's
   tensor, ENOTSUP for an event this copy cannot use, EINVAL when corrupt. manager_ctx is
   read only once the deleter proved the tensor dlsync's. */
static int record_of(const tensor_view *v, dl_sync_tensor_event_owner **out) {
  *out = NULL;
  if (v->major == 0) return DL_SYNC_OK;
  if (v->major != DL_SYNC_TENSOR_EVENT_ABI_MAJOR)
    return unusable(v, "its deleter is of tensor-event ABI major", v->major);
  dl_sync_tensor_event_owner *record = *v->manager_ctx;
  if (record == NULL || record->magic != DL_SYNC_TENSOR_EVENT_MAGIC)
    return dl_sync__error(DL_SYNC_EINVAL, v->func,
                          "tensor %p has dlsync's deleter but its manager_ctx %p is not "
                          "dlsync's: the tensor is corrupt (manager_ctx was overwritten or "
                          "the tensor was already deleted)",
                          v->tensor, (void *)record);
  if (record->abi_major != DL_SYNC_TENSOR_EVENT_ABI_MAJOR)
    return unusable(v, "its owner record is of ABI major", (long long)record->abi_major);
  if (record->runtime_family != DL_SYNC_RUNTIME_FAMILY_CUDA &&
      record->runtime_family != DL_SYNC_RUNTIME_FAMILY_ROCM)
    return unusable(v, "its event is of runtime family", record->runtime_family);
  if (record->size < sizeof *record || record->event == NULL || record->retain == NULL ||
      record->release == NULL)
    return dl_sync__error(DL_SYNC_EINVAL, v->func,
                          "tensor %p has a dlsync owner record of %" PRIu64
                          " bytes (expected at least %zu) with event %p: the record is corrupt",
                          v->tensor, record->size, sizeof *record, record->event);
  *out = record;
  return DL_SYNC_OK;
}

static int check_stream(const char *func, const char *what, dl_sync_stream stream) {
  int status = dl_sync__check_device(func, what, stream.device);
  if (status != DL_SYNC_OK) return status;
  if (dl_sync__family(stream.device.device_type) != DL_SYNC__FAMILY_NONE) return DL_SYNC_OK;
  return dl_sync__error(DL_SYNC_EINVAL, func,
                        "the %s is on %s:%d, which has no streams: per-tensor events need a "
                        "CUDA or ROCm stream",
                        what, dl_sync__device_type_name(stream.device.device_type),
                        (int)stream.device.device_id);
}

static int check_tensor_stream(const tensor_view *v, const char *what, dl_sync_stream stream) {
  int status = check_stream(v->func, what, stream);
  if (status != DL_SYNC_OK) return status;
  if (dl_sync__family(stream.device.device_type) == dl_sync__family(v->device.device_type))
    return DL_SYNC_OK;
  return dl_sync__error(
      DL_SYNC_EINVAL, v->func,
      "tensor %p is on %s:%d but the %s is on %s:%d: expected a stream of "
      "the tensor's device family",
      v->tensor, dl_sync__device_type_name(v->device.device_type), (int)v->device.device_id, what,
      dl_sync__device_type_name(stream.device.device_type), (int)stream.device.device_id);
}

/* Records event on producer; the caller has checked the capture state. */
static int record_event(const tensor_view *v, const dl_sync_backend *b,
                        dl_sync__device_guard *guard, void *event, dl_sync_stream producer) {
  int status = dl_sync__device_guard_use_stream(guard, v->func, producer);
  if (status != DL_SYNC_OK) return status;
  int code = b->event_record(b->ctx, event, producer.handle);
  if (code == 0) return DL_SYNC_OK;
  return dl_sync__runtime_error(v->func, b, DL_SYNC_OP_EVENT_RECORD, code, producer.device);
}

/* A new owner with a pooled event; NULL (and a status) on failure. */
static tensor_owner *new_owner(const tensor_view *v, const dl_sync_backend *b,
                               dl_sync__device_guard *guard, dl_sync_stream producer, int *status) {
  tensor_owner *owner = calloc(1, sizeof *owner);
  *status = owner == NULL
                ? dl_sync__error(DL_SYNC_ENOMEM, v->func, "cannot allocate a tensor event")
                : DL_SYNC_OK;
  void *event = NULL;
  if (*status == DL_SYNC_OK)
    *status = dl_sync__pool_for_stream(v->func, b, guard, producer, &owner->pool);
  if (*status == DL_SYNC_OK) *status = dl_sync__pool_acquire(owner->pool, v->func, guard, &event);
  if (*status != DL_SYNC_OK) {
    free(owner);
    return NULL;
  }
  dl_sync__pin_code(); /* the tensor's deleter and its graphs call back into this copy */
  atomic_init(&owner->refs, 1);
  owner->record = (dl_sync_tensor_event_owner){
      .magic = DL_SYNC_TENSOR_EVENT_MAGIC,
      .abi_major = DL_SYNC_TENSOR_EVENT_ABI_MAJOR,
      .abi_minor = DL_SYNC_TENSOR_EVENT_ABI_MINOR,
      .size = sizeof owner->record,
      .device = producer.device,
      .runtime_family = dl_sync__family(producer.device.device_type),
      .event = event,
      .event_ctx = owner,
      .retain = owner_retain,
      .release = owner_release,
  };
  return owner;
}

static int recordable(const tensor_view *v, const dl_sync_tensor_event_owner *record,
                      const dl_sync_backend *b, dl_sync__device_guard *guard,
                      dl_sync_stream producer) {
  if (record != NULL && (record->runtime_family != dl_sync__family(producer.device.device_type) ||
                         record->device.device_id != producer.device.device_id))
    return dl_sync__error(
        DL_SYNC_EINVAL, v->func,
        "tensor %p carries an event of device %d (%s runtime); it cannot "
        "be re-recorded on %s:%d",
        v->tensor, (int)record->device.device_id, family_name(record->runtime_family),
        dl_sync__device_type_name(producer.device.device_type), (int)producer.device.device_id);
  dl_sync_capture_info info;
  int status = dl_sync__capture_query(v->func, b, guard, producer, &info);
  if (status != DL_SYNC_OK || info.status == DL_SYNC_CAPTURE_NONE) return status;
  return dl_sync__error(DL_SYNC_ECAPTURE, v->func,
                        "the producer's stream %p is capturing a graph: a per-tensor event "
                        "recorded now would belong to the capture. Record it after the "
                        "capture, or exchange on the producer's current work stream",
                        producer.handle);
}

/* Records on producer (re-recording the event of any copy in place); *installed receives
   a new owner for the caller to install. */
static int record(const tensor_view *v, dl_sync_stream producer, tensor_owner **installed) {
  *installed = NULL;
  dl_sync_tensor_event_owner *record = NULL;
  int status = check_tensor_stream(v, "producer stream", producer);
  if (status == DL_SYNC_OK) status = record_of(v, &record);
  const dl_sync_backend *b = NULL;
  if (status == DL_SYNC_OK) status = dl_sync__backend_for(v->func, producer.device, &b);
  if (status != DL_SYNC_OK) return status;
  producer = dl_sync_stream_view(producer.device, producer.handle);
  dl_sync__device_guard guard;
  dl_sync__device_guard_init(&guard, b);
  status = recordable(v, record, b, &guard, producer);
  tensor_owner *fresh = NULL;
  if (status == DL_SYNC_OK && record == NULL) {
    fresh = new_owner(v, b, &guard, producer, &status);
    if (fresh != NULL) record = &fresh->record;
  }
  if (status == DL_SYNC_OK) status = record_event(v, b, &guard, record->event, producer);
  if (fresh != NULL && status != DL_SYNC_OK)
    owner_release(fresh);
  else
    *installed = fresh;
  return dl_sync__device_guard_end(&guard, v->func, producer.device, status);
}

static dl_sync__tensor_event_ref ref_of(dl_sync_tensor_event_owner *record) {
  return (dl_sync__tensor_event_ref){record->event, record->device, record};
}

int dl_sync__tensor_event_find(const char *func, const DLManagedTensorVersioned *versioned,
                               const DLManagedTensor *legacy, dl_sync__tensor_event_ref *out,
                               int *found) {
  *found = 0;
  if (versioned == NULL && legacy == NULL) return null_tensor(func);
  tensor_view v = versioned != NULL ? view_versioned(func, versioned) : view_legacy(func, legacy);
  dl_sync_tensor_event_owner *record = NULL;
  int status = record_of(&v, &record);
  if (status != DL_SYNC_OK || record == NULL) return status;
  *out = ref_of(record);
  *found = 1;
  return DL_SYNC_OK;
}

/* A capturing consumer: an external event-wait node, and the graph keeps the event alive
   through the owner's retain / release (whichever copy the owner is). */
static int wait_external(const char *func, const dl_sync_tensor_event_owner *record,
                         const dl_sync_backend *b, dl_sync__device_guard *guard,
                         dl_sync_stream consumer) {
  if (b->stream_wait_external == NULL || b->graph_retain == NULL)
    return dl_sync__error(DL_SYNC_ENOTSUP, func,
                          "the consumer's stream %p is capturing a graph and the %s runtime "
                          "cannot wait on an outside event from a capture",
                          consumer.handle, b->name);
  record->retain(record->event_ctx); /* the graph's reference */
  int code = b->graph_retain(b->ctx, consumer.handle, record->event_ctx, record->release);
  if (code != 0)
    return dl_sync__runtime_error(func, b, DL_SYNC_OP_GRAPH_RETAIN, code, consumer.device);
  int status = dl_sync__device_guard_use_stream(guard, func, consumer);
  if (status != DL_SYNC_OK) return status;
  code = b->stream_wait_external(b->ctx, consumer.handle, record->event);
  if (code == 0) return DL_SYNC_OK;
  return dl_sync__runtime_error(func, b, DL_SYNC_OP_STREAM_WAIT_EXTERNAL, code, consumer.device);
}

static int wait_plain(const char *func, const dl_sync_tensor_event_owner *record,
                      const dl_sync_backend *b, dl_sync__device_guard *guard,
                      dl_sync_stream consumer) {
  int status = dl_sync__device_guard_use_stream(guard, func, consumer);
  if (status != DL_SYNC_OK) return status;
  int code = b->stream_wait(b->ctx, consumer.handle, record->event);
  if (code == 0) return DL_SYNC_OK;
  return dl_sync__runtime_error(func, b, DL_SYNC_OP_STREAM_WAIT, code, consumer.device);
}

int dl_sync__tensor_event_wait(const char *func, const dl_sync__tensor_event_ref *ref,
                               dl_sync_stream consumer,
                               const dl_sync_capture_info *consumer_capture) {
  const dl_sync_tensor_event_owner *record = ref->owner;
  int status = check_stream(func, "consumer stream", consumer);
  if (status != DL_SYNC_OK) return status;
  if (dl_sync__family(consumer.device.device_type) != record->runtime_family)
    return dl_sync__error(
        DL_SYNC_ENOTSUP, func,
        "the tensor's event %p is an event of the %s runtime (recorded on "
        "device %d); the consumer stream on %s:%d cannot wait on it",
        record->event, family_name(record->runtime_family), (int)record->device.device_id,
        dl_sync__device_type_name(consumer.device.device_type), (int)consumer.device.device_id);
  const dl_sync_backend *b = NULL; /* the consumer copy's: events are process-wide */
  status = dl_sync__backend_for(func, consumer.device, &b);
  if (status != DL_SYNC_OK) return status;
  consumer = dl_sync_stream_view(consumer.device, consumer.handle);
  dl_sync__device_guard guard;
  dl_sync__device_guard_init(&guard, b);
  dl_sync_capture_info info;
  if (consumer_capture != NULL) {
    info = *consumer_capture;
    status = dl_sync__capture_usable(func, consumer, &info);
  } else {
    status = dl_sync__capture_query(func, b, &guard, consumer, &info);
  }
  if (status == DL_SYNC_OK && info.status == DL_SYNC_CAPTURE_ACTIVE)
    status = wait_external(func, record, b, &guard, consumer);
  else if (status == DL_SYNC_OK)
    status = wait_plain(func, record, b, &guard, consumer);
  return dl_sync__device_guard_end(&guard, func, consumer.device, status);
}

static int wait_for(const tensor_view *v, dl_sync_stream consumer) {
  dl_sync_tensor_event_owner *record = NULL;
  int status = record_of(v, &record);
  if (status != DL_SYNC_OK) return status;
  if (record == NULL)
    return dl_sync__error(DL_SYNC_OK, v->func,
                          "tensor %p carries no dlsync event (its deleter %p is not a deleter "
                          "that any copy of dlsync in this process exports): nothing to wait "
                          "for",
                          v->tensor, (void *)v->deleter);
  status = check_tensor_stream(v, "consumer stream", consumer);
  if (status != DL_SYNC_OK) return status;
  dl_sync__tensor_event_ref ref = ref_of(record);
  return dl_sync__tensor_event_wait(v->func, &ref, consumer, NULL);
}

static int synchronize(const tensor_view *v) {
  dl_sync_tensor_event_owner *record = NULL;
  int status = record_of(v, &record);
  if (status != DL_SYNC_OK || record == NULL) return status;
  const dl_sync_backend *b = NULL;
  status = dl_sync__backend_for(v->func, record->device, &b);
  if (status != DL_SYNC_OK) return status;
  int code = b->event_synchronize(b->ctx, record->event);
  if (code == 0) return DL_SYNC_OK;
  return dl_sync__runtime_error(v->func, b, DL_SYNC_OP_EVENT_SYNCHRONIZE, code, record->device);
}

static int has_event(const tensor_view *v) {
  dl_sync_tensor_event_owner *record = NULL;
  int status = record_of(v, &record);
  return status != DL_SYNC_OK ? status : record != NULL;
}

int dl_sync_tensor_record(DLManagedTensorVersioned *tensor, dl_sync_stream producer) {
  static const char *const func = "dl_sync_tensor_record";
  if (tensor == NULL) return null_tensor(func);
  tensor_view v = view_versioned(func, tensor);
  tensor_owner *installed = NULL;
  int status = record(&v, producer, &installed);
  if (installed != NULL) {
    installed->record.manager_ctx = tensor->manager_ctx;
    installed->record.versioned_deleter = tensor->deleter;
    tensor->manager_ctx = &installed->record;
    tensor->deleter = dl_sync_tensor_event_deleter_v1;
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
    installed->record.manager_ctx = tensor->manager_ctx;
    installed->record.legacy_deleter = tensor->deleter;
    tensor->manager_ctx = &installed->record;
    tensor->deleter = dl_sync_legacy_tensor_event_deleter_v1;
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
