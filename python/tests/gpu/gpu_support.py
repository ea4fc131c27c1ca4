# SPDX-License-Identifier: Apache-2.0
"""What the Python GPU suite shares: the frameworks it finds (each with the reason it is
missing), the gate kernels (libdl_sync_gpu_test_kernels.so, built by tests/gpu, loaded
with ctypes), producers whose ``__dlpack__`` calls ``dlsync.export``, consumers that read
through a framework's ``from_dlpack``, and gated runs with their negative controls.

A gated run, as in the C suites (docs/gpu.md): a gate kernel holds the producer's stream
on a flag in host-mapped memory; the producer writes behind it; the consumer imports and
reads. The host opens the gate only once the consumer has finished, or after a window. A
consumer that nothing orders after the producer therefore finishes while the gate is
closed and reads the stale buffer, every time (the control); an ordered one cannot finish
in the window and reads the producer's values. A consumer call that blocks the host (a
framework synchronizing on the host) is detected by a timer thread of the kernels'
library, which opens the gate from outside Python after HOST_BLOCK_LIMIT.

A release run (ReleaseProbe, docs/release.md) gates the other end of a tensor's life: the
gate holds the consumer's read of a capsule while the consumer is done with it and the
producer's pool hands memory out again on the producer's stream.

Skip reasons start with "not installed:" (a framework is missing), "no GPU:" (it sees no
device) or "no gate kernels:" (the library is not built); scripts/gpu-check.sh fails a run
where a GPU is listed and a test skips for one of the last two.
"""
import ctypes
import gc
import glob
import importlib
import json
import os
import threading
import time
import unittest

import numpy as np

import dlsync
from dlsync.audit._adapters import capsule_memory  # what a consumer reads of a capsule
from dlsync.audit._cells import RELEASE_NAMES  # tensor_release's answers, named

# JAX would otherwise take most of the device's memory when it starts, next to PyTorch's
# and CuPy's pools in the same process.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
# A module's data loaded with the module, not at a kernel's first launch: a lazy load may
# have to synchronize the context (CUDA Programming Guide, Lazy Loading, "Concurrent
# Execution"), which a closed gate would hold. Each test also runs its exchange once with
# the gate open before its gated runs, so that every kernel it launches is loaded.
os.environ.setdefault("CUDA_MODULE_DATA_LOADING", "EAGER")

COUNT = 1 << 16
KDLCUDA = 2
DEVICE = (KDLCUDA, 0)
STALE = -1  # what buffers hold before the producer writes (tests/gpu/kernels.h: GPU_STALE)
RACE_WINDOW = 0.020  # an ordered consumer must not finish in it (an unordered one takes µs)
RUNS_SOON = 2.0  # bound on waiting for a control's consumer, which nothing holds
HOST_BLOCK_LIMIT = 0.5  # a consumer call still running then is blocking the host
JAX_MASK = 0x5A5A5A5A  # the JAX consumer's own operation: x ^ JAX_MASK

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))


def pattern(seed):
    """The values a producer with this seed writes: GPU_EXPECTED(seed, 0, i) of
    tests/gpu/kernels.h, in unsigned 32-bit arithmetic."""
    base = np.uint32((seed * 7919) & 0xFFFFFFFF)
    return ((np.arange(COUNT, dtype=np.uint32) + base) & np.uint32(0x7FFFFFFF)).astype(np.int32)


# ---------------------------------------------------------------------------------------
# The record of one run of the suite: counts of gated runs, and the tables.

COUNTS = {"ordered": 0, "controls": 0, "raced": 0, "host_blocked": 0}
_counts_lock = threading.Lock()


def count(ordered=0, controls=0, raced=0, host_blocked=0):
    with _counts_lock:
        COUNTS["ordered"] += ordered
        COUNTS["controls"] += controls
        COUNTS["raced"] += raced
        COUNTS["host_blocked"] += host_blocked


def results_dir():
    """Where tables go (DL_SYNC_GPU_RESULTS_DIR, set by gpu-check.sh), or None."""
    return os.environ.get("DL_SYNC_GPU_RESULTS_DIR") or None


def write_table(name, markdown):
    """Prints a table, and writes it to results_dir()/name.md when that is set."""
    print(f"\n{markdown}\n", flush=True)
    folder = results_dir()
    if folder:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, name + ".md"), "w") as out:
            out.write(markdown + "\n")


def write_counts():
    folder = results_dir()
    if folder:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "counts.json"), "w") as out:
            json.dump(COUNTS, out)


# ---------------------------------------------------------------------------------------
# Frameworks. Each is imported once; reason() says why it cannot run here, or None.


