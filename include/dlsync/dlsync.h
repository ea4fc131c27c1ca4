/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlsync: stream and event synchronization around DLPack tensor exchange on CUDA and ROCm.
 * The umbrella header; see each area's header for its contract.
 */
#ifndef DL_SYNC_DLSYNC_H_
#define DL_SYNC_DLSYNC_H_

#include "dlsync/version.h"
#include "dlsync/dlpack.h"
#include "dlsync/status.h"
#include "dlsync/stream.h"
#include "dlsync/dep.h"
#include "dlsync/tensor.h"
#include "dlsync/tensor_event.h"
#include "dlsync/release.h"
#include "dlsync/exchange.h"
#include "dlsync/group.h"
#include "dlsync/backend.h"

#endif /* DL_SYNC_DLSYNC_H_ */
