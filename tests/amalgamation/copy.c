/* SPDX-License-Identifier: Apache-2.0 */
/* A library holding its own copy of dlsync, compiled from the one-file dlsync.c: it
   exports one entry, the table of its copy's functions. */
#include "dlsync.h"

typedef struct copy_table {
  int (*set_backend)(int32_t device_type, const dl_sync_backend *backend);
  const dl_sync_backend *(*get_backend)(int32_t device_type);
  const dl_sync_backend *(*cuda_backend)(void);
  const dl_sync_backend *(*hip_backend)(void);
} copy_table;

__attribute__((visibility("default"))) const copy_table *amalgamation_copy(void);

const copy_table *amalgamation_copy(void) {
  static const copy_table table = {dl_sync_set_backend, dl_sync_get_backend,
                                   dl_sync_cuda_backend, dl_sync_hip_backend};
  return &table;
}
