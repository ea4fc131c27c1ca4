/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlsync/sim.h: the simulated device, a model of CUDA stream semantics on pthreads.
 *
 * It lets ordering be tested on any machine: streams run "kernels" (host functions that
 * declare the buffers they read and write) asynchronously and in order on worker threads;
 * events, the legacy default stream's implicit synchronization, per-thread default
 * streams, stream capture into graphs and graph launches behave as CUDA documents them.
 * A happens-before race checker sees every declared access and reports a missing
 * dependency deterministically, whatever the timing; seeded jitter makes unsynchronized
 * programs also fail by value.
 *
 * Return values are CUDA's error numbers (DL_SYNC_SIM_*), 0 on success, so that code
 * written against the CUDA runtime maps one to one. Install the sim behind dlsync with
 * dl_sync_set_backend(kDLCUDA, dl_sync_sim_backend()) (or a ROCm type): the stream
 * handles below are then valid dl_sync_stream handles.
 */
#ifndef DL_SYNC_SIM_H_
#define DL_SYNC_SIM_H_

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "dlsync/backend.h"
#include "dlsync/stream.h"
#include "dlsync/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Error numbers, as cudaError_t. */
#define DL_SYNC_SIM_SUCCESS 0
#define DL_SYNC_SIM_ERROR_INVALID_VALUE 1
#define DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION 2
#define DL_SYNC_SIM_ERROR_INVALID_DEVICE 101
#define DL_SYNC_SIM_ERROR_INVALID_HANDLE 400
#define DL_SYNC_SIM_ERROR_NOT_READY 600
#define DL_SYNC_SIM_ERROR_CAPTURE_UNSUPPORTED 900
#define DL_SYNC_SIM_ERROR_CAPTURE_INVALIDATED 901
#define DL_SYNC_SIM_ERROR_CAPTURE_MERGE 902
#define DL_SYNC_SIM_ERROR_CAPTURE_UNMATCHED 903
#define DL_SYNC_SIM_ERROR_CAPTURE_UNJOINED 904
#define DL_SYNC_SIM_ERROR_CAPTURE_ISOLATION 905
#define DL_SYNC_SIM_ERROR_CAPTURE_IMPLICIT 906
#define DL_SYNC_SIM_ERROR_CAPTURED_EVENT 907
#define DL_SYNC_SIM_ERROR_CAPTURE_WRONG_THREAD 908

/** "simErrorCaptureIsolation" and so on. */
DL_SYNC_API const char *dl_sync_sim_error_name(int error);

typedef struct dl_sync_sim_stream dl_sync_sim_stream;
typedef struct dl_sync_sim_event dl_sync_sim_event;
typedef struct dl_sync_sim_graph dl_sync_sim_graph;
typedef struct dl_sync_sim_graph_exec dl_sync_sim_graph_exec;
typedef struct dl_sync_sim_user_object dl_sync_sim_user_object;

/** The legacy default stream of the current device (also NULL). */
#define DL_SYNC_SIM_STREAM_LEGACY DL_SYNC_HANDLE_CAST(dl_sync_sim_stream *, 1)
/** The calling thread's per-thread default stream on the current device. */
#define DL_SYNC_SIM_STREAM_PER_THREAD DL_SYNC_HANDLE_CAST(dl_sync_sim_stream *, 2)

/** Simulated devices (each with its own legacy stream). */
#define DL_SYNC_SIM_DEVICES 4

/**
 * Resets the simulator: waits for all work, destroys every stream, event and graph, and
 * clears the race checker, the host-thread keys and the jitter. Handles from before are
 * invalid afterwards, except that destroying an event from before succeeds (and frees
 * it), so dlsync's event pool may be drained by dl_sync_shutdown before or after.
 * Call it between independent tests, with no other thread using the simulator.
 */
DL_SYNC_API void dl_sync_sim_reset(void);

/** Delays each operation by a pseudo-random 0..max_us microseconds drawn from seed and
    the operation's identity (stream and position), so a run is reproducible. 0 disables. */
DL_SYNC_API void dl_sync_sim_set_jitter(uint64_t seed, unsigned max_us);

/* Devices: the calling thread's current device, as cudaGetDevice / cudaSetDevice. */
DL_SYNC_API int dl_sync_sim_get_device(int32_t *device);
DL_SYNC_API int dl_sync_sim_set_device(int32_t device);

