# SPDX-License-Identifier: Apache-2.0
"""The built-in adapters: dlsync's own producer and consumer (and their controls), NumPy,
PyTorch, CuPy, JAX and cuda.core.

Each framework is imported when its adapter opens, never before, so that the audit runs
wherever some of them are missing; each adapter says why it cannot run ("not installed:",
"no GPU:"). What each framework's calls do (which stream a from_dlpack passes, what a
graph capture synchronizes) is written where the adapter relies on it.

On the simulated device (``--simulated``) the dlsync adapters run on dlsync.testing's
streams, and PyTorch, JAX and NumPy run their CPU paths (their tensors are the host's: no
stream, nothing to order, the values checked); CuPy and cuda.core need a GPU."""
import ctypes
import importlib
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

from .. import _dlsync, export, tensor_release
from ..testing import CUDA_DEVICE_TYPES
from ._core import COUNT, CPU, CUDA, SIMULATED, Adapter, Read

KDLCUDA = 2
DEVICE = (KDLCUDA, 0)
JAX_MASK = 0x5A  # JAX's own operation, so that what it produces is computed: x ^ JAX_MASK


def _import(name: str) -> Tuple[Any, Optional[str]]:
    try:
        return importlib.import_module(name), None
    except Exception as error:  # ImportError, or a framework failing while it loads
        return None, f"not installed: {name} ({type(error).__name__}: {error})"


def _dlpack(obj: Any, stream: Optional[int]) -> Any:
    """obj.__dlpack__(stream=stream), with max_version where the producer takes it."""
    try:
        return obj.__dlpack__(stream=stream, max_version=(1, 3))
    except TypeError:  # a __dlpack__ older than max_version
        return obj.__dlpack__(stream=stream)


def _gpu_framework() -> Tuple[Optional[Adapter], List[str]]:
    """PyTorch or CuPy opened on a GPU, the first that can; else None and why neither can."""
    reasons: List[str] = []
    for framework in (TorchAdapter(), CuPyAdapter()):
        reason = framework.open(False)
        if reason is None and framework.device() == CUDA:
            return framework, reasons
        reasons.append(reason or f"{framework.name} sees no GPU")
    return None, reasons


# -- reading a DLPack capsule's memory (dlsync's consumer) ---------------------------------


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):  # dlpack.h, before 1.0
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class _DLManagedTensorVersioned(ctypes.Structure):  # dlpack.h 1.0 and later
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


_CAPSULE_KINDS: Dict[bytes, Any] = {b"dltensor": _DLManagedTensor,
                                    b"dltensor_versioned": _DLManagedTensorVersioned}
# Prototypes of the audit's own (ctypes.pythonapi's function objects are the process's).
_capsule_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(
    ("PyCapsule_GetName", ctypes.pythonapi))
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))


def capsule_memory(capsule: Any) -> Tuple[int, int, Tuple[int, int]]:
    """A DLPack capsule not consumed yet: (address of its first byte, size in bytes, its
    (device_type, device_id))."""
    name = _capsule_name(capsule)
    kind = _CAPSULE_KINDS.get(name)
    if kind is None:
        raise TypeError(f"not a DLPack capsule still to be consumed: named {name!r}")
    tensor = kind.from_address(_capsule_pointer(capsule, name)).dl_tensor
    size = (tensor.dtype.bits * tensor.dtype.lanes + 7) // 8
    for axis in range(tensor.ndim):
        size *= tensor.shape[axis]
    return ((tensor.data or 0) + tensor.byte_offset, int(size),
            (tensor.device.device_type, tensor.device.device_id))


# -- dlsync's own producer and consumer on the simulated device ----------------------------


class _SimulatedTensor:
    """A producer's tensor on the simulated device whose ``__dlpack__`` is Python: it calls
    dlsync.export (unless it is the control), then hands out a capsule of a block of a
    stream-ordered pool (dlsync.testing.StreamOrderedPool) whose deleter frees the block
    on the producer's stream, named as the tensor's reuse stream unless it is the control."""

    def __init__(self, pool: Any, block: bytearray, stream: Any, control: bool) -> None:
        self.pool, self.block, self.stream, self.control = pool, block, stream, control
        self.exported = False

    def __dlpack_device__(self) -> Tuple[int, int]:
        return DEVICE

    def __dlpack__(self, *, stream: Optional[int] = None, max_version: Any = None,
                   dl_device: Any = None, copy: Any = None) -> Any:
        if self.exported:
            raise BufferError("this tensor was exported already (its capsule owns the block)")
        if not self.control:
            export(DEVICE, self.stream, stream)
        self.exported = True
        return self.pool.export(self.block, self.stream, reuse=not self.control)


