/* SPDX-License-Identifier: Apache-2.0 */
/* The process exits with pooled and per-tensor events outstanding: dlsync must make no
   runtime call once main has returned (it has no exit-time destructors). Any backend call
   after exit begins aborts the process, which fails the test. */
#include <stdio.h>
#include <stdlib.h>

#include "dlsync/dlsync.h"
#include "support/counting_backend.h"

static volatile int exiting;
static dl_sync_backend guarded;

static int guarded_destroy(void *ctx, void *event) {
  if (exiting) {
    fprintf(stderr, "a runtime call (event_destroy) after main returned\n");
    abort();
  }
  return counting_backend.event_destroy(ctx, event);
}

static void mark_exit(void) {
  exiting = 1;
}

int main(void) {
  guarded = counting_backend;
  guarded.event_destroy = guarded_destroy;
  if (dl_sync_set_backend(kDLCUDA, &guarded) != DL_SYNC_OK) return 1;
  counting_stream a = {0}, b = {0};
  dl_sync_stream src = dl_sync_stream_view((DLDevice){kDLCUDA, 0}, &a);
  dl_sync_stream dst = dl_sync_stream_view((DLDevice){kDLCUDA, 0}, &b);
  static DLManagedTensorVersioned tensor = {.version = {1, 3}};
  tensor.dl_tensor.device = (DLDevice){kDLCUDA, 0};
  if (dl_sync_tensor_record(&tensor, src) != DL_SYNC_OK) return 1; /* a tensor's event */
  if (dl_sync_push_dep(src, dst) != DL_SYNC_OK) return 1;          /* an idle pooled one */
  atexit(mark_exit); /* runs first at exit: later calls abort */
  printf("exiting with %ld live events, none destroyed at exit\n",
         atomic_load(&counting_live_events));
  return 0;
}
