/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The runner: one program on a fresh simulated device (jitter on), its operations made in
 * program order, each on its own host thread (a worker per program thread, handed each
 * operation in turn, with the hand-off told to the race checker so that the program is
 * sequentially consistent on the host). Each operation's expected dlsync status comes
 * from this file's own model of the stream-argument, capture and release tables
 * (docs/design.md, dlsync/release.h), never from dlsync; an operation whose preconditions
 * do not hold in the world as it is is skipped. The oracles, at the end: no race, no
 * wrong value, every capture ended well, every status as predicted, every deleter run
 * once and only where the contract names it, nothing pending.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifndef _WIN32
#include <sys/wait.h>
#include <unistd.h>
#endif

#include "dlsync/dlsync.h"
#include "dlsync/sim.h"
#include "scenario.h"

enum { MAX_BLOCKS = MAX_OPS, MAX_READS = MAX_OPS, JOBS = 4 * MAX_OPS };
enum { EXPLICIT, LEGACY, PER_THREAD }; /* stream kinds */

typedef struct stream_id {
  int kind, device, thread;
  void *handle; /* the simulator's handle (explicit), or the special one */
} stream_id;

typedef struct world world;

typedef struct tensor_record {
  DLManagedTensorVersioned managed;
  DLManagedTensor legacy; /* the tensor, for a producer of pre-1.0 tensors (is_legacy) */
  int is_legacy;
  world *w;
  int framework, device, stream; /* produced and pooled on */
  int block;
  int32_t value;
  int has_event;
  int read, read_capture; /* read once; in which capture (-1: none) */
  stream_id read_on;
  int released;
  int imported;        /* taken through its producer's table: the consumer's now */
  long syncs_at_write; /* host synchronizations made before its write (world.syncs) */
  atomic_int deleted;
} tensor_record;

typedef struct capture {
  int open, thread, mode;
  dl_sync_sim_stream *stream;
  int device;
  dl_sync_sim_graph *graph;
  dl_sync_sim_graph_exec *exec;
} capture;

typedef struct job {
  int32_t *words;
  int32_t value;
  int64_t *mismatches;
  long slow_ns; /* a read that takes this long: its release waits meanwhile */
} job;

/* Which call a deleter may run in (dlsync/release.h, "Where deleters run"). */
enum {
  CALL_NONE,
  CALL_OTHER,
  CALL_RELEASE,
  CALL_POLL,
  CALL_SHUTDOWN,
  CALL_DIRECT,
  CALL_RUNTIME,
  CALL_IMPORT /* an import that refuses the tensor it took gives it back (exchange.h) */
};

struct world {
  const program *p;
  variant v;
  int verbose;
  int32_t device_type;
  dl_sync_sim_stream *streams[MAX_FRAMEWORKS][MAX_DEVICES][STREAMS_PER_DEVICE];
  int32_t blocks[MAX_BLOCKS][WORDS];
  int block_count;
  pthread_mutex_t pool_lock;
  int free_blocks[MAX_FRAMEWORKS][MAX_DEVICES][STREAMS_PER_DEVICE][MAX_BLOCKS];
  int free_count[MAX_FRAMEWORKS][MAX_DEVICES][STREAMS_PER_DEVICE];
  int freed_unordered[MAX_BLOCKS]; /* the control gave it back with a read pending */
  tensor_record records[MAX_OPS];
  int record_count;
  int slot_record[MAX_SLOTS];
  capture captures[MAX_CAPTURES];
  int64_t mismatches[MAX_READS];
  int read_count;
  job jobs[JOBS];
  int job_count;
  int op_index;
  verdict result;
  atomic_int violations;
  pthread_mutex_t violation_lock;
  char violation[256];
  /* the workers */
  pthread_t threads[MAX_THREADS];
  pthread_mutex_t lock;
  pthread_cond_t changed;
  int assigned[MAX_THREADS]; /* the op a worker is to run; -1: none; -2: stop */
  int done[MAX_THREADS];
  int handoff; /* the race checker's key for the hand-offs */
  /* the producers' exchange tables: the stream each works on now, per device */
  void *current[MAX_FRAMEWORKS][MAX_DEVICES];
  dl_sync_sim_event *producer_events[MAX_FRAMEWORKS][MAX_DEVICES];
  int conversions_failed;
  long acts;         /* dlsync and runtime calls made: an operation that made none was skipped */
  int last_deferred; /* the record of the latest release deferred onto an explicit stream */
  atomic_long syncs; /* host synchronizations of a stream or device made so far */
};

static _Thread_local struct {
  int program_thread, thread;
  int call;
  const tensor_record *tensor;
} here;

/* ---- failures ---------------------------------------------------------------------- */