def _import(name):
    try:
        return importlib.import_module(name), None
    except Exception as error:  # ImportError, or a framework failing while it loads
        return None, f"{type(error).__name__}: {error}"


class Framework:
    name = "?"
    _reason = False  # not computed yet

    def reason(self):
        if self._reason is False:
            try:
                self._reason = self._find()
            except Exception as error:  # a device query that fails is "no GPU"
                self._reason = f"no GPU: {self.name}: {type(error).__name__}: {error}"
        return self._reason

    def version(self):
        return f"{self.name} not installed"

    def _missing(self):
        return self.reason() is not None and self.reason().startswith("not installed")


class Torch(Framework):
    """PyTorch. Its streams carry ``.cuda_stream``. torch/utils/dlpack.py: ``to_dlpack``
    is ``torch._C._to_dlpack``, a capsule without any stream logic; ``from_dlpack`` passes
    the current stream's handle to ``__dlpack__`` (1 for the legacy default stream, whose
    cuda_stream is 0)."""

    name = "PyTorch"

    def _find(self):
        self.torch, error = _import("torch")
        if self.torch is None:
            return f"not installed: PyTorch ({error})"
        if getattr(self.torch.version, "hip", None):
            return "not installed: PyTorch is a ROCm build (this suite is for CUDA)"
        if not self.torch.cuda.is_available():
            return (f"no GPU: torch.cuda.is_available() is False (PyTorch "
                    f"{self.torch.__version__}, CUDA {self.torch.version.cuda})")
        import torch.utils.dlpack  # noqa: F401  (the submodule to_dlpack lives in)

        return None

    def version(self):
        if self._missing():
            return f"{self.name} not installed"
        return f"torch {self.torch.__version__} (CUDA {self.torch.version.cuda})"

    def stream(self):
        return self.torch.cuda.Stream()

    def handle(self, stream):
        return stream.cuda_stream

    def empty(self):
        return self.torch.empty(COUNT, dtype=self.torch.int32, device="cuda")

    def from_host(self, values):
        return self.torch.from_numpy(values).to("cuda")

    def set(self, array, values):
        array.copy_(self.torch.from_numpy(values).to("cuda"))
        device_synchronize()

    def pattern(self, seed):
        """pattern(seed) on the device, made once (it synchronizes the device: never call
        it while a gate is closed)."""
        cache = self.__dict__.setdefault("_patterns", {})
        if seed not in cache:
            cache[seed] = self.from_host(pattern(seed))
            device_synchronize()
        return cache[seed]

    def write(self, stream, array, source):
        """The producer's own operation on its stream: a copy of `source` (from pattern())."""
        with self.torch.cuda.stream(stream):
            array.copy_(source)

    def pointer(self, array):
        return array.data_ptr()

    def capsule(self, array):
        return self.torch.utils.dlpack.to_dlpack(array)

    def view(self, pointer, count=COUNT):
        """count int32 at pointer, owning nothing (torch.as_tensor of a CudaArrayView: a
        tensor over the memory, not a copy). The device is named: without it, older PyTorch
        takes the default device, CPU, and copies the memory there (torch/csrc/utils/
        tensor_new.cpp, internal_new_from_data)."""
        device = self.torch.device("cuda", DEVICE[1])
        return self.torch.as_tensor(CudaArrayView(pointer, count), device=device)

    def to_host(self, array):
        return array.cpu().numpy()

    def current(self, stream):
        return self.torch.cuda.stream(stream)

    def consume(self, producer, stream):
        """torch.from_dlpack on `stream` (made current), then a copy there."""
        with self.torch.cuda.stream(stream):
            return self.read(stream, [self.torch.from_dlpack(producer)], single=True)

    def read(self, stream, arrays, single=False):
        """Copies of the arrays made on `stream`, and an event after them."""
        with self.torch.cuda.stream(stream):
            copies = [array.clone() for array in arrays]
            done = self.torch.cuda.Event()
            done.record(stream)
        if single:
            return Consumed(done.query, lambda: copies[0].cpu().numpy())
        return Consumed(done.query, lambda: np.stack([c.cpu().numpy() for c in copies]))

    def legacy_stream(self):
        """The legacy default stream: PyTorch's default stream (cuda_stream 0)."""
        return self.torch.cuda.default_stream()

    def per_thread_stream(self):
        return self.torch.cuda.ExternalStream(2)

    def synchronize(self):
        self.torch.cuda.synchronize()


