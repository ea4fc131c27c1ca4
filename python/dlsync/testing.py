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

A consumer of DLPack exchange tables is tested the same way against ``ExchangeArray``, a
model framework's array whose type has a table (and a ``__dlpack__``), and a producer's
table is checked with ``check_exchange_api``::

    with dlsync.testing.SimulatedDevice() as sim:
        producer, consumer = sim.stream(), sim.stream()
        dlsync.testing.ExchangeArray.use_stream(producer)   # its framework's current stream
        x = dlsync.testing.ExchangeArray(bytearray(1024))   # on (2, 0)
        sim.write(producer, x, 7)
        capsule = dlsync.import_tensor(x, (2, 0), consumer) # the table, then the ordering
        sim.copy(consumer, capsule, bytearray(1024))
        dlsync.tensor_release(capsule, consumer)
"""
import gc
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from . import _dlsync
from ._dlsync import ExchangeArray as ExchangeArray
from ._dlsync import _null_backend, _sim, _time_export, _time_gil_release
from ._dlsync import import_tensor, tensor_release

__all__ = [
    "CUDA_DEVICE_TYPES",
    "ENTRY_POINTS",
    "REQUIRED_ENTRY_POINTS",
    "ROCM_DEVICE_TYPES",
    "ExchangeApiReport",
    "ExchangeArray",
    "Gate",
    "Graph",
    "NullBackend",
    "SimulatedDevice",
    "Stream",
    "StreamOrderedPool",
    "check_exchange_api",
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
        """Enqueues a kernel on stream that reads src and writes its bytes into dst. src may
        be a DLPack capsule not yet consumed (what ``dlsync.import_tensor`` returns): the
        kernel reads its tensor's memory (contiguous), and holds the capsule until the
        device is closed."""
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


# -- a producer's DLPack exchange table ---------------------------------------------------

ENTRY_POINTS = (
    "managed_tensor_allocator",
    "managed_tensor_from_py_object_no_sync",
    "managed_tensor_to_py_object_no_sync",
    "dltensor_from_py_object_no_sync",
    "current_work_stream",
)
"""The five entry points of a DLPack 1.2+ exchange table, in the table's order."""
REQUIRED_ENTRY_POINTS = tuple(e for e in ENTRY_POINTS if e != "dltensor_from_py_object_no_sync")
"""Those DLPack 1.3 says must not be NULL (dltensor_from_py_object_no_sync may be)."""
_MAX_CHAIN = 16  # DL_SYNC_EXCHANGE_MAX_CHAIN


class ExchangeApiReport(NamedTuple):
    """What ``check_exchange_api`` found."""

    chain: List[Tuple[int, int]]
    """The versions of the table and its prev_api chain, newest first."""
    version: Tuple[int, int]
    """The version of the table a DLPack 1 consumer (dlsync) uses."""
    missing: List[str]
    """Entry points that table lacks (NULL)."""
    refused: Dict[str, str]
    """Entry points present but not required that failed when called, with their error."""
    device: Tuple[int, int]
    """The device of the tensors checked."""
    stream: Optional[int]
    """What current_work_stream answered for that device, as dlsync reads it."""
    ordering_checked: bool
    """Whether the ordering was checked on the simulated device (a ``write`` was given)."""
    control_races: int
    """Races of the control: the same program with the table's bare conversion."""
    released: Optional[int]
    """What ``dlsync.tensor_release`` did with the imported tensor (RELEASED_NOW, ...)."""


def _device_of(obj: Any) -> Tuple[int, int]:
    device_type, device_id = obj.__dlpack_device__()
    return (int(device_type), int(device_id))


def _fail(what: str) -> None:
    raise AssertionError(f"dlsync.testing.check_exchange_api: {what}")


def _check_chain(obj: Any) -> Tuple[List[Tuple[int, int]], Tuple[int, int], List[str]]:
    chain = _dlsync._exchange_table_chain(obj)
    versions = [(major, minor) for major, minor, _ in chain]
    if len(chain) > _MAX_CHAIN:
        _fail(f"the prev_api chain is longer than {_MAX_CHAIN} tables: cyclic or corrupt ({versions[:4]}...)")
    used = next((item for item in chain if item[0] == 1), None)
    if used is None:
        _fail(f"no table of major version 1 in the chain {versions}")
    assert used is not None  # for mypy
    if used[1] < 2:
        _fail(f"table version 1.{used[1]}: exchange tables exist since DLPack 1.2 (chain {versions})")
    entries = used[2] if used[2] is not None else (False,) * len(ENTRY_POINTS)
    missing = [name for name, present in zip(ENTRY_POINTS, entries) if not present]
    return versions, (used[0], used[1]), missing


