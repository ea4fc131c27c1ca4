/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlsync/release.h: release ordering, the consumer's last use of a tensor ordered before
 * its producer hands the memory out again.
 *
 * A consumer that is done with an imported tensor may still have work that reads it
 * enqueued on its stream. A producer whose allocator is stream-ordered (a caching
 * allocator, a memory pool, cudaMallocAsync) gives the block to the next allocation on its
 * own stream as soon as the tensor's deleter runs, and that work can overwrite the memory
 * while the consumer still reads it. So a consumer releases with dl_sync_tensor_release
 * instead of calling the deleter, and dlsync orders the two without blocking the host:
 *
 * - the producer named its reuse stream (dl_sync_tensor_record_reuse): that stream waits
 *   for the consumer's work (one record, one wait), and the deleter runs now;
 * - it did not (any other producer), or its reuse stream cannot take a wait now (it is
 *   capturing, or its context is gone): the deleter runs once the consumer's work
 *   completed;
 * - the consumer's stream is capturing a graph: the graph keeps the tensor, and the
 *   deleter runs once the graph and its launches are gone. Work enqueued on that stream
 *   before the capture began is no part of the graph: release after it completed (or
 *   before beginning the capture).
 *
 * Where deleters run. A deleter is another library's code: it may take a lock its caller
 * holds (a Python GIL), call the runtime, free memory. dl_sync_tensor_release runs only
 * its own tensor's deleter, and only when it returns DL_SYNC_RELEASED_NOW or _ORDERED.
 * The deleters of deferred releases and of graphs gone run only in the calls that name
 * them: dl_sync_release_poll (which a producer's allocator may call before it grows),
 * dl_sync_shutdown, and dlsync's release thread once started (dl_sync_release_thread_start).
 * An import through an exchange table (dlsync/exchange.h) that fails after the producer
 * handed it a tensor gives that tensor back through its deleter, at once, on the calling
 * thread. No other dlsync call runs a deleter: not exports, dependencies, groups or tensor
 * waits. They run with no lock of dlsync's held, never on a runtime's callback thread.
 *
 * Asking whether a release's work completed never breaks a capture: the event is queried in
 * the relaxed capture interaction mode (the caller's put back) and was recorded outside any
 * capture. Where the runtime reads the event's recording stream to answer (HIP, every
 * version: it may invalidate that stream's capture, read it once destroyed, or take a
 * per-thread stream for the asking thread's own), dlsync asks only about an event on a
 * stream of its own: the release makes that stream wait for the consumer's work and records
 * the event there, so the consumer's stream may begin a capture or be destroyed at any time,
 * and any thread (the release thread too) finishes a release onto a per-thread stream. A
 * query refused by a capture is asked again at the next poll; any other failure (a destroyed
 * or reset context, a lost or reset device, a destroyed execution context's stream) is
 * final: that release is never finished (its tensor is leaked; releasing it again is EINVAL
 * saying so), holds no other up, and dl_sync_shutdown reports it. In a child after fork()
 * the parent's pending releases are never run (their events are not the child's): their
 * tensors are leaked there.
 *
 * The reuse stream is the producer's: dlsync asks whether it captures and, when it does
 * not, makes it wait for the consumer's work. A capture the producer begins on that stream
 * between the two (on another thread) would take the wait into its graph, or be broken by
 * it, and dlsync cannot close that window without the producer. So a producer must not begin
 * a capture on a stream it named as a reuse stream while a consumer may release its tensors
 * (name a stream it never captures on, e.g. its allocator's own), or must name none.
 */
#ifndef DL_SYNC_RELEASE_H_
#define DL_SYNC_RELEASE_H_

#include "dlsync/dlpack.h"
#include "dlsync/stream.h"
#include "dlsync/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/** What dl_sync_tensor_release did (its non-negative results). */
#define DL_SYNC_RELEASED_NOW 0     /**< nothing was pending: the deleter ran */
#define DL_SYNC_RELEASED_ORDERED 1 /**< the reuse stream waits for the consumer; deleter ran */
#define DL_SYNC_RELEASE_DEFERRED 2 /**< the deleter runs once the consumer's work completed */
#define DL_SYNC_RELEASE_GRAPH 3    /**< the deleter runs once the capturing graph is gone */

/** A consumer stream handle meaning "no work of mine reads the tensor any more" (the
    consumer synchronized, or never launched any): the deleter runs now. */
#define DL_SYNC_STREAM_NOTHING_PENDING ((void *)(intptr_t)-1)

/**
 * Releases tensor after the work enqueued so far on consumer, in place of calling its
 * deleter: one of DL_SYNC_RELEASED_NOW, _ORDERED, _DEFERRED or _GRAPH (see above), or
 * a negative status with the tensor still the caller's (its deleter not run, nothing
 * pending). consumer must be on the tensor's own device (EINVAL otherwise, whatever the
 * device); on a device without streams its handle is NULL. DL_SYNC_STREAM_NOTHING_PENDING,
 * or a device without streams, releases now. EINVAL for a tensor already waiting for its
 * release; ENOTSUP for a capturing consumer whose runtime has no graph user objects; a graph
 * that refuses the tensor is the runtime's error, the tensor the caller's. The stream is
 * borrowed for the call.
 */
DL_SYNC_API int dl_sync_tensor_release(DLManagedTensorVersioned *tensor, dl_sync_stream consumer);
DL_SYNC_API int dl_sync_legacy_tensor_release(DLManagedTensor *tensor, dl_sync_stream consumer);

/**
 * dl_sync_tensor_record, also naming the producer's reuse stream: the stream its
 * allocator hands the tensor's memory out again on once the deleter ran (e.g. the block's
 * allocation stream). A consumer with any copy of dlsync then orders that stream after its
 * own work at release, without host synchronization. reuse must be on the tensor's device,
 * and not the per-thread default stream (EINVAL: the consumer's thread would name another
 * one). The legacy default stream is the one this call names: with CUDA contexts, that of
 * the context current here when it is the device's (else the primary context's), whatever
 * context the releasing thread has current. EINVAL for a tensor whose event another copy of
 * dlsync recorded (its record is that copy's to write).
 */
DL_SYNC_API int dl_sync_tensor_record_reuse(DLManagedTensorVersioned *tensor,
                                            dl_sync_stream producer, dl_sync_stream reuse);
DL_SYNC_API int dl_sync_legacy_tensor_record_reuse(DLManagedTensor *tensor, dl_sync_stream producer,
                                                   dl_sync_stream reuse);

/** Runs the deleters of the deferred releases whose work completed (and of graphs gone),
    on this thread; returns how many ran. Never blocks on the device. Its cost is one event
    query per consumer stream with releases waiting, plus one per release finished (on HIP,
    one check of dlsync's own stream per device more). A consumer stream is the runtime's
    stream id where it gives one (cuStreamGetId, hipStreamGetId from HIP 7.1; asked once per
    deferred release), else its handle: a new stream given a destroyed stream's handle does
    not wait behind the old stream's releases. */
DL_SYNC_API int dl_sync_release_poll(void);

/** The releases still pending (deferred, or kept by a graph). */
DL_SYNC_API int dl_sync_release_pending(void);

/**
 * Starts dlsync's release thread, once (it runs until stopped; starting it again does
 * nothing): it finishes deferred releases as their consumer's work completes, polling
 * about once a millisecond while some wait (every 50 ms while only graphs keep releases),
 * and runs their deleters on itself, no lock of dlsync's held. For consumers that never
 * call dl_sync_release_poll. Its deleters must be callable from a thread of their library's
 * choosing (a Python deleter takes the GIL itself). Once started, this copy of dlsync stays
 * mapped for the life of the process (a dlclose of it unmaps nothing); stop the thread before
 * the process's libraries are torn down (a Python module: at exit).
 * A forked child does not have it. ENOMEM when the system makes no thread.
 */
DL_SYNC_API int dl_sync_release_thread_start(void);
/** Stops the release thread, waiting for a deleter it runs to return; nothing when it does
    not run. EINVAL from one of its own deleters (it would wait for itself). */
DL_SYNC_API int dl_sync_release_thread_stop(void);
/** 1 while the release thread runs, else 0. */
DL_SYNC_API int dl_sync_release_thread_running(void);

#ifdef __cplusplus
}
#endif
#endif /* DL_SYNC_RELEASE_H_ */
