/* SPDX-License-Identifier: Apache-2.0 */
/* A backend that wraps another, prints each runtime call dlsync makes into the timeline
   and counts them: how a user wraps a dlsync backend. */
#ifndef DEMO_TRACING_BACKEND_H_
#define DEMO_TRACING_BACKEND_H_

#include <dlsync/dlsync.h>

/* Builds the wrapper around inner (which must outlive it). */
const dl_sync_backend *tracing_backend(const dl_sync_backend *inner);
/* Calls of op since the start. */
long tracing_calls(dl_sync_op op);

#endif
