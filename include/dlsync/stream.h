/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlsync/stream.h: stream views and the __dlpack__(stream=...) argument.
 *
 * A dl_sync_stream names a native stream (cudaStream_t, hipStream_t, a simulated stream)
 * on a device without owning it: the caller keeps the stream alive for the duration of
 * each call, and dlsync never keeps a handle past the call that received it.
 */
#ifndef DL_SYNC_STREAM_H_
#define DL_SYNC_STREAM_H_

#include <stdint.h>

#include "dlsync/dlpack.h"
#include "dlsync/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A non-owning, typed name for a native stream on a device. */
typedef struct dl_sync_stream {
  DLDevice device; /**< the device the stream belongs to */
  void *handle;    /**< the native stream, or one of the special handles below */
} dl_sync_stream;

/** CUDA's legacy default stream (cudaStreamLegacy). On ROCm it names the null stream. */
#define DL_SYNC_STREAM_LEGACY DL_SYNC_HANDLE_CAST(void *, 1)
/** The per-thread default stream of the calling thread (cudaStreamPerThread). */
#define DL_SYNC_STREAM_PER_THREAD DL_SYNC_HANDLE_CAST(void *, 2)

/** The top byte of every stream handle of dlsync's simulated device (dlsync/sim.h): a
    value no real runtime's handle has (on x86_64 and aarch64 no user address sets bit 62).
    The built-in backends refuse such a handle with DL_SYNC_EINVAL, so that streams of the
    simulated device are never handed to a real driver. */
#define DL_SYNC_SIM_STREAM_TAG 0x55u

/** Device ids accepted by dlsync: 0 .. DL_SYNC_MAX_DEVICES - 1. */
#define DL_SYNC_MAX_DEVICES 256

/**
 * Names native_stream on device. The handle is canonicalized so that two views of the
 * same default stream compare equal: on CUDA, NULL (the default stream of code built
 * without --default-stream per-thread) becomes DL_SYNC_STREAM_LEGACY; on ROCm,
 * DL_SYNC_STREAM_LEGACY becomes NULL, HIP's null stream.
 * Never fails; the view is validated where it is used.
 *
 * What handle 0 means is decided by how the *caller* was compiled, so the header decides
 * it: in a translation unit compiled with per-thread default streams (nvcc
 * --default-stream per-thread defines CUDA_API_PER_THREAD_DEFAULT_STREAM; hipcc
 * -fgpu-default-stream=per-thread with HIP_API_PER_THREAD_DEFAULT_STREAM), the macro
 * below turns dl_sync_stream_view into dl_sync_stream_view_per_thread_default.
 */
DL_SYNC_API dl_sync_stream dl_sync_stream_view(DLDevice device, void *native_stream);

/** dl_sync_stream_view for code compiled with per-thread default streams: NULL names the
    calling thread's per-thread default stream (DL_SYNC_STREAM_PER_THREAD) on CUDA and
    ROCm devices; every other handle is viewed as dl_sync_stream_view does. */
DL_SYNC_API dl_sync_stream dl_sync_stream_view_per_thread_default(DLDevice device,
                                                                  void *native_stream);

#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM) || defined(HIP_API_PER_THREAD_DEFAULT_STREAM)
/* Object-like, so that arguments with commas (compound literals) pass unchanged. */
#define dl_sync_stream_view dl_sync_stream_view_per_thread_default
#endif

/** The Python stream argument: None, or an integer. */
typedef struct dl_sync_stream_arg {
  int is_none;   /**< nonzero for None; value is then ignored */
  int64_t value; /**< the integer passed as stream= */
} dl_sync_stream_arg;

/** The argument None. */
DL_SYNC_API dl_sync_stream_arg dl_sync_stream_arg_none(void);
/** The integer argument value. */
DL_SYNC_API dl_sync_stream_arg dl_sync_stream_arg_int(int64_t value);

/**
 * Producer side: decodes the consumer's stream argument for a tensor on device.
 *
 * | family  | None           | -1      | 0         | 1      | 2          | > 2    | < -1  |
 * | CUDA    | legacy default | no sync | EINVAL    | legacy | per-thread | handle | EINVAL|
 * | ROCm    | null stream    | no sync | null      | EINVAL | EINVAL     | handle | EINVAL|
 * | others  | no sync        | EINVAL  | EINVAL    | EINVAL | EINVAL     | EINVAL | EINVAL|
 *
 * CUDA = kDLCUDA, kDLCUDAHost, kDLCUDAManaged; ROCm = kDLROCM, kDLROCMHost.
 * On success *out names the consumer's stream and *out_needs_sync says whether the
 * producer must order its work before it (0 for -1, and for stream-less devices).
 * EINVAL for an unknown device type, a negative or too large device id, NULL outputs.
 */
DL_SYNC_API int dl_sync_stream_from_arg(DLDevice device, dl_sync_stream_arg arg,
                                        dl_sync_stream *out, int *out_needs_sync);

/**
 * Consumer side: the stream argument that asks a producer to make data ready on the
 * consumer's stream. CUDA legacy -> 1, per-thread -> 2, ROCm null stream -> 0, other
 * handles -> their value, stream-less devices -> None. EINVAL for a stream that has no
 * argument (ROCm's per-thread default stream), bad devices and a NULL output.
 */
DL_SYNC_API int dl_sync_stream_to_arg(dl_sync_stream consumer, dl_sync_stream_arg *out);

#ifdef __cplusplus
}
#endif
#endif /* DL_SYNC_STREAM_H_ */
