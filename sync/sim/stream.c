/* SPDX-License-Identifier: Apache-2.0 */
/* Streams: in-order queues run by one worker thread each, the legacy stream's implicit
   synchronization, kernels, host accesses and host synchronization. */
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

int dl_sync__sim_dep_done(sim_dep dep) {
  return dep.stream == NULL || dep.stream->completed >= dep.seq;
}

static int deps_done(const sim_op *op) {
  for (size_t i = 0; i < op->deps.count; i++)
    if (!dl_sync__sim_dep_done(op->deps.items[i])) return 0;
  return 1;
}

static void run_op(dl_sync_sim_stream *stream, sim_op *op) {
  dl_sync__sim_jitter(stream, op->seq);
  if (op->kind == SIM_OP_KERNEL) op->fn(op->arg);
  if (op->kind == SIM_OP_GRAPH) dl_sync__sim_graph_run(op);
}

static void *worker_main(void *arg) {
  dl_sync_sim_stream *stream = arg;
  pthread_mutex_lock(&dl_sync__sim.lock);
  for (;;) {
    while (stream->head == NULL && !stream->destroyed && !dl_sync__sim.shutting_down)
      pthread_cond_wait(&dl_sync__sim.changed, &dl_sync__sim.lock);
    sim_op *op = stream->head;
    if (op == NULL) break;
    while (!deps_done(op)) pthread_cond_wait(&dl_sync__sim.changed, &dl_sync__sim.lock);
    pthread_mutex_unlock(&dl_sync__sim.lock);
    run_op(stream, op);
    pthread_mutex_lock(&dl_sync__sim.lock);
    stream->head = op->next;
    if (stream->head == NULL) stream->tail = NULL;
    stream->completed = op->seq;
    pthread_cond_broadcast(&dl_sync__sim.changed);
    dl_sync__sim_op_free(op);
  }
  pthread_mutex_unlock(&dl_sync__sim.lock);
  return NULL;
}

dl_sync_sim_stream *dl_sync__sim_stream_new(int32_t device, unsigned flags, int is_legacy,
                                            int is_per_thread) {
  dl_sync_sim_stream *stream = calloc(1, sizeof *stream);
  if (stream == NULL) return NULL;
  stream->agent = dl_sync__sim_new_agent();
  dl_sync__sim_own_thread_call(1);
  int error = stream->agent < 0 ? -1 : pthread_create(&stream->worker, NULL, worker_main, stream);
  dl_sync__sim_own_thread_call(0);
  if (error != 0) {
    free(stream);
    return NULL;
  }
  stream->magic = SIM_STREAM_MAGIC;
  stream->device = device;
  stream->flags = flags;
  stream->is_legacy = is_legacy;
  stream->is_per_thread = is_per_thread;
  stream->next_stream = dl_sync__sim.streams;
  dl_sync__sim.streams = stream;
  return stream;
}

void dl_sync__sim_stream_free(dl_sync_sim_stream *stream) {
  free(stream->capture_deps.items);
  stream->magic = 0;
  free(stream);
}

/* This host thread's per-thread default streams; stale when generation differs from
   dl_sync__sim.generation. */
static _Thread_local struct {
  uint64_t generation;
  dl_sync_sim_stream *streams[DL_SYNC_SIM_DEVICES];
} per_thread;

dl_sync_sim_stream *dl_sync__sim_resolve(dl_sync_sim_stream *stream) {
  int32_t device = dl_sync__sim_current_device();
  if (stream == NULL || stream == DL_SYNC_SIM_STREAM_LEGACY) {
    if (dl_sync__sim.legacy[device] == NULL)
      dl_sync__sim.legacy[device] =
          dl_sync__sim_stream_new(device, DL_SYNC_SIM_STREAM_DEFAULT, 1, 0);
    return dl_sync__sim.legacy[device];
  }
  if (stream == DL_SYNC_SIM_STREAM_PER_THREAD) {
    if (per_thread.generation != dl_sync__sim.generation) {
      memset(&per_thread, 0, sizeof per_thread);
      per_thread.generation = dl_sync__sim.generation;
    }
    if (per_thread.streams[device] == NULL)
      per_thread.streams[device] =
          dl_sync__sim_stream_new(device, DL_SYNC_SIM_STREAM_DEFAULT, 0, 1);
    return per_thread.streams[device];
  }
  stream = dl_sync__sim_untag(stream);
  if (stream == NULL) return NULL; /* none of ours */
  return stream->magic == SIM_STREAM_MAGIC && !stream->destroyed ? stream : NULL;
}

void dl_sync__sim_enqueue(dl_sync_sim_stream *stream, sim_op *op) {
  op->seq = ++stream->enqueued;
  if (stream->tail != NULL)
    stream->tail->next = op;
  else
    stream->head = op;
  stream->tail = op;
  pthread_cond_broadcast(&dl_sync__sim.changed);
}

