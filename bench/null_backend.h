/* SPDX-License-Identifier: Apache-2.0 */
/* A null backend for the benchmarks: every call returns at once and is counted per
   thread, so what is measured is dlsync's own work. */
#ifndef DL_SYNC_BENCH_NULL_BACKEND_H_
#define DL_SYNC_BENCH_NULL_BACKEND_H_

#include "dlsync/dlsync.h"

extern dl_sync_backend null_backend;
extern _Thread_local long thread_calls[DL_SYNC_OP_COUNT];

#endif
