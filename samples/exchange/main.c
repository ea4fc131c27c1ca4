/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlsync exchange demo: two frameworks that share nothing but DLPack and dlsync exchange
 * tensors four ways, on the simulated device, and the race checker judges the result.
 *   N0               B runs on A's current work stream (from A's exchange table)
 *   stream argument  B passes its stream to A's __dlpack__; dl_sync_export orders A before it
 *   group            B reads three tensors of A in one kernel on its own stream; a
 *                    dependency group orders A's stream before it once for all three
 *   N1               A records a per-tensor event; B waits on it later, on another thread
 * With --no-sync the same program runs without dlsync's dependencies.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dlsync/dlsync.h>
#include <dlsync/sim.h>

#include "framework_a.h"
#include "framework_b.h"
#include "tracing_backend.h"

enum { TENSOR_ELEMENTS = 4096, MAX_ROUNDS = 16, TENSORS_PER_ROUND = 7 };

typedef struct options {
  int sync;
  long rounds;
  unsigned long long seed;
  long jitter_us;
} options;

static void usage(FILE *out, const char *program) {
  fprintf(out,
          "usage: %s [--no-sync] [--rounds N] [--seed S] [--jitter-us U] [--help]\n"
          "  Framework A produces tensors and framework B consumes them through DLPack,\n"
          "  four ways (N0, stream argument, a group of three, N1 per-tensor event), on the\n"
          "  simulated device.\n"
          "  --no-sync      run without dlsync's dependencies: races must be reported\n"
          "  --rounds N     rounds of the four exchanges (1..%d, default 2)\n"
          "  --seed S       jitter seed (default 1)\n"
          "  --jitter-us U  maximum random delay per operation in microseconds (default 2000)\n",
          program, MAX_ROUNDS);
}

static int parse_long(const char *text, long min, long max, long *out) {
  char *end = NULL;
  errno = 0;
  long value = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < min || value > max) return -1;
  *out = value;
  return 0;
}

/* 0 to run, 1 for --help, 2 for a usage error. */
static int parse(int argc, char **argv, options *o) {
  *o = (options){.sync = 1, .rounds = 2, .seed = 1, .jitter_us = 2000};
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    const char *value = i + 1 < argc ? argv[i + 1] : NULL;
    long number = 0;
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) return 1;
    if (strcmp(arg, "--no-sync") == 0) {
      o->sync = 0;
    } else if (strcmp(arg, "--rounds") == 0 && value &&
               !parse_long(value, 1, MAX_ROUNDS, &number)) {
      o->rounds = number;
      i++;
    } else if (strcmp(arg, "--seed") == 0 && value && !parse_long(value, 0, 1L << 30, &number)) {
      o->seed = (unsigned long long)number;
      i++;
    } else if (strcmp(arg, "--jitter-us") == 0 && value && !parse_long(value, 0, 100000, &number)) {
      o->jitter_us = number;
      i++;
    } else {
      fprintf(stderr, "%s: bad option or value: %s%s%s\n", argv[0], arg, value ? " " : "",
              value && arg[0] == '-' && arg[1] == '-' && strcmp(arg, "--no-sync") ? value : "");
      return 2;
    }
  }
  return 0;
}

static int dlpack_of_a(void *object, dl_sync_stream_arg stream, DLManagedTensorVersioned **out) {
  return fa_dlpack(object, stream, out);
}

static int reusable_dlpack_of_a(void *object, dl_sync_stream_arg stream,
                                DLManagedTensorVersioned **out) {
  return fa_dlpack_reusable(object, stream, out);
}

static long runtime_calls(void) {
  long total = 0;
  for (int op = 0; op < DL_SYNC_OP_COUNT; op++) total += tracing_calls((dl_sync_op)op);
  return total;
}

static int step(const char *title, int status, long *calls_before) {
  long now = runtime_calls();
  if (status != DL_SYNC_OK) {
    fprintf(stderr, "%s failed: %s\n", title, dl_sync_last_error());
    return -1;
  }
  printf("       (%ld runtime call%s by dlsync)\n", now - *calls_before,
         now - *calls_before == 1 ? "" : "s");
  *calls_before = now;
  return 0;
}

/* One line: the GPU runtime each built-in backend found on this machine (the demo itself
   runs on the simulated device). */
static void print_runtimes(void) {
  printf("GPU libraries in this process:");
  const dl_sync_backend *backends[] = {dl_sync_cuda_backend(), dl_sync_cudart_backend(),
                                       dl_sync_hip_backend()};
  for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++) {
    dl_sync_runtime_info info;
    if (dl_sync_backend_runtime(backends[i], &info) == DL_SYNC_OK)
      printf(" %s %d.%d (%s)", backends[i]->name, (int)info.major, (int)info.minor, info.path);
    else
      printf(" %s none", backends[i]->name);
    printf("%s", i + 1 < sizeof backends / sizeof backends[0] ? ";" : "\n");
  }
}

