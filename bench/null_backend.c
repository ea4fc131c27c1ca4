/* SPDX-License-Identifier: Apache-2.0 */
#include <stdatomic.h>
#include <stdlib.h>

#include "null_backend.h"

_Thread_local long thread_calls[DL_SYNC_OP_COUNT];
static int n_get_device(void *c, int32_t *d) {
  (void)c;
  thread_calls[DL_SYNC_OP_GET_DEVICE]++;
  *d = 0;
  return 0;
}
static int n_set_device(void *c, int32_t d) {
  (void)c;
  (void)d;
  thread_calls[DL_SYNC_OP_SET_DEVICE]++;
  return 0;
}
/* An event remembers the stream of its last record: work on null_slow_stream never
   completes. */
typedef struct null_event {
  _Atomic(void *) stream;
} null_event;
_Atomic(void *) null_slow_stream;

static int n_event_create(void *c, void **e) {
  (void)c;
  thread_calls[DL_SYNC_OP_EVENT_CREATE]++;
  *e = calloc(1, sizeof(null_event));
  return *e != NULL ? 0 : 2;
}
static int n_event_destroy(void *c, void *e) {
  (void)c;
  thread_calls[DL_SYNC_OP_EVENT_DESTROY]++;
  free(e);
  return 0;
}
static int n_event_record(void *c, void *e, void *s) {
  (void)c;
  thread_calls[DL_SYNC_OP_EVENT_RECORD]++;
  atomic_store_explicit(&((null_event *)e)->stream, s, memory_order_relaxed);
  return 0;
}
static int n_stream_wait(void *c, void *s, void *e) {
  (void)c;
  (void)e;
  (void)s;
  thread_calls[DL_SYNC_OP_STREAM_WAIT]++;
  return 0;
}
static int n_event_synchronize(void *c, void *e) {
  (void)c;
  (void)e;
  thread_calls[DL_SYNC_OP_EVENT_SYNCHRONIZE]++;
  return 0;
}
static int n_event_query(void *c, void *e, int *done) {
  (void)c;
  thread_calls[DL_SYNC_OP_EVENT_QUERY]++;
  void *slow = atomic_load_explicit(&null_slow_stream, memory_order_relaxed);
  *done = slow == NULL ||
          atomic_load_explicit(&((null_event *)e)->stream, memory_order_relaxed) != slow;
  return 0;
}
static int n_capture_info(void *c, void *s, dl_sync_capture_info *o) {
  (void)c;
  (void)s;
  thread_calls[DL_SYNC_OP_CAPTURE_INFO]++;
  o->status = DL_SYNC_CAPTURE_NONE;
  return 0;
}
static const char *n_error_name(void *c, int e) {
  (void)c;
  (void)e;
  return "nullError";
}
static int n_error_status(void *c, int e) {
  (void)c;
  (void)e;
  return DL_SYNC_EBACKEND;
}

dl_sync_backend null_backend = {
    DL_SYNC_BACKEND_INIT,
    .name = "null",
    .get_device = n_get_device,
    .set_device = n_set_device,
    .event_create = n_event_create,
    .event_destroy = n_event_destroy,
    .event_record = n_event_record,
    .stream_wait = n_stream_wait,
    .event_synchronize = n_event_synchronize,
    .event_query = n_event_query,
    .capture_info = n_capture_info,
    .error_name = n_error_name,
    .error_string = n_error_name,
    .error_status = n_error_status,
};
