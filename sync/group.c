/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Dependency groups: the producers of one consumer call, ordered before it with one
 * dependency per distinct producer stream and one wait per distinct tensor event.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define DL_SYNC__GROUP_MAGIC UINT64_C(0x646c73796e636770) /* "dlsyncgp" */

static int check_group(const dl_sync_group *group) {
  if (group == NULL) return dl_sync__error(DL_SYNC_EINVAL, "group must not be NULL");
  if (group->magic == DL_SYNC__GROUP_MAGIC) return DL_SYNC_OK;
  return dl_sync__error(DL_SYNC_EINVAL,
                        "group %p was not initialized: call dl_sync_group_init first",
                        (const void *)group);
}

static int consumer_family(const dl_sync_group *group) {
  return dl_sync__family(group->consumer.device.device_type);
}

static int same_device(DLDevice a, DLDevice b) {
  return a.device_type == b.device_type && a.device_id == b.device_id;
}

static int other_family(const dl_sync_group *group, const char *what, DLDevice device) {
  DLDevice consumer = group->consumer.device;
  return dl_sync__error(DL_SYNC_EINVAL,
                        "%s is on %s:%d and the group's consumer on %s:%d: expected a device "
                        "of the consumer's family",
                        what, dl_sync__device_type_name(device.device_type), (int)device.device_id,
                        dl_sync__device_type_name(consumer.device_type), (int)consumer.device_id);
}

static int full(const char *what) {
  return dl_sync__error(DL_SYNC_EINVAL,
                        "the group already holds %d distinct %s: call dl_sync_group_wait, "
                        "then add the rest",
                        DL_SYNC_GROUP_MAX, what);
}

static void empty(dl_sync_group *group) {
  group->stream_count = group->event_count = group->table_count = 0;
}

int dl_sync_group_init(dl_sync_group *group, dl_sync_stream consumer) {
  static const char *const func = "dl_sync_group_init";
  if (group == NULL)
    return dl_sync__named(func, dl_sync__error(DL_SYNC_EINVAL, "group must not be NULL"));
  int status = dl_sync__check_device("consumer", consumer.device);
  if (status != DL_SYNC_OK) return dl_sync__named(func, status);
  group->magic = DL_SYNC__GROUP_MAGIC;
  group->consumer = dl_sync_stream_view(consumer.device, consumer.handle);
  group->reserved = 0;
  empty(group);
  return DL_SYNC_OK;
}

static int add_stream(dl_sync_group *group, dl_sync_stream producer) {
  int status = dl_sync__check_device("producer", producer.device);
  if (status != DL_SYNC_OK) return status;
  int family = dl_sync__family(producer.device.device_type);
  if (family != consumer_family(group))
    return other_family(group, "the producer stream", producer.device);
  if (family == DL_SYNC__FAMILY_NONE) return DL_SYNC_OK; /* no streams, nothing to order */
  producer = dl_sync_stream_view(producer.device, producer.handle);
  if (dl_sync__same_stream(producer, group->consumer)) return DL_SYNC_OK;
  for (uint32_t i = 0; i < group->stream_count; i++)
    if (dl_sync__same_stream(producer, group->streams[i])) return DL_SYNC_OK;
  if (group->stream_count == DL_SYNC_GROUP_MAX) return full("producer streams");
  group->streams[group->stream_count++] = producer;
  return DL_SYNC_OK;
}

int dl_sync_group_add_stream(dl_sync_group *group, dl_sync_stream producer) {
  static const char *const func = "dl_sync_group_add_stream";
  int status = check_group(group);
  return dl_sync__named(func, status != DL_SYNC_OK ? status : add_stream(group, producer));
}

/* The producer's current work stream on device, asked once per distinct table and device
   in the group. */
static int add_table(dl_sync_group *group, const DLPackExchangeAPI *api, DLDevice device) {
  for (uint32_t i = 0; i < group->table_count; i++)
    if (group->tables[i].api == api && same_device(group->tables[i].device, device))
      return DL_SYNC_OK; /* asked already: its stream is in the group */
  if (group->table_count == DL_SYNC_GROUP_MAX) return full("exchange tables and devices");
  dl_sync_stream producer;
  int status = dl_sync__exchange_stream(api, device, &producer);
  if (status == DL_SYNC_OK) status = add_stream(group, producer);
  if (status != DL_SYNC_OK) return status;
  group->tables[group->table_count].api = api;
  group->tables[group->table_count].device = device;
  group->table_count++;
  return DL_SYNC_OK;
}

int dl_sync_group_add_exchange_api(dl_sync_group *group, const DLPackExchangeAPI *api,
                                   DLDevice device) {
  int status = check_group(group);
  return dl_sync__named("dl_sync_group_add_exchange_api",
                        status != DL_SYNC_OK ? status : add_table(group, api, device));
}

static int add_import(dl_sync_group *group, const DLPackExchangeAPI *api, void *object,
                      DLManagedTensorVersioned **out) {
  int status = check_group(group);
  if (status == DL_SYNC_OK && out == NULL)
    status = dl_sync__error(DL_SYNC_EINVAL, "out must not be NULL");
  const DLPackExchangeAPI *table = NULL;
  DLManagedTensorVersioned *tensor = NULL;
  if (status == DL_SYNC_OK) status = dl_sync__exchange_take(api, object, &table, &tensor);
  if (status != DL_SYNC_OK) return status;
  DLDevice device = tensor->dl_tensor.device;
  int family = dl_sync__family(device.device_type);
  if (family == DL_SYNC__FAMILY_NONE) { /* no streams: nothing to order */
  } else if (family != consumer_family(group)) {
    status = other_family(group, "the producer's tensor", device);
  } else {
    status = add_table(group, api, device);
  }
  if (status != DL_SYNC_OK) {
    dl_sync__tensor_delete(tensor, 0); /* refused: back to its producer */
    return status;
  }
  *out = tensor;
  return DL_SYNC_OK;
}

