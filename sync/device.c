/* SPDX-License-Identifier: Apache-2.0 */
/* Device validation and stream identity. */
#include "internal.h"

int dl_sync__check_device(const char *what, DLDevice device) {
  if (dl_sync__family(device.device_type) == DL_SYNC__FAMILY_UNKNOWN)
    return dl_sync__error(DL_SYNC_EINVAL,
                          "%s has unknown device type %d: expected a DLDeviceType of "
                          "DLPack 1.3 (1-4, 7-18)",
                          what, (int)device.device_type);
  if (device.device_id < 0 || device.device_id >= DL_SYNC_MAX_DEVICES)
    return dl_sync__error(DL_SYNC_EINVAL, "%s has device id %d on %s: expected 0 to %d", what,
                          (int)device.device_id, dl_sync__device_type_name(device.device_type),
                          DL_SYNC_MAX_DEVICES - 1);
  return DL_SYNC_OK;
}

int dl_sync__same_stream(dl_sync_stream a, dl_sync_stream b) {
  return a.handle == b.handle && a.device.device_id == b.device.device_id;
}
