/* SPDX-License-Identifier: Apache-2.0 */
/* The table a library with a one-file copy of dlsync exports (copy.c), which the
   interposition check (interposition.c) compares copy by copy. */
#ifndef DL_SYNC_TEST_AMALGAMATION_COPY_TABLE_H_
#define DL_SYNC_TEST_AMALGAMATION_COPY_TABLE_H_

#include "dlsync.h"

typedef struct copy_table {
  int (*set_backend)(int32_t device_type, const dl_sync_backend *backend);
  const dl_sync_backend *(*get_backend)(int32_t device_type);
  const dl_sync_backend *(*cuda_backend)(void);
  const dl_sync_backend *(*hip_backend)(void);
} copy_table;

#endif
