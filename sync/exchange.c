/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The DLPack C exchange table: finding a usable version, the producer's stream, and the
 * consumer's import of a tensor through it (docs/exchange.md).
 */
#include "internal.h"

/* The newest table with major version 1, walking prev_api past newer majors. */
static int find_table(const DLPackExchangeAPI *api, const DLPackExchangeAPI **found) {
  const DLPackExchangeAPIHeader *header = &api->header;
  int newer = 0; /* a table of a major dlsync does not read, newer than 1 */
  for (int depth = 0; header != NULL; depth++, header = header->prev_api) {
    if (depth == DL_SYNC_EXCHANGE_MAX_CHAIN)
      return dl_sync__error(DL_SYNC_EINVAL,
                            "the exchange table's prev_api chain is longer than %d tables: "
                            "it is cyclic or corrupt",
                            DL_SYNC_EXCHANGE_MAX_CHAIN);
    if (header->version.major != 1) {
      newer |= header->version.major > 1;
      continue;
    }
    if (header->version.minor < 2)
      return dl_sync__error(DL_SYNC_EINVAL,
                            "exchange table version 1.%u: tables exist since DLPack 1.2",
                            (unsigned)header->version.minor);
    *found = (const DLPackExchangeAPI *)header; /* the header is the table's first member */
    return DL_SYNC_OK;
  }
  return dl_sync__error(DL_SYNC_ENOTSUP,
                        "no exchange table of major version 1 in the chain (newest is %u.%u): "
                        "%s",
                        (unsigned)api->header.version.major, (unsigned)api->header.version.minor,
                        newer ? "the producer's table is newer than dlsync understands"
                              : "expected a table of DLPack 1.2 or later");
}

/* ENOTSUP naming the entry point a table lacks, else OK. */
static int has_entry(const DLPackExchangeAPI *table, int present, const char *name,
                     const char *instead) {
  if (present) return DL_SYNC_OK;
  return dl_sync__error(DL_SYNC_ENOTSUP,
                        "the producer's exchange table (version 1.%u) has no %s: %s",
                        (unsigned)table->header.version.minor, name, instead);
}

/* current_work_stream of a table found by find_table. */
static int table_stream(const DLPackExchangeAPI *table, DLDevice device, dl_sync_stream *out) {
  int status = has_entry(table, table->current_work_stream != NULL, "current_work_stream",
                         "pass a stream argument instead");
  if (status != DL_SYNC_OK) return status;
  void *stream = NULL;
  int rc = table->current_work_stream(device.device_type, device.device_id, &stream);
  if (rc != 0)
    return dl_sync__error(DL_SYNC_EBACKEND,
                          "the producer's current_work_stream(%s, %d) failed with %d",
                          dl_sync__device_type_name(device.device_type), (int)device.device_id, rc);
  *out = dl_sync_stream_view(device, stream);
  return DL_SYNC_OK;
}

int dl_sync__exchange_stream(const DLPackExchangeAPI *api, DLDevice device, dl_sync_stream *out) {
  if (api == NULL || out == NULL)
    return dl_sync__error(DL_SYNC_EINVAL, "api (%p) and out (%p) must not be NULL",
                          (const void *)api, (void *)out);
  int status = dl_sync__check_device("device", device);
  const DLPackExchangeAPI *table = NULL;
  if (status == DL_SYNC_OK) status = find_table(api, &table);
  return status != DL_SYNC_OK ? status : table_stream(table, device, out);
}

int dl_sync_stream_from_exchange_api(const DLPackExchangeAPI *api, DLDevice device,
                                     dl_sync_stream *out) {
  return dl_sync__named("dl_sync_stream_from_exchange_api",
                        dl_sync__exchange_stream(api, device, out));
}

/* Gives a tensor the import refuses back to its producer; returns status. */
static int refuse(DLManagedTensorVersioned *tensor, int status) {
  dl_sync__tensor_delete(tensor, 0);
  return status;
}

/* A device's stream family; DL_SYNC__FAMILY_UNKNOWN for any device dl_sync__check_device
   refuses (which then says why). */
static int family_of(DLDevice device) {
  return device.device_id >= 0 && device.device_id < DL_SYNC_MAX_DEVICES
             ? dl_sync__family(device.device_type)
             : DL_SYNC__FAMILY_UNKNOWN;
}

/* What the import accepts from the producer: a versioned tensor of DLPack major 1 (whose
   layout dlsync reads) on a device dlsync knows. */
static int check_taken(DLManagedTensorVersioned *tensor) {
  if (tensor->version.major != 1)
    return refuse(tensor, dl_sync__error(DL_SYNC_EINVAL,
                                         "the producer's tensor %p is of DLPack version %u.%u: "
                                         "expected major version 1",
                                         (void *)tensor, (unsigned)tensor->version.major,
                                         (unsigned)tensor->version.minor));
  if (family_of(tensor->dl_tensor.device) != DL_SYNC__FAMILY_UNKNOWN) return DL_SYNC_OK;
  return refuse(tensor, dl_sync__check_device("the producer's tensor", tensor->dl_tensor.device));
}

