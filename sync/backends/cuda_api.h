/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The part of the CUDA runtime API that the CUDA backend uses, declared here so that
 * dlsync builds without the toolkit and loads libcudart at run time. Values are those of
 * cuda_runtime_api.h and driver_types.h (CUDA 12 and 13 agree on every one of them);
 * tests/test_runtime_headers.c pins them against the real headers where installed.
 */
#ifndef DL_SYNC_CUDA_API_H_
#define DL_SYNC_CUDA_API_H_

#include <stddef.h>

/* Every runtime constant dlsync uses, as name and value. */
#define DL_SYNC__CUDA_CONSTANTS(X)          \
  X(cudaSuccess, 0)                         \
  X(cudaErrorMemoryAllocation, 2)           \
  X(cudaErrorInitializationError, 3)        \
  X(cudaErrorStubLibrary, 34)               \
  X(cudaErrorInsufficientDriver, 35)        \
  X(cudaErrorNoDevice, 100)                 \
  X(cudaErrorNotReady, 600)                 \
  X(cudaErrorSystemDriverMismatch, 803)     \
  X(cudaErrorStreamCaptureUnsupported, 900) \
  X(cudaErrorStreamCaptureUnmatched, 903)   \
  X(cudaErrorStreamCaptureWrongThread, 908) \
  X(cudaStreamCaptureStatusNone, 0)         \
  X(cudaStreamCaptureStatusActive, 1)       \
  X(cudaStreamCaptureModeRelaxed, 2)        \
  X(cudaEventDisableTiming, 0x02)           \
  X(cudaEventWaitDefault, 0x00)             \
  X(cudaEventWaitExternal, 0x01)            \
  X(cudaUserObjectNoDestructorSync, 0x1)    \
  X(cudaGraphUserObjectMove, 0x1)

#ifndef DL_SYNC__CUDA_CONSTANTS_ONLY /* the header test reads the list alone */

typedef int cudaError_t;
typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
typedef struct CUgraph_st *cudaGraph_t;
typedef struct CUgraphNode_st *cudaGraphNode_t;
typedef struct CUuserObject_st *cudaUserObject_t;
typedef struct cudaGraphEdgeData_st cudaGraphEdgeData;
typedef void (*cudaHostFn_t)(void *user_data);

/* Version-independent entry points, exported under these names by libcudart.so.12 and .13. */
#define DL_SYNC__CUDA_CONSTANT(name, value) name = value,
enum { DL_SYNC__CUDA_CONSTANTS(DL_SYNC__CUDA_CONSTANT) };
#undef DL_SYNC__CUDA_CONSTANT

#define DL_SYNC__CUDA_CALLS(X)                                                                  \
  X(cudaError_t, cudaRuntimeGetVersion, (int *version))                                         \
  X(cudaError_t, cudaGetLastError, (void))                                                      \
  X(cudaError_t, cudaGetDeviceCount, (int *count))                                              \
  X(cudaError_t, cudaGetDevice, (int *device))                                                  \
  X(cudaError_t, cudaSetDevice, (int device))                                                   \
  X(cudaError_t, cudaEventCreateWithFlags, (cudaEvent_t * event, unsigned int flags))           \
  X(cudaError_t, cudaEventDestroy, (cudaEvent_t event))                                         \
  X(cudaError_t, cudaEventRecord, (cudaEvent_t event, cudaStream_t stream))                     \
  X(cudaError_t, cudaStreamWaitEvent,                                                           \
    (cudaStream_t stream, cudaEvent_t event, unsigned int flags))                               \
  X(cudaError_t, cudaEventSynchronize, (cudaEvent_t event))                                     \
  X(cudaError_t, cudaEventQuery, (cudaEvent_t event))                                           \
  X(cudaError_t, cudaThreadExchangeStreamCaptureMode, (int *mode))                              \
  X(cudaError_t, cudaUserObjectCreate,                                                          \
    (cudaUserObject_t * object, void *ptr, cudaHostFn_t destroy, unsigned int initial_refcount, \
     unsigned int flags))                                                                       \
  X(cudaError_t, cudaUserObjectRelease, (cudaUserObject_t object, unsigned int count))          \
  X(cudaError_t, cudaGraphRetainUserObject,                                                     \
    (cudaGraph_t graph, cudaUserObject_t object, unsigned int count, unsigned int flags))       \
  X(const char *, cudaGetErrorName, (cudaError_t error))                                        \
  X(const char *, cudaGetErrorString, (cudaError_t error))

/* The capture query differs by version (see docs/runtimes.md):
   CUDA 13 exports the 7-argument form as cudaStreamGetCaptureInfo; CUDA 12 exports the
   6-argument form as cudaStreamGetCaptureInfo_v2 (its plain name is the 3-argument one). */
typedef cudaError_t (*dl_sync__cuda_capture_info_13)(cudaStream_t stream, int *status,
                                                     unsigned long long *id, cudaGraph_t *graph,
                                                     const cudaGraphNode_t **dependencies,
                                                     const cudaGraphEdgeData **edge_data,
                                                     size_t *count);
typedef cudaError_t (*dl_sync__cuda_capture_info_12)(cudaStream_t stream, int *status,
                                                     unsigned long long *id, cudaGraph_t *graph,
                                                     const cudaGraphNode_t **dependencies,
                                                     size_t *count);

/* cudaStreamGetId (12.0): a stream's identity, "unique for the life of the program". */
typedef cudaError_t (*dl_sync__cuda_stream_get_id)(cudaStream_t stream, unsigned long long *id);

#endif /* DL_SYNC__CUDA_CONSTANTS_ONLY */
#endif /* DL_SYNC_CUDA_API_H_ */