class DlsyncAdapter(Adapter):
    """dlsync's own producer and consumer: the reference the frameworks are read against.

    Producer: a Python ``__dlpack__`` that calls ``dlsync.export`` before it hands out its
    capsule, and names its stream as the tensor's reuse stream (a stream-ordered pool's
    producer). Consumer: passes its stream, reads the capsule's memory there, and releases
    the tensor with ``dlsync.tensor_release`` on that stream.

    In the exchange-table cell the producer is ``dlsync.testing.ExchangeArray`` (a type
    with a DLPack C exchange table), written on the producer's stream, which it makes its
    framework's current work stream; the consumer imports it with ``dlsync.import_tensor``.

    On the simulated device both run on dlsync.testing's streams and pool. On a GPU the
    producer writes with PyTorch or CuPy (whichever is installed) and exports through
    dlsync; the consumer is the simulated device's only."""

    name = "dlsync"
    description = ("dlsync.export in a Python __dlpack__ / dlsync.tensor_release: the "
                   "reference (simulated device; a GPU producer over PyTorch or CuPy memory)")
    reference = True
    stream_ordered_pool = True

    def __init__(self) -> None:
        self._device = CPU
        self._memory: Optional[Adapter] = None  # the GPU producer's framework
        self._sim: Any = None
        self._pool: Any = None

    def open(self, simulated: bool) -> Optional[str]:
        if simulated:
            import dlsync.testing

            self._device = SIMULATED
            self._pool = dlsync.testing.StreamOrderedPool(COUNT)
            return None
        memory, reasons = _gpu_framework()
        if memory is not None:
            self._memory, self._device = memory, CUDA
            return None
        return ("no GPU producer: it writes with PyTorch or CuPy on a GPU (" +
                "; ".join(reasons) + "); run with --simulated for the simulated device")

    def attach(self, world: Any) -> None:
        """The simulated device the run opened (the audit calls it before any stream)."""
        self._sim = getattr(world, "device", None)

    def device(self) -> str:
        return self._device

    def can_consume(self) -> bool:
        return self._device == SIMULATED

    def version(self) -> str:
        from .. import __version__

        on = f" over {self._memory.version()}" if self._memory is not None else ""
        return f"dlsync {__version__}{on}"

    # streams
    def stream(self) -> Any:
        if self._memory is not None:
            return self._memory.stream()
        return self._sim.stream(non_blocking=True)

    def legacy_stream(self) -> Any:
        if self._memory is not None:
            raise NotImplementedError("dlsync's consumer runs on the simulated device only")
        return self._sim.legacy_stream

    def per_thread_stream(self) -> Any:
        if self._memory is not None:
            raise NotImplementedError("dlsync's consumer runs on the simulated device only")
        return self._sim.per_thread_stream

    def marker(self, stream: Any) -> Optional[Callable[[], bool]]:
        if self._memory is not None:
            return self._memory.marker(stream)
        done = bytearray(1)
        self._sim.write(stream, done, 1)
        return lambda: done[0] == 1

    def synchronize(self) -> None:
        if self._memory is not None:
            self._memory.synchronize()
        else:
            self._sim.synchronize()

    # producer
    def stage(self, values: bytes, stream: Any) -> Any:
        if self._memory is not None:
            return self._memory.stage(values, stream)
        return bytearray(values)  # the source the write copies; the simulator keeps it

    def make(self, staged: Any, stream: Any) -> Any:
        if self._memory is not None:
            return _ExportingTensor(self._memory, self._memory.make(staged, stream), stream,
                                    self.control)
        block = self._pool.alloc(stream)
        self._sim.copy(stream, staged, block)
        return _SimulatedTensor(self._pool, block, stream, self.control)

    def make_exchange(self, staged: Any, stream: Any) -> Any:
        if self._memory is not None:
            return self.make(staged, stream)  # a Python __dlpack__ only: no table
        # ExchangeArray's table answers its framework's current work stream: the one the
        # producer writes on.
        _dlsync.ExchangeArray.use_stream(stream)
        memory = bytearray(COUNT)
        self._sim.copy(stream, staged, memory)
        return _dlsync.ExchangeArray(memory, DEVICE)

    def drop(self, tensor: Any) -> None:
        if isinstance(tensor, _dlsync.ExchangeArray):
            # Its framework back on the legacy default stream (where it starts), so that no
            # stream of the simulated device, closed after the run, stays current.
            _dlsync.ExchangeArray.use_stream(None)

    def address(self, tensor: Any) -> Optional[int]:
        if self._memory is not None:
            return self._memory.address(tensor.tensor)
        return id(tensor.block)  # the pool hands out the same bytearray again

    # consumer (the simulated device)
    def consume(self, tensor: Any, stream: Any) -> Read:
        if self._memory is not None:
            raise NotImplementedError("dlsync's consumer runs on the simulated device only")
        kind = tensor.__dlpack_device__()[0]
        on_device = kind in CUDA_DEVICE_TYPES
        capsule = _dlpack(tensor, int(stream.handle) if on_device else None)
        address, size, _ = capsule_memory(capsule)
        view = (ctypes.c_char * size).from_address(address)
        out, done = bytearray(size), bytearray(1)
        if on_device:
            self._sim.copy(stream, view, out)
            self._sim.write(stream, done, 1)
        else:
            out[:] = bytes(view)
            done[0] = 1
        release = None
        if not self.control:  # the control drops the capsule: its deleter runs at once
            release = lambda: tensor_release(capsule, stream if on_device else None)  # noqa: E731
        return Read(values=lambda: bytes(out), ready=lambda: done[0] == 1, release=release,
                    keep=capsule)

    def import_exchange(self, tensor: Any, device: Tuple[int, int], stream: Any,
                        import_tensor: Callable[[Any, Tuple[int, int], Any], Any]) -> Any:
        if self.control:  # the table's bare conversion: the tensor, no ordering
            return _dlsync._exchange_bare_import(tensor)
        return import_tensor(tensor, device, stream)

    def capture(self, stream: Any, body: Callable[[], Read]) -> Tuple[Any, Read]:
        if self._memory is not None:
            raise NotImplementedError("dlsync's consumer runs on the simulated device only")
        stream.begin_capture("thread_local")
        try:
            read = body()
        finally:
            graph = stream.end_capture_graph()
        if graph is None:
            raise RuntimeError("the capture was invalidated")
        return graph, read

    def launch(self, graph: Any, stream: Any) -> Optional[Callable[[], bool]]:
        graph.launch(stream)
        return self.marker(stream)


