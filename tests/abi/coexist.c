/* Built several ways (see tests/CMakeLists.txt): dlsync's header before or after an
   upstream dlpack/dlpack.h of several versions. One set of types must result, with the
   exchange table available, and the library must be callable with them. */
#if defined(UPSTREAM_FIRST)
#include <dlpack/dlpack.h>
#include <dlsync/dlsync.h>
#else
#include <dlsync/dlsync.h>
#include <dlpack/dlpack.h>
#endif

#include <stdio.h>

_Static_assert(DLPACK_MAJOR_VERSION == 1, "a 1.x DLPack is in use");
_Static_assert(sizeof(DLManagedTensorVersioned) == 80, "one DLManagedTensorVersioned");

int main(void) {
  DLPackExchangeAPI api = {.header = {.version = {1, 3}}};
  DLDevice device = {kDLCUDA, 0};
  dl_sync_stream out;
  int needs_sync = 0;
  int status = dl_sync_stream_from_arg(device, dl_sync_stream_arg_int(2), &out, &needs_sync);
  printf("DLPack %d.%d in use, exchange table v%u.%u, from_arg -> %s\n", DLPACK_MAJOR_VERSION,
         DLPACK_MINOR_VERSION, api.header.version.major, api.header.version.minor,
         dl_sync_status_name(status));
  return status == DL_SYNC_OK && needs_sync == 1 && out.handle == DL_SYNC_STREAM_PER_THREAD ? 0 : 1;
}
