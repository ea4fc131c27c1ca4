# SPDX-License-Identifier: Apache-2.0
"""dlsync.audit adapters over the fake CUDA driver (tests/runtimes/fake_cuda_driver.c, the
libcuda.so.1 that DL_SYNC_LIBCUDA names), for test_audit_driver.py and for
``python -m dlsync.audit --adapter audit_fake_driver:ADAPTERS``.

The fake device completes work as it is enqueued and has no memory of its own to write, so
these adapters move no values (their reads return None: the value check is left out) and
the verdicts rest on the timing: whether the consumer's work completed while the gate
(cuStreamWaitValue32 on host-mapped memory, through dlsync's driver loading) held the
producer's stream. The fake answers that as cuda.h says a device does: work behind an
unmet memory wait, or ordered after such work by an event, is not done (cuEventQuery:
CUDA_ERROR_NOT_READY)."""
import ctypes
import os
from typing import Any, Callable, List, Optional

import dlsync
from dlsync.audit import CUDA, Adapter, Read

CU_STREAM_NON_BLOCKING = 0x1
CU_EVENT_DISABLE_TIMING = 0x2
CUDA_SUCCESS, CUDA_ERROR_NOT_READY = 0, 600
DEVICE = (2, 0)


class Driver:
    """The fake driver, loaded with ctypes from the file dlsync's loader opened (one
    library in the process), with device 0's primary context current."""

    def __init__(self) -> None:
        path = os.environ.get("DL_SYNC_LIBCUDA")
        if not path:
            raise RuntimeError("DL_SYNC_LIBCUDA names no fake driver")
        self.lib = ctypes.CDLL(path)
        self.lib.fake_gpu_counter.restype = ctypes.c_long
        self.lib.fake_gpu_counter.argtypes = [ctypes.c_char_p]
        self.check("cuInit", self.lib.cuInit(0))
        context = ctypes.c_void_p()
        self.check("cuDevicePrimaryCtxRetain",
                   self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), 0))
        self.check("cuCtxSetCurrent", self.lib.cuCtxSetCurrent(context))

    @staticmethod
    def check(call: str, code: int) -> None:
        if code != CUDA_SUCCESS:
            raise RuntimeError(f"{call}: CUresult {code}")

    def stream(self, flags: int = CU_STREAM_NON_BLOCKING) -> int:
        handle = ctypes.c_void_p()
        self.check("cuStreamCreate", self.lib.cuStreamCreate(ctypes.byref(handle), flags))
        return int(handle.value or 0)

    def record(self, stream: int) -> Callable[[], bool]:
        """An event recorded on stream now; whether it has completed (cuEventQuery)."""
        event = ctypes.c_void_p()
        self.check("cuEventCreate", self.lib.cuEventCreate(ctypes.byref(event),
                                                           CU_EVENT_DISABLE_TIMING))
        self.check("cuEventRecord", self.lib.cuEventRecord(event, ctypes.c_void_p(stream)))

        def done() -> bool:
            code = int(self.lib.cuEventQuery(event))
            if code not in (CUDA_SUCCESS, CUDA_ERROR_NOT_READY):
                raise RuntimeError(f"cuEventQuery: CUresult {code}")
            return code == CUDA_SUCCESS

        return done

    def counter(self, name: str) -> int:
        return int(self.lib.fake_gpu_counter(name.encode()))


_driver: Optional[Driver] = None


def driver() -> Driver:
    global _driver
    if _driver is None:
        _driver = Driver()
    return _driver


class FakeTensor:
    """A producer's tensor on the fake device whose ``__dlpack__`` is Python: it calls
    dlsync.export (unless the control) and hands out no memory (the fake has none)."""

    def __init__(self, stream: int, control: bool) -> None:
        self.stream, self.control = stream, control

    def __dlpack_device__(self) -> Any:
        return DEVICE

    def __dlpack__(self, *, stream: Optional[int] = None, max_version: Any = None,
                   dl_device: Any = None, copy: Any = None) -> Any:
        if not self.control:
            dlsync.export(DEVICE, self.stream, stream)
        return self


class FakeAdapter(Adapter):
    """Streams of the fake driver (created non-blocking); the default streams as their
    handles (1: CU_STREAM_LEGACY, 2: CU_STREAM_PER_THREAD)."""

    def open(self, simulated: bool) -> Optional[str]:
        if simulated:
            return "the fake driver's adapters run without --simulated"
        driver()
        return None

    def device(self) -> str:
        return CUDA

    def version(self) -> str:
        return f"the fake CUDA driver ({os.environ.get('DL_SYNC_LIBCUDA')})"

    def stream(self) -> Any:
        return driver().stream()

    def legacy_stream(self) -> Any:
        return 1

    def per_thread_stream(self) -> Any:
        return 2

    def marker(self, stream: Any) -> Callable[[], bool]:
        return driver().record(int(stream))


class FakeProducer(FakeAdapter):
    name = "fake-dlsync"
    description = "the fake driver's producer: dlsync.export in its __dlpack__"
    reference = True

    def make(self, staged: Any, stream: Any) -> Any:
        return FakeTensor(int(stream), self.control)


class FakeControl(FakeProducer):
    name = "fake-control"
    description = "the fake driver's control producer: no dlsync.export"
    reference = False
    control = True


class FakeConsumer(FakeAdapter):
    name = "fake"
    description = "the fake driver's consumer: passes its stream, reads nothing back"

    def consume(self, tensor: Any, stream: Any) -> Read:
        tensor.__dlpack__(stream=int(stream))
        return Read(values=lambda: None, ready=self.marker(stream))


ADAPTERS: List[Adapter] = [FakeProducer(), FakeControl(), FakeConsumer()]
