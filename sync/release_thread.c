/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The release thread (dlsync/release.h): a thread of dlsync's, started only on request,
 * that finishes deferred releases as their consumer's work completes, so that a consumer
 * gets its producer's memory back without polling. It polls about once a millisecond while
 * deferred releases wait, every 50 ms while only graphs keep releases, and sleeps while
 * none wait; a release that waits wakes it (release_queue.c). The deleters run on it with
 * no lock held.
 *
 * Once it has started, this copy stays mapped for the life of the process (a dlclose of its
 * holder leaves its code for the thread, which may be started again). A forked child does not have
 * it (and never runs the parent's releases): there it is stopped, and may be started again.
 */
#include <stdatomic.h>

#include "internal.h"

enum { QUEUED_INTERVAL_MS = 1, GRAPHS_INTERVAL_MS = 50 };

static dl_sync__mutex control = DL_SYNC__MUTEX_INIT; /* start and stop, one at a time */
static void *thread;                                 /* under control */
static atomic_int stopping, running;
static DL_SYNC__THREAD_LOCAL int on_release_thread;

static void run(void *arg) {
  (void)arg;
  on_release_thread = 1;
  while (!atomic_load(&stopping)) {
    int interval = dl_sync__releases_queued() != 0  ? QUEUED_INTERVAL_MS
                   : dl_sync_release_pending() != 0 ? GRAPHS_INTERVAL_MS
                                                    : -1;
    if (interval >= 0) dl_sync__release_finish(0);
    dl_sync__release_wait(interval, &stopping);
  }
}

static void forget_in_child(void) {
  dl_sync__mutex_renew(&control);
  if (thread != NULL) dl_sync__thread_drop(thread); /* the parent's; not in this process */
  thread = NULL;
  atomic_store(&stopping, 0);
  atomic_store(&running, 0);
}

static void register_fork_handler(void) {
  dl_sync__on_fork(NULL, NULL, forget_in_child);
}

static int from_its_deleter(const char *what) {
  return dl_sync__error(DL_SYNC_EINVAL,
                        "%s was called from a deleter that dlsync's release thread runs, which "
                        "would wait for itself: call it from another thread",
                        what);
}

int dl_sync_release_thread_start(void) {
  static dl_sync__once once = DL_SYNC__ONCE_INIT;
  dl_sync__once_run(&once, register_fork_handler);
  dl_sync__mutex_lock(&control);
  int status = DL_SYNC_OK;
  if (thread == NULL) {
    dl_sync__pin_this_copy(); /* the thread runs this copy's code until it stops */
    atomic_store(&running, 1);
    thread = dl_sync__thread_start(run, NULL);
    if (thread == NULL) {
      atomic_store(&running, 0);
      status = dl_sync__error(DL_SYNC_ENOMEM, "the operating system made no thread");
    }
  }
  dl_sync__mutex_unlock(&control);
  return dl_sync__named("dl_sync_release_thread_start", status);
}

int dl_sync__release_thread_stop(int *was_running) {
  *was_running = 0;
  if (on_release_thread) return from_its_deleter("stopping the release thread");
  dl_sync__mutex_lock(&control);
  void *stopped = thread;
  thread = NULL;
  if (stopped != NULL) {
    atomic_store(&stopping, 1);
    dl_sync__release_wake();
    dl_sync__thread_join(stopped);
    atomic_store(&stopping, 0);
    atomic_store(&running, 0);
  }
  dl_sync__mutex_unlock(&control);
  *was_running = stopped != NULL;
  return DL_SYNC_OK;
}

int dl_sync_release_thread_stop(void) {
  int was_running = 0;
  return dl_sync__named("dl_sync_release_thread_stop", dl_sync__release_thread_stop(&was_running));
}

int dl_sync_release_thread_running(void) {
  return atomic_load(&running);
}
