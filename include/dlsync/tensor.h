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
 * dlsync recognizes its tensors by the deleter it installed.
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
 * Makes consumer wait (no host blocking) for the tensor's event. A tensor without a dlsync
 * event (another producer's) is a no-op: DL_SYNC_OK, and dl_sync_last_error() says so.
 * A capturing consumer gets an external event-wait node, and the captured graph keeps the
 * event alive after the tensor is gone. The stream is borrowed for the call.
 */
DL_SYNC_API int dl_sync_tensor_wait(const DLManagedTensorVersioned *tensor, dl_sync_stream consumer);

/** Blocks the host until the tensor's event completed (no-op without one). */
DL_SYNC_API int dl_sync_tensor_synchronize(const DLManagedTensorVersioned *tensor);

/** 1 when the tensor carries a dlsync event, 0 when not, EINVAL for NULL or a corrupt one. */
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
