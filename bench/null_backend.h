/* SPDX-License-Identifier: Apache-2.0 */
/* A null backend for the benchmarks: every call returns at once and is counted per
   thread, so what is measured is dlsync's own work. */
#ifndef DL_SYNC_BENCH_NULL_BACKEND_H_
#define DL_SYNC_BENCH_NULL_BACKEND_H_

#include "dlsync/dlsync.h"

#include <stdatomic.h>

extern dl_sync_backend null_backend;
/* null_backend with a stream of dlsync's own for deferred releases, as the HIP backend. */
extern dl_sync_backend null_hip_backend;
/* Work recorded on this stream never completes while it is set (queries answer "not
   yet"): releases pile up there as behind a slow consumer. */
extern _Atomic(void *) null_slow_stream;
extern _Thread_local long thread_calls[DL_SYNC_OP_COUNT];

#endif
