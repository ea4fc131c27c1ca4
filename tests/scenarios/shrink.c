/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shrinking a failing program: runs of operations are removed, halves first, then smaller
 * ones down to single operations, as long as the program still fails the same way (the
 * runner skips what no longer holds, so every smaller program is a valid one). The result
 * prints as a C test case for tests/scenarios/test_scenarios.c.
 */
#include <string.h>

#include "scenario.h"

static void remove_ops(program *p, int from, int count) {
  memmove(&p->ops[from], &p->ops[from + count],
          (size_t)(p->op_count - from - count) * sizeof p->ops[0]);
  p->op_count -= count;
}

void program_shrink(program *p, variant v, int failure_class) {
  for (int chunk = p->op_count / 2; chunk >= 1; chunk /= 2) {
    for (int from = 0; from + chunk <= p->op_count;) {
      program trial = *p;
      remove_ops(&trial, from, chunk);
      verdict r = program_run(&trial, v, 0);
      if (r.failed && r.class_ == failure_class)
        *p = trial;
      else
        from += chunk;
    }
  }
}

static const char *const variant_names[VARIANTS] = {"WITH_DLSYNC", "SKIP_EXPORT", "DROP_WAIT",
                                                    "DELETER_NOT_RELEASE", "BARE_CONVERSION"};

void program_print_c(const program *p, variant v, FILE *out) {
  fprintf(out, "/* Found by the program generator: seed %llu, shrunk to %d operations. */\n",
          (unsigned long long)p->seed, p->op_count);
  fprintf(out, "static void test_program_of_seed_%llu(void) {\n", (unsigned long long)p->seed);
  fprintf(out, "  static const program p = {\n");
  fprintf(out, "      .seed = %llu, .frameworks = %d, .threads = %d, .devices = %d,\n",
          (unsigned long long)p->seed, p->frameworks, p->threads, p->devices);
  fprintf(out, "      .rocm = %d, .hip_rules = %d, .none_is_no_sync = %d,\n", p->rocm, p->hip_rules,
          p->none_is_no_sync);
  fprintf(out, "      .participates = {%d, %d, %d, %d},\n", p->participates[0], p->participates[1],
          p->participates[2], p->participates[3]);
  fprintf(out, "      .records_events = {%d, %d, %d, %d},\n", p->records_events[0],
          p->records_events[1], p->records_events[2], p->records_events[3]);
  fprintf(out, "      .tables = {%d, %d, %d, %d},\n", p->tables[0], p->tables[1], p->tables[2],
          p->tables[3]);
  fprintf(out, "      .legacy_tensors = {%d, %d, %d, %d},\n", p->legacy_tensors[0],
          p->legacy_tensors[1], p->legacy_tensors[2], p->legacy_tensors[3]);
  fprintf(out, "      .non_blocking = {");
  for (int f = 0; f < MAX_FRAMEWORKS; f++)
    fprintf(out, "%s{{%d, %d}, {%d, %d}}", f ? ", " : "", p->non_blocking[f][0][0],
            p->non_blocking[f][0][1], p->non_blocking[f][1][0], p->non_blocking[f][1][1]);
  fprintf(out, "},\n      .op_count = %d,\n      .ops = {\n", p->op_count);
  for (int i = 0; i < p->op_count; i++) {
    const op *o = &p->ops[i];
    fprintf(out,
            "          {.kind = %s, .thread = %d, .framework = %d, .device = %d, .stream = %d, "
            ".slot = %d, .mechanism = %d, .consumer_kind = %d, .name_legacy_by_none = %d, "
            ".mode = %d},\n",
            op_kind_name(o->kind), o->thread, o->framework, o->device, o->stream, o->slot,
            o->mechanism, o->consumer_kind, o->name_legacy_by_none, o->mode);
  }
  fprintf(out, "      }};\n  expect_passes(&p, %s);\n}\n", variant_names[v]);
}
