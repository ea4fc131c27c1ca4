/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlsync declares the runtime constants it uses itself (sync/backends/cuda_api.h,
 * cuda_driver_api.h, hip_api.h, and the Python module's python/dlsync/driver_gate_api.h): this
 * file, compiled against the real headers where they are installed, pins every one of them. It only
 * has to compile.
 */
#define DL_SYNC_PIN(name, value) \
  _Static_assert((name) == (value), #name " differs from the runtime's header");

#ifdef DL_SYNC_PIN_CUDA
#include <cuda.h>
#include <cuda_runtime_api.h>
#define DL_SYNC__CUDA_CONSTANTS_ONLY
#include "backends/cuda_api.h"
#include "backends/cuda_driver_api.h"
DL_SYNC__CUDA_CONSTANTS(DL_SYNC_PIN)
DL_SYNC__CUDA_DRIVER_CONSTANTS(DL_SYNC_PIN)
/* The driver gate of the Python module's audit (python/dlsync/driver_gate.c). */
#define DL_SYNC_PY_GATE_CONSTANTS_ONLY
#include "../../python/dlsync/driver_gate_api.h"
DL_SYNC_PY_GATE_CONSTANTS(DL_SYNC_PIN)
#endif

#ifdef DL_SYNC_PIN_HIP
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__
#endif
#include <hip/hip_runtime_api.h>
#include <hip/hip_version.h>
/* Names newer than the installed header are pinned where a newer header is installed. */
#if HIP_VERSION_MAJOR == 5 && HIP_VERSION_MINOR < 3
#define hipUserObjectNoDestructorSync 0x1 /* ROCm 5.3 */
#define hipGraphUserObjectMove 0x1
#endif
#if HIP_VERSION_MAJOR < 7 /* not in ROCm 5.2's header (Debian's) */
#define hipErrorStreamDetached 916
#endif
#define DL_SYNC__HIP_CONSTANTS_ONLY
#include "backends/hip_api.h"
DL_SYNC__HIP_CONSTANTS(DL_SYNC_PIN)
#endif

int main(void) {
  return 0;
}
