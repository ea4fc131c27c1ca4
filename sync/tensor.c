/* SPDX-License-Identifier: Apache-2.0 */
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
#include <stddef.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "internal.h"

/* The size of an owner record of minor 0: every record has at least its fields. */
#define DL_SYNC__RECORD_1_0 offsetof(dl_sync_tensor_event_owner, context_id)

/* The record and what only the owner copy needs, in one allocation that lives until the
   last reference (the tensor's or a graph's) goes. */
typedef struct tensor_owner {
  dl_sync_tensor_event_owner record; /* first: the tensor's manager_ctx points here */
  atomic_uint refs;
  dl_sync__pool *pool;
  uint64_t recorded_by; /* the thread that recorded it last in this copy (dl_sync__thread_number) */
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

/* Restores the producer's fields from the record; the tensor's reference goes, through
   the record's own release (the owner copy's, whichever deleter runs). */
static void *unwrap(dl_sync_tensor_event_owner *record) {
  void *manager_ctx = record->manager_ctx;
  record->magic = 0; /* a use after deletion reads as corrupt, not as an event */
  record->release(record->event_ctx);
  return manager_ctx;
}

/* The deleters are defined under hidden names, which this copy installs and compares:
   the exported names are aliases, for the other copies' dladdr. An exported name taken
   by address could resolve to another copy's deleter (a copy loaded RTLD_GLOBAL, or in a
   -rdynamic executable), whose record and pools are not this copy's. */
void dl_sync__tensor_event_deleter(DLManagedTensorVersioned *tensor) {
  dl_sync_tensor_event_owner *record = tensor->manager_ctx;
  tensor->deleter = record->versioned_deleter;
  tensor->manager_ctx = unwrap(record);
  if (tensor->deleter != NULL) tensor->deleter(tensor);
}

void dl_sync__legacy_tensor_event_deleter(DLManagedTensor *tensor) {
  dl_sync_tensor_event_owner *record = tensor->manager_ctx;
  tensor->deleter = record->legacy_deleter;
  tensor->manager_ctx = unwrap(record);
  if (tensor->deleter != NULL) tensor->deleter(tensor);
}

#if defined(__GNUC__)
void dl_sync_tensor_event_deleter_v1(DLManagedTensorVersioned *tensor)
    __attribute__((alias("dl_sync__tensor_event_deleter")));
void dl_sync_legacy_tensor_event_deleter_v1(DLManagedTensor *tensor)
    __attribute__((alias("dl_sync__legacy_tensor_event_deleter")));
#else
void dl_sync_tensor_event_deleter_v1(DLManagedTensorVersioned *tensor) {
  dl_sync__tensor_event_deleter(tensor);
}
void dl_sync_legacy_tensor_event_deleter_v1(DLManagedTensor *tensor) {
  dl_sync__legacy_tensor_event_deleter(tensor);
}
#endif

/* Either kind of tensor, as the code below needs it. */
typedef struct tensor_view {
  const void *tensor;
  void *const *manager_ctx;
  uintptr_t deleter;
  int major; /* ABI major of the dlsync deleter it carries (any copy's); 0: not dlsync's */
  DLDevice device;
} tensor_view;

/* tensor is a DLManagedTensor when legacy, else a DLManagedTensorVersioned (not NULL). */
static tensor_view view_of(const void *tensor, int legacy) {
  const DLManagedTensorVersioned *versioned = tensor;
  const DLManagedTensor *old = tensor;
  uintptr_t deleter = legacy ? (uintptr_t)old->deleter : (uintptr_t)versioned->deleter;
  uintptr_t own = legacy ? (uintptr_t)dl_sync__legacy_tensor_event_deleter
                         : (uintptr_t)dl_sync__tensor_event_deleter;
  return (tensor_view){
      .tensor = tensor,
      .manager_ctx = legacy ? &old->manager_ctx : &versioned->manager_ctx,
      .deleter = deleter,
      .major =
          deleter == own ? DL_SYNC_TENSOR_EVENT_ABI_MAJOR : dl_sync__deleter_major(deleter, legacy),
      .device = legacy ? old->dl_tensor.device : versioned->dl_tensor.device,
  };
}

static int null_tensor(void) {
  return dl_sync__error(DL_SYNC_EINVAL, "tensor must not be NULL");
}

static const char *family_name(int32_t family) {
  return family == DL_SYNC_RUNTIME_FAMILY_CUDA   ? "CUDA"
         : family == DL_SYNC_RUNTIME_FAMILY_ROCM ? "ROCm"
                                                 : "unknown";
}

static int unusable(const tensor_view *v, const char *what, long long value) {
  return dl_sync__error(DL_SYNC_ENOTSUP,
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
    return dl_sync__error(DL_SYNC_EINVAL,
                          "tensor %p has dlsync's deleter but its manager_ctx %p is not "
                          "dlsync's: the tensor is corrupt (manager_ctx was overwritten or "
                          "the tensor was already deleted)",
                          v->tensor, (void *)record);
  if (record->abi_major != DL_SYNC_TENSOR_EVENT_ABI_MAJOR)
    return unusable(v, "its owner record is of ABI major", (long long)record->abi_major);
  if (record->runtime_family != DL_SYNC_RUNTIME_FAMILY_CUDA &&
      record->runtime_family != DL_SYNC_RUNTIME_FAMILY_ROCM)
    return unusable(v, "its event is of runtime family", record->runtime_family);
  if (record->size < DL_SYNC__RECORD_1_0 || record->event == NULL || record->retain == NULL ||
      record->release == NULL)
    return dl_sync__error(DL_SYNC_EINVAL,
                          "tensor %p has a dlsync owner record of %" PRIu64
                          " bytes (expected at least %zu) with event %p: the record is corrupt",
                          v->tensor, record->size, DL_SYNC__RECORD_1_0, record->event);
  *out = record;
  return DL_SYNC_OK;
}

static int check_stream(const char *what, dl_sync_stream stream) {
  int status = dl_sync__check_device(what, stream.device);
  if (status != DL_SYNC_OK) return status;
  if (dl_sync__family(stream.device.device_type) != DL_SYNC__FAMILY_NONE) return DL_SYNC_OK;
  return dl_sync__error(DL_SYNC_EINVAL,
                        "the %s is on %s:%d, which has no streams: per-tensor events need a "
                        "CUDA or ROCm stream",
                        what, dl_sync__device_type_name(stream.device.device_type),
                        (int)stream.device.device_id);
}

static int check_tensor_stream(const tensor_view *v, const char *what, dl_sync_stream stream) {
  int status = check_stream(what, stream);
  if (status != DL_SYNC_OK) return status;
  if (dl_sync__family(stream.device.device_type) == dl_sync__family(v->device.device_type))
    return DL_SYNC_OK;
  return dl_sync__error(
      DL_SYNC_EINVAL,
      "tensor %p is on %s:%d but the %s is on %s:%d: expected a stream of "
      "the tensor's device family",
      v->tensor, dl_sync__device_type_name(v->device.device_type), (int)v->device.device_id, what,
      dl_sync__device_type_name(stream.device.device_type), (int)stream.device.device_id);
}

/* A new owner with a pooled event recorded on producer; NULL (and a status) on failure. */
static tensor_owner *new_owner(dl_sync__guard *guard, dl_sync__bound *producer, int *status) {
  tensor_owner *owner = calloc(1, sizeof *owner);
  if (owner == NULL) {
    *status = dl_sync__error(DL_SYNC_ENOMEM, "cannot allocate a tensor event");
    return NULL;
  }
  void *event = NULL;
  *status = dl_sync__pool_acquire_recorded(guard, producer, &owner->pool, &event);
  if (*status != DL_SYNC_OK) {
    free(owner);
    return NULL;
  }
  dl_sync__pin_this_copy(); /* the tensor's deleter and its graphs call back into this copy */
  atomic_init(&owner->refs, 1);
  owner->record = (dl_sync_tensor_event_owner){
      .magic = DL_SYNC_TENSOR_EVENT_MAGIC,
      .abi_major = DL_SYNC_TENSOR_EVENT_ABI_MAJOR,
      .abi_minor = DL_SYNC_TENSOR_EVENT_ABI_MINOR,
      .size = sizeof owner->record,
      .device = producer->stream.device,
      .runtime_family = dl_sync__family(producer->stream.device.device_type),
      .event = event,
      .event_ctx = owner,
      .retain = owner_retain,
      .release = owner_release,
      .context_id = producer->context_id,
      .producer_stream = producer->stream.handle,
  };
  owner->recorded_by = dl_sync__thread_number();
  return owner;
}

/* Whether record's size covers field (of the given size): a field an older copy lacks. */
#define HAS_FIELD(record, field) \
  ((record)->size >= offsetof(dl_sync_tensor_event_owner, field) + sizeof((record)->field))

/* A record names the producer's reuse stream from minor 2 on, and its context from minor 3
   on (reuse_context_id 0: not named); from minor 4 a default stream of a backend with
   contexts is named apart, where older copies do not read it. */
static int record_reuse(const dl_sync_tensor_event_owner *record, dl_sync__release_target *out) {
  if (HAS_FIELD(record, reuse_default_device) && record->reuse_default_device.device_type != 0)
    out->reuse = (dl_sync_stream){record->reuse_default_device, record->reuse_default_stream};
  else if (HAS_FIELD(record, reuse_device) && record->reuse_device.device_type != 0)
    out->reuse = (dl_sync_stream){record->reuse_device, record->reuse_stream};
  else
    return 0;
  if (HAS_FIELD(record, reuse_context_id)) {
    out->reuse_context = record->reuse_context;
    out->reuse_context_id = record->reuse_context_id;
  }
  return 1;
}

/* A record names its event's context from minor 1 on (0: none, or an older copy's). */
static uint64_t record_context(const dl_sync_tensor_event_owner *record) {
  return HAS_FIELD(record, context_id) ? record->context_id : 0;
}

/* cuEventRecord: "hEvent and hStream must be from the same context". */
static int same_context(const tensor_view *v, const dl_sync_tensor_event_owner *record,
                        dl_sync__guard *guard, dl_sync__bound *producer) {
  uint64_t context = record_context(record);
  if (context == 0 || !guard->contexts) return DL_SYNC_OK;
  int status = dl_sync__identify(guard, producer);
  if (status != DL_SYNC_OK || producer->context_id == context) return status;
  return dl_sync__error(DL_SYNC_EINVAL,
                        "tensor %p carries an event of the context with id %llu; the producer "
                        "stream %p belongs to the context with id %llu (%p) of the same device, "
                        "and an event records only in its own context: record the tensor on "
                        "a stream of its event's context",
                        v->tensor, (unsigned long long)context, producer->stream.handle,
                        (unsigned long long)producer->context_id, producer->context);
}

static int recordable(const tensor_view *v, const dl_sync_tensor_event_owner *record,
                      dl_sync__guard *guard, dl_sync__bound *producer) {
  DLDevice device = producer->stream.device;
  if (record != NULL && (record->runtime_family != dl_sync__family(device.device_type) ||
                         record->device.device_id != device.device_id))
    return dl_sync__error(DL_SYNC_EINVAL,
                          "tensor %p carries an event of device %d (%s runtime); it cannot "
                          "be re-recorded on %s:%d",
                          v->tensor, (int)record->device.device_id,
                          family_name(record->runtime_family),
                          dl_sync__device_type_name(device.device_type), (int)device.device_id);
  int status = record != NULL ? same_context(v, record, guard, producer) : DL_SYNC_OK;
  dl_sync_capture_info info;
  if (status == DL_SYNC_OK) status = dl_sync__capture_query(guard, producer, &info);
  if (status != DL_SYNC_OK || info.status == DL_SYNC_CAPTURE_NONE) return status;
  return dl_sync__error(DL_SYNC_ECAPTURE,
                        "the producer's stream %p is capturing a graph: a per-tensor event "
                        "recorded now would belong to the capture. Record it after the "
                        "capture, or exchange on the producer's current work stream",
                        producer->stream.handle);
}

/* Whether this copy may write record: another copy's record is read-only here. */
static int writable(const tensor_view *v, const dl_sync_tensor_event_owner *record) {
  if (record == NULL || record->retain == owner_retain) return DL_SYNC_OK;
  return dl_sync__error(DL_SYNC_EINVAL,
                        "tensor %p carries an event recorded by another copy of dlsync, whose "
                        "record this copy does not write: name the reuse stream with the copy "
                        "that recorded the event",
                        v->tensor);
}

/* The producer's reuse stream goes into a record this copy owns, with its context as the
   producer's call names it (bound by the call's guard before anything was switched): the
   legacy stream is the one of the context current here, not of the consumer's. A context
   current to one thread at a time (a green context) is not named: a release from another
   thread could not make it current to order its legacy stream, and is deferred instead.
   With contexts a default stream goes into the minor-4 fields, which older copies do not
   read: they would name the legacy stream of their own thread's current context. */
static int name_reuse(dl_sync__guard *guard, dl_sync_tensor_event_owner *record,
                      dl_sync__bound *reuse) {
  if (reuse == NULL) return DL_SYNC_OK;
  int names_context = guard->contexts && reuse->is_default; /* an explicit handle names its own */
  dl_sync__pool *pool = NULL; /* its context's: says whether it is exclusive, asked once */
  int status = names_context ? dl_sync__pool_for_stream(guard, reuse, &pool) : DL_SYNC_OK;
  if (status != DL_SYNC_OK) return status;
  if (pool != NULL && dl_sync__pool_shared_only(pool)) names_context = 0;
  int apart = guard->contexts && reuse->is_default;
  record->reuse_stream = apart ? NULL : reuse->stream.handle;
  record->reuse_device = apart ? (DLDevice){0, 0} : reuse->stream.device;
  record->reuse_default_stream = apart ? reuse->stream.handle : NULL;
  record->reuse_default_device = apart ? reuse->stream.device : (DLDevice){0, 0};
  record->reuse_context = names_context ? reuse->context : NULL;
  record->reuse_context_id = names_context ? reuse->context_id : 0;
  return DL_SYNC_OK;
}

/* The reuse stream of the tensor's own device and family, and one stream whatever thread
   names it: the consumer's release binds it on its own thread. */
static int check_reuse(const tensor_view *v, const dl_sync_stream *reuse) {
  if (reuse == NULL) return DL_SYNC_OK;
  int status = check_tensor_stream(v, "reuse stream", *reuse);
  if (status == DL_SYNC_OK && reuse->handle == DL_SYNC_STREAM_PER_THREAD)
    return dl_sync__error(DL_SYNC_EINVAL,
                          "the reuse stream of tensor %p is the per-thread default stream, a "
                          "different stream on each thread (the consumer releases on its own): "
                          "name the producer's stream by its handle",
                          v->tensor);
  if (status != DL_SYNC_OK || reuse->device.device_id == v->device.device_id) return status;
  return dl_sync__error(DL_SYNC_EINVAL,
                        "the reuse stream is on %s:%d and tensor %p on %s:%d: expected a stream "
                        "of the tensor's device, where its memory is handed out again",
                        dl_sync__device_type_name(reuse->device.device_type),
                        (int)reuse->device.device_id, v->tensor,
                        dl_sync__device_type_name(v->device.device_type), (int)v->device.device_id);
}

/* A re-record in place says where: any copy's record of minor 4 (the event's last stream
   is what a synchronization reads), and this copy's own which thread. */
static void recorded_on(dl_sync_tensor_event_owner *record, const dl_sync__bound *producer) {
  if (HAS_FIELD(record, producer_stream)) record->producer_stream = producer->stream.handle;
  if (record->retain == owner_retain)
    ((tensor_owner *)record->event_ctx)->recorded_by = dl_sync__thread_number();
}

/* Records on producer (re-recording the event of any copy in place); *installed receives
   a new owner for the caller to install; reuse (or NULL) names the producer's reuse
   stream. */
static int record(const tensor_view *v, dl_sync_stream producer, const dl_sync_stream *reuse,
                  tensor_owner **installed) {
  *installed = NULL;
  dl_sync_tensor_event_owner *record = NULL;
  int status = check_tensor_stream(v, "producer stream", producer);
  if (status == DL_SYNC_OK) status = check_reuse(v, reuse);
  if (status == DL_SYNC_OK) status = record_of(v, &record);
  const dl_sync_backend *b = NULL;
  if (status == DL_SYNC_OK) status = dl_sync__backend_for(producer.device, &b);
  if (status != DL_SYNC_OK) return status;
  if (reuse != NULL) status = writable(v, record);
  if (status != DL_SYNC_OK) return status;
  dl_sync__guard guard;
  dl_sync__guard_init(&guard, b);
  dl_sync__bound bound, reuse_bound;
  status = dl_sync__bind(&guard, dl_sync_stream_view(producer.device, producer.handle), &bound);
  if (status == DL_SYNC_OK && reuse != NULL)
    status = dl_sync__bind(&guard, dl_sync_stream_view(reuse->device, reuse->handle), &reuse_bound);
  if (status == DL_SYNC_OK) status = recordable(v, record, &guard, &bound);
  tensor_owner *fresh = NULL;
  if (status == DL_SYNC_OK && record == NULL) {
    fresh = new_owner(&guard, &bound, &status); /* recorded */
    if (fresh != NULL) record = &fresh->record;
  } else if (status == DL_SYNC_OK) {
    status = dl_sync__record(&guard, record->event, &bound);
    if (status == DL_SYNC_OK) recorded_on(record, &bound);
  }
  if (status == DL_SYNC_OK)
    status = name_reuse(&guard, record, reuse != NULL ? &reuse_bound : NULL);
  if (fresh != NULL && status != DL_SYNC_OK)
    owner_release(fresh);
  else
    *installed = fresh;
  return dl_sync__guard_end(&guard, producer.device, status);
}

static dl_sync__tensor_event_ref ref_of(dl_sync_tensor_event_owner *record) {
  return (dl_sync__tensor_event_ref){record->event, record->device, record};
}

int dl_sync__tensor_event_find(const DLManagedTensorVersioned *versioned,
                               const DLManagedTensor *legacy, dl_sync__tensor_event_ref *out,
                               int *found) {
  *found = 0;
  if (versioned == NULL && legacy == NULL) return null_tensor(); /* the one given is NULL */
  tensor_view v = versioned != NULL ? view_of(versioned, 0) : view_of(legacy, 1);
  dl_sync_tensor_event_owner *record = NULL;
  int status = record_of(&v, &record);
  if (status != DL_SYNC_OK || record == NULL) return status;
  *out = ref_of(record);
  *found = 1;
  return DL_SYNC_OK;
}

/* A capturing consumer: an external event-wait node, and the graph keeps the event alive
   through the owner's retain / release (whichever copy the owner is). */
static int wait_external(const dl_sync_tensor_event_owner *record, dl_sync__guard *guard,
                         const dl_sync__bound *consumer) {
  int status = dl_sync__external_wait_usable(guard->backend, consumer->stream.handle);
  if (status != DL_SYNC_OK) return status;
  record->retain(record->event_ctx); /* the graph's reference */
  return dl_sync__wait_external(guard, consumer, record->event, record->event_ctx, record->release);
}

int dl_sync__tensor_event_wait(const dl_sync__tensor_event_ref *ref, dl_sync__guard *guard,
                               const dl_sync__bound *consumer,
                               const dl_sync_capture_info *consumer_capture) {
  const dl_sync_tensor_event_owner *record = ref->owner;
  DLDevice device = consumer->stream.device;
  if (dl_sync__family(device.device_type) != record->runtime_family)
    return dl_sync__error(DL_SYNC_ENOTSUP,
                          "the tensor's event %p is an event of the %s runtime (recorded on "
                          "device %d); the consumer stream on %s:%d cannot wait on it",
                          record->event, family_name(record->runtime_family),
                          (int)record->device.device_id,
                          dl_sync__device_type_name(device.device_type), (int)device.device_id);
  dl_sync_capture_info info;
  int status;
  if (consumer_capture != NULL) {
    info = *consumer_capture;
    status = dl_sync__capture_usable(consumer->stream, &info);
  } else {
    status = dl_sync__capture_query(guard, consumer, &info);
  }
  if (status == DL_SYNC_OK && info.status == DL_SYNC_CAPTURE_ACTIVE)
    return wait_external(record, guard, consumer);
  if (status == DL_SYNC_OK) status = dl_sync__wait(guard, consumer, record->event);
  if (status != DL_SYNC_ECAPTURE || record->runtime_family != DL_SYNC_RUNTIME_FAMILY_ROCM)
    return status;
  /* A consumer that does not capture is refused only where the event's own stream captures
     now (hipErrorStreamCaptureIsolation, from ROCm 5.7: clr rocm-6.2.0
     hipamd/src/hip_stream.cpp hipStreamWaitEvent_common); CUDA takes that wait. */
  return dl_sync__error_context(
      status,
      "the tensor's event %p was recorded on a stream that is now capturing a graph, and HIP "
      "refuses a wait on an event recorded before that capture began: record the tensor "
      "after the capture ends, or exchange on the producer's stream",
      record->event);
}

static int wait_for(const void *tensor, int legacy, dl_sync_stream consumer) {
  if (tensor == NULL) return null_tensor();
  tensor_view v = view_of(tensor, legacy);
  dl_sync_tensor_event_owner *record = NULL;
  int status = record_of(&v, &record);
  if (status != DL_SYNC_OK || record == NULL) return status; /* another producer's: no wait */
  status = check_tensor_stream(&v, "consumer stream", consumer);
  const dl_sync_backend *b = NULL; /* the consumer copy's: events are process-wide */
  if (status == DL_SYNC_OK) status = dl_sync__backend_for(consumer.device, &b);
  if (status != DL_SYNC_OK) return status;
  dl_sync__guard guard;
  dl_sync__guard_init(&guard, b);
  dl_sync__bound bound;
  status = dl_sync__bind(&guard, dl_sync_stream_view(consumer.device, consumer.handle), &bound);
  dl_sync__tensor_event_ref ref = ref_of(record);
  if (status == DL_SYNC_OK) status = dl_sync__tensor_event_wait(&ref, &guard, &bound, NULL);
  return dl_sync__guard_end(&guard, consumer.device, status);
}

/* Whether the event's last recording stream, the producer's, may be read now by a
   synchronization (HIP from 5.7 reads it, and from 6.2 to 7.2.0 invalidates its capture):
   the backend's event_synchronize_disturbs asks it while it neither captures nor is gone.
   Not through a stream of dlsync's own, as a deferred release is watched: hipStreamWaitEvent
   reads the event's recording stream as well, unvalidated before 6.2 (a destroyed one's
   freed memory). A per-thread stream is nameable only on the thread that recorded it
   through this copy; a record before minor 4 does not say its stream, and is not asked. */
static int producer_readable(const dl_sync_tensor_event_owner *record, const dl_sync_backend *b) {
  if (!dl_sync__backend_has_event_synchronize_disturbs(b) || !HAS_FIELD(record, producer_stream))
    return DL_SYNC_OK;
  void *stream = record->producer_stream;
  int disturbs =
      stream == DL_SYNC_STREAM_PER_THREAD &&
      (record->retain != owner_retain ||
       ((const tensor_owner *)record->event_ctx)->recorded_by != dl_sync__thread_number());
  dl_sync__guard guard;
  dl_sync__guard_init(&guard, b);
  dl_sync__bound bound;
  int status = dl_sync__bind(&guard, dl_sync_stream_view(record->device, stream), &bound);
  if (status == DL_SYNC_OK) status = dl_sync__guard_enter(&guard, &bound);
  int code = status == DL_SYNC_OK ? b->event_synchronize_disturbs(b->ctx, stream, &disturbs) : 0;
  status = dl_sync__guard_end(&guard, record->device, status);
  if (status != DL_SYNC_OK) return status;
  if (code != 0)
    return dl_sync__runtime_call_error(b, "event_synchronize_disturbs", code, record->device);
  if (!disturbs) return DL_SYNC_OK;
  return dl_sync__error(
      DL_SYNC_ECAPTURE,
      "the tensor's event %p was recorded on stream %p, which is capturing a graph now, was "
      "destroyed, or is another thread's per-thread stream, and the %s runtime's "
      "synchronization would read that stream (and invalidate its capture): synchronize after "
      "the capture ends, or wait on the event from a stream (dl_sync_tensor_wait)",
      record->event, stream, b->name);
}

static int synchronize(const void *tensor, int legacy) {
  if (tensor == NULL) return null_tensor();
  tensor_view v = view_of(tensor, legacy);
  dl_sync_tensor_event_owner *record = NULL;
  int status = record_of(&v, &record);
  if (status != DL_SYNC_OK || record == NULL) return status;
  const dl_sync_backend *b = NULL;
  status = dl_sync__backend_for(record->device, &b);
  if (status == DL_SYNC_OK) status = producer_readable(record, b);
  if (status != DL_SYNC_OK) return status;
  int code = b->event_synchronize(b->ctx, record->event);
  if (code == 0) return DL_SYNC_OK;
  return dl_sync__runtime_error(b, DL_SYNC_OP_EVENT_SYNCHRONIZE, code, record->device);
}

static int has_event(const void *tensor, int legacy) {
  if (tensor == NULL) return null_tensor();
  tensor_view v = view_of(tensor, legacy);
  dl_sync_tensor_event_owner *record = NULL;
  int status = record_of(&v, &record);
  return status != DL_SYNC_OK ? status : record != NULL;
}

/* Records; a new owner record takes the tensor's manager_ctx and deleter. */
static int record_tensor(void *tensor, int legacy, dl_sync_stream producer,
                         const dl_sync_stream *reuse) {
  if (tensor == NULL) return null_tensor();
  tensor_view v = view_of(tensor, legacy);
  tensor_owner *installed = NULL;
  int status = record(&v, producer, reuse, &installed);
  if (installed == NULL) return status;
  DLManagedTensorVersioned *versioned = tensor;
  DLManagedTensor *old = tensor;
  void **manager_ctx = legacy ? &old->manager_ctx : &versioned->manager_ctx;
  installed->record.manager_ctx = *manager_ctx;
  *manager_ctx = &installed->record;
  if (legacy) {
    installed->record.legacy_deleter = old->deleter;
    old->deleter = dl_sync__legacy_tensor_event_deleter;
  } else {
    installed->record.versioned_deleter = versioned->deleter;
    versioned->deleter = dl_sync__tensor_event_deleter;
  }
  return status;
}

int dl_sync_tensor_record(DLManagedTensorVersioned *tensor, dl_sync_stream producer) {
  return dl_sync__named("dl_sync_tensor_record", record_tensor(tensor, 0, producer, NULL));
}

int dl_sync_legacy_tensor_record(DLManagedTensor *tensor, dl_sync_stream producer) {
  return dl_sync__named("dl_sync_legacy_tensor_record", record_tensor(tensor, 1, producer, NULL));
}

int dl_sync_tensor_record_reuse(DLManagedTensorVersioned *tensor, dl_sync_stream producer,
                                dl_sync_stream reuse) {
  return dl_sync__named("dl_sync_tensor_record_reuse", record_tensor(tensor, 0, producer, &reuse));
}

int dl_sync_legacy_tensor_record_reuse(DLManagedTensor *tensor, dl_sync_stream producer,
                                       dl_sync_stream reuse) {
  return dl_sync__named("dl_sync_legacy_tensor_record_reuse",
                        record_tensor(tensor, 1, producer, &reuse));
}

int dl_sync__tensor_release_target(void *tensor, int legacy, dl_sync__release_target *out) {
  *out = (dl_sync__release_target){.tensor = tensor, .legacy = legacy};
  if (tensor == NULL) return null_tensor();
  tensor_view v = view_of(tensor, legacy);
  out->device = v.device;
  dl_sync_tensor_event_owner *record = NULL;
  int status = record_of(&v, &record);
  if (status == DL_SYNC_OK && record != NULL) out->has_reuse = record_reuse(record, out);
  return status;
}

void dl_sync__tensor_delete(void *tensor, int legacy) {
  if (legacy) {
    DLManagedTensor *t = tensor;
    if (t->deleter != NULL) t->deleter(t);
  } else {
    DLManagedTensorVersioned *t = tensor;
    if (t->deleter != NULL) t->deleter(t);
  }
}

int dl_sync_tensor_wait(const DLManagedTensorVersioned *tensor, dl_sync_stream consumer) {
  return dl_sync__named("dl_sync_tensor_wait", wait_for(tensor, 0, consumer));
}

int dl_sync_legacy_tensor_wait(const DLManagedTensor *tensor, dl_sync_stream consumer) {
  return dl_sync__named("dl_sync_legacy_tensor_wait", wait_for(tensor, 1, consumer));
}

int dl_sync_tensor_synchronize(const DLManagedTensorVersioned *tensor) {
  return dl_sync__named("dl_sync_tensor_synchronize", synchronize(tensor, 0));
}

int dl_sync_legacy_tensor_synchronize(const DLManagedTensor *tensor) {
  return dl_sync__named("dl_sync_legacy_tensor_synchronize", synchronize(tensor, 1));
}

int dl_sync_tensor_has_event(const DLManagedTensorVersioned *tensor) {
  return dl_sync__named("dl_sync_tensor_has_event", has_event(tensor, 0));
}

int dl_sync_legacy_tensor_has_event(const DLManagedTensor *tensor) {
  return dl_sync__named("dl_sync_legacy_tensor_has_event", has_event(tensor, 1));
}

int dl_sync_tensor_events_visible(void) {
  /* Uncached on purpose: a framework asks once, and the answer must be this copy's. */
  return dl_sync__deleter_verdict((uintptr_t)dl_sync__tensor_event_deleter) ==
             DL_SYNC_TENSOR_EVENT_ABI_MAJOR &&
         dl_sync__deleter_verdict((uintptr_t)dl_sync__legacy_tensor_event_deleter) ==
             -DL_SYNC_TENSOR_EVENT_ABI_MAJOR;
}
