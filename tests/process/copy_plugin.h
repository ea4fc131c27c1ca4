/* SPDX-License-Identifier: Apache-2.0 */
/* A static copy of dlsync in a library (or in the -rdynamic executable), reached through
   this table: the program compares what each copy answers. */
#ifndef DL_SYNC_TEST_PROCESS_COPY_PLUGIN_H_
#define DL_SYNC_TEST_PROCESS_COPY_PLUGIN_H_

#include "dlsync/dlsync.h"

typedef struct copy_table {
  int (*set_backend)(int32_t device_type, const dl_sync_backend *backend);
  const dl_sync_backend *(*get_backend)(int32_t device_type);
  const dl_sync_backend *(*cuda_backend)(void);
  const dl_sync_backend *(*hip_backend)(void);
  int (*tensor_record)(DLManagedTensorVersioned *tensor, dl_sync_stream producer);
  int (*tensor_record_reuse)(DLManagedTensorVersioned *tensor, dl_sync_stream producer,
                             dl_sync_stream reuse);
  int (*tensor_release)(DLManagedTensorVersioned *tensor, dl_sync_stream consumer);
  int (*shutdown)(void);
  const char *(*last_error)(void);
} copy_table;

typedef const copy_table *(*copy_table_get_fn)(void);
#define COPY_TABLE_GET "copy_table_get"

#endif
