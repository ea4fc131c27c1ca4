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
INSTALL = "scripts/install-python-test-deps.sh installs it"


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

    def test_dlsync_testing_checks_the_table(self):
        report = dlsync.testing.check_exchange_api(lambda sim: self.array()[1], require=self.require)
        self.assertEqual(report.device, CPU)
        self.assertLessEqual(set(report.missing), set(self.may_lack))
        print(f"{self.version}: missing {report.missing}, refused {report.refused}, "
              f"current_work_stream(cpu) {report.stream}", file=sys.stderr)


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


if __name__ == "__main__":
    unittest.main()
