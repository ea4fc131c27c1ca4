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
/* The own streams of null_hip_backend (dlsync/backend.h own_stream_create): a record there
   stands for the slow stream's work when the wait before it did (a wait binds the record
   its event holds), so that releases behind a slow consumer stay pending through them. */
enum { OWN_STREAMS = 16 };
typedef struct own_stream {
  atomic_int waited_slow;
} own_stream;
static own_stream own_streams[OWN_STREAMS];
static atomic_int own_streams_made;

static own_stream *own_of(void *s) {
  for (int i = 0; i < OWN_STREAMS; i++)
    if (s == &own_streams[i]) return &own_streams[i];
  return NULL;
}

static int n_event_record(void *c, void *e, void *s) {
  (void)c;
  thread_calls[DL_SYNC_OP_EVENT_RECORD]++;
  own_stream *own = own_of(s);
  void *slow = atomic_load_explicit(&null_slow_stream, memory_order_relaxed);
  void *as =
      own != NULL && atomic_load_explicit(&own->waited_slow, memory_order_relaxed) ? slow : s;
  atomic_store_explicit(&((null_event *)e)->stream, as, memory_order_relaxed);
  return 0;
}
static int n_stream_wait(void *c, void *s, void *e) {
  (void)c;
  thread_calls[DL_SYNC_OP_STREAM_WAIT]++;
  own_stream *own = own_of(s);
  if (own != NULL) {
    void *slow = atomic_load_explicit(&null_slow_stream, memory_order_relaxed);
    void *recorded = atomic_load_explicit(&((null_event *)e)->stream, memory_order_relaxed);
    atomic_store_explicit(&own->waited_slow, slow != NULL && recorded == slow,
                          memory_order_relaxed);
  }
  return 0;
}
static int n_own_stream_create(void *c, void **s) {
  (void)c;
  thread_calls[DL_SYNC_OP_OWN_STREAM_CREATE]++;
  int i = atomic_fetch_add(&own_streams_made, 1);
  if (i >= OWN_STREAMS) return 2;
  *s = &own_streams[i];
  return 0;
}
static int n_own_stream_check(void *c, void *s) {
  (void)c;
  (void)s;
  thread_calls[DL_SYNC_OP_OWN_STREAM_CHECK]++;
  return 0;
}
static int n_own_stream_destroy(void *c, void *s) {
  (void)c;
  (void)s;
  thread_calls[DL_SYNC_OP_OWN_STREAM_DESTROY]++;
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
/* The runtime's id of a stream: its address, which the null model never reuses. */
static int n_stream_id(void *c, void *s, uint64_t *id) {
  (void)c;
  thread_calls[DL_SYNC_OP_STREAM_ID]++;
  *id = (uint64_t)(uintptr_t)s;
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

/* The calls both null tables make. */
#define NULL_BACKEND_CALLS                                                                        \
  .get_device = n_get_device, .set_device = n_set_device, .event_create = n_event_create,         \
  .event_destroy = n_event_destroy, .event_record = n_event_record, .stream_wait = n_stream_wait, \
  .event_synchronize = n_event_synchronize, .event_query = n_event_query,                         \
  .capture_info = n_capture_info, .error_name = n_error_name, .error_string = n_error_name,       \
  .error_status = n_error_status, .stream_id = n_stream_id

dl_sync_backend null_backend = {DL_SYNC_BACKEND_INIT, .name = "null", NULL_BACKEND_CALLS};

/* As null_backend, with HIP's way of watching deferred releases: on a stream of dlsync's own. */
dl_sync_backend null_hip_backend = {
    DL_SYNC_BACKEND_INIT,
    .name = "null-hip",
    NULL_BACKEND_CALLS,
    .own_stream_create = n_own_stream_create,
    .own_stream_check = n_own_stream_check,
    .own_stream_destroy = n_own_stream_destroy,
};