/* Streams. */
#define DL_SYNC_SIM_STREAM_DEFAULT 0      /**< blocking: synchronizes with the legacy stream */
#define DL_SYNC_SIM_STREAM_NON_BLOCKING 1 /**< does not synchronize with the legacy stream */
/** Creates a stream on the current device. */
DL_SYNC_API int dl_sync_sim_stream_create(dl_sync_sim_stream **stream, unsigned flags);
/** Destroys a stream once its work is done (the call itself does not block). */
DL_SYNC_API int dl_sync_sim_stream_destroy(dl_sync_sim_stream *stream);
DL_SYNC_API int dl_sync_sim_stream_synchronize(dl_sync_sim_stream *stream);
DL_SYNC_API int dl_sync_sim_device_synchronize(void);

/* Kernels: a host function and the buffers it reads and writes. */
#define DL_SYNC_SIM_READ 1
#define DL_SYNC_SIM_WRITE 2
typedef struct dl_sync_sim_access {
  const void *buffer; /**< any address that names the buffer */
  int mode;           /**< DL_SYNC_SIM_READ, DL_SYNC_SIM_WRITE or both */
} dl_sync_sim_access;

/** Enqueues fn(arg) on stream (or captures it as a kernel node). name is kept for race
    reports and must outlive the simulator's use of it (a string literal). A stream of
    another device than the current one is refused (DL_SYNC_SIM_ERROR_INVALID_HANDLE). */
DL_SYNC_API int dl_sync_sim_launch(dl_sync_sim_stream *stream, const char *name,
                                   void (*fn)(void *arg), void *arg,
                                   const dl_sync_sim_access *accesses, size_t count);

/** Declares a host access (e.g. reading results): checked like a kernel's, ordered by
    stream, event and device synchronization of this thread. */
DL_SYNC_API int dl_sync_sim_host_access(const char *name, const void *buffer, int mode);

/* Events, with CUDA's record semantics: a record captures the stream's work so far; a
   wait binds to the record that preceded it; re-recording overwrites. An event belongs
   to the device current at its creation and may only be recorded on that device's
   streams (else DL_SYNC_SIM_ERROR_INVALID_HANDLE); waits may cross devices. The external
   flags are valid only on a capturing stream (else DL_SYNC_SIM_ERROR_INVALID_VALUE). */
#define DL_SYNC_SIM_EVENT_RECORD_EXTERNAL 1 /**< capture an external event-record node */
#define DL_SYNC_SIM_EVENT_WAIT_EXTERNAL 1   /**< capture an external event-wait node */
DL_SYNC_API int dl_sync_sim_event_create(dl_sync_sim_event **event);
DL_SYNC_API int dl_sync_sim_event_destroy(dl_sync_sim_event *event);
DL_SYNC_API int dl_sync_sim_event_record(dl_sync_sim_event *event, dl_sync_sim_stream *stream,
                                         unsigned flags);
DL_SYNC_API int dl_sync_sim_stream_wait_event(dl_sync_sim_stream *stream, dl_sync_sim_event *event,
                                              unsigned flags);
/** DL_SYNC_SIM_SUCCESS when the last record completed (or none was made); the calling
    thread is then ordered after the recorded work, as after a synchronization. Else
    DL_SYNC_SIM_ERROR_NOT_READY. A potentially unsafe call during a capture (see
    dl_sync_sim_prohibited_call); on an event last recorded in a capture it fails with
    DL_SYNC_SIM_ERROR_CAPTURED_EVENT, and invalidates that capture if it is still active. */
DL_SYNC_API int dl_sync_sim_event_query(dl_sync_sim_event *event);
/** Waits for the last record; the calling thread is then ordered after the recorded work.
    The capture rules are those of dl_sync_sim_event_query. */
DL_SYNC_API int dl_sync_sim_event_synchronize(dl_sync_sim_event *event);

/** Which runtime's rules event queries and synchronizations follow (until the next
    dl_sync_sim_reset): CUDA's (the default), or HIP's of ROCm 6.2 to 7.2.0, which read the
    event's last recording stream first: while that stream captures, the query or
    synchronization invalidates its capture and fails with DL_SYNC_SIM_ERROR_CAPTURED_EVENT
    whatever the thread's interaction mode; once it was destroyed, HIP reads freed memory,
    which the simulator counts (dl_sync_sim_destroyed_stream_reads) and answers with
    DL_SYNC_SIM_ERROR_INVALID_HANDLE. Events last recorded on the legacy stream are
    exempt, as on HIP. */