class CuPy(Framework):
    """CuPy. Its streams carry ``.ptr``. Its capsule comes from ``__dlpack__(stream=-1)``,
    the array API's value for "no synchronization"."""

    name = "CuPy"

    def _find(self):
        self.cupy, error = _import("cupy")
        if self.cupy is None:
            return f"not installed: CuPy ({error})"
        if getattr(self.cupy.cuda.runtime, "is_hip", False):
            return "not installed: CuPy is a ROCm build (this suite is for CUDA)"
        devices = self.cupy.cuda.runtime.getDeviceCount()
        if devices == 0:
            return "no GPU: cupy.cuda.runtime.getDeviceCount() is 0"
        return None

    def version(self):
        if self._missing():
            return f"{self.name} not installed"
        return f"cupy {self.cupy.__version__}"

    def stream(self):
        return self.cupy.cuda.Stream(non_blocking=True)

    def handle(self, stream):
        return stream.ptr

    def empty(self):
        return self.cupy.empty(COUNT, dtype=self.cupy.int32)

    def from_host(self, values):
        return self.cupy.asarray(values)

    def set(self, array, values):
        array.set(values)
        device_synchronize()

    def pattern(self, seed):
        cache = self.__dict__.setdefault("_patterns", {})
        if seed not in cache:
            cache[seed] = self.from_host(pattern(seed))
            device_synchronize()
        return cache[seed]

    def write(self, stream, array, source):
        with stream:
            array[...] = source

    def pointer(self, array):
        return array.data.ptr

    def capsule(self, array):
        return array.__dlpack__(stream=-1)

    def view(self, pointer, count=COUNT):
        """count int32 at pointer, owning nothing (cupy.asarray of a CudaArrayView: an
        array over the memory, not a copy)."""
        return self.cupy.asarray(CudaArrayView(pointer, count))

    def to_host(self, array):
        return self.cupy.asnumpy(array)

    def current(self, stream):
        return stream

    def consume(self, producer, stream):
        """cupy.from_dlpack on `stream` (made current), then a copy there."""
        with stream:
            return self.read(stream, [self.cupy.from_dlpack(producer)], single=True)

    def read(self, stream, arrays, single=False):
        with stream:
            copies = [array.copy() for array in arrays]
            done = stream.record()
        if single:
            return Consumed(lambda: done.done, lambda: self.cupy.asnumpy(copies[0]))
        return Consumed(lambda: done.done, lambda: np.stack([self.cupy.asnumpy(c) for c in copies]))

    def legacy_stream(self):
        return self.cupy.cuda.Stream.null

    def per_thread_stream(self):
        return self.cupy.cuda.Stream.ptds

    def synchronize(self):
        self.cupy.cuda.Device().synchronize()


class Jax(Framework):
    """JAX, as a consumer: ``jax.dlpack.from_dlpack``, with whatever stream it passes to
    ``__dlpack__``; the consumer's operation is ``x ^ JAX_MASK`` (a computation, not a
    copy that could be left out)."""

    name = "JAX"

    def _find(self):
        self.jax, error = _import("jax")
        if self.jax is None:
            return f"not installed: JAX ({error})"
        import jax.dlpack  # noqa: F401
        import jax.numpy  # noqa: F401

        devices, errors = [], []
        for platform in ("cuda", "gpu"):
            try:
                devices = self.jax.devices(platform)
                break
            except RuntimeError as error:
                errors.append(f"jax.devices({platform!r}): {error}")
        if not devices:
            return "no GPU: " + ("; ".join(errors) or "jax.devices('cuda') is empty")
        self.device = devices[0]
        self._xor = self.jax.jit(lambda x: x ^ self.jax.numpy.int32(JAX_MASK))
        return None

    def version(self):
        if self._missing():
            return f"{self.name} not installed"
        plugin = ""
        try:
            import jaxlib

            plugin = f", jaxlib {jaxlib.__version__}"
        except ImportError:
            pass
        return f"jax {self.jax.__version__}{plugin}"

    def consume(self, producer, stream=None):
        imported = self.jax.dlpack.from_dlpack(producer)
        result = self._xor(imported)
        return Consumed(_ready_of(result), lambda: np.asarray(result) ^ np.int32(JAX_MASK))


def _ready_of(array):
    """A callable saying whether a JAX array has been computed, without blocking: its
    is_ready(), else a thread waiting in block_until_ready()."""
    ready = getattr(array, "is_ready", None)
    if callable(ready):
        try:
            ready()
            return ready
        except Exception:
            pass
    done = threading.Event()
    threading.Thread(target=lambda: (array.block_until_ready(), done.set()), daemon=True).start()
    return done.is_set


