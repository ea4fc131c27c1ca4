/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The part of the HIP runtime API (AMD platform) that the HIP backend uses, declared here
 * so that dlsync builds without ROCm and loads libamdhip64 at run time. Values are those
 * of hip/hip_runtime_api.h (ROCm 5.2 to 7 agree on every one of them);
 * tests/test_runtime_headers.c pins them against the real header where installed.
 */
#ifndef DL_SYNC_HIP_API_H_
#define DL_SYNC_HIP_API_H_

#include <stddef.h>

/* Every runtime constant dlsync uses, as name and value. */
#define DL_SYNC__HIP_CONSTANTS(X)          \
  X(hipSuccess, 0)                         \
  X(hipErrorOutOfMemory, 2)                \
  X(hipErrorNotInitialized, 3)             \
  X(hipErrorInsufficientDriver, 35)        \
  X(hipErrorNoDevice, 100)                 \
  X(hipErrorInvalidDevice, 101)            \
  X(hipErrorNotReady, 600)                 \
  X(hipErrorStreamCaptureUnsupported, 900) \
  X(hipErrorStreamCaptureUnmatched, 903)   \
  X(hipErrorStreamCaptureWrongThread, 908) \
  X(hipStreamCaptureStatusNone, 0)         \
  X(hipStreamCaptureStatusActive, 1)       \
  X(hipStreamCaptureModeRelaxed, 2)        \
  X(hipStreamNonBlocking, 0x1)             \
  X(hipErrorStreamDetached, 916)           \
  X(hipEventDisableTiming, 0x2)            \
  X(hipStreamSetCaptureDependencies, 0x1)  \
  X(hipUserObjectNoDestructorSync, 0x1)    \
  X(hipGraphUserObjectMove, 0x1)

#ifndef DL_SYNC__HIP_CONSTANTS_ONLY /* the header test reads the list alone */

typedef int hipError_t;
typedef struct ihipStream_t *hipStream_t;
typedef struct ihipEvent_t *hipEvent_t;
typedef struct ihipGraph *hipGraph_t;
typedef struct hipGraphNode *hipGraphNode_t;
typedef struct hipUserObject *hipUserObject_t;
typedef void (*hipHostFn_t)(void *user_data);

#define DL_SYNC__HIP_CONSTANT(name, value) name = value,
enum { DL_SYNC__HIP_CONSTANTS(DL_SYNC__HIP_CONSTANT) };
#undef DL_SYNC__HIP_CONSTANT

/* Entry points every supported version exports (ROCm 5.2 on). */
#define DL_SYNC__HIP_CALLS(X)                                                                   \
  X(hipError_t, hipRuntimeGetVersion, (int *version))                                           \
  X(hipError_t, hipGetLastError, (void))                                                        \
  X(hipError_t, hipPeekAtLastError, (void))                                                     \
  X(hipError_t, hipGetDeviceCount, (int *count))                                                \
  X(hipError_t, hipGetDevice, (int *device))                                                    \
  X(hipError_t, hipSetDevice, (int device))                                                     \
  X(hipError_t, hipEventCreateWithFlags, (hipEvent_t * event, unsigned int flags))              \
  X(hipError_t, hipEventDestroy, (hipEvent_t event))                                            \
  X(hipError_t, hipEventRecord, (hipEvent_t event, hipStream_t stream))                         \
  X(hipError_t, hipStreamWaitEvent, (hipStream_t stream, hipEvent_t event, unsigned int flags)) \
  X(hipError_t, hipEventSynchronize, (hipEvent_t event))                                        \
  X(hipError_t, hipEventQuery, (hipEvent_t event))                                              \
  X(hipError_t, hipStreamGetCaptureInfo,                                                        \
    (hipStream_t stream, int *status, unsigned long long *id))                                  \
  X(hipError_t, hipStreamGetCaptureInfo_v2,                                                     \
    (hipStream_t stream, int *status, unsigned long long *id, hipGraph_t *graph,                \
     const hipGraphNode_t **dependencies, size_t *count))                                       \
  X(hipError_t, hipStreamIsCapturing, (hipStream_t stream, int *status))                        \
  X(hipError_t, hipThreadExchangeStreamCaptureMode, (int *mode))                                \
  X(hipError_t, hipStreamCreateWithFlags, (hipStream_t * stream, unsigned int flags))           \
  X(hipError_t, hipStreamDestroy, (hipStream_t stream))                                         \
  X(const char *, hipGetErrorName, (hipError_t error))                                          \
  X(const char *, hipGetErrorString, (hipError_t error))

/* Graph user objects: ROCm 5.3 on. */
#define DL_SYNC__HIP_USER_OBJECT_CALLS(X)                                                     \
  X(hipError_t, hipUserObjectCreate,                                                          \
    (hipUserObject_t * object, void *ptr, hipHostFn_t destroy, unsigned int initial_refcount, \
     unsigned int flags))                                                                     \
  X(hipError_t, hipUserObjectRelease, (hipUserObject_t object, unsigned int count))           \
  X(hipError_t, hipGraphRetainUserObject,                                                     \
    (hipGraph_t graph, hipUserObject_t object, unsigned int count, unsigned int flags))

/* An event-wait node put into a capture through the graph calls (every version has them:
   hipamd rocm-5.2.0 src/hip_hcc.map.in), never through hipEventWaitExternal (see hip.c). */
#define DL_SYNC__HIP_EXTERNAL_WAIT_CALLS(X)                                                     \
  X(hipError_t, hipGraphAddEventWaitNode,                                                       \
    (hipGraphNode_t * node, hipGraph_t graph, const hipGraphNode_t *dependencies, size_t count, \
     hipEvent_t event))                                                                         \
  X(hipError_t, hipStreamUpdateCaptureDependencies,                                             \
    (hipStream_t stream, hipGraphNode_t * dependencies, size_t count, unsigned int flags))

/* A stream's identity (hipStreamGetId), from HIP 7.1; bound when the runtime has it. */
typedef hipError_t (*dl_sync__hip_stream_get_id)(hipStream_t stream, unsigned long long *id);

#endif /* DL_SYNC__HIP_CONSTANTS_ONLY */
#endif /* DL_SYNC_HIP_API_H_ */