#if defined(__GNUC__)
static void failed(world *w, int class_, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#endif
static void failed(world *w, int class_, const char *fmt, ...) {
  if (w->result.failed) return;
  w->result.failed = 1;
  w->result.class_ = class_;
  int n = snprintf(w->result.why, sizeof w->result.why, "op %d: ", w->op_index);
  va_list args;
  va_start(args, fmt);
  vsnprintf(w->result.why + n, sizeof w->result.why - (size_t)n, fmt, args);
  va_end(args);
}

run_counts program_counts;

static void expect_status(world *w, const char *what, int got, int want) {
  w->result.calls++;
  w->acts++;
  program_counts.statuses[got >= 0 && got <= 3      ? got
                          : got == DL_SYNC_EINVAL   ? 4
                          : got == DL_SYNC_ECAPTURE ? 5
                                                    : 6]++;
  if (w->verbose) printf("    %s: %d (expected %d)\n", what, got, want);
  if (got != want)
    failed(w, FAILURE_STATUS, "%s answered %d (%s), expected %d", what, got,
           got < 0 ? dl_sync_last_error() : "", want);
}

/* ---- kernels ------------------------------------------------------------------------ */

/* Relaxed atomics: a negative control races on purpose, and its race is then well
   defined (the race checker judges the order, ThreadSanitizer the host code). */
static void write_kernel(void *arg) {
  const job *j = arg;
  for (int i = 0; i < WORDS; i++) __atomic_store_n(&j->words[i], j->value + i, __ATOMIC_RELAXED);
}

static void read_kernel(void *arg) {
  const job *j = arg;
  if (j->slow_ns > 0) {
    struct timespec t = {0, j->slow_ns};
    nanosleep(&t, NULL);
  }
  for (int i = 0; i < WORDS; i++)
    if (__atomic_load_n(&j->words[i], __ATOMIC_RELAXED) != j->value + i)
      __atomic_fetch_add(j->mismatches, 1, __ATOMIC_RELAXED);
}

static job *new_job(world *w, int32_t *words, int32_t value, int64_t *mismatches) {
  if (w->job_count == JOBS) return NULL;
  job *j = &w->jobs[w->job_count++];
  *j = (job){words, value, mismatches, 0};
  return j;
}

/* ---- streams ------------------------------------------------------------------------- */

static dl_sync_stream view(const world *w, int device, void *handle) {
  return dl_sync_stream_view((DLDevice){w->device_type, device}, handle);
}

static int same_stream(stream_id a, stream_id b) {
  if (a.kind != b.kind || a.device != b.device) return 0;
  return a.kind == EXPLICIT ? a.handle == b.handle : a.kind != PER_THREAD || a.thread == b.thread;
}

/* The open capture on stream, or -1. Only explicit streams capture here. */
static int capture_on(const world *w, stream_id s) {
  for (int c = 0; c < MAX_CAPTURES; c++)
    if (w->captures[c].open && s.kind == EXPLICIT && w->captures[c].stream == s.handle) return c;
  return -1;
}

static int any_capture_open(const world *w) {
  for (int c = 0; c < MAX_CAPTURES; c++)
    if (w->captures[c].open) return 1;
  return 0;
}

static stream_id explicit_stream(const world *w, int f, int d, int s) {
  return (stream_id){EXPLICIT, d, -1, w->streams[f][d][s]};
}

static int blocking(const world *w, stream_id s) {
  if (s.kind != EXPLICIT) return 1;
  for (int f = 0; f < w->p->frameworks; f++)
    for (int i = 0; i < STREAMS_PER_DEVICE; i++)
      if (w->streams[f][s.device][i] == s.handle) return !w->p->non_blocking[f][s.device][i];
  return 1;
}

/* ---- the pool: a block freed on stream S is the next allocation on S, at once --------- */

static int pool_take(world *w, int f, int d, int s) {
  pthread_mutex_lock(&w->pool_lock);
  int block = w->free_count[f][d][s] > 0    ? w->free_blocks[f][d][s][--w->free_count[f][d][s]]
              : w->block_count < MAX_BLOCKS ? w->block_count++
                                            : -1;
  int reused_unordered = block >= 0 && w->freed_unordered[block];
  if (block >= 0) w->freed_unordered[block] = 0;
  pthread_mutex_unlock(&w->pool_lock);
  w->result.affected += reused_unordered; /* where the control can show */
  /* the pool's lock hands the block over from the thread that freed it (the release
     thread, say): an edge the race checker is told of, as a real allocator's lock is one */
  if (block >= 0) dl_sync_sim_host_acquire(w->blocks[block]);
  return block;
}

static void pool_give(world *w, const tensor_record *r) {
  dl_sync_sim_host_release(w->blocks[r->block]);
  pthread_mutex_lock(&w->pool_lock);
  int *count = &w->free_count[r->framework][r->device][r->stream];
  w->free_blocks[r->framework][r->device][r->stream][(*count)++] = r->block;
  pthread_mutex_unlock(&w->pool_lock);
}

/* The producer's deleter: the block back to its pool on its stream. It checks where it
   runs: a program thread's call that names deleters (a poll, shutdown, the release of this
   very tensor, a direct call), or dlsync's release thread; never another call, never a
   thread of the runtime's. */
static void deleted(tensor_record *r) {
  world *w = r->w;
  int allowed =
      here.program_thread
          ? here.call == CALL_POLL || here.call == CALL_SHUTDOWN || here.call == CALL_DIRECT ||
                ((here.call == CALL_RELEASE || here.call == CALL_IMPORT) && here.tensor == r)
          : dl_sync_release_thread_running();
  if (!allowed && atomic_fetch_add(&w->violations, 1) == 0) {
    pthread_mutex_lock(&w->violation_lock);
    snprintf(w->violation, sizeof w->violation, "the deleter of the tensor of op %d ran %s",
             (int)(r - w->records),
             here.program_thread ? "in a call that does not name deleters"
                                 : "on a thread that is neither the program's nor dlsync's");
    pthread_mutex_unlock(&w->violation_lock);
  }
  if (!here.program_thread)
    __atomic_fetch_add(&program_counts.deleters_on_release_thread, 1, __ATOMIC_RELAXED);
  if (atomic_fetch_add(&r->deleted, 1) == 0) pool_give(w, r);
}

static void deleter(DLManagedTensorVersioned *t) {
  deleted((tensor_record *)((char *)t - offsetof(tensor_record, managed)));
}

static void legacy_deleter(DLManagedTensor *t) {
  deleted((tensor_record *)((char *)t - offsetof(tensor_record, legacy)));
}

/* The tensor entry points, versioned or pre-1.0 (DLManagedTensor) as r's producer makes it. */
static int tensor_record_reuse(tensor_record *r, dl_sync_stream producer, dl_sync_stream reuse) {
  return r->is_legacy ? dl_sync_legacy_tensor_record_reuse(&r->legacy, producer, reuse)
                      : dl_sync_tensor_record_reuse(&r->managed, producer, reuse);
}

static int tensor_record_event(tensor_record *r, dl_sync_stream producer) {
  return r->is_legacy ? dl_sync_legacy_tensor_record(&r->legacy, producer)
                      : dl_sync_tensor_record(&r->managed, producer);
}

static int tensor_wait(const tensor_record *r, dl_sync_stream consumer) {
  return r->is_legacy ? dl_sync_legacy_tensor_wait(&r->legacy, consumer)
                      : dl_sync_tensor_wait(&r->managed, consumer);
}

static int tensor_synchronize(const tensor_record *r) {
  return r->is_legacy ? dl_sync_legacy_tensor_synchronize(&r->legacy)
                      : dl_sync_tensor_synchronize(&r->managed);
}

static int group_add_tensor(dl_sync_group *group, const tensor_record *r) {
  return r->is_legacy ? dl_sync_group_add_legacy_tensor(group, &r->legacy)
                      : dl_sync_group_add_tensor(group, &r->managed);
}

static int tensor_release(tensor_record *r, dl_sync_stream consumer) {
  return r->is_legacy ? dl_sync_legacy_tensor_release(&r->legacy, consumer)
                      : dl_sync_tensor_release(&r->managed, consumer);
}

static void tensor_delete(tensor_record *r) {
  if (r->is_legacy)
    r->legacy.deleter(&r->legacy);
  else
    r->managed.deleter(&r->managed);
}

static int call(world *w, int kind, const tensor_record *tensor) {
  (void)w;
  int was = here.call;
  here.call = kind;
  here.tensor = tensor;
  return was;
}

/* ---- operations ---------------------------------------------------------------------- */

static tensor_record *slot_tensor(world *w, int slot) {
  int i = w->slot_record[slot];
  return i >= 0 && !w->records[i].released ? &w->records[i] : NULL;
}

static void produce(world *w, const op *o) {
  if (w->slot_record[o->slot] >= 0 && !w->records[w->slot_record[o->slot]].released) return;
  stream_id s = explicit_stream(w, o->framework, o->device, o->stream);
  if (capture_on(w, s) >= 0 || w->record_count == MAX_OPS) return;
  int block = pool_take(w, o->framework, o->device, o->stream);
  if (block < 0) return;
  tensor_record *r = &w->records[w->record_count];
  *r = (tensor_record){.w = w,
                       .framework = o->framework,
                       .device = o->device,
                       .stream = o->stream,
                       .block = block,
                       .value = 1000 * (w->op_index + 1),
                       .syncs_at_write = atomic_load(&w->syncs),
                       .read_capture = -1};
  r->managed = (DLManagedTensorVersioned){.version = {1, 3}, .deleter = deleter};
  r->managed.dl_tensor.device = (DLDevice){w->device_type, o->device};
  r->is_legacy = w->p->legacy_tensors[o->framework];
  program_counts.legacy_tensors += r->is_legacy;
  r->legacy = (DLManagedTensor){.deleter = legacy_deleter};
  r->legacy.dl_tensor.device = r->managed.dl_tensor.device;
  dl_sync_sim_set_device(o->device);
  dl_sync_sim_access access = {w->blocks[block], DL_SYNC_SIM_WRITE};
  job *j = new_job(w, w->blocks[block], r->value, NULL);
  if (j == NULL || dl_sync_sim_launch(s.handle, "write", write_kernel, j, &access, 1) != 0) {
    failed(w, FAILURE_SETUP, "the producer's write could not be launched");
    return;
  }
  w->record_count++;
  w->slot_record[o->slot] = (int)(r - w->records);
  int was = call(w, CALL_OTHER, NULL);
  if (w->p->participates[o->framework]) {
    expect_status(
        w, "dl_sync_tensor_record_reuse",
        tensor_record_reuse(r, view(w, o->device, s.handle), view(w, o->device, s.handle)),
        DL_SYNC_OK);
    r->has_event = 1;
  } else if (w->p->records_events[o->framework]) {
    expect_status(w, "dl_sync_tensor_record", tensor_record_event(r, view(w, o->device, s.handle)),
                  DL_SYNC_OK);
    r->has_event = 1;
  }
  call(w, was, NULL);
}

/* ---- exchange tables: each framework's, answering the stream it works on now ----------- */

static world *table_world; /* the program running (one at a time) */

static int current_work_stream(int f, DLDeviceType type, int32_t device, void **out) {
  const world *w = table_world;
  if (w->p->tables[f] == TABLE_STREAM_FAILS || device < 0 || device >= w->p->devices ||
      (int32_t)type != w->device_type)
    return -1;
  *out = w->p->tables[f] == TABLE_NULL ? NULL : w->current[f][device];
  return 0;
}

#define CURRENT_WORK_STREAM_OF(f)                                                     \
  static int current_work_stream_##f(DLDeviceType type, int32_t device, void **out) { \
    return current_work_stream(f, type, device, out);                                 \
  }
