# SPDX-License-Identifier: Apache-2.0
"""The DLPack exchange tables frameworks ship on PyPI, on the CPU (no GPU needed):
apache-tvm-ffi's (tvm_ffi.core.DLTensorTestWrapper, the type its own tests exchange
through), cuda-core's StridedMemoryView, PyTorch's torch.Tensor (2.10 and later). For each:
the versions and chain read, CPU tensors imported through dlsync with no stream work, the
release path running the producer's deleter once, and dlsync.testing.check_exchange_api.

A framework that is not installed is skipped with the reason. scripts/install-python-test-
deps.sh installs them, pinned, into the folder DL_SYNC_PYPI_SITE names (the CMake build
passes build/pypi-site), PyTorch from PyPI into its peers/ there (pypi_site.py).
"""
import gc
import os
import sys
import unittest

import pypi_site  # noqa: F401 (ahead of the system's packages: Debian's torch is 1.13)
import numpy as np  # noqa: E402

import dlsync  # noqa: E402
import dlsync.testing  # noqa: E402
from dlsync import _dlsync  # noqa: E402

CPU, CUDA = (1, 0), (2, 0)
INSTALL = "scripts/install-python-test-deps.sh installs it" + (f" ({pypi_site.MISSING})" if pypi_site.MISSING else "")


def _tvm_ffi():
    # Its own tables are under test, not the torch extension it would compile at import.
    os.environ.setdefault("TVM_FFI_DISABLE_TORCH_C_DLPACK", "1")
    import tvm_ffi

    wrapper = tvm_ffi.core.DLTensorTestWrapper
    return f"apache-tvm-ffi {tvm_ffi.__version__}", lambda data: wrapper(tvm_ffi.from_dlpack(data))


def _cuda_core():
    import cuda.core
    from cuda.core.utils import StridedMemoryView

    return (f"cuda-core {cuda.core.__version__}",
            lambda data: StridedMemoryView.from_dlpack(data, stream_ptr=-1))


def _torch():
    import torch

    if not any(hasattr(torch.Tensor, n) for n in ("__dlpack_c_exchange_api__", "__c_dlpack_exchange_api__")):
        raise ImportError(f"torch {torch.__version__} has no exchange table (PyTorch 2.10 and later have one)")
    return f"torch {torch.__version__}", torch.from_numpy


def _find(name, package, load):
    try:
        return load() + (None,)
    except Exception as error:  # ImportError, or a package failing while it loads
        return None, None, f"not installed: {name} ({type(error).__name__}: {error}); {INSTALL}"


