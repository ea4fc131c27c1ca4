/* SPDX-License-Identifier: Apache-2.0 */
/* Stream capture into graphs, graph instantiation and launch, and user objects. */
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

static dl_sync_sim_graph *graph_new(void) {
  dl_sync_sim_graph *graph = calloc(1, sizeof *graph);
  if (graph != NULL) graph->magic = SIM_GRAPH_MAGIC;
  return graph;
}

static int own_capture(const sim_capture *capture) {
  return pthread_equal(capture->thread, pthread_self());
}

/* The calling thread's capture interaction mode (cuThreadExchangeStreamCaptureMode, whose
   GLOBAL "is the default mode"). */
static _Thread_local int thread_mode = DL_SYNC_SIM_CAPTURE_GLOBAL;

int dl_sync_sim_thread_exchange_capture_mode(int *mode) {
  if (mode == NULL || *mode < DL_SYNC_SIM_CAPTURE_GLOBAL || *mode > DL_SYNC_SIM_CAPTURE_RELAXED)
    return DL_SYNC_SIM_ERROR_INVALID_VALUE;
  int previous = thread_mode;
  thread_mode = *mode;
  *mode = previous;
  return DL_SYNC_SIM_SUCCESS;
}

/* Whether the calling thread, in its interaction mode, may make a potentially unsafe call
   while capture c is in progress (cuThreadExchangeStreamCaptureMode): GLOBAL: "If the local
   thread has an ongoing capture sequence that was not initiated with
   CU_STREAM_CAPTURE_MODE_RELAXED at cuStreamBeginCapture, or if any other thread has a
   concurrent capture sequence initiated with CU_STREAM_CAPTURE_MODE_GLOBAL, this thread is
   prohibited from potentially unsafe API calls"; THREAD_LOCAL: the same for the local
   thread, and "Concurrent capture sequences in other threads are ignored"; RELAXED: "the
   local thread is not prohibited from potentially unsafe API calls". */
static int disturbs(const sim_capture *c) {
  if (thread_mode == DL_SYNC_SIM_CAPTURE_RELAXED) return 0;
  if (own_capture(c)) return c->mode != DL_SYNC_SIM_CAPTURE_RELAXED;
  return thread_mode == DL_SYNC_SIM_CAPTURE_GLOBAL && c->mode == DL_SYNC_SIM_CAPTURE_GLOBAL;
}

/* A potentially unsafe call: the captures it disturbs are invalidated. */
int dl_sync__sim_check_prohibited(void) {
  int prohibited = 0;
  for (sim_capture *c = dl_sync__sim.captures; c != NULL; c = c->next_capture) {
    if (c->ended || !disturbs(c)) continue;
    c->invalidated = 1;
    prohibited = 1;
  }
  return prohibited ? DL_SYNC_SIM_ERROR_CAPTURE_UNSUPPORTED : DL_SYNC_SIM_SUCCESS;
}

int dl_sync_sim_prohibited_call(void) {
  pthread_mutex_lock(&dl_sync__sim.lock);
  int error = dl_sync__sim_check_prohibited();
  pthread_mutex_unlock(&dl_sync__sim.lock);
  return error;
}

void dl_sync__sim_capture_invalidate(sim_capture *capture) {
  capture->invalidated = 1;
}

int dl_sync__sim_check_legacy_use(int32_t device, int invalidate) {
  int error = DL_SYNC_SIM_SUCCESS;
  for (dl_sync_sim_stream *s = dl_sync__sim.streams; s != NULL; s = s->next_stream) {
    if (s->device != device || s->capture == NULL || s->capture->ended ||
        (s->flags & DL_SYNC_SIM_STREAM_NON_BLOCKING))
      continue;
    if (invalidate) dl_sync__sim_capture_invalidate(s->capture);
    error = DL_SYNC_SIM_ERROR_CAPTURE_IMPLICIT;
  }
  return error;
}

