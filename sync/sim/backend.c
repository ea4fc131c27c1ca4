/* SPDX-License-Identifier: Apache-2.0 */
/* The dlsync backend over the simulated device. */
#include "dlsync/status.h"
#include "sim_internal.h"

static int sim_device_count(void *ctx, int *count) {
  (void)ctx;
  *count = DL_SYNC_SIM_DEVICES;
  return DL_SYNC_SIM_SUCCESS;
}

static int sim_get_device(void *ctx, int32_t *device) {
  (void)ctx;
  return dl_sync_sim_get_device(device);
}

static int sim_set_device(void *ctx, int32_t device) {
  (void)ctx;
  return dl_sync_sim_set_device(device);
}

static int sim_event_create(void *ctx, void **event) {
  (void)ctx;
  return dl_sync_sim_event_create((dl_sync_sim_event **)event);
}

static int sim_event_destroy(void *ctx, void *event) {
  (void)ctx;
  return dl_sync_sim_event_destroy(event);
}

static int sim_event_record(void *ctx, void *event, void *stream) {
  (void)ctx;
  return dl_sync_sim_event_record(event, stream, 0);
}

static int sim_stream_wait(void *ctx, void *stream, void *event) {
  (void)ctx;
  return dl_sync_sim_stream_wait_event(stream, event, 0);
}

static int sim_stream_wait_external(void *ctx, void *stream, void *event) {
  (void)ctx;
  return dl_sync_sim_stream_wait_event(stream, event, DL_SYNC_SIM_EVENT_WAIT_EXTERNAL);
}

/* Queries and synchronizations run in the relaxed interaction mode, the caller's put back
   after, as the runtime backends do: dlsync makes them only on events recorded outside any
   capture, and no capture of any thread is then disturbed (docs/sim.md). */
static int relaxed(int (*call)(dl_sync_sim_event *event), dl_sync_sim_event *event) {
  int mode = DL_SYNC_SIM_CAPTURE_RELAXED;
  int error = dl_sync_sim_thread_exchange_capture_mode(&mode);
  if (error != DL_SYNC_SIM_SUCCESS) return error;
  error = call(event);
  int restored = dl_sync_sim_thread_exchange_capture_mode(&mode);
  int answered = error == DL_SYNC_SIM_SUCCESS || error == DL_SYNC_SIM_ERROR_NOT_READY;
  return answered && restored != DL_SYNC_SIM_SUCCESS ? restored : error;
}

static int sim_event_synchronize(void *ctx, void *event) {
  (void)ctx;
  return relaxed(dl_sync_sim_event_synchronize, event);
}

static int sim_event_query(void *ctx, void *event, int *complete) {
  (void)ctx;
  int error = relaxed(dl_sync_sim_event_query, event);
  *complete = error == DL_SYNC_SIM_SUCCESS;
  return error == DL_SYNC_SIM_ERROR_NOT_READY ? DL_SYNC_SIM_SUCCESS : error;
}

/* Under HIP's rules the backend does what the HIP backend does: a deferred release's event
   is recorded on a non-blocking stream of dlsync's own (dlsync/backend.h own_stream_create);
   under CUDA's, whose queries read no stream, on the consumer's stream. */
static int sim_own_stream_create(void *ctx, void **stream) {
  (void)ctx;
  return dl_sync_sim_stream_create((dl_sync_sim_stream **)stream, DL_SYNC_SIM_STREAM_NON_BLOCKING);
}

static int sim_own_stream_check(void *ctx, void *stream) {
  (void)ctx;
  int32_t status = DL_SYNC_CAPTURE_NONE;
  return dl_sync_sim_stream_capture_info(stream, &status, NULL, NULL);
}

static int sim_own_stream_destroy(void *ctx, void *stream) {
  (void)ctx;
  return dl_sync_sim_stream_destroy(stream);
}

static int sim_available(void *ctx, dl_sync_op op) {
  (void)ctx;
  return op != DL_SYNC_OP_OWN_STREAM_CREATE ||
         dl_sync_sim_query_rules() == DL_SYNC_SIM_QUERY_RULES_HIP;
}

/* Under HIP's rules the backend does what the HIP backend does for a tensor's event: it is
   not synchronized while its recording stream captures, nor once that stream is gone. */
static int sim_event_synchronize_disturbs(void *ctx, void *stream, int *disturbs) {
  (void)ctx;
  if (dl_sync_sim_query_rules() != DL_SYNC_SIM_QUERY_RULES_HIP) {
    *disturbs = 0; /* CUDA's rules never read the recording stream */
    return DL_SYNC_SIM_SUCCESS;
  }
  if (*disturbs) return DL_SYNC_SIM_SUCCESS; /* a stream the caller cannot name: unknown */
  if (stream == NULL || stream == DL_SYNC_STREAM_LEGACY)
    return DL_SYNC_SIM_SUCCESS; /* HIP exempts the null stream */
  int32_t status = DL_SYNC_CAPTURE_NONE;
  int error = dl_sync_sim_stream_capture_info(stream, &status, NULL, NULL);
  *disturbs = error != DL_SYNC_SIM_SUCCESS || status != DL_SYNC_CAPTURE_NONE;
  return DL_SYNC_SIM_SUCCESS;
}