int dl_sync__exchange_take(const DLPackExchangeAPI *api, void *object,
                           const DLPackExchangeAPI **table, DLManagedTensorVersioned **out) {
  if (api == NULL) return dl_sync__error(DL_SYNC_EINVAL, "api must not be NULL");
  if (object == NULL) return dl_sync__error(DL_SYNC_EINVAL, "py_object must not be NULL");
  int status = find_table(api, table);
  if (status == DL_SYNC_OK)
    status = has_entry(*table, (*table)->managed_tensor_from_py_object_no_sync != NULL,
                       "managed_tensor_from_py_object_no_sync", "import through __dlpack__");
  if (status != DL_SYNC_OK) return status;
  DLManagedTensorVersioned *tensor = NULL;
  int rc = (*table)->managed_tensor_from_py_object_no_sync(object, &tensor);
  if (rc != 0)
    return dl_sync__error(DL_SYNC_EBACKEND,
                          "the producer's managed_tensor_from_py_object_no_sync failed with %d",
                          rc);
  if (tensor == NULL)
    return dl_sync__error(DL_SYNC_EBACKEND,
                          "the producer's managed_tensor_from_py_object_no_sync returned 0 and "
                          "no tensor: expected a tensor, or nonzero for a failure");
  status = check_taken(tensor);
  if (status == DL_SYNC_OK) *out = tensor;
  return status;
}

/* EINVAL: the tensor's device is of another family than the consumer stream's. */
DL_SYNC__COLD static int other_family(DLDevice tensor, DLDevice consumer) {
  return dl_sync__error(DL_SYNC_EINVAL,
                        "the producer's tensor is on %s:%d and the consumer's stream on %s:%d: "
                        "expected a consumer stream of the tensor's device family",
                        dl_sync__device_type_name(tensor.device_type), (int)tensor.device_id,
                        dl_sync__device_type_name(consumer.device_type), (int)consumer.device_id);
}

/* producer before consumer: two streams of one family. Out of line, so that the import on
   the producer's own stream pays for no frame of the ordering's. */
DL_SYNC__NOINLINE static int order_streams(dl_sync_stream producer, dl_sync_stream consumer) {
  int status = dl_sync__push_dep(producer, consumer);
  if (status == DL_SYNC_OK) return status;
  return dl_sync__error_context(status,
                                "ordering the stream %p that the producer's current_work_stream "
                                "answered for %s:%d before the consumer's stream %p",
                                producer.handle,
                                dl_sync__device_type_name(producer.device.device_type),
                                (int)producer.device.device_id, consumer.handle);
}

/* The producer's current work stream on device (of the consumer's family), ordered before
   consumer. */
static int order_import(const DLPackExchangeAPI *table, DLDevice device, dl_sync_stream consumer) {
  dl_sync_stream producer;
  int status = table_stream(table, device, &producer);
  if (status != DL_SYNC_OK) return status;
  consumer = dl_sync_stream_view(consumer.device, consumer.handle);
  if (dl_sync__same_stream(producer, consumer)) return DL_SYNC_OK; /* N0: nothing to order */
  return order_streams(producer, consumer);
}

static int import(const DLPackExchangeAPI *api, void *object, dl_sync_stream consumer,
                  DLManagedTensorVersioned **out) {
  if (out == NULL) return dl_sync__error(DL_SYNC_EINVAL, "out must not be NULL");
  int consumer_family = family_of(consumer.device);
  if (consumer_family == DL_SYNC__FAMILY_UNKNOWN)
    return dl_sync__check_device("the consumer's stream", consumer.device);
  const DLPackExchangeAPI *table = NULL;
  DLManagedTensorVersioned *tensor = NULL;
  int status = dl_sync__exchange_take(api, object, &table, &tensor);
  if (status != DL_SYNC_OK) return status;
  DLDevice device = tensor->dl_tensor.device;
  int family = dl_sync__family(device.device_type);
  if (family != DL_SYNC__FAMILY_NONE) { /* a device without streams needs nothing */
    status = family == consumer_family ? order_import(table, device, consumer)
                                       : other_family(device, consumer.device);
    if (status != DL_SYNC_OK) return refuse(tensor, status);
  }
  *out = tensor;
  return DL_SYNC_OK;
}

/* flatten: the checks and the producer's two calls in one frame. */
DL_SYNC__FLATTEN int dl_sync_exchange_import(const DLPackExchangeAPI *api, void *py_object,
                                             dl_sync_stream consumer,
                                             DLManagedTensorVersioned **out) {
  return dl_sync__named("dl_sync_exchange_import", import(api, py_object, consumer, out));
}
