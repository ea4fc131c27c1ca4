/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fork() next to dlsync, on a backend without a device (host_backend.c). Every child runs
 * under alarm(5): a hang is a SIGALRM, a crash its signal, and either fails the test, as
 * does a child's failed check (exit status 2, its message on stderr).
 *
 *   test_process_fork stress: a thread hammers every lock dlsync has (a tensor's event
 *     comes from the pool and goes back there; exports go through the thread cache;
 *     statistics take the caches' list lock) while the main thread forks 3000 times. Each
 *     child deletes a tensor whose event the parent recorded, then records and waits on one
 *     of its own. Catches: a child that gives the parent's event back to the parent's pool
 *     (a copy whose lock the hammering thread may have held at the fork; the child spins on
 *     it for ever), i.e. dl_sync__pool_release without its fork-generation check; and a
 *     child that takes a parent's event instead of creating its own (the event count).
 *
 *   test_process_fork cache-owner: the forking thread owns a thread cache (it exported
 *     first), and the hammering thread runs. Each child must see no pool of the parent's
 *     (statistics all zero), create its own event, reuse it from its own cache, and a
 *     thread it starts must give its cache back to the child's pool at exit. Catches: pools
 *     the child did not forget, and the forking thread's cache surviving into the child
 *     (its events and its pool pointers are the parent's).
 *
 *   test_process_fork pthread-exit: the child's only thread leaves with pthread_exit, so
 *     the thread-cache key destructor runs in the child: after a dlsync call of the child's
 *     (even children), or with only what the fork left (odd ones). Catches a destructor
 *     that reaches memory the fork handler discarded (a cache freed in the child while the
 *     key still names it: SIGSEGV, or an invalid read under valgrind), and, under valgrind
 *     (process_fork_pthread_exit_valgrind) or LeakSanitizer, a definite leak of the child's
 *     own.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "host_backend.h"

static const DLDevice cuda0 = {kDLCUDA, 0};

static dl_sync_stream stream(void *handle) {
  return dl_sync_stream_view(cuda0, handle);
}

static dl_sync_stream_arg arg_of(void *handle) {
  return dl_sync_stream_arg_int((int64_t)(intptr_t)handle);
}

static DLManagedTensorVersioned tensor_on_cuda0(void) {
  DLManagedTensorVersioned tensor = {.version = {1, 3}};
  tensor.dl_tensor.device = cuda0;
  return tensor;
}

/* --- in a child: report with write(2) and _exit, nothing that the parent's other threads
   may have held (stdio, atexit handlers) ------------------------------------------------ */

static void child_fail(const char *what) {
  char line[768];
  int n = snprintf(line, sizeof line, "child %d: %s (last error: %s)\n", (int)getpid(), what,
                   dl_sync_last_error());
  if (n > 0) (void)!write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
  _exit(2);
}

#define CHILD_CHECK(condition) ((condition) ? (void)0 : child_fail("check failed: " #condition))

static dl_sync_pool_stats stats_of_cuda0(void) {
  dl_sync_pool_stats stats;
  CHILD_CHECK(dl_sync_pool_stats_get(host_backend(), 0, &stats) == DL_SYNC_OK);
  return stats;
}

/* --- the parent ---------------------------------------------------------------------- */

static atomic_int stop;
static atomic_long hammer_rounds;
static atomic_int hammer_failed;

/* Takes every lock dlsync has, in a loop: the pool's (a tensor takes its event from the
   pool and gives it back there), the thread cache's path (an export) and the caches' list
   lock (statistics). */
static void *hammer(void *arg) {
  (void)arg;
  while (!atomic_load(&stop)) {
    DLManagedTensorVersioned tensor = tensor_on_cuda0();
    dl_sync_pool_stats stats;
    if (dl_sync_tensor_record(&tensor, stream(HOST_STREAM_A)) != DL_SYNC_OK ||
        dl_sync_export(stream(HOST_STREAM_A), arg_of(HOST_STREAM_B)) != DL_SYNC_OK ||
        dl_sync_tensor_wait(&tensor, stream(HOST_STREAM_B)) != DL_SYNC_OK ||
        dl_sync_pool_stats_get(host_backend(), 0, &stats) != DL_SYNC_OK) {
      atomic_store(&hammer_failed, 1);
      return NULL;
    }
    tensor.deleter(&tensor);
    atomic_fetch_add(&hammer_rounds, 1);
  }
  return NULL;
}

static void describe(int status, char *out, size_t size) {
  if (WIFEXITED(status))
    snprintf(out, size, "exit status %d", WEXITSTATUS(status));
  else if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
    snprintf(out, size, "hung (killed by its 5 s alarm)");
  else if (WIFSIGNALED(status))
    snprintf(out, size, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
  else
    snprintf(out, size, "status %#x", status);
}

/* Forks count children running child(index); each must exit 0. */
static void fork_children(int count, void (*child)(int index)) {
  for (int i = 0; i < count; i++) {
    pid_t pid = fork();
    if (pid < 0) FAIL("fork %d: %s", i, strerror(errno));
    if (pid == 0) {
      alarm(5);
      child(i);
      _exit(0);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid) FAIL("waitpid: %s", strerror(errno));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      char what[128];
      describe(status, what, sizeof what);
      FAIL("child %d of %d (pid %d): %s", i + 1, count, (int)pid, what);
    }
  }
}

static pthread_t start_hammer(void) {
  pthread_t thread;
  CHECK_INT(pthread_create(&thread, NULL, hammer, NULL), 0);
  while (atomic_load(&hammer_rounds) < 100 && !atomic_load(&hammer_failed)) sched_yield();
  return thread;
}

static void stop_hammer(pthread_t thread) {
  atomic_store(&stop, 1);
  CHECK_INT(pthread_join(thread, NULL), 0);
  if (atomic_load(&hammer_failed)) FAIL("the hammering thread failed");
  printf("the hammering thread made %ld rounds\n", atomic_load(&hammer_rounds));
}

/* --- stress -------------------------------------------------------------------------- */

static DLManagedTensorVersioned recorded_by_parent;

static void stress_child(int index) {
  (void)index;
  recorded_by_parent.deleter(&recorded_by_parent); /* the parent's event: no pool of ours */
  long created = host_events_created();
  DLManagedTensorVersioned own = tensor_on_cuda0();
  CHILD_CHECK(dl_sync_tensor_record(&own, stream(HOST_STREAM_A)) == DL_SYNC_OK);
  CHILD_CHECK(host_events_created() == created + 1); /* an event of the child's own */
  CHILD_CHECK(dl_sync_tensor_wait(&own, stream(HOST_STREAM_B)) == DL_SYNC_OK);
  own.deleter(&own);
}

/* ThreadSanitizer makes each fork of a threaded process slow: fewer children there. */
#ifdef PROCESS_UNDER_TSAN
enum { STRESS_FORKS = 300 };
#else
enum { STRESS_FORKS = 3000 };
#endif

/* AddressSanitizer's allocator is not fork-safe: a child's malloc may wait for ever on a
   lock of the allocator that the hammering thread held at the fork. */
static void skip_a_child_that_allocates_next_to_a_thread(void) {
#ifdef PROCESS_UNDER_ASAN
  skip(
      "under AddressSanitizer a forked child's malloc may wait for ever on the sanitizer "
      "allocator's lock, held at the fork by the parent's other thread");
#endif
}

static void run_stress(void) {
  skip_a_child_that_allocates_next_to_a_thread();
  recorded_by_parent = tensor_on_cuda0();
  CHECK_DL(dl_sync_tensor_record(&recorded_by_parent, stream(HOST_STREAM_A)));
  pthread_t thread = start_hammer();
  fork_children(STRESS_FORKS, stress_child);
  stop_hammer(thread);
  CHECK_DL(dl_sync_tensor_wait(&recorded_by_parent, stream(HOST_STREAM_B)));
  recorded_by_parent.deleter(&recorded_by_parent);
}

/* --- cache-owner --------------------------------------------------------------------- */

static void *export_once(void *arg) {
  (void)arg;
  if (dl_sync_export(stream(HOST_STREAM_A), arg_of(HOST_STREAM_B)) != DL_SYNC_OK)
    child_fail("export on a thread of the child");
  return NULL;
}

static void cache_owner_child(int index) {
  (void)index;
  /* None of the parent's pools, nor the events its forking thread had cached. */
  dl_sync_pool_stats stats = stats_of_cuda0();
  CHILD_CHECK(stats.created == 0 && stats.idle == 0 && stats.acquired == 0);
  long created = host_events_created();
  CHILD_CHECK(dl_sync_export(stream(HOST_STREAM_A), arg_of(HOST_STREAM_B)) == DL_SYNC_OK);
  CHILD_CHECK(dl_sync_export(stream(HOST_STREAM_A), arg_of(HOST_STREAM_B)) == DL_SYNC_OK);
  CHILD_CHECK(host_events_created() == created + 1);
  /* A thread of the child: its cache goes back to the child's pool at its exit. */
  pthread_t thread;
  CHILD_CHECK(pthread_create(&thread, NULL, export_once, NULL) == 0);
  CHILD_CHECK(pthread_join(thread, NULL) == 0);
  stats = stats_of_cuda0();
  CHILD_CHECK(stats.created == 2 && stats.idle == 2 && stats.outstanding == 0);
  CHILD_CHECK(stats.acquired == 3);
  recorded_by_parent.deleter(&recorded_by_parent);
}

static void run_cache_owner(void) {
  skip_a_child_that_allocates_next_to_a_thread();
#ifdef PROCESS_UNDER_TSAN
  skip("ThreadSanitizer does not support starting a thread in a child of a threaded process");
#endif
  recorded_by_parent = tensor_on_cuda0();
  CHECK_DL(dl_sync_tensor_record(&recorded_by_parent, stream(HOST_STREAM_A)));
  CHECK_DL(dl_sync_export(stream(HOST_STREAM_A), arg_of(HOST_STREAM_B))); /* our cache */
  pthread_t thread = start_hammer();
  fork_children(300, cache_owner_child);
  stop_hammer(thread);
  recorded_by_parent.deleter(&recorded_by_parent);
}

/* --- pthread-exit -------------------------------------------------------------------- */

/* Even children use dlsync's pools before they leave (their thread gets a cache of the
   child's); odd ones only delete the parent's tensor, so the thread leaves with whatever
   the fork left of the parent's cache. */
static void pthread_exit_child(int index) {
  if (index % 2 == 0) {
    DLManagedTensorVersioned own = tensor_on_cuda0();
    CHILD_CHECK(dl_sync_tensor_record(&own, stream(HOST_STREAM_A)) == DL_SYNC_OK);
    CHILD_CHECK(dl_sync_export(stream(HOST_STREAM_A), arg_of(HOST_STREAM_B)) == DL_SYNC_OK);
    own.deleter(&own);
  }
  recorded_by_parent.deleter(&recorded_by_parent);
  pthread_exit(NULL); /* the last thread: the process exits 0 after its key destructors */
}

/* What the parent holds when it forks: a pool, a tensor's event, an event in this thread's
   cache. A child forgets them without touching them, so valgrind and LeakSanitizer find
   them unreachable in the child: fork_child.supp and fork_child.lsan.supp name this
   function to tell those blocks from the child's own. */
__attribute__((noinline)) static void parent_state_before_fork(void) {
  recorded_by_parent = tensor_on_cuda0();
  CHECK_DL(dl_sync_tensor_record(&recorded_by_parent, stream(HOST_STREAM_A)));
  CHECK_DL(dl_sync_export(stream(HOST_STREAM_A), arg_of(HOST_STREAM_B)));
}

static void run_pthread_exit(void) {
#ifdef PROCESS_UNDER_TSAN
  skip(
      "under ThreadSanitizer a child whose main thread calls pthread_exit never ends (the "
      "sanitizer's own thread stays)");
#endif
  parent_state_before_fork();
  fork_children(4, pthread_exit_child);
  recorded_by_parent.deleter(&recorded_by_parent);
}

int main(int argc, char **argv) {
  if (argc != 2) FAIL("usage: %s stress|cache-owner|pthread-exit", argv[0]);
  CHECK_DL(dl_sync_set_backend(kDLCUDA, host_backend()));
  if (strcmp(argv[1], "stress") == 0)
    run_stress();
  else if (strcmp(argv[1], "cache-owner") == 0)
    run_cache_owner();
  else if (strcmp(argv[1], "pthread-exit") == 0)
    run_pthread_exit();
  else
    FAIL("unknown mode %s", argv[1]);
  CHECK_DL(dl_sync_shutdown());
  CHECK_INT(host_events_destroyed(), host_events_created());
  CHECK_DL(dl_sync_set_backend(kDLCUDA, NULL));
  printf("%s: passed\n", argv[1]);
  return 0;
}
