/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Whole programs at random over the fake CUDA driver (DL_SYNC_LIBCUDA names it), with the
 * driver backend's contexts among the generator's choices: device 0's primary context P0, a
 * created X0, P1 and X1 on device 1, and from drivers of CUDA 12.4 two green contexts G0 and
 * H0 of device 0. Each context has a non-blocking and a blocking stream; the NULL, legacy and
 * per-thread handles of each device name a default stream of whichever context the calling
 * thread has current (of the device's primary one when none of that device is).
 *
 * The fake driver runs no kernels: a producer's write and a consumer's read are memory waits
 * (cuStreamWaitValue32) on flags of mapped host memory, pending until the program sets the
 * flag. So the oracles speak only of cuda.h's semantics, never of dlsync's code:
 *   - ordering: while a write is pending, an event the test records on the consumer's stream
 *     after dlsync's ordering is not complete (cuEventQuery: CUDA_ERROR_NOT_READY);
 *   - release: a deleter runs while a read of its tensor is pending only where the release
 *     said DL_SYNC_RELEASED_ORDERED, and then the producer's reuse stream waits for the read;
 *     at the end, with every flag set, each deleter has run exactly once;
 *   - contexts: each record dlsync makes lands on a stream of the producer's context, each
 *     wait on one of the consumer's (the fake's log), as cuda.h resolves the handles for the
 *     caller; the caller's current context is the same after each call;
 *   - statuses: what cuda.h's rules predict (EINVAL for a green context's per-thread stream or
 *     a stream argument of 0, ECAPTURE where the legacy stream is blocked by a capture), with
 *     ENOTSUP allowed only where a green context's empty pool would be filled from another
 *     context;
 *   - no call made a prohibited call during another thread's capture (that capture ends with
 *     a graph), used a dead handle, or made a green context current on a second thread.
 */
#ifndef DL_SYNC_TEST_DRIVER_PROGRAM_H_
#define DL_SYNC_TEST_DRIVER_PROGRAM_H_

#include <stdint.h>
#include <stdio.h>

enum {
  DP_MAX_OPS = 96,
  DP_TENSORS = 10, /* tensor slots */
  DP_WORKERS = 4,  /* host threads the operations run on */
  DP_CONTEXTS = 6,
  DP_STREAMS_PER_CONTEXT = 2,                              /* non-blocking, blocking */
  DP_NAMED = DP_CONTEXTS * DP_STREAMS_PER_CONTEXT + 2 * 3, /* + NULL, legacy, per-thread */
  DP_CALLERS = DP_CONTEXTS + 1                             /* none, or a context */
};

enum { P0, X0, P1, X1, G0, H0, NO_CONTEXT = -1 };
enum { S_EXPLICIT, S_LEGACY, S_PER_THREAD }; /* stream kinds, as the fake's log names them */

typedef enum dp_kind {
  DP_PRODUCE,  /* a write on the producer's stream; its event recorded (with a reuse stream) */
  DP_CONSUME,  /* an ordering from the producer to the consumer's stream, then a read there */
  DP_RELEASE,  /* the consumer releases the tensor after its read */
  DP_COMPLETE, /* a pending write or read completes (its flag set) */
  DP_POLL,     /* dl_sync_release_poll */
  DP_SHUTDOWN, /* dl_sync_shutdown, when nothing is pending: the pools go cold */
  DP_KINDS
} dp_kind;

typedef enum dp_mechanism {
  M_EXPORT,       /* dl_sync_export with a stream argument (dp_op.arg) */
  M_PUSH_DEP,     /* dl_sync_push_dep */
  M_GROUP,        /* a group holding the producer's stream */
  M_TENSOR_WAIT,  /* dl_sync_tensor_wait on the tensor's event */
  M_GROUP_TENSOR, /* a group holding the tensor */
  M_HOST_WAIT,    /* dl_sync_tensor_synchronize (once the write completed: it would block) */
  M_KINDS
} dp_mechanism;

/* The stream argument of an export: None, 1, 2, the consumer's handle, 0 (refused) or -1 (no
   synchronization: the consumer reads nothing). */
enum { ARG_NONE, ARG_LEGACY, ARG_PER_THREAD, ARG_HANDLE, ARG_ZERO, ARG_NO_SYNC, ARG_KINDS };