def _check_tensor(what: str, fields: Dict[str, Any], device: Tuple[int, int]) -> None:
    if tuple(fields["device"]) != tuple(device):
        _fail(f"{what} is on {fields['device']}, the object on {device}")
    if fields["ndim"] < 0 or fields["shape"] is None or len(fields["shape"]) != fields["ndim"]:
        _fail(f"{what}: ndim {fields['ndim']} and shape {fields['shape']} disagree")


def _same_layout(a: Dict[str, Any], b: Dict[str, Any]) -> bool:
    keys = ("data", "byte_offset", "device", "ndim", "shape", "dtype")
    return all(a[k] == b[k] for k in keys) and (a["strides"] is None or b["strides"] is None or a["strides"] == b["strides"])


def _check_from_py_object(obj: Any, device: Tuple[int, int]) -> Dict[str, Any]:
    """managed_tensor_from_py_object_no_sync: a DLPack 1 tensor with a deleter on the
    object's device; its fields."""
    managed: Dict[str, Any] = _dlsync._exchange_describe(_dlsync._exchange_bare_import(obj))
    if managed["version"][0] != 1 or not managed["has_deleter"]:
        _fail(f"the tensor of managed_tensor_from_py_object_no_sync has version {managed['version']} "
              f"and {'a' if managed['has_deleter'] else 'no'} deleter: expected major 1 and a deleter")
    _check_tensor("the tensor of managed_tensor_from_py_object_no_sync", managed, device)
    return managed


def _check_dltensor(obj: Any, managed: Dict[str, Any]) -> None:
    """dltensor_from_py_object_no_sync describes the memory the managed tensor does."""
    view = _dlsync._exchange_dltensor(obj)  # None: the table has no such function
    if view is not None and not _same_layout(view, managed):
        _fail(f"dltensor_from_py_object_no_sync describes {view}, managed_tensor_from_py_object_no_sync {managed}")


def _check_to_py_object(obj: Any, device: Tuple[int, int], managed: Dict[str, Any]) -> None:
    """managed_tensor_to_py_object_no_sync makes an object of the tensor's memory (read
    through its own table, or its __dlpack__), which runs the deleter once when it goes."""
    before = _dlsync._exchange_deletions()
    back = _dlsync._exchange_to_object(obj, _dlsync._exchange_bare_import(obj))
    has_table = hasattr(type(back), "__dlpack_c_exchange_api__") or hasattr(type(back), "__c_dlpack_exchange_api__")
    again = _dlsync._exchange_bare_import(back) if has_table else import_tensor(back, device, None)
    if _dlsync._exchange_describe(again)["data"] != managed["data"]:
        _fail("managed_tensor_to_py_object_no_sync made an object of other memory")
    del again, back
    gc.collect()
    deletions = _dlsync._exchange_deletions() - before
    if deletions != 1:
        _fail(f"the object managed_tensor_to_py_object_no_sync made ran the tensor's deleter "
              f"{deletions} times when it went away: expected once")


def _check_allocator(obj: Any, device: Tuple[int, int]) -> None:
    capsule = _dlsync._exchange_allocate(obj, device, (4, 3), (1, 8, 1))
    fields = _dlsync._exchange_describe(capsule)
    if fields["shape"] != (4, 3) or fields["dtype"] != (1, 8, 1) or not fields["has_deleter"]:
        _fail(f"managed_tensor_allocator for a (4, 3) uint8 prototype on {device} made {fields}")
    _check_tensor("the tensor of managed_tensor_allocator", fields, device)


