/* SPDX-License-Identifier: Apache-2.0 */
#include "tracing_backend.h"

#include <stdatomic.h>
#include <stdio.h>

#include "stream_names.h"

static const dl_sync_backend *inner;
static dl_sync_backend tracer;
static atomic_long calls[DL_SYNC_OP_COUNT];

long tracing_calls(dl_sync_op op) {
  return atomic_load(&calls[op]);
}

static void count(dl_sync_op op) {
  atomic_fetch_add(&calls[op], 1);
}

static int get_device(void *ctx, int32_t *device) {
  (void)ctx;
  count(DL_SYNC_OP_GET_DEVICE);
  return inner->get_device(inner->ctx, device);
}

static int set_device(void *ctx, int32_t device) {
  (void)ctx;
  count(DL_SYNC_OP_SET_DEVICE);
  return inner->set_device(inner->ctx, device);
}

static int event_create(void *ctx, void **event) {
  (void)ctx;
  count(DL_SYNC_OP_EVENT_CREATE);
  int error = inner->event_create(inner->ctx, event);
  printf("       dlsync: new pooled event %p (first use only)\n", *event);
  return error;
}

static int event_destroy(void *ctx, void *event) {
  (void)ctx;
  count(DL_SYNC_OP_EVENT_DESTROY);
  return inner->event_destroy(inner->ctx, event);
}

static int event_record(void *ctx, void *event, void *stream) {
  (void)ctx;
  count(DL_SYNC_OP_EVENT_RECORD);
  printf("       dlsync: record event %p on %s\n", event, stream_name(stream));
  return inner->event_record(inner->ctx, event, stream);
}

static int stream_wait(void *ctx, void *stream, void *event) {
  (void)ctx;
  count(DL_SYNC_OP_STREAM_WAIT);
  printf("       dlsync: %s waits for event %p\n", stream_name(stream), event);
  return inner->stream_wait(inner->ctx, stream, event);
}

static int stream_wait_external(void *ctx, void *stream, void *event) {
  (void)ctx;
  count(DL_SYNC_OP_STREAM_WAIT_EXTERNAL);
  return inner->stream_wait_external(inner->ctx, stream, event);
}

static int event_synchronize(void *ctx, void *event) {
  (void)ctx;
  count(DL_SYNC_OP_EVENT_SYNCHRONIZE);
  return inner->event_synchronize(inner->ctx, event);
}

static int event_query(void *ctx, void *event, int *complete) {
  (void)ctx;
  count(DL_SYNC_OP_EVENT_QUERY);
  return inner->event_query(inner->ctx, event, complete);
}

static int capture_info(void *ctx, void *stream, dl_sync_capture_info *out) {
  (void)ctx;
  count(DL_SYNC_OP_CAPTURE_INFO);
  return inner->capture_info(inner->ctx, stream, out);
}

static int graph_retain(void *ctx, void *stream, void *object, void (*release)(void *)) {
  (void)ctx;
  count(DL_SYNC_OP_GRAPH_RETAIN);
  return inner->graph_retain(inner->ctx, stream, object, release);
}

static const char *error_name(void *ctx, int code) {
  (void)ctx;
  return inner->error_name(inner->ctx, code);
}

static const char *error_string(void *ctx, int code) {
  (void)ctx;
  return inner->error_string(inner->ctx, code);
}

static int error_status(void *ctx, int code) {
  (void)ctx;
  return inner->error_status(inner->ctx, code);
}

static int available(void *ctx, dl_sync_op op) {
  (void)ctx;
  return inner->available(inner->ctx, op);
}

const dl_sync_backend *tracing_backend(const dl_sync_backend *wrapped) {
  inner = wrapped;
  tracer = *wrapped; /* name, flags and call names stay the inner backend's */
  tracer.get_device = get_device;
  tracer.set_device = set_device;
  tracer.event_create = event_create;
  tracer.event_destroy = event_destroy;
  tracer.event_record = event_record;
  tracer.stream_wait = stream_wait;
  tracer.stream_wait_external = wrapped->stream_wait_external ? stream_wait_external : NULL;
  tracer.event_synchronize = event_synchronize;
  tracer.event_query = event_query;
  tracer.capture_info = capture_info;
  tracer.graph_retain = wrapped->graph_retain ? graph_retain : NULL;
  tracer.error_name = error_name;
  tracer.error_string = error_string;
  tracer.error_status = error_status;
  tracer.available = wrapped->available ? available : NULL;
  return &tracer;
}