class CudaCore(Framework):
    """cuda.core's streams: dlsync takes them through their ``__cuda_stream__``."""

    name = "cuda.core"

    def _find(self):
        module, error = _import("cuda.core")
        if module is not None and not hasattr(module, "Device"):  # older: .experimental
            module, error = _import("cuda.core.experimental")
        if module is None:
            return f"not installed: cuda.core ({error})"
        self.core = module
        self.device = module.Device(0)
        self.device.set_current()
        return None

    def version(self):
        if self._missing():
            return f"{self.name} not installed"
        try:
            from importlib.metadata import version

            return f"cuda.core {version('cuda-core')}"
        except Exception:
            return "cuda.core"

    def stream(self):
        self.device.set_current()
        return self.device.create_stream()

    def handle(self, stream):
        return int(stream.__cuda_stream__()[1])


TORCH, CUPY, JAX, CUDA_CORE = Torch(), CuPy(), Jax(), CudaCore()
ARRAY_FRAMEWORKS = (TORCH, CUPY)
GPU_FRAMEWORKS = (TORCH, CUPY, JAX, CUDA_CORE)


def require(*frameworks):
    """Skips the calling test unless every framework can run on a GPU here."""
    for framework in frameworks:
        reason = framework.reason()
        if reason is not None:
            raise unittest.SkipTest(reason)


def any_array_framework():
    """PyTorch, else CuPy: the arrays of a test that needs one kind only."""
    for framework in ARRAY_FRAMEWORKS:
        if framework.reason() is None:
            return framework
    raise unittest.SkipTest(" and ".join(f.reason() for f in ARRAY_FRAMEWORKS))


def versions():
    return ", ".join(f.version() for f in (TORCH, CUPY, JAX, CUDA_CORE))


# ---------------------------------------------------------------------------------------
# The gate kernels (tests/gpu/kernels.cu, python_gate.cu).

KERNELS_NAME = "libdl_sync_gpu_test_kernels.so"


class _Flags(ctypes.Structure):  # tests/gpu/kernels.h: gpu_flags
    _fields_ = [("open", ctypes.c_int), ("signalled", ctypes.c_int),
                ("gate_timeouts", ctypes.c_int), ("reserved", ctypes.c_int)]


class Kernels:
    def __init__(self, path):
        lib = ctypes.CDLL(path)
        vp, i, ll = ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong
        for name, arguments, result in (
            ("gpu_flags_create", [ctypes.POINTER(vp), ctypes.POINTER(vp)], i),
            ("gpu_flags_destroy", [vp], i),
            ("gpu_gate", [vp, vp], i),
            ("gpu_gate_set", [vp, i], None),
            ("gpu_gate_timer_start", [vp, ll], vp),
            ("gpu_gate_timer_stop", [vp], i),
            ("gpu_produce", [vp, vp, i, i, vp], i),
            ("gpu_stream_is_non_blocking", [vp], i),
            ("gpu_stream_synchronize", [vp], i),
            ("gpu_device_synchronize", [], i),
        ):
            function = getattr(lib, name)
            function.argtypes, function.restype = arguments, result
        self.lib, self.path = lib, path

    def produce(self, stream_handle, pointer, seed, count=COUNT):
        """pattern(seed)[:count] written by a kernel on the stream."""
        status = self.lib.gpu_produce(stream_handle, pointer, count, seed, None)
        if status != 0:
            raise RuntimeError(f"gpu_produce: CUDA error {status}")

    def non_blocking(self, stream_handle):
        answer = self.lib.gpu_stream_is_non_blocking(stream_handle)
        if answer < 0:
            raise RuntimeError(f"cudaStreamGetFlags: CUDA error {-answer}")
        return bool(answer)


_kernels = None


def kernels():
    """The library (DL_SYNC_GPU_TEST_KERNELS, else the newest build/*/tests/gpu/ one), or
    SkipTest. Loaded after the frameworks, so that it shares their CUDA runtime."""
    global _kernels
    if _kernels is None:
        path = os.environ.get("DL_SYNC_GPU_TEST_KERNELS")
        if not path:
            found = sorted(glob.glob(os.path.join(ROOT, "build", "*", "tests", "gpu", KERNELS_NAME)),
                           key=os.path.getmtime)
            path = found[-1] if found else None
        if not path or not os.path.exists(path):
            raise unittest.SkipTest(
                f"no gate kernels: {KERNELS_NAME} not found (set DL_SYNC_GPU_TEST_KERNELS; "
                "tests/gpu builds it where nvcc is found)")
        try:
            _kernels = Kernels(path)
        except OSError as error:
            raise unittest.SkipTest(f"no gate kernels: {path}: {error}")
    return _kernels


