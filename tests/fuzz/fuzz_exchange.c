/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer: exchange-table validation on garbage chains of tables (versions, prev_api
   links including cycles, missing or failing current_work_stream), and imports through
   them from producers whose conversion is missing, fails, returns nothing or a tensor of
   any version and device: a failed import leaves *out as it was and gives back every
   tensor it was handed, a successful one hands it over. */
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

/* The producer's tensor: its version and device from the input; its deleter counted. */
static DLManagedTensorVersioned made;
static int made_count, deleted_count;
static uint8_t made_bytes[4];

static void count_deletion(DLManagedTensorVersioned *t) {
  (void)t;
  deleted_count++;
}

static int convert_ok(void *object, DLManagedTensorVersioned **out) {
  (void)object;
  made = (DLManagedTensorVersioned){.version = {made_bytes[0] % 3, 3}, .deleter = count_deletion};
  made.dl_tensor.device = (DLDevice){(DLDeviceType)(made_bytes[1] % 20), (int8_t)made_bytes[2]};
  made_count++;
  *out = &made;
  return 0;
}

static int convert_fails(void *object, DLManagedTensorVersioned **out) {
  (void)object;
  (void)out;
  return -1;
}

static int convert_nothing(void *object, DLManagedTensorVersioned **out) {
  (void)object;
  (void)out;
  return 0;
}

static const DLPackManagedTensorFromPyObjectNoSync conversions[] = {NULL, convert_ok, convert_fails,
                                                                    convert_nothing};

/* An import through tables[0] onto a stream of consumer (the producer's current stream when
   same): checks what the import promises. */
static void import(DLPackExchangeAPI *tables, DLDevice consumer, int same) {
  made_count = deleted_count = 0;
  static int object;
  DLManagedTensorVersioned *untouched = (DLManagedTensorVersioned *)&object, *out = untouched;
  void *handle = same ? (void *)(uintptr_t)(0x1000 + (uint32_t)consumer.device_id) : NULL;
  int status =
      dl_sync_exchange_import(&tables[0], &object, dl_sync_stream_view(consumer, handle), &out);
  if (status == DL_SYNC_OK) {
    if (out != &made || made_count != 1 || deleted_count != 0) abort();
    out->deleter(out);
  } else {
    if (out != untouched || deleted_count != made_count) abort();
    if (dl_sync_python_exception(status) == NULL) abort();
  }
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
  uint8_t choice = at < size ? data[at++] : 0;
  for (int k = 0; k < 3; k++) made_bytes[k] = at < size ? data[at++] : 0;
  for (int i = 0; i < TABLES; i++)
    tables[i].managed_tensor_from_py_object_no_sync = conversions[(choice + i) % 4];
  import(tables, (DLDevice){(DLDeviceType)device_type, device_id}, choice & 4);
  return 0;
}
