/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlsync/group.h: dependency groups, the coalesced form of the consumer's side of an
 * exchange.
 *
 * A consumer that takes several tensors for one call on its own stream (f(a, b, c)) needs
 * each producer's work ordered before that stream once, not once per tensor. A group
 * collects the producers of one call (streams, exchange tables, tensors imported through a
 * table, per-tensor events) and dl_sync_group_wait orders them all before the consumer:
 *   - one record + one wait per distinct producer stream (same handle on the same device
 *     is one stream; the consumer's own stream costs nothing),
 *   - one wait per distinct per-tensor event (equal event handles are one event),
 *   - each stream's capture state queried once, the consumer's included,
 *   - the capture table of dl_sync_push_dep (dlsync/dep.h) applied to every producer
 *     stream, and dl_sync_tensor_wait's rule to every tensor event (a capturing
 *     consumer gets external event-wait nodes). The capture policy for stream=None does
 *     not apply: a legacy-stream consumer of a capturing producer is DL_SYNC_ECAPTURE.
 * Three tensors from one producer stream thus cost 1 record, 1 wait and 2 capture
 * queries instead of 3, 3 and 6.
 *
 *     dl_sync_group group;
 *     dl_sync_group_init(&group, consumer);
 *     dl_sync_group_add_exchange_api(&group, api_of_a, device);   // a and b: same table,
 *     dl_sync_group_add_exchange_api(&group, api_of_b, device);   // asked once
 *     dl_sync_group_add_tensor(&group, c);                        // c's event, if any
 *     dl_sync_group_wait(&group);                                 // then launch f
 *
 * Storage is the caller's (this struct, usually on the stack): nothing is allocated, and a
 * group holds no resource, so it may be discarded at any point without waiting. Streams
 * are borrowed until dl_sync_group_wait returns; a tensor added must not be deleted
 * before then. A group is used by one thread at a time.
 */
#ifndef DL_SYNC_GROUP_H_
#define DL_SYNC_GROUP_H_

#include <stdint.h>

#include "dlsync/dlpack.h"
#include "dlsync/stream.h"
#include "dlsync/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The most distinct producer streams, the most distinct per-tensor events and the most
    distinct (exchange table, device) pairs one group holds between two waits. One more
    is EINVAL: wait, then add the rest to the emptied group. */
#define DL_SYNC_GROUP_MAX 16

/** A dependency group. Every member is private to dl_sync_group_* (the layout is part of
    the ABI of this major version, so that callers can hold it by value). */
typedef struct dl_sync_group {
  uint64_t magic;          /**< set by dl_sync_group_init */
  dl_sync_stream consumer; /**< canonical view of the consumer's stream */
  uint32_t stream_count;
  uint32_t event_count;
  uint32_t table_count;
  uint32_t reserved;
  dl_sync_stream streams[DL_SYNC_GROUP_MAX]; /**< distinct producer streams, canonical */
  struct {
    const DLPackExchangeAPI *api;
    DLDevice device;
  } tables[DL_SYNC_GROUP_MAX]; /**< tables already asked for their current stream */
  struct {
    void *event;
    DLDevice device;
    void *owner;
  } events[DL_SYNC_GROUP_MAX]; /**< distinct per-tensor events */
} dl_sync_group;

/**
 * Starts an empty group for work about to be enqueued on consumer (borrowed until each
 * dl_sync_group_wait returns). EINVAL for a NULL group or a bad device. A consumer on a
 * stream-less device (CPU) makes every wait a no-op.
 */
DL_SYNC_API int dl_sync_group_init(dl_sync_group *group, dl_sync_stream consumer);

/**
 * Adds a producer stream. The consumer's own stream and a stream already in the group
 * cost nothing; stream-less devices have nothing to order. EINVAL: a bad device, a device
 * family other than the consumer's, more than DL_SYNC_GROUP_MAX distinct streams.
 */
DL_SYNC_API int dl_sync_group_add_stream(dl_sync_group *group, dl_sync_stream producer);

/**
 * Adds a producer's current work stream on device, asking its exchange table
 * (current_work_stream, see dl_sync_stream_from_exchange_api) once per distinct table
 * and device in the group. Errors as dl_sync_stream_from_exchange_api and
 * dl_sync_group_add_stream; EINVAL past DL_SYNC_GROUP_MAX distinct tables and devices.
 */
DL_SYNC_API int dl_sync_group_add_exchange_api(dl_sync_group *group, const DLPackExchangeAPI *api,
                                               DLDevice device);

/**
 * Imports py_object (a PyObject *, opaque to dlsync) through the producer's exchange table,
 * as dl_sync_exchange_import does, and adds the producer's current work stream on the
 * tensor's device to the group instead of ordering it now: the arguments of one call
 * that come from one producer stream cost one dependency at dl_sync_group_wait, and
 * current_work_stream is asked once per distinct table and device in the group. A
 * tensor on a device without streams (CPU) adds nothing.
 *
 * On success *out is the caller's (it owns the tensor, ordered once the wait returned;
 * release it with dl_sync_tensor_release). On failure *out is untouched, a tensor the
 * producer returned was given back through its deleter, and the group is as it was.
 * Errors as dl_sync_exchange_import and dl_sync_group_add_exchange_api (a tensor of another
 * device family than the group's consumer: EINVAL).
 *
 *     dl_sync_group_init(&group, consumer);
 *     for (int i = 0; i < 3; i++)   // f(a, b, c)
 *       if (dl_sync_group_add_exchange_import(&group, api, args[i], &tensors[i]) != 0) ...
 *     dl_sync_group_wait(&group);   // one record + one wait from one producer stream
 */
DL_SYNC_API int dl_sync_group_add_exchange_import(dl_sync_group *group,
                                                  const DLPackExchangeAPI *api, void *py_object,
                                                  DLManagedTensorVersioned **out);

/**
 * Adds the tensor's dlsync event (see dlsync/tensor.h). A tensor without one (another
 * producer's) adds nothing: DL_SYNC_OK, and dl_sync_last_error() says so. EINVAL: NULL or
 * corrupt tensor, an event of a device family other than the consumer's, more than
 * DL_SYNC_GROUP_MAX distinct events. The tensor must live until the wait returns.
 */
DL_SYNC_API int dl_sync_group_add_tensor(dl_sync_group *group,
                                         const DLManagedTensorVersioned *tensor);
/** dl_sync_group_add_tensor for the pre-1.0 DLManagedTensor. */
DL_SYNC_API int dl_sync_group_add_legacy_tensor(dl_sync_group *group,
                                                const DLManagedTensor *tensor);

/**
 * Orders every producer of the group before the consumer, without blocking the host, as
 * described at the top of this header; streams first, in the order they were added, then
 * per-tensor events. Whatever the outcome, the group is empty afterwards and ready for
 * the next call on the same consumer. On failure the status is the failing producer's
 * (as dl_sync_push_dep or dl_sync_tensor_wait would return it) and dl_sync_last_error()
 * names that producer; the dependencies made before it stay made, the later producers are
 * not ordered. EINVAL: NULL or uninitialized group, a producer served by another backend
 * than the consumer.
 */
DL_SYNC_API int dl_sync_group_wait(dl_sync_group *group);

#ifdef __cplusplus
}
#endif
#endif /* DL_SYNC_GROUP_H_ */
