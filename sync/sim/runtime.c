/* SPDX-License-Identifier: Apache-2.0 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
/* The simulator's global state: the current device, agent numbers, jitter and the small
   containers every file uses (reset.c forgets it). It calls no other file of the
   simulator: streams (stream.c) and host agents (thread.c) are made above it. */
#include <stdlib.h>
#include <time.h>

#include "sim_internal.h"

sim_state dl_sync__sim = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .changed = PTHREAD_COND_INITIALIZER,
    .generation = 1,
};

/* Per host thread; stale when its generation differs from dl_sync__sim.generation. */
static _Thread_local struct {
  uint64_t generation;
  int32_t device;
} local;

static void refresh_local(void) {
  if (local.generation == dl_sync__sim.generation) return;
  local.generation = dl_sync__sim.generation;
  local.device = 0;
}

int dl_sync__sim_current_device(void) {
  refresh_local();
  return local.device;
}

int dl_sync_sim_get_device(int32_t *device) {
  if (device == NULL) return DL_SYNC_SIM_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&dl_sync__sim.lock);
  *device = dl_sync__sim_current_device();
  pthread_mutex_unlock(&dl_sync__sim.lock);
  return DL_SYNC_SIM_SUCCESS;
}

int dl_sync_sim_set_device(int32_t device) {
  if (device < 0 || device >= DL_SYNC_SIM_DEVICES) return DL_SYNC_SIM_ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&dl_sync__sim.lock);
  refresh_local();
  local.device = device;
  pthread_mutex_unlock(&dl_sync__sim.lock);
  return DL_SYNC_SIM_SUCCESS;
}

int dl_sync__sim_new_agent(void) {
  return dl_sync__sim.next_agent < SIM_MAX_AGENTS ? dl_sync__sim.next_agent++ : -1;
}

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15u;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
  return x ^ (x >> 31);
}

void dl_sync__sim_jitter(const dl_sync_sim_stream *stream, uint64_t seq) {
  unsigned max_us = __atomic_load_n(&dl_sync__sim.jitter_max_us, __ATOMIC_RELAXED);
  if (max_us == 0) return;
  uint64_t draw = mix(dl_sync__sim.jitter_seed ^ mix((uint64_t)stream->agent << 40 ^ seq));
  long us = (long)(draw % (max_us + 1u));
  struct timespec delay = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&delay, NULL);
}

void dl_sync_sim_set_jitter(uint64_t seed, unsigned max_us) {
  pthread_mutex_lock(&dl_sync__sim.lock);
  dl_sync__sim.jitter_seed = seed;
  __atomic_store_n(&dl_sync__sim.jitter_max_us, max_us, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&dl_sync__sim.lock);
}

int dl_sync__sim_deps_add(sim_deps *deps, dl_sync_sim_stream *stream, uint64_t seq) {
  if (stream == NULL || seq == 0) return 0;
  if (deps->count == deps->capacity) {
    size_t capacity = deps->capacity ? deps->capacity * 2 : 4;
    sim_dep *items = realloc(deps->items, capacity * sizeof *items);
    if (items == NULL) return -1;
    deps->items = items;
    deps->capacity = capacity;
  }
  deps->items[deps->count++] = (sim_dep){stream, seq};
  return 0;
}

int dl_sync__sim_nodes_add(sim_nodes *nodes, size_t node) {
  for (size_t i = 0; i < nodes->count; i++)
    if (nodes->items[i] == node) return 0;
  if (nodes->count == nodes->capacity) {
    size_t capacity = nodes->capacity ? nodes->capacity * 2 : 4;
    size_t *items = realloc(nodes->items, capacity * sizeof *items);
    if (items == NULL) return -1;
    nodes->items = items;
    nodes->capacity = capacity;
  }
  nodes->items[nodes->count++] = node;
  return 0;
}

int dl_sync__sim_nodes_copy(sim_nodes *to, const sim_nodes *from) {
  to->count = 0;
  for (size_t i = 0; i < from->count; i++)
    if (dl_sync__sim_nodes_add(to, from->items[i]) != 0) return -1;
  return 0;
}

void dl_sync__sim_clock_join(sim_clock *into, const sim_clock *from) {
  for (int i = 0; i < SIM_MAX_AGENTS; i++)
    if (from->c[i] > into->c[i]) into->c[i] = from->c[i];
}

const char *dl_sync_sim_error_name(int error) {
  switch (error) {
    case DL_SYNC_SIM_SUCCESS:
      return "simSuccess";
    case DL_SYNC_SIM_ERROR_INVALID_VALUE:
      return "simErrorInvalidValue";
    case DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION:
      return "simErrorMemoryAllocation";
    case DL_SYNC_SIM_ERROR_INVALID_DEVICE:
      return "simErrorInvalidDevice";
    case DL_SYNC_SIM_ERROR_INVALID_HANDLE:
      return "simErrorInvalidResourceHandle";
    case DL_SYNC_SIM_ERROR_NOT_READY:
      return "simErrorNotReady";
    case DL_SYNC_SIM_ERROR_CAPTURE_UNSUPPORTED:
      return "simErrorStreamCaptureUnsupported";
    case DL_SYNC_SIM_ERROR_CAPTURE_INVALIDATED:
      return "simErrorStreamCaptureInvalidated";
    case DL_SYNC_SIM_ERROR_CAPTURE_MERGE:
      return "simErrorStreamCaptureMerge";
    case DL_SYNC_SIM_ERROR_CAPTURE_UNMATCHED:
      return "simErrorStreamCaptureUnmatched";
    case DL_SYNC_SIM_ERROR_CAPTURE_UNJOINED:
      return "simErrorStreamCaptureUnjoined";
    case DL_SYNC_SIM_ERROR_CAPTURE_ISOLATION:
      return "simErrorStreamCaptureIsolation";
    case DL_SYNC_SIM_ERROR_CAPTURE_IMPLICIT:
      return "simErrorStreamCaptureImplicit";
    case DL_SYNC_SIM_ERROR_CAPTURED_EVENT:
      return "simErrorCapturedEvent";
    case DL_SYNC_SIM_ERROR_CAPTURE_WRONG_THREAD:
      return "simErrorStreamCaptureWrongThread";
    default:
      return "simErrorUnknown";
  }
}