static sim_node *add_node(dl_sync_sim_graph *graph, sim_node_kind kind, const sim_nodes *deps) {
  if (graph->node_count == graph->node_capacity) {
    size_t capacity = graph->node_capacity ? graph->node_capacity * 2 : 8;
    sim_node *grown = realloc(graph->nodes, capacity * sizeof *grown);
    if (grown == NULL) return NULL;
    graph->nodes = grown;
    graph->node_capacity = capacity;
  }
  sim_node *node = &graph->nodes[graph->node_count];
  *node = (sim_node){.kind = kind, .agent = -1};
  if (dl_sync__sim_nodes_copy(&node->deps, deps) != 0) {
    free(node->deps.items);
    return NULL;
  }
  graph->node_count++;
  return node;
}

/* Appends a node after stream's current dependencies; the node becomes them. */
static sim_node *capture_node(dl_sync_sim_stream *stream, sim_node_kind kind) {
  dl_sync_sim_graph *graph = stream->capture->graph;
  sim_node *node = add_node(graph, kind, &stream->capture_deps);
  if (node == NULL) return NULL;
  stream->capture_deps.count = 0;
  dl_sync__sim_nodes_add(&stream->capture_deps, graph->node_count - 1);
  return node;
}

int dl_sync_sim_stream_begin_capture(dl_sync_sim_stream *stream, int mode) {
  if (mode < DL_SYNC_SIM_CAPTURE_GLOBAL || mode > DL_SYNC_SIM_CAPTURE_RELAXED)
    return DL_SYNC_SIM_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&dl_sync__sim.lock);
  dl_sync_sim_stream *s = dl_sync__sim_resolve(stream);
  int error = s == NULL            ? DL_SYNC_SIM_ERROR_INVALID_HANDLE
              : s->is_legacy       ? DL_SYNC_SIM_ERROR_CAPTURE_UNSUPPORTED
              : s->capture != NULL ? DL_SYNC_SIM_ERROR_INVALID_VALUE
                                   : DL_SYNC_SIM_SUCCESS;
  sim_capture *c = error == DL_SYNC_SIM_SUCCESS ? calloc(1, sizeof *c) : NULL;
  dl_sync_sim_graph *graph = c != NULL ? graph_new() : NULL;
  if (error == DL_SYNC_SIM_SUCCESS && graph == NULL) {
    free(c);
    error = DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION;
  }
  if (error == DL_SYNC_SIM_SUCCESS) {
    *c = (sim_capture){.id = ++dl_sync__sim.next_capture_id,
                       .mode = mode,
                       .thread = pthread_self(),
                       .origin = s,
                       .graph = graph,
                       .next_capture = dl_sync__sim.captures};
    dl_sync__sim.captures = c;
    graph->next_graph = dl_sync__sim.graphs;
    dl_sync__sim.graphs = graph;
    s->capture = c;
    s->capture_deps.count = 0;
  }
  pthread_mutex_unlock(&dl_sync__sim.lock);
  return error;
}

int dl_sync__sim_capture_kernel(dl_sync_sim_stream *stream, const char *name, void (*fn)(void *),
                                void *arg, const dl_sync_sim_access *accesses, size_t count) {
  if (stream->capture->invalidated) return DL_SYNC_SIM_ERROR_CAPTURE_INVALIDATED;
  dl_sync_sim_access *copy = count ? malloc(count * sizeof *copy) : NULL;
  if (count && copy == NULL) return DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION;
  sim_node *node = capture_node(stream, SIM_NODE_KERNEL);
  if (node == NULL) {
    free(copy);
    return DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION;
  }
  if (count) memcpy(copy, accesses, count * sizeof *copy);
  node->name = name;
  node->fn = fn;
  node->arg = arg;
  node->accesses = copy;
  node->access_count = count;
  return DL_SYNC_SIM_SUCCESS;
}

int dl_sync__sim_capture_record(dl_sync_sim_stream *stream, dl_sync_sim_event *event,
                                unsigned flags) {
  if (stream->capture->invalidated) return DL_SYNC_SIM_ERROR_CAPTURE_INVALIDATED;
  if (flags & DL_SYNC_SIM_EVENT_RECORD_EXTERNAL) {
    sim_node *node = capture_node(stream, SIM_NODE_RECORD_EXTERNAL);
    if (node == NULL) return DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION;
    node->event = event;
    return DL_SYNC_SIM_SUCCESS;
  }
  event->capture = stream->capture;
  return dl_sync__sim_nodes_copy(&event->capture_nodes, &stream->capture_deps)
             ? DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION
             : DL_SYNC_SIM_SUCCESS;
}

