/* SPDX-License-Identifier: Apache-2.0 */
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
  pthread_mutex_lock(&dl_sync__sim.lock);
  /* cudaEventCreate: the event belongs to the current device. */
  e->device = dl_sync__sim_current_device();
  e->next_event = dl_sync__sim.events;
  dl_sync__sim.events = e;
  pthread_mutex_unlock(&dl_sync__sim.lock);
  *event = e;
  return DL_SYNC_SIM_SUCCESS;
}

static int unlink_event(dl_sync_sim_event **list, dl_sync_sim_event *event) {
  for (dl_sync_sim_event **link = list; *link != NULL; link = &(*link)->next_event) {
    if (*link != event) continue;
    *link = event->next_event;
    event->magic = 0;
    free(event->capture_nodes.items);
    free(event);
    return 1;
  }
  return 0;
}

/* Pending waits hold the record's stream position, not the event: destroying is legal.
   An event a reset retired is freed here without error, so that a pool of events kept
   across dl_sync_sim_reset (dlsync's) can be drained in either order. */
int dl_sync_sim_event_destroy(dl_sync_sim_event *event) {
  pthread_mutex_lock(&dl_sync__sim.lock);
  int found = unlink_event(&dl_sync__sim.events, event) ||
              unlink_event(&dl_sync__sim.retired_events, event);
  pthread_mutex_unlock(&dl_sync__sim.lock);
  return found ? DL_SYNC_SIM_SUCCESS : DL_SYNC_SIM_ERROR_INVALID_HANDLE;
}

void dl_sync__sim_events_retire(void) {
  while (dl_sync__sim.events != NULL) {
    dl_sync_sim_event *next = dl_sync__sim.events->next_event;
    dl_sync__sim.events->magic = SIM_EVENT_RETIRED_MAGIC;
    dl_sync__sim.events->next_event = dl_sync__sim.retired_events;
    dl_sync__sim.retired_events = dl_sync__sim.events;
    dl_sync__sim.events = next;
  }
}

int dl_sync_sim_event_record(dl_sync_sim_event *event, dl_sync_sim_stream *stream, unsigned flags) {
  if (flags & ~(unsigned)DL_SYNC_SIM_EVENT_RECORD_EXTERNAL) return DL_SYNC_SIM_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&dl_sync__sim.lock);
  dl_sync_sim_stream *s = dl_sync__sim_resolve(stream);
  dl_sync_sim_event *e = valid(event);
  int error = s == NULL || e == NULL ? DL_SYNC_SIM_ERROR_INVALID_HANDLE
              /* cudaEventRecord: "event and stream must be on the same device"; the
                 Programming Guide (Multi-Device System, Stream and Event Behavior): "will
                 fail if the input event and input stream are associated to different
                 devices". */
              : e->device != s->device ? DL_SYNC_SIM_ERROR_INVALID_HANDLE
              /* cudaEventRecordWithFlags: cudaEventRecordExternal "is invalid when used
                 outside of capture". */
              : (flags & DL_SYNC_SIM_EVENT_RECORD_EXTERNAL) && s->capture == NULL
                  ? DL_SYNC_SIM_ERROR_INVALID_VALUE
                  : DL_SYNC_SIM_SUCCESS;
  if (error == DL_SYNC_SIM_SUCCESS && s->capture != NULL) {
    error = dl_sync__sim_capture_record(s, e, flags);
  } else if (error == DL_SYNC_SIM_SUCCESS) {
    error = dl_sync__sim_legacy_marker(s);
    if (error == DL_SYNC_SIM_SUCCESS) {
      e->capture = NULL;
      e->capture_nodes.count = 0;
      e->last = (sim_dep){s, s->enqueued};
      e->clock = s->clock;
    }
  }
  pthread_mutex_unlock(&dl_sync__sim.lock);
  return error;
}

int dl_sync_sim_stream_wait_event(dl_sync_sim_stream *stream, dl_sync_sim_event *event,
                                  unsigned flags) {
  if (flags & ~(unsigned)DL_SYNC_SIM_EVENT_WAIT_EXTERNAL) return DL_SYNC_SIM_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&dl_sync__sim.lock);
  dl_sync_sim_stream *s = dl_sync__sim_resolve(stream);
  dl_sync_sim_event *e = valid(event);
  /* Waits may cross devices (Programming Guide, Stream and Event Behavior: "cudaStreamWaitEvent()
     will succeed even if the input stream and input event are associated to different
     devices"). cudaStreamWaitEvent: cudaEventWaitExternal is "invalid when used outside of
     capture". */
  int error = s == NULL || e == NULL ? DL_SYNC_SIM_ERROR_INVALID_HANDLE
              : (flags & DL_SYNC_SIM_EVENT_WAIT_EXTERNAL) && s->capture == NULL
                  ? DL_SYNC_SIM_ERROR_INVALID_VALUE
                  : DL_SYNC_SIM_SUCCESS;
  if (error == DL_SYNC_SIM_SUCCESS && (s->capture != NULL || e->capture != NULL)) {
    error = dl_sync__sim_capture_wait(s, e, flags);
  } else if (error == DL_SYNC_SIM_SUCCESS) {
    sim_op *op = dl_sync__sim_op_new(s, SIM_OP_WAIT, &error);
    if (op != NULL && dl_sync__sim_deps_add(&op->deps, e->last.stream, e->last.seq)) {
      dl_sync__sim_op_free(op);
      error = DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION;
    } else if (op != NULL) {
      dl_sync__sim_clock_join(&s->clock, &e->clock);
      dl_sync__sim_enqueue(s, op);
    }
  }
  pthread_mutex_unlock(&dl_sync__sim.lock);
  return error;
}