class DlsyncControlAdapter(DlsyncAdapter):
    """The negative control: dlsync's producer without ``dlsync.export`` and without a reuse
    stream, and a consumer that drops the capsule instead of ``dlsync.tensor_release`` and,
    in the exchange-table cell, takes the tensor with the table's bare conversion
    (``managed_tensor_from_py_object_no_sync``) instead of ``dlsync.import_tensor``: nothing
    orders the producer's stream before its read."""

    name = "dlsync-control"
    description = ("the control: dlsync's producer without dlsync.export, its consumer "
                   "without dlsync.tensor_release and dlsync.import_tensor (its stream cells "
                   "must show a RACE)")
    reference = False
    control = True


class _ExportingTensor:
    """A GPU framework's tensor whose ``__dlpack__`` is Python and calls ``dlsync.export``
    (unless the control), then hands out the framework's capsule without stream logic."""

    def __init__(self, memory: Any, tensor: Any, stream: Any, control: bool) -> None:
        self.memory, self.tensor, self.stream, self.control = memory, tensor, stream, control

    def __dlpack_device__(self) -> Tuple[int, int]:
        return DEVICE

    def __dlpack__(self, *, stream: Optional[int] = None, max_version: Any = None,
                   dl_device: Any = None, copy: Any = None) -> Any:
        if not self.control:
            export(DEVICE, self.stream, stream)
        return self.memory.capsule(self.tensor)