typedef struct dp_op {
  uint8_t kind;
  uint8_t thread;    /* worker */
  int8_t caller;     /* the context current for dlsync's calls, or NO_CONTEXT */
  uint8_t tensor;    /* slot */
  uint8_t stream;    /* named stream: the producer's, or the consumer's */
  uint8_t mechanism; /* consume: dp_mechanism; produce: 0 no event, 1 event, 2 with reuse */
  uint8_t arg;       /* export: ARG_*; complete: which pending flag, at random */
  int8_t capture;    /* consume: the consumer captures in this mode (-1: not) */
  int8_t bystander;  /* another thread captures on this explicit stream meanwhile (-1: none) */
} dp_op;

typedef struct dp_program {
  uint64_t seed;
  int green; /* G0 and H0 exist (drivers of CUDA 12.4 on) */
  int cold;  /* dlsync shut down before (its pools cold) */
  int op_count;
  dp_op ops[DP_MAX_OPS];
} dp_program;

/* The negative controls: one dlsync call left out. */
typedef enum dp_variant {
  DP_WITH_DLSYNC,
  DP_SKIP_ORDERING,       /* the consumer's ordering not made */
  DP_DELETER_NOT_RELEASE, /* the deleter called where the release was */
  DP_OTHER_CONTEXT,       /* the producer's legacy stream named with another context current */
  DP_VARIANTS
} dp_variant;

typedef struct dp_verdict {
  int failed;
  char why[600];
  int affected; /* operations the variant changed while a write or read was pending */
} dp_verdict;

typedef struct dp_counts {
  long ops_given[DP_KINDS], ops_made[DP_KINDS];
  long mechanisms[M_KINDS], args[ARG_KINDS];
  long callers[DP_CALLERS], producer_contexts[DP_CONTEXTS], consumer_contexts[DP_CONTEXTS];
  long other_caller; /* calls made with a context current other than the streams' */
  long pending_orderings, captured_orderings, bystanders, reuse_ordered, deferred;
  long refused_green_pool, einval_rows, ecapture_rows;
} dp_counts;
extern dp_counts dp_totals;

/* The named streams: DP_STREAMS_PER_CONTEXT explicit ones of each context (the first
   non-blocking), then for each device its NULL, legacy and per-thread handles. */
static const int dp_context_device[DP_CONTEXTS] = {0, 0, 1, 1, 0, 0};

static inline int dp_is_green(int context) {
  return context == G0 || context == H0;
}
static inline int dp_named_kind(int named) {
  if (named < DP_CONTEXTS * DP_STREAMS_PER_CONTEXT) return S_EXPLICIT;
  return (named - DP_CONTEXTS * DP_STREAMS_PER_CONTEXT) % 3 == 2 ? S_PER_THREAD : S_LEGACY;
}
static inline int dp_named_device(int named) {
  if (named < DP_CONTEXTS * DP_STREAMS_PER_CONTEXT)
    return dp_context_device[named / DP_STREAMS_PER_CONTEXT];
  return (named - DP_CONTEXTS * DP_STREAMS_PER_CONTEXT) / 3;
}
static inline int dp_named_blocking(int named) {
  return dp_named_kind(named) != S_EXPLICIT || named % DP_STREAMS_PER_CONTEXT == 1;
}
/* The context of the stream a handle names for a caller (cuStreamGetCtx): an explicit
   stream's is the one it was made in; a default handle names the caller's context's stream
   when that context is of the stream's device, else (a caller with none of that device
   current) the stream of the device's primary context, which dlsync makes current for it. */
static inline int dp_resolve(int named, int caller) {
  if (dp_named_kind(named) == S_EXPLICIT) return named / DP_STREAMS_PER_CONTEXT;
  int device = dp_named_device(named);
  if (caller != NO_CONTEXT && dp_context_device[caller] == device) return caller;
  return device == 0 ? P0 : P1;
}
/* cuStreamGetCtx_v2: the per-thread handle "will return CUDA_ERROR_INVALID_HANDLE if a
   green context is current to the calling thread": no stream. */
static inline int dp_no_stream(int named, int caller) {
  return dp_named_kind(named) == S_PER_THREAD && dp_is_green(dp_resolve(named, caller));
}

/* The world: the fake driver loaded, its contexts and streams made (once per process). */
int dp_world_open(void);
int dp_world_green(void);
/* Value waits and flags left for programs in this process. */
int dp_world_flags_left(void);

void dp_generate(dp_program *p, uint64_t seed, int green);
dp_verdict dp_run(const dp_program *p, dp_variant v, int verbose);
void dp_print(const dp_program *p, FILE *out);

#endif
