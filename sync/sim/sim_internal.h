/* SPDX-License-Identifier: Apache-2.0 */
/* The simulated device's internal state. One mutex guards it all; kernels and user-object
   destructors run without it. */
#ifndef DL_SYNC_SIM_INTERNAL_H_
#define DL_SYNC_SIM_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "dlsync/sim.h"

/* Agents: every stream and every host thread has a component in the vector clocks. */
enum { SIM_MAX_AGENTS = 256 };

typedef struct sim_clock {
  uint32_t c[SIM_MAX_AGENTS];
} sim_clock;

/* "Done once stream has completed its operation seq" (seq 0: nothing to wait for). */
typedef struct sim_dep {
  dl_sync_sim_stream *stream;
  uint64_t seq;
} sim_dep;

typedef struct sim_deps {
  sim_dep *items;
  size_t count, capacity;
} sim_deps;

/* A set of graph node indices. */
typedef struct sim_nodes {
  size_t *items;
  size_t count, capacity;
} sim_nodes;

typedef enum sim_op_kind { SIM_OP_KERNEL, SIM_OP_WAIT, SIM_OP_GRAPH } sim_op_kind;

typedef struct sim_op {
  struct sim_op *next;
  sim_op_kind kind;
  uint64_t seq;
  void (*fn)(void *);
  void *arg;
  dl_sync_sim_graph_exec *exec; /* SIM_OP_GRAPH */
  sim_dep *node_waits;          /* SIM_OP_GRAPH: per node, the record an external wait names */
  sim_deps deps;
} sim_op;

typedef struct sim_capture sim_capture;

struct dl_sync_sim_stream {
  uint32_t magic;
  int32_t device;
  unsigned flags;
  int is_legacy, is_per_thread, destroyed;
  int agent;
  sim_clock clock;
  uint64_t enqueued, completed;
  sim_op *head, *tail;
  pthread_t worker;
  sim_capture *capture; /* the capture this stream takes part in, or NULL */
  sim_nodes capture_deps;
  dl_sync_sim_stream *next_stream; /* all streams, for reset and legacy sync */
};

struct dl_sync_sim_event {
  uint32_t magic;
  int32_t device; /* the device current when it was created */
  sim_dep last;   /* the last record; stream NULL when never recorded */
  sim_clock clock;
  sim_capture *capture; /* set when last recorded inside a capture */
  sim_nodes capture_nodes;
  dl_sync_sim_event *next_event;
};

typedef enum sim_node_kind {
  SIM_NODE_KERNEL,
  SIM_NODE_WAIT_EXTERNAL,
  SIM_NODE_RECORD_EXTERNAL
} sim_node_kind;

typedef struct sim_node {
  sim_node_kind kind;
  const char *name;
  void (*fn)(void *);
  void *arg;
  dl_sync_sim_access *accesses;
  size_t access_count;
  dl_sync_sim_event *event;
  sim_nodes deps;
  int agent; /* in an executable graph: the kernel node's own agent, -1 without accesses */
} sim_node;

struct dl_sync_sim_user_object {
  void *ptr;
  void (*destroy)(void *);
  unsigned refcount;
};

struct dl_sync_sim_graph {
  uint32_t magic;
  sim_node *nodes;
  size_t node_count, node_capacity;
  dl_sync_sim_user_object **objects; /* one entry per reference held */
  size_t object_count, object_capacity;
  dl_sync_sim_graph *next_graph;
};

struct dl_sync_sim_graph_exec {
  uint32_t magic;
  dl_sync_sim_graph *graph; /* a private copy of the instantiated graph */
  sim_dep last_launch;      /* launches of one executable graph are ordered */
  sim_clock last_clock;     /* what the last launch's nodes knew, together */
  dl_sync_sim_graph_exec *next_exec;
};

struct sim_capture {
  uint64_t id;
  int mode;
  int invalidated;
  int ended; /* kept until reset: events recorded in it still point here */
  pthread_t thread;
  dl_sync_sim_stream *origin;
  dl_sync_sim_graph *graph;
  sim_capture *next_capture;
};

