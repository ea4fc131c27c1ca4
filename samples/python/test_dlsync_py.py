# SPDX-License-Identifier: Apache-2.0
"""dlsync_py against real peers: NumPy and PyTorch, both directions, zero copy, dtypes and
strides, the deleter run once, single consumption, and the exception kinds for bad streams."""
import ctypes
import gc
import unittest

import dlsync_py

try:
    import numpy as np
except ImportError:  # pragma: no cover
    np = None
try:
    import torch
    import torch.utils.dlpack
except ImportError:  # pragma: no cover
    torch = None


def read_int32(address):
    return ctypes.c_int32.from_address(address).value


class OwnTensor(unittest.TestCase):
    def test_device_and_capsules(self):
        t = dlsync_py.Tensor(4, "int32")
        self.assertEqual(t.__dlpack_device__(), (1, 0))
        self.assertIn('"dltensor"', repr(t.__dlpack__()))
        self.assertIn('"dltensor_versioned"', repr(t.__dlpack__(max_version=(1, 3))))
        self.assertIn('"dltensor"', repr(t.__dlpack__(max_version=(0, 8))))

    def test_deleter_runs_once_per_export(self):
        t = dlsync_py.Tensor(8, "float32")
        before = dlsync_py.deleter_calls()
        capsule = t.__dlpack__(max_version=(1, 3))
        copy = dlsync_py.from_capsule(capsule)
        del copy
        gc.collect()
        self.assertEqual(dlsync_py.deleter_calls(), before + 1)
        del capsule  # consumed: its destructor must not delete again
        gc.collect()
        self.assertEqual(dlsync_py.deleter_calls(), before + 1)
        unconsumed = t.__dlpack__()
        del unconsumed  # never consumed: the capsule deletes it
        gc.collect()
        self.assertEqual(dlsync_py.deleter_calls(), before + 2)

    def test_a_capsule_cannot_be_consumed_twice(self):
        capsule = dlsync_py.Tensor(2, "int8").__dlpack__()
        first = dlsync_py.from_capsule(capsule)
        with self.assertRaises(ValueError):
            dlsync_py.from_capsule(capsule)
        self.assertIn("used_dltensor", repr(capsule))
        del first

    def test_invalid_streams_raise_the_documented_kinds(self):
        t = dlsync_py.Tensor(2, "int32")
        for stream in (-1, 0, 1, 2, 7):  # the CPU has no streams: only None
            with self.assertRaises(ValueError) as raised:
                t.__dlpack__(stream=stream)
            self.assertIn("dl_sync_export", str(raised.exception))
        with self.assertRaises(BufferError):
            t.__dlpack__(copy=True)
        with self.assertRaises(BufferError):
            t.__dlpack__(dl_device=(2, 0))

    def test_exchange_table(self):
        t = dlsync_py.Tensor(1, "int32")
        self.assertIn("dlpack_exchange_api", repr(type(t).__dlpack_c_exchange_api__))
        self.assertEqual(dlsync_py.exchange_api_stream(t), 0)  # the CPU has no stream

    def test_bool_round_trips_through_ours(self):
        t = dlsync_py.Tensor(3, "bool")
        u = dlsync_py.from_dlpack(t)
        self.assertEqual(u.dtype, (6, 8, 1))
        self.assertEqual(u.data_ptr, t.data_ptr)


@unittest.skipIf(np is None, "NumPy is not installed (Debian: python3-numpy)")
class WithNumPy(unittest.TestCase):
    DTYPES = ["int8", "uint8", "int32", "int64", "float16", "float32", "float64", "complex64"]

    def test_numpy_imports_ours_zero_copy(self):
        t = dlsync_py.Tensor(16, "int32")
        a = np.from_dlpack(t)
        self.assertEqual(a.ctypes.data, t.data_ptr)
        ctypes.c_int32.from_address(t.data_ptr + 3 * 4).value = 42  # a write through ours
        self.assertEqual(a[3], 42)  # seen by NumPy, whose imported arrays are read-only

    def test_numpy_rejects_bool(self):
        with self.assertRaises(BufferError):
            dlsync_py.from_dlpack(np.zeros(2, dtype=bool))

    def test_ours_imports_numpy_zero_copy_for_every_dtype(self):
        for name in self.DTYPES:
            with self.subTest(dtype=name):
                a = np.zeros(6, dtype=name)
                t = dlsync_py.from_dlpack(a)
                self.assertEqual(t.data_ptr, a.ctypes.data)
                self.assertEqual(t.shape, (6,))
                self.assertEqual(t.dtype[1], a.dtype.itemsize * 8)
                back = np.from_dlpack(t)  # and back again through our __dlpack__
                self.assertEqual(back.dtype, a.dtype)
                self.assertEqual(back.ctypes.data, a.ctypes.data)

    def test_non_contiguous_views_keep_their_strides(self):
        base = np.arange(24, dtype=np.int32).reshape(4, 6)
        view = base[:, ::2].T  # strides (2, 6) in elements
        t = dlsync_py.from_dlpack(view)
        self.assertEqual(t.shape, (3, 4))
        self.assertEqual(t.strides, (2, 6))
        self.assertEqual(t.data_ptr, view.ctypes.data)
        round_trip = np.from_dlpack(t)
        self.assertTrue(np.array_equal(round_trip, view))
        base[0, 2] = -5
        self.assertEqual(round_trip[1, 0], -5)

    def test_numpy_rejects_streams_with_its_own_kind(self):
        a = np.zeros(2)
        with self.assertRaises((RuntimeError, ValueError, BufferError)):
            a.__dlpack__(stream=1)


@unittest.skipIf(torch is None, "PyTorch is not installed (Debian: python3-torch)")
class WithTorch(unittest.TestCase):
    def test_torch_imports_ours_zero_copy(self):
        t = dlsync_py.Tensor(8, "float32")
        x = torch.from_dlpack(t)
        self.assertEqual(x.data_ptr(), t.data_ptr)
        x[1] = 2.5
        self.assertEqual(ctypes.c_float.from_address(t.data_ptr + 4).value, 2.5)

    def test_ours_imports_torch_zero_copy(self):
        for dtype in (torch.int8, torch.float16, torch.complex64, torch.float64):
            with self.subTest(dtype=dtype):
                x = torch.zeros(5, dtype=dtype)
                t = dlsync_py.from_dlpack(x)
                self.assertEqual(t.data_ptr, x.data_ptr())
                self.assertEqual(t.shape, (5,))

    def test_torch_rejects_bool(self):
        with self.assertRaises(RuntimeError):
            dlsync_py.from_dlpack(torch.zeros(2, dtype=torch.bool))

    def test_torch_views_keep_their_strides(self):
        x = torch.arange(12, dtype=torch.int32).reshape(3, 4)[:, 1::2]
        t = dlsync_py.from_dlpack(x)
        self.assertEqual(t.strides, tuple(x.stride()))
        x[0, 0] = 99
        self.assertEqual(read_int32(t.data_ptr), 99)

    def test_torch_and_ours_share_the_consume_once_rule(self):
        capsule = dlsync_py.Tensor(3, "int32").__dlpack__()
        x = torch.utils.dlpack.from_dlpack(capsule)
        with self.assertRaises(ValueError):
            dlsync_py.from_capsule(capsule)
        del x


if __name__ == "__main__":
    unittest.main()