static int is_blocking(const dl_sync_sim_stream *stream) {
  return !(stream->flags & DL_SYNC_SIM_STREAM_NON_BLOCKING);
}

int dl_sync__sim_legacy_sync(dl_sync_sim_stream *stream, sim_deps *deps) {
  if (!is_blocking(stream)) return 0;
  if (!stream->is_legacy) {
    dl_sync_sim_stream *legacy = dl_sync__sim.legacy[stream->device];
    if (legacy == NULL) return 0;
    dl_sync__sim_clock_join(&stream->clock, &legacy->clock);
    return dl_sync__sim_deps_add(deps, legacy, legacy->enqueued)
               ? DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION
               : 0;
  }
  /* The legacy stream waits for every blocking stream of its device. */
  int error = dl_sync__sim_check_legacy_use(stream->device, 1);
  if (error != DL_SYNC_SIM_SUCCESS) return error;
  for (dl_sync_sim_stream *other = dl_sync__sim.streams; other != NULL;
       other = other->next_stream) {
    if (other == stream || other->device != stream->device || !is_blocking(other) ||
        other->destroyed)
      continue;
    dl_sync__sim_clock_join(&stream->clock, &other->clock);
    if (dl_sync__sim_deps_add(deps, other, other->enqueued))
      return DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION;
  }
  return 0;
}

int dl_sync_sim_stream_create(dl_sync_sim_stream **stream, unsigned flags) {
  if (stream == NULL || flags > DL_SYNC_SIM_STREAM_NON_BLOCKING)
    return DL_SYNC_SIM_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&dl_sync__sim.lock);
  dl_sync_sim_stream *made = dl_sync__sim_stream_new(dl_sync__sim_current_device(), flags, 0, 0);
  pthread_mutex_unlock(&dl_sync__sim.lock);
  *stream = made != NULL ? dl_sync__sim_handle(made) : NULL;
  return made != NULL ? DL_SYNC_SIM_SUCCESS : DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION;
}

int dl_sync_sim_stream_destroy(dl_sync_sim_stream *stream) {
  pthread_mutex_lock(&dl_sync__sim.lock);
  dl_sync_sim_stream *s = dl_sync__sim_resolve(stream);
  int error = DL_SYNC_SIM_ERROR_INVALID_HANDLE;
  if (s != NULL && (s->is_legacy || s->is_per_thread))
    error = DL_SYNC_SIM_ERROR_INVALID_VALUE;
  else if (s != NULL) {
    if (s->capture != NULL) dl_sync__sim_capture_invalidate(s->capture);
    s->destroyed = 1; /* its worker drains the queue, then ends */
    pthread_cond_broadcast(&dl_sync__sim.changed);
    error = DL_SYNC_SIM_SUCCESS;
  }
  pthread_mutex_unlock(&dl_sync__sim.lock);
  return error;
}

int dl_sync_sim_launch(dl_sync_sim_stream *stream, const char *name, void (*fn)(void *), void *arg,
                       const dl_sync_sim_access *accesses, size_t count) {
  if (fn == NULL || (count > 0 && accesses == NULL)) return DL_SYNC_SIM_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&dl_sync__sim.lock);
  dl_sync_sim_stream *s = dl_sync__sim_resolve(stream);
  /* Programming Guide, Multi-Device System, Stream and Event Behavior: "A kernel launch
     will fail if it is issued to a stream that is not associated to the current device".
     The error is not documented; the sim answers as for an event of another device. */
  int error = s == NULL || s->device != dl_sync__sim_current_device()
                  ? DL_SYNC_SIM_ERROR_INVALID_HANDLE
                  : DL_SYNC_SIM_SUCCESS;
  if (error != DL_SYNC_SIM_SUCCESS) {
    /* nothing enqueued */
  } else if (s->capture != NULL) {
    error = dl_sync__sim_capture_kernel(s, name, fn, arg, accesses, count);
  } else {
    sim_op *op = dl_sync__sim_op_new(s, SIM_OP_KERNEL, &error);
    if (op != NULL) {
      op->fn = fn;
      op->arg = arg;
      dl_sync__sim_join_host(s);
      s->clock.c[s->agent]++;
      for (size_t i = 0; i < count; i++)
        dl_sync__sim_race_check(s->agent, &s->clock, name, accesses[i].buffer, accesses[i].mode);
      dl_sync__sim_enqueue(s, op);
    }
  }
  pthread_mutex_unlock(&dl_sync__sim.lock);
  return error;
}

int dl_sync_sim_host_access(const char *name, const void *buffer, int mode) {
  pthread_mutex_lock(&dl_sync__sim.lock);
  sim_clock *clock = NULL;
  int agent = dl_sync__sim_host_agent(&clock);
  if (agent >= 0) {
    clock->c[agent]++;
    dl_sync__sim_race_check(agent, clock, name, buffer, mode);
  }
  pthread_mutex_unlock(&dl_sync__sim.lock);
  return agent >= 0 ? DL_SYNC_SIM_SUCCESS : DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION;
}

