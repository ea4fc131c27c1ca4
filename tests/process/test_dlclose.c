/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlclose of a library (the plugin, dlclose_plugin.c) that holds a static copy of dlsync,
 * while the process lives on. The program links no dlsync of its own.
 *
 *   test_process_dlclose thread-cache: a thread exports once through the plugin, so it owns
 *     a thread cache of the plugin's copy; the plugin is torn down and dlclose'd (and must
 *     really be unmapped: dlopen(RTLD_NOLOAD) fails), a fork follows, then the thread
 *     exits. Catches a thread-cache key whose destructor outlives the code holding it: the
 *     exiting thread runs the destructor, an address in the unmapped library, and dies with
 *     SIGSEGV, unless the copy deletes its key when unloaded (its ELF destructor
 *     forget_cache_key). The fork catches a fork handler left registered by the copy.
 *
 *   test_process_dlclose loop: 200 rounds of load, export on three short-lived threads (one
 *     of them exiting after the unload), unload. Catches the same crash, and a thread cache
 *     that leaks when its thread outlives the copy (a cache on the heap that only the key
 *     destructor frees): the heap (mallinfo2) and the resident set are bounded over the
 *     last 180 rounds. Sanitizer builds run the rounds without the bounds.
 *
 *   test_process_dlclose graph-pinned, graph-pinned-shared-sim: the plugin's export gives a
 *     capturing consumer an external wait on an event that the graph owns; the plugin is
 *     dlclose'd while the graph lives, then the graph is destroyed, which calls the copy's
 *     release function. Catches a copy that does not pin its library when a graph takes one
 *     of its events (dl_sync__pin_code): the plugin would be unmapped (the test checks with
 *     dlopen(RTLD_NOLOAD)) and the graph's destruction would jump into unmapped code. The
 *     first form has the simulator inside the plugin; the second keeps it in its own shared
 *     library, as a real runtime outlives the plugin.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK_WITHOUT_DLSYNC /* dlsync is the plugin's: the program links none */
#include "check.h"
#include "dlclose_plugin.h"

static void *open_plugin(const char *path, const dlclose_plugin **plugin) {
  void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == NULL) FAIL("dlopen %s: %s", path, dlerror());
  dlclose_plugin_get_fn get;
  *(void **)&get = dlsym(handle, DLCLOSE_PLUGIN_GET);
  if (get == NULL) FAIL("dlsym %s: %s", DLCLOSE_PLUGIN_GET, dlerror());
  *plugin = get();
  return handle;
}

static int is_mapped(const char *path) {
  void *handle = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (handle == NULL) return 0;
  dlclose(handle);
  return 1;
}

static void close_plugin(void *handle, const char *path, int expect_mapped) {
  if (dlclose(handle) != 0) FAIL("dlclose %s: %s", path, dlerror());
  int mapped = is_mapped(path);
  if (mapped != expect_mapped)
    FAIL("after dlclose, %s is %s", path,
         mapped ? "still mapped (something pins it: the test would prove nothing)"
                : "unmapped, though a graph still calls back into it");
}

/* --- a thread that exports through the plugin and exits when told --------------------- */

typedef struct worker {
  const dlclose_plugin *plugin;
  int status;
  char message[512];
  atomic_int step; /* 1: exported; 2: may exit */
  int wait;        /* waits for step 2 before exiting */
} worker;

static void *work(void *arg) {
  worker *w = arg;
  w->status = w->plugin->export_once();
  snprintf(w->message, sizeof w->message, "%s", w->plugin->last_error());
  atomic_store(&w->step, 1);
  while (w->wait && atomic_load(&w->step) != 2) sched_yield();
  return NULL;
}

static void start(pthread_t *thread, worker *w, const dlclose_plugin *plugin, int wait) {
  *w = (worker){.plugin = plugin, .wait = wait};
  CHECK_INT(pthread_create(thread, NULL, work, w), 0);
  while (atomic_load(&w->step) != 1) sched_yield();
  if (w->status != DL_SYNC_OK)
    FAIL("export through the plugin: status %d: %s", w->status, w->message);
}

static void finish(pthread_t thread, worker *w) {
  atomic_store(&w->step, 2);
  CHECK_INT(pthread_join(thread, NULL), 0);
}

/* A child forked after the unload: no fork handler of the unloaded copy may run. */
static void fork_after_unload(void) {
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) _exit(0);
  int status = 0;
  CHECK_INT(waitpid(pid, &status, 0), pid);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    FAIL("a child forked after the unload died (status %#x)", status);
}

static void run_thread_cache(void) {
  const dlclose_plugin *plugin;
  void *handle = open_plugin(PLUGIN_OWN_SIM, &plugin);
  pthread_t thread;
  static worker w;
  start(&thread, &w, plugin, 1);
  CHECK_INT(plugin->teardown(), DL_SYNC_OK); /* the simulator's stream threads end */
  close_plugin(handle, PLUGIN_OWN_SIM, 0);
  fork_after_unload();
  finish(thread, &w); /* its thread cache belonged to the unmapped copy */
}

/* --- the loop ------------------------------------------------------------------------- */

static size_t heap_in_use(void) {
  struct mallinfo2 info = mallinfo2();
  return info.uordblks + info.hblkhd;
}