class Gate:
    """A gate's flags in host-mapped memory (portable, so any stream of the device can
    hold on it)."""

    def __init__(self):
        self.k = kernels()
        host, device = ctypes.c_void_p(), ctypes.c_void_p()
        status = self.k.lib.gpu_flags_create(ctypes.byref(host), ctypes.byref(device))
        if status != 0:
            raise RuntimeError(f"gpu_flags_create: CUDA error {status}")
        self.host, self.device = host.value, device.value
        self.flags = _Flags.from_address(self.host)
        # Open, once, so that the gate kernel is loaded before it ever holds a stream.
        self.open()
        self.hold(None)
        device_synchronize()

    def close(self):
        self.flags.signalled = 0
        self.k.lib.gpu_gate_set(self.host, 0)

    def open(self):
        self.k.lib.gpu_gate_set(self.host, 1)

    def hold(self, stream_handle):
        """Enqueues the gate on the stream: its later work waits until the gate opens."""
        status = self.k.lib.gpu_gate(stream_handle, self.device)
        if status != 0:
            raise RuntimeError(f"gpu_gate: CUDA error {status}")

    @property
    def timeouts(self):
        return self.flags.gate_timeouts

    def destroy(self):
        self.open()
        self.k.lib.gpu_flags_destroy(self.host)


def device_synchronize():
    """cudaDeviceSynchronize: every stream of every framework on the device (through
    ctypes, which lets go of the GIL meanwhile: another thread may have to open its gate)."""
    status = kernels().lib.gpu_device_synchronize()
    if status != 0:
        raise RuntimeError(f"cudaDeviceSynchronize: CUDA error {status}")


# ---------------------------------------------------------------------------------------
# Producers and consumers.


class Producer:
    """An array whose ``__dlpack__`` is Python and calls ``dlsync.export`` (sync=False:
    leaves it out, the control). `stream` is the framework's stream object, passed to
    dlsync as it is: a torch.cuda.Stream (.cuda_stream), a cupy.cuda.Stream (.ptr) or a
    cuda.core Stream (__cuda_stream__)."""

    def __init__(self, array, stream, capsule, sync=True):
        self.array, self.stream, self.capsule, self.sync = array, stream, capsule, sync

    def __dlpack_device__(self):
        return DEVICE

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if self.sync:
            dlsync.export(DEVICE, self.stream, stream)
        return self.capsule(self.array)


class Consumed:
    def __init__(self, ready, to_host):
        self.ready, self.to_host = ready, to_host


class Outcome:
    """What one gated run saw."""

    def __init__(self, raced=False, blocked=False, wrong=0, timeouts=0, error=None):
        self.raced, self.blocked, self.wrong = raced, blocked, wrong
        self.timeouts, self.error = timeouts, error

    @property
    def ordered(self):
        return self.error is None and not self.raced and self.wrong == 0 and self.timeouts == 0

    @property
    def observed_race(self):
        return self.error is None and self.raced and self.wrong == COUNT

    def describe(self):
        if self.error is not None:
            return f"error: {self.error}"
        if self.timeouts:
            return "the gate timed out"
        if self.raced or self.wrong:
            finished = "finished while the producer was held, " if self.raced else ""
            return f"race: {finished}{self.wrong} of {COUNT} values wrong"
        return "ordered (the host blocked)" if self.blocked else "ordered"


HELD_BY_CALL = object()  # gated_run's hold_handle when call() enqueues the gate itself


def gated_run(gate, hold_handle, write, call, expected, window, synchronize):
    """One gated run: the gate closed on `hold_handle`'s stream, `write()` behind it,
    `call()` (the consumer; returns Consumed), then a window of `window` seconds in which
    a finished consumer is a race, the gate opened, `synchronize()`, and the values
    compared with `expected`. With hold_handle HELD_BY_CALL, call() holds a stream on the
    gate and writes behind it itself (the timer covers it)."""
    gate.close()
    if hold_handle is not HELD_BY_CALL:
        gate.hold(hold_handle)
        write()
    k = gate.k
    timer = k.lib.gpu_gate_timer_start(gate.host, int(HOST_BLOCK_LIMIT * 1e9))
    if not timer:
        gate.open()
        raise RuntimeError("gpu_gate_timer_start failed")
    try:
        consumed = call()
    except Exception as error:
        k.lib.gpu_gate_timer_stop(timer)
        gate.open()
        synchronize()
        return Outcome(error=f"{type(error).__name__}: {error}")
    blocked = bool(k.lib.gpu_gate_timer_stop(timer))
    raced = False
    if not blocked:
        end = time.monotonic() + window
        while True:
            if consumed.ready():
                raced = True
                break
            if time.monotonic() > end:
                break
            time.sleep(50e-6)
    gate.open()
    synchronize()
    values = consumed.to_host()
    return Outcome(raced=raced, blocked=blocked, wrong=int(np.count_nonzero(values != expected)),
                   timeouts=gate.timeouts)