int dl_sync__sim_capture_wait(dl_sync_sim_stream *stream, dl_sync_sim_event *event,
                              unsigned flags) {
  sim_capture *joined = event->capture;
  if (joined != NULL) {
    if (joined->ended) return DL_SYNC_SIM_ERROR_CAPTURED_EVENT;
    if (joined->invalidated) return DL_SYNC_SIM_ERROR_CAPTURE_INVALIDATED;
    if (stream->capture == NULL) { /* a fork: stream joins the capture */
      stream->capture = joined;
      return dl_sync__sim_nodes_copy(&stream->capture_deps, &event->capture_nodes)
                 ? DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION
                 : DL_SYNC_SIM_SUCCESS;
    }
    if (stream->capture != joined) {
      dl_sync__sim_capture_invalidate(joined);
      dl_sync__sim_capture_invalidate(stream->capture);
      return DL_SYNC_SIM_ERROR_CAPTURE_MERGE;
    }
    for (size_t i = 0; i < event->capture_nodes.count; i++)
      if (dl_sync__sim_nodes_add(&stream->capture_deps, event->capture_nodes.items[i]))
        return DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION;
    return DL_SYNC_SIM_SUCCESS;
  }
  if (stream->capture->invalidated) return DL_SYNC_SIM_ERROR_CAPTURE_INVALIDATED;
  if (!(flags & DL_SYNC_SIM_EVENT_WAIT_EXTERNAL)) {
    /* A dependency from outside the graph: CUDA refuses it and the capture is lost. */
    dl_sync__sim_capture_invalidate(stream->capture);
    return DL_SYNC_SIM_ERROR_CAPTURE_ISOLATION;
  }
  sim_node *node = capture_node(stream, SIM_NODE_WAIT_EXTERNAL);
  if (node == NULL) return DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION;
  node->event = event;
  return DL_SYNC_SIM_SUCCESS;
}

/* Marks node and everything it depends on. */
static void mark_ancestors(const dl_sync_sim_graph *graph, size_t node, char *marked) {
  if (marked[node]) return;
  marked[node] = 1;
  for (size_t i = 0; i < graph->nodes[node].deps.count; i++)
    mark_ancestors(graph, graph->nodes[node].deps.items[i], marked);
}

/* The first pair of conflicting accesses of a and b, or NULL. */
static const dl_sync_sim_access *conflict(const sim_node *a, const sim_node *b,
                                          const dl_sync_sim_access **with) {
  for (size_t i = 0; i < a->access_count; i++)
    for (size_t j = 0; j < b->access_count; j++)
      if (a->accesses[i].buffer == b->accesses[j].buffer &&
          ((a->accesses[i].mode | b->accesses[j].mode) & DL_SYNC_SIM_WRITE)) {
        *with = &b->accesses[j];
        return &a->accesses[i];
      }
  return NULL;
}

/* Two kernels of one graph that touch a buffer, one writing, must be ordered by edges. */
static void check_graph_races(const dl_sync_sim_graph *graph) {
  char *marked = calloc(graph->node_count ? graph->node_count : 1, 1);
  if (marked == NULL) return;
  for (size_t j = 0; j < graph->node_count; j++) {
    memset(marked, 0, graph->node_count);
    mark_ancestors(graph, j, marked);
    for (size_t i = 0; i < j; i++) {
      const dl_sync_sim_access *second = NULL;
      const dl_sync_sim_access *first =
          marked[i] ? NULL : conflict(&graph->nodes[i], &graph->nodes[j], &second);
      if (first != NULL)
        dl_sync__sim_race_report_graph(graph->nodes[i].name, first->mode, graph->nodes[j].name,
                                       second->mode, first->buffer);
    }
  }
  free(marked);
}

