# SPDX-License-Identifier: Apache-2.0
"""Test a framework's ``__dlpack__`` on a simulated device, in CPU-only CI.

``SimulatedDevice`` installs dlsync's simulated device behind the CUDA device types
(kDLCUDA, kDLCUDAHost, kDLCUDAManaged), so the framework's own ``__dlpack__`` and
``dlsync.export`` run unchanged with simulated streams. Kernels (``write``, ``copy``) run
asynchronously on the streams, and a happens-before race checker sees every buffer they
touch: a producer that forgets ``dlsync.export`` is reported, whatever the timing, and the
``with`` block fails with AssertionError::

    with dlsync.testing.SimulatedDevice() as sim:
        producer, consumer = sim.stream(), sim.stream()
        x = MyArray(numpy.zeros(64, numpy.uint8), device=(2, 0), stream=producer)
        sim.write(producer, x.data, 7)                 # the producer's kernel
        x.__dlpack__(stream=consumer.handle)           # the consumer asks for its stream
        out = bytearray(64)
        sim.copy(consumer, x.data, out)                # the consumer's kernel
    # leaving the block synchronizes and raises AssertionError on any race

A producer whose ``__dlpack__`` is C, C++ or Cython calls ``dl_sync_export`` on its own
copy of dlsync; it installs the same simulated device into that copy with
``dl_sync_testing_install(sim)`` (the header ``dlsync_testing.h`` and ``dlsync.pxd`` in
``dlsync.get_include()``), from a test hook it exposes::

    with dlsync.testing.SimulatedDevice() as sim:
        mylib.use_simulated_device(sim)                # calls dl_sync_testing_install(sim)
        ...                                            # as above, with mylib's arrays

Closing the simulated device detaches that copy again. A copy that was not given it
refuses the simulated streams (ValueError: "... is a stream of dlsync's simulated
device, given to the 'cuda' backend ...") instead of handing them to a real driver: their
handles carry a tag no real handle has (``DL_SYNC_SIM_STREAM_TAG`` in ``dlsync/stream.h``).

One simulated device at a time, per process; while it is installed no other thread may
use dlsync on those device types (closing it drains the simulator and dlsync's event
pools). Buffers are any writable object with the buffer protocol (bytearray, contiguous
NumPy arrays); the simulator keeps them alive until it is closed.
"""
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ._dlsync import _null_backend, _sim, _time_export, _time_gil_release

__all__ = [
    "CUDA_DEVICE_TYPES",
    "ROCM_DEVICE_TYPES",
    "Gate",
    "Graph",
    "NullBackend",
    "SimulatedDevice",
    "Stream",
    "StreamOrderedPool",
]

CUDA_DEVICE_TYPES = (2, 3, 13)
"""kDLCUDA, kDLCUDAHost, kDLCUDAManaged."""
ROCM_DEVICE_TYPES = (10, 11)
"""kDLROCM, kDLROCMHost."""

_CAPTURE_MODES = {
    "global": _sim.CAPTURE_GLOBAL,
    "thread_local": _sim.CAPTURE_THREAD_LOCAL,
    "relaxed": _sim.CAPTURE_RELAXED,
}


class Stream:
    """A simulated stream. Accepted wherever dlsync takes a stream object (it implements
    ``__cuda_stream__``); ``handle`` is the int a consumer passes as ``stream=``."""

    def __init__(self, handle: int, device: int = 0) -> None:
        self.handle = handle
        self.device = device

    def __cuda_stream__(self) -> Tuple[int, int]:
        return (0, self.handle)

    def __int__(self) -> int:
        return self.handle

    def __repr__(self) -> str:
        return f"<dlsync.testing.Stream {self.handle:#x} on device {self.device}>"

    def destroy(self) -> None:
        """Destroys the stream once its work is done (cudaStreamDestroy); the handle is
        invalid afterwards."""
        _sim.stream_destroy(self.handle)

    def synchronize(self) -> None:
        """Blocks until the stream's work is done (and orders it before the host)."""
        _sim.stream_synchronize(self.handle)

    def begin_capture(self, mode: str = "global") -> None:
        """Starts capturing the stream's work into a graph (mode: global, thread_local or
        relaxed, as cudaStreamBeginCapture)."""
        if mode not in _CAPTURE_MODES:
            raise ValueError(f"capture mode {mode!r}: expected one of {sorted(_CAPTURE_MODES)}")
        _sim.begin_capture(self.handle, _CAPTURE_MODES[mode])

    def end_capture(self) -> Optional[Tuple[int, int]]:
        """Ends the capture and discards the graph; returns its (kernel nodes, external
        event-wait nodes), or None when the capture had been invalidated."""
        return _sim.end_capture(self.handle)

    def end_capture_graph(self) -> "Optional[Graph]":
        """Ends the capture and keeps its graph, instantiated, to launch (cudaStreamEndCapture
        then cudaGraphInstantiate); None when the capture had been invalidated."""
        graph = _sim.end_capture_graph(self.handle)
        return None if graph is None else Graph(graph)

    @property
    def is_capturing(self) -> bool:
        return _sim.capture_status(self.handle) == 1


