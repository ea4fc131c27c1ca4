/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The device model shared by the fake runtime libraries (fake_cudart.c, fake_amdhip64.c)
 * and the fake CUDA driver (fake_cuda_driver.c): devices, streams, stream capture, events,
 * graphs and graph user objects, on the host only. Each fake includes it once and maps its
 * entry points onto it; every behaviour of a runtime is chosen and cited in that runtime's
 * file, not here. The runtimes leave the driver's fields (context, non_blocking) zero.
 *
 * Test hooks (fake_gpu_*) let the suite read what the runtime was asked to do; they are
 * observations, never behaviour.
 */
#ifndef FAKE_GPU_H_
#define FAKE_GPU_H_

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _WIN32 /* a DLL exports what is marked so */
#define FAKE_EXPORT __declspec(dllexport)
#else
#define FAKE_EXPORT __attribute__((visibility("default")))
#endif
#define FAKE_RUNTIMES_ONLY __attribute__((unused)) /* the driver has its own */

enum {
  FAKE_MAX_DEVICES = 8,
  FAKE_MAX_STREAMS = 64,
  FAKE_MAX_OBJECTS = 64,
  FAKE_MAX_NODES = 64,
  FAKE_MAX_DEPS = 8,
  FAKE_MAX_HOLDS = 8
};

/* A graph node: what it does and the nodes it depends on. The HIP fake builds them (its
   captures and graph calls); the others only count nodes. */
enum { FAKE_NODE_HOST = 1, FAKE_NODE_EVENT_WAIT, FAKE_NODE_EVENT_RECORD };
typedef struct fake_node {
  int kind;
  const struct fake_node *deps[FAKE_MAX_DEPS];
  int dep_count;
} fake_node;

/* The nodes the next node captured on a stream depends on (HIP: hip::Stream's
   lastCapturedNodes_), or those a record in a capture saw (its NodesPrevToRecorded). */
typedef struct fake_deps {
  fake_node *at[FAKE_MAX_DEPS];
  int count;
} fake_deps;

typedef struct fake_graph {
  int nodes;
  int external_waits;             /* event-wait nodes */
  fake_node node[FAKE_MAX_NODES]; /* the first nodes of them, where a fake builds them */
  struct fake_user_object *objects[FAKE_MAX_OBJECTS];
  unsigned counts[FAKE_MAX_OBJECTS];
  int object_count;
} fake_graph;

typedef struct fake_capture {
  unsigned long long id;
  int status; /* 1 active, 2 invalidated */
  fake_graph *graph;
  struct fake_stream *origin; /* the stream it began on */
  int mode;                   /* the capture interaction mode it began in */
  const void *thread;         /* the thread that began it (fake_thread_identity) */
} fake_capture;

typedef struct fake_stream {
  int device;
  fake_capture *capture;
  void *context;    /* the driver context it belongs to; NULL in the runtimes */
  int non_blocking; /* no implicit synchronization with the legacy stream */
  int per_thread;   /* the driver: a thread's per-thread default stream */
  fake_deps deps;   /* HIP: its dependencies while it captures */
  int destroyed;    /* HIP: destroyed, and kept so that a later use can be counted */
  int last_mode;    /* HIP: the mode of its last capture (hip::Stream captureMode_, global
                       until one begins; 5.7 to 6.1 read it) */
  /* The driver: the memory waits (cuStreamWaitValue32) that work enqueued from now on waits
     for, as indices of the driver's table; the runtimes leave them empty. */
  int holds[FAKE_MAX_HOLDS];
  int hold_count;
  unsigned long long id; /* the driver's cuStreamGetId, given at the first ask; 0 before */
} fake_stream;

typedef struct fake_event {
  unsigned flags;
  int device;
  fake_stream *last_stream; /* where it was last recorded */
  fake_capture *capture;    /* the capture its last record joined, or NULL */
  void *context;            /* the driver context it belongs to; NULL in the runtimes */
  /* HIP: */
  unsigned long long capture_id; /* the capture its last record was made in, or 0 */
  fake_deps before;              /* that capture's dependencies at the record */
  int on_legacy;                 /* last recorded on the hipStreamLegacy handle */
  unsigned held_round;           /* recorded while the test held the work back */
  int destroyed;                 /* destroyed, and kept so that a later use can be counted */
  /* The driver: */
  int holds[FAKE_MAX_HOLDS]; /* the memory waits its last record waits for */
  int hold_count;
} fake_event;

typedef struct fake_user_object {
  void *ptr;
  void (*destroy)(void *);
  unsigned refs;
} fake_user_object;

