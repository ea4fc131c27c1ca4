/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One kind of exchange, run N times in a function of its own, for an instruction count
 * (bench/instructions.sh runs it under callgrind, counting inside measure() only):
 *   bench_instructions same|minus_one|cross|group N
 * Over the null backend, so the count is dlsync's own work plus the backend's calls.
 * The warm-up before measure() makes the pools and the thread cache.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlsync/dlsync.h"
#include "null_backend.h"

static const DLDevice cuda0 = {kDLCUDA, 0};
#define PRODUCER ((void *)0x1000)
#define CONSUMER ((void *)0x2000)

static dl_sync_stream producer(void) {
  return dl_sync_stream_view(cuda0, PRODUCER);
}

static int same(void) {
  return dl_sync_export(producer(), dl_sync_stream_arg_int((int64_t)(intptr_t)PRODUCER));
}
static int minus_one(void) {
  return dl_sync_export(producer(), dl_sync_stream_arg_int(-1));
}
static int cross(void) {
  return dl_sync_export(producer(), dl_sync_stream_arg_int((int64_t)(intptr_t)CONSUMER));
}
/* f(a, b, c): three tensors of one producer stream, read by one kernel */
static int group(void) {
  dl_sync_group g;
  int status = dl_sync_group_init(&g, dl_sync_stream_view(cuda0, CONSUMER));
  for (int tensor = 0; tensor < 3 && status == DL_SYNC_OK; tensor++)
    status = dl_sync_group_add_stream(&g, producer());
  return status == DL_SYNC_OK ? dl_sync_group_wait(&g) : status;
}

/* Called once: callgrind counts what runs inside it (--toggle-collect=measure). */
__attribute__((noinline)) static int measure(int (*exchange)(void), long n) {
  int failures = 0;
  for (long i = 0; i < n; i++) failures += exchange() != DL_SYNC_OK;
  return failures;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s same|minus_one|cross|group N\n", argv[0]);
    return 2;
  }
  int (*exchange)(void) = strcmp(argv[1], "same") == 0        ? same
                          : strcmp(argv[1], "minus_one") == 0 ? minus_one
                          : strcmp(argv[1], "cross") == 0     ? cross
                          : strcmp(argv[1], "group") == 0     ? group
                                                              : NULL;
  if (exchange == NULL || dl_sync_set_backend(kDLCUDA, &null_backend) != DL_SYNC_OK) return 2;
  for (int i = 0; i < 100; i++) exchange(); /* warm: pools, thread cache */
  long calls_before = 0;
  for (int op = 0; op < DL_SYNC_OP_COUNT; op++) calls_before += thread_calls[op];
  long n = strtol(argv[2], NULL, 10);
  int failures = measure(exchange, n);
  long calls = -calls_before;
  for (int op = 0; op < DL_SYNC_OP_COUNT; op++) calls += thread_calls[op];
  printf("%s\t%ld runs\t%.2f backend calls each\t%ld event creations\t%s\n", argv[1], n,
         (double)calls / (double)n, thread_calls[DL_SYNC_OP_EVENT_CREATE] > 1 ? 1L : 0L,
         failures == 0 ? "ok" : dl_sync_last_error());
  return failures != 0;
}
