/* SPDX-License-Identifier: Apache-2.0 */
#include "counting_backend.h"

#include <stdlib.h>

typedef struct counting_event {
  int32_t device;
  atomic_int recorded;
} counting_event;

atomic_long counting_calls[DL_SYNC_OP_COUNT];
atomic_long counting_live_events;
static _Thread_local int32_t current_device;

void counting_reset(void) {
  for (int op = 0; op < DL_SYNC_OP_COUNT; op++) atomic_store(&counting_calls[op], 0);
}

static void count(dl_sync_op op) {
  atomic_fetch_add(&counting_calls[op], 1);
}

static int get_device(void *ctx, int32_t *device_id) {
  (void)ctx;
  count(DL_SYNC_OP_GET_DEVICE);
  *device_id = current_device;
  return 0;
}

static int set_device(void *ctx, int32_t device_id) {
  (void)ctx;
  count(DL_SYNC_OP_SET_DEVICE);
  current_device = device_id;
  return 0;
}

static int event_create(void *ctx, void **event) {
  (void)ctx;
  count(DL_SYNC_OP_EVENT_CREATE);
  counting_event *e = calloc(1, sizeof *e);
  e->device = current_device;
  atomic_fetch_add(&counting_live_events, 1);
  *event = e;
  return 0;
}

static int event_destroy(void *ctx, void *event) {
  (void)ctx;
  count(DL_SYNC_OP_EVENT_DESTROY);
  free(event);
  atomic_fetch_sub(&counting_live_events, 1);
  return 0;
}

static int event_record(void *ctx, void *event, void *stream) {
  (void)ctx;
  count(DL_SYNC_OP_EVENT_RECORD);
  counting_event *e = event;
  if (e->device != ((counting_stream *)stream)->device) return COUNTING_WRONG_DEVICE;
  atomic_store(&e->recorded, 1);
  return 0;
}

static int stream_wait(void *ctx, void *stream, void *event) {
  (void)ctx;
  (void)stream;
  count(DL_SYNC_OP_STREAM_WAIT);
  return atomic_load(&((counting_event *)event)->recorded) ? 0 : COUNTING_NEVER_RECORDED;
}

static int event_synchronize(void *ctx, void *event) {
  (void)ctx;
  (void)event;
  count(DL_SYNC_OP_EVENT_SYNCHRONIZE);
  return 0;
}

static int event_query(void *ctx, void *event, int *complete) {
  (void)ctx;
  (void)event;
  count(DL_SYNC_OP_EVENT_QUERY);
  *complete = 1;
  return 0;
}

static int capture_info(void *ctx, void *stream, dl_sync_capture_info *out) {
  (void)ctx;
  (void)stream;
  count(DL_SYNC_OP_CAPTURE_INFO);
  *out = (dl_sync_capture_info){DL_SYNC_CAPTURE_NONE, 0};
  return 0;
}

static const char *error_name(void *ctx, int code) {
  (void)ctx;
  return code == COUNTING_WRONG_DEVICE ? "countingWrongDevice" : "countingNeverRecorded";
}

static const char *error_string(void *ctx, int code) {
  (void)ctx;
  return code == COUNTING_WRONG_DEVICE ? "event and stream on different devices"
                                       : "wait on an event never recorded";
}

static int error_status(void *ctx, int code) {
  (void)ctx;
  (void)code;
  return DL_SYNC_EBACKEND;
}

dl_sync_backend counting_backend = {
    DL_SYNC_BACKEND_INIT,
    .name = "counting",
    .get_device = get_device,
    .set_device = set_device,
    .event_create = event_create,
    .event_destroy = event_destroy,
    .event_record = event_record,
    .stream_wait = stream_wait,
    .event_synchronize = event_synchronize,
    .event_query = event_query,
    .capture_info = capture_info,
    .error_name = error_name,
    .error_string = error_string,
    .error_status = error_status,
};