/* Every stream that joined the capture must be joined back into the origin stream. */
static int all_joined(const sim_capture *capture) {
  const dl_sync_sim_graph *graph = capture->graph;
  char *marked = calloc(graph->node_count ? graph->node_count : 1, 1);
  if (marked == NULL) return 0;
  const sim_nodes *origin = &capture->origin->capture_deps;
  for (size_t i = 0; i < origin->count; i++) mark_ancestors(graph, origin->items[i], marked);
  int joined = 1;
  for (dl_sync_sim_stream *s = dl_sync__sim.streams; s != NULL; s = s->next_stream)
    if (s->capture == capture && s != capture->origin)
      for (size_t i = 0; i < s->capture_deps.count; i++)
        if (!marked[s->capture_deps.items[i]]) joined = 0;
  free(marked);
  return joined;
}

static void unlink_graph(dl_sync_sim_graph *graph) {
  for (dl_sync_sim_graph **link = &dl_sync__sim.graphs; *link != NULL; link = &(*link)->next_graph)
    if (*link == graph) {
      *link = graph->next_graph;
      return;
    }
}

int dl_sync_sim_stream_end_capture(dl_sync_sim_stream *stream, dl_sync_sim_graph **graph) {
  if (graph == NULL) return DL_SYNC_SIM_ERROR_INVALID_VALUE;
  *graph = NULL;
  pthread_mutex_lock(&dl_sync__sim.lock);
  dl_sync_sim_stream *s = dl_sync__sim_resolve(stream);
  sim_capture *c = s != NULL ? s->capture : NULL;
  int error = s == NULL                     ? DL_SYNC_SIM_ERROR_INVALID_HANDLE
              : c == NULL || c->origin != s ? DL_SYNC_SIM_ERROR_CAPTURE_UNMATCHED
              : c->mode != DL_SYNC_SIM_CAPTURE_RELAXED && !own_capture(c)
                  ? DL_SYNC_SIM_ERROR_CAPTURE_WRONG_THREAD
                  : DL_SYNC_SIM_SUCCESS;
  dl_sync_sim_user_object **released = NULL;
  size_t released_count = 0;
  if (error == DL_SYNC_SIM_SUCCESS) {
    int joined = all_joined(c);
    error = c->invalidated ? DL_SYNC_SIM_ERROR_CAPTURE_INVALIDATED
            : !joined      ? DL_SYNC_SIM_ERROR_CAPTURE_UNJOINED
                           : DL_SYNC_SIM_SUCCESS;
    c->ended = 1;
    for (dl_sync_sim_stream *t = dl_sync__sim.streams; t != NULL; t = t->next_stream)
      if (t->capture == c) {
        t->capture = NULL;
        t->capture_deps.count = 0;
      }
    if (error == DL_SYNC_SIM_SUCCESS) {
      check_graph_races(c->graph);
      *graph = c->graph;
    } else {
      unlink_graph(c->graph);
      dl_sync__sim_graph_free(c->graph, &released, &released_count);
    }
    c->graph = NULL;
  }
  pthread_mutex_unlock(&dl_sync__sim.lock);
  dl_sync__sim_user_objects_release(released, released_count);
  free(released);
  return error;
}

int dl_sync_sim_stream_capture_info(dl_sync_sim_stream *stream, int32_t *status, uint64_t *id,
                                    dl_sync_sim_graph **graph) {
  if (status == NULL) return DL_SYNC_SIM_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&dl_sync__sim.lock);
  dl_sync_sim_stream *s = dl_sync__sim_resolve(stream);
  int error = s == NULL ? DL_SYNC_SIM_ERROR_INVALID_HANDLE : DL_SYNC_SIM_SUCCESS;
  /* cudaStreamGetCaptureInfo: "If called on cudaStreamLegacy (the null stream) while a
     stream not created with cudaStreamNonBlocking is capturing, returns
     cudaErrorStreamCaptureImplicit"; cudaStreamIsCapturing: "The blocking stream capture
     is not invalidated". Any mode; a stream forked into a capture is capturing too. */
  if (s != NULL && s->is_legacy) error = dl_sync__sim_check_legacy_use(s->device, 0);
  if (error == DL_SYNC_SIM_SUCCESS) {
    sim_capture *c = s->capture;
    *status = c == NULL        ? DL_SYNC_CAPTURE_NONE
              : c->invalidated ? DL_SYNC_CAPTURE_INVALIDATED
                               : DL_SYNC_CAPTURE_ACTIVE;
    if (id != NULL) *id = c != NULL ? c->id : 0;
    if (graph != NULL) *graph = c != NULL ? c->graph : NULL;
  }
  pthread_mutex_unlock(&dl_sync__sim.lock);
  return error;
}

