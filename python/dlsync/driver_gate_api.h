/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The part of cuda.h the driver gate of dlsync.audit uses (driver_gate.c), declared here so
 * that the module builds without the toolkit. tests/runtimes/test_runtime_headers.c pins
 * every value against cuda.h where it is installed.
 */
#ifndef DL_SYNC_PY_DRIVER_GATE_API_H_
#define DL_SYNC_PY_DRIVER_GATE_API_H_

#define DL_SYNC_PY_GATE_CONSTANTS(X)                   \
  X(CUDA_SUCCESS, 0)                                   \
  X(CU_MEMHOSTALLOC_PORTABLE, 0x01)                    \
  X(CU_MEMHOSTALLOC_DEVICEMAP, 0x02)                   \
  X(CU_STREAM_WAIT_VALUE_GEQ, 0x0)                     \
  X(CU_STREAM_NON_BLOCKING, 0x1)                       \
  X(CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 19)       \
  X(CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1, 92) \
  X(CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR, 123)

#ifndef DL_SYNC_PY_GATE_CONSTANTS_ONLY /* the header test reads the list alone */

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

#define DL_SYNC_PY_GATE_CONSTANT(name, value) name = value,
enum { DL_SYNC_PY_GATE_CONSTANTS(DL_SYNC_PY_GATE_CONSTANT) };
#undef DL_SYNC_PY_GATE_CONSTANT

/* The ABI each name has at the CUDA 12.0 API, the version dlsync's driver backend asks for
   (cudaTypedefs.h's PFN_<name>_v<version> typedefs: cuStreamWaitValue32 is _v11070's,
   cuMemHostGetDevicePointer _v3020's, cuCtxPushCurrent and cuCtxPopCurrent _v4000's). */
#define DL_SYNC_PY_GATE_CALLS(X)                                                              \
  X(cuStreamGetCtx, (void *stream, void **context))                                           \
  X(cuCtxPushCurrent, (void *context))                                                        \
  X(cuCtxPopCurrent, (void **context))                                                        \
  X(cuCtxGetDevice, (int *device))                                                            \
  X(cuDeviceGetAttribute, (int *value, int attribute, int device))                            \
  X(cuMemHostAlloc, (void **pointer, size_t size, unsigned flags))                            \
  X(cuMemHostGetDevicePointer, (CUdeviceptr * device_pointer, void *pointer, unsigned flags)) \
  X(cuStreamWaitValue32, (void *stream, CUdeviceptr address, uint32_t value, unsigned flags)) \
  X(cuStreamGetFlags, (void *stream, unsigned *flags))

#endif /* DL_SYNC_PY_GATE_CONSTANTS_ONLY */
#endif /* DL_SYNC_PY_DRIVER_GATE_API_H_ */