/* Querying or synchronizing an event last recorded in a capture. cudaErrorCapturedEvent:
   "The operation is not permitted on an event which was last recorded in a capturing
   stream"; Programming Guide, CUDA Graphs, Prohibited and Unhandled Operations: "It is
   invalid to synchronize or query the execution status of a stream which is being
   captured or a captured event"; Invalidation: "When an invalid operation is attempted
   during stream capture, any associated capture graphs are invalidated." A capture that
   has ended is left as it is; the event answers 907 until it is recorded again. */
static int captured(dl_sync_sim_event *e) {
  if (e->capture == NULL) return DL_SYNC_SIM_SUCCESS;
  if (!e->capture->ended) dl_sync__sim_capture_invalidate(e->capture);
  return DL_SYNC_SIM_ERROR_CAPTURED_EVENT;
}

/* HIP's rules (clr rocm-6.2.0 hipamd/src/hip_event.cpp ihipEventQuery, hipEventSynchronize;
   the same check through 7.2.0): the event's last recording stream is read unvalidated
   (hipStreamDestroy leaves it dangling), and while it captures, that capture is
   invalidated and the call answers hipErrorCapturedEvent, in any interaction mode. The
   null (legacy) stream is exempt. */
static int recording_stream_rules(dl_sync_sim_event *e) {
  dl_sync_sim_stream *s = e->last.stream;
  if (dl_sync__sim.query_rules != DL_SYNC_SIM_QUERY_RULES_HIP || s == NULL || s->is_legacy)
    return DL_SYNC_SIM_SUCCESS;
  if (s->destroyed) {
    dl_sync__sim.destroyed_stream_reads++;
    return DL_SYNC_SIM_ERROR_INVALID_HANDLE;
  }
  if (s->capture == NULL || s->capture->ended) return DL_SYNC_SIM_SUCCESS;
  dl_sync__sim_capture_invalidate(s->capture);
  return DL_SYNC_SIM_ERROR_CAPTURED_EVENT;
}

int dl_sync_sim_set_query_rules(int rules) {
  if (rules != DL_SYNC_SIM_QUERY_RULES_CUDA && rules != DL_SYNC_SIM_QUERY_RULES_HIP)
    return DL_SYNC_SIM_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&dl_sync__sim.lock);
  dl_sync__sim.query_rules = rules;
  pthread_mutex_unlock(&dl_sync__sim.lock);
  return DL_SYNC_SIM_SUCCESS;
}

int dl_sync_sim_query_rules(void) {
  pthread_mutex_lock(&dl_sync__sim.lock);
  int rules = dl_sync__sim.query_rules;
  pthread_mutex_unlock(&dl_sync__sim.lock);
  return rules;
}

uint64_t dl_sync_sim_destroyed_stream_reads(void) {
  pthread_mutex_lock(&dl_sync__sim.lock);
  uint64_t reads = dl_sync__sim.destroyed_stream_reads;
  pthread_mutex_unlock(&dl_sync__sim.lock);
  return reads;
}

int dl_sync_sim_event_query(dl_sync_sim_event *event) {
  pthread_mutex_lock(&dl_sync__sim.lock);
  dl_sync_sim_event *e = valid(event);
  int error = e == NULL ? DL_SYNC_SIM_ERROR_INVALID_HANDLE : captured(e);
  if (error == DL_SYNC_SIM_SUCCESS) error = recording_stream_rules(e);
  /* cudaEventQuery is a potentially unsafe call during a capture (the capture-mode rules
     of cudaStreamBeginCapture); CUDA answers cudaErrorStreamCaptureUnsupported to an
     allocator thread polling events while another thread captures in global mode. */
  if (error == DL_SYNC_SIM_SUCCESS) error = dl_sync__sim_check_prohibited();
  if (error == DL_SYNC_SIM_SUCCESS && !dl_sync__sim_dep_done(e->last))
    error = DL_SYNC_SIM_ERROR_NOT_READY;
  if (error == DL_SYNC_SIM_SUCCESS) {
    /* cudaEventQuery: "a return value of cudaSuccess is equivalent to having called
       cudaEventSynchronize()": the host now knows the recorded work. */
    sim_clock *clock = NULL;
    if (dl_sync__sim_host_agent(&clock) < 0)
      error = DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION;
    else
      dl_sync__sim_clock_join(clock, &e->clock);
  }
  pthread_mutex_unlock(&dl_sync__sim.lock);
  return error;
}

int dl_sync_sim_event_synchronize(dl_sync_sim_event *event) {
  pthread_mutex_lock(&dl_sync__sim.lock);
  dl_sync_sim_event *e = valid(event);
  int error = e == NULL ? DL_SYNC_SIM_ERROR_INVALID_HANDLE : captured(e);
  if (error == DL_SYNC_SIM_SUCCESS) error = recording_stream_rules(e);
  if (error == DL_SYNC_SIM_SUCCESS) error = dl_sync__sim_check_prohibited();
  if (error == DL_SYNC_SIM_SUCCESS) {
    sim_dep last = e->last;
    sim_clock seen = e->clock; /* e may be destroyed while this thread waits */
    sim_clock *clock = NULL;
    while (!dl_sync__sim_dep_done(last))
      pthread_cond_wait(&dl_sync__sim.changed, &dl_sync__sim.lock);
    if (dl_sync__sim_host_agent(&clock) < 0)
      error = DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION;
    else
      dl_sync__sim_clock_join(clock, &seen);
  }
  pthread_mutex_unlock(&dl_sync__sim.lock);
  return error;
}
