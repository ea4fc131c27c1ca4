/* SPDX-License-Identifier: Apache-2.0 */
/* DLPack device types: their names (for messages) and their stream families. A leaf:
   it calls nothing. */
#include "internal.h"

static const char *const device_type_names[] = {
    [kDLCPU] = "cpu",
    [kDLCUDA] = "cuda",
    [kDLCUDAHost] = "cuda_host",
    [kDLOpenCL] = "opencl",
    [kDLVulkan] = "vulkan",
    [kDLMetal] = "metal",
    [kDLVPI] = "vpi",
    [kDLROCM] = "rocm",
    [kDLROCMHost] = "rocm_host",
    [kDLExtDev] = "ext_dev",
    [kDLCUDAManaged] = "cuda_managed",
    [kDLOneAPI] = "oneapi",
    [kDLWebGPU] = "webgpu",
    [kDLHexagon] = "hexagon",
    [kDLMAIA] = "maia",
    [kDLTrn] = "trn",
};

enum { DL_SYNC__DEVICE_TYPE_END = sizeof device_type_names / sizeof device_type_names[0] };

const char *dl_sync__device_type_name(int32_t device_type) {
  if (device_type < 0 || device_type >= DL_SYNC__DEVICE_TYPE_END) return "unknown";
  const char *name = device_type_names[device_type];
  return name != NULL ? name : "unknown";
}

int dl_sync__family(int32_t device_type) {
  switch (device_type) {
    case kDLCUDA:
    case kDLCUDAHost:
    case kDLCUDAManaged:
      return DL_SYNC__FAMILY_CUDA;
    case kDLROCM:
    case kDLROCMHost:
      return DL_SYNC__FAMILY_ROCM;
    default:
      return device_type > 0 && device_type < DL_SYNC__DEVICE_TYPE_END &&
                     device_type_names[device_type] != NULL
                 ? DL_SYNC__FAMILY_NONE
                 : DL_SYNC__FAMILY_UNKNOWN;
  }
}
