# SPDX-License-Identifier: Apache-2.0
"""dlsync: the stream synchronization around DLPack exchange, for ``__dlpack__`` in Python.

A producer whose ``__dlpack__`` is Python makes one call before building its capsule::

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        dlsync.export(self.__dlpack_device__(), self.stream, stream)
        return self._to_capsule(max_version)

``help(dlsync.export)`` shows what each ``stream`` value means on each device.

A consumer takes a producer's tensor onto its own stream with one call, through the
producer's DLPack C exchange table when its type has one, through ``__dlpack__`` otherwise::

    capsule = dlsync.import_tensor(x, device, my_stream)   # ready on my_stream
    ...                                                     # kernels on my_stream
    dlsync.tensor_release(capsule, my_stream)              # after them
``dlsync.testing`` runs the same code on a simulated device with a race checker.

A producer written in C, C++ or Cython builds against ``get_include()`` (the C headers,
``dlsync.pxd`` for ``cimport dlsync``, ``dlsync_testing.h``) and links its own copy of the
library: ``get_library_dirs()`` and ``get_libraries()``.
"""
import atexit
import enum
import os
import sys
from typing import TYPE_CHECKING, Any, List, NamedTuple, Optional

from ._dlsync import __version__ as __version__
from ._dlsync import _check_producer, _runtime
from ._dlsync import (
    CAPTURE_NONE_IS_NO_SYNC,
    CAPTURE_STRICT,
    RELEASE_DEFERRED,
    RELEASE_GRAPH,
    RELEASED_NOW,
    RELEASED_ORDERED,
    STREAM_LEGACY,
    STREAM_PER_THREAD,
    export,
    get_capture_policy,
    group_wait,
    import_tensor,
    push_dep,
    release_poll,
    release_thread,
    release_thread_running,
    set_capture_policy,
    stream_from_arg,
    stream_to_arg,
    tensor_release,
)

if TYPE_CHECKING:
    from ._dlsync import Device, Producer, StreamObject


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


class Group:
    """The producers of one consumer call, ordered before the consumer's stream at once.

    ::

        with dlsync.Group(device, my_stream) as group:
            group.add(a.stream)            # a, b and c written on one stream:
            group.add(b.stream)            # one dependency, not three
            group.add(c.stream)
        run_f(a, b, c, stream=my_stream)

    Leaving the block calls ``group_wait`` (unless the block raised); ``wait()`` does it
    explicitly and empties the group for reuse. Producers as ``group_wait`` takes them.
    """

    def __init__(self, device: "Device", consumer: "StreamObject") -> None:
        self.device = device
        self.consumer = consumer
        self._producers: "List[Producer]" = []

    def add(self, stream: "StreamObject", device: "Optional[Device]" = None) -> None:
        """Adds a producer stream; ``device`` when it is on another device of the family.
        A value that is no stream (a bool, a str) is refused here, not at the wait."""
        producer: "Producer" = stream if device is None else (device, stream)
        _check_producer(producer)
        self._producers.append(producer)

    def wait(self) -> None:
        """Orders every producer added so far before the consumer; empties the group."""
        producers, self._producers = self._producers, []
        group_wait(self.device, self.consumer, producers)

    def __enter__(self) -> "Group":
        return self

    def __exit__(self, kind: Any, value: Any, traceback: Any) -> None:
        if kind is None:
            self.wait()
        else:
            self._producers = []


class RuntimeInfo(NamedTuple):
    """The GPU runtime library a backend uses: its file, version as the runtime reports it, and major.minor."""

    path: str
    version: int
    major: int
    minor: int


def runtime(name: str) -> RuntimeInfo:
    """The library the built-in backend ``name`` uses, as a ``RuntimeInfo``: 'cuda', the
    CUDA driver (libcuda.so.1, DL_SYNC_LIBCUDA names another file; it is loaded at the
    first CUDA call); 'cudart', the CUDA runtime; 'hip', the HIP runtime. A runtime is
    never loaded by dlsync: it is the one the process has loaded (DL_SYNC_CUDART and
    DL_SYNC_HIP name a file instead). Loads nothing itself. BufferError, saying what was
    tried, when there is none (or several runtimes are loaded)."""
    return RuntimeInfo(*_runtime(name))


_HERE = os.path.dirname(os.path.abspath(__file__))


def get_include() -> str:
    """The folder to compile a C, C++ or Cython producer against: dlsync's C headers
    (``#include <dlsync/dlsync.h>``), ``dlsync_testing.h`` (dlsync.testing for that
    producer) and ``dlsync.pxd`` (``cimport dlsync``; pass the folder as Cython's
    include_path too)."""
    return os.path.join(_HERE, "include")


def get_library_dirs() -> List[str]:
    """The folders with ``libdlsync.a``, the static library a producer links as its own
    copy of dlsync (position-independent, its symbols hidden)."""
    return [os.path.join(_HERE, "lib")]


def get_libraries() -> List[str]:
    """The libraries to link a producer with: dlsync and what it needs on this system."""
    if sys.platform == "win32":
        return ["dlsync", "psapi"]
    return ["dlsync", "pthread", "dl"]


__all__ = [
    "CAPTURE_NONE_IS_NO_SYNC",
    "CAPTURE_STRICT",
    "STREAM_LEGACY",
    "STREAM_PER_THREAD",
    "DeviceType",
    "Group",
    "RuntimeInfo",
    "export",
    "get_capture_policy",
    "get_include",
    "get_libraries",
    "get_library_dirs",
    "group_wait",
    "import_tensor",
    "push_dep",
    "runtime",
    "set_capture_policy",
    "stream_from_arg",
    "stream_to_arg",
    "RELEASED_NOW",
    "RELEASED_ORDERED",
    "RELEASE_DEFERRED",
    "RELEASE_GRAPH",
    "release_poll",
    "release_thread",
    "release_thread_running",
    "tensor_release",
]


def _stop_release_thread_at_exit() -> None:
    # atexit runs after the interpreter joined its non-daemon threads, before it tears
    # down: the release thread is not one of them, and its deleters may take the GIL.
    # What completed by then still runs, here.
    release_thread(False)
    release_poll()


atexit.register(_stop_release_thread_at_exit)


def _release_thread_choice() -> None:
    # DL_SYNC_RELEASE_THREAD=0: a host process keeps dlsync from starting a thread of its
    # own (deleters then run in release_poll only); 1 or unset: the first deferred release
    # starts it.
    choice = os.environ.get("DL_SYNC_RELEASE_THREAD", "")
    if choice not in ("", "0", "1"):
        raise ValueError(f"DL_SYNC_RELEASE_THREAD={choice!r}: expected 0 or 1 (or unset)")
    if choice == "0":
        release_thread(False)


_release_thread_choice()

if hasattr(os, "register_at_fork"):
    # The release thread is stopped around a fork (a deleter it runs finishes first) and
    # given back to the parent; the child starts its own at its first deferred release.
    from ._dlsync import _release_thread_after_fork, _release_thread_before_fork

    os.register_at_fork(before=_release_thread_before_fork,
                        after_in_parent=lambda: _release_thread_after_fork(False),
                        after_in_child=lambda: _release_thread_after_fork(True))