#define DL_SYNC_SIM_QUERY_RULES_CUDA 0
#define DL_SYNC_SIM_QUERY_RULES_HIP 1
DL_SYNC_API int dl_sync_sim_set_query_rules(int rules);
DL_SYNC_API int dl_sync_sim_query_rules(void);
/** Queries or synchronizations (HIP rules) that read a destroyed recording stream. */
DL_SYNC_API uint64_t dl_sync_sim_destroyed_stream_reads(void);

/* Stream capture. */
#define DL_SYNC_SIM_CAPTURE_GLOBAL 0
#define DL_SYNC_SIM_CAPTURE_THREAD_LOCAL 1
#define DL_SYNC_SIM_CAPTURE_RELAXED 2
DL_SYNC_API int dl_sync_sim_stream_begin_capture(dl_sync_sim_stream *stream, int mode);
/** Ends the capture begun on stream; *graph is NULL when the capture failed. */
DL_SYNC_API int dl_sync_sim_stream_end_capture(dl_sync_sim_stream *stream,
                                               dl_sync_sim_graph **graph);
/** status: DL_SYNC_CAPTURE_NONE/ACTIVE/INVALIDATED; id: the capture sequence. */
DL_SYNC_API int dl_sync_sim_stream_capture_info(dl_sync_sim_stream *stream, int32_t *status,
                                                uint64_t *id, dl_sync_sim_graph **graph);
/** Sets the calling thread's capture interaction mode to *mode (DL_SYNC_SIM_CAPTURE_*) and
    writes the previous one there, as cudaThreadExchangeStreamCaptureMode does; a thread
    starts in DL_SYNC_SIM_CAPTURE_GLOBAL. It decides which captures a potentially unsafe
    call of the thread disturbs (dl_sync_sim_prohibited_call). */
DL_SYNC_API int dl_sync_sim_thread_exchange_capture_mode(int *mode);
/** Stands for a call CUDA forbids during capture (cudaMalloc, a synchronization): fails
    with DL_SYNC_SIM_ERROR_CAPTURE_UNSUPPORTED and invalidates the captures it would
    disturb. In the global interaction mode: global-mode captures of any thread, and this
    thread's own non-relaxed captures; thread-local: only the latter; relaxed: none.
    Independently of the modes: using the legacy stream while a blocking stream of its
    device captures fails with DL_SYNC_SIM_ERROR_CAPTURE_IMPLICIT (the capture query
    without invalidating), and synchronizing the device while any of its streams
    captures fails and invalidates those captures. */
DL_SYNC_API int dl_sync_sim_prohibited_call(void);

/* Graphs. */
DL_SYNC_API int dl_sync_sim_graph_destroy(dl_sync_sim_graph *graph);
/** Number of nodes of each kind (any pointer may be NULL). */
DL_SYNC_API int dl_sync_sim_graph_count_nodes(const dl_sync_sim_graph *graph, size_t *kernels,
                                              size_t *external_waits, size_t *external_records);
DL_SYNC_API int dl_sync_sim_graph_instantiate(dl_sync_sim_graph_exec **exec,
                                              dl_sync_sim_graph *graph);
/** Each launch is ordered after stream's earlier work and after the previous launch of
    exec (on whatever stream). Inside it, nodes are ordered by the graph's edges only. */
DL_SYNC_API int dl_sync_sim_graph_launch(dl_sync_sim_graph_exec *exec, dl_sync_sim_stream *stream);
DL_SYNC_API int dl_sync_sim_graph_exec_destroy(dl_sync_sim_graph_exec *exec);

/* User objects: destroy(ptr) runs when the last reference goes (graphs and their
   executable graphs hold references). */
DL_SYNC_API int dl_sync_sim_user_object_create(dl_sync_sim_user_object **object, void *ptr,
                                               void (*destroy)(void *ptr), unsigned refcount);
DL_SYNC_API int dl_sync_sim_user_object_release(dl_sync_sim_user_object *object, unsigned count);
/** Moves count references of object to graph. */
DL_SYNC_API int dl_sync_sim_graph_retain_user_object(dl_sync_sim_graph *graph,
                                                     dl_sync_sim_user_object *object,
                                                     unsigned count);

/* The race checker. */
/** Races found since the last reset. */
DL_SYNC_API uint64_t dl_sync_sim_race_count(void);
/** Writes the first race reports (one a line, both operations named) into buffer;
    returns the number of races. */
