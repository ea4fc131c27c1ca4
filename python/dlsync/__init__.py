"""dlsync: the stream synchronization around DLPack exchange, for ``__dlpack__`` in Python.

A producer whose ``__dlpack__`` is Python makes one call before building its capsule::

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        dlsync.export(self.__dlpack_device__(), self.stream, stream)
        return self._to_capsule(max_version)

``help(dlsync.export)`` shows what each ``stream`` value means on each device.
``dlsync.testing`` runs the same code on a simulated device with a race checker.
"""
import enum

from ._dlsync import (
    CAPTURE_NONE_IS_NO_SYNC,
    CAPTURE_STRICT,
    STREAM_LEGACY,
    STREAM_PER_THREAD,
    __version__,
    export,
    get_capture_policy,
    push_dep,
    set_capture_policy,
    stream_from_arg,
    stream_to_arg,
)


class DeviceType(enum.IntEnum):
    """DLPack's DLDeviceType values, as ``__dlpack_device__()`` returns them."""

    CPU = 1
    CUDA = 2
    CUDA_HOST = 3
    OPENCL = 4
    VULKAN = 7
    METAL = 8
    VPI = 9
    ROCM = 10
    ROCM_HOST = 11
    EXT_DEV = 12
    CUDA_MANAGED = 13
    ONE_API = 14
    WEBGPU = 15
    HEXAGON = 16
    MAIA = 17
    TRN = 18


__all__ = [
    "CAPTURE_NONE_IS_NO_SYNC",
    "CAPTURE_STRICT",
    "STREAM_LEGACY",
    "STREAM_PER_THREAD",
    "DeviceType",
    "export",
    "get_capture_policy",
    "push_dep",
    "set_capture_policy",
    "stream_from_arg",
    "stream_to_arg",
]
