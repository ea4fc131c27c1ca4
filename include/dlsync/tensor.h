/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlsync/tensor.h: per-tensor events owned by the tensor's deleter (the "ingestion" path).
 *
 * A producer records an event when it exports a tensor; the tensor carries it, and a
 * consumer that keeps the tensor makes any stream wait on it later, on any thread. The
 * event lives as long as the tensor (and as long as any graph that waits on it), so no
 * stream pointer is ever kept.
 *
 * How: dl_sync_tensor_record wraps the tensor's manager_ctx and deleter in place (the
 * tensor pointer keeps its identity). When the tensor is deleted, dlsync's deleter puts
 * the producer's manager_ctx and deleter back, releases its reference to the event and
 * calls the producer's deleter (if not NULL) exactly once. The deleter makes no runtime
 * call, so it may run on any thread, with or without a Python GIL, at any time.
 *
 * Every copy of dlsync in a process (frameworks vendor their own) can wait on the event:
 * the tensor carries a versioned owner record, and dlsync recognizes its tensors, from any
 * copy, by the exported deleter it installed (dlsync/tensor_event.h, docs/vendoring.md).
 */
#ifndef DL_SYNC_TENSOR_H_
#define DL_SYNC_TENSOR_H_

#include "dlsync/dlpack.h"
#include "dlsync/stream.h"
#include "dlsync/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Records, on producer, an event that tensor will carry. The tensor must be on a device
 * of producer's family (EINVAL otherwise) and must not be being deleted or recorded by
 * another thread at the same time. Recording again re-records the same event: waits made
 * before keep what they saw, later waits (and later launches of graphs that wait on it)
 * see the new record. ECAPTURE while producer is capturing a graph (the event would
 * belong to the capture). Ownership: the event belongs to the tensor; the stream is
 * borrowed for the call.
 */
DL_SYNC_API int dl_sync_tensor_record(DLManagedTensorVersioned *tensor, dl_sync_stream producer);

/**
 * Makes consumer wait (no host blocking) for the tensor's event, recorded by this copy of
 * dlsync or another, with this copy's backend on the event's native handle. A tensor
 * without a dlsync event (another producer's) is a no-op: DL_SYNC_OK, and
 * dl_sync_last_error() says so. An event this copy cannot use is an error, never OK:
 * ENOTSUP for another tensor-event ABI major, an unknown runtime family, or an event of
 * another runtime family than consumer's. A capturing consumer gets an external
 * event-wait node, and the captured graph keeps the event alive (through the owner
 * copy's retain / release) after the tensor is gone. The stream is borrowed for the call.
 */
DL_SYNC_API int dl_sync_tensor_wait(const DLManagedTensorVersioned *tensor,
                                    dl_sync_stream consumer);

/** Blocks the host until the tensor's event completed (no-op without one; the errors of
    dl_sync_tensor_has_event for an event this copy cannot use). ECAPTURE, the tensor
    unchanged, where the runtime's synchronization would read the stream the event was
    recorded on (HIP 5.7 to 7.2.0) and that stream captures now (its capture would be
    invalidated), is destroyed, or is another thread's per-thread default stream. That
    stream is the producer's: a capture begun on it after dlsync asked and before the
    synchronization is not seen, so a producer must not begin one there while a consumer
    synchronizes the tensor. */
DL_SYNC_API int dl_sync_tensor_synchronize(const DLManagedTensorVersioned *tensor);

/** 1 when the tensor carries a dlsync event this copy can use, 0 when it carries none
    (another producer's tensor), ENOTSUP for a dlsync event of another tensor-event ABI
    major or an unknown runtime family, EINVAL for NULL or a corrupt one. */
DL_SYNC_API int dl_sync_tensor_has_event(const DLManagedTensorVersioned *tensor);

/* The same four for the pre-1.0 DLManagedTensor. */
DL_SYNC_API int dl_sync_legacy_tensor_record(DLManagedTensor *tensor, dl_sync_stream producer);
DL_SYNC_API int dl_sync_legacy_tensor_wait(const DLManagedTensor *tensor, dl_sync_stream consumer);
DL_SYNC_API int dl_sync_legacy_tensor_synchronize(const DLManagedTensor *tensor);
DL_SYNC_API int dl_sync_legacy_tensor_has_event(const DLManagedTensor *tensor);

#ifdef __cplusplus
}
#endif
#endif /* DL_SYNC_TENSOR_H_ */
