/* SPDX-License-Identifier: Apache-2.0 */
/* The framework's program: dlsync and its simulated device, linked statically. */
#include <dlsync/dlsync.h>
#include <dlsync/sim.h>
#include <stdio.h>

int main(void) {
  int status = dl_sync_set_backend(kDLCUDA, dl_sync_sim_backend());
  DLDevice device = {kDLCUDA, 0};
  if (status == DL_SYNC_OK)
    status = dl_sync_export(dl_sync_stream_view(device, DL_SYNC_STREAM_LEGACY),
                            dl_sync_stream_arg_none());
  printf("dlsync %d.%d.%d from FetchContent: export on the simulated device -> %s\n",
         DL_SYNC_VERSION_MAJOR, DL_SYNC_VERSION_MINOR, DL_SYNC_VERSION_PATCH,
         dl_sync_status_name(status));
  dl_sync_set_backend(kDLCUDA, NULL);
  dl_sync_sim_reset();
  return status == DL_SYNC_OK ? 0 : 1;
}