void dl_sync__sim_graph_free(dl_sync_sim_graph *graph, dl_sync_sim_user_object ***released,
                             size_t *released_count) {
  for (size_t i = 0; i < graph->node_count; i++) {
    free(graph->nodes[i].accesses);
    free(graph->nodes[i].deps.items);
  }
  free(graph->nodes);
  dl_sync_sim_user_object **all =
      realloc(*released, (*released_count + graph->object_count + 1) * sizeof *all);
  if (all != NULL) { /* on failure the objects leak rather than run twice */
    if (graph->object_count > 0)
      memcpy(all + *released_count, graph->objects, graph->object_count * sizeof *all);
    *released = all;
    *released_count += graph->object_count;
  }
  free(graph->objects);
  graph->magic = 0;
  free(graph);
}

void dl_sync__sim_capture_free_all(void) {
  while (dl_sync__sim.captures != NULL) {
    sim_capture *next = dl_sync__sim.captures->next_capture;
    free(dl_sync__sim.captures);
    dl_sync__sim.captures = next;
  }
  dl_sync__sim.next_capture_id = 0;
}

int dl_sync_sim_graph_destroy(dl_sync_sim_graph *graph) {
  pthread_mutex_lock(&dl_sync__sim.lock);
  int found = 0;
  for (dl_sync_sim_graph *g = dl_sync__sim.graphs; g != NULL; g = g->next_graph)
    found |= g == graph;
  dl_sync_sim_user_object **released = NULL;
  size_t released_count = 0;
  if (found) {
    unlink_graph(graph);
    dl_sync__sim_graph_free(graph, &released, &released_count);
  }
  pthread_mutex_unlock(&dl_sync__sim.lock);
  dl_sync__sim_user_objects_release(released, released_count);
  free(released);
  return found ? DL_SYNC_SIM_SUCCESS : DL_SYNC_SIM_ERROR_INVALID_HANDLE;
}

int dl_sync_sim_graph_count_nodes(const dl_sync_sim_graph *graph, size_t *kernels,
                                  size_t *external_waits, size_t *external_records) {
  if (graph == NULL || graph->magic != SIM_GRAPH_MAGIC) return DL_SYNC_SIM_ERROR_INVALID_HANDLE;
  size_t counts[3] = {0, 0, 0};
  pthread_mutex_lock(&dl_sync__sim.lock);
  for (size_t i = 0; i < graph->node_count; i++) counts[graph->nodes[i].kind]++;
  pthread_mutex_unlock(&dl_sync__sim.lock);
  if (kernels) *kernels = counts[SIM_NODE_KERNEL];
  if (external_waits) *external_waits = counts[SIM_NODE_WAIT_EXTERNAL];
  if (external_records) *external_records = counts[SIM_NODE_RECORD_EXTERNAL];
  return DL_SYNC_SIM_SUCCESS;
}

