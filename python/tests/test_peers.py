# SPDX-License-Identifier: Apache-2.0
"""A pure-Python __dlpack__ that calls dlsync, consumed by NumPy and PyTorch (Debian's
python3-numpy and python3-torch) with from_dlpack; real torch.cuda.Stream objects where a
GPU exists."""
import unittest

import dlsync
from arrays import Array

try:
    import numpy as np
except ImportError:  # pragma: no cover
    np = None
try:
    import torch
except ImportError:  # pragma: no cover
    torch = None


@unittest.skipIf(np is None, "NumPy is not installed (Debian: python3-numpy)")
class WithNumPy(unittest.TestCase):
    def test_numpy_imports_the_python_dlpack_zero_copy(self):
        x = Array(np.arange(10, dtype=np.int32))
        a = np.from_dlpack(x)
        self.assertEqual(a.ctypes.data, x.data.ctypes.data)
        x.data[3] = 42
        self.assertEqual(a[3], 42)

    def test_a_cpu_array_refuses_stream_values(self):
        x = Array(np.zeros(4))
        for value in (-1, 0, 1, 2, 0x7000):
            with self.subTest(stream=value):
                with self.assertRaisesRegex(ValueError, f"stream={value} is invalid on cpu:0"):
                    x.__dlpack__(stream=value)
        with self.assertRaisesRegex(TypeError, "expected None or an int"):
            x.__dlpack__(stream=True)


@unittest.skipIf(np is None or torch is None, "PyTorch is not installed (Debian: python3-torch)")
class WithTorch(unittest.TestCase):
    def test_torch_imports_the_python_dlpack_zero_copy(self):
        x = Array(np.zeros(8, dtype=np.float32))
        t = torch.from_dlpack(x)
        self.assertEqual(t.data_ptr(), x.data.ctypes.data)
        t[1] = 2.5
        self.assertEqual(x.data[1], 2.5)

    def test_torch_tensor_as_the_data(self):
        """A framework built on torch tensors: dlsync's call, then torch's own capsule."""

        class TorchBacked(Array):
            def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
                dlsync.export(self.__dlpack_device__(), self.stream, stream)
                return torch.utils.dlpack.to_dlpack(self.data)

        import torch.utils.dlpack

        x = TorchBacked(torch.arange(6, dtype=torch.int64))
        a = np.from_dlpack(x)
        self.assertEqual(a.ctypes.data, x.data.data_ptr())
        self.assertEqual(list(a), [0, 1, 2, 3, 4, 5])


@unittest.skipIf(torch is None or not torch.cuda.is_available(), "no CUDA device answers PyTorch")
class WithTorchCuda(unittest.TestCase):
    def test_torch_streams_are_stream_objects(self):
        s = torch.cuda.Stream()
        self.assertEqual(dlsync.stream_to_arg((2, 0), s), s.cuda_stream)
        consumer = torch.cuda.Stream()
        with torch.cuda.stream(s):
            x = torch.ones(1 << 20, device="cuda")
        dlsync.export((2, x.device.index), s, consumer.cuda_stream)
        with torch.cuda.stream(consumer):
            total = x.sum()
        consumer.synchronize()
        self.assertEqual(int(total), 1 << 20)

    def test_torch_consumes_a_python_dlpack_on_the_gpu(self):
        producer = torch.cuda.Stream()
        with torch.cuda.stream(producer):
            data = torch.full((1 << 20,), 3.0, device="cuda")

        class CudaArray(Array):
            def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
                dlsync.export(self.__dlpack_device__(), self.stream, stream)
                return torch.utils.dlpack.to_dlpack(self.data)

        import torch.utils.dlpack

        x = CudaArray(data, device=(2, data.device.index), stream=producer)
        y = torch.from_dlpack(x)  # torch passes its current stream
        self.assertEqual(float(y.sum()), 3.0 * (1 << 20))


if __name__ == "__main__":
    unittest.main()