/* Special stream handles resolve against the calling thread's current device. */
static fake_stream fake_legacy[FAKE_MAX_DEVICES], fake_per_thread[FAKE_MAX_DEVICES];
static fake_stream *fake_streams[FAKE_MAX_STREAMS];
static _Thread_local int fake_current_device FAKE_RUNTIMES_ONLY;
static unsigned long long fake_next_capture_id = 1;
static struct {
  long event_create, event_destroy, event_record, stream_wait, event_query, timing_events;
  long user_objects_live, mode_exchanges;
} fake_counters;

/* An object the fake keeps after the runtime would have freed it (so that a later use of
   its handle is seen, and its address never names an object made later), listed here so
   that a leak checker sees it reachable. */
static void **fake_kept;
static size_t fake_kept_count, fake_kept_capacity;

__attribute__((unused)) static void fake_keep(void *object) {
  if (fake_kept_count == fake_kept_capacity) {
    size_t capacity = fake_kept_capacity != 0 ? 2 * fake_kept_capacity : 64;
    void **grown = realloc(fake_kept, capacity * sizeof *grown);
    if (grown == NULL) return; /* kept anyway, only unlisted */
    fake_kept = grown;
    fake_kept_capacity = capacity;
  }
  fake_kept[fake_kept_count++] = object;
}

static int fake_device_count(void) {
  const char *count = getenv("FAKE_GPU_DEVICES");
  return count != NULL ? atoi(count) : 2;
}

static fake_stream *fake_stream_new(int device) {
  for (int i = 0; i < FAKE_MAX_STREAMS; i++) {
    if (fake_streams[i] != NULL) continue;
    fake_streams[i] = calloc(1, sizeof *fake_streams[i]);
    fake_streams[i]->device = device;
    return fake_streams[i];
  }
  return NULL;
}

FAKE_RUNTIMES_ONLY static void fake_stream_free(fake_stream *stream) {
  for (int i = 0; i < FAKE_MAX_STREAMS; i++)
    if (fake_streams[i] == stream) fake_streams[i] = NULL;
  free(stream);
}

/* A capture in progress on a blocking stream of device and context, or on its per-thread
   stream (the legacy stream's implicit synchronization makes every blocking stream's
   capture visible to it). */
static int fake_blocking_capture_on(int device, const void *context,
                                    const fake_stream *per_thread) {
  for (int i = 0; i < FAKE_MAX_STREAMS; i++)
    if (fake_streams[i] != NULL && fake_streams[i]->device == device &&
        fake_streams[i]->context == context && !fake_streams[i]->non_blocking &&
        fake_streams[i]->capture != NULL)
      return 1;
  return per_thread->capture != NULL;
}

/* The runtimes: a capture in progress on any stream of device. */
FAKE_RUNTIMES_ONLY static int fake_any_capture_on(int device) {
  return fake_blocking_capture_on(device, NULL, &fake_per_thread[device]);
}

static _Thread_local char fake_thread_identity; /* its address names the calling thread */
/* The captures in progress (begun and not ended), for the capture-mode rules. */
static fake_capture *fake_live_captures[FAKE_MAX_STREAMS];

/* Begins a capture in mode on stream, by the calling thread, listed as in progress; false,
   and nothing begun, when the fake's list is full. */
static int fake_capture_begin(fake_stream *stream, int mode) {
  int slot = 0;
  while (slot < FAKE_MAX_STREAMS && fake_live_captures[slot] != NULL) slot++;
  if (slot == FAKE_MAX_STREAMS) return 0;
  fake_capture *capture = calloc(1, sizeof *capture);
  capture->id = fake_next_capture_id++;
  capture->status = 1;
  capture->graph = calloc(1, sizeof *capture->graph);
  capture->origin = stream;
  capture->mode = mode;
  capture->thread = &fake_thread_identity;
  stream->capture = capture;
  fake_live_captures[slot] = capture;
  return 1;
}

/* The capture is no longer in progress. */
static void fake_capture_unlist(const fake_capture *capture) {
  for (int i = 0; i < FAKE_MAX_STREAMS; i++)
    if (fake_live_captures[i] == capture) fake_live_captures[i] = NULL;
}

static void fake_capture_invalidate(fake_capture *capture) {
  capture->status = 2;
}

/* CUDA's rule, the driver's and the runtime's (modes 0 global, 1 thread-local, 2 relaxed in
   both): whether the calling thread, in thread_mode, is prohibited from a potentially unsafe
   call, by its own non-relaxed captures or by another thread's global-mode ones; the fake,
   at least as strict as CUDA, invalidates the captures that prohibit it. The rule's source
   stands at each fake's prohibited(). */
