/* SPDX-License-Identifier: Apache-2.0 */
#include "dlclose_plugin.h"

__attribute__((visibility("default"))) const dlclose_plugin *dlclose_plugin_get(void);

static int export_streams(const dl_sync_backend *backend, void *producer, void *consumer) {
  int status = dl_sync_set_backend(kDLCUDA, backend);
  if (status != DL_SYNC_OK) return status;
  DLDevice cuda0 = {kDLCUDA, 0};
  return dl_sync_export(dl_sync_stream_view(cuda0, producer),
                        dl_sync_stream_arg_int((int64_t)(intptr_t)consumer));
}

#ifdef PLUGIN_OWNS_SIM
static int export_once(void) {
  dl_sync_sim_stream *producer = NULL, *consumer = NULL;
  if (dl_sync_sim_stream_create(&producer, DL_SYNC_SIM_STREAM_NON_BLOCKING) != 0 ||
      dl_sync_sim_stream_create(&consumer, DL_SYNC_SIM_STREAM_NON_BLOCKING) != 0)
    return DL_SYNC_EBACKEND;
  int status = export_streams(dl_sync_sim_backend(), producer, consumer);
  dl_sync_sim_stream_synchronize(consumer);
  dl_sync_sim_stream_destroy(producer);
  dl_sync_sim_stream_destroy(consumer);
  return status;
}

static int teardown(void) {
  int status = dl_sync_shutdown();
  dl_sync_sim_reset();
  return status;
}
#else
static int teardown(void) {
  return dl_sync_shutdown();
}
#endif

const dlclose_plugin *dlclose_plugin_get(void) {
  static const dlclose_plugin plugin = {
#ifdef PLUGIN_OWNS_SIM
      .export_once = export_once,
      .sim =
          {
              .backend = dl_sync_sim_backend,
              .reset = dl_sync_sim_reset,
              .stream_create = dl_sync_sim_stream_create,
              .stream_destroy = dl_sync_sim_stream_destroy,
              .stream_synchronize = dl_sync_sim_stream_synchronize,
              .begin_capture = dl_sync_sim_stream_begin_capture,
              .end_capture = dl_sync_sim_stream_end_capture,
              .graph_count_nodes = dl_sync_sim_graph_count_nodes,
              .graph_destroy = dl_sync_sim_graph_destroy,
          },
#endif
      .export_streams = export_streams,
      .last_error = dl_sync_last_error,
      .teardown = teardown,
  };
  return &plugin;
}
