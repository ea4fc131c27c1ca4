/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The happens-before race checker. Clocks are computed when operations are enqueued, from
 * program order, event records and waits, legacy-stream syncs and host synchronization, so
 * a verdict never depends on timing. Per buffer it keeps the last write and the last read
 * of each agent (the FastTrack scheme); an access races with an earlier one whose agent's
 * clock component is not covered by the accessing operation's clock.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

enum { SIM_KEPT_REPORTS = DL_SYNC_SIM_KEPT_RACES };

typedef struct access {
  int agent; /* -1: none */
  uint32_t time;
  const char *name;
} access;

typedef struct history {
  const void *buffer;
  access write;
  access *reads; /* at most one per agent */
  size_t read_count, read_capacity;
} history;

static history *histories;
static size_t history_count, history_capacity;
static uint64_t race_count;
static dl_sync_sim_race races[SIM_KEPT_REPORTS];

static history *history_of(const void *buffer) {
  for (size_t i = 0; i < history_count; i++)
    if (histories[i].buffer == buffer) return &histories[i];
  if (history_count == history_capacity) {
    size_t capacity = history_capacity ? history_capacity * 2 : 16;
    history *grown = realloc(histories, capacity * sizeof *grown);
    if (grown == NULL) return NULL;
    histories = grown;
    history_capacity = capacity;
  }
  history *h = &histories[history_count++];
  *h = (history){.buffer = buffer, .write = {.agent = -1}};
  return h;
}

static dl_sync_sim_race_access side(const char *name, int mode, int agent) {
  return (dl_sync_sim_race_access){
      .name = name ? name : "?",
      .mode = mode,
      .agent = agent,
      .is_host = agent >= 0 && dl_sync__sim.host_clocks[agent] != NULL};
}

static void report(int earlier_mode, const access *earlier, int mode, const char *name, int agent,
                   const void *buffer) {
  if (race_count < SIM_KEPT_REPORTS)
    races[race_count] =
        (dl_sync_sim_race){.buffer = buffer,
                           .earlier = side(earlier->name, earlier_mode, earlier->agent),
                           .later = side(name, mode, agent)};
  race_count++;
}

static const char *kind_name(int mode) {
  return (mode & DL_SYNC_SIM_WRITE) ? "write" : "read";
}

static int format(const dl_sync_sim_race *r, char *buffer, size_t size) {
  if (r->in_graph)
    return snprintf(buffer, size,
                    "race on %p inside one graph: nodes '%s' and '%s' are not ordered by its "
                    "edges\n",
                    r->buffer, r->earlier.name, r->later.name);
  return snprintf(
      buffer, size, "race on %p: %s by '%s' (%s %d) and %s by '%s' (%s %d) are not ordered\n",
      r->buffer, kind_name(r->earlier.mode), r->earlier.name,
      r->earlier.is_host ? "host thread" : "agent", r->earlier.agent, kind_name(r->later.mode),
      r->later.name, r->later.is_host ? "host thread" : "agent", r->later.agent);
}

static int ordered(const access *earlier, int agent, const sim_clock *clock) {
  return earlier->agent < 0 || earlier->agent == agent || earlier->time <= clock->c[earlier->agent];
}

void dl_sync__sim_race_check(int agent, const sim_clock *clock, const char *name,
                             const void *buffer, int mode) {
  history *h = history_of(buffer);
  if (h == NULL) return;
  if (!ordered(&h->write, agent, clock))
    report(DL_SYNC_SIM_WRITE, &h->write, mode, name, agent, buffer);
  access now = {agent, clock->c[agent], name};
  if (mode & DL_SYNC_SIM_WRITE) {
    for (size_t i = 0; i < h->read_count; i++)
      if (!ordered(&h->reads[i], agent, clock))
        report(DL_SYNC_SIM_READ, &h->reads[i], mode, name, agent, buffer);
    h->write = now;
    h->read_count = 0;
    return;
  }
  for (size_t i = 0; i < h->read_count; i++)
    if (h->reads[i].agent == agent) {
      h->reads[i] = now;
      return;
    }
  if (h->read_count == h->read_capacity) {
    size_t capacity = h->read_capacity ? h->read_capacity * 2 : 4;
    access *grown = realloc(h->reads, capacity * sizeof *grown);
    if (grown == NULL) return;
    h->reads = grown;
    h->read_capacity = capacity;
  }
  h->reads[h->read_count++] = now;
}

void dl_sync__sim_race_report_graph(const char *a, int a_mode, const char *b, int b_mode,
                                    const void *buffer) {
  if (race_count < SIM_KEPT_REPORTS)
    races[race_count] = (dl_sync_sim_race){.buffer = buffer,
                                           .in_graph = 1,
                                           .earlier = side(a, a_mode, -1),
                                           .later = side(b, b_mode, -1)};
  race_count++;
}

void dl_sync__sim_race_clear(void) {
  for (size_t i = 0; i < history_count; i++) free(histories[i].reads);
  free(histories);
  histories = NULL;
  history_count = history_capacity = 0;
  race_count = 0;
}

uint64_t dl_sync_sim_race_count(void) {
  pthread_mutex_lock(&dl_sync__sim.lock);
  uint64_t count = race_count;
  pthread_mutex_unlock(&dl_sync__sim.lock);
  return count;
}

uint64_t dl_sync_sim_race_report(char *buffer, size_t size) {
  pthread_mutex_lock(&dl_sync__sim.lock);
  uint64_t count = race_count;
  size_t used = 0;
  if (buffer != NULL && size > 0) buffer[0] = '\0';
  for (uint64_t i = 0; i < count && i < SIM_KEPT_REPORTS && buffer != NULL; i++) {
    int n = format(&races[i], buffer + used, size - used);
    if (n < 0 || (size_t)n >= size - used) break;
    used += (size_t)n;
  }
  pthread_mutex_unlock(&dl_sync__sim.lock);
  return count;
}

int dl_sync_sim_race_get(uint64_t index, dl_sync_sim_race *race) {
  if (race == NULL) return DL_SYNC_SIM_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&dl_sync__sim.lock);
  int kept = index < race_count && index < SIM_KEPT_REPORTS;
  if (kept) *race = races[index];
  pthread_mutex_unlock(&dl_sync__sim.lock);
  return kept ? DL_SYNC_SIM_SUCCESS : DL_SYNC_SIM_ERROR_INVALID_VALUE;
}

void dl_sync_sim_race_reset(void) {
  pthread_mutex_lock(&dl_sync__sim.lock);
  dl_sync__sim_race_clear();
  pthread_mutex_unlock(&dl_sync__sim.lock);
}
