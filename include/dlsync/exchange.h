/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlsync/exchange.h: helpers for the DLPack C exchange table (DLPackExchangeAPI, DLPack
 * 1.2+; in Python the capsule "dlpack_exchange_api" on the type attribute
 * __dlpack_c_exchange_api__).
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

#ifdef __cplusplus
}
#endif
#endif /* DL_SYNC_EXCHANGE_H_ */