# -- NumPy -----------------------------------------------------------------------------------


class NumPyAdapter(Adapter):
    """NumPy: the host's arrays, ``numpy.from_dlpack``; no streams."""

    name = "numpy"
    description = "NumPy on the CPU: numpy.from_dlpack, its own __dlpack__ (no streams)"

    def open(self, simulated: bool) -> Optional[str]:
        self.np, reason = _import("numpy")
        return reason

    def version(self) -> str:
        return f"numpy {self.np.__version__}"

    def make(self, staged: Any, stream: Any) -> Any:
        return self.np.frombuffer(staged, dtype=self.np.uint8).copy()

    def consume(self, tensor: Any, stream: Any) -> Read:
        imported = self.np.from_dlpack(tensor)
        data = bytes(imported.tobytes())  # the host reads at once
        return Read(values=lambda: data, keep=imported)


# -- PyTorch ---------------------------------------------------------------------------------


class TorchAdapter(Adapter):
    """PyTorch. On a GPU: its streams (``torch.cuda.Stream``, ``.cuda_stream``), its caching
    allocator (a stream-ordered pool: a block freed is its stream's next allocation), and
    ``torch.from_dlpack``, which passes the current stream's handle (1 for the legacy
    default stream) to ``__dlpack__``. Its CPU path elsewhere."""

    name = "torch"
    description = "PyTorch: torch.from_dlpack, Tensor.__dlpack__, CUDA graphs (CPU path without a GPU)"
    stream_ordered_pool = True

    def __init__(self) -> None:
        self._device = CPU

    def open(self, simulated: bool) -> Optional[str]:
        self.torch, reason = _import("torch")
        if reason is not None:
            return reason
        importlib.import_module("torch.utils.dlpack")
        cuda = (not simulated and self.torch.cuda.is_available() and
                not getattr(self.torch.version, "hip", None))
        self._device = CUDA if cuda else CPU
        self.stream_ordered_pool = cuda
        return None

    def device(self) -> str:
        return self._device

    def version(self) -> str:
        cuda = f" (CUDA {self.torch.version.cuda})" if self._device == CUDA else " (CPU)"
        return f"torch {self.torch.__version__}{cuda}"

    def _gpu(self) -> bool:
        return self._device == CUDA

    def stream(self) -> Any:
        return self.torch.cuda.Stream() if self._gpu() else None

    def legacy_stream(self) -> Any:
        # PyTorch's default stream is the legacy default stream (cuda_stream 0).
        return self.torch.cuda.default_stream() if self._gpu() else None

    def per_thread_stream(self) -> Any:
        return self.torch.cuda.ExternalStream(2) if self._gpu() else None

    def marker(self, stream: Any) -> Callable[[], bool]:
        if stream is None:
            return lambda: True
        event = self.torch.cuda.Event()
        event.record(stream)
        return lambda: bool(event.query())

    def synchronize(self) -> None:
        if self._gpu():
            self.torch.cuda.synchronize()

    def stage(self, values: bytes, stream: Any) -> Any:
        torch = self.torch
        source = torch.frombuffer(bytearray(values), dtype=torch.uint8)
        if not self._gpu():
            return source
        with torch.cuda.stream(stream):
            source = source.to("cuda")
            # A cached block of the size on the stream, so that make() allocates without a
            # cudaMalloc while the stream is held.
            torch.empty(COUNT, dtype=torch.uint8, device="cuda")
        stream.synchronize()
        return source

    def make(self, staged: Any, stream: Any) -> Any:
        torch = self.torch
        if not self._gpu():
            return staged.clone()
        with torch.cuda.stream(stream):
            tensor = torch.empty(COUNT, dtype=torch.uint8, device="cuda")
            tensor.copy_(staged)
        return tensor

    def address(self, tensor: Any) -> Optional[int]:
        return int(tensor.data_ptr())

    def capsule(self, tensor: Any) -> Any:
        """The tensor's capsule without any stream logic (torch.utils.dlpack.to_dlpack)."""
        return self.torch.utils.dlpack.to_dlpack(tensor)

    def consume(self, tensor: Any, stream: Any) -> Read:
        torch = self.torch
        if not self._gpu():
            imported = torch.from_dlpack(tensor)
            data = bytes(imported.numpy().tobytes())
            return Read(values=lambda: data, keep=imported)
        with torch.cuda.stream(stream):
            imported = torch.from_dlpack(tensor)
            copy = imported.clone()
            done = torch.cuda.Event()
            done.record(stream)
        return Read(values=lambda: bytes(copy.cpu().numpy().tobytes()),
                    ready=lambda: bool(done.query()),
                    keep=imported)

    def capture(self, stream: Any, body: Callable[[], Read]) -> Tuple[Any, Read]:
        # CUDAGraph.capture_begin/capture_end, not the torch.cuda.graph context manager,
        # which synchronizes the device before capturing (the producer is held then).
        if not self._gpu():
            raise NotImplementedError("no graphs on the CPU")
        torch = self.torch
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.stream(stream):
            graph.capture_begin()
            try:
                read = body()
            finally:
                graph.capture_end()
        return graph, read

    def launch(self, graph: Any, stream: Any) -> Callable[[], bool]:
        with self.torch.cuda.stream(stream):
            graph.replay()
        return self.marker(stream)


