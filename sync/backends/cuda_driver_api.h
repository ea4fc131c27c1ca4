/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The part of the CUDA driver API (cuda.h) that the CUDA backend uses, declared here so
 * that dlsync builds without the toolkit and loads libcuda.so.1 at run time. Every entry
 * point but cuGetProcAddress_v2 comes from cuGetProcAddress at one fixed API version,
 * DL_SYNC__CUDA_DRIVER_API (12.0): the ABI of each call below is its 12.0 one (for
 * cuStreamGetCaptureInfo, the _v2 form), which every driver from CUDA 12.0 on serves. The
 * one call of green contexts dlsync asks, cuStreamGetGreenCtx, comes at the version that
 * introduced it (12.4), from drivers that have it; cuStreamGetId, which keys deferred
 * releases, is looked up without being required (a driver lacking it keys them by handle).
 * tests/runtimes/test_runtime_headers.c pins the values against cuda.h where installed.
 */
#ifndef DL_SYNC_CUDA_DRIVER_API_H_
#define DL_SYNC_CUDA_DRIVER_API_H_

#include <stddef.h>
#include <stdint.h>

/* Every driver constant dlsync uses, as name and value. */
#define DL_SYNC__CUDA_DRIVER_CONSTANTS(X)           \
  X(CUDA_SUCCESS, 0)                                \
  X(CUDA_ERROR_INVALID_VALUE, 1)                    \
  X(CUDA_ERROR_OUT_OF_MEMORY, 2)                    \
  X(CUDA_ERROR_NOT_INITIALIZED, 3)                  \
  X(CUDA_ERROR_DEINITIALIZED, 4)                    \
  X(CUDA_ERROR_STUB_LIBRARY, 34)                    \
  X(CUDA_ERROR_DEVICE_UNAVAILABLE, 46)              \
  X(CUDA_ERROR_NO_DEVICE, 100)                      \
  X(CUDA_ERROR_INVALID_DEVICE, 101)                 \
  X(CUDA_ERROR_INVALID_CONTEXT, 201)                \
  X(CUDA_ERROR_INVALID_HANDLE, 400)                 \
  X(CUDA_ERROR_NOT_READY, 600)                      \
  X(CUDA_ERROR_CONTEXT_IS_DESTROYED, 709)           \
  X(CUDA_ERROR_SYSTEM_NOT_READY, 802)               \
  X(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, 803)         \
  X(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, 804) \
  X(CUDA_ERROR_MPS_CONNECTION_FAILED, 805)          \
  X(CUDA_ERROR_MPS_CLIENT_TERMINATED, 810)          \
  X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, 900)     \
  X(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, 903)       \
  X(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, 908)    \
  X(CUDA_ERROR_UNKNOWN, 999)                        \
  X(CU_STREAM_CAPTURE_MODE_RELAXED, 2)              \
  X(CU_STREAM_CAPTURE_STATUS_NONE, 0)               \
  X(CU_STREAM_CAPTURE_STATUS_ACTIVE, 1)             \
  X(CU_EVENT_DISABLE_TIMING, 0x2)                   \
  X(CU_EVENT_WAIT_DEFAULT, 0x0)                     \
  X(CU_EVENT_WAIT_EXTERNAL, 0x1)                    \
  X(CU_USER_OBJECT_NO_DESTRUCTOR_SYNC, 1)           \
  X(CU_GRAPH_USER_OBJECT_MOVE, 1)                   \
  X(CU_GET_PROC_ADDRESS_LEGACY_STREAM, 1)

#ifndef DL_SYNC__CUDA_CONSTANTS_ONLY /* the header test reads the list alone */

enum { DL_SYNC__CUDA_DRIVER_API = 12000, DL_SYNC__CUDA_GREEN_CONTEXT_API = 12040 };

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphNode_st *CUgraphNode;
typedef struct CUuserObject_st *CUuserObject;
typedef struct CUgreenCtx_st *CUgreenCtx;
typedef void (*CUhostFn)(void *user_data);

#define DL_SYNC__CUDA_DRIVER_CONSTANT(name, value) name = value,
enum { DL_SYNC__CUDA_DRIVER_CONSTANTS(DL_SYNC__CUDA_DRIVER_CONSTANT) };
#undef DL_SYNC__CUDA_DRIVER_CONSTANT

/* The one symbol looked up by name (exported from CUDA 12.0 on). */
typedef CUresult (*dl_sync__cu_get_proc_address)(const char *symbol, void **pfn, int cuda_version,
                                                 uint64_t flags, int *symbol_status);

#define DL_SYNC__CUDA_DRIVER_CALLS(X)                                                              \
  X(CUresult, cuInit, (unsigned int flags))                                                        \
  X(CUresult, cuDriverGetVersion, (int *version))                                                  \
  X(CUresult, cuDeviceGetCount, (int *count))                                                      \
  X(CUresult, cuDeviceGet, (CUdevice * device, int ordinal))                                       \
  X(CUresult, cuDevicePrimaryCtxRetain, (CUcontext * context, CUdevice device))                    \
  X(CUresult, cuDevicePrimaryCtxRelease, (CUdevice device))                                        \
  X(CUresult, cuCtxGetId, (CUcontext context, unsigned long long *id))                             \
  X(CUresult, cuCtxGetCurrent, (CUcontext * context))                                              \
  X(CUresult, cuCtxSetCurrent, (CUcontext context))                                                \
  X(CUresult, cuCtxGetDevice, (CUdevice * device))                                                 \
  X(CUresult, cuStreamGetCtx, (CUstream stream, CUcontext * context))                              \
  X(CUresult, cuEventCreate, (CUevent * event, unsigned int flags))                                \
  X(CUresult, cuEventDestroy, (CUevent event))                                                     \
  X(CUresult, cuEventRecord, (CUevent event, CUstream stream))                                     \
  X(CUresult, cuStreamWaitEvent, (CUstream stream, CUevent event, unsigned int flags))             \
  X(CUresult, cuEventSynchronize, (CUevent event))                                                 \
  X(CUresult, cuEventQuery, (CUevent event))                                                       \
  X(CUresult, cuThreadExchangeStreamCaptureMode, (int *mode))                                      \
  X(CUresult, cuStreamGetCaptureInfo,                                                              \
    (CUstream stream, int *status, uint64_t *id, CUgraph *graph, const CUgraphNode **dependencies, \
     size_t *count))                                                                               \
  X(CUresult, cuUserObjectCreate,                                                                  \
    (CUuserObject * object, void *ptr, CUhostFn destroy, unsigned int initial_refcount,            \
     unsigned int flags))                                                                          \
  X(CUresult, cuUserObjectRelease, (CUuserObject object, unsigned int count))                      \
  X(CUresult, cuGraphRetainUserObject,                                                             \
    (CUgraph graph, CUuserObject object, unsigned int count, unsigned int flags))                  \
  X(CUresult, cuGetErrorName, (CUresult error, const char **name))                                 \
  X(CUresult, cuGetErrorString, (CUresult error, const char **text))

/* Green contexts (CUDA 12.4): whether a stream, or the calling thread's current context
   (through CU_STREAM_LEGACY), is a green context's. */
typedef CUresult (*dl_sync__cu_stream_get_green_ctx)(CUstream stream, CUgreenCtx *green);
/* cuStreamGetId (CUDA 12.0): a stream's identity, "unique for the life of the program". */
typedef CUresult (*dl_sync__cu_stream_get_id)(CUstream stream, unsigned long long *id);

#endif /* DL_SYNC__CUDA_CONSTANTS_ONLY */
#endif /* DL_SYNC_CUDA_DRIVER_API_H_ */
