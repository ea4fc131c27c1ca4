/* Events: a record snapshots a stream's position and clock; a wait binds to it. */
#include <stdlib.h>

#include "sim_internal.h"

static dl_sync_sim_event *valid(dl_sync_sim_event *event) {
  return event != NULL && event->magic == SIM_EVENT_MAGIC ? event : NULL;
}

int dl_sync_sim_event_create(dl_sync_sim_event **event) {
  if (event == NULL) return DL_SYNC_SIM_ERROR_INVALID_VALUE;
  dl_sync_sim_event *e = calloc(1, sizeof *e);
  if (e == NULL) return DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION;
  e->magic = SIM_EVENT_MAGIC;
  pthread_mutex_lock(&sim.lock);
  e->next_event = sim.events;
  sim.events = e;
  pthread_mutex_unlock(&sim.lock);
  *event = e;
  return DL_SYNC_SIM_SUCCESS;
}

/* Pending waits hold the record's stream position, not the event: destroying is legal. */
int dl_sync_sim_event_destroy(dl_sync_sim_event *event) {
  pthread_mutex_lock(&sim.lock);
  int error = DL_SYNC_SIM_ERROR_INVALID_HANDLE;
  for (dl_sync_sim_event **link = &sim.events; *link != NULL; link = &(*link)->next_event) {
    if (*link != event) continue;
    *link = event->next_event;
    event->magic = 0;
    free(event->capture_nodes.items);
    free(event);
    error = DL_SYNC_SIM_SUCCESS;
    break;
  }
  pthread_mutex_unlock(&sim.lock);
  return error;
}

int dl_sync_sim_event_record(dl_sync_sim_event *event, dl_sync_sim_stream *stream, unsigned flags) {
  pthread_mutex_lock(&sim.lock);
  dl_sync_sim_stream *s = sim__resolve(stream);
  dl_sync_sim_event *e = valid(event);
  int error = s == NULL || e == NULL ? DL_SYNC_SIM_ERROR_INVALID_HANDLE : DL_SYNC_SIM_SUCCESS;
  if (error == DL_SYNC_SIM_SUCCESS && s->capture != NULL) {
    error = sim__capture_record(s, e, flags);
  } else if (error == DL_SYNC_SIM_SUCCESS) {
    error = sim__legacy_marker(s);
    if (error == DL_SYNC_SIM_SUCCESS) {
      e->capture = NULL;
      e->capture_nodes.count = 0;
      e->last = (sim_dep){s, s->enqueued};
      e->clock = s->clock;
    }
  }
  pthread_mutex_unlock(&sim.lock);
  return error;
}

int dl_sync_sim_stream_wait_event(dl_sync_sim_stream *stream, dl_sync_sim_event *event,
                                  unsigned flags) {
  pthread_mutex_lock(&sim.lock);
  dl_sync_sim_stream *s = sim__resolve(stream);
  dl_sync_sim_event *e = valid(event);
  int error = s == NULL || e == NULL ? DL_SYNC_SIM_ERROR_INVALID_HANDLE : DL_SYNC_SIM_SUCCESS;
  if (error == DL_SYNC_SIM_SUCCESS && (s->capture != NULL || e->capture != NULL)) {
    error = sim__capture_wait(s, e, flags);
  } else if (error == DL_SYNC_SIM_SUCCESS) {
    sim_op *op = sim__op_new(s, SIM_OP_WAIT, &error);
    if (op != NULL && sim__deps_add(&op->deps, e->last.stream, e->last.seq)) {
      sim__op_free(op);
      error = DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION;
    } else if (op != NULL) {
      sim__clock_join(&s->clock, &e->clock);
      sim__enqueue(s, op);
    }
  }
  pthread_mutex_unlock(&sim.lock);
  return error;
}

int dl_sync_sim_event_query(dl_sync_sim_event *event) {
  pthread_mutex_lock(&sim.lock);
  dl_sync_sim_event *e = valid(event);
  int error = e == NULL ? DL_SYNC_SIM_ERROR_INVALID_HANDLE
              : e->capture != NULL ? DL_SYNC_SIM_ERROR_CAPTURED_EVENT
              : sim__dep_done(e->last) ? DL_SYNC_SIM_SUCCESS
                                       : DL_SYNC_SIM_ERROR_NOT_READY;
  pthread_mutex_unlock(&sim.lock);
  return error;
}

int dl_sync_sim_event_synchronize(dl_sync_sim_event *event) {
  pthread_mutex_lock(&sim.lock);
  dl_sync_sim_event *e = valid(event);
  int error = e == NULL ? DL_SYNC_SIM_ERROR_INVALID_HANDLE
              : e->capture != NULL ? DL_SYNC_SIM_ERROR_CAPTURED_EVENT
                                   : sim__check_prohibited();
  if (error == DL_SYNC_SIM_SUCCESS) {
    sim_dep last = e->last;
    sim_clock seen = e->clock; /* e may be destroyed while this thread waits */
    sim_clock *clock = NULL;
    while (!sim__dep_done(last)) pthread_cond_wait(&sim.changed, &sim.lock);
    if (sim__host_agent(&clock) < 0) error = DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION;
    else sim__clock_join(clock, &seen);
  }
  pthread_mutex_unlock(&sim.lock);
  return error;
}
