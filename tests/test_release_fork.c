/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A fork while another thread is inside the release queues' lock (sync/release_queue.c),
 * through the static library's internal interface: the fork waits for the lock, so that the
 * child never copies the tables half changed (the tensor set growing, its old buckets freed
 * and the new ones not yet in place; the child would free the old ones again). The control
 * is the test itself on a dlsync without the fork's prepare handler: the child is made
 * while the other thread is still inside.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#ifndef _WIN32
#include <sys/wait.h>
#include <unistd.h>
#endif

#include "internal.h"

#include "support/sanitizers.h"

#if !defined(_WIN32) && !defined(THREAD_SANITIZER)
#define FORKS 1 /* no fork on Windows; the sanitizer refuses one beside a running thread */
#endif

enum { TENSORS = 256 };

#ifdef FORKS
static atomic_int grows, inside;
static int left_the_grow; /* written inside the lock, read by the child */

/* The second growth (the first has no old buckets): tells the main thread, and stays inside
   a while, so that a fork that does not wait for the lock happens now. */
static void stay_inside(void) {
  if (atomic_fetch_add(&grows, 1) != 1) return;
  atomic_store(&inside, 1);
  struct timespec ms = {0, 1000000};
  for (int i = 0; i < 200; i++) nanosleep(&ms, NULL);
  left_the_grow = 1;
}

static char tensors[TENSORS];

static void *defer_many(void *arg) {
  (void)arg;
  static const dl_sync_backend backend = {.name = "none"};
  dl_sync__bound stream = {.stream = {.device = {kDLCUDA, 0}, .handle = (void *)0x10},
                           .identified = 1};
  for (int i = 0; i < TENSORS; i++) {
    dl_sync__pending *p = dl_sync__pending_new(&tensors[i], 0);
    assert_non_null(p);
    /* never asked about: the test ends with them pending */
    assert_int_equal(dl_sync__pending_defer(p, &backend, NULL, (void *)0x1, NULL, &stream, 0),
                     DL_SYNC_OK);
  }
  return NULL;
}
#endif

static void test_a_fork_waits_for_a_thread_inside_the_queue_lock(void **state) {
  (void)state;
#ifndef FORKS
  print_message(
      "skipped: no fork here (Windows), or the thread sanitizer, which refuses a "
      "fork beside a running thread\n");
  skip();
#else
  dl_sync__release_grow_hook = stay_inside;
  pthread_t other;
  assert_int_equal(pthread_create(&other, NULL, defer_many, NULL), 0);
  struct timespec us = {0, 1000};
  while (!atomic_load(&inside)) nanosleep(&us, NULL);
  pid_t child = fork();
  if (child == 0) _exit(left_the_grow ? 0 : 1); /* the lock was let go before the copy */
  int status = 0;
  assert_int_equal(waitpid(child, &status, 0), child);
  pthread_join(other, NULL);
  dl_sync__release_grow_hook = NULL;
  assert_true(WIFEXITED(status));
  if (WEXITSTATUS(status) != 0) fail_msg("the child was forked while a thread grew the tensor set");
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_a_fork_waits_for_a_thread_inside_the_queue_lock),
  };
  return cmocka_run_group_tests_name("release_fork", tests, NULL, NULL);
}