typedef struct sim_state {
  pthread_mutex_t lock;
  pthread_cond_t changed;
  uint64_t generation; /* bumped by reset: thread-local caches compare it */
  int shutting_down;
  dl_sync_sim_stream *streams;
  dl_sync_sim_stream *legacy[DL_SYNC_SIM_DEVICES];
  dl_sync_sim_event *events;
  dl_sync_sim_graph *graphs;
  dl_sync_sim_graph_exec *execs;
  sim_capture *captures; /* every capture since reset */
  uint64_t next_capture_id;
  int next_agent;
  sim_clock *host_clocks[SIM_MAX_AGENTS];
  struct sim_sync_clock *sync_clocks;   /* host clocks released under a key */
  struct sim_thread_exit *thread_exits; /* clocks of exited threads, until joined */
  dl_sync_sim_event *retired_events;    /* freed by a reset, kept until destroyed */
  uint64_t jitter_seed;
  unsigned jitter_max_us;
  int query_rules;                 /* DL_SYNC_SIM_QUERY_RULES_* */
  uint64_t destroyed_stream_reads; /* HIP rules: reads of a destroyed recording stream */
} sim_state;

extern sim_state dl_sync__sim;

enum {
  SIM_STREAM_MAGIC = 0x5e7ea7,
  SIM_EVENT_MAGIC = 0xe7e47,
  SIM_GRAPH_MAGIC = 0x6a4f,
  SIM_EXEC_MAGIC = 0xe8ec,
  SIM_EVENT_RETIRED_MAGIC = 0xdead7e
};

/* runtime.c (lock held unless noted) */
int dl_sync__sim_current_device(void);
int dl_sync__sim_new_agent(void);
/* The handle a stream is known by outside the simulator: its address with the top byte
   DL_SYNC_SIM_STREAM_TAG, so that no copy of dlsync hands it to a real driver; and back,
   NULL for a handle without the tag. (32-bit: the address itself.) */
#if UINTPTR_MAX > 0xFFFFFFFFu
#define DL_SYNC__SIM_TAG_SHIFT 56
static inline dl_sync_sim_stream *dl_sync__sim_handle(dl_sync_sim_stream *stream) {
  return (dl_sync_sim_stream *)((uintptr_t)stream | (uintptr_t)DL_SYNC_SIM_STREAM_TAG
                                                        << DL_SYNC__SIM_TAG_SHIFT);
}
static inline dl_sync_sim_stream *dl_sync__sim_untag(dl_sync_sim_stream *handle) {
  if (((uintptr_t)handle >> DL_SYNC__SIM_TAG_SHIFT) != DL_SYNC_SIM_STREAM_TAG) return NULL;
  return (dl_sync_sim_stream *)((uintptr_t)handle & (((uintptr_t)1 << DL_SYNC__SIM_TAG_SHIFT) - 1));
}
#else
static inline dl_sync_sim_stream *dl_sync__sim_handle(dl_sync_sim_stream *stream) {
  return stream;
}
static inline dl_sync_sim_stream *dl_sync__sim_untag(dl_sync_sim_stream *handle) {
  return handle;
}
#endif
void dl_sync__sim_jitter(const dl_sync_sim_stream *stream, uint64_t seq); /* lock not held */
int dl_sync__sim_deps_add(sim_deps *deps, dl_sync_sim_stream *stream, uint64_t seq);
int dl_sync__sim_nodes_add(sim_nodes *nodes, size_t node);
int dl_sync__sim_nodes_copy(sim_nodes *to, const sim_nodes *from);
void dl_sync__sim_clock_join(sim_clock *into, const sim_clock *from);

/* event.c (lock held) */
/* Reset: events stop being valid, but keep their memory until destroyed, so that a
   later destroy neither fails nor hits a new event at the same address. */
void dl_sync__sim_events_retire(void);

/* stream.c */
/* Resolves the special handles (NULL, 1, 2), making the default stream they name on
   first use, and a stream's handle, and checks the magic; NULL if invalid (lock held). */
dl_sync_sim_stream *dl_sync__sim_resolve(dl_sync_sim_stream *stream);
dl_sync_sim_stream *dl_sync__sim_stream_new(int32_t device, unsigned flags, int is_legacy,
                                            int is_per_thread);
/* Appends op to stream (lock held); wakes its worker. */
void dl_sync__sim_enqueue(dl_sync_sim_stream *stream, sim_op *op);
/* The implicit synchronization of the legacy stream: deps and clock for an operation
   about to be enqueued on stream. Fails with 906 when it would touch a capture. */