class Table:
    """The checks of one framework's table; a subclass names the framework."""

    load = None
    name = package = "?"
    # The entry points check_exchange_api requires of it, and those it may lack (NULL),
    # as the pinned version ships them.
    require = dlsync.testing.REQUIRED_ENTRY_POINTS
    may_lack = ()

    @classmethod
    def setUpClass(cls):
        cls.version, make, reason = _find(cls.name, cls.package, cls.load)
        if reason is not None:
            raise unittest.SkipTest(reason)
        cls.make = staticmethod(make)
        print(f"\n{cls.version}", file=sys.stderr)

    def array(self, n=16):
        data = np.arange(n, dtype=np.uint8)
        return data, self.make(data)

    def test_versions_and_chain_are_read(self):
        data, x = self.array()
        chain = _dlsync._exchange_table_chain(x)
        self.assertGreaterEqual(len(chain), 1)
        major, minor, entries = next(item for item in chain if item[0] == 1)
        self.assertGreaterEqual(minor, 2)
        present = {name for name, there in zip(dlsync.testing.ENTRY_POINTS, entries) if there}
        self.assertLessEqual(set(self.require), present)
        print(f"{self.version}: chain {[(a, b) for a, b, _ in chain]}, lacks "
              f"{sorted(set(dlsync.testing.ENTRY_POINTS) - present) or 'nothing'}", file=sys.stderr)

    def test_cpu_tensors_are_imported_with_no_stream_work(self):
        with dlsync.testing.SimulatedDevice() as sim:
            consumer = sim.stream()
            consumer.begin_capture()  # any dlsync stream work would be a node of this graph
            data, x = self.array()
            capsule = dlsync.import_tensor(x, CUDA, consumer)
            self.assertEqual(consumer.end_capture(), (0, 0))
            fields = _dlsync._exchange_describe(capsule)
            self.assertEqual((fields["device"], fields["data"], fields["shape"]), (CPU, data.ctypes.data, (16,)))
            self.assertEqual(dlsync.tensor_release(capsule, None), dlsync.RELEASED_NOW)

    def test_the_release_runs_the_producers_deleter_once(self):
        data, x = self.array()
        capsule = _dlsync._exchange_counted(dlsync.import_tensor(x, CPU, None))
        before = _dlsync._exchange_deletions()
        self.assertEqual(dlsync.tensor_release(capsule, None), dlsync.RELEASED_NOW)
        del x
        gc.collect()
        self.assertEqual(_dlsync._exchange_deletions() - before, 1)
        with self.assertRaisesRegex(TypeError, "not yet consumed"):
            dlsync.tensor_release(capsule, None)
        self.assertEqual(_dlsync._exchange_deletions() - before, 1)

    def own_export(self, x):
        """x as NumPy reads it through x's own __dlpack__ (the peer's own export)."""
        return np.from_dlpack(x)

    def dtypes_and_shapes(self):
        rng = np.random.default_rng(5)
        for dtype in (np.uint8, np.int32, np.int64, np.float16, np.float32, np.float64, np.complex64, np.bool_):
            for shape in ((16,), (3, 5), (), (0,), (1,) * 12):
                data = (rng.integers(0, 100, size=shape) % 2 == 1) if dtype is np.bool_ else \
                    rng.integers(0, 100, size=shape).astype(dtype)
                yield np.ascontiguousarray(data)
        grid = np.arange(40, dtype=np.float32).reshape(5, 8)
        yield from (grid[:, ::2], grid.T, grid[1:4, 2:7])  # strided views

    def test_values_through_the_table_match_the_peers_own_export(self):
        checked = refused = 0
        for data in self.dtypes_and_shapes():
            with self.subTest(dtype=str(data.dtype), shape=data.shape):
                try:
                    x = self.make(data)
                    expected = self.own_export(x)
                except Exception:  # a dtype or shape the peer does not take
                    refused += 1
                    continue
                got = np.from_dlpack(Holder(dlsync.import_tensor(x, CPU, None)))
                self.assertEqual((got.dtype, got.shape), (expected.dtype, expected.shape))
                np.testing.assert_array_equal(got, expected)
                checked += 1
        self.assertGreater(checked, 20)
        print(f"{self.version}: {checked} dtype/shape cases match its own export, {refused} it does not make",
              file=sys.stderr)

    def test_values_through_its_dlpack_match_too(self):
        data, x = self.array()
        if not hasattr(x, "__dlpack__"):
            self.skipTest(f"{type(x).__name__} has no __dlpack__")
        capsule = dlsync.import_tensor(Plain(x), CPU, None)  # no table on Plain: __dlpack__
        np.testing.assert_array_equal(np.from_dlpack(Holder(capsule)), data)

    def test_many_imports_leak_nothing(self):
        data, x = self.array()
        counts = sys.getrefcount(x), sys.getrefcount(data)
        before = _dlsync._exchange_deletions()
        n = 20000
        for _ in range(n):
            capsule = _dlsync._exchange_counted(dlsync.import_tensor(x, CPU, None))
            dlsync.tensor_release(capsule, None)
        del capsule
        gc.collect()
        self.assertEqual(_dlsync._exchange_deletions() - before, n)  # each deleter once
        self.assertEqual((sys.getrefcount(x), sys.getrefcount(data)), counts)

    def test_dlsync_testing_checks_the_table(self):
        report = dlsync.testing.check_exchange_api(lambda sim: self.array()[1], require=self.require)
        self.assertEqual(report.device, CPU)
        self.assertLessEqual(set(report.missing), set(self.may_lack))
        print(f"{self.version}: missing {report.missing}, refused {report.refused}, "
              f"current_work_stream(cpu) {report.stream}", file=sys.stderr)


class Holder:
    """A capsule handed to NumPy's from_dlpack once."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack_device__(self):
        return CPU

    def __dlpack__(self, **kwargs):
        capsule, self.capsule = self.capsule, None
        return capsule


class Plain:
    """x without its type's table: only its __dlpack__."""

    def __init__(self, x):
        self.x = x

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()

    def __dlpack__(self, **kwargs):
        return self.x.__dlpack__(**kwargs)


class TvmFfi(Table, unittest.TestCase):
    name, package, load = "apache-tvm-ffi", "tvm_ffi", staticmethod(_tvm_ffi)
    # Its test wrapper's table (0.1.15) has no allocator and no non-owning view.
    require = ("managed_tensor_from_py_object_no_sync", "managed_tensor_to_py_object_no_sync", "current_work_stream")
    may_lack = ("managed_tensor_allocator", "dltensor_from_py_object_no_sync")


class CudaCore(Table, unittest.TestCase):
    name, package, load = "cuda-core", "cuda.core", staticmethod(_cuda_core)
    # Its allocator is there but refuses (NotImplementedError: a view allocates nothing).
    require = tuple(e for e in dlsync.testing.ENTRY_POINTS if e != "managed_tensor_allocator")