# -- CuPy ------------------------------------------------------------------------------------


class CuPyAdapter(Adapter):
    """CuPy: ``cupy.cuda.Stream(non_blocking=True)`` (``.ptr``), its memory pool (arenas
    per stream: a chunk freed is its stream's next allocation), ``cupy.from_dlpack`` with
    the current stream, stream capture. GPU only."""

    name = "cupy"
    description = "CuPy: cupy.from_dlpack, ndarray.__dlpack__, stream capture (GPU only)"
    stream_ordered_pool = True

    def open(self, simulated: bool) -> Optional[str]:
        if simulated:
            return "no CPU path: CuPy needs a GPU (run without --simulated on one)"
        self.cupy, reason = _import("cupy")
        if reason is not None:
            return reason
        self.np = importlib.import_module("numpy")
        if getattr(self.cupy.cuda.runtime, "is_hip", False):
            return "not installed: CuPy is a ROCm build (the audit's gate is CUDA's)"
        try:
            if self.cupy.cuda.runtime.getDeviceCount() == 0:
                return "no GPU: cupy.cuda.runtime.getDeviceCount() is 0"
        except Exception as error:
            return f"no GPU: {type(error).__name__}: {error}"
        return None

    def device(self) -> str:
        return CUDA

    def version(self) -> str:
        return f"cupy {self.cupy.__version__}"

    def stream(self) -> Any:
        return self.cupy.cuda.Stream(non_blocking=True)

    def legacy_stream(self) -> Any:
        return self.cupy.cuda.Stream.null

    def per_thread_stream(self) -> Any:
        return self.cupy.cuda.Stream.ptds

    def marker(self, stream: Any) -> Callable[[], bool]:
        event = stream.record()
        return lambda: bool(event.done)

    def synchronize(self) -> None:
        self.cupy.cuda.Device().synchronize()

    def stage(self, values: bytes, stream: Any) -> Any:
        cupy = self.cupy
        with stream:
            source = cupy.asarray(self.np.frombuffer(values, dtype=self.np.uint8))
            cupy.empty(COUNT, dtype=cupy.uint8)  # a free chunk for make() on the stream
        stream.synchronize()
        return source

    def make(self, staged: Any, stream: Any) -> Any:
        with stream:
            tensor = self.cupy.empty(COUNT, dtype=self.cupy.uint8)
            tensor[...] = staged
        return tensor

    def address(self, tensor: Any) -> Optional[int]:
        return int(tensor.data.ptr)

    def capsule(self, tensor: Any) -> Any:
        """The array's capsule without synchronization (stream=-1)."""
        return tensor.__dlpack__(stream=-1)

    def consume(self, tensor: Any, stream: Any) -> Read:
        with stream:
            imported = self.cupy.from_dlpack(tensor)
            copy = imported.copy()
            done = stream.record()
        return Read(values=lambda: bytes(self.cupy.asnumpy(copy).tobytes()),
                    ready=lambda: bool(done.done), keep=imported)

    def capture(self, stream: Any, body: Callable[[], Read]) -> Tuple[Any, Read]:
        stream.begin_capture()
        try:
            read = body()
        finally:
            graph = stream.end_capture()
        return graph, read

    def launch(self, graph: Any, stream: Any) -> Callable[[], bool]:
        graph.launch(stream)
        return self.marker(stream)