CURRENT_WORK_STREAM_OF(0)
CURRENT_WORK_STREAM_OF(1)
CURRENT_WORK_STREAM_OF(2)
CURRENT_WORK_STREAM_OF(3)

/* The producer's conversion: its tensor, owned by the caller from now on, ready on the
   stream it works on now (the table's _NoSync contract). A producer that works on the
   legacy stream makes that stream wait for a non-blocking stream it wrote on, with an
   event of its own; the others now work on the stream the tensor was written on. */
static int from_object(void *object, DLManagedTensorVersioned **out) {
  tensor_record *r = object;
  world *w = r->w;
  switch (w->p->tables[r->framework]) {
    case TABLE_CONVERSION_FAILS:
      if (w->conversions_failed++ % 2 == 0) return -1;
      *out = NULL; /* 0 and no tensor: the other way to fail */
      return 0;
    case TABLE_NULL:
      if (w->p->non_blocking[r->framework][r->device][r->stream]) {
        dl_sync_sim_event **event = &w->producer_events[r->framework][r->device];
        void *written_on = w->streams[r->framework][r->device][r->stream];
        int error = *event == NULL ? dl_sync_sim_event_create(event) : 0;
        if (error == 0) error = dl_sync_sim_event_record(*event, written_on, 0);
        if (error == 0) error = dl_sync_sim_stream_wait_event(DL_SYNC_SIM_STREAM_LEGACY, *event, 0);
        if (error != 0) return -1;
      }
      break;
    default:
      w->current[r->framework][r->device] = w->streams[r->framework][r->device][r->stream];
      break;
  }
  *out = &r->managed;
  return 0;
}

static const DLPackExchangeAPI tables[MAX_FRAMEWORKS] = {
    {{{1, 3}, NULL}, NULL, from_object, NULL, NULL, current_work_stream_0},
    {{{1, 3}, NULL}, NULL, from_object, NULL, NULL, current_work_stream_1},
    {{{1, 3}, NULL}, NULL, from_object, NULL, NULL, current_work_stream_2},
    {{{1, 3}, NULL}, NULL, from_object, NULL, NULL, current_work_stream_3}};

/* The consumer's stream for o, or kind -1 when o names none here. */
static stream_id consumer_stream(const world *w, const op *o, int device) {
  switch (o->consumer_kind) {
    case ON_EXPLICIT:
    case NO_SYNC:
      return explicit_stream(w, o->framework % w->p->frameworks, device, o->stream);
    case ON_LEGACY:
      return (stream_id){LEGACY, device, -1, DL_SYNC_SIM_STREAM_LEGACY};
    case ON_PER_THREAD:
      return (stream_id){PER_THREAD, device, here.thread, DL_SYNC_SIM_STREAM_PER_THREAD};
    default:
      return (stream_id){-1, device, -1, NULL};
  }
}

/* The stream argument the consumer passes for o: the stream-argument table of
   docs/design.md, read by this model. */
static dl_sync_stream_arg argument_for(const world *w, const op *o, stream_id c) {
  switch (o->consumer_kind) {
    case ON_LEGACY:
      return o->name_legacy_by_none ? dl_sync_stream_arg_none()
                                    : dl_sync_stream_arg_int(w->p->rocm ? 0 : 1);
    case ON_PER_THREAD:
      return dl_sync_stream_arg_int(2);
    case NO_SYNC:
      return dl_sync_stream_arg_int(-1);
    case BAD_ARGUMENT:
      return dl_sync_stream_arg_int(w->p->rocm ? 1 : 0);
    default:
      return dl_sync_stream_arg_int((int64_t)(intptr_t)c.handle);
  }
}

/* What the ordering must answer (the capture table of docs/design.md, by this model): a
   refused argument EINVAL; the consumer's own stream nothing to do; a tensor event waits
   whatever captures; a capturing producer cannot be ordered before another stream, the
   legacy one included. A capturing consumer gets an external wait. */
static int predicted(const world *w, const op *o, stream_id p, stream_id c, int by_event) {
  if (o->consumer_kind == BAD_ARGUMENT) return DL_SYNC_EINVAL;
  if (o->consumer_kind == NO_SYNC || same_stream(p, c) || by_event) return DL_SYNC_OK;
  return capture_on(w, p) >= 0 ? DL_SYNC_ECAPTURE : DL_SYNC_OK;
}

/* stream=None while the producer's stream captures, under DL_SYNC_CAPTURE_NONE_IS_NO_SYNC:
   no sync (dlsync/dep.h), where the strict policy refuses. The consumer then reads nothing
   here (with no ordering its read would race: the policy is the consumer's word that it
   needs none). */
static int none_is_no_sync(const world *w, const op *o, stream_id p, int mechanism) {
  return w->p->none_is_no_sync && mechanism == BY_EXPORT && o->consumer_kind == ON_LEGACY &&
         o->name_legacy_by_none && capture_on(w, p) >= 0;
}

static int order(world *w, const op *o, tensor_record *r, stream_id p, stream_id c, int mechanism,
                 int want) {
  int device = r->device;
  int leave_out = want == DL_SYNC_OK && o->consumer_kind != NO_SYNC && !same_stream(p, c) &&
                  ((w->v == SKIP_EXPORT && mechanism == BY_EXPORT) ||
                   (w->v == DROP_WAIT && mechanism != BY_EXPORT));
  if (leave_out) {
    /* ordered anyway when the legacy stream waits for a blocking producer */
    w->result.affected += !(c.kind == LEGACY && blocking(w, p));
    return DL_SYNC_OK;
  }
  switch (mechanism) {
    case BY_EXPORT:
      return dl_sync_export(view(w, device, p.handle), argument_for(w, o, c));
    case BY_PUSH_DEP:
      return dl_sync_push_dep(view(w, device, p.handle), view(w, device, c.handle));
    case BY_GROUP:
    case BY_GROUP_TENSOR:
    case BY_GROUP_TABLE: {
      dl_sync_group group;
      int status = dl_sync_group_init(&group, view(w, device, c.handle));
      if (status == DL_SYNC_OK)
        status = mechanism == BY_GROUP_TENSOR ? group_add_tensor(&group, r)
                 : mechanism == BY_GROUP_TABLE
                     ? dl_sync_group_add_exchange_api(&group, &tables[r->framework],
                                                      (DLDevice){w->device_type, device})
                     : dl_sync_group_add_stream(&group, view(w, device, p.handle));
      return status == DL_SYNC_OK ? dl_sync_group_wait(&group) : status;
    }
    case BY_HOST_WAIT:
      return tensor_synchronize(r);
    default:
      return tensor_wait(r, view(w, device, c.handle));
  }
}

