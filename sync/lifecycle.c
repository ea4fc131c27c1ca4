/* SPDX-License-Identifier: Apache-2.0 */
/* dl_sync_pool_stats_get and dl_sync_shutdown: over the threads' caches (thread_cache.c)
   and the pools behind them (event_pool.c), whose events stay in one place or the other
   while the caches' lock is held. */
#include "event_pool.h"
#include "internal.h"

int dl_sync_pool_stats_get(const dl_sync_backend *backend, int32_t device_id,
                           dl_sync_pool_stats *out) {
  static const char *const func = "dl_sync_pool_stats_get";
  if (backend == NULL || out == NULL)
    return dl_sync__named(
        func, dl_sync__error(DL_SYNC_EINVAL, "backend (%p) and out (%p) must not be NULL",
                             (const void *)backend, (void *)out));
  if (device_id < 0 || device_id >= DL_SYNC_MAX_DEVICES)
    return dl_sync__named(func, dl_sync__error(DL_SYNC_EINVAL, "device id %d: expected 0 to %d",
                                               (int)device_id, DL_SYNC_MAX_DEVICES - 1));
  *out = (dl_sync_pool_stats){0};
  dl_sync__caches_lock(); /* no event moves between a cache and its pool meanwhile */
  for (dl_sync__pool *pool = dl_sync__pools_of(backend, device_id); pool != NULL;
       pool = pool->next) {
    uint64_t cached = 0, cached_acquired = 0;
    dl_sync__caches_count(pool, &cached, &cached_acquired);
    dl_sync__pool_add_stats(pool, cached, cached_acquired, out);
  }
  dl_sync__caches_unlock();
  return DL_SYNC_OK;
}

/* The release thread is paused meanwhile (nothing else may call dlsync), and the releases
   are finished first, so that their events are back in the pools. */
int dl_sync_shutdown(void) {
  int thread_ran = 0;
  int status = dl_sync__release_thread_stop(&thread_ran);
  if (status != DL_SYNC_OK) return dl_sync__named("dl_sync_shutdown", status);
  dl_sync__release_finish(1);
  int left = dl_sync__release_report_left();
  dl_sync__caches_lock(); /* held throughout: exiting threads flush into pools */
  dl_sync__caches_flush_all();
  status = dl_sync__pools_drain_all();
  dl_sync__caches_unlock();
  int released = dl_sync__backends_release_contexts(); /* after the events made in them */
  if (status == DL_SYNC_OK) status = released;
  if (status == DL_SYNC_OK) status = left;
  if (thread_ran && dl_sync_release_thread_start() != DL_SYNC_OK && status == DL_SYNC_OK)
    status = DL_SYNC_ENOMEM; /* its message is written */
  return dl_sync__named("dl_sync_shutdown", status);
}