def judge(test, what, ordered, outcome):
    """Counts the run and fails the test unless it saw what its kind must see."""
    if ordered:
        count(ordered=1, host_blocked=int(outcome.blocked))
        test.assertTrue(outcome.ordered, f"{what}: {outcome.describe()}")
    else:
        count(controls=1, raced=int(outcome.observed_race))
        test.assertTrue(
            outcome.observed_race,
            f"{what}, control without dlsync.export: expected the race every time, saw "
            f"{outcome.describe()}")


# ---------------------------------------------------------------------------------------
# Release ordering (docs/release.md): a consumer done with an imported tensor, and the
# producer's pool handing the tensor's memory out again on the producer's stream.


class CudaArrayView:
    """count int32 at an address, owning nothing: PyTorch and CuPy take it, without a copy,
    through ``__cuda_array_interface__`` (version 2: no "stream", so that they synchronize
    nothing when they take it). The view of a consumer that holds a capsule and reads its
    memory: only the capsule keeps the memory alive."""

    def __init__(self, pointer, count=COUNT):
        self.__cuda_array_interface__ = {"shape": (count,), "typestr": "<i4",
                                         "data": (pointer, False), "strides": None, "version": 2}


def wait_until(ready, limit):
    """Polls ready() for up to limit seconds without blocking in the runtime; its answer."""
    end = time.monotonic() + limit
    while not ready():
        if time.monotonic() > end:
            return False
        time.sleep(50e-6)
    return True


class _StreamPool:
    """A framework's stream-ordered pool: a block freed goes back to the pool of the stream
    it was allocated on, and the next allocation of its size on that stream gets it, with
    no synchronization (PyTorch's caching allocator; CuPy's memory pool, whose arenas are
    per stream). The producer's stream is one of the framework's own."""

    def __init__(self, framework):
        self.fw, self.name = framework, framework.name

    def stream(self):
        return self.fw.stream()

    def handle(self, stream):
        return self.fw.handle(stream)

    def source(self, seed):
        return self.fw.pattern(seed)

    def prepare(self, stream):
        """Before a run, with the gate open: no free block cached (trim), then one free
        block of twice the size on `stream` (allocated and freed). An allocation on `stream`
        that finds no free block of its own size is cut from that one, without a cudaMalloc
        while a gate holds a stream; one that finds the released block free takes it, since
        both pools give the smallest free block that fits."""
        self.trim()
        self.allocate(stream, 2 * COUNT)  # dropped at once: a free block of stream's

    def produce(self, stream, source):
        """A new array of COUNT int32 allocated on `stream` and `source` copied into it
        there; and a callable saying whether that write has completed."""
        array = self.allocate(stream, COUNT)
        self.fw.write(stream, array, source)
        return array, self.landed(stream)

    def ready(self, stream, consumer_handle, landed):
        """The consumer's stream ordered after the producer's write: dlsync.export."""
        dlsync.export(DEVICE, stream, consumer_handle)

    def pointer(self, array):
        return self.fw.pointer(array)

    def capsule(self, array):
        return self.fw.capsule(array)


class TorchPool(_StreamPool):
    """PyTorch's caching allocator (c10/cuda/CUDACachingAllocator.cpp): blocks are cached per
    stream, the one current when they were allocated; a freed block with no recorded stream
    uses (record_stream) is back in its stream's pool at once."""

    def __init__(self):
        super().__init__(TORCH)

    def trim(self):
        self.fw.torch.cuda.empty_cache()

    def in_use(self):
        return self.fw.torch.cuda.memory_allocated()

    def allocate(self, stream, count):
        torch = self.fw.torch
        with torch.cuda.stream(stream):
            return torch.empty(count, dtype=torch.int32, device="cuda")

    def landed(self, stream):
        event = self.fw.torch.cuda.Event()
        event.record(stream)
        return event.query


class CuPyPool(_StreamPool):
    """CuPy's default memory pool (cupy/cuda/memory.pyx): free chunks kept in an arena per
    stream, the one current when they were allocated; a freed chunk is back in its arena at
    once (PooledMemory.free)."""

    def __init__(self):
        super().__init__(CUPY)

    def _pool(self):
        return self.fw.cupy.get_default_memory_pool()

    def trim(self):
        self._pool().free_all_blocks()

    def in_use(self):
        return self._pool().used_bytes()

    def allocate(self, stream, count):
        with stream:
            return self.fw.cupy.empty(count, dtype=self.fw.cupy.int32)

    def landed(self, stream):
        event = stream.record()
        return lambda: event.done