/* The consumer's kernel reads r on c (in capture capturing, or -1). */
static void launch_read(world *w, tensor_record *r, stream_id c, int capturing) {
  if (w->read_count == MAX_READS) return;
  int64_t *counter = &w->mismatches[w->read_count++];
  dl_sync_sim_access accesses[] = {{w->blocks[r->block], DL_SYNC_SIM_READ},
                                   {counter, DL_SYNC_SIM_READ | DL_SYNC_SIM_WRITE}};
  job *j = new_job(w, w->blocks[r->block], r->value, counter);
  /* under HIP's rules a read in four is slow, so that its release still waits when another
     thread begins a capture on its stream (OP_CONCURRENT) */
  if (j != NULL && w->p->hip_rules && (w->p->seed + (uint64_t)w->read_count) % 4 == 0)
    j->slow_ns = 400000;
  if (j == NULL || dl_sync_sim_launch(c.handle, "read", read_kernel, j, accesses, 2) != 0) {
    failed(w, FAILURE_SETUP, "the consumer's read could not be launched");
    return;
  }
  r->read = 1;
  r->read_on = c;
  r->read_capture = capturing;
}

static void consume(world *w, const op *o) {
  tensor_record *r = slot_tensor(w, o->slot);
  if (r == NULL || r->imported) return; /* an imported tensor is read where it came in */
  stream_id p = explicit_stream(w, r->framework, r->device, r->stream);
  stream_id c = consumer_stream(w, o, r->device);
  if (o->consumer_kind != BAD_ARGUMENT && c.kind < 0) return;
  if (r->read && (o->consumer_kind == BAD_ARGUMENT || !same_stream(c, r->read_on))) return;
  if (o->consumer_kind == NO_SYNC && any_capture_open(w)) return; /* a host sync: prohibited */
  int capturing = o->consumer_kind != BAD_ARGUMENT ? capture_on(w, c) : -1;
  /* a read captured into a graph is released in that capture or after its launches, never
     between: one read per tensor, on one stream, in one place */
  if (r->read && capturing != r->read_capture) return;
  dl_sync_sim_set_device(r->device);
  if (o->consumer_kind == NO_SYNC) atomic_fetch_add(&w->syncs, 1);
  if (o->consumer_kind == NO_SYNC && dl_sync_sim_stream_synchronize(p.handle) != 0) {
    failed(w, FAILURE_SETUP, "the consumer's synchronization of the producer's stream failed");
    return;
  }
  int mechanism = o->mechanism;
  /* the tensor's event where it has one; the producer's table where it names its stream */
  if ((mechanism == BY_TENSOR_EVENT || mechanism == BY_GROUP_TENSOR || mechanism == BY_HOST_WAIT) &&
      !r->has_event)
    mechanism = BY_EXPORT;
  if (mechanism == BY_GROUP_TABLE && w->p->tables[r->framework] != TABLE_CURRENT)
    mechanism = BY_GROUP;
  if (mechanism == BY_GROUP_TABLE) /* the producer works on the tensor's stream now */
    w->current[r->framework][r->device] = p.handle;
  /* ROCm's stream argument names no per-thread stream: such a read names the stream */
  if (mechanism == BY_EXPORT && w->p->rocm && o->consumer_kind == ON_PER_THREAD)
    mechanism = BY_PUSH_DEP;
  int want = predicted(
      w, o, p, c,
      mechanism == BY_TENSOR_EVENT || mechanism == BY_GROUP_TENSOR || mechanism == BY_HOST_WAIT);
  /* under HIP's rules a host wait on an event whose stream captures now would read that
     stream (and invalidate its capture): dlsync refuses it (dlsync/tensor.h) */
  if (mechanism == BY_HOST_WAIT && w->p->hip_rules && capture_on(w, p) >= 0)
    want = DL_SYNC_ECAPTURE;
  int no_sync_by_policy = none_is_no_sync(w, o, p, mechanism);
  if (no_sync_by_policy) want = DL_SYNC_OK;
  program_counts.none_no_sync += no_sync_by_policy;
  /* whether the export calls the runtime: not for -1, a refused argument or the producer's
     own stream; yes where it orders two streams, no capture in the way (dlsync/dep.h) */
  if (mechanism == BY_EXPORT && !any_capture_open(w)) {
    int calls = dl_sync_export_calls_runtime(view(w, r->device, p.handle), argument_for(w, o, c));
    int want_calls =
        o->consumer_kind != NO_SYNC && o->consumer_kind != BAD_ARGUMENT && !same_stream(p, c);
    if (calls != want_calls)
      failed(w, FAILURE_STATUS, "dl_sync_export_calls_runtime answered %d, expected %d", calls,
             want_calls);
  }
  int was = call(w, CALL_OTHER, NULL);
  static const char *const names[MECHANISMS] = {"dl_sync_export",
                                                "dl_sync_push_dep",
                                                "dl_sync_group_wait",
                                                "dl_sync_tensor_wait",
                                                "dl_sync_group_wait (event)",
                                                "dl_sync_tensor_synchronize",
                                                "dl_sync_group_wait (table)"};
  program_counts.mechanisms[mechanism]++;
  program_counts.consumer_kinds[o->consumer_kind]++;
  expect_status(w, names[mechanism], order(w, o, r, p, c, mechanism, want), want);
  call(w, was, NULL);
  if (want == DL_SYNC_OK && !no_sync_by_policy) launch_read(w, r, c, capturing);
}

/* Whether leaving out the ordering of p before c leaves them unordered: the legacy stream
   and a blocking stream are ordered by the runtime either way. */
static int unordered_without(const world *w, stream_id p, stream_id c) {
  if (same_stream(p, c)) return 0;
  if (c.kind == LEGACY && blocking(w, p)) return 0;
  return !(p.kind == LEGACY && blocking(w, c));
}

/* What the release must answer (dlsync/release.h, by this model): nothing read, now; read
   in a capture still open, kept by the graph; a producer that named its reuse stream,
   ordered unless that stream captures; any other, deferred. */
static int predicted_release(const world *w, const tensor_record *r, stream_id p) {
  if (!r->read) return DL_SYNC_RELEASED_NOW;
  if (capture_on(w, r->read_on) >= 0) return DL_SYNC_RELEASE_GRAPH;
  if (!w->p->participates[r->framework]) return DL_SYNC_RELEASE_DEFERRED;
  return same_stream(p, r->read_on) || capture_on(w, p) < 0 ? DL_SYNC_RELEASED_ORDERED
                                                            : DL_SYNC_RELEASE_DEFERRED;
}

static void release(world *w, const op *o) {
  tensor_record *r = slot_tensor(w, o->slot);
  if (r == NULL) return;
  stream_id p = explicit_stream(w, r->framework, r->device, r->stream);
  if (r->read && r->read_on.kind == PER_THREAD && r->read_on.thread != here.thread) return;
  int reader_capture = r->read ? capture_on(w, r->read_on) : -1;
  if (r->read && reader_capture != r->read_capture && reader_capture >= 0) return;
  int want = predicted_release(w, r, p);
  void *handle = r->read ? r->read_on.handle : DL_SYNC_STREAM_NOTHING_PENDING;
  dl_sync_sim_set_device(r->device);
  r->released = 1;
  w->slot_record[o->slot] = -1;
  if (w->v == DELETER_NOT_RELEASE && want != DL_SYNC_RELEASED_NOW) {
    /* counted if the pool hands it out again, unless the producer's stream is ordered
       after the read anyway (the read ran on it, say: N0) */
    w->freed_unordered[r->block] = !r->read || unordered_without(w, r->read_on, p);
    int was = call(w, CALL_DIRECT, r);
    tensor_delete(r);
    call(w, was, NULL);
    return;
  }
  int was = call(w, CALL_RELEASE, r);
  expect_status(w, "dl_sync_tensor_release", tensor_release(r, view(w, r->device, handle)), want);
  call(w, was, NULL);
  if (want == DL_SYNC_RELEASE_DEFERRED && r->read_on.kind == EXPLICIT)
    w->last_deferred = (int)(r - w->records);
}

