/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One entry point of the CUDA driver that the driver backend (cuda_driver.c) loaded, for
 * code built together with the library that needs a driver call dlsync itself never makes:
 * the Python module's ordering audit holds a stream with cuStreamWaitValue32
 * (python/dlsync/driver_gate.c). Found as the backend finds its own: libcuda.so.1 through
 * the loader (DL_SYNC_LIBCUDA names another file), cuInit once, then cuGetProcAddress at the
 * backend's API version (DL_SYNC__CUDA_DRIVER_API, 12.0) with the legacy default stream's
 * semantics, so that the ABI is the one cuda.h gives that name at 12.0. Not installed.
 */
#ifndef DL_SYNC_CUDA_DRIVER_ENTRY_H_
#define DL_SYNC_CUDA_DRIVER_ENTRY_H_

/* 0 with *address set (NULL when this driver has no such entry point at 12.0); else the
   driver's code (cuInit's or cuGetProcAddress's), or -1 when no driver could be loaded
   (dl_sync_backend_runtime(dl_sync_cuda_backend(), ...) says why). Names for a code:
   dl_sync_cuda_backend()->error_name. */
int dl_sync__cuda_driver_entry_point(const char *name, void **address);

#endif /* DL_SYNC_CUDA_DRIVER_ENTRY_H_ */
