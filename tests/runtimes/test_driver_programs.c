/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Whole programs at random over the fake CUDA driver, with contexts and green contexts
 * (driver_program.h), judged by oracles that speak only of cuda.h:
 *   test_driver_programs                  a fixed set of seeds, then the negative controls
 *   test_driver_programs --seconds N      random seeds for N seconds (local and CI runs)
 *   test_driver_programs --seed S         one program, its operations printed (--variant V
 *                                         first: under control V, 1-3)
 *   test_driver_programs --programs N --first S   the fixed set
 * The controls (an ordering not made, a release replaced by the deleter, the producer's
 * legacy stream named from another context of its device) must be caught in at least 90 %
 * of the programs where they changed something. Every run prints how many
 * operations of each kind were made, over which contexts, callers and mechanisms.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dlsync/dlsync.h"
#include "driver_program.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static const char *const variant_names[DP_VARIANTS] = {
    "with dlsync", "ordering skipped", "deleter for release", "producer named from elsewhere"};

/* One program and its controls; 0 when it passed (and the controls are tallied). */
static int run_seed(uint64_t seed, int controls, long *mattered, long *caught) {
  dp_program p;
  dp_generate(&p, seed, dp_world_green());
  dp_verdict r = dp_run(&p, DP_WITH_DLSYNC, 0);
  if (r.failed) {
    fprintf(stderr, "seed %llu failed: %s\n", (unsigned long long)seed, r.why);
    dp_print(&p, stderr);
    return 1;
  }
  for (int v = 1; controls && v < DP_VARIANTS; v++) {
    dp_verdict c = dp_run(&p, (dp_variant)v, 0);
    if (c.affected == 0) continue;
    mattered[v]++;
    caught[v] += c.failed;
  }
  return 0;
}

static void print_counts(long programs, double seconds) {
  static const char *const kinds[DP_KINDS] = {"produce",  "consume", "release",
                                              "complete", "poll",    "shutdown"};
  static const char *const mechanisms[M_KINDS] = {
      "export", "push_dep", "group", "tensor wait", "group of the tensor", "host wait"};
  static const char *const args[ARG_KINDS] = {"None", "1", "2", "handle", "0", "-1"};
  static const char *const contexts[DP_CONTEXTS] = {"P0", "X0", "P1", "X1", "G0", "H0"};
  const dp_counts *t = &dp_totals;
  printf(
      "%ld programs in %.1f s over %s contexts; the counts are of every run, the controls' "
      "too\n",
      programs, seconds,
      dp_world_green() ? "six (G0 and H0 green)" : "four (no green ones: driver before 12.4)");
  printf("operations made/given:");
  for (int k = 0; k < DP_KINDS; k++)
    printf(" %s %ld/%ld", kinds[k], t->ops_made[k], t->ops_given[k]);
  printf("\norderings:");
  for (int m = 0; m < M_KINDS; m++) printf(" %s %ld", mechanisms[m], t->mechanisms[m]);
  printf("\nexport arguments:");
  for (int a = 0; a < ARG_KINDS; a++) printf(" %s %ld", args[a], t->args[a]);
  printf("\ncallers: none %ld", t->callers[0]);
  for (int c = 0; c < DP_CONTEXTS; c++) printf(" %s %ld", contexts[c], t->callers[c + 1]);
  printf("\nproducer contexts:");
  for (int c = 0; c < DP_CONTEXTS; c++) printf(" %s %ld", contexts[c], t->producer_contexts[c]);
  printf("\nconsumer contexts:");
  for (int c = 0; c < DP_CONTEXTS; c++) printf(" %s %ld", contexts[c], t->consumer_contexts[c]);
  printf(
      "\norderings with another context current %ld, judged while a write was pending %ld, "
      "into a capture %ld; other threads' captures around calls %ld\n",
      t->other_caller, t->pending_orderings, t->captured_orderings, t->bystanders);
  printf(
      "releases ordered on the reuse stream %ld, deferred %ld; refusals: EINVAL %ld, "
      "ECAPTURE %ld, a green context's pool filled elsewhere (ENOTSUP) %ld\n",
      t->reuse_ordered, t->deferred, t->einval_rows, t->ecapture_rows, t->refused_green_pool);
}