/* The stream the producer's table names for r: where r is ready. */
static stream_id table_stream(const world *w, const tensor_record *r) {
  if (w->p->tables[r->framework] == TABLE_NULL)
    return (stream_id){LEGACY, r->device, -1, DL_SYNC_SIM_STREAM_LEGACY};
  return explicit_stream(w, r->framework, r->device, r->stream);
}

/* Whether r can be imported: the producer's, not read, and (for a producer on the legacy
   stream, whose conversion records on the stream it wrote on) that stream not capturing. */
static int importable(const world *w, const tensor_record *r) {
  /* a table hands out versioned tensors only */
  if (r == NULL || r->read || r->imported || r->is_legacy) return 0;
  return w->p->tables[r->framework] != TABLE_NULL ||
         capture_on(w, explicit_stream(w, r->framework, r->device, r->stream)) < 0;
}

static int table_fails(const world *w, const tensor_record *r) {
  return w->p->tables[r->framework] == TABLE_STREAM_FAILS ||
         w->p->tables[r->framework] == TABLE_CONVERSION_FAILS;
}

/* What the ordering of an import must answer: dl_sync_push_dep's capture table. */
static int predicted_order(const world *w, stream_id p, stream_id c) {
  return same_stream(p, c) || capture_on(w, p) < 0 ? DL_SYNC_OK : DL_SYNC_ECAPTURE;
}

/* After an import that took r: the consumer's; a refused tensor went back to its producer
   through the deleter, in the call (the conversion's failure took nothing). */
static void imported(world *w, tensor_record *r, int status, int slot) {
  if (status == DL_SYNC_OK) {
    r->imported = 1;
  } else if (w->p->tables[r->framework] != TABLE_CONVERSION_FAILS) {
    r->released = 1;
    w->slot_record[slot] = -1;
    program_counts.imports_refused++;
  }
}

static int slot_of(const world *w, const tensor_record *r) {
  for (int s = 0; s < MAX_SLOTS; s++)
    if (w->slot_record[s] == (int)(r - w->records)) return s;
  return -1;
}

/* A second tensor for a grouped import: the lowest slot's importable tensor of the device
   whose producer answers one stream for both (another framework, or the same stream). */
static tensor_record *second_import(world *w, const tensor_record *first) {
  for (int s = 0; s < MAX_SLOTS; s++) {
    tensor_record *r = slot_tensor(w, s);
    if (r == NULL || r == first || !importable(w, r) || r->device != first->device) continue;
    if (r->framework == first->framework && r->stream != first->stream) continue;
    return r;
  }
  return NULL;
}

/* N0: the consumer asks the producer's table for its stream and reads there, with no
   ordering and no import (the tensor stays the producer's, read on its stream). A producer
   on the legacy stream is left out: its tensor is ready there only after its conversion. */
static void read_on_table_stream(world *w, tensor_record *r) {
  int table = w->p->tables[r->framework];
  if (table == TABLE_NULL) return;
  stream_id p = explicit_stream(w, r->framework, r->device, r->stream);
  w->current[r->framework][r->device] = p.handle; /* the producer works on it now */
  dl_sync_sim_set_device(r->device);
  dl_sync_stream answered;
  int got = dl_sync_stream_from_exchange_api(&tables[r->framework],
                                             (DLDevice){w->device_type, r->device}, &answered);
  expect_status(w, "dl_sync_stream_from_exchange_api", got,
                table == TABLE_STREAM_FAILS ? DL_SYNC_EBACKEND : DL_SYNC_OK);
  program_counts.imports[IMPORT_N0]++;
  if (got != DL_SYNC_OK) return;
  if (answered.handle != p.handle)
    failed(w, FAILURE_STATUS, "dl_sync_stream_from_exchange_api named %p, the table %p",
           answered.handle, p.handle);
  launch_read(w, r, p, capture_on(w, p));
}

static void import_tensor(world *w, const op *o) {
  tensor_record *r = slot_tensor(w, o->slot);
  if (!importable(w, r)) return;
  if (o->mechanism == IMPORT_N0) {
    read_on_table_stream(w, r);
    return;
  }
  stream_id c = consumer_stream(w, o, r->device);
  if (c.kind < 0) return;
  int capturing = capture_on(w, c);
  tensor_record *imports[2] = {r, NULL};
  int count = 1;
  if (o->mechanism == IMPORT_GROUPED && o->mode && (imports[1] = second_import(w, r)) != NULL)
    count = 2;
  dl_sync_sim_set_device(r->device);
  dl_sync_stream consumer = view(w, r->device, c.handle);
  program_counts.imports[o->mechanism]++;
  program_counts.imports_two_tensors += count == 2;
  dl_sync_group group;
  if (o->mechanism == IMPORT_GROUPED)
    expect_status(w, "dl_sync_group_init", dl_sync_group_init(&group, consumer), DL_SYNC_OK);
  int all_taken = 1, want_wait = DL_SYNC_OK;
  for (int i = 0; i < count; i++) {
    tensor_record *t = imports[i];
    int slot = slot_of(w, t);
    stream_id p = table_stream(w, t);
    program_counts.import_tables[w->p->tables[t->framework]]++;
    int want = table_fails(w, t)                ? DL_SYNC_EBACKEND
               : o->mechanism == IMPORT_GROUPED ? DL_SYNC_OK
                                                : predicted_order(w, p, c);
    if (want == DL_SYNC_OK && predicted_order(w, p, c) != DL_SYNC_OK) want_wait = DL_SYNC_ECAPTURE;
    if (w->verbose)
      printf("    import of op %d's tensor (table %d) from stream %p (kind %d) to %p (kind %d)%s\n",
             (int)(t - w->records), w->p->tables[t->framework], p.handle, p.kind, c.handle, c.kind,
             capturing >= 0 ? ", captured" : "");
    DLManagedTensorVersioned *out = NULL;
    int was = call(w, CALL_IMPORT, t);
    int got;
    if (w->v == BARE_CONVERSION && want == DL_SYNC_OK && predicted_order(w, p, c) == DL_SYNC_OK) {
      /* counted where nothing else orders the read after the write: not a read on the
         stream written on (or one the runtime orders after it), nor a read captured into a
         graph (it runs at the launches, after later host synchronizations maybe), nor a
         write a host synchronization already waited for */
      stream_id written_on = explicit_stream(w, t->framework, t->device, t->stream);
      w->result.affected += unordered_without(w, p, c) && unordered_without(w, written_on, c) &&
                            capturing < 0 && atomic_load(&w->syncs) == t->syncs_at_write;
      got = tables[t->framework].managed_tensor_from_py_object_no_sync(t, &out);
    } else if (o->mechanism == IMPORT_GROUPED) {
      got = dl_sync_group_add_exchange_import(&group, &tables[t->framework], t, &out);
      expect_status(w, "dl_sync_group_add_exchange_import", got, want);
    } else {
      got = dl_sync_exchange_import(&tables[t->framework], t, consumer, &out);
      expect_status(w, "dl_sync_exchange_import", got, want);
    }
    call(w, was, NULL);
    if (got == DL_SYNC_OK && out != &t->managed)
      failed(w, FAILURE_STATUS, "an import answered another tensor than its producer's");
    imported(w, t, got, slot);
    all_taken &= got == DL_SYNC_OK;
  }
  if (!all_taken) return; /* what was taken stays the consumer's, unread */
  if (o->mechanism == IMPORT_GROUPED) {
    int was = call(w, CALL_OTHER, NULL);
    int got = w->v == BARE_CONVERSION && want_wait == DL_SYNC_OK ? DL_SYNC_OK
                                                                 : dl_sync_group_wait(&group);
    if (w->v != BARE_CONVERSION || want_wait != DL_SYNC_OK)
      expect_status(w, "dl_sync_group_wait (imports)", got, want_wait);
    call(w, was, NULL);
    if (got != DL_SYNC_OK) return;
  }
  for (int i = 0; i < count; i++) launch_read(w, imports[i], c, capturing);
}