static long resident_kib(void) {
  FILE *statm = fopen("/proc/self/statm", "r");
  long size = 0, resident = 0;
  if (statm == NULL) return 0;
  if (fscanf(statm, "%ld %ld", &size, &resident) != 2) resident = 0;
  fclose(statm);
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

enum { ROUNDS = 200, WARMUP = 20, THREADS = 3 };

static void round_trip(void) {
  const dlclose_plugin *plugin;
  void *handle = open_plugin(PLUGIN_OWN_SIM, &plugin);
  pthread_t threads[THREADS];
  static worker workers[THREADS];
  for (int i = 0; i < THREADS - 1; i++) { /* these exit before the unload */
    start(&threads[i], &workers[i], plugin, 0);
    finish(threads[i], &workers[i]);
  }
  start(&threads[THREADS - 1], &workers[THREADS - 1], plugin, 1); /* this one after it */
  CHECK_INT(plugin->teardown(), DL_SYNC_OK);
  close_plugin(handle, PLUGIN_OWN_SIM, 0);
  finish(threads[THREADS - 1], &workers[THREADS - 1]);
}

static void run_loop(void) {
  size_t heap = 0;
  long resident = 0;
  for (int round = 0; round < ROUNDS; round++) {
    if (round == WARMUP) {
      malloc_trim(0);
      heap = heap_in_use();
      resident = resident_kib();
    }
    round_trip();
  }
  malloc_trim(0);
  long heap_growth = (long)heap_in_use() - (long)heap, resident_growth = resident_kib() - resident;
  printf("after %d rounds of %d threads: heap %+ld bytes, resident %+ld KiB\n", ROUNDS - WARMUP,
         THREADS, heap_growth, resident_growth);
#if defined(PROCESS_UNDER_ASAN) || defined(PROCESS_UNDER_TSAN)
  /* The sanitizer's allocator keeps freed blocks (and shadow memory) for a while and
     answers mallinfo2 with zeros; its leak checker looks at the exit instead. */
  (void)heap_growth;
  (void)resident_growth;
#else
  /* A leak of one thread cache (over 200 bytes) per thread would be over 100 KiB. */
  if (heap_growth > 32 * 1024) FAIL("the heap grew by %ld bytes", heap_growth);
  if (resident_growth > 4 * 1024) FAIL("the resident set grew by %ld KiB", resident_growth);
#endif
}

/* --- graphs --------------------------------------------------------------------------- */

#define CHECK_SIM(call)                                             \
  do {                                                              \
    int error_ = (call);                                            \
    if (error_ != 0) FAIL("%s: simulator error %d", #call, error_); \
  } while (0)

static void load_shared_sim(plugin_sim_api *sim) {
  void *library = dlopen(SIM_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (library == NULL) FAIL("dlopen %s: %s", SIM_LIBRARY, dlerror());
#define LOAD(field, name) \
  if ((*(void **)&sim->field = dlsym(library, name)) == NULL) FAIL("dlsym %s: %s", name, dlerror())
  LOAD(backend, "dl_sync_sim_backend");
  LOAD(reset, "dl_sync_sim_reset");
  LOAD(stream_create, "dl_sync_sim_stream_create");
  LOAD(stream_destroy, "dl_sync_sim_stream_destroy");
  LOAD(stream_synchronize, "dl_sync_sim_stream_synchronize");
  LOAD(begin_capture, "dl_sync_sim_stream_begin_capture");
  LOAD(end_capture, "dl_sync_sim_stream_end_capture");
  LOAD(graph_count_nodes, "dl_sync_sim_graph_count_nodes");
  LOAD(graph_destroy, "dl_sync_sim_graph_destroy");
#undef LOAD
}

static void run_graph_pinned(const char *path, int shared_sim) {
  const dlclose_plugin *plugin;
  void *handle = open_plugin(path, &plugin);
  plugin_sim_api sim = plugin->sim;
  if (shared_sim) load_shared_sim(&sim);
  CHECK(sim.backend != NULL);

  /* The consumer captures, the producer does not: the graph gets an external wait on an
     event it owns, which it gives back to the plugin's pool when destroyed. */
  dl_sync_sim_stream *producer, *consumer;
  CHECK_SIM(sim.stream_create(&producer, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(sim.stream_create(&consumer, DL_SYNC_SIM_STREAM_NON_BLOCKING));
  CHECK_SIM(sim.begin_capture(consumer, DL_SYNC_SIM_CAPTURE_THREAD_LOCAL));
  int status = plugin->export_streams(sim.backend(), producer, consumer);
  if (status != DL_SYNC_OK)
    FAIL("export into the capture: status %d: %s", status, plugin->last_error());
  dl_sync_sim_graph *graph = NULL;
  CHECK_SIM(sim.end_capture(consumer, &graph));
  CHECK(graph != NULL);
  size_t external_waits = 0;
  CHECK_SIM(sim.graph_count_nodes(graph, NULL, &external_waits, NULL));
  CHECK_INT(external_waits, 1);

  close_plugin(handle, path, 1);
  CHECK_SIM(sim.graph_destroy(graph)); /* calls the plugin's copy */
  CHECK_SIM(sim.stream_synchronize(producer));
  CHECK_SIM(sim.stream_destroy(producer));
  CHECK_SIM(sim.stream_destroy(consumer));
  CHECK_INT(plugin->teardown(), DL_SYNC_OK);
  if (shared_sim) sim.reset();
}

int main(int argc, char **argv) {
  if (argc != 2) FAIL("usage: %s thread-cache|loop|graph-pinned|graph-pinned-shared-sim", argv[0]);
  setvbuf(stdout, NULL, _IONBF, 0);
  if (strcmp(argv[1], "thread-cache") == 0)
    run_thread_cache();
  else if (strcmp(argv[1], "loop") == 0)
    run_loop();
  else if (strcmp(argv[1], "graph-pinned") == 0)
    run_graph_pinned(PLUGIN_OWN_SIM, 0);
  else if (strcmp(argv[1], "graph-pinned-shared-sim") == 0)
    run_graph_pinned(PLUGIN_SHARED_SIM, 1);
  else
    FAIL("unknown mode %s", argv[1]);
  printf("%s: passed\n", argv[1]);
  return 0;
}