class Torch(Table, unittest.TestCase):
    name, package, load = "PyTorch 2.10+ (CPU)", "torch", staticmethod(_torch)

    def test_what_its_table_gives_that_its_dlpack_refuses(self):
        # docs/exchange.md: a conjugate view comes out unconjugated, a tensor that requires
        # grad as its data; its own __dlpack__ refuses both. dlsync passes them on as given.
        import torch

        view = torch.tensor([1 - 2j, 3 + 4j]).conj()
        with self.assertRaises(BufferError):
            view.__dlpack__()
        got = np.from_dlpack(Holder(dlsync.import_tensor(view, CPU, None)))
        self.assertEqual(got.tolist(), [1 - 2j, 3 + 4j])  # PyTorch's bytes, not the view's values
        grad = torch.ones(2, requires_grad=True)
        with self.assertRaises(BufferError):
            grad.__dlpack__()
        self.assertEqual(np.from_dlpack(Holder(dlsync.import_tensor(grad, CPU, None))).tolist(), [1, 1])


def _numpy():
    if int(np.__version__.split(".")[0]) < 2:
        raise ImportError(f"numpy {np.__version__}: the peers' NumPy 2 is not installed")
    return f"numpy {np.__version__}", lambda data: data.copy()


def _jax():
    import jax
    import jax.numpy as jnp

    return f"jax {jax.__version__}", lambda data: jnp.asarray(data)


class Dlpack:
    """A peer without a table: imported through its __dlpack__."""

    load = None
    name = package = "?"

    @classmethod
    def setUpClass(cls):
        cls.version, make, reason = _find(cls.name, cls.package, cls.load)
        if reason is not None:
            raise unittest.SkipTest(reason)
        cls.make = staticmethod(make)

    def test_values_match_its_own_export(self):
        for dtype in (np.uint8, np.int32, np.float32, np.float64, np.complex64, np.bool_):
            for shape in ((16,), (3, 5), (), (0,)):
                with self.subTest(dtype=dtype.__name__, shape=shape):
                    data = np.ascontiguousarray((np.arange(int(np.prod(shape))) % 7).reshape(shape).astype(dtype))
                    x = self.make(data)
                    got = np.from_dlpack(Holder(dlsync.import_tensor(x, CPU, None)))
                    expected = np.from_dlpack(x)
                    self.assertEqual((got.dtype, got.shape), (expected.dtype, expected.shape))
                    np.testing.assert_array_equal(got, expected)

    def test_the_deleter_runs_once_and_many_imports_leak_nothing(self):
        x = self.make(np.arange(16, dtype=np.uint8))
        count = sys.getrefcount(x)
        before = _dlsync._exchange_deletions()
        n = 20000
        for _ in range(n):
            dlsync.tensor_release(_dlsync._exchange_counted(dlsync.import_tensor(x, CPU, None)), None)
        gc.collect()
        self.assertEqual(_dlsync._exchange_deletions() - before, n)
        self.assertEqual(sys.getrefcount(x), count)


class NumPy(Dlpack, unittest.TestCase):
    name, package, load = "numpy 2", "numpy", staticmethod(_numpy)


class Jax(Dlpack, unittest.TestCase):
    name, package, load = "jax[cpu]", "jax", staticmethod(_jax)


class AuditOverThePeers(unittest.TestCase):
    """python -m dlsync.audit's run on the simulated device over PyTorch, JAX and NumPy: every
    pair's cells are ordered, not available, or an error DLPack asks for; the exchange cell
    with PyTorch's table is ordered for every consumer."""

    def test_every_pair(self):
        import dlsync.audit

        names = []
        for name, load in (("torch", _torch), ("jax", _jax), ("numpy", _numpy)):
            try:
                load()
                names.append(name)
            except Exception as error:
                print(f"audit without {name}: {error}", file=sys.stderr)
        if len(names) < 2:
            self.skipTest(f"fewer than two peers installed ({names}); {INSTALL}")
        report = dlsync.audit.run(names, names, simulated=True, window=0.05)
        for pair in report.pairs:
            self.assertFalse(pair.not_run, pair.title)
            for key, cell in pair.cells.items():
                self.assertIn(cell.verdict, ("ordered", "not available", "error"), (pair.title, key, cell.detail))
                self.assertFalse(cell.unexpected_error, (pair.title, key, cell.detail))
            if pair.producer == "torch":
                self.assertEqual(pair.cells["exchange"].verdict, "ordered", (pair.title, pair.cells["exchange"].detail))
        self.assertEqual(report.exit_status(), 0)
        self.assertEqual(report.to_json()["summary"]["errors_unexpected"], [])


if __name__ == "__main__":
    unittest.main()
