/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A stand-in for an upstream dlpack/dlpack.h of version 1.FAKE_DLPACK_MINOR (default 1):
 * the same include guard, version macros and ABI (types, fields, values), declared the way
 * each upstream release declares them, so that dlsync's coexistence with them is tested
 * without a copy of upstream's text. What differs between releases and matters here:
 * 1.0 and 1.1 declare `struct DLManagedTensorVersioned` with no typedef of that name;
 * from 1.2 on there is a typedef, and the C exchange table. Configure with
 * -DDL_SYNC_UPSTREAM_DLPACK_ROOT=<dir holding v1.0/dlpack/dlpack.h, ...> to run the same
 * tests against real upstream headers as well.
 */
#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_
#include <stddef.h>
#include <stdint.h>
#ifndef FAKE_DLPACK_MINOR
#define FAKE_DLPACK_MINOR 1
#endif
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION FAKE_DLPACK_MINOR
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;
typedef enum {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17,
  kDLTrn = 18
} DLDeviceType;
typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;
typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;
typedef struct {
  void *data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape;
  int64_t *strides;
  uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;
#if FAKE_DLPACK_MINOR >= 2
typedef struct DLManagedTensorVersioned DLManagedTensorVersioned;
#endif
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned *self);
  uint64_t flags;
  DLTensor dl_tensor;
};
#if FAKE_DLPACK_MINOR >= 2
typedef int (*DLPackCurrentWorkStream)(DLDeviceType device_type, int32_t device_id, void **out);
typedef struct DLPackExchangeAPIHeader {
  DLPackVersion version;
  struct DLPackExchangeAPIHeader *prev_api;
} DLPackExchangeAPIHeader;
typedef struct DLPackExchangeAPI {
  DLPackExchangeAPIHeader header;
  void *managed_tensor_allocator;
  void *managed_tensor_from_py_object_no_sync;
  void *managed_tensor_to_py_object_no_sync;
  void *dltensor_from_py_object_no_sync;
  DLPackCurrentWorkStream current_work_stream;
} DLPackExchangeAPI;
#endif
#endif