/* An executable graph owns a copy of the nodes and a reference to each user object. */
static dl_sync_sim_graph *graph_copy(const dl_sync_sim_graph *graph) {
  dl_sync_sim_graph *copy = graph_new();
  if (copy == NULL) return NULL;
  copy->nodes = calloc(graph->node_count ? graph->node_count : 1, sizeof *copy->nodes);
  copy->objects = calloc(graph->object_count ? graph->object_count : 1, sizeof *copy->objects);
  int ok = copy->nodes != NULL && copy->objects != NULL;
  for (size_t i = 0; ok && i < graph->node_count; i++) {
    const sim_node *from = &graph->nodes[i];
    sim_node *to = &copy->nodes[i];
    *to = *from;
    to->deps = (sim_nodes){0};
    to->accesses = from->access_count ? malloc(from->access_count * sizeof *to->accesses) : NULL;
    ok = (from->access_count == 0 || to->accesses != NULL) &&
         !dl_sync__sim_nodes_copy(&to->deps, &from->deps);
    if (to->accesses)
      memcpy(to->accesses, from->accesses, from->access_count * sizeof *to->accesses);
    copy->node_count = i + 1;
  }
  if (!ok) {
    dl_sync_sim_user_object **none = NULL;
    size_t zero = 0;
    dl_sync__sim_graph_free(copy, &none, &zero);
    free(none);
    return NULL;
  }
  for (size_t i = 0; i < graph->object_count; i++) {
    graph->objects[i]->refcount++;
    copy->objects[copy->object_count++] = graph->objects[i];
  }
  return copy;
}

int dl_sync_sim_graph_instantiate(dl_sync_sim_graph_exec **exec, dl_sync_sim_graph *graph) {
  if (exec == NULL) return DL_SYNC_SIM_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&dl_sync__sim.lock);
  int error = graph == NULL || graph->magic != SIM_GRAPH_MAGIC ? DL_SYNC_SIM_ERROR_INVALID_HANDLE
                                                               : DL_SYNC_SIM_SUCCESS;
  dl_sync_sim_graph_exec *e = error ? NULL : calloc(1, sizeof *e);
  if (e != NULL) e->graph = graph_copy(graph);
  if (error == DL_SYNC_SIM_SUCCESS && (e == NULL || e->graph == NULL)) {
    free(e);
    e = NULL;
    error = DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION;
  }
  /* Each kernel node that touches memory is an agent of its own: nodes of one launch
     are ordered only by the graph's edges (see launch_clocks), not by the launching
     stream's order. */
  for (size_t i = 0; e != NULL && i < e->graph->node_count; i++) {
    sim_node *node = &e->graph->nodes[i];
    if (node->kind != SIM_NODE_KERNEL || node->access_count == 0) continue;
    node->agent = dl_sync__sim_new_agent();
    if (node->agent < 0) {
      dl_sync_sim_user_object **released = NULL;
      size_t released_count = 0;
      dl_sync__sim_graph_free(e->graph, &released, &released_count);
      for (size_t k = 0; k < released_count; k++) released[k]->refcount--; /* held by graph */
      free(released);
      free(e);
      e = NULL;
      error = DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION;
    }
  }
  if (e != NULL) {
    e->magic = SIM_EXEC_MAGIC;
    e->next_exec = dl_sync__sim.execs;
    dl_sync__sim.execs = e;
  }
  *exec = e;
  pthread_mutex_unlock(&dl_sync__sim.lock);
  return error;
}

/* Clocks of one launch's nodes: each follows only the graph's edges, from the launch's
   start (the stream's earlier work, the previous launch of exec); external-wait nodes
   add their event's record. Programming Guide, CUDA Graphs, Graph Structure: "The
   dependencies between the operations are the edges. These dependencies constrain the
   execution sequence of the operations." cudaGraphAddEventWaitNode: "The graph node will
   wait for all work captured in event" (so its dependents do, and only they);
   cudaGraphAddEventRecordNode: each launch records the event "to capture execution of
   the node's dependencies". */
static void launch_clocks(const dl_sync_sim_graph *graph, const sim_clock *start,
                          sim_clock *node_clocks) {
  for (size_t i = 0; i < graph->node_count; i++) {
    const sim_node *node = &graph->nodes[i];
    sim_clock *clock = &node_clocks[i];
    *clock = *start;
    for (size_t d = 0; d < node->deps.count; d++)
      dl_sync__sim_clock_join(clock, &node_clocks[node->deps.items[d]]); /* deps come first */
    if (node->kind == SIM_NODE_WAIT_EXTERNAL) dl_sync__sim_clock_join(clock, &node->event->clock);
    if (node->agent >= 0) clock->c[node->agent]++;
  }
}

