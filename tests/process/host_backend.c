/* SPDX-License-Identifier: Apache-2.0 */
#include "host_backend.h"

#include <stdatomic.h>
#include <stdlib.h>

static atomic_long created, destroyed, records, waits;
static _Thread_local int32_t current_device;

static int host_device_count(void *ctx, int *count) {
  (void)ctx;
  *count = 2;
  return 0;
}

static int host_get_device(void *ctx, int32_t *device_id) {
  (void)ctx;
  *device_id = current_device;
  return 0;
}

static int host_set_device(void *ctx, int32_t device_id) {
  (void)ctx;
  if (device_id < 0 || device_id > 1) return 1;
  current_device = device_id;
  return 0;
}

static int host_event_create(void *ctx, void **event) {
  (void)ctx;
  *event = malloc(16);
  if (*event == NULL) return 2;
  atomic_fetch_add(&created, 1);
  return 0;
}

static int host_event_destroy(void *ctx, void *event) {
  (void)ctx;
  free(event);
  atomic_fetch_add(&destroyed, 1);
  return 0;
}

static int host_event_record(void *ctx, void *event, void *stream) {
  (void)ctx;
  (void)event;
  (void)stream;
  atomic_fetch_add(&records, 1);
  return 0;
}

static int host_stream_wait(void *ctx, void *stream, void *event) {
  (void)ctx;
  (void)stream;
  (void)event;
  atomic_fetch_add(&waits, 1);
  return 0;
}

static int host_event_synchronize(void *ctx, void *event) {
  (void)ctx;
  (void)event;
  return 0;
}

static int host_event_query(void *ctx, void *event, int *complete) {
  (void)ctx;
  (void)event;
  *complete = 1;
  return 0;
}

static int host_capture_info(void *ctx, void *stream, dl_sync_capture_info *out) {
  (void)ctx;
  (void)stream;
  out->status = DL_SYNC_CAPTURE_NONE;
  out->id = 0;
  return 0;
}

static const char *host_error_name(void *ctx, int code) {
  (void)ctx;
  return code == 0 ? "hostSuccess" : "hostError";
}

static const char *host_error_string(void *ctx, int code) {
  (void)ctx;
  return code == 0 ? "no error" : "host backend error";
}

static int host_error_status(void *ctx, int code) {
  (void)ctx;
  return code == 2 ? DL_SYNC_ENOMEM : DL_SYNC_EBACKEND;
}

static const char *const backend_call_names[DL_SYNC_OP_COUNT] = {
    [DL_SYNC_OP_DEVICE_COUNT] = "hostDeviceCount",
    [DL_SYNC_OP_GET_DEVICE] = "hostGetDevice",
    [DL_SYNC_OP_SET_DEVICE] = "hostSetDevice",
    [DL_SYNC_OP_EVENT_CREATE] = "hostEventCreate",
    [DL_SYNC_OP_EVENT_DESTROY] = "hostEventDestroy",
    [DL_SYNC_OP_EVENT_RECORD] = "hostEventRecord",
    [DL_SYNC_OP_STREAM_WAIT] = "hostStreamWait",
    [DL_SYNC_OP_STREAM_WAIT_EXTERNAL] = "hostStreamWaitExternal",
    [DL_SYNC_OP_EVENT_SYNCHRONIZE] = "hostEventSynchronize",
    [DL_SYNC_OP_EVENT_QUERY] = "hostEventQuery",
    [DL_SYNC_OP_CAPTURE_INFO] = "hostCaptureInfo",
    [DL_SYNC_OP_GRAPH_RETAIN] = "hostGraphRetain",
};

static const dl_sync_backend backend = {
    DL_SYNC_BACKEND_INIT,
    .name = "host",
    .call_names = backend_call_names,
    .call_name_count = DL_SYNC_OP_COUNT,
    .device_count = host_device_count,
    .get_device = host_get_device,
    .set_device = host_set_device,
    .event_create = host_event_create,
    .event_destroy = host_event_destroy,
    .event_record = host_event_record,
    .stream_wait = host_stream_wait,
    .event_synchronize = host_event_synchronize,
    .event_query = host_event_query,
    .capture_info = host_capture_info,
    .error_name = host_error_name,
    .error_string = host_error_string,
    .error_status = host_error_status,
};

const dl_sync_backend *host_backend(void) {
  return &backend;
}
long host_events_created(void) {
  return atomic_load(&created);
}
long host_events_destroyed(void) {
  return atomic_load(&destroyed);
}
long host_records(void) {
  return atomic_load(&records);
}
long host_waits(void) {
  return atomic_load(&waits);
}
