/* SPDX-License-Identifier: Apache-2.0 */
#include "copy_plugin.h"

__attribute__((visibility("default"))) const copy_table *copy_table_get(void);

const copy_table *copy_table_get(void) {
  static const copy_table table = {
      .set_backend = dl_sync_set_backend,
      .get_backend = dl_sync_get_backend,
      .cuda_backend = dl_sync_cuda_backend,
      .hip_backend = dl_sync_hip_backend,
      .tensor_record = dl_sync_tensor_record,
      .tensor_record_reuse = dl_sync_tensor_record_reuse,
      .tensor_release = dl_sync_tensor_release,
      .shutdown = dl_sync_shutdown,
      .last_error = dl_sync_last_error,
  };
  return &table;
}