class ReleaseOutcome:
    """What one release run saw. how: "deleter" (the capsule dropped: its deleter runs at
    once, the control) or "release" (dlsync.tensor_release on the consumer's stream)."""

    def __init__(self, how):
        self.how = how
        self.status = None  # what dlsync.tensor_release returned
        self.x = self.y = None  # the released array's address, the new one's
        self.freed_at_release = None  # the pool's bytes in use fell by the block at release
        self.landed = False  # the new owner's write had completed when the gate opened
        self.freed_later = None  # a deferred release's deleter ran once the read completed
        self.wrong = self.overwritten = 0  # values read: not the tensor's; the new owner's
        self.blocked, self.timeouts, self.error = False, 0, None

    @property
    def reused(self):
        return self.x is not None and self.x == self.y

    @property
    def observed_race(self):
        """The control's race: the block freed by the deleter was the next allocation on the
        producer's stream, whose write completed before the consumer's held read ran, and
        that read returned the new owner's values at every index."""
        return (self.error is None and not self.blocked and self.timeouts == 0 and self.reused
                and self.landed and self.overwritten == COUNT)

    @property
    def ordered(self):
        """The consumer read the tensor's own values at every index, the release did not
        block the host, and what the pool did agrees with what dlsync said it did:
        - deferred: the block was not back in the pool at release, so the new allocation
          got another block, and the deleter ran once the read had completed;
        - ordered (a producer that named its reuse stream): the reuse stream waits for the
          read, so a new array in the same block cannot have been written before the gate
          opened."""
        if self.error is not None or self.blocked or self.timeouts or self.wrong:
            return False
        if self.status == dlsync.RELEASE_DEFERRED:
            return self.freed_at_release is False and not self.reused and self.freed_later is True
        if self.status == dlsync.RELEASED_ORDERED:
            return not (self.reused and self.landed)
        return False

    def describe(self):
        if self.error is not None:
            return f"error: {self.error}"
        if self.blocked:
            return "the host blocked until the timer opened the gate: the run shows nothing"
        if self.timeouts:
            return "the gate timed out"
        parts = []
        if self.how == "release":
            parts.append(f"dlsync.tensor_release: {RELEASE_NAMES.get(self.status, self.status)}")
        else:
            parts.append("the deleter")
        if self.freed_at_release is not None:
            parts.append("the block back in the pool at release" if self.freed_at_release
                         else "the block not back in the pool at release")
        if self.reused:
            parts.append(f"the next allocation on the producer's stream got it ({self.x:#x})")
        else:
            parts.append(f"the next allocation got another block ({self.y:#x}, not {self.x:#x})"
                         if self.x is not None and self.y is not None else "no new allocation")
        if not self.landed:
            parts.append("its write had not completed when the gate opened")
        if self.how == "release" and self.status == dlsync.RELEASE_DEFERRED:
            parts.append({True: "the deleter ran once the read completed",
                          False: "the deleter never ran", None: ""}[self.freed_later])
        parts.append(f"{self.wrong} of {COUNT} values read wrong ({self.overwritten} the new "
                     "owner's)")
        return ", ".join(p for p in parts if p)