def _tensor_bytes(capsule: Any) -> int:
    fields = _dlsync._exchange_describe(capsule)
    count = 1
    for size in fields["shape"]:
        count *= size
    return int(count * ((fields["dtype"][1] * fields["dtype"][2] + 7) // 8))


def _ordered_run(make: Callable[[Any], Any], write: Callable[[Any, Any, int], None],
                 device_types: Sequence[int], bare: bool) -> Tuple[int, bool, Optional[int]]:
    """One exchange on the simulated device: the stream current_work_stream names is held,
    the producer writes 7s, the consumer imports onto its own stream (through dlsync, or the
    bare conversion: the control) and copies what it reads. (races, all 7s, release)."""
    sim = SimulatedDevice(device_types).open()
    try:
        obj = make(sim)
        device = _device_of(obj)
        current = _dlsync._exchange_current_work_stream(obj, device)
        gate = sim.hold(current)
        write(sim, obj, 7)
        consumer = sim.stream(non_blocking=True, device=device[1])
        capsule = _dlsync._exchange_bare_import(obj) if bare else import_tensor(obj, device, consumer)
        seen = bytearray(_tensor_bytes(capsule))
        sim.copy(consumer, capsule, seen)
        if bare:  # the consumer's copy cannot wait for the held write: let it finish first
            consumer.synchronize()
        gate.release()
        consumer.synchronize()
        sim.host_read(seen)
        released = None if bare else tensor_release(capsule, consumer)
        sim.synchronize()
        return sim.race_count, all(b == 7 for b in seen), released
    finally:
        sim.close(check=False)


def check_exchange_api(
    make: Callable[[Any], Any],
    write: Optional[Callable[[Any, Any, int], None]] = None,
    *,
    require: Sequence[str] = REQUIRED_ENTRY_POINTS,
    device_types: Sequence[int] = CUDA_DEVICE_TYPES,
) -> ExchangeApiReport:
    """Checks a producer's DLPack exchange table (``__dlpack_c_exchange_api__`` on its
    tensor type) the way ``SimulatedDevice`` checks a ``__dlpack__``, and raises
    AssertionError saying what is wrong:

    - versions and chain: a table of major 1 and minor >= 2 within 16 tables of prev_api,
      each entry point of ``require`` present and working (DLPack 1.3's required ones by
      default); one not required is checked when present, and if it fails (its own
      error, not a wrong answer) the report lists it under ``refused``;
    - the conversions: managed_tensor_from_py_object_no_sync gives a DLPack 1 tensor with a
      deleter on the object's device; dltensor_from_py_object_no_sync describes the same
      memory; managed_tensor_to_py_object_no_sync makes an object of that memory, which
      runs the deleter once when it goes away;
    - the allocator: a (4, 3) uint8 tensor on the object's device;
    - current_work_stream, when ``write`` is given, on the simulated device (installed
      under ``device_types``): the stream it names is held while the producer writes, the
      consumer imports through ``dlsync.import_tensor`` onto a stream of its own and reads;
      the race checker must find nothing and the values must be the producer's. The
      control, the same program with the table's bare conversion, must be caught (a
      check that cannot fail proves nothing). A producer whose writes are not on the
      stream current_work_stream names is caught by the race checker.

    make(sim): a new tensor object of the producer (sim: the open SimulatedDevice when
    ``write`` is given, for a producer that installs it into its own copy of dlsync; None
    otherwise). write(sim, obj, value): the producer's own kernel on its current stream,
    writing value into every byte of obj (e.g. ``sim.write(stream, obj.data, value)``).
    Producers that cannot run on the simulated device (a framework's CPU tensors) are
    checked without ``write``."""
    if write is None:
        return _check_static(make(None), require)
    sim = SimulatedDevice(device_types).open()
    try:
        report = _check_static(make(sim), require)
    finally:
        sim.close(check=False)
    races, values, released = _ordered_run(make, write, device_types, bare=False)
    if races or not values:
        _fail(f"the consumer imported onto its own stream and ordered after the stream "
              f"current_work_stream names ({report.stream}) still raced the producer's write "
              f"({races} race(s), {'right' if values else 'wrong'} values): the producer's "
              f"writes are not on that stream")
    control_races, _, _ = _ordered_run(make, write, device_types, bare=True)
    if not control_races:
        _fail("the control (the bare conversion, no ordering) was not caught by the race "
              "checker: does write() launch a kernel on the simulated device that writes "
              "the tensor's memory?")
    return report._replace(ordering_checked=True, control_races=control_races, released=released)


def _check_static(obj: Any, require: Sequence[str]) -> ExchangeApiReport:
    chain, version, missing = _check_chain(obj)
    absent = [name for name in require if name in missing]
    if absent:
        _fail(f"the table (version {version[0]}.{version[1]}) lacks {', '.join(absent)}")
    device = _device_of(obj)
    refused: Dict[str, str] = {}

    def run(name: str, check: Callable[[], Any]) -> Any:
        """A present entry point's check: a required one must pass; another that refuses
        (its own error, as cuda.core's allocator raises NotImplementedError) is reported."""
        if name in missing:
            return None
        try:
            return check()
        except AssertionError:
            raise
        except Exception as error:
            if name in require:
                _fail(f"{name} failed: {type(error).__name__}: {error}")
            refused[name] = f"{type(error).__name__}: {error}"
            return None

    managed = run("managed_tensor_from_py_object_no_sync", lambda: _check_from_py_object(obj, device))
    if managed is not None:
        run("dltensor_from_py_object_no_sync", lambda: _check_dltensor(obj, managed))
        run("managed_tensor_to_py_object_no_sync", lambda: _check_to_py_object(obj, device, managed))
    run("managed_tensor_allocator", lambda: _check_allocator(obj, device))
    stream = run("current_work_stream", lambda: _dlsync._exchange_current_work_stream(obj, device))
    return ExchangeApiReport(chain, version, missing, refused, device, stream, False, 0, None)
