/* SPDX-License-Identifier: Apache-2.0 */
/* A thread-safe backend that counts calls and checks their arguments, for tests that run
   many threads (cmocka's mocks are not thread-safe). Streams are counting_stream values. */
#ifndef DL_SYNC_TEST_COUNTING_BACKEND_H_
#define DL_SYNC_TEST_COUNTING_BACKEND_H_

#include <stdatomic.h>
#include <stdint.h>

#include "dlsync/dlsync.h"

/* Error codes of the counting backend. */
enum { COUNTING_WRONG_DEVICE = 1, COUNTING_NEVER_RECORDED = 2 };

typedef struct counting_stream {
  int32_t device;
} counting_stream;

extern dl_sync_backend counting_backend;
extern atomic_long counting_calls[DL_SYNC_OP_COUNT];
extern atomic_long counting_live_events;

void counting_reset(void);

#endif