class ReleaseProbe:
    """Gated release runs of one producer pool and one consumer framework.

    A run: the producer allocates an array on its stream, writes pattern(seed) there and
    hands out a capsule, dropping its own reference (the capsule alone keeps the memory).
    dlsync.export orders the consumer's stream after the write. The gate closes on the
    consumer's stream; behind it, the consumer reads the capsule's memory (its address,
    taken from the capsule, through a view that owns nothing: a copy into `out`). The
    consumer is then done with the tensor: the control drops the capsule (its deleter runs
    now); the ordered run calls dlsync.tensor_release(capsule, consumer's stream). Then the
    producer allocates an array of the same size on its stream and writes pattern(seed + 1)
    into it. The host waits (up to RUNS_SOON) for that write to complete, and only then
    opens the gate. A timer opens the gate if a call blocks the host meanwhile."""

    def __init__(self, pool, consumer, gate):
        self.pool, self.cfw, self.gate = pool, consumer, gate
        self.k = kernels()
        self.stream = pool.stream()
        self.consumer = consumer.stream()
        self.consumer_handle = consumer.handle(self.consumer)
        for what, handle in (("producer", pool.handle(self.stream)),
                             ("consumer", self.consumer_handle)):
            if handle is not None and not self.k.non_blocking(handle):
                raise AssertionError(f"the {what}'s stream synchronizes with the legacy default "
                                     "stream: the gate would hold other streams too")
        self.out = consumer.empty()
        self.stale = np.full(COUNT, STALE, np.int32)
        self.nbytes = COUNT * np.dtype(np.int32).itemsize

    def settle(self):
        """With the gate open: every stream done, every deferred release's deleter run."""
        device_synchronize()
        end = time.monotonic() + RUNS_SOON
        while dlsync.release_poll() and time.monotonic() < end:
            pass

    def run(self, seed, how, gated=True):
        pool, gate, outcome = self.pool, self.gate, ReleaseOutcome(how)
        old, new = pool.source(seed), pool.source(seed + 1)  # made before the gate closes
        self.settle()
        self.cfw.set(self.out, self.stale)
        pool.prepare(self.stream)
        gc.collect()  # no collection frees an array while the pool's bytes are compared
        collecting = gc.isenabled()
        gc.disable()
        held = timer = y = None
        try:
            x, landed = pool.produce(self.stream, old)
            pool.ready(self.stream, self.consumer_handle, landed)
            capsule = pool.capsule(x)
            outcome.x, size, device = capsule_memory(capsule)
            if (outcome.x, size, device) != (pool.pointer(x), self.nbytes, DEVICE):
                raise AssertionError(f"the capsule says {size} bytes at {outcome.x:#x} on {device}, "
                                     f"the array is {self.nbytes} at {pool.pointer(x):#x}")
            del x, landed  # the producer's own references: the capsule alone keeps the block
            view = self.cfw.view(outcome.x)
            if self.cfw.pointer(view) != outcome.x:
                raise AssertionError("the consumer's view of the capsule's memory is a copy")
            if gated:
                gate.close()
                held = True
                gate.hold(self.consumer_handle)
                timer = self.k.lib.gpu_gate_timer_start(gate.host, int(HOST_BLOCK_LIMIT * 1e9))
                if not timer:
                    raise RuntimeError("gpu_gate_timer_start failed")
            self.cfw.write(self.consumer, self.out, view)  # the consumer's read, held
            del view
            before = pool.in_use()
            if how == "release":
                outcome.status = dlsync.tensor_release(capsule, self.consumer_handle)
            del capsule  # the control: the deleter runs now (after a release: nothing)
            after = pool.in_use()
            if before is not None and after is not None:
                outcome.freed_at_release = before - after >= self.nbytes
            y, y_landed = pool.produce(self.stream, new)
            outcome.y = pool.pointer(y)
            if timer:
                outcome.blocked = bool(self.k.lib.gpu_gate_timer_stop(timer))
                timer = None
            outcome.landed = wait_until(y_landed, RUNS_SOON)
        except Exception as error:
            outcome.error = f"{type(error).__name__}: {error}"
        finally:
            if timer:
                self.k.lib.gpu_gate_timer_stop(timer)
            if held:
                gate.open()
            if collecting:
                gc.enable()
        device_synchronize()
        if outcome.error is not None:
            return outcome
        values = self.cfw.to_host(self.out)
        outcome.wrong = int(np.count_nonzero(values != pattern(seed)))
        outcome.overwritten = int(np.count_nonzero(values == pattern(seed + 1)))
        outcome.timeouts = gate.timeouts if gated else 0
        if outcome.status == dlsync.RELEASE_DEFERRED:
            # y is alive still: only the released block can leave the bytes in use now.
            mark = pool.in_use()
            if mark is not None:
                end = time.monotonic() + RUNS_SOON
                while True:
                    dlsync.release_poll()
                    outcome.freed_later = mark - pool.in_use() >= self.nbytes
                    if outcome.freed_later or time.monotonic() > end:
                        break
                    time.sleep(1e-3)
        del y
        return outcome


def judge_release(test, what, ordered, outcome):
    """As judge(), for a release run: the ordered run must be ordered, the control must
    show its race."""
    if ordered:
        count(ordered=1, host_blocked=int(outcome.blocked))
        test.assertTrue(outcome.ordered,
                        f"{what}, with dlsync.tensor_release: {outcome.describe()}")
    else:
        count(controls=1, raced=int(outcome.observed_race))
        hint = ""
        if outcome.error is None and not outcome.reused:
            hint = (": the pool did not hand the freed block to the next allocation of its size "
                    "on the producer's stream, so the control cannot show the race (a "
                    "PYTORCH_CUDA_ALLOC_CONF or CuPy allocator setting?)")
        test.assertTrue(
            outcome.observed_race,
            f"{what}, control (the capsule's deleter, no dlsync): expected the race every time, "
            f"saw {outcome.describe()}{hint}")
