/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The runtime under the GPU suites: the CUDA runtime, or with DL_SYNC_TEST_HIP the HIP
 * runtime, spelled with the CUDA names the suites use (HIP mirrors each of them; the
 * mapping below is one line per name so that a missing one fails to compile).
 * GPU_PER_THREAD_BUILD is defined by the build for the suites whose kernels launch on the
 * per-thread default stream.
 */
#ifndef DL_SYNC_TEST_GPU_RUNTIME_H_
#define DL_SYNC_TEST_GPU_RUNTIME_H_

#ifdef DL_SYNC_TEST_HIP
#include <hip/hip_runtime_api.h>

#define GPU_DEVICE_TYPE kDLROCM
#define GPU_BACKEND dl_sync_hip_backend
#define GPU_RUNTIME_NAME "HIP"

#define cudaDeviceCanAccessPeer hipDeviceCanAccessPeer
#define cudaDeviceEnablePeerAccess hipDeviceEnablePeerAccess
#define cudaDeviceProp hipDeviceProp_t
#define cudaDeviceSynchronize hipDeviceSynchronize
#define cudaDriverGetVersion hipDriverGetVersion
#define cudaError_t hipError_t
#define cudaErrorPeerAccessAlreadyEnabled hipErrorPeerAccessAlreadyEnabled
#define cudaErrorUnknown hipErrorUnknown
#define cudaEventCreateWithFlags hipEventCreateWithFlags
#define cudaEventDestroy hipEventDestroy
#define cudaEventDisableTiming hipEventDisableTiming
#define cudaEventRecord hipEventRecord
#define cudaEvent_t hipEvent_t
#define cudaFree hipFree
#define cudaFreeHost hipHostFree
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaGetDeviceProperties hipGetDeviceProperties
#define cudaGetErrorName hipGetErrorName
#define cudaGetErrorString hipGetErrorString
#define cudaGetLastError hipGetLastError
#define cudaGraphDestroy hipGraphDestroy
#define cudaGraphExecDestroy hipGraphExecDestroy
#define cudaGraphExec_t hipGraphExec_t
/* CUDA 12's three-argument form; HIP keeps the older five-argument hipGraphInstantiate. */
#define cudaGraphInstantiate hipGraphInstantiateWithFlags
#define cudaGraphLaunch hipGraphLaunch
#define cudaGraph_t hipGraph_t
#define cudaHostAlloc hipHostMalloc
#define cudaHostAllocMapped hipHostMallocMapped
#define cudaHostAllocPortable hipHostMallocPortable
#define cudaHostGetDevicePointer hipHostGetDevicePointer
#define cudaMalloc hipMalloc
#define cudaMemcpy hipMemcpy
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaMemset hipMemset
#define cudaRuntimeGetVersion hipRuntimeGetVersion
#define cudaSetDevice hipSetDevice
#define cudaStreamBeginCapture hipStreamBeginCapture
#define cudaStreamCaptureMode hipStreamCaptureMode
#define cudaStreamCaptureModeGlobal hipStreamCaptureModeGlobal
#define cudaStreamCaptureModeRelaxed hipStreamCaptureModeRelaxed
#define cudaStreamCaptureModeThreadLocal hipStreamCaptureModeThreadLocal
#define cudaStreamCreateWithFlags hipStreamCreateWithFlags
#define cudaStreamDestroy hipStreamDestroy
#define cudaStreamEndCapture hipStreamEndCapture
#define cudaStreamNonBlocking hipStreamNonBlocking
#define cudaStreamPerThread hipStreamPerThread
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaStreamWaitEvent hipStreamWaitEvent
#define cudaStream_t hipStream_t
#define cudaSuccess hipSuccess
/* HIP's null stream synchronizes with the blocking streams as CUDA's legacy stream does;
 * HIP has no other handle for it (in a per-thread build, 0 names the per-thread stream). */
#define cudaStreamLegacy ((hipStream_t)0)

#else
#include <cuda_runtime_api.h>

#define GPU_DEVICE_TYPE kDLCUDA
#define GPU_BACKEND dl_sync_cuda_backend
#define GPU_RUNTIME_NAME "CUDA"
#endif

#endif /* DL_SYNC_TEST_GPU_RUNTIME_H_ */