int dl_sync_group_add_exchange_import(dl_sync_group *group, const DLPackExchangeAPI *api,
                                      void *py_object, DLManagedTensorVersioned **out) {
  return dl_sync__named("dl_sync_group_add_exchange_import",
                        add_import(group, api, py_object, out));
}

static int add_event(dl_sync_group *group, const dl_sync__tensor_event_ref *ref, int found) {
  if (!found) return DL_SYNC_OK; /* another producer's tensor: nothing to wait for */
  if (dl_sync__family(ref->device.device_type) != consumer_family(group))
    return other_family(group, "the tensor's event", ref->device);
  for (uint32_t i = 0; i < group->event_count; i++)
    if (group->events[i].event == ref->event && same_device(group->events[i].device, ref->device))
      return DL_SYNC_OK;
  if (group->event_count == DL_SYNC_GROUP_MAX) return full("tensor events");
  group->events[group->event_count].event = ref->event;
  group->events[group->event_count].device = ref->device;
  group->events[group->event_count].owner = ref->owner;
  group->event_count++;
  return DL_SYNC_OK;
}

/* Exactly one of versioned and legacy is the tensor, which may be NULL. */
static int add_tensor(dl_sync_group *group, const DLManagedTensorVersioned *versioned,
                      const DLManagedTensor *legacy) {
  int status = check_group(group);
  if (status != DL_SYNC_OK) return status;
  dl_sync__tensor_event_ref ref;
  int found = 0;
  status = dl_sync__tensor_event_find(versioned, legacy, &ref, &found);
  return status != DL_SYNC_OK ? status : add_event(group, &ref, found);
}

int dl_sync_group_add_tensor(dl_sync_group *group, const DLManagedTensorVersioned *tensor) {
  return dl_sync__named("dl_sync_group_add_tensor", add_tensor(group, tensor, NULL));
}

int dl_sync_group_add_legacy_tensor(dl_sync_group *group, const DLManagedTensor *tensor) {
  return dl_sync__named("dl_sync_group_add_legacy_tensor", add_tensor(group, NULL, tensor));
}

/* Puts the producer that failed in front of this thread's message; keeps status. */
static int name_producer(int status, const char *what, unsigned index, unsigned count,
                         const void *handle, DLDevice device) {
  return dl_sync__error_context(status, "%s %u of %u (%p on %s:%d) failed", what, index + 1, count,
                                handle, dl_sync__device_type_name(device.device_type),
                                (int)device.device_id);
}

static int order_stream(dl_sync__dep *d, dl_sync_stream producer) {
  const dl_sync_backend *backend = dl_sync_get_backend(producer.device.device_type);
  if (backend != d->backend)
    return dl_sync__error(DL_SYNC_EINVAL,
                          "it is served by the '%s' backend and the consumer by '%s'",
                          backend != NULL ? backend->name : "no", d->backend->name);
  int status = dl_sync__dep_set_source(d, producer);
  return status != DL_SYNC_OK ? status : dl_sync__dep_order(d);
}

static int order_all(dl_sync__dep *d, const dl_sync_group *group) {
  for (uint32_t i = 0; i < group->stream_count; i++) {
    int status = order_stream(d, group->streams[i]);
    if (status != DL_SYNC_OK)
      return name_producer(status, "producer stream", i, group->stream_count,
                           group->streams[i].handle, group->streams[i].device);
  }
  if (group->event_count == 0) return DL_SYNC_OK;
  const dl_sync_capture_info *consumer_capture = NULL;
  int status = dl_sync__dep_dst_capture(d, &consumer_capture);
  if (status != DL_SYNC_OK) return status;
  for (uint32_t i = 0; i < group->event_count; i++) {
    dl_sync__tensor_event_ref ref = {.event = group->events[i].event,
                                     .device = group->events[i].device,
                                     .owner = group->events[i].owner};
    status = dl_sync__tensor_event_wait(&ref, &d->guard, &d->dst, consumer_capture);
    if (status != DL_SYNC_OK)
      return name_producer(status, "tensor event", i, group->event_count, ref.event, ref.device);
  }
  return DL_SYNC_OK;
}

int dl_sync_group_wait(dl_sync_group *group) {
  static const char *const func = "dl_sync_group_wait";
  int status = check_group(group);
  if (status != DL_SYNC_OK) return dl_sync__named(func, status);
  if (group->stream_count == 0 && group->event_count == 0) {
    empty(group);
    return DL_SYNC_OK;
  }
  const dl_sync_backend *backend = NULL;
  status = dl_sync__backend_for(group->consumer.device, &backend);
  dl_sync__dep d;
  if (status == DL_SYNC_OK) {
    status = dl_sync__dep_init(&d, backend, group->consumer, 0);
    if (status == DL_SYNC_OK) status = order_all(&d, group);
    status = dl_sync__guard_end(&d.guard, group->consumer.device, status);
  }
  empty(group);
  return dl_sync__named(func, status);
}
