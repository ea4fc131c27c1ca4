# SPDX-License-Identifier: Apache-2.0
# cython: language_level=3
"""A producer whose __dlpack__ is Cython, with its own static copy of dlsync (cimport
dlsync, linked with libdlsync.a from the installed package)."""
from libc.stdint cimport intptr_t

cimport dlsync


cdef class Array:
    """A buffer (any object with __dlpack__, e.g. a NumPy array) that this library wrote on
    stream (an int handle) on device; sync=False is the bug the race checker must catch."""
    cdef readonly object data
    cdef dlsync.DLDevice device
    cdef intptr_t stream
    cdef bint sync

    def __init__(self, data, device, stream, sync=True):
        self.data = data
        self.device.device_type = <dlsync.DLDeviceType>device[0]
        self.device.device_id = device[1]
        self.stream = int(stream)
        self.sync = sync

    def __dlpack_device__(self):
        return (<int>self.device.device_type, self.device.device_id)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        cdef dlsync.dl_sync_stream_arg arg
        cdef dlsync.dl_sync_stream view
        cdef int status
        if self.sync:
            arg = dlsync.dl_sync_stream_arg_none() if stream is None else dlsync.dl_sync_stream_arg_int(stream)
            view = dlsync.dl_sync_stream_view(self.device, <void *>self.stream)
            if dlsync.dl_sync_export_calls_runtime(view, arg):
                with nogil:  # only a call that reaches the runtime lets other threads run
                    status = dlsync.dl_sync_export(view, arg)
            else:
                status = dlsync.dl_sync_export(view, arg)
            dlsync.dl_sync_check(status)
        return self.data.__dlpack__()


def backend_name(int device_type):
    """The name of the backend this copy of dlsync uses for device_type."""
    cdef const dlsync.dl_sync_backend *backend = dlsync.dl_sync_get_backend(device_type)
    return None if backend == NULL else backend.name.decode()


def use_simulated_device(sim):
    """The test hook: this copy of dlsync on sim's streams until sim closes."""
    dlsync.dl_sync_testing_install(sim)


def api_smoke():
    """Uses the declarations of dlsync.pxd (the C compiler checks each against the
    headers) on the CPU device, where nothing reaches a runtime; returns the answers."""
    cdef dlsync.DLDevice cpu
    cpu.device_type = dlsync.kDLCPU
    cpu.device_id = 0
    cdef dlsync.dl_sync_stream stream = dlsync.dl_sync_stream_view(cpu, NULL)
    cdef dlsync.dl_sync_stream decoded
    cdef dlsync.dl_sync_stream_arg arg
    cdef int needs_sync = -1
    cdef int status
    cdef dlsync.dl_sync_group group
    cdef dlsync.dl_sync_pool_stats stats
    cdef dlsync.DLManagedTensorVersioned tensor
    cdef dlsync.DLManagedTensor legacy
    with nogil:
        status = dlsync.dl_sync_stream_from_arg(cpu, dlsync.dl_sync_stream_arg_none(), &decoded,
                                                &needs_sync)
    dlsync.dl_sync_check(status)
    dlsync.dl_sync_check(dlsync.dl_sync_stream_to_arg(stream, &arg))
    dlsync.dl_sync_check(dlsync.dl_sync_push_dep(stream, stream))
    dlsync.dl_sync_check(dlsync.dl_sync_group_init(&group, stream))
    dlsync.dl_sync_check(dlsync.dl_sync_group_add_stream(&group, stream))
    dlsync.dl_sync_check(dlsync.dl_sync_group_wait(&group))
    dlsync.dl_sync_check(dlsync.dl_sync_pool_stats_get(dlsync.dl_sync_cuda_backend(), 0, &stats))
    tensor.version.major = 1
    tensor.version.minor = 0
    tensor.manager_ctx = NULL
    tensor.deleter = NULL
    tensor.flags = 0
    tensor.dl_tensor.device = cpu
    legacy.manager_ctx = NULL
    legacy.deleter = NULL
    legacy.dl_tensor.device = cpu
    try:
        dlsync.dl_sync_check(dlsync.dl_sync_stream_from_arg(
            cpu, dlsync.dl_sync_stream_arg_int(7), &decoded, &needs_sync))
        message = None
    except ValueError as error:
        message = str(error)
    return {
        "needs_sync": needs_sync,
        "arg_is_none": bool(arg.is_none),
        "strict": dlsync.dl_sync_get_capture_policy() == dlsync.DL_SYNC_CAPTURE_STRICT,
        "status_name": dlsync.dl_sync_status_name(dlsync.DL_SYNC_EINVAL).decode(),
        "version": (dlsync.DL_SYNC_VERSION_MAJOR, dlsync.DL_SYNC_VERSION_MINOR,
                    dlsync.DL_SYNC_VERSION_PATCH),
        "idle_events": stats.idle,
        "has_event": (dlsync.dl_sync_tensor_has_event(&tensor),
                      dlsync.dl_sync_legacy_tensor_has_event(&legacy)),
        "error": message,
        "legacy_handle": <size_t>dlsync.DL_SYNC_STREAM_LEGACY,
        "sizes": (sizeof(dlsync.DLManagedTensorVersioned), sizeof(dlsync.DLManagedTensor),
                  sizeof(dlsync.DLTensor), sizeof(dlsync.DLDevice)),
    }
