/* SPDX-License-Identifier: Apache-2.0 */
/* An owner record as another copy of dlsync writes it (dlsync/tensor_event.h): its own
   retain and release, and exactly the bytes of its minor, allocated to that size (an older
   copy writes fewer fields), so that a read past the record's size claim is a read past
   its allocation, which the sanitizer builds report. */
#ifndef DL_SYNC_TEST_OTHER_COPY_RECORD_H_
#define DL_SYNC_TEST_OTHER_COPY_RECORD_H_

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dlsync/dlsync.h"

/* The size of a record of each minor: the fields up to the first one the minor lacks. */
#define OTHER_COPY_MINOR_0_SIZE offsetof(dl_sync_tensor_event_owner, context_id)
#define OTHER_COPY_MINOR_1_SIZE offsetof(dl_sync_tensor_event_owner, reuse_stream)
#define OTHER_COPY_MINOR_2_SIZE offsetof(dl_sync_tensor_event_owner, reuse_context)
#define OTHER_COPY_MINOR_3_SIZE offsetof(dl_sync_tensor_event_owner, reuse_default_stream)

/* The other copy's side of the event: the references its retain and release count. */
typedef struct other_copy_event {
  atomic_int refs;
} other_copy_event;

static inline void other_copy_retain(void *event_ctx) {
  atomic_fetch_add(&((other_copy_event *)event_ctx)->refs, 1);
}

static inline void other_copy_release(void *event_ctx) {
  atomic_fetch_sub(&((other_copy_event *)event_ctx)->refs, 1);
}

/* What the record says beyond its first minor's fields. */
typedef struct other_copy_fields {
  uint32_t minor;
  size_t size;
  uint64_t context_id;
  void *reuse_stream;
  DLDevice reuse_device;
} other_copy_fields;

/* Wraps tensor as the other copy does: manager_ctx points to a new record of fields.size
   bytes naming event (of device), the deleter is the exported versioned one. The tensor
   holds one reference to ctx. The caller frees the record (the return value) once the
   tensor's deleter ran. */
static inline dl_sync_tensor_event_owner *other_copy_wrap(DLManagedTensorVersioned *tensor,
                                                          void *event, DLDevice device,
                                                          other_copy_event *ctx,
                                                          other_copy_fields fields) {
  dl_sync_tensor_event_owner full = {
      .magic = DL_SYNC_TENSOR_EVENT_MAGIC,
      .abi_major = DL_SYNC_TENSOR_EVENT_ABI_MAJOR,
      .abi_minor = fields.minor,
      .size = fields.size,
      .manager_ctx = tensor->manager_ctx,
      .versioned_deleter = tensor->deleter,
      .device = device,
      .runtime_family = device.device_type == kDLROCM || device.device_type == kDLROCMHost
                            ? DL_SYNC_RUNTIME_FAMILY_ROCM
                            : DL_SYNC_RUNTIME_FAMILY_CUDA,
      .event = event,
      .event_ctx = ctx,
      .retain = other_copy_retain,
      .release = other_copy_release,
      .context_id = fields.context_id,
      .reuse_stream = fields.reuse_stream,
      .reuse_device = fields.reuse_device,
  };
  dl_sync_tensor_event_owner *record = malloc(fields.size);
  if (record == NULL) return NULL;
  memcpy(record, &full, fields.size);
  atomic_store(&ctx->refs, 1);
  tensor->manager_ctx = record;
  tensor->deleter = dl_sync_tensor_event_deleter_v1;
  return record;
}

#endif
