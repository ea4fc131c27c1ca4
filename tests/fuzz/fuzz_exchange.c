/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer: exchange-table validation on garbage chains of tables (versions, prev_api
   links including cycles, missing or failing current_work_stream). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dlsync/dlsync.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { TABLES = 8 };

static int stream_ok(DLDeviceType type, int32_t id, void **out) {
  (void)type;
  *out = (void *)(uintptr_t)(0x1000 + (uint32_t)id);
  return 0;
}

static int stream_fails(DLDeviceType type, int32_t id, void **out) {
  (void)type;
  (void)id;
  (void)out;
  return -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  DLPackExchangeAPI tables[TABLES];
  memset(tables, 0, sizeof tables);
  size_t at = 0;
  for (int i = 0; i < TABLES; i++) {
    uint8_t bytes[4] = {0};
    for (int k = 0; k < 4; k++) bytes[k] = at < size ? data[at++] : 0;
    tables[i].header.version = (DLPackVersion){bytes[0] % 4, bytes[1] % 5};
    tables[i].header.prev_api =
        bytes[2] % (TABLES + 1) == TABLES ? NULL : &tables[bytes[2] % (TABLES + 1)].header;
    tables[i].current_work_stream = bytes[3] % 3 == 0   ? NULL
                                    : bytes[3] % 3 == 1 ? stream_ok
                                                        : stream_fails;
  }
  int32_t device_type = at < size ? data[at++] % 20 : 2;
  int32_t device_id = at < size ? (int8_t)data[at++] : 0;
  dl_sync_stream out = {{kDLCPU, 0}, NULL};
  int status = dl_sync_stream_from_exchange_api(
      &tables[0], (DLDevice){(DLDeviceType)device_type, device_id}, &out);
  if (status == DL_SYNC_OK && out.device.device_id != device_id) abort();
  if (status != DL_SYNC_OK && dl_sync_python_exception(status) == NULL) abort();
  return 0;
}