class Graph:
    """An executable graph of the simulated device (Stream.end_capture_graph). It lives
    until destroy() or until the simulated device is closed."""

    def __init__(self, handle: int) -> None:
        self._handle = handle

    def launch(self, stream: Any) -> None:
        """Enqueues one launch on stream (cudaGraphLaunch): after stream's earlier work and
        after the graph's previous launch."""
        _sim.graph_launch(self._handle, stream)

    def destroy(self) -> None:
        """Destroys the graph once its launches are done (cudaGraphExecDestroy)."""
        _sim.graph_destroy(self._handle)


def _stream_handle(stream: Any) -> int:
    return int(stream.handle) if isinstance(stream, Stream) else int(stream)


class StreamOrderedPool:
    """A producer's stream-ordered memory pool on the simulated device, as a caching
    allocator or ``cudaMallocAsync`` ("Basic stream ordering allows future work submitted
    into the same stream to use the allocation"): a block freed on stream S is the next
    allocation on S at once, with no synchronization, so the producer's work enqueued on S
    after the free may overwrite it. A consumer that releases a tensor of the pool before
    its own reads of it are done races that write, and the simulated device's race checker
    fails the test.

    ``export`` makes the producer's DLPack capsule of a block; the block goes back to the
    pool when the tensor's deleter runs (the consumer releasing it with
    ``dlsync.tensor_release``, or dropping the capsule unconsumed)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._free: Dict[int, List[bytearray]] = {}

    def alloc(self, stream: Any) -> bytearray:
        """A block: the last one freed on stream, else a new one."""
        free = self._free.get(_stream_handle(stream))
        return free.pop() if free else bytearray(self.size)

    def free(self, block: bytearray, stream: Any) -> None:
        """Gives block back on stream: the next alloc on stream hands it out."""
        self._free.setdefault(_stream_handle(stream), []).append(block)

    def export(self, block: bytearray, stream: Any, *, reuse: bool = True) -> object:
        """A DLPack capsule ("dltensor_versioned") of block, whose deleter frees it on
        stream. With reuse, the tensor names stream as its reuse stream, so that a
        consumer's release orders stream after the consumer's work (what a producer does
        with ``dl_sync_tensor_record_reuse``); without, a release waits for it instead."""
        return _sim.tensor(stream, block, lambda: self.free(block, stream), stream if reuse else None)


class Gate:
    """A held stream (see SimulatedDevice.hold)."""

    def __init__(self, handle: int) -> None:
        self._handle = handle

    def release(self) -> None:
        """Lets the held stream go on."""
        _sim.release(self._handle)


class SimulatedDevice:
    """The simulated device behind dlsync for ``device_types`` while open.

    jitter_us, seed: delay each simulated operation by a reproducible pseudo-random
    0..jitter_us microseconds, so that unordered programs also fail by value.
    """

    def __init__(
        self,
        device_types: Sequence[int] = CUDA_DEVICE_TYPES,
        *,
        jitter_us: int = 0,
        seed: int = 1,
    ) -> None:
        self.device_types = tuple(device_types)
        self.jitter_us = jitter_us
        self.seed = seed
        self._open = False

    # -- lifetime -----------------------------------------------------------------------
    def open(self) -> "SimulatedDevice":
        _sim.install(self.device_types)
        _sim.set_jitter(self.seed, self.jitter_us)
        self._open = True
        return self

    def close(self, check: bool = True) -> None:
        """Waits for all work, then uninstalls the simulator. With check, raises
        AssertionError with the race checker's report when a race was found."""
        if not self._open:
            return
        try:
            _sim.release_all()  # held streams would never drain
            _sim.device_synchronize()
            races, report = _sim.race_count(), _sim.race_report()
        except RuntimeError:
            if check:  # e.g. a capture left open: synchronizing is not allowed
                raise
            races, report = 0, ""
        finally:
            _sim.uninstall()
            self._open = False
        if check and races:
            raise AssertionError(f"dlsync.testing: {races} race(s) on the simulated device:\n{report}")

    def __enter__(self) -> "SimulatedDevice":
        return self.open()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.close(check=exc_type is None)

    @property
    def runtime_calls_holding_the_gil(self) -> int:
        """How many of the runtime calls dlsync made on the simulated device since it was
        opened found the calling thread holding the GIL (dlsync releases it around them)."""
        return int(_sim.calls_holding_the_gil())

    @property
    def backend_capsule(self) -> object:
        """A capsule (``dlsync.testing.simulated_device``) with the simulated device's
        backend, for installing it into another copy of dlsync: what
        ``dl_sync_testing_install`` (``dlsync_testing.h``) reads. RuntimeError unless
        open."""
        return _sim.backend_capsule()

    # -- streams ------------------------------------------------------------------------
    def stream(self, *, non_blocking: bool = False, device: int = 0) -> Stream:
        """A new stream (blocking: synchronizes with the legacy default stream, as
        cudaStreamCreate; non_blocking as cudaStreamNonBlocking). It lives until the
        simulated device is closed."""
        return Stream(_sim.stream_create(non_blocking, device), device)

    @property
    def legacy_stream(self) -> Stream:
        """The legacy default stream (stream=None or 1 on CUDA)."""
        return Stream(1)

    @property
    def per_thread_stream(self) -> Stream:
        """The calling thread's per-thread default stream (stream=2 on CUDA)."""
        return Stream(2)

    def set_device(self, device: int) -> None:
        """Makes device current for the calling thread (cudaSetDevice): kernels launch
        only on streams of the current device, as on CUDA."""
        _sim.set_device(device)

    # -- kernels ------------------------------------------------------------------------
    def write(self, stream: Any, buffer: Any, value: int) -> None:
        """Enqueues a kernel on stream that sets every byte of buffer to value."""
        _sim.fill(stream, buffer, value)

    def copy(self, stream: Any, src: Any, dst: Any) -> None:
        """Enqueues a kernel on stream that reads src and writes its bytes into dst."""
        _sim.copy(stream, src, dst)

    def hold(self, stream: Any) -> "Gate":
        """Enqueues a kernel on stream that waits until the returned gate is released:
        the stream's later work waits behind it. Makes "the producer is still writing"
        certain rather than likely: a consumer that is not ordered after the producer
        reads the old bytes every time. (Synchronizing a held stream waits for the
        release, as it would for a long kernel; closing releases every gate.)"""
        return Gate(_sim.hold(stream))

    def host_read(self, buffer: Any) -> None:
        """Declares that the host reads buffer now: a race unless a synchronization
        ordered the kernels that wrote it before this point."""
        _sim.host_access(buffer, _sim.READ)

    def synchronize(self) -> None:
        """Waits for every stream (cudaDeviceSynchronize)."""
        _sim.device_synchronize()

    # -- verdict ------------------------------------------------------------------------
    @property
    def race_count(self) -> int:
        return _sim.race_count()

    def race_report(self) -> str:
        return _sim.race_report()

    def assert_no_races(self) -> None:
        """Synchronizes, then raises AssertionError with the report if a race was found."""
        _sim.device_synchronize()
        if _sim.race_count():
            raise AssertionError(f"dlsync.testing: races on the simulated device:\n{_sim.race_report()}")


class NullBackend:
    """A backend behind kDLCUDA whose runtime calls return at once, for benchmarks: what
    is timed is dlsync's own work, not a runtime's or the simulator's. It orders nothing
    (any int > 2 is a stream); leaving the block brings the default backend back::

        with dlsync.testing.NullBackend() as null:
            timeit.timeit(lambda: dlsync.export((2, 0), 5, 6))
            null.time_export((2, 0), 5, 6)   # the C call alone, ns per call
    """

    def __enter__(self) -> "NullBackend":
        _null_backend(True)
        return self

    def __exit__(self, *exc: Any) -> None:
        _null_backend(False)

    def time_export(self, device: Tuple[int, int], producer_stream: Any, stream: Optional[int], n: int = 100000) -> float:
        """Nanoseconds per ``dl_sync_export`` call, ``n`` calls in a C loop."""
        return float(_time_export(device, producer_stream, stream, n))

    def time_gil_release(self, n: int = 100000) -> float:
        """Nanoseconds per release and retake of the GIL, ``n`` in a C loop."""
        return float(_time_gil_release(n))
