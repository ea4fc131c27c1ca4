/* SPDX-License-Identifier: Apache-2.0 */
/* The DLPack C exchange table: finding a usable version and the producer's stream. */
#include "internal.h"

/* The newest table with major version 1, walking prev_api past newer majors. */
static int find_table(const DLPackExchangeAPI *api, const DLPackExchangeAPI **found) {
  const DLPackExchangeAPIHeader *header = &api->header;
  for (int depth = 0; header != NULL; depth++, header = header->prev_api) {
    if (depth == DL_SYNC_EXCHANGE_MAX_CHAIN)
      return dl_sync__error(DL_SYNC_EINVAL,
                            "the exchange table's prev_api chain is longer than %d tables: "
                            "it is cyclic or corrupt",
                            DL_SYNC_EXCHANGE_MAX_CHAIN);
    if (header->version.major != 1) continue;
    if (header->version.minor < 2)
      return dl_sync__error(DL_SYNC_EINVAL,
                            "exchange table version 1.%u: tables exist since DLPack 1.2",
                            (unsigned)header->version.minor);
    *found = (const DLPackExchangeAPI *)header; /* the header is the table's first member */
    return DL_SYNC_OK;
  }
  return dl_sync__error(DL_SYNC_ENOTSUP,
                        "no exchange table of major version 1 in the chain (newest is %u.%u): "
                        "the producer's table is newer than dlsync understands",
                        (unsigned)api->header.version.major, (unsigned)api->header.version.minor);
}

int dl_sync__exchange_stream(const DLPackExchangeAPI *api, DLDevice device, dl_sync_stream *out) {
  if (api == NULL || out == NULL)
    return dl_sync__error(DL_SYNC_EINVAL, "api (%p) and out (%p) must not be NULL",
                          (const void *)api, (void *)out);
  int status = dl_sync__check_device("device", device);
  const DLPackExchangeAPI *table = NULL;
  if (status == DL_SYNC_OK) status = find_table(api, &table);
  if (status != DL_SYNC_OK) return status;
  if (table->current_work_stream == NULL)
    return dl_sync__error(DL_SYNC_ENOTSUP,
                          "the producer's exchange table (version 1.%u) has no "
                          "current_work_stream: pass a stream argument instead",
                          (unsigned)table->header.version.minor);
  void *stream = NULL;
  int rc = table->current_work_stream(device.device_type, device.device_id, &stream);
  if (rc != 0)
    return dl_sync__error(DL_SYNC_EBACKEND,
                          "the producer's current_work_stream(%s, %d) failed with %d (from "
                          "Python, an exception is set)",
                          dl_sync__device_type_name(device.device_type), (int)device.device_id, rc);
  *out = dl_sync_stream_view(device, stream);
  return DL_SYNC_OK;
}

int dl_sync_stream_from_exchange_api(const DLPackExchangeAPI *api, DLDevice device,
                                     dl_sync_stream *out) {
  return dl_sync__named("dl_sync_stream_from_exchange_api",
                        dl_sync__exchange_stream(api, device, out));
}
