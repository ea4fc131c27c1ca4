/* SPDX-License-Identifier: Apache-2.0 */
/* A library holding its own copy of dlsync, compiled from the one-file dlsync.c: it
   exports one entry, the table of its copy's functions. */
#include "copy_table.h"

__attribute__((visibility("default"))) const copy_table *amalgamation_copy(void);

const copy_table *amalgamation_copy(void) {
  static const copy_table table = {dl_sync_set_backend, dl_sync_get_backend, dl_sync_cuda_backend,
                                   dl_sync_hip_backend};
  return &table;
}