DL_SYNC_API uint64_t dl_sync_sim_race_report(char *buffer, size_t size);

/** How many races the checker keeps in structured form (and as lines of the report). */
#define DL_SYNC_SIM_KEPT_RACES 32

/** One side of a race. */
typedef struct dl_sync_sim_race_access {
  const char *name; /**< the kernel (or host access) name given to the simulator */
  int mode;         /**< DL_SYNC_SIM_READ, DL_SYNC_SIM_WRITE or both */
  int agent;        /**< the stream, host thread or graph node that made it; -1 in a graph */
  int is_host;      /**< nonzero for a host thread's dl_sync_sim_host_access */
} dl_sync_sim_race_access;

/** A race: two conflicting accesses to buffer that nothing orders. */
typedef struct dl_sync_sim_race {
  const void *buffer;
  int in_graph; /**< both are kernel nodes of one graph that no edge orders */
  dl_sync_sim_race_access earlier, later;
} dl_sync_sim_race;

/** Copies race number index (0 for the first found) into *race. Fails with
    DL_SYNC_SIM_ERROR_INVALID_VALUE when index is not below the smaller of
    dl_sync_sim_race_count() and DL_SYNC_SIM_KEPT_RACES. Names point to the strings
    given to dl_sync_sim_launch. */
DL_SYNC_API int dl_sync_sim_race_get(uint64_t index, dl_sync_sim_race *race);
/** Forgets races and access history (streams and events stay). */
DL_SYNC_API void dl_sync_sim_race_reset(void);

/*
 * Happens-before between host threads. The checker orders a host thread's accesses and
 * launches after what that thread synchronized itself, and it sees thread creation and
 * join: the simulator's libraries define pthread_create and pthread_join (calling the C
 * library's), so a thread created with pthread_create starts knowing what its creator
 * knew, and pthread_join orders the joining thread after everything the joined thread
 * knew when it exited. A program linked with dlsync_sim (shared) has that for the whole
 * process; dlsync_sim_static has it for the program or shared object it is linked into.
 * No edges come from thrd_create and thrd_join, pthread_tryjoin_np and
 * pthread_timedjoin_np, a creation before the last dl_sync_sim_reset (forgotten with the
 * rest), or calls that reach the C library's definitions directly: from code outside the
 * object that links dlsync_sim_static, in a process that loads dlsync_sim with dlopen, in
 * a program that links dlsync_sim_static and a sanitizer runtime (the sanitizer's
 * definitions are kept).
 *
 * It cannot see mutexes, condition variables, atomics or queues between host threads.
 * Where one thread synchronizes work (a stream, an event, the device) and hands the result
 * to another that way, say so: the first calls dl_sync_sim_host_release(key) after
 * synchronizing, the other dl_sync_sim_host_acquire(key) after it knows the first got
 * there (after taking the lock, after popping the queue item). Everything the releasing
 * thread knew at the release (its accesses, what it synchronized) is then ordered before
 * what the acquiring thread does next. Releases under one key accumulate; acquiring a key
 * nothing was released under orders nothing. key is any address (the queue, the lock);
 * keys are forgotten at dl_sync_sim_reset. Not needed for the ordering the simulator
 * already sees: streams, events, synchronization calls, thread creation and join.
 */
DL_SYNC_API int dl_sync_sim_host_release(const void *key);
DL_SYNC_API int dl_sync_sim_host_acquire(const void *key);

/**
 * pthread_create and pthread_join with the simulator's edges, whatever the process's
 * definitions are: on Windows (where nothing can be interposed on), in a program that
 * links dlsync_sim_static with a sanitizer, or for code outside the object that links the
 * static library. Each returns what the definition it calls returns. A join orders the
 * joining thread after the joined one only through dl_sync_sim_thread_join (or a seen
 * pthread_join), and the joined thread must have been made through either creation.
 */
DL_SYNC_API int dl_sync_sim_thread_create(pthread_t *thread, const pthread_attr_t *attr,
                                          void *(*start)(void *), void *arg);
DL_SYNC_API int dl_sync_sim_thread_join(pthread_t thread, void **result);

/** The dlsync backend over the simulator (install it under CUDA or ROCm types). */
DL_SYNC_API const dl_sync_backend *dl_sync_sim_backend(void);

#ifdef __cplusplus
}
#endif
#endif /* DL_SYNC_SIM_H_ */
