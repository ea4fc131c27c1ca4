/* SPDX-License-Identifier: Apache-2.0 */
/* A framework's extension module as the vendoring tests build it: its own static copy of
   dlsync, reached by the test only through this table (the module is dlopen'ed with
   RTLD_LOCAL, so none of its symbols is visible to the rest of the process by name). */
#ifndef DL_SYNC_TEST_VENDORED_COPY_H_
#define DL_SYNC_TEST_VENDORED_COPY_H_

#include "dlsync/dlsync.h"

typedef struct vendored_dlsync {
  const char *(*last_error)(void);
  int (*set_backend)(int32_t device_type, const dl_sync_backend *backend);
  int (*shutdown)(void);
  int (*pool_stats_get)(const dl_sync_backend *backend, int32_t device_id, dl_sync_pool_stats *out);
  int (*push_dep)(dl_sync_stream src, dl_sync_stream dst);
  int (*tensor_record)(DLManagedTensorVersioned *tensor, dl_sync_stream producer);
  int (*tensor_wait)(const DLManagedTensorVersioned *tensor, dl_sync_stream consumer);
  int (*tensor_synchronize)(const DLManagedTensorVersioned *tensor);
  int (*tensor_has_event)(const DLManagedTensorVersioned *tensor);
  int (*legacy_tensor_record)(DLManagedTensor *tensor, dl_sync_stream producer);
  int (*legacy_tensor_wait)(const DLManagedTensor *tensor, dl_sync_stream consumer);
  int (*legacy_tensor_has_event)(const DLManagedTensor *tensor);
  int (*tensor_events_visible)(void);
  void (*tensor_event_deleter)(DLManagedTensorVersioned *tensor); /* this copy's */
  int (*tensor_record_reuse)(DLManagedTensorVersioned *tensor, dl_sync_stream producer,
                             dl_sync_stream reuse);
  int (*tensor_release)(DLManagedTensorVersioned *tensor, dl_sync_stream consumer);
  int (*release_poll)(void);
  int (*release_pending)(void);
} vendored_dlsync;

typedef const vendored_dlsync *(*vendored_dlsync_get_fn)(void);
#define VENDORED_DLSYNC_GET "vendored_dlsync_get"

#endif
