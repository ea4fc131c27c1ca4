/* SPDX-License-Identifier: Apache-2.0 */
/* The plugin the dlclose programs load and unload: a framework's extension module with its
   own static copy of dlsync (and, built with PLUGIN_OWNS_SIM, of the simulated device),
   reached only through this table. */
#ifndef DL_SYNC_TEST_PROCESS_DLCLOSE_PLUGIN_H_
#define DL_SYNC_TEST_PROCESS_DLCLOSE_PLUGIN_H_

#include "dlsync/dlsync.h"
#include "dlsync/sim.h"

/* The simulator's calls the programs make, from the plugin's copy or from the shared
   simulator library. */
typedef struct plugin_sim_api {
  const dl_sync_backend *(*backend)(void);
  void (*reset)(void);
  int (*stream_create)(dl_sync_sim_stream **stream, unsigned flags);
  int (*stream_destroy)(dl_sync_sim_stream *stream);
  int (*stream_synchronize)(dl_sync_sim_stream *stream);
  int (*begin_capture)(dl_sync_sim_stream *stream, int mode);
  int (*end_capture)(dl_sync_sim_stream *stream, dl_sync_sim_graph **graph);
  int (*graph_count_nodes)(const dl_sync_sim_graph *graph, size_t *kernels, size_t *external_waits,
                           size_t *external_records);
  int (*graph_destroy)(dl_sync_sim_graph *graph);
} plugin_sim_api;

typedef struct dlclose_plugin {
  /* With the plugin's own simulator: installs it, exports once between two streams of
     its own (the calling thread gets a thread cache), and destroys the streams. NULL
     without one. */
  int (*export_once)(void);
  /* Installs backend under kDLCUDA and exports producer's work to consumer. */
  int (*export_streams)(const dl_sync_backend *backend, void *producer, void *consumer);
  const char *(*last_error)(void);
  /* dl_sync_shutdown, and the plugin's simulator's reset (its stream threads end). */
  int (*teardown)(void);
  /* The plugin's own simulator; all NULL without one. */
  plugin_sim_api sim;
} dlclose_plugin;

typedef const dlclose_plugin *(*dlclose_plugin_get_fn)(void);
#define DLCLOSE_PLUGIN_GET "dlclose_plugin_get"

#endif
