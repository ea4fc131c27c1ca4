/* SPDX-License-Identifier: Apache-2.0 */
/* The one-file distribution in use: dlsync.c and dlsync_sim.c compiled as they come,
   linked into this program. On the simulated device installed as the CUDA backend, a
   producer writes a buffer on its stream, exports it with dl_sync_export to the
   consumer's stream argument, and the consumer reads it on its own stream: the race
   checker must see the read ordered after the write. Without the export (the negative
   control) it must report the race. */
#include "dlsync.h"
#include "dlsync_sim.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static unsigned char buffer[4096];

static void fill(void *arg) {
  memset(arg, 7, sizeof buffer);
}
static void check(void *arg) {
  (void)arg;
}

/* One exchange; returns the races the checker found, or -1 on an error. */
static long exchange(int with_dlsync) {
  dl_sync_sim_race_reset();
  dl_sync_sim_stream *producer, *consumer;
  if (dl_sync_sim_stream_create(&producer, DL_SYNC_SIM_STREAM_NON_BLOCKING) != 0 ||
      dl_sync_sim_stream_create(&consumer, DL_SYNC_SIM_STREAM_NON_BLOCKING) != 0)
    return -1;
  dl_sync_sim_access write = {buffer, DL_SYNC_SIM_WRITE};
  dl_sync_sim_access read = {buffer, DL_SYNC_SIM_READ};
  if (dl_sync_sim_launch(producer, "producer.fill", fill, buffer, &write, 1) != 0) return -1;
  if (with_dlsync) {
    DLDevice device = {kDLCUDA, 0};
    int status = dl_sync_export(dl_sync_stream_view(device, producer),
                                dl_sync_stream_arg_int((int64_t)(intptr_t)consumer));
    if (status != DL_SYNC_OK) {
      fprintf(stderr, "dl_sync_export: %s: %s\n", dl_sync_status_name(status),
              dl_sync_last_error());
      return -1;
    }
  }
  if (dl_sync_sim_launch(consumer, "consumer.check", check, buffer, &read, 1) != 0) return -1;
  if (dl_sync_sim_device_synchronize() != 0) return -1;
  long races = (long)dl_sync_sim_race_count();
  dl_sync_sim_stream_destroy(producer);
  dl_sync_sim_stream_destroy(consumer);
  return races;
}

int main(void) {
  if (dl_sync_set_backend(kDLCUDA, dl_sync_sim_backend()) != DL_SYNC_OK) {
    fprintf(stderr, "dl_sync_set_backend: %s\n", dl_sync_last_error());
    return 1;
  }
  long ordered = exchange(1), unordered = exchange(0);
  printf(
      "one-file dlsync %d.%d.%d on the simulated device: %ld races with dl_sync_export, "
      "%ld without\n",
      DL_SYNC_VERSION_MAJOR, DL_SYNC_VERSION_MINOR, DL_SYNC_VERSION_PATCH, ordered, unordered);
  dl_sync_set_backend(kDLCUDA, NULL);
  dl_sync_sim_reset();
  return ordered == 0 && unordered > 0 ? 0 : 1;
}
