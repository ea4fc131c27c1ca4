/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlsync/exchange.h: the consumer's side of the DLPack C exchange table (DLPackExchangeAPI,
 * DLPack 1.2+; in Python the capsule "dlpack_exchange_api" on the type attribute
 * __dlpack_c_exchange_api__).
 *
 * The table's conversions are all _NoSync: the tensor is ready on the producer's
 * current_work_stream and nowhere else. A consumer that launches on that stream (N0)
 * needs nothing more: dl_sync_stream_from_exchange_api names it. A consumer that runs on
 * its own stream or keeps the tensor (N1) imports each argument with
 * dl_sync_exchange_import (or, for several arguments of one call, through a dependency
 * group: dl_sync_group_add_exchange_import in dlsync/group.h), and later gives the tensor
 * back with dl_sync_tensor_release on its stream (dlsync/release.h). docs/exchange.md
 * shows both paths.
 *
 * The producer's functions are Python-facing: call these with the producer's interpreter
 * lock (the GIL) held, as the table requires.
 */
#ifndef DL_SYNC_EXCHANGE_H_
#define DL_SYNC_EXCHANGE_H_

#include "dlsync/dlpack.h"
#include "dlsync/stream.h"
#include "dlsync/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Longest prev_api chain dlsync follows (a longer one is taken as a cycle). */
#define DL_SYNC_EXCHANGE_MAX_CHAIN 16

/**
 * Asks a producer's exchange table for its current work stream on device (the N0 path:
 * the consumer then runs on that stream and needs no synchronization).
 * The newest table whose major version is 1 (and minor >= 2) is used, walking prev_api
 * past newer majors. EINVAL: NULL api or out, a bad device, a cyclic or over-long chain,
 * a major-1 table older than 1.2. ENOTSUP: no major-1 table, or one without
 * current_work_stream. EBACKEND: the producer's function failed (returned nonzero; from
 * Python, an exception is then set). The stream stays owned by the producer.
 */
DL_SYNC_API int dl_sync_stream_from_exchange_api(const DLPackExchangeAPI *api, DLDevice device,
                                                 dl_sync_stream *out);

/**
 * Imports py_object (a PyObject *, opaque to dlsync) through the producer's table onto
 * the consumer's stream (the N1 path): takes the tensor
 * (managed_tensor_from_py_object_no_sync), asks current_work_stream for the tensor's
 * device, and orders that stream before consumer as dl_sync_push_dep does (one record and
 * one wait, the capture table of dlsync/dep.h; nothing when it is the consumer's own
 * stream). A tensor on a device without streams (CPU) needs no stream work at all:
 * current_work_stream is not asked. The table is chosen as in
 * dl_sync_stream_from_exchange_api.
 *
 * On success *out is the consumer's (it owns the tensor): give it back with
 * dl_sync_tensor_release on a stream of the tensor's device, after the work that reads
 * it. On failure *out is untouched and nothing is the caller's: a tensor the producer
 * returned was given back through its deleter here (the only deleter this call runs),
 * and the object was only passed to the producer's functions.
 *
 * EINVAL: NULL api, py_object or out; a bad consumer device; a cyclic or over-long chain,
 * a major-1 table older than 1.2; a tensor of a DLPack major other than 1 or of an unknown
 * device; a tensor of another device family than the consumer's stream. ENOTSUP: no
 * major-1 table, one without managed_tensor_from_py_object_no_sync or (for a tensor on a
 * device with streams) without current_work_stream. EBACKEND: a producer's function
 * failed (returned nonzero, or no tensor; from Python, an exception is then set).
 * Ordering errors as dl_sync_push_dep (a stream the runtime refuses, e.g. one of another
 * device than the tensor's: EBACKEND naming the stream the producer answered).
 */
DL_SYNC_API int dl_sync_exchange_import(const DLPackExchangeAPI *api, void *py_object,
                                        dl_sync_stream consumer, DLManagedTensorVersioned **out);

#ifdef __cplusplus
}
#endif
#endif /* DL_SYNC_EXCHANGE_H_ */