/* A launch is one operation of the stream, ordered after the stream's earlier work and
   the previous launch of exec. Its nodes run in capture order on the stream's worker;
   an external-wait node blocks there for the record its event named at the launch, so
   nodes captured before it run without waiting. The race checker sees finer: each node
   is ordered only by its edges. */
int dl_sync_sim_graph_launch(dl_sync_sim_graph_exec *exec, dl_sync_sim_stream *stream) {
  pthread_mutex_lock(&dl_sync__sim.lock);
  dl_sync_sim_stream *s = dl_sync__sim_resolve(stream);
  int error = s == NULL || exec == NULL || exec->magic != SIM_EXEC_MAGIC
                  ? DL_SYNC_SIM_ERROR_INVALID_HANDLE
              : s->capture != NULL ? DL_SYNC_SIM_ERROR_CAPTURE_UNSUPPORTED
                                   : DL_SYNC_SIM_SUCCESS;
  dl_sync_sim_graph *graph = error ? NULL : exec->graph;
  sim_clock *node_clocks =
      error ? NULL : malloc((graph->node_count ? graph->node_count : 1) * sizeof *node_clocks);
  if (error == DL_SYNC_SIM_SUCCESS && node_clocks == NULL)
    error = DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION;
  sim_op *op = error ? NULL : dl_sync__sim_op_new(s, SIM_OP_GRAPH, &error);
  /* cudaGraphLaunch: "Each launch is ordered behind both any previous work in stream and
     any previous launches of graphExec", whatever stream those used. */
  if (error == DL_SYNC_SIM_SUCCESS &&
      dl_sync__sim_deps_add(&op->deps, exec->last_launch.stream, exec->last_launch.seq))
    error = DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION;
  if (error == DL_SYNC_SIM_SUCCESS &&
      (op->node_waits = calloc(graph->node_count ? graph->node_count : 1, sizeof(sim_dep))) == NULL)
    error = DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION;
  for (size_t i = 0; error == DL_SYNC_SIM_SUCCESS && i < graph->node_count; i++) {
    dl_sync_sim_event *event = graph->nodes[i].event;
    if (graph->nodes[i].kind != SIM_NODE_WAIT_EXTERNAL) continue;
    if (event->capture != NULL)
      error = DL_SYNC_SIM_ERROR_CAPTURED_EVENT;
    else
      op->node_waits[i] = event->last; /* waited where the node stands, not up front */
  }
  if (error != DL_SYNC_SIM_SUCCESS) {
    if (op != NULL) dl_sync__sim_op_free(op);
    free(node_clocks);
    pthread_mutex_unlock(&dl_sync__sim.lock);
    return error;
  }
  op->exec = exec;
  dl_sync__sim_join_host(s);
  sim_clock start = s->clock;
  dl_sync__sim_clock_join(&start, &exec->last_clock);
  launch_clocks(graph, &start, node_clocks);
  for (size_t i = 0; i < graph->node_count; i++) {
    const sim_node *node = &graph->nodes[i];
    for (size_t a = 0; node->agent >= 0 && a < node->access_count; a++)
      dl_sync__sim_race_check(node->agent, &node_clocks[i], node->name, node->accesses[a].buffer,
                              node->accesses[a].mode);
    dl_sync__sim_clock_join(&s->clock, &node_clocks[i]); /* the launch ends when every node has */
  }
  dl_sync__sim_enqueue(s, op);
  exec->last_launch = (sim_dep){s, s->enqueued};
  exec->last_clock = s->clock;
  for (size_t i = 0; i < graph->node_count; i++) {
    dl_sync_sim_event *event = graph->nodes[i].event;
    if (graph->nodes[i].kind != SIM_NODE_RECORD_EXTERNAL) continue;
    event->capture = NULL;
    event->last = (sim_dep){s, s->enqueued};
    event->clock = node_clocks[i];
  }
  free(node_clocks);
  pthread_mutex_unlock(&dl_sync__sim.lock);
  return DL_SYNC_SIM_SUCCESS;
}

