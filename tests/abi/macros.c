/* SPDX-License-Identifier: Apache-2.0 */
/* Every public macro of dlsync expanded once, compiled as C11 and (macros.cpp) as C++17
   under -Wall -Wextra -Wpedantic -Werror, and -Wold-style-cast in C++. */
#include <dlsync/dlsync.h>
#include <dlsync/sim.h>

#include <stdint.h>

#define MACROS_NAME(name, value, message, exception) #name,
static const char *const status_names[] = {DL_SYNC_STATUS_MAP(MACROS_NAME)};

int dl_sync_abi_macros(void);
int dl_sync_abi_macros(void) {
  void *handles[] = {DL_SYNC_STREAM_LEGACY, DL_SYNC_STREAM_PER_THREAD};
  dl_sync_sim_stream *sim_handles[] = {DL_SYNC_SIM_STREAM_LEGACY, DL_SYNC_SIM_STREAM_PER_THREAD};
  const uint64_t values[] = {
      DLPACK_MAJOR_VERSION,
      DLPACK_MINOR_VERSION,
      DLPACK_FLAG_BITMASK_READ_ONLY,
      DLPACK_FLAG_BITMASK_IS_COPIED,
      DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED,
      DL_SYNC_VERSION_MAJOR,
      DL_SYNC_VERSION_MINOR,
      DL_SYNC_VERSION_PATCH,
      DL_SYNC_VERSION_HEX,
      DL_SYNC_MAX_DEVICES,
      DL_SYNC_BACKEND_QUERY_BEFORE_REUSE,
      DL_SYNC_CAPTURE_NONE,
      DL_SYNC_CAPTURE_ACTIVE,
      DL_SYNC_CAPTURE_INVALIDATED,
      DL_SYNC_CAPTURE_STRICT,
      DL_SYNC_CAPTURE_NONE_IS_NO_SYNC,
      DL_SYNC_EXCHANGE_MAX_CHAIN,
      DL_SYNC_GROUP_MAX,
      DL_SYNC_TENSOR_EVENT_MAGIC,
      DL_SYNC_TENSOR_EVENT_ABI_MAJOR,
      DL_SYNC_TENSOR_EVENT_ABI_MINOR,
      DL_SYNC_RUNTIME_FAMILY_CUDA,
      DL_SYNC_RUNTIME_FAMILY_ROCM,
      DL_SYNC_SIM_SUCCESS,
      DL_SYNC_SIM_ERROR_INVALID_VALUE,
      DL_SYNC_SIM_ERROR_MEMORY_ALLOCATION,
      DL_SYNC_SIM_ERROR_INVALID_DEVICE,
      DL_SYNC_SIM_ERROR_INVALID_HANDLE,
      DL_SYNC_SIM_ERROR_NOT_READY,
      DL_SYNC_SIM_ERROR_CAPTURE_UNSUPPORTED,
      DL_SYNC_SIM_ERROR_CAPTURE_INVALIDATED,
      DL_SYNC_SIM_ERROR_CAPTURE_MERGE,
      DL_SYNC_SIM_ERROR_CAPTURE_UNMATCHED,
      DL_SYNC_SIM_ERROR_CAPTURE_UNJOINED,
      DL_SYNC_SIM_ERROR_CAPTURE_ISOLATION,
      DL_SYNC_SIM_ERROR_CAPTURE_IMPLICIT,
      DL_SYNC_SIM_ERROR_CAPTURED_EVENT,
      DL_SYNC_SIM_ERROR_CAPTURE_WRONG_THREAD,
      DL_SYNC_SIM_DEVICES,
      DL_SYNC_SIM_STREAM_DEFAULT,
      DL_SYNC_SIM_STREAM_NON_BLOCKING,
      DL_SYNC_SIM_READ,
      DL_SYNC_SIM_WRITE,
      DL_SYNC_SIM_EVENT_RECORD_EXTERNAL,
      DL_SYNC_SIM_EVENT_WAIT_EXTERNAL,
      DL_SYNC_SIM_CAPTURE_GLOBAL,
      DL_SYNC_SIM_CAPTURE_THREAD_LOCAL,
      DL_SYNC_SIM_CAPTURE_RELAXED,
      DL_SYNC_SIM_KEPT_RACES,
  };
  DLDevice device = {kDLCUDA, 0};
  dl_sync_stream view = dl_sync_stream_view(device, handles[0]);
  return (view.handle == handles[0]) + (sim_handles[1] != sim_handles[0]) + (values[0] == 1) +
         (status_names[0] != NULL);
}
