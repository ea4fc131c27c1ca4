/* SPDX-License-Identifier: Apache-2.0 */
/* The extension module of one framework: links dlsync_static and exports one entry. */
#include "vendored_copy.h"

__attribute__((visibility("default"))) const vendored_dlsync *vendored_dlsync_get(void);

const vendored_dlsync *vendored_dlsync_get(void) {
  static const vendored_dlsync copy = {
      .last_error = dl_sync_last_error,
      .set_backend = dl_sync_set_backend,
      .shutdown = dl_sync_shutdown,
      .pool_stats_get = dl_sync_pool_stats_get,
      .push_dep = dl_sync_push_dep,
      .tensor_record = dl_sync_tensor_record,
      .tensor_wait = dl_sync_tensor_wait,
      .tensor_synchronize = dl_sync_tensor_synchronize,
      .tensor_has_event = dl_sync_tensor_has_event,
      .legacy_tensor_record = dl_sync_legacy_tensor_record,
      .legacy_tensor_wait = dl_sync_legacy_tensor_wait,
      .legacy_tensor_has_event = dl_sync_legacy_tensor_has_event,
      .tensor_events_visible = dl_sync_tensor_events_visible,
      .tensor_event_deleter = dl_sync_tensor_event_deleter_v1,
      .tensor_record_reuse = dl_sync_tensor_record_reuse,
      .tensor_release = dl_sync_tensor_release,
      .release_poll = dl_sync_release_poll,
      .release_pending = dl_sync_release_pending,
  };
  return &copy;
}
