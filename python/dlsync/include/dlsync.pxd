# SPDX-License-Identifier: Apache-2.0
# dlsync's C API for Cython: `cimport dlsync`, with dlsync.get_include() on the include
# path (cythonize(..., include_path=[dlsync.get_include()]) and the extension's
# include_dirs), linked with a copy of the library: library_dirs=dlsync.get_library_dirs(),
# libraries=dlsync.get_libraries(). Every C function is nogil; dl_sync_check raises the
# Python exception of a status, with the calling thread's message:
#
#     cdef int status
#     with nogil:
#         status = dlsync.dl_sync_export(dlsync.dl_sync_stream_view(device, handle), arg)
#     dlsync.dl_sync_check(status)
#
# The contracts are those of the C headers (dlsync/*.h in the same folder).
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

cdef extern from "dlsync/dlsync.h" nogil:
    # dlsync/version.h
    enum:
        DL_SYNC_VERSION_MAJOR
        DL_SYNC_VERSION_MINOR
        DL_SYNC_VERSION_PATCH
        DL_SYNC_VERSION_HEX

    # dlsync/dlpack.h: the DLPack types dlsync uses
    ctypedef struct DLPackVersion:
        uint32_t major
        uint32_t minor

    ctypedef enum DLDeviceType:
        kDLCPU
        kDLCUDA
        kDLCUDAHost
        kDLOpenCL
        kDLVulkan
        kDLMetal
        kDLVPI
        kDLROCM
        kDLROCMHost
        kDLExtDev
        kDLCUDAManaged
        kDLOneAPI
        kDLWebGPU
        kDLHexagon
        kDLMAIA
        kDLTrn

    ctypedef struct DLDevice:
        DLDeviceType device_type
        int32_t device_id

    ctypedef struct DLDataType:
        uint8_t code
        uint8_t bits
        uint16_t lanes

    ctypedef struct DLTensor:
        void *data
        DLDevice device
        int32_t ndim
        DLDataType dtype
        int64_t *shape
        int64_t *strides
        uint64_t byte_offset

    ctypedef struct DLManagedTensor:
        DLTensor dl_tensor
        void *manager_ctx
        void (*deleter)(DLManagedTensor *self)

    ctypedef struct DLManagedTensorVersioned:
        DLPackVersion version
        void *manager_ctx
        void (*deleter)(DLManagedTensorVersioned *self)
        uint64_t flags
        DLTensor dl_tensor

    ctypedef struct DLPackExchangeAPIHeader:
        DLPackVersion version
        DLPackExchangeAPIHeader *prev_api

    ctypedef struct DLPackExchangeAPI:
        DLPackExchangeAPIHeader header
        int (*current_work_stream)(DLDeviceType device_type, int32_t device_id,
                                   void **out_current_stream)

    # dlsync/status.h
    enum:
        DL_SYNC_OK
        DL_SYNC_EINVAL
        DL_SYNC_ENOTSUP
        DL_SYNC_ENODEV
        DL_SYNC_ECAPTURE
        DL_SYNC_ENOMEM
        DL_SYNC_EBACKEND
    const char *dl_sync_last_error()
    const char *dl_sync_status_name(int status)
    const char *dl_sync_python_exception(int status)

    # dlsync/stream.h
    ctypedef struct dl_sync_stream:
        DLDevice device
        void *handle
    void *DL_SYNC_STREAM_LEGACY
    void *DL_SYNC_STREAM_PER_THREAD
    enum:
        DL_SYNC_MAX_DEVICES
    dl_sync_stream dl_sync_stream_view(DLDevice device, void *native_stream)
    dl_sync_stream dl_sync_stream_view_per_thread_default(DLDevice device, void *native_stream)
    ctypedef struct dl_sync_stream_arg:
        int is_none
        int64_t value
    dl_sync_stream_arg dl_sync_stream_arg_none()
    dl_sync_stream_arg dl_sync_stream_arg_int(int64_t value)
    int dl_sync_stream_from_arg(DLDevice device, dl_sync_stream_arg arg, dl_sync_stream *out,
                                int *out_needs_sync)
    int dl_sync_stream_to_arg(dl_sync_stream consumer, dl_sync_stream_arg *out)

    # dlsync/dep.h
    int dl_sync_push_dep(dl_sync_stream src, dl_sync_stream dst)
    int dl_sync_export(dl_sync_stream producer, dl_sync_stream_arg consumer)
    int dl_sync_export_calls_runtime(dl_sync_stream producer, dl_sync_stream_arg consumer)
    enum:
        DL_SYNC_CAPTURE_STRICT
        DL_SYNC_CAPTURE_NONE_IS_NO_SYNC
    int dl_sync_set_capture_policy(int policy)
    int dl_sync_get_capture_policy()

    # dlsync/exchange.h
    enum:
        DL_SYNC_EXCHANGE_MAX_CHAIN
    int dl_sync_stream_from_exchange_api(const DLPackExchangeAPI *api, DLDevice device,
                                         dl_sync_stream *out)
    int dl_sync_exchange_import(const DLPackExchangeAPI *api, void *py_object,
                                dl_sync_stream consumer, DLManagedTensorVersioned **out)

    # dlsync/tensor.h, dlsync/tensor_event.h
    int dl_sync_tensor_record(DLManagedTensorVersioned *tensor, dl_sync_stream producer)
    int dl_sync_tensor_wait(const DLManagedTensorVersioned *tensor, dl_sync_stream consumer)
    int dl_sync_tensor_synchronize(const DLManagedTensorVersioned *tensor)
    int dl_sync_tensor_has_event(const DLManagedTensorVersioned *tensor)
    int dl_sync_legacy_tensor_record(DLManagedTensor *tensor, dl_sync_stream producer)
    int dl_sync_legacy_tensor_wait(const DLManagedTensor *tensor, dl_sync_stream consumer)
    int dl_sync_legacy_tensor_synchronize(const DLManagedTensor *tensor)
    int dl_sync_legacy_tensor_has_event(const DLManagedTensor *tensor)
    int dl_sync_tensor_events_visible()

    # dlsync/group.h: a group is the caller's storage (cdef dl_sync_group group)
    enum:
        DL_SYNC_GROUP_MAX
    ctypedef struct dl_sync_group:
        pass
    int dl_sync_group_init(dl_sync_group *group, dl_sync_stream consumer)
    int dl_sync_group_add_stream(dl_sync_group *group, dl_sync_stream producer)
    int dl_sync_group_add_exchange_api(dl_sync_group *group, const DLPackExchangeAPI *api,
                                       DLDevice device)
    int dl_sync_group_add_exchange_import(dl_sync_group *group, const DLPackExchangeAPI *api,
                                          void *py_object, DLManagedTensorVersioned **out)
    int dl_sync_group_add_tensor(dl_sync_group *group, const DLManagedTensorVersioned *tensor)
    int dl_sync_group_add_legacy_tensor(dl_sync_group *group, const DLManagedTensor *tensor)
    int dl_sync_group_wait(dl_sync_group *group)

    # dlsync/backend.h: the registry (the vtable's callbacks are declared in C only)
    ctypedef struct dl_sync_backend:
        const char *name
        void *ctx
        uint32_t flags
    ctypedef struct dl_sync_runtime_info:
        const char *path
        int32_t version
        int32_t major
        int32_t minor
    ctypedef struct dl_sync_pool_stats:
        uint64_t created
        uint64_t destroyed
        uint64_t idle
        uint64_t outstanding
        uint64_t acquired
    int dl_sync_set_backend(int32_t device_type, const dl_sync_backend *backend)
    const dl_sync_backend *dl_sync_get_backend(int32_t device_type)
    const dl_sync_backend *dl_sync_cuda_backend()
    const dl_sync_backend *dl_sync_cudart_backend()
    const dl_sync_backend *dl_sync_hip_backend()
    int dl_sync_bind_runtime(const dl_sync_backend *backend,
                             void *(*lookup)(void *user, const char *name), void *user)
    int dl_sync_backend_runtime(const dl_sync_backend *backend, dl_sync_runtime_info *out)
    int dl_sync_pool_stats_get(const dl_sync_backend *backend, int32_t device_id,
                               dl_sync_pool_stats *out)
    int dl_sync_shutdown()

# dlsync_testing.h: installs an open dlsync.testing.SimulatedDevice into this copy of
# dlsync, so that the extension's own calls run on the simulated streams (needs the GIL).
cdef extern from "dlsync_testing.h":
    int dl_sync_testing_install(object sim) except -1


cdef inline int dl_sync_check(int status) except -1:
    """Raises the Python exception of a dlsync status (ValueError, BufferError,
    MemoryError, RuntimeError) with the calling thread's dlsync message; 0 for DL_SYNC_OK.
    Call it on the thread that got the status."""
    if status == DL_SYNC_OK:
        return 0
    kind = dl_sync_python_exception(status).decode("ascii")
    message = dl_sync_last_error().decode("utf-8", "replace")
    if kind == "ValueError":
        raise ValueError(message)
    if kind == "BufferError":
        raise BufferError(message)
    if kind == "MemoryError":
        raise MemoryError(message)
    raise RuntimeError(message)