int main(int argc, char **argv) {
  options o;
  int parsed = parse(argc, argv, &o);
  if (parsed != 0) {
    usage(parsed == 1 ? stdout : stderr, argv[0]);
    return parsed == 1 ? 0 : 2;
  }
  dl_sync_set_backend(kDLCUDA, tracing_backend(dl_sync_sim_backend()));
  dl_sync_sim_set_jitter(o.seed, (unsigned)o.jitter_us);
  if (fa_init(o.sync) != 0 || fb_init(o.sync) != 0) {
    fprintf(stderr, "cannot create the simulated streams\n");
    return 1;
  }
  printf(
      "dlsync exchange demo: A produces, B consumes; simulated device, CUDA conventions, "
      "%s\n",
      o.sync ? "with dlsync" : "WITHOUT dlsync (--no-sync)");
  print_runtimes();
  printf("\n");

  fa_tensor *tensors[TENSORS_PER_ROUND * MAX_ROUNDS];
  int count = 0, failed = 0;
  long calls = runtime_calls();
  for (long round = 0; round < o.rounds && !failed; round++) {
    int32_t base = (int32_t)(round * 3000);
    printf("round %ld, N0: B runs on A's current work stream\n", round + 1);
    fa_tensor *t = tensors[count++] = fa_tensor_new(TENSOR_ELEMENTS);
    failed |= fa_fill(t, base + 1) ||
              step("N0", fb_check_on_producer_stream(fa_exchange_api(), t, base + 1), &calls);

    printf("round %ld, stream argument: B asks A to make the data ready on B.main\n", round + 1);
    t = tensors[count++] = fa_tensor_new(TENSOR_ELEMENTS);
    failed |=
        fa_fill(t, base + 1001) ||
        step("stream argument", fb_check_with_stream_argument(dlpack_of_a, t, base + 1001), &calls);

    printf("round %ld, group: B reads three tensors of A in one kernel on B.main\n", round + 1);
    void *three[3];
    int32_t values[3];
    for (int i = 0; i < 3 && !failed; i++) {
      three[i] = tensors[count++] = fa_tensor_new(TENSOR_ELEMENTS);
      values[i] = base + 1501 + 100 * i;
      failed |= fa_fill(three[i], values[i]);
    }
    failed |= failed ||
              step("group", fb_check_three_with_group(fa_exchange_api(), three, values), &calls);

    printf(
        "round %ld, release: B is done with a tensor while its kernel still reads it, and "
        "A's pool reuses the block at once\n",
        round + 1);
    fa_tensor *r = fa_pooled_tensor_new(TENSOR_ELEMENTS);
    failed |= fa_fill(r, base + 2501) ||
              step("release", fb_check_then_release(reusable_dlpack_of_a, r, base + 2501), &calls);
    fa_tensor_release(r); /* A's own reference: the block goes back to A's pool */
    t = tensors[count++] = fa_pooled_tensor_new(TENSOR_ELEMENTS);
    failed |= fa_fill(t, base + 2601);

    printf("round %ld, N1: the tensor carries an event, B waits on it later on another thread\n",
           round + 1);
    t = tensors[count++] = fa_tensor_new(TENSOR_ELEMENTS);
    DLManagedTensorVersioned *m = NULL;
    failed |= fa_fill(t, base + 2001) || fa_dlpack_with_event(t, &m) != DL_SYNC_OK ||
              step("N1", fb_check_later_on_another_thread(m, base + 2001), &calls);
    printf("\n");
  }
  int64_t wrong = fb_finish();
  char report[2048];
  uint64_t races = dl_sync_sim_race_report(report, sizeof report);
  printf(
      "runtime calls by dlsync: %ld records, %ld waits, %ld capture queries, %ld event creations\n",
      tracing_calls(DL_SYNC_OP_EVENT_RECORD), tracing_calls(DL_SYNC_OP_STREAM_WAIT),
      tracing_calls(DL_SYNC_OP_CAPTURE_INFO), tracing_calls(DL_SYNC_OP_EVENT_CREATE));
  printf("race checker: %llu race%s\n%s", (unsigned long long)races, races == 1 ? "" : "s", report);
  printf("values: %lld wrong element%s seen by B\n", (long long)wrong, wrong == 1 ? "" : "s");
  int ok = !failed && races == 0 && wrong == 0;
  printf("verdict: %s\n", ok ? "every read was ordered after its write"
                             : "UNORDERED: B read memory A had not finished writing");
  printf("\nclean-up, after the verdict: A drops its own references (no release is pending)\n");
  for (int i = 0; i < count; i++) fa_tensor_release(tensors[i]);
  fa_shutdown();
  fb_shutdown();
  dl_sync_sim_reset();
  dl_sync_shutdown();
  return ok ? 0 : 1;
}