# -- JAX -------------------------------------------------------------------------------------


def _ready_of(array: Any) -> Callable[[], bool]:
    """Whether a JAX array has been computed, without blocking: its is_ready(), else a
    thread waiting in block_until_ready()."""
    is_ready: Any = getattr(array, "is_ready", None)
    if callable(is_ready):
        try:
            is_ready()
            return lambda: bool(is_ready())
        except Exception:
            pass
    done = threading.Event()

    def wait() -> None:
        array.block_until_ready()
        done.set()

    threading.Thread(target=wait, daemon=True).start()
    return done.is_set


class JaxAdapter(Adapter):
    """JAX: ``jax.dlpack.from_dlpack`` and its arrays' ``__dlpack__``. JAX runs its work on
    streams of its own, which nobody names: as a consumer it reads where it runs, whatever
    the column; as a GPU producer its array is computed (x ^ a mask) from an input that
    PyTorch or CuPy writes on a stream the gate holds and exports through dlsync, so that
    JAX's computation cannot run before the gate opens. Its CPU path elsewhere."""

    name = "jax"
    description = "JAX: jax.dlpack.from_dlpack, Array.__dlpack__ (CPU path without a GPU)"

    def __init__(self) -> None:
        self._device = CPU
        self._feeder: Optional[Adapter] = None

    def open(self, simulated: bool) -> Optional[str]:
        self.jax, reason = _import("jax")
        if reason is not None:
            return reason
        importlib.import_module("jax.dlpack")
        self.jnp = importlib.import_module("jax.numpy")
        self.np = importlib.import_module("numpy")
        self._device = CPU
        if not simulated:
            for platform in ("cuda", "gpu"):
                try:
                    if self.jax.devices(platform):
                        self._device = CUDA
                        break
                except RuntimeError:
                    continue
        self._xor = self.jax.jit(lambda x: x ^ self.jnp.uint8(JAX_MASK))
        return None

    def device(self) -> str:
        return self._device

    def version(self) -> str:
        return f"jax {self.jax.__version__} ({'GPU' if self._device == CUDA else 'CPU'})"

    def _feeding(self) -> Adapter:
        """The GPU producer's input: PyTorch or CuPy, on a stream the gate can hold."""
        if self._feeder is None:
            self._feeder, reasons = _gpu_framework()
            if self._feeder is None:
                raise NotImplementedError("a JAX producer on a GPU is fed by PyTorch or CuPy: "
                                          + "; ".join(reasons))
        return self._feeder

    def stream(self) -> Any:
        return self._feeding().stream() if self._device == CUDA else None

    def legacy_stream(self) -> Any:
        return None  # JAX reads where it runs

    def per_thread_stream(self) -> Any:
        return None

    def marker(self, stream: Any) -> Optional[Callable[[], bool]]:
        return self._feeding().marker(stream) if stream is not None else (lambda: True)

    def synchronize(self) -> None:
        if self._feeder is not None:
            self._feeder.synchronize()

    def stage(self, values: bytes, stream: Any) -> Any:
        masked = bytes(b ^ JAX_MASK for b in values)
        if self._device != CUDA:
            return masked
        return self._feeding().stage(masked, stream)

    def make(self, staged: Any, stream: Any) -> Any:
        if self._device != CUDA:
            return self._xor(self.jnp.asarray(self.np.frombuffer(staged, dtype=self.np.uint8)))
        feeder = self._feeding()
        source = _ExportingTensor(feeder, feeder.make(staged, stream), stream, control=False)
        return self._xor(self.jax.dlpack.from_dlpack(source))

    def address(self, tensor: Any) -> Optional[int]:
        return int(tensor.unsafe_buffer_pointer())

    def consume(self, tensor: Any, stream: Any) -> Read:
        imported = self.jax.dlpack.from_dlpack(tensor)
        result = self._xor(imported)
        mask = self.np.uint8(JAX_MASK)
        return Read(values=lambda: bytes((self.np.asarray(result) ^ mask).tobytes()),
                    ready=_ready_of(result), keep=imported)


