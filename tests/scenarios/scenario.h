/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Whole programs at random: several "frameworks" exchange tensors through dlsync on the
 * simulated device, from several host threads, with every stream kind, stream argument,
 * ordering mechanism, import through a producer's exchange table (single and grouped; tables
 * that answer a stream, NULL, or fail), release, capture and shutdown (generate.c). The runner
 * (run.c) executes a program's operations one at a time, each on its own host thread, in program
 * order, and judges the run by oracles that share no code with dlsync: the simulator's race
 * checker, the values every read sees, the capture table and the release table as this
 * model predicts them from its own bookkeeping, where each deleter ran and how often, no
 * capture invalidated, nothing left pending. shrink.c reduces a failing program and prints
 * it as a C test case.
 */
#ifndef DL_SYNC_TEST_SCENARIO_H_
#define DL_SYNC_TEST_SCENARIO_H_

#include <stdint.h>
#include <stdio.h>

#include "../support/sanitizers.h"

/* A sanitizer's build: fewer programs, longer limits, no fork with threads alive. */
#if defined(THREAD_SANITIZER) || defined(ADDRESS_SANITIZER)
#define SANITIZED 1
#endif

enum {
  MAX_FRAMEWORKS = 4,
  MAX_THREADS = 8,
  MAX_DEVICES = 2,
  STREAMS_PER_DEVICE = 2, /* each framework's own, per device */
  MAX_OPS = 160,
  MAX_SLOTS = 24, /* tensors alive at once */
  MAX_CAPTURES = 4,
  WORDS = 16 /* per tensor */
};

typedef enum op_kind {
  OP_PRODUCE,        /* framework writes a new tensor into slot, on its stream */
  OP_CONSUME,        /* consumer framework reads slot on a stream, ordered by a mechanism */
  OP_RELEASE,        /* the consumer releases slot after its read */
  OP_CAPTURE_BEGIN,  /* a capture begins on a framework's stream, in a mode */
  OP_CAPTURE_END,    /* it ends; the graph is instantiated and launched twice there */
  OP_GRAPH_DESTROY,  /* the graph and its executable go, once their launches are done */
  OP_POLL,           /* dl_sync_release_poll */
  OP_HOST_SYNC,      /* the program synchronizes the device */
  OP_SHUTDOWN,       /* dl_sync_shutdown */
  OP_RELEASE_THREAD, /* dlsync's release thread started (mode 1) or stopped (0) */
  OP_FORK,           /* a child process checks that it runs none of the parent's releases */
  OP_IMPORT,         /* the consumer imports slot through its producer's exchange table */
  OP_CONCURRENT,     /* while the thread polls: another thread begins a capture, or destroys
                        a stream, at a moment of its own (mode: concurrent_kind) */
  OP_KINDS
} op_kind;

/* What another thread does while OP_CONCURRENT's thread polls. */
enum { CONCURRENT_CAPTURE, CONCURRENT_DESTROY, CONCURRENT_KINDS };
enum { CONCURRENT_QUIET = 2 }; /* a mode bit: no poll while the other thread acts */

/* How an import is made (OP_IMPORT's mechanism). */
enum {
  IMPORT_SINGLE,
  IMPORT_GROUPED,
  IMPORT_N0, /* no import: the read runs on the stream the table names (N0) */
  IMPORT_KINDS
};

/* What a producer's exchange table answers (dlsync/exchange.h). */
typedef enum table_kind {
  TABLE_CURRENT,          /* current_work_stream: the stream the producer works on now */
  TABLE_NULL,             /* NULL: the producer works on the legacy default stream */
  TABLE_STREAM_FAILS,     /* current_work_stream fails (-1) */
  TABLE_CONVERSION_FAILS, /* the conversion fails, or answers 0 and no tensor */
  TABLE_KINDS
} table_kind;

typedef enum order_mechanism {
  BY_EXPORT,
  BY_PUSH_DEP,
  BY_GROUP,
  BY_TENSOR_EVENT,
  BY_GROUP_TENSOR, /* a group holding the tensor's event */
  BY_HOST_WAIT,    /* the host waits for the tensor's event (dl_sync_tensor_synchronize) */
  BY_GROUP_TABLE,  /* a group holding the producer's table (dl_sync_group_add_exchange_api) */
  MECHANISMS
} order_mechanism;

/* Where the consumer reads, and how it names its stream. */
typedef enum consumer_kind {
  ON_EXPLICIT,   /* one of the consumer framework's streams */
  ON_LEGACY,     /* the device's legacy default stream (None, 1; ROCm: None, 0) */
  ON_PER_THREAD, /* the calling thread's per-thread default stream (2; CUDA only) */
  NO_SYNC,       /* -1: the consumer synchronized the producer's stream itself first */
  BAD_ARGUMENT,  /* an argument the table refuses (CUDA 0, ROCm 1): EINVAL, no read */
  CONSUMER_KINDS
} consumer_kind;

