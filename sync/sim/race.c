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

enum { SIM_KEPT_REPORTS = 32, SIM_REPORT_SIZE = 256 };

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
static char reports[SIM_KEPT_REPORTS][SIM_REPORT_SIZE];

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

static void report(const char *earlier_kind, const access *earlier, const char *kind,
                   const char *name, int agent, const void *buffer) {
  if (race_count < SIM_KEPT_REPORTS)
    snprintf(reports[race_count], SIM_REPORT_SIZE,
             "race on %p: %s by '%s' (agent %d) and %s by '%s' (agent %d) are not ordered",
             buffer, earlier_kind, earlier->name ? earlier->name : "?", earlier->agent, kind,
             name ? name : "?", agent);
  race_count++;
}

static int ordered(const access *earlier, int agent, const sim_clock *clock) {
  return earlier->agent < 0 || earlier->agent == agent || earlier->time <= clock->c[earlier->agent];
}

void sim__race_check(int agent, const sim_clock *clock, const char *name, const void *buffer,
                     int mode) {
  history *h = history_of(buffer);
  if (h == NULL) return;
  const char *kind = (mode & DL_SYNC_SIM_WRITE) ? "write" : "read";
  if (!ordered(&h->write, agent, clock)) report("write", &h->write, kind, name, agent, buffer);
  access now = {agent, clock->c[agent], name};
  if (mode & DL_SYNC_SIM_WRITE) {
    for (size_t i = 0; i < h->read_count; i++)
      if (!ordered(&h->reads[i], agent, clock)) report("read", &h->reads[i], kind, name, agent, buffer);
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

void sim__race_report_graph(const char *a, const char *b, const void *buffer) {
  if (race_count < SIM_KEPT_REPORTS)
    snprintf(reports[race_count], SIM_REPORT_SIZE,
             "race on %p inside one graph: nodes '%s' and '%s' are not ordered by its edges",
             buffer, a ? a : "?", b ? b : "?");
  race_count++;
}

void sim__race_clear(void) {
  for (size_t i = 0; i < history_count; i++) free(histories[i].reads);
  free(histories);
  histories = NULL;
  history_count = history_capacity = 0;
  race_count = 0;
}

uint64_t dl_sync_sim_race_count(void) {
  pthread_mutex_lock(&sim.lock);
  uint64_t count = race_count;
  pthread_mutex_unlock(&sim.lock);
  return count;
}

uint64_t dl_sync_sim_race_report(char *buffer, size_t size) {
  pthread_mutex_lock(&sim.lock);
  uint64_t count = race_count;
  size_t used = 0;
  if (buffer != NULL && size > 0) buffer[0] = '\0';
  for (uint64_t i = 0; i < count && i < SIM_KEPT_REPORTS && buffer != NULL; i++) {
    int n = snprintf(buffer + used, size - used, "%s\n", reports[i]);
    if (n < 0 || (size_t)n >= size - used) break;
    used += (size_t)n;
  }
  pthread_mutex_unlock(&sim.lock);
  return count;
}

void dl_sync_sim_race_reset(void) {
  pthread_mutex_lock(&sim.lock);
  sim__race_clear();
  pthread_mutex_unlock(&sim.lock);
}
