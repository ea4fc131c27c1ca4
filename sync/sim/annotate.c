/* SPDX-License-Identifier: Apache-2.0 */
/* Happens-before between host threads that the simulator cannot see (thread creation and
   join, locks, queues): a thread releases its clock under a key, another acquires it, in
   the manner of ThreadSanitizer's __tsan_release / __tsan_acquire. */
#include <stdlib.h>

#include "sim_internal.h"

struct sim_sync_clock {
  const void *key;
  sim_clock clock;
  struct sim_sync_clock *next;
};

static struct sim_sync_clock *find(const void *key) {
  for (struct sim_sync_clock *c = dl_sync__sim.sync_clocks; c != NULL; c = c->next)
    if (c->key == key) return c;
  return NULL;
}

int dl_sync_sim_host_release(const void *key) {
  if (key == NULL) return DL_SYNC_SIM_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&dl_sync__sim.lock);
  int error = DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION;
  sim_clock *host = NULL;
  int agent = dl_sync__sim_host_agent(&host);
  struct sim_sync_clock *c = agent >= 0 ? find(key) : NULL;
  if (agent >= 0 && c == NULL && (c = calloc(1, sizeof *c)) != NULL) {
    c->key = key;
    c->next = dl_sync__sim.sync_clocks;
    dl_sync__sim.sync_clocks = c;
  }
  if (c != NULL) {
    dl_sync__sim_clock_join(&c->clock, host);
    /* What this thread does next is not covered by the release. */
    host->c[agent]++;
    error = DL_SYNC_SIM_SUCCESS;
  }
  pthread_mutex_unlock(&dl_sync__sim.lock);
  return error;
}

int dl_sync_sim_host_acquire(const void *key) {
  if (key == NULL) return DL_SYNC_SIM_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&dl_sync__sim.lock);
  sim_clock *host = NULL;
  int error = dl_sync__sim_host_agent(&host) < 0 ? DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION
                                                 : DL_SYNC_SIM_SUCCESS;
  struct sim_sync_clock *c = error == DL_SYNC_SIM_SUCCESS ? find(key) : NULL;
  if (c != NULL) dl_sync__sim_clock_join(host, &c->clock); /* nothing released yet: no order */
  pthread_mutex_unlock(&dl_sync__sim.lock);
  return error;
}

void dl_sync__sim_sync_clocks_free(void) {
  while (dl_sync__sim.sync_clocks != NULL) {
    struct sim_sync_clock *next = dl_sync__sim.sync_clocks->next;
    free(dl_sync__sim.sync_clocks);
    dl_sync__sim.sync_clocks = next;
  }
}
