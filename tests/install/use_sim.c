/* SPDX-License-Identifier: Apache-2.0 */
/* Uses the installed simulator: a kernel on a simulated stream, checked by its race
   checker. */
#include <dlsync/dlsync.h>
#include <dlsync/sim.h>
#include <stdio.h>

static void touch(void *arg) {
  ++*(int *)arg;
}

int main(void) {
  int value = 0;
  dl_sync_sim_access write = {&value, DL_SYNC_SIM_WRITE};
  int error = dl_sync_sim_launch(DL_SYNC_SIM_STREAM_LEGACY, "touch", touch, &value, &write, 1);
  if (error == DL_SYNC_SIM_SUCCESS) error = dl_sync_sim_device_synchronize();
  if (error == DL_SYNC_SIM_SUCCESS)
    error = dl_sync_sim_host_access("main", &value, DL_SYNC_SIM_READ);
  printf("dlsync sim: one kernel -> %s, value %d, %llu races\n", dl_sync_sim_error_name(error),
         value, (unsigned long long)dl_sync_sim_race_count());
  dl_sync_sim_reset();
  return error == DL_SYNC_SIM_SUCCESS && value == 1 ? 0 : 1;
}