/* Blocks until stream has run everything enqueued so far; the host then knows it. */
static int host_wait_stream(dl_sync_sim_stream *stream) {
  uint64_t target = stream->enqueued;
  while (stream->completed < target) pthread_cond_wait(&dl_sync__sim.changed, &dl_sync__sim.lock);
  sim_clock *clock = NULL;
  if (dl_sync__sim_host_agent(&clock) < 0) return DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION;
  dl_sync__sim_clock_join(clock, &stream->clock);
  return DL_SYNC_SIM_SUCCESS;
}

int dl_sync_sim_stream_synchronize(dl_sync_sim_stream *stream) {
  pthread_mutex_lock(&dl_sync__sim.lock);
  dl_sync_sim_stream *s = dl_sync__sim_resolve(stream);
  int error = DL_SYNC_SIM_ERROR_INVALID_HANDLE;
  if (s != NULL && s->capture != NULL) {
    dl_sync__sim_capture_invalidate(s->capture);
    error = DL_SYNC_SIM_ERROR_CAPTURE_UNSUPPORTED;
  } else if (s != NULL) {
    /* Programming Guide, CUDA Graphs, Prohibited and Unhandled Operations: "When any
       stream in the same context is being captured, and it was not created with
       cudaStreamNonBlocking, any attempted use of the legacy stream is invalid", whatever
       the capture mode. */
    error = s->is_legacy ? dl_sync__sim_check_legacy_use(s->device, 1) : DL_SYNC_SIM_SUCCESS;
    if (error == DL_SYNC_SIM_SUCCESS) error = dl_sync__sim_check_prohibited();
    if (error == DL_SYNC_SIM_SUCCESS) error = host_wait_stream(s);
  }
  pthread_mutex_unlock(&dl_sync__sim.lock);
  return error;
}

int dl_sync_sim_device_synchronize(void) {
  pthread_mutex_lock(&dl_sync__sim.lock);
  int32_t device = dl_sync__sim_current_device();
  /* Programming Guide, CUDA Graphs, Prohibited and Unhandled Operations: "It is also
     invalid to query the execution status of or synchronize a broader handle which
     encompasses an active stream capture, such as a device or context handle", in every
     capture mode; the captures are invalidated. */
  int error = DL_SYNC_SIM_SUCCESS;
  for (dl_sync_sim_stream *s = dl_sync__sim.streams; s != NULL; s = s->next_stream)
    if (s->device == device && s->capture != NULL && !s->capture->ended) {
      dl_sync__sim_capture_invalidate(s->capture);
      error = DL_SYNC_SIM_ERROR_CAPTURE_UNSUPPORTED;
    }
  if (error == DL_SYNC_SIM_SUCCESS) error = dl_sync__sim_check_prohibited();
  for (dl_sync_sim_stream *s = dl_sync__sim.streams; s != NULL && error == DL_SYNC_SIM_SUCCESS;
       s = s->next_stream)
    if (s->device == device) error = host_wait_stream(s);
  pthread_mutex_unlock(&dl_sync__sim.lock);
  return error;
}

void dl_sync__sim_wait_streams_idle(void) {
  for (dl_sync_sim_stream *s = dl_sync__sim.streams; s != NULL; s = s->next_stream)
    while (s->completed < s->enqueued) pthread_cond_wait(&dl_sync__sim.changed, &dl_sync__sim.lock);
}

void dl_sync__sim_join_host(dl_sync_sim_stream *stream) {
  sim_clock *host = NULL;
  if (dl_sync__sim_host_agent(&host) >= 0) dl_sync__sim_clock_join(&stream->clock, host);
}

sim_op *dl_sync__sim_op_new(dl_sync_sim_stream *stream, sim_op_kind kind, int *error) {
  sim_op *op = calloc(1, sizeof *op);
  *error = op == NULL ? DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION
                      : dl_sync__sim_legacy_sync(stream, &op->deps);
  if (*error == DL_SYNC_SIM_SUCCESS) {
    op->kind = kind;
    return op;
  }
  if (op != NULL) dl_sync__sim_op_free(op);
  return NULL;
}

void dl_sync__sim_op_free(sim_op *op) {
  free(op->node_waits);
  free(op->deps.items);
  free(op);
}

int dl_sync__sim_legacy_marker(dl_sync_sim_stream *stream) {
  int error;
  sim_op *op = dl_sync__sim_op_new(stream, SIM_OP_WAIT, &error);
  if (op != NULL && op->deps.count > 0)
    dl_sync__sim_enqueue(stream, op);
  else if (op != NULL)
    dl_sync__sim_op_free(op);
  return error;
}