void dl_sync__sim_graph_run(const sim_op *op) {
  const dl_sync_sim_graph *graph = op->exec->graph;
  for (size_t i = 0; i < graph->node_count; i++) {
    const sim_node *node = &graph->nodes[i];
    if (node->kind == SIM_NODE_KERNEL) node->fn(node->arg);
    if (node->kind != SIM_NODE_WAIT_EXTERNAL) continue;
    pthread_mutex_lock(&dl_sync__sim.lock);
    while (!dl_sync__sim_dep_done(op->node_waits[i]))
      pthread_cond_wait(&dl_sync__sim.changed, &dl_sync__sim.lock);
    pthread_mutex_unlock(&dl_sync__sim.lock);
  }
}

int dl_sync_sim_graph_exec_destroy(dl_sync_sim_graph_exec *exec) {
  pthread_mutex_lock(&dl_sync__sim.lock);
  int found = 0;
  for (dl_sync_sim_graph_exec **link = &dl_sync__sim.execs; *link != NULL;
       link = &(*link)->next_exec)
    if (*link == exec) {
      *link = exec->next_exec;
      found = 1;
      break;
    }
  dl_sync_sim_user_object **released = NULL;
  size_t released_count = 0;
  if (found) {
    /* Launches still queued run from this copy: wait for them. */
    dl_sync__sim_wait_streams_idle();
    dl_sync__sim_graph_free(exec->graph, &released, &released_count);
    exec->magic = 0;
    free(exec);
  }
  pthread_mutex_unlock(&dl_sync__sim.lock);
  dl_sync__sim_user_objects_release(released, released_count);
  free(released);
  return found ? DL_SYNC_SIM_SUCCESS : DL_SYNC_SIM_ERROR_INVALID_HANDLE;
}

int dl_sync_sim_user_object_create(dl_sync_sim_user_object **object, void *ptr,
                                   void (*destroy)(void *), unsigned refcount) {
  if (object == NULL || destroy == NULL || refcount == 0) return DL_SYNC_SIM_ERROR_INVALID_VALUE;
  *object = malloc(sizeof **object);
  if (*object == NULL) return DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION;
  **object = (dl_sync_sim_user_object){ptr, destroy, refcount};
  return DL_SYNC_SIM_SUCCESS;
}

void dl_sync__sim_user_objects_release(dl_sync_sim_user_object **objects, size_t count) {
  for (size_t i = 0; i < count; i++) dl_sync_sim_user_object_release(objects[i], 1);
}

int dl_sync_sim_user_object_release(dl_sync_sim_user_object *object, unsigned count) {
  if (object == NULL || count == 0) return DL_SYNC_SIM_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&dl_sync__sim.lock);
  int error = count > object->refcount ? DL_SYNC_SIM_ERROR_INVALID_VALUE : DL_SYNC_SIM_SUCCESS;
  int last = 0;
  if (error == DL_SYNC_SIM_SUCCESS) {
    object->refcount -= count;
    last = object->refcount == 0;
  }
  pthread_mutex_unlock(&dl_sync__sim.lock);
  if (last) { /* as CUDA: the destructor runs without the runtime's locks */
    object->destroy(object->ptr);
    free(object);
  }
  return error;
}

int dl_sync_sim_graph_retain_user_object(dl_sync_sim_graph *graph, dl_sync_sim_user_object *object,
                                         unsigned count) {
  if (object == NULL || count == 0) return DL_SYNC_SIM_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&dl_sync__sim.lock);
  int error = graph == NULL || graph->magic != SIM_GRAPH_MAGIC ? DL_SYNC_SIM_ERROR_INVALID_HANDLE
                                                               : DL_SYNC_SIM_SUCCESS;
  size_t needed = error ? 0 : graph->object_count + count;
  if (error == DL_SYNC_SIM_SUCCESS && needed > graph->object_capacity) {
    dl_sync_sim_user_object **grown = realloc(graph->objects, needed * 2 * sizeof *grown);
    if (grown == NULL)
      error = DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION;
    else {
      graph->objects = grown;
      graph->object_capacity = needed * 2;
    }
  }
  for (unsigned i = 0; error == DL_SYNC_SIM_SUCCESS && i < count; i++)
    graph->objects[graph->object_count++] = object;
  pthread_mutex_unlock(&dl_sync__sim.lock);
  return error;
}
