/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlsync/dep.h: stream dependencies, the __dlpack__ export step and the capture policy.
 */
#ifndef DL_SYNC_DEP_H_
#define DL_SYNC_DEP_H_

#include "dlsync/stream.h"
#include "dlsync/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Makes all work enqueued so far on src visible to work enqueued later on dst, without
 * blocking the host. Both streams are borrowed for the call.
 *
 * - src and dst must be of one device family (EINVAL otherwise); stream-less devices
 *   have nothing to order and return DL_SYNC_OK.
 * - The same stream on the same device: DL_SYNC_OK with no runtime call.
 * - Otherwise a pooled event is recorded on src and dst waits on it; the event goes
 *   back to the pool at once (a wait binds to the record that preceded it).
 * - Graph capture (both capture states are queried):
 *     neither capturing            -> record + wait
 *     both in the same capture     -> record + wait (a fork/join edge in the graph)
 *     src capturing, dst not       -> DL_SYNC_ECAPTURE (the wait would pull dst into
 *                                     the capture)
 *     src not, dst capturing       -> an external event-wait node is captured; its event
 *                                     belongs to the graph and returns to the pool when
 *                                     the graph is destroyed (ENOTSUP where the runtime
 *                                     lacks external waits or graph user objects)
 *     either capture invalidated,
 *     or two different captures    -> DL_SYNC_ECAPTURE
 * - src capturing and dst the legacy default stream -> DL_SYNC_ECAPTURE: the legacy
 *   stream cannot join a capture.
 */
DL_SYNC_API int dl_sync_push_dep(dl_sync_stream src, dl_sync_stream dst);

/**
 * The whole synchronization step of __dlpack__(stream=consumer): decodes consumer for
 * producer.device (see dl_sync_stream_from_arg), returns for -1 and stream-less devices,
 * else orders the producer's stream before the consumer's (dl_sync_push_dep). Under
 * DL_SYNC_CAPTURE_NONE_IS_NO_SYNC, None while the producer's stream captures is no sync.
 */
DL_SYNC_API int dl_sync_export(dl_sync_stream producer, dl_sync_stream_arg consumer);

/**
 * 1 when dl_sync_export(producer, consumer) would call the runtime (it orders two
 * streams); 0 when it would return without one: -1, a device without streams, the
 * producer's own stream, or an argument it refuses. It calls nothing, never fails and
 * writes no message. A binding holding an interpreter lock (Python's GIL) releases it
 * around the export only when this says 1.
 */
DL_SYNC_API int dl_sync_export_calls_runtime(dl_sync_stream producer, dl_sync_stream_arg consumer);

/** stream=None while the producer captures: DL_SYNC_ECAPTURE, saying what to pass instead. */
#define DL_SYNC_CAPTURE_STRICT 0
/** stream=None while the producer captures: no synchronization (PyTorch's choice). */
#define DL_SYNC_CAPTURE_NONE_IS_NO_SYNC 1

/** Sets the process-wide capture policy (default DL_SYNC_CAPTURE_STRICT). */
DL_SYNC_API int dl_sync_set_capture_policy(int policy);
/** The process-wide capture policy. */
DL_SYNC_API int dl_sync_get_capture_policy(void);

#ifdef __cplusplus
}
#endif
#endif /* DL_SYNC_DEP_H_ */
