/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The program generator: seeded and reproducible (splitmix64). It keeps a light model of
 * what is alive (tensors, captures) so that most operations are meaningful; the runner
 * checks every precondition again from its own state and skips an operation that does not
 * hold (after shrinking removed what it needed, say), so any program is valid.
 */
#include <string.h>

#include "scenario.h"
#include "../support/random.h"

/* What the generator believes of a slot. */
enum { EMPTY, LIVE, READ };

typedef struct model {
  int slot_state[MAX_SLOTS];
  int slot_framework[MAX_SLOTS], slot_device[MAX_SLOTS], slot_stream[MAX_SLOTS];
  int slot_reader_thread[MAX_SLOTS]; /* the thread of a per-thread read, else -1 */
  int capture_open[MAX_CAPTURES], capture_graph[MAX_CAPTURES];
  int capture_thread[MAX_CAPTURES], capture_framework[MAX_CAPTURES];
  int capture_device[MAX_CAPTURES], capture_stream[MAX_CAPTURES], capture_mode[MAX_CAPTURES];
} model;

static int pick_slot(rng *r, const model *m, int state) {
  int candidates[MAX_SLOTS], n = 0;
  for (int i = 0; i < MAX_SLOTS; i++)
    if (m->slot_state[i] == state) candidates[n++] = i;
  return n ? candidates[below(r, n)] : -1;
}

static int open_captures(const model *m) {
  int n = 0;
  for (int c = 0; c < MAX_CAPTURES; c++) n += m->capture_open[c];
  return n;
}

static int add_produce(rng *r, const program *p, model *m, op *o) {
  int slot = pick_slot(r, m, EMPTY);
  if (slot < 0) return 0;
  o->kind = OP_PRODUCE;
  o->framework = (uint8_t)below(r, p->frameworks);
  o->device = (uint8_t)below(r, p->devices);
  o->stream = (uint8_t)below(r, STREAMS_PER_DEVICE);
  o->slot = (uint8_t)slot;
  m->slot_state[slot] = LIVE;
  m->slot_framework[slot] = o->framework;
  m->slot_device[slot] = o->device;
  m->slot_stream[slot] = o->stream;
  m->slot_reader_thread[slot] = -1;
  return 1;
}

static int add_consume(rng *r, const program *p, model *m, op *o) {
  int slot = pick_slot(r, m, LIVE);
  if (slot < 0) return 0;
  o->kind = OP_CONSUME;
  o->slot = (uint8_t)slot;
  o->device = (uint8_t)m->slot_device[slot];
  o->framework = (uint8_t)below(r, p->frameworks); /* the consumer; itself now and then */
  o->stream = (uint8_t)below(r, STREAMS_PER_DEVICE);
  int kind = below(r, 100);
  o->consumer_kind = kind < 58   ? ON_EXPLICIT
                     : kind < 72 ? ON_LEGACY
                     : kind < 84 ? ON_PER_THREAD
                     : kind < 94 ? NO_SYNC
                                 : BAD_ARGUMENT;
  int how = below(r, 100);
  o->mechanism = how < 40   ? BY_EXPORT
                 : how < 55 ? BY_PUSH_DEP
                 : how < 65 ? BY_GROUP
                 : how < 78 ? BY_TENSOR_EVENT
                 : how < 85 ? BY_GROUP_TENSOR
                 : how < 92 ? BY_HOST_WAIT
                            : BY_GROUP_TABLE;
  if (o->consumer_kind == NO_SYNC || o->consumer_kind == BAD_ARGUMENT) o->mechanism = BY_EXPORT;
  /* ROCm's stream argument has no per-thread stream: its per-thread reads name the stream */
  if (p->rocm && o->consumer_kind == ON_PER_THREAD && o->mechanism == BY_EXPORT)
    o->mechanism = BY_PUSH_DEP;
  o->name_legacy_by_none = (uint8_t)chance(r, 50);
  m->slot_state[slot] = READ;
  m->slot_reader_thread[slot] = o->consumer_kind == ON_PER_THREAD ? o->thread : -1;
  return 1;
}

/* An import through the producer's table (N1): single, or in a group with a second tensor
   the runner picks from what is alive. The consumer names its stream as a view. */
static int add_import(rng *r, const program *p, model *m, op *o) {
  int slot = pick_slot(r, m, LIVE);
  if (slot < 0) return 0;
  o->kind = OP_IMPORT;
  o->slot = (uint8_t)slot;
  o->device = (uint8_t)m->slot_device[slot];
  o->framework = (uint8_t)below(r, p->frameworks);
  o->stream = (uint8_t)below(r, STREAMS_PER_DEVICE);
  int kind = below(r, 100);
  o->consumer_kind = kind < 70 ? ON_EXPLICIT : kind < 85 ? ON_LEGACY : ON_PER_THREAD;
  int how = below(r, 100);
  o->mechanism = (uint8_t)(how < 40 ? IMPORT_SINGLE : how < 80 ? IMPORT_GROUPED : IMPORT_N0);
  o->mode = (uint8_t)(o->mechanism == IMPORT_GROUPED && chance(r, 50));
  m->slot_state[slot] = READ;
  m->slot_reader_thread[slot] = o->consumer_kind == ON_PER_THREAD ? o->thread : -1;
  return 1;
}

static int add_release(rng *r, model *m, op *o) {
  int slot = pick_slot(r, m, READ);
  if (slot < 0) slot = pick_slot(r, m, LIVE); /* never read: nothing pending */
  if (slot < 0) return 0;
  o->kind = OP_RELEASE;
  o->slot = (uint8_t)slot;
  if (m->slot_reader_thread[slot] >= 0) o->thread = (uint8_t)m->slot_reader_thread[slot];
  m->slot_state[slot] = EMPTY;
  return 1;
}

