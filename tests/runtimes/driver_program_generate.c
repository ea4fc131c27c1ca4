/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The generator of driver programs (driver_program.h): seeded (splitmix64). It keeps a light
 * model of the tensors so that most operations mean something, and names each stream so
 * that a tensor's producer and consumer stay the streams they were: a later call that names
 * a default stream is made with a caller for which the handle names the same context (and
 * from the same thread, for a per-thread stream). The runner checks every precondition again
 * and skips an operation that does not hold.
 */
#include <string.h>

#include "driver_program.h"
#include "../support/random.h"

enum { EMPTY, LIVE, READ };

typedef struct model {
  int green;
  int state[DP_TENSORS];
  int producer[DP_TENSORS], producer_context[DP_TENSORS], producer_thread[DP_TENSORS];
  int consumer[DP_TENSORS], consumer_context[DP_TENSORS], consumer_thread[DP_TENSORS];
} model;

static int contexts_of(const model *m) {
  return m->green ? DP_CONTEXTS : G0;
}

static int pick_named(rng *r, const model *m, int device) {
  for (;;) {
    int named = below(r, DP_NAMED);
    if (dp_named_kind(named) == S_EXPLICIT && named / DP_STREAMS_PER_CONTEXT >= contexts_of(m))
      continue;
    if (device < 0 || dp_named_device(named) == device) return named;
  }
}

static int pick_caller(rng *r, const model *m) {
  int caller = below(r, contexts_of(m) + 1) - 1;
  return caller;
}

/* A caller for which named names the stream of context (itself, failing ten tries). A green
   context's stream is mostly named with the green context current: from elsewhere, dlsync
   may refuse to fill its pool. */
static int caller_naming(rng *r, const model *m, int named, int context) {
  if (dp_is_green(context) && chance(r, 60)) return context;
  for (int tries = 0; tries < 10; tries++) {
    int caller = pick_caller(r, m);
    if (dp_resolve(named, caller) == context) return caller;
  }
  return context;
}

static int pick_slot(rng *r, const model *m, int state) {
  int candidates[DP_TENSORS], n = 0;
  for (int i = 0; i < DP_TENSORS; i++)
    if (m->state[i] == state) candidates[n++] = i;
  return n ? candidates[below(r, n)] : -1;
}

/* An explicit non-blocking stream that is neither a nor b, for another thread's capture. */
static int8_t bystander(rng *r, const model *m, int a, int b) {
  if (!chance(r, 15)) return -1;
  int named = below(r, contexts_of(m)) * DP_STREAMS_PER_CONTEXT;
  return (int8_t)(named == a || named == b ? -1 : named);
}

static int add_produce(rng *r, model *m, dp_op *o) {
  int slot = pick_slot(r, m, EMPTY);
  if (slot < 0) return 0;
  int named, caller;
  do {
    named = pick_named(r, m, -1);
    caller = pick_caller(r, m);
    if (dp_named_kind(named) == S_EXPLICIT && chance(r, 50))
      caller = caller_naming(r, m, named, dp_resolve(named, caller));
  } while (dp_no_stream(named, caller));
  o->kind = DP_PRODUCE;
  o->tensor = (uint8_t)slot;
  o->stream = (uint8_t)named;
  o->caller = (int8_t)caller;
  int how = below(r, 100);
  o->mechanism = (uint8_t)(how < 35 ? 0 : how < 70 ? 1 : 2);
  o->bystander = bystander(r, m, named, -1);
  m->state[slot] = LIVE;
  m->producer[slot] = named;
  m->producer_context[slot] = dp_resolve(named, caller);
  m->producer_thread[slot] = o->thread;
  return 1;
}