# -- cuda.core -------------------------------------------------------------------------------


def _event_done(event: Any) -> Callable[[], bool]:
    """Whether a cuda.core event has completed: its is_done, a property (a method in some
    versions)."""
    def done() -> bool:
        answer = event.is_done
        return bool(answer() if callable(answer) else answer)

    return done


class CudaCoreAdapter(Adapter):
    """cuda.core: ``Device().create_stream()`` (``__cuda_stream__``), ``Buffer`` (its
    ``__dlpack__``; allocated on a stream from the device's memory resource), and
    ``StridedMemoryView(obj, stream_ptr)``, which passes the consumer's stream to
    ``__dlpack__``. GPU only."""

    name = "cuda.core"
    description = "cuda.core: StridedMemoryView, Buffer.__dlpack__ (GPU only)"

    def open(self, simulated: bool) -> Optional[str]:
        if simulated:
            return "no CPU path: cuda.core needs a GPU (run without --simulated on one)"
        core, reason = _import("cuda.core")
        if core is not None and not hasattr(core, "Device"):  # older: cuda.core.experimental
            core, reason = _import("cuda.core.experimental")
        if core is None:
            return reason
        self.core = core
        self.views = importlib.import_module(core.__name__ + ".utils")
        try:
            self.device_ = core.Device(0)
            self.device_.set_current()
        except Exception as error:
            return f"no GPU: cuda.core: {type(error).__name__}: {error}"
        return None

    def device(self) -> str:
        return CUDA

    def version(self) -> str:
        try:
            from importlib.metadata import version

            return f"cuda.core {version('cuda-core')}"
        except Exception:
            return "cuda.core"

    def stream(self) -> Any:
        self.device_.set_current()
        return self.device_.create_stream()

    def marker(self, stream: Any) -> Callable[[], bool]:
        return _event_done(stream.record())

    def synchronize(self) -> None:
        self.device_.sync()

    def _host(self, size: int, stream: Any) -> Any:
        """Pinned host memory the device copies into and the host reads."""
        return self.core.LegacyPinnedMemoryResource().allocate(size, stream=stream)

    def stage(self, values: bytes, stream: Any) -> Any:
        host = self._host(COUNT, stream)
        ctypes.memmove(int(host.handle), values, COUNT)
        source = self.device_.allocate(COUNT, stream=stream)
        source.copy_from(host, stream=stream)
        self.device_.allocate(COUNT, stream=stream)  # freed at once: a free block for make()
        stream.sync()
        return source

    def make(self, staged: Any, stream: Any) -> Any:
        tensor = self.device_.allocate(COUNT, stream=stream)
        tensor.copy_from(staged, stream=stream)
        return tensor

    def address(self, tensor: Any) -> Optional[int]:
        return int(tensor.handle)

    def consume(self, tensor: Any, stream: Any) -> Read:
        view = self.views.StridedMemoryView(tensor, stream_ptr=int(stream.__cuda_stream__()[1]))
        try:
            source = self.core.Buffer.from_handle(view.ptr, COUNT, owner=view)
        except TypeError:  # before owner=: the view is kept by the read below
            source = self.core.Buffer.from_handle(view.ptr, COUNT)
        copy = self.device_.allocate(COUNT, stream=stream)
        copy.copy_from(source, stream=stream)
        done = _event_done(stream.record())

        def values() -> bytes:
            host = self._host(COUNT, stream)
            host.copy_from(copy, stream=stream)
            stream.sync()
            return ctypes.string_at(int(host.handle), COUNT)

        return Read(values=values, ready=done, keep=(view, source))


def built_in() -> List[Adapter]:
    """A fresh instance of every built-in adapter, in the report's order."""
    return [DlsyncAdapter(), DlsyncControlAdapter(), TorchAdapter(), CuPyAdapter(), JaxAdapter(),
            CudaCoreAdapter(), NumPyAdapter()]