static int sim_capture_info(void *ctx, void *stream, dl_sync_capture_info *out) {
  (void)ctx;
  return dl_sync_sim_stream_capture_info(stream, &out->status, &out->id, NULL);
}

static int sim_graph_retain(void *ctx, void *stream, void *object, void (*release)(void *)) {
  (void)ctx;
  int32_t status = DL_SYNC_CAPTURE_NONE;
  dl_sync_sim_graph *graph = NULL;
  int error = dl_sync_sim_stream_capture_info(stream, &status, NULL, &graph);
  if (error == DL_SYNC_SIM_SUCCESS && status != DL_SYNC_CAPTURE_ACTIVE)
    error = DL_SYNC_SIM_ERROR_CAPTURE_UNMATCHED;
  dl_sync_sim_user_object *user_object = NULL;
  if (error == DL_SYNC_SIM_SUCCESS)
    error = dl_sync_sim_user_object_create(&user_object, object, release, 1);
  if (error != DL_SYNC_SIM_SUCCESS) {
    release(object);
    return error;
  }
  error = dl_sync_sim_graph_retain_user_object(graph, user_object, 1);
  if (error != DL_SYNC_SIM_SUCCESS) dl_sync_sim_user_object_release(user_object, 1);
  return error;
}

static const char *sim_error_name(void *ctx, int code) {
  (void)ctx;
  return dl_sync_sim_error_name(code);
}

static const char *sim_error_string(void *ctx, int code) {
  (void)ctx;
  switch (code) {
    case DL_SYNC_SIM_ERROR_CAPTURE_ISOLATION:
      return "dependency created on uncaptured work in another stream";
    case DL_SYNC_SIM_ERROR_CAPTURE_IMPLICIT:
      return "operation would make the legacy stream depend on a capturing blocking stream";
    case DL_SYNC_SIM_ERROR_CAPTURE_INVALIDATED:
      return "operation failed due to a previous error during capture";
    case DL_SYNC_SIM_ERROR_INVALID_HANDLE:
      return "invalid resource handle";
    default:
      return "simulated device error";
  }
}

static int sim_error_status(void *ctx, int code) {
  (void)ctx;
  if (code == DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION) return DL_SYNC_ENOMEM;
  if (code >= DL_SYNC_SIM_ERROR_CAPTURE_UNSUPPORTED &&
      code <= DL_SYNC_SIM_ERROR_CAPTURE_WRONG_THREAD)
    return DL_SYNC_ECAPTURE;
  return DL_SYNC_EBACKEND;
}

static const char *const sim_backend_call_names[DL_SYNC_OP_COUNT] = {
    [DL_SYNC_OP_DEVICE_COUNT] = "dl_sync_sim_device_count",
    [DL_SYNC_OP_GET_DEVICE] = "dl_sync_sim_get_device",
    [DL_SYNC_OP_SET_DEVICE] = "dl_sync_sim_set_device",
    [DL_SYNC_OP_EVENT_CREATE] = "dl_sync_sim_event_create",
    [DL_SYNC_OP_EVENT_DESTROY] = "dl_sync_sim_event_destroy",
    [DL_SYNC_OP_EVENT_RECORD] = "dl_sync_sim_event_record",
    [DL_SYNC_OP_STREAM_WAIT] = "dl_sync_sim_stream_wait_event",
    [DL_SYNC_OP_STREAM_WAIT_EXTERNAL] = "dl_sync_sim_stream_wait_event(external)",
    [DL_SYNC_OP_EVENT_SYNCHRONIZE] = "dl_sync_sim_event_synchronize",
    [DL_SYNC_OP_EVENT_QUERY] = "dl_sync_sim_event_query",
    [DL_SYNC_OP_CAPTURE_INFO] = "dl_sync_sim_stream_capture_info",
    [DL_SYNC_OP_GRAPH_RETAIN] = "dl_sync_sim_graph_retain_user_object",
    [DL_SYNC_OP_OWN_STREAM_CREATE] = "dl_sync_sim_stream_create",
    [DL_SYNC_OP_OWN_STREAM_CHECK] = "dl_sync_sim_stream_capture_info",
    [DL_SYNC_OP_OWN_STREAM_DESTROY] = "dl_sync_sim_stream_destroy",
};

static const dl_sync_backend sim_backend = {
    DL_SYNC_BACKEND_INIT,
    .name = "sim",
    .call_names = sim_backend_call_names,
    .call_name_count = DL_SYNC_OP_COUNT,
    .device_count = sim_device_count,
    .get_device = sim_get_device,
    .set_device = sim_set_device,
    .event_create = sim_event_create,
    .event_destroy = sim_event_destroy,
    .event_record = sim_event_record,
    .stream_wait = sim_stream_wait,
    .stream_wait_external = sim_stream_wait_external,
    .event_synchronize = sim_event_synchronize,
    .event_query = sim_event_query,
    .capture_info = sim_capture_info,
    .graph_retain = sim_graph_retain,
    .error_name = sim_error_name,
    .error_string = sim_error_string,
    .error_status = sim_error_status,
    .available = sim_available,
    .own_stream_create = sim_own_stream_create,
    .own_stream_check = sim_own_stream_check,
    .own_stream_destroy = sim_own_stream_destroy,
    .event_synchronize_disturbs = sim_event_synchronize_disturbs,
};

const dl_sync_backend *dl_sync_sim_backend(void) {
  return &sim_backend;
}