static void capture_begin(world *w, const op *o) {
  capture *c = &w->captures[o->slot];
  if (c->open || c->graph != NULL) return;
  stream_id s = explicit_stream(w, o->framework, o->device, o->stream);
  /* only non-blocking streams capture here: a blocking one would make the program's own
     use of the legacy stream an error (906) */
  if (!w->p->non_blocking[o->framework][o->device][o->stream] || capture_on(w, s) >= 0) return;
  dl_sync_sim_set_device(o->device);
  w->acts++;
  int error = dl_sync_sim_stream_begin_capture(s.handle, o->mode % 3);
  if (error != 0) {
    failed(w, FAILURE_CAPTURE, "beginning a capture: %s", dl_sync_sim_error_name(error));
    return;
  }
  *c = (capture){.open = 1,
                 .thread = here.thread,
                 .mode = o->mode % 3,
                 .stream = s.handle,
                 .device = o->device};
  program_counts.captures++;
}

/* Ends capture c (on its own thread unless relaxed) and launches its graph twice there. */
static void capture_end(world *w, int index) {
  capture *c = &w->captures[index];
  if (!c->open || (c->mode != DL_SYNC_SIM_CAPTURE_RELAXED && c->thread != here.thread)) return;
  dl_sync_sim_set_device(c->device);
  c->open = 0;
  w->acts++;
  int error = dl_sync_sim_stream_end_capture(c->stream, &c->graph);
  if (error == 0) error = dl_sync_sim_graph_instantiate(&c->exec, c->graph);
  for (int i = 0; i < 2 && error == 0; i++) error = dl_sync_sim_graph_launch(c->exec, c->stream);
  program_counts.graphs_launched += error == 0;
  if (error != 0)
    failed(w, FAILURE_CAPTURE, "a capture of the program (mode %d) ended with %s", c->mode,
           dl_sync_sim_error_name(error));
}

/* Needs the launches done, which only a host synchronization (prohibited during captures
   of this or, in global mode, another thread) says. */
static void graph_destroy(world *w, int index, int force) {
  capture *c = &w->captures[index];
  if (c->open || c->graph == NULL || (!force && any_capture_open(w))) return;
  dl_sync_sim_set_device(c->device);
  w->acts++;
  int was = call(w, CALL_RUNTIME, NULL); /* no deleter runs on the runtime's side */
  atomic_fetch_add(&w->syncs, 1);
  int error = dl_sync_sim_stream_synchronize(c->stream);
  if (c->exec != NULL && error == 0) error = dl_sync_sim_graph_exec_destroy(c->exec);
  if (error == 0) error = dl_sync_sim_graph_destroy(c->graph);
  call(w, was, NULL);
  c->graph = NULL;
  c->exec = NULL;
  if (error != 0) failed(w, FAILURE_SETUP, "destroying a graph: %s", dl_sync_sim_error_name(error));
}

static void synchronize_devices(world *w) {
  w->acts++;
  for (int d = 0; d < w->p->devices; d++) {
    dl_sync_sim_set_device(d);
    atomic_fetch_add(&w->syncs, 1);
    int error = dl_sync_sim_device_synchronize();
    if (error != 0)
      failed(w, FAILURE_SETUP, "synchronizing device %d: %s", d, dl_sync_sim_error_name(error));
  }
}

/* ---- another thread, at a moment of its own, while this one polls --------------------- */

enum { CONCURRENT_CAPTURES = 8 }; /* captures begun and ended in a row by the other thread */

typedef struct disturbance {
  atomic_long *syncs; /* the world's count of host synchronizations */
  int what, device;
  dl_sync_sim_stream *stream;
  long delay_ns;
  atomic_int done;
  int error; /* the runtime's answer that went wrong, else 0 */
  const char *step;
} disturbance;

static void pause_ns(long ns) {
  struct timespec t = {0, ns};
  nanosleep(&t, NULL);
}

/* Begins a capture on the stream (thread-local mode: none of this thread's calls disturbs
   another's) and ends it a moment later; or waits for the stream's work and destroys it. */
static void *disturb(void *arg) {
  disturbance *d = arg;
  here.program_thread = 0;
  dl_sync_sim_set_device(d->device);
  pause_ns(d->delay_ns);
  if (d->what == CONCURRENT_CAPTURE) {
    /* several captures in a row, each a moment long: more moments for a poll to meet */
    for (int round = 0; round < CONCURRENT_CAPTURES && d->error == 0; round++) {
      dl_sync_sim_graph *graph = NULL;
      d->step = "beginning";
      d->error = dl_sync_sim_stream_begin_capture(d->stream, DL_SYNC_SIM_CAPTURE_THREAD_LOCAL);
      if (d->error == 0) {
        pause_ns(d->delay_ns / CONCURRENT_CAPTURES);
        d->step = "ending";
        d->error = dl_sync_sim_stream_end_capture(d->stream, &graph);
      }
      if (graph != NULL) dl_sync_sim_graph_destroy(graph);
    }
  } else {
    d->step = "synchronizing";
    atomic_fetch_add(d->syncs, 1);
    d->error = dl_sync_sim_stream_synchronize(d->stream);
    d->step = "destroying";
    if (d->error == 0) d->error = dl_sync_sim_stream_destroy(d->stream);
  }
  atomic_store(&d->done, 1);
  return NULL;
}

/* Whether the program still needs stream (f, d, s) as it is: work of a tensor not yet
   released produced or read there, or a capture or graph of its own there. */
static int stream_in_use(const world *w, void *handle) {
  for (int i = 0; i < w->record_count; i++) {
    const tensor_record *r = &w->records[i];
    if (r->released) continue;
    if (w->streams[r->framework][r->device][r->stream] == handle) return 1;
    if (r->read && r->read_on.kind == EXPLICIT && r->read_on.handle == handle) return 1;
  }
  for (int c = 0; c < MAX_CAPTURES; c++)
    if ((w->captures[c].open || w->captures[c].graph != NULL) && w->captures[c].stream == handle)
      return 1;
  return 0;
}

/* Another thread begins a capture on a framework's stream (where releases may wait), or
   destroys it (its work done; the framework then makes a new one), at a moment of its own,
   while this thread polls and the release thread may run. The capture must end well: no
   call of dlsync's may break a capture it was not given; the releases on a destroyed
   stream must still finish (the clean-up says what is pending at the end). */
