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
 * - it did not (any other producer): the deleter runs once the consumer's work completed,
 *   from a later dlsync call of any thread (a few per call), dl_sync_release_poll or
 *   dl_sync_shutdown (which waits for them);
 * - the consumer's stream is capturing a graph: the graph keeps the tensor, and the
 *   deleter runs from a later dlsync call once the graph and its launches are gone. Work
 *   enqueued on that stream before the capture began is no part of the graph: release
 *   after it completed (or before beginning the capture).
 *
 * A deleter never runs on a runtime's callback thread or under a lock of dlsync's, nor
 * from a call that orders or releases onto a capturing stream (the deleter may make a call
 * the capture forbids, such as cudaFree): a later call runs it. In a child after fork()
 * the parent's pending releases are never run (their events are not the child's): their
 * tensors are leaked there.
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
 * pending). A consumer on a device without streams, or DL_SYNC_STREAM_NOTHING_PENDING,
 * releases now. consumer must be on the tensor's device (EINVAL otherwise). EINVAL for a
 * tensor already waiting for its release; ENOTSUP for a capturing consumer whose runtime
 * has no graph user objects; a graph that refuses the tensor is the runtime's error, the
 * tensor the caller's. The stream is borrowed for the call.
 */
DL_SYNC_API int dl_sync_tensor_release(DLManagedTensorVersioned *tensor, dl_sync_stream consumer);
DL_SYNC_API int dl_sync_legacy_tensor_release(DLManagedTensor *tensor, dl_sync_stream consumer);

/**
 * dl_sync_tensor_record, also naming the producer's reuse stream: the stream its
 * allocator hands the tensor's memory out again on once the deleter ran (e.g. the block's
 * allocation stream). A consumer with any copy of dlsync then orders that stream after its
 * own work at release, without host synchronization. reuse must be on the tensor's device,
 * and not the per-thread default stream (EINVAL: the consumer's thread would name another
 * one); the legacy default stream is the one the releasing thread names (with CUDA
 * contexts: of its current context when that is the device's, else the primary one's).
 */
DL_SYNC_API int dl_sync_tensor_record_reuse(DLManagedTensorVersioned *tensor,
                                            dl_sync_stream producer, dl_sync_stream reuse);
DL_SYNC_API int dl_sync_legacy_tensor_record_reuse(DLManagedTensor *tensor, dl_sync_stream producer,
                                                   dl_sync_stream reuse);

/** Runs the deleters of the deferred releases whose work completed (and of graphs gone),
    on this thread; returns how many ran. Never blocks. */
DL_SYNC_API int dl_sync_release_poll(void);

/** The releases still pending (deferred, or kept by a graph). */
DL_SYNC_API int dl_sync_release_pending(void);

#ifdef __cplusplus
}
#endif
#endif /* DL_SYNC_RELEASE_H_ */