static int add_consume(rng *r, model *m, dp_op *o) {
  int slot = pick_slot(r, m, LIVE);
  if (slot < 0) return 0;
  int producer = m->producer[slot], device = dp_named_device(producer);
  o->kind = DP_CONSUME;
  o->tensor = (uint8_t)slot;
  /* export, push_dep, group, tensor wait, group of the tensor, host wait */
  o->mechanism = (uint8_t)weighted(r, (const int[M_KINDS]){35, 52, 64, 80, 90, 100}, M_KINDS);
  if (dp_named_kind(producer) == S_PER_THREAD) o->thread = (uint8_t)m->producer_thread[slot];
  o->caller = (int8_t)caller_naming(r, m, producer, m->producer_context[slot]);
  int consumer;
  if (o->mechanism == M_EXPORT) {
    /* None, 1, 2, a handle, 0, -1 */
    o->arg = (uint8_t)weighted(r, (const int[ARG_KINDS]){25, 40, 55, 90, 94, 100}, ARG_KINDS);
    int base = DP_CONTEXTS * DP_STREAMS_PER_CONTEXT + 3 * device;
    consumer = o->arg == ARG_PER_THREAD ? base + 2 : base + 1;
    if (o->arg == ARG_HANDLE) {
      do consumer = pick_named(r, m, device);
      while (dp_named_kind(consumer) != S_EXPLICIT);
    }
  } else {
    consumer = pick_named(r, m, device);
  }
  /* A green context's per-thread stream is a bad-input row now and then, else none. */
  if (dp_no_stream(consumer, o->caller) && (o->mechanism == M_HOST_WAIT || !chance(r, 30)))
    return 0;
  o->stream = (uint8_t)consumer;
  o->capture = -1;
  if (dp_named_kind(consumer) != S_LEGACY && o->mechanism != M_HOST_WAIT &&
      !dp_no_stream(consumer, o->caller) && chance(r, 15))
    o->capture = (int8_t)below(r, 3);
  o->bystander = bystander(r, m, producer, consumer);
  int reads = o->capture < 0 && !dp_no_stream(consumer, o->caller) &&
              !(o->mechanism == M_EXPORT && (o->arg == ARG_ZERO || o->arg == ARG_NO_SYNC));
  if (reads) {
    m->state[slot] = READ;
    m->consumer[slot] = consumer;
    m->consumer_context[slot] = dp_resolve(consumer, o->caller);
    m->consumer_thread[slot] = o->thread;
  }
  return 1;
}

static int add_release(rng *r, model *m, dp_op *o) {
  int slot = pick_slot(r, m, READ);
  if (slot < 0) slot = pick_slot(r, m, LIVE);
  if (slot < 0) return 0;
  int read = m->state[slot] == READ;
  int named = read ? m->consumer[slot] : m->producer[slot];
  int context = read ? m->consumer_context[slot] : m->producer_context[slot];
  int thread = read ? m->consumer_thread[slot] : m->producer_thread[slot];
  o->kind = DP_RELEASE;
  o->tensor = (uint8_t)slot;
  o->stream = (uint8_t)named;
  if (dp_named_kind(named) == S_PER_THREAD) o->thread = (uint8_t)thread;
  o->caller = (int8_t)caller_naming(r, m, named, context);
  o->bystander = bystander(r, m, named, m->producer[slot]);
  m->state[slot] = EMPTY;
  return 1;
}

static void add_op(rng *r, model *m, dp_program *p) {
  dp_op o;
  memset(&o, 0, sizeof o);
  o.thread = (uint8_t)below(r, DP_WORKERS);
  o.capture = o.bystander = -1;
  int roll = below(r, 1000);
  int made = roll < 250   ? add_produce(r, m, &o)
             : roll < 500 ? add_consume(r, m, &o)
             : roll < 680 ? add_release(r, m, &o)
                          : 0;
  if (!made) {
    o.kind = roll < 850 ? DP_COMPLETE : roll < 985 ? DP_POLL : DP_SHUTDOWN;
    o.arg = (uint8_t)below(r, 256);
    o.caller = (int8_t)pick_caller(r, m);
    if (o.kind == DP_POLL) o.bystander = bystander(r, m, -1, -1);
  }
  p->ops[p->op_count++] = o;
}

void dp_generate(dp_program *p, uint64_t seed, int green) {
  rng r = {seed * UINT64_C(0x2545f4914f6cdd1d) + 7};
  memset(p, 0, sizeof *p);
  p->seed = seed;
  p->green = green;
  p->cold = chance(&r, 50);
  model m;
  memset(&m, 0, sizeof m);
  m.green = green;
  int length = 16 + below(&r, DP_MAX_OPS - 16);
  while (p->op_count < length) add_op(&r, &m, p);
}

void dp_print(const dp_program *p, FILE *out) {
  static const char *const kinds[DP_KINDS] = {"produce",  "consume", "release",
                                              "complete", "poll",    "shutdown"};
  static const char *const contexts[DP_CONTEXTS] = {"P0", "X0", "P1", "X1", "G0", "H0"};
  fprintf(out, "program of seed %llu (%s pools):\n", (unsigned long long)p->seed,
          p->cold ? "cold" : "warm");
  for (int i = 0; i < p->op_count; i++) {
    const dp_op *o = &p->ops[i];
    fprintf(out,
            "  %2d %-8s thread %d caller %s tensor %d stream %d mechanism %d arg %d capture %d "
            "bystander %d\n",
            i, kinds[o->kind], o->thread, o->caller < 0 ? "none" : contexts[o->caller], o->tensor,
            o->stream, o->mechanism, o->arg, o->capture, o->bystander);
  }
}