int dl_sync__sim_legacy_sync(dl_sync_sim_stream *stream, sim_deps *deps);
int dl_sync__sim_dep_done(sim_dep dep);
/* A new operation for stream carrying the legacy stream's implicit dependencies; NULL
   (and *error) on failure. dl_sync__sim_op_free releases one that is not enqueued. */
sim_op *dl_sync__sim_op_new(dl_sync_sim_stream *stream, sim_op_kind kind, int *error);
void dl_sync__sim_op_free(sim_op *op);
/* Enqueues a marker carrying the legacy stream's implicit dependencies, if any. */
int dl_sync__sim_legacy_marker(dl_sync_sim_stream *stream);
/* Work enqueued by a host thread is ordered after what that thread did before. */
void dl_sync__sim_join_host(dl_sync_sim_stream *stream);
void dl_sync__sim_wait_streams_idle(void);
void dl_sync__sim_stream_free(dl_sync_sim_stream *stream);

/* race.c (lock held) */
void dl_sync__sim_race_check(int agent, const sim_clock *clock, const char *name,
                             const void *buffer, int mode);
/* Accesses of two unordered nodes of one graph. */
void dl_sync__sim_race_report_graph(const char *a, int a_mode, const char *b, int b_mode,
                                    const void *buffer);
void dl_sync__sim_race_clear(void);

/* annotate.c (lock held) */
void dl_sync__sim_sync_clocks_free(void);

/* thread.c: thread creation and join as happens-before edges. */
/* Around the simulator's own pthread_create and pthread_join (its streams' workers): the
   calls still go through a sanitizer's interceptors, if any, but the simulator's pass
   them to the C library untouched (they would take the simulator's lock). */
void dl_sync__sim_own_thread_call(int own);
/* The calling host thread's agent and clock, made on first use: its clock starts from
   what the thread inherited at its creation (lock held). */
int dl_sync__sim_host_agent(sim_clock **clock);
void dl_sync__sim_thread_exits_free(void); /* lock held */

/* What a thread created through the simulator's pthread_create receives from its
   creator. */
typedef struct sim_birth {
  void *(*start)(void *);
  void *arg;
  pthread_key_t key;      /* the key the birth is filed under in the new thread */
  uint64_t generation;    /* of clock; 0: the creator knew nothing */
  sim_clock clock;        /* what the creator knew when it created the thread */
  atomic_int exited;      /* set by the thread's exit; the next creation frees it */
  struct sim_birth *next; /* the births listed (thread.c) */
} sim_birth;

/* thread_start.c (built without sanitizer instrumentation) */
/* The new thread's first function: files the birth under its key, runs start(arg). */
void *dl_sync__sim_thread_start(void *birth);

/* capture.c (lock held) */
/* The legacy stream of device may not be used while a blocking stream of that device
   captures: invalidates those captures and answers 906 (or 0 when none captures). */
int dl_sync__sim_check_legacy_use(int32_t device, int invalidate);
/* Fails with the capture error when the calling thread may not make a forbidden call now,
   invalidating the captures it would disturb. */
int dl_sync__sim_check_prohibited(void);
void dl_sync__sim_capture_invalidate(sim_capture *capture);
int dl_sync__sim_capture_kernel(dl_sync_sim_stream *stream, const char *name, void (*fn)(void *),
                                void *arg, const dl_sync_sim_access *accesses, size_t count);
int dl_sync__sim_capture_record(dl_sync_sim_stream *stream, dl_sync_sim_event *event,
                                unsigned flags);
int dl_sync__sim_capture_wait(dl_sync_sim_stream *stream, dl_sync_sim_event *event, unsigned flags);
void dl_sync__sim_graph_free(dl_sync_sim_graph *graph, dl_sync_sim_user_object ***released,
                             size_t *released_count);
void dl_sync__sim_capture_free_all(void);
/* Runs a graph launch's nodes in capture order, each external wait where it stands
   (lock not held). */
void dl_sync__sim_graph_run(const sim_op *op);
void dl_sync__sim_user_objects_release(dl_sync_sim_user_object **objects,
                                       size_t count); /* no lock */

#endif /* DL_SYNC_SIM_INTERNAL_H_ */
