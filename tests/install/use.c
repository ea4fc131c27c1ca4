/* SPDX-License-Identifier: Apache-2.0 */
/* Uses the installed library: decodes a stream argument and exports to a CPU consumer. */
#include <dlsync/dlsync.h>
#include <stdio.h>

int main(void) {
  DLDevice cpu = {kDLCPU, 0};
  int status = dl_sync_export(dl_sync_stream_view(cpu, NULL), dl_sync_stream_arg_none());
  printf("dlsync %d.%d.%d: export on cpu -> %s\n", DL_SYNC_VERSION_MAJOR, DL_SYNC_VERSION_MINOR,
         DL_SYNC_VERSION_PATCH, dl_sync_status_name(status));
  return status == DL_SYNC_OK ? 0 : 1;
}