static void concurrent(world *w, const op *o) {
  int f = o->framework, dev = o->device, i = o->stream;
  /* the stream of the latest release still deferred, where there is one: where it matters */
  const tensor_record *deferred = w->last_deferred >= 0 ? &w->records[w->last_deferred] : NULL;
  if (deferred != NULL && atomic_load(&deferred->deleted) == 0)
    for (int g = 0; g < w->p->frameworks; g++)
      for (int k = 0; k < STREAMS_PER_DEVICE; k++)
        if (w->streams[g][deferred->device][k] == deferred->read_on.handle) {
          f = g;
          dev = deferred->device;
          i = k;
        }
  void *handle = w->streams[f][dev][i];
  int what = o->mode & 1;
  stream_id s = explicit_stream(w, f, dev, i);
  if (capture_on(w, s) >= 0) return;
  /* its synchronization would break a capture of the program's (a prohibited call) */
  if (what == CONCURRENT_DESTROY && (any_capture_open(w) || stream_in_use(w, handle))) return;
  /* a blocking stream's capture would make the legacy stream's use by another an error */
  if (what == CONCURRENT_CAPTURE && !w->p->non_blocking[f][dev][i]) return;
  disturbance other = {
      .syncs = &w->syncs,
      .what = what,
      .device = dev,
      .stream = handle,
      .delay_ns = (long)((w->p->seed + (uint64_t)w->op_index * 7919u) % 200) * 1000};
  pthread_t thread;
  w->acts++;
  if (dl_sync_sim_thread_create(&thread, NULL, disturb, &other) != 0) {
    failed(w, FAILURE_SETUP, "could not start the disturbing thread");
    return;
  }
  int was = call(w, CALL_POLL, NULL);
  int polls_wanted = o->mode & CONCURRENT_QUIET ? 0 : 1000;
  for (int polls = 0; polls < polls_wanted && !atomic_load(&other.done); polls++) {
    dl_sync_release_poll();
    program_counts.concurrent_polls++;
  }
  call(w, was, NULL);
  dl_sync_sim_thread_join(thread, NULL);
  program_counts.concurrent[what]++;
  program_counts.concurrent_on_deferred[what] +=
      deferred != NULL && deferred->read_on.handle == handle && w->p->hip_rules;
  if (w->verbose)
    printf("    another thread %s stream %p (%s)\n",
           what == CONCURRENT_CAPTURE ? "began and ended a capture on" : "destroyed", handle,
           deferred != NULL && deferred->read_on.handle == handle
               ? (atomic_load(&deferred->deleted) ? "its deferred release has finished now"
                                                  : "its deferred release still waits")
               : "no release deferred there");
  if (other.error != 0) {
    failed(w, FAILURE_CAPTURE, "%s the stream %p on another thread while this one polled: %s",
           other.step, handle, dl_sync_sim_error_name(other.error));
    return;
  }
  if (what == CONCURRENT_DESTROY) {
    dl_sync_sim_set_device(dev);
    dl_sync_sim_stream *fresh = NULL;
    if (dl_sync_sim_stream_create(&fresh, w->p->non_blocking[f][dev][i]) != 0) {
      failed(w, FAILURE_SETUP, "could not create a stream again");
      return;
    }
    w->streams[f][dev][i] = fresh;
  }
}

/* A child runs none of the parent's releases (their events are the parent's). */
#if defined(_WIN32) || defined(SANITIZED)
static void fork_check(world *w) {
  (void)w;
#else
static long total_deletions(const world *w) {
  long n = 0;
  for (int i = 0; i < w->record_count; i++) n += atomic_load(&w->records[i].deleted);
  return n;
}

/* The count is taken in the child, at the fork: the parent's release thread may run a
   deleter up to the fork itself, and a count read before it would be stale. */
static void fork_check(world *w) {
  program_counts.forks++;
  w->acts++;
  pid_t child = fork();
  if (child == 0) {
    long at_fork = total_deletions(w);
    here.call = CALL_POLL;
    int clean = dl_sync_release_pending() == 0 && dl_sync_release_poll() == 0 &&
                total_deletions(w) == at_fork;
    _exit(clean ? 0 : 1);
  }
  int status = 0;
  if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0)
    failed(w, FAILURE_FORK, "a forked child ran a release of its parent's, or failed");
#endif
}

static void shutdown_dlsync(world *w) {
  int was = call(w, CALL_SHUTDOWN, NULL);
  int status = dl_sync_shutdown();
  call(w, was, NULL);
  w->result.calls++;
  /* under HIP's rules a release whose stream captures now is left, and said so */
  int left = status == DL_SYNC_EBACKEND && w->p->hip_rules &&
             strstr(dl_sync_last_error(), "still wait") != NULL;
  if (status != DL_SYNC_OK && !left)
    failed(w, FAILURE_STATUS, "dl_sync_shutdown answered %d (%s)", status, dl_sync_last_error());
}

static void run_op_kind(world *w, const op *o) {
  switch (o->kind) {
    case OP_PRODUCE:
      produce(w, o);
      break;
    case OP_CONSUME:
      consume(w, o);
      break;
    case OP_RELEASE:
      release(w, o);
      break;
    case OP_CAPTURE_BEGIN:
      capture_begin(w, o);
      break;
    case OP_CAPTURE_END:
      capture_end(w, o->slot);
      break;
    case OP_GRAPH_DESTROY:
      graph_destroy(w, o->slot, 0);
      break;
    case OP_POLL: {
      w->acts++;
      int was = call(w, CALL_POLL, NULL);
      dl_sync_release_poll();
      call(w, was, NULL);
      break;
    }
    case OP_HOST_SYNC:
      if (!any_capture_open(w)) {
        synchronize_devices(w);
        /* every read done and the host after it: a block the control gave back early is
           safe to hand out now */
        pthread_mutex_lock(&w->pool_lock);
        memset(w->freed_unordered, 0, sizeof w->freed_unordered);
        pthread_mutex_unlock(&w->pool_lock);
      }
      program_counts.host_syncs++;
      break;
    case OP_SHUTDOWN:
      w->acts++;
      program_counts.shutdowns++;
      shutdown_dlsync(w);
      break;
    case OP_RELEASE_THREAD:
      if (o->mode)
        expect_status(w, "dl_sync_release_thread_start", dl_sync_release_thread_start(), 0);
      else
        expect_status(w, "dl_sync_release_thread_stop", dl_sync_release_thread_stop(), 0);
      break;
    case OP_FORK:
      fork_check(w);
      break;
    case OP_IMPORT:
      import_tensor(w, o);
      break;
    case OP_CONCURRENT:
      concurrent(w, o);
      break;
    default:
      break;
  }
}

static void run_op(world *w, const op *o) {
  long acts = w->acts;
  run_op_kind(w, o);
  if (o->kind < OP_KINDS) {
    program_counts.ops_given[o->kind]++;
    program_counts.ops_made[o->kind] += w->acts != acts;
  }
}

/* ---- threads ----------------------------------------------------------------------------- */

enum { STOP = -2, IDLE = -1, END_CAPTURE = -10 }; /* assigned: an op, or END_CAPTURE - c */

typedef struct worker_arg {
  world *w;
  int index;
} worker_arg;

static void *worker(void *arg) {
  worker_arg *a = arg;
  world *w = a->w;
  here.program_thread = 1;
  here.thread = a->index;
  here.call = CALL_NONE;
  pthread_mutex_lock(&w->lock);
  for (;;) {
    while (w->assigned[a->index] == IDLE) pthread_cond_wait(&w->changed, &w->lock);
    int task = w->assigned[a->index];
    if (task == STOP) break;
    pthread_mutex_unlock(&w->lock);
    dl_sync_sim_host_acquire(&w->handoff); /* the program's order, told to the race checker */
    if (task >= 0)
      run_op(w, &w->p->ops[task]);
    else
      capture_end(w, END_CAPTURE - task);
    dl_sync_sim_host_release(&w->handoff);
    pthread_mutex_lock(&w->lock);
    w->assigned[a->index] = IDLE;
    pthread_cond_broadcast(&w->changed);
  }
  pthread_mutex_unlock(&w->lock);
  return NULL;
}