static int add_capture(rng *r, const program *p, model *m, op *o) {
  for (int c = 0; c < MAX_CAPTURES; c++) {
    if (m->capture_open[c] && chance(r, 60)) { /* end it, on its thread */
      o->kind = OP_CAPTURE_END;
      o->slot = (uint8_t)c;
      if (m->capture_mode[c] != 2) o->thread = (uint8_t)m->capture_thread[c];
      m->capture_open[c] = 0;
      m->capture_graph[c] = 1;
      return 1;
    }
    if (!m->capture_open[c] && m->capture_graph[c] && chance(r, 40)) {
      o->kind = OP_GRAPH_DESTROY;
      o->slot = (uint8_t)c;
      m->capture_graph[c] = 0;
      return 1;
    }
  }
  int c = 0;
  while (c < MAX_CAPTURES && (m->capture_open[c] || m->capture_graph[c])) c++;
  if (c == MAX_CAPTURES) return 0;
  o->kind = OP_CAPTURE_BEGIN;
  o->slot = (uint8_t)c;
  o->framework = (uint8_t)below(r, p->frameworks);
  o->device = (uint8_t)below(r, p->devices);
  o->stream = (uint8_t)below(r, STREAMS_PER_DEVICE);
  o->mode = (uint8_t)below(r, 3);
  m->capture_open[c] = 1;
  m->capture_thread[c] = o->thread;
  m->capture_framework[c] = o->framework;
  m->capture_device[c] = o->device;
  m->capture_stream[c] = o->stream;
  m->capture_mode[c] = o->mode;
  return 1;
}

static void add_op(rng *r, program *p, model *m, int forks) {
  op o;
  memset(&o, 0, sizeof o);
  o.thread = (uint8_t)below(r, p->threads);
  int roll = below(r, 1000);
  int made = roll < 260   ? add_produce(r, p, m, &o)
             : roll < 450 ? add_consume(r, p, m, &o)
             : roll < 520 ? add_import(r, p, m, &o)
             : roll < 720 ? add_release(r, m, &o)
             : roll < 830 ? add_capture(r, p, m, &o)
                          : 0;
  if (!made) {
    o.kind = roll < 870   ? OP_POLL
             : roll < 900 ? OP_CONCURRENT
             : roll < 930 ? OP_HOST_SYNC
             : roll < 950 ? OP_SHUTDOWN
             : roll < 980 ? OP_RELEASE_THREAD
             : forks      ? OP_FORK
                          : OP_POLL;
    o.mode = (uint8_t)chance(r, 60);
    if (o.kind == OP_HOST_SYNC && open_captures(m)) o.kind = OP_POLL;
    if (o.kind == OP_CONCURRENT) { /* a stream of a framework's, at random */
      o.mode = (uint8_t)below(r, CONCURRENT_KINDS);
      o.mode |= (uint8_t)(chance(r, 25) ? CONCURRENT_QUIET : 0);
      o.framework = (uint8_t)below(r, p->frameworks);
      o.device = (uint8_t)below(r, p->devices);
      o.stream = (uint8_t)below(r, STREAMS_PER_DEVICE);
    }
  }
  p->ops[p->op_count++] = o;
}

void program_generate(program *p, uint64_t seed) {
  rng r = {seed * UINT64_C(0x2545f4914f6cdd1d) + 1};
  memset(p, 0, sizeof *p);
  p->seed = seed;
  p->frameworks = (uint8_t)(2 + below(&r, 3));
  p->threads = (uint8_t)(1 + below(&r, MAX_THREADS));
  p->devices = (uint8_t)(1 + below(&r, MAX_DEVICES));
  p->rocm = (uint8_t)chance(&r, 25);
  p->hip_rules = (uint8_t)(p->rocm && chance(&r, 70));
  p->none_is_no_sync = (uint8_t)chance(&r, 30);
  for (int f = 0; f < p->frameworks; f++) {
    p->participates[f] = (uint8_t)chance(&r, 50);
    p->records_events[f] = (uint8_t)chance(&r, 60);
    p->legacy_tensors[f] = (uint8_t)chance(&r, 20);
    int table = below(&r, 100);
    p->tables[f] = (uint8_t)(table < 65   ? TABLE_CURRENT
                             : table < 85 ? TABLE_NULL
                             : table < 93 ? TABLE_STREAM_FAILS
                                          : TABLE_CONVERSION_FAILS);
    for (int d = 0; d < MAX_DEVICES; d++)
      for (int s = 0; s < STREAMS_PER_DEVICE; s++)
        p->non_blocking[f][d][s] = (uint8_t)chance(&r, 70);
  }
  int forks = chance(&r, 5);
  int length = 20 + below(&r, MAX_OPS - 40);
  model m;
  memset(&m, 0, sizeof m);
  while (p->op_count < length) add_op(&r, p, &m, forks);
}

const char *op_kind_name(int kind) {
  static const char *const names[OP_KINDS] = {
      "OP_PRODUCE",       "OP_CONSUME", "OP_RELEASE",   "OP_CAPTURE_BEGIN", "OP_CAPTURE_END",
      "OP_GRAPH_DESTROY", "OP_POLL",    "OP_HOST_SYNC", "OP_SHUTDOWN",      "OP_RELEASE_THREAD",
      "OP_FORK",          "OP_IMPORT",  "OP_CONCURRENT"};
  return kind >= 0 && kind < OP_KINDS ? names[kind] : "?";
}