typedef struct op {
  uint8_t kind;      /* op_kind */
  uint8_t thread;    /* the host thread that makes the calls */
  uint8_t framework; /* producer, consumer, capture owner */
  uint8_t device;
  uint8_t stream; /* index among the framework's streams of the device */
  uint8_t slot;   /* tensor slot; a capture's slot for captures */
  uint8_t mechanism;
  uint8_t consumer_kind;
  uint8_t name_legacy_by_none; /* ON_LEGACY by export: stream=None, else the integer */
  uint8_t mode; /* capture mode; release thread: start (1) or stop (0); import: a second
                   tensor in the group (1); concurrent: concurrent_kind */
} op;

typedef struct program {
  uint64_t seed;
  uint8_t frameworks, threads, devices;
  uint8_t rocm;                           /* every framework on kDLROCM (else kDLCUDA) */
  uint8_t hip_rules;                      /* the simulator follows HIP's query rules */
  uint8_t participates[MAX_FRAMEWORKS];   /* names its reuse stream */
  uint8_t records_events[MAX_FRAMEWORKS]; /* records a per-tensor event on each tensor */
  uint8_t tables[MAX_FRAMEWORKS];         /* its exchange table: table_kind */
  uint8_t legacy_tensors[MAX_FRAMEWORKS]; /* makes pre-1.0 tensors (DLManagedTensor) */
  uint8_t none_is_no_sync; /* the capture policy DL_SYNC_CAPTURE_NONE_IS_NO_SYNC (else strict) */
  uint8_t non_blocking[MAX_FRAMEWORKS][MAX_DEVICES][STREAMS_PER_DEVICE];
  int op_count;
  op ops[MAX_OPS];
} program;

/* Variants that leave one dlsync call out: the negative controls. */
typedef enum variant {
  WITH_DLSYNC,
  SKIP_EXPORT,         /* an export's ordering not made */
  DROP_WAIT,           /* a dependency, group or tensor-event wait not made */
  DELETER_NOT_RELEASE, /* the deleter called where the release was */
  BARE_CONVERSION,     /* an import replaced by the table's bare conversion */
  VARIANTS
} variant;

/* What a run found. */
typedef struct verdict {
  int failed;         /* an oracle failed */
  char why[512];      /* the first failure, in words */
  int class_;         /* which oracle, for shrinking: FAILURE_* */
  uint64_t races;     /* the race checker's count */
  int64_t mismatches; /* wrong values read */
  int affected;       /* ops the variant changed */
  long calls;         /* dlsync calls made */
} verdict;

enum {
  FAILURE_NONE,
  FAILURE_RACE,
  FAILURE_VALUE,
  FAILURE_STATUS,
  FAILURE_CAPTURE,
  FAILURE_DELETER,
  FAILURE_PENDING,
  FAILURE_FORK,
  FAILURE_SETUP
};

/* What the runs made, over all runs of the process (for the summary). */
typedef struct run_counts {
  long statuses[8]; /* dlsync answers: 0-3 the release results, 4 EINVAL, 5 ECAPTURE, 6 other */
  long captures, graphs_launched, forks, host_syncs, shutdowns, deleters_on_release_thread;
  long ops_given[OP_KINDS]; /* operations handed to a thread, by kind */
  long ops_made[OP_KINDS];  /* of those, made (the others' preconditions did not hold) */
  long mechanisms[MECHANISMS], consumer_kinds[CONSUMER_KINDS];
  long imports[IMPORT_KINDS], imports_refused, imports_two_tensors, import_tables[TABLE_KINDS];
  long concurrent[CONCURRENT_KINDS], concurrent_polls; /* made, and the polls they overlapped */
  long concurrent_on_deferred[CONCURRENT_KINDS]; /* under HIP's rules, a release deferred there */
  long legacy_tensors;                           /* tensors made as DLManagedTensor (pre-1.0) */
  long none_no_sync; /* stream=None during the producer's capture, no sync by the policy */
} run_counts;
extern run_counts program_counts;

void program_generate(program *p, uint64_t seed);
/* Runs p (a fresh simulator, dlsync shut down after) and judges it. */
verdict program_run(const program *p, variant v, int verbose);
/* Reduces p to a smaller program that still fails the same way (in place). */
void program_shrink(program *p, variant v, int failure_class);
/* p as C: a program literal and a test that runs it. */
void program_print_c(const program *p, variant v, FILE *out);
const char *op_kind_name(int kind);

#endif
