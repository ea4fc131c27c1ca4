/* SPDX-License-Identifier: Apache-2.0 */
/* Built several ways (tests/abi/CMakeLists.txt): dlsync's header before or after an
   upstream dlpack/dlpack.h of several versions (tests/abi/stand_in/, or real ones), in C and, as
   coexist.cpp, in C++. One set of types must result, with the exchange table available,
   and the library must be callable with them. */
#if defined(UPSTREAM_FIRST)
#include <dlpack/dlpack.h>
#include <dlsync/dlsync.h>
#else
#include <dlsync/dlsync.h>
#include <dlpack/dlpack.h>
#endif

#include <stdio.h>
#include <string.h>

#ifdef __cplusplus
#define COEXIST_ASSERT(cond, what) static_assert(cond, what)
#else
#define COEXIST_ASSERT(cond, what) _Static_assert(cond, what)
#endif

COEXIST_ASSERT(DLPACK_MAJOR_VERSION == 1, "a 1.x DLPack is in use");
/* Which header's declarations are in use: upstream's when it came first (or was named by
   DL_SYNC_DLPACK_HEADER), dlsync's otherwise. */
#if defined(UPSTREAM_FIRST) || defined(DL_SYNC_DLPACK_HEADER)
#ifdef DL_SYNC_OWNS_DLPACK_TYPES
#error "dlsync declared the DLPack types although an upstream header was there first"
#endif
#ifdef EXPECT_MINOR
COEXIST_ASSERT(DLPACK_MINOR_VERSION == EXPECT_MINOR, "upstream's version is in use");
#endif
#else
#ifndef DL_SYNC_OWNS_DLPACK_TYPES
#error "dlsync's own declarations are expected when it comes first"
#endif
COEXIST_ASSERT(DLPACK_MINOR_VERSION == 3, "dlsync declares DLPack 1.3");
#endif

static int deleted;
static void delete_tensor(DLManagedTensorVersioned *self) {
  (void)self;
  deleted++;
}

static int current_work_stream(DLDeviceType device_type, int32_t device_id, void **out) {
  (void)device_type;
  (void)device_id;
  *out = NULL;
  return 0;
}

int main(void) {
  DLPackExchangeAPI api;
  memset(&api, 0, sizeof api);
  api.header.version.major = DLPACK_MAJOR_VERSION;
  api.header.version.minor = DLPACK_MINOR_VERSION;
  api.current_work_stream = current_work_stream;

  DLDevice device = {kDLCUDA, 0};
  dl_sync_stream out;
  int needs_sync = 0;
  int status = dl_sync_stream_from_arg(device, dl_sync_stream_arg_int(2), &out, &needs_sync);

  /* A CPU tensor of the upstream type goes through dlsync's tensor API. */
  DLManagedTensorVersioned tensor;
  memset(&tensor, 0, sizeof tensor);
  tensor.version.major = DLPACK_MAJOR_VERSION;
  tensor.deleter = delete_tensor;
  tensor.dl_tensor.device.device_type = kDLCPU;
  int has_event = dl_sync_tensor_has_event(&tensor);
  tensor.deleter(&tensor);

  printf("DLPack %d.%d in use (%s), exchange table v%u.%u, from_arg -> %s, has_event %d\n",
         DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION,
#ifdef DL_SYNC_OWNS_DLPACK_TYPES
         "dlsync's declarations",
#else
         "upstream's declarations",
#endif
         api.header.version.major, api.header.version.minor, dl_sync_status_name(status),
         has_event);
  return status == DL_SYNC_OK && needs_sync == 1 && out.handle == DL_SYNC_STREAM_PER_THREAD &&
                 has_event == 0 && deleted == 1
             ? 0
             : 1;
}