/* Catch rates: each control must be caught in at least 90 % of the programs it changed. */
static int print_catch_rates(const long *mattered, const long *caught) {
  int low = 0;
  for (int v = 1; v < DP_VARIANTS; v++) {
    double rate = mattered[v] ? 100.0 * (double)caught[v] / (double)mattered[v] : 0.0;
    printf("control \"%s\": caught in %ld of the %ld programs it changed (%.1f %%)\n",
           variant_names[v], caught[v], mattered[v], rate);
    if (mattered[v] < 10 || rate < 90.0) low = 1;
  }
  return low;
}

int main(int argc, char **argv) {
  double seconds = 0;
  long programs = 120;
  uint64_t first = 1, one = 0;
  int variant = 0, single = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--seconds") == 0)
      seconds = atof(argv[i + 1]);
    else if (strcmp(argv[i], "--programs") == 0)
      programs = atol(argv[i + 1]);
    else if (strcmp(argv[i], "--first") == 0)
      first = strtoull(argv[i + 1], NULL, 10);
    else if (strcmp(argv[i], "--variant") == 0)
      variant = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--seed") == 0) {
      one = strtoull(argv[i + 1], NULL, 10);
      single = 1;
    }
  }
  if (dp_world_open() != 0) {
    fprintf(stderr, "the fake driver (DL_SYNC_LIBCUDA=%s) did not open its world\n",
            getenv("DL_SYNC_LIBCUDA") ? getenv("DL_SYNC_LIBCUDA") : "(unset)");
    return 1;
  }
  if (single) {
    dp_program p;
    dp_generate(&p, one, dp_world_green());
    dp_print(&p, stdout);
    dp_verdict r = dp_run(&p, (dp_variant)(variant % DP_VARIANTS), 1);
    printf("%s: %s (changed %d operations)\n", variant_names[variant % DP_VARIANTS],
           r.failed ? r.why : "passed", r.affected);
    return r.failed;
  }
  long mattered[DP_VARIANTS] = {0}, caught[DP_VARIANTS] = {0}, ran = 0;
  int failed = 0;
  double start = now_s();
  if (seconds > 0) {
    /* A run carried over from a process that ran out of the fake's memory waits. */
    long before = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
      if (strcmp(argv[i], "--carried") != 0) continue;
      char *at = argv[i + 1];
      before = strtol(at, &at, 10);
      for (int v = 1; v < DP_VARIANTS; v++) {
        mattered[v] = strtol(at + 1, &at, 10);
        caught[v] = strtol(at + 1, &at, 10);
      }
    }
    uint64_t seed = first != 1 ? first : (uint64_t)time(NULL) * 1000003u;
    if (before == 0)
      printf("random driver programs from seed %llu for %.0f s\n", (unsigned long long)seed,
             seconds);
    while (now_s() - start < seconds && !failed) {
      /* Each program and its controls take fewer value waits than this. */
      if (dp_world_flags_left() < DP_VARIANTS * 2 * DP_MAX_OPS) {
        char left[32], next[32], carried[128];
        snprintf(left, sizeof left, "%.3f", seconds - (now_s() - start));
        snprintf(next, sizeof next, "%llu", (unsigned long long)seed);
        int used = snprintf(carried, sizeof carried, "%ld", before + ran);
        for (int v = 1; v < DP_VARIANTS; v++)
          used += snprintf(carried + used, sizeof carried - (size_t)used, ",%ld,%ld", mattered[v],
                           caught[v]);
        fflush(stdout);
        execl("/proc/self/exe", argv[0], "--seconds", left, "--first", next, "--carried", carried,
              (char *)NULL);
        perror("re-running in a fresh process");
        return 1;
      }
      failed = run_seed(seed++, 1, mattered, caught);
      ran++;
    }
    if (before > 0)
      printf(
          "%ld programs in all, in fresh processes as the fake's memory waits ran low; the "
          "counts below are the last process's\n",
          before + ran);
    print_counts(ran, now_s() - start);
    print_catch_rates(mattered, caught);
    return failed;
  }
  for (uint64_t seed = first; seed < first + (uint64_t)programs; seed++) {
    failed += run_seed(seed, 1, mattered, caught);
    ran++;
  }
  print_counts(ran, now_s() - start);
  int low = print_catch_rates(mattered, caught);
  if (failed) fprintf(stderr, "%d of %ld programs failed\n", failed, ran);
  if (low) fprintf(stderr, "a control was caught in fewer than 90 %% of its programs\n");
  return failed || low;
}