static void on_thread(world *w, int thread, int task) {
  dl_sync_sim_host_release(&w->handoff);
  pthread_mutex_lock(&w->lock);
  w->assigned[thread] = task;
  pthread_cond_broadcast(&w->changed);
  while (w->assigned[thread] != IDLE) pthread_cond_wait(&w->changed, &w->lock);
  pthread_mutex_unlock(&w->lock);
  dl_sync_sim_host_acquire(&w->handoff);
}

/* A program that runs past its time is a hang: say which and stop. */
typedef struct watchdog {
  pthread_mutex_t lock;
  pthread_cond_t done_changed;
  int done;
  uint64_t seed;
  const int *op_index;
} watchdog;

static void *watch(void *arg) {
  watchdog *d = arg;
#ifdef SANITIZED
  int limit = 300;
#else
  int limit = 60;
#endif
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += limit;
  pthread_mutex_lock(&d->lock);
  while (!d->done)
    if (pthread_cond_timedwait(&d->done_changed, &d->lock, &until) != 0 && !d->done) {
      fprintf(stderr, "program of seed %llu hangs (past %d s, at op %d)\n",
              (unsigned long long)d->seed, limit, *d->op_index);
      abort();
    }
  pthread_mutex_unlock(&d->lock);
  return NULL;
}

/* ---- a run ---------------------------------------------------------------------------- */

static void cleanup(world *w) {
  w->op_index = w->p->op_count;
  for (int c = 0; c < MAX_CAPTURES; c++)
    if (w->captures[c].open) on_thread(w, w->captures[c].thread, END_CAPTURE - c);
  synchronize_devices(w);
  for (int c = 0; c < MAX_CAPTURES; c++) graph_destroy(w, c, 1);
  for (int i = 0; i < w->record_count; i++) { /* all work done: nothing of it pending */
    tensor_record *r = &w->records[i];
    if (r->released) continue;
    r->released = 1;
    int was = call(w, CALL_RELEASE, r);
    expect_status(w, "dl_sync_tensor_release (clean-up)",
                  tensor_release(r, view(w, r->device, DL_SYNC_STREAM_NOTHING_PENDING)),
                  DL_SYNC_RELEASED_NOW);
    call(w, was, NULL);
  }
  dl_sync_release_thread_stop(); /* a poll of its own, under way, finishes first */
  int was = call(w, CALL_POLL, NULL);
  for (int round = 0; round < 100 && dl_sync_release_pending() != 0; round++) {
    synchronize_devices(w);
    dl_sync_release_poll();
  }
  call(w, was, NULL);
  if (dl_sync_release_pending() != 0)
    failed(w, FAILURE_PENDING, "%d releases still pending with every graph and all work gone",
           dl_sync_release_pending());
  shutdown_dlsync(w);
}

static void judge(world *w) {
  synchronize_devices(w);
  int64_t wrong = 0;
  for (int i = 0; i < w->read_count; i++) {
    dl_sync_sim_host_access("judge", &w->mismatches[i], DL_SYNC_SIM_READ);
    wrong += __atomic_load_n(&w->mismatches[i], __ATOMIC_RELAXED);
  }
  w->result.mismatches = wrong;
  w->result.races = dl_sync_sim_race_count();
  if (w->result.races != 0) {
    char report[300];
    dl_sync_sim_race_report(report, sizeof report);
    failed(w, FAILURE_RACE, "%llu races; first: %s", (unsigned long long)w->result.races, report);
  }
  if (wrong != 0) failed(w, FAILURE_VALUE, "%lld wrong values read", (long long)wrong);
  for (int i = 0; i < w->record_count; i++)
    if (atomic_load(&w->records[i].deleted) != 1)
      failed(w, FAILURE_DELETER, "a deleter ran %d times", atomic_load(&w->records[i].deleted));
  if (atomic_load(&w->violations) != 0) failed(w, FAILURE_DELETER, "%s", w->violation);
  if (dl_sync_sim_destroyed_stream_reads() != 0)
    failed(w, FAILURE_CAPTURE, "%llu queries read a destroyed stream (HIP rules)",
           (unsigned long long)dl_sync_sim_destroyed_stream_reads());
}

static void world_start(world *w, const program *p, variant v, int verbose) {
  w->p = p;
  w->v = v;
  w->verbose = verbose;
  w->device_type = p->rocm ? kDLROCM : kDLCUDA;
  pthread_mutex_init(&w->pool_lock, NULL);
  pthread_mutex_init(&w->violation_lock, NULL);
  pthread_mutex_init(&w->lock, NULL);
  pthread_cond_init(&w->changed, NULL);
  for (int s = 0; s < MAX_SLOTS; s++) w->slot_record[s] = -1;
  w->last_deferred = -1;
  table_world = w;
  dl_sync_sim_reset();
  dl_sync_set_backend(kDLCUDA, dl_sync_sim_backend());
  dl_sync_set_backend(kDLROCM, dl_sync_sim_backend());
  dl_sync_sim_set_query_rules(p->hip_rules ? DL_SYNC_SIM_QUERY_RULES_HIP
                                           : DL_SYNC_SIM_QUERY_RULES_CUDA);
  if (dl_sync_set_capture_policy(p->none_is_no_sync ? DL_SYNC_CAPTURE_NONE_IS_NO_SYNC
                                                    : DL_SYNC_CAPTURE_STRICT) != DL_SYNC_OK)
    failed(w, FAILURE_SETUP, "could not set the capture policy");
  dl_sync_sim_set_jitter(p->seed, 20);
  for (int f = 0; f < p->frameworks; f++)
    for (int d = 0; d < p->devices; d++)
      for (int s = 0; s < STREAMS_PER_DEVICE; s++) {
        dl_sync_sim_set_device(d);
        if (dl_sync_sim_stream_create(&w->streams[f][d][s], p->non_blocking[f][d][s]) != 0)
          failed(w, FAILURE_SETUP, "could not create the streams");
      }
  here.program_thread = 1;
  here.thread = -1;
  here.call = CALL_NONE;
}

verdict program_run(const program *p, variant v, int verbose) {
  world *w = calloc(1, sizeof *w);
  if (w == NULL) return (verdict){.failed = 1, .class_ = FAILURE_SETUP, .why = "no memory"};
  world_start(w, p, v, verbose);
  watchdog dog = {.seed = p->seed, .op_index = &w->op_index};
  pthread_mutex_init(&dog.lock, NULL);
  pthread_cond_init(&dog.done_changed, NULL);
  pthread_t dog_thread;
  pthread_create(&dog_thread, NULL, watch, &dog);
  int threads = p->threads > 0 ? p->threads : 1;
  worker_arg args[MAX_THREADS];
  for (int t = 0; t < threads; t++) {
    w->assigned[t] = IDLE;
    args[t] = (worker_arg){w, t};
    pthread_create(&w->threads[t], NULL, worker, &args[t]);
  }
  for (int i = 0; i < p->op_count && !w->result.failed; i++) {
    w->op_index = i;
    if (verbose)
      printf("  op %d: %s on thread %d\n", i, op_kind_name(p->ops[i].kind),
             p->ops[i].thread % threads);
    on_thread(w, p->ops[i].thread % threads, i);
  }
  cleanup(w);
  for (int t = 0; t < threads; t++) {
    pthread_mutex_lock(&w->lock);
    w->assigned[t] = STOP;
    pthread_cond_broadcast(&w->changed);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->threads[t], NULL);
  }
  judge(w);
  pthread_mutex_lock(&dog.lock);
  dog.done = 1;
  pthread_cond_signal(&dog.done_changed);
  pthread_mutex_unlock(&dog.lock);
  pthread_join(dog_thread, NULL);
  verdict result = w->result;
  dl_sync_sim_reset();
  dl_sync_shutdown();
  dl_sync_set_capture_policy(DL_SYNC_CAPTURE_STRICT); /* the process's default again */
  free(w);
  return result;
}
