/* SPDX-License-Identifier: Apache-2.0 */
/* dl_sync_sim_reset: every stream, event, graph, capture and clock forgotten, above the
   files that hold them (so that none of them calls back up here). */
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

void dl_sync_sim_reset(void) {
  pthread_mutex_lock(&dl_sync__sim.lock);
  dl_sync__sim_wait_streams_idle();
  dl_sync__sim.shutting_down = 1;
  pthread_cond_broadcast(&dl_sync__sim.changed);
  dl_sync_sim_stream *streams = dl_sync__sim.streams;
  dl_sync__sim.streams = NULL;
  pthread_mutex_unlock(&dl_sync__sim.lock);
  dl_sync__sim_own_thread_call(1);
  for (dl_sync_sim_stream *s = streams; s != NULL; s = s->next_stream)
    pthread_join(s->worker, NULL);
  dl_sync__sim_own_thread_call(0);

  pthread_mutex_lock(&dl_sync__sim.lock);
  while (streams != NULL) {
    dl_sync_sim_stream *next = streams->next_stream;
    dl_sync__sim_stream_free(streams);
    streams = next;
  }
  dl_sync__sim_events_retire();
  dl_sync_sim_user_object **released = NULL;
  size_t released_count = 0;
  while (dl_sync__sim.execs != NULL) {
    dl_sync_sim_graph_exec *next = dl_sync__sim.execs->next_exec;
    dl_sync__sim_graph_free(dl_sync__sim.execs->graph, &released, &released_count);
    free(dl_sync__sim.execs);
    dl_sync__sim.execs = next;
  }
  while (dl_sync__sim.graphs != NULL) {
    dl_sync_sim_graph *next = dl_sync__sim.graphs->next_graph;
    dl_sync__sim_graph_free(dl_sync__sim.graphs, &released, &released_count);
    dl_sync__sim.graphs = next;
  }
  dl_sync__sim_capture_free_all();
  for (int i = 0; i < SIM_MAX_AGENTS; i++) {
    free(dl_sync__sim.host_clocks[i]);
    dl_sync__sim.host_clocks[i] = NULL;
  }
  dl_sync__sim_race_clear();
  dl_sync__sim_sync_clocks_free();
  dl_sync__sim_thread_exits_free();
  memset(dl_sync__sim.legacy, 0, sizeof dl_sync__sim.legacy);
  dl_sync__sim.next_agent = 0;
  dl_sync__sim.jitter_max_us = 0;
  dl_sync__sim.query_rules = DL_SYNC_SIM_QUERY_RULES_CUDA;
  dl_sync__sim.destroyed_stream_reads = 0;
  dl_sync__sim.shutting_down = 0;
  dl_sync__sim.generation++;
  pthread_mutex_unlock(&dl_sync__sim.lock);
  dl_sync__sim_user_objects_release(released, released_count);
  free(released);
}