__attribute__((unused)) static int fake_cuda_prohibited(int thread_mode) {
  int found = 0;
  for (int i = 0; i < FAKE_MAX_STREAMS; i++) {
    fake_capture *capture = fake_live_captures[i];
    if (capture == NULL || thread_mode == 2) continue;
    int own = capture->thread == &fake_thread_identity;
    if ((own && capture->mode != 2) || (!own && thread_mode == 0 && capture->mode == 0)) {
      fake_capture_invalidate(capture);
      found = 1;
    }
  }
  return found;
}

/* Every stream that joined the capture leaves it, with no capture dependencies left. */
static void fake_capture_leave_all(const fake_capture *capture) {
  for (int i = 0; i < FAKE_MAX_STREAMS; i++)
    if (fake_streams[i] != NULL && fake_streams[i]->capture == capture) {
      fake_streams[i]->capture = NULL;
      fake_streams[i]->deps.count = 0;
    }
  for (int d = 0; d < FAKE_MAX_DEVICES; d++)
    if (fake_per_thread[d].capture == capture) {
      fake_per_thread[d].capture = NULL;
      fake_per_thread[d].deps.count = 0;
    }
}

/* Ends capture: it is no longer live, every stream that joined it leaves; returns its graph,
   or NULL when the capture was invalidated (its graph is dropped). */
static fake_graph *fake_capture_end(fake_stream *origin) {
  fake_capture *capture = origin->capture;
  fake_capture_unlist(capture);
  fake_capture_leave_all(capture);
  origin->deps.count = 0;
  fake_graph *graph = capture->status == 1 ? capture->graph : NULL;
  if (graph == NULL) free(capture->graph);
  free(capture);
  return graph;
}

FAKE_RUNTIMES_ONLY static void fake_user_object_release(fake_user_object *object, unsigned count) {
  object->refs -= count;
  if (object->refs != 0) return;
  object->destroy(object->ptr);
  fake_counters.user_objects_live--;
  free(object);
}

FAKE_RUNTIMES_ONLY static void fake_graph_destroy(fake_graph *graph) {
  for (int i = 0; i < graph->object_count; i++)
    fake_user_object_release(graph->objects[i], graph->counts[i]);
  free(graph);
}

/* Test hooks. A fake with counters of its own defines FAKE_GPU_MORE_COUNTERS(name) (the
   value of the counter called name, or -1) before including this file. */
#ifndef FAKE_GPU_MORE_COUNTERS
#define FAKE_GPU_MORE_COUNTERS(name) ((void)(name), -1L)
#endif
FAKE_EXPORT long fake_gpu_counter(const char *name);
FAKE_EXPORT int fake_gpu_graph_external_waits(const void *graph);
FAKE_EXPORT const char *fake_gpu_graph_nodes(const void *graph, char *text, size_t size);

long fake_gpu_counter(const char *name) {
  if (strcmp(name, "event_create") == 0) return fake_counters.event_create;
  if (strcmp(name, "event_destroy") == 0) return fake_counters.event_destroy;
  if (strcmp(name, "event_record") == 0) return fake_counters.event_record;
  if (strcmp(name, "stream_wait") == 0) return fake_counters.stream_wait;
  if (strcmp(name, "event_query") == 0) return fake_counters.event_query;
  if (strcmp(name, "timing_events") == 0) return fake_counters.timing_events;
  if (strcmp(name, "user_objects_live") == 0) return fake_counters.user_objects_live;
  if (strcmp(name, "mode_exchanges") == 0) return fake_counters.mode_exchanges;
  return FAKE_GPU_MORE_COUNTERS(name);
}

int fake_gpu_graph_external_waits(const void *graph) {
  return ((const fake_graph *)graph)->external_waits;
}

/* The nodes a fake built, in order, as "0:host 1:wait<0 2:host<1": each node's index, kind
   and the indices of the nodes it depends on. */
const char *fake_gpu_graph_nodes(const void *graph, char *text, size_t size) {
  static const char *const kinds[] = {"?", "host", "wait", "record"};
  const fake_graph *g = graph;
  size_t used = 0;
  text[0] = '\0';
  for (int i = 0; i < g->nodes && i < FAKE_MAX_NODES && used < size; i++) {
    const fake_node *n = &g->node[i];
    used += (size_t)snprintf(text + used, size - used, "%s%d:%s", i ? " " : "", i,
                             kinds[n->kind >= 0 && n->kind <= 3 ? n->kind : 0]);
    for (int d = 0; d < n->dep_count && used < size; d++)
      used += (size_t)snprintf(text + used, size - used, "<%d", (int)(n->deps[d] - g->node));
  }
  return text;
}

#endif /* FAKE_GPU_H_ */
