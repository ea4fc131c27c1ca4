# SPDX-License-Identifier: Apache-2.0
"""dlsync's Python API without a device: every cell of the stream table, the exception
kinds and messages, the stream-object protocols and the capture policy."""
import ctypes
import shutil
import subprocess
import sys
import types
import unittest

import dlsync
import dlsync.testing
from dlsync import _dlsync
from dlsync._dlsync import _raise_status

CUDA_TYPES = (2, 3, 13)  # kDLCUDA, kDLCUDAHost, kDLCUDAManaged
ROCM_TYPES = (10, 11)  # kDLROCM, kDLROCMHost
STREAMLESS_TYPES = (1, 4, 7, 8, 9, 12, 14, 15, 16, 17, 18)
HANDLE = 0x7F00_1234_5000  # any address above 2 names a stream


class StreamTable(unittest.TestCase):
    """stream_from_arg: (handle, needs_sync) for each accepted cell, ValueError with a
    message naming the value and the device for the others."""

    def assert_cell(self, device, stream, handle, needs_sync):
        with self.subTest(device=device, stream=stream):
            got = dlsync.stream_from_arg(device, stream)
            self.assertEqual(got[1], needs_sync)
            if needs_sync:
                self.assertEqual(got[0], handle)

    def assert_rejected(self, device, stream, *words):
        with self.subTest(device=device, stream=stream):
            with self.assertRaises(ValueError) as raised:
                dlsync.stream_from_arg(device, stream)
            message = str(raised.exception)
            self.assertIn(f"stream={stream}", message)
            for word in words:
                self.assertIn(word, message)

    def test_cuda_column(self):
        for t in CUDA_TYPES:
            device = (t, 0)
            self.assert_cell(device, None, dlsync.STREAM_LEGACY, True)
            self.assert_cell(device, -1, None, False)
            self.assert_rejected(device, 0, "ambiguous", "1 (legacy default)", "2 (per-thread default)")
            self.assert_cell(device, 1, dlsync.STREAM_LEGACY, True)
            self.assert_cell(device, 2, dlsync.STREAM_PER_THREAD, True)
            self.assert_cell(device, 3, 3, True)
            self.assert_cell(device, HANDLE, HANDLE, True)
            for bad in (-2, -3, -(2**63)):
                self.assert_rejected(device, bad, "invalid")

    def test_rocm_column(self):
        for t in ROCM_TYPES:
            device = (t, 1)
            self.assert_cell(device, None, 0, True)
            self.assert_cell(device, -1, None, False)
            self.assert_cell(device, 0, 0, True)
            self.assert_rejected(device, 1, "rocm")
            self.assert_rejected(device, 2, "rocm")
            self.assert_cell(device, 3, 3, True)
            self.assert_cell(device, HANDLE, HANDLE, True)
            for bad in (-2, -(2**63)):
                self.assert_rejected(device, bad, "invalid")

    def test_streamless_devices(self):
        for t in STREAMLESS_TYPES:
            device = (t, 0)
            self.assert_cell(device, None, None, False)
            for value in (-1, 0, 1, 2, 3, HANDLE, -2):
                self.assert_rejected(device, value, "no streams", "expected None")

    def test_export_follows_the_table_on_the_cpu(self):
        dlsync.export((1, 0), None, None)
        for value in (-1, 0, 1, 2, HANDLE, -2):
            with self.assertRaisesRegex(ValueError, f"stream={value} is invalid on cpu:0"):
                dlsync.export((1, 0), None, value)

    def test_export_rejects_the_invalid_cells_before_any_runtime_call(self):
        for t in CUDA_TYPES:
            with self.assertRaisesRegex(ValueError, "ambiguous"):
                dlsync.export((t, 0), HANDLE, 0)
        for t in ROCM_TYPES:
            with self.assertRaisesRegex(ValueError, "stream=2 is invalid"):
                dlsync.export((t, 0), HANDLE, 2)

    def test_minus_one_and_the_same_stream_need_no_runtime(self):
        # fake handles: these cells must not reach a runtime
        dlsync.export((2, 0), HANDLE, -1)
        dlsync.export((10, 0), HANDLE, -1)
        dlsync.export((2, 0), HANDLE, HANDLE)  # the same stream: nothing to order
        dlsync.export((2, 0), None, 1)  # None and 1 both name the legacy stream

    def test_unknown_devices(self):
        with self.assertRaisesRegex(ValueError, "unknown device type 99"):
            dlsync.stream_from_arg((99, 0), None)
        with self.assertRaisesRegex(ValueError, "device"):
            dlsync.stream_from_arg((2, -1), None)

    def test_stream_to_arg(self):
        for t in CUDA_TYPES:
            self.assertEqual(dlsync.stream_to_arg((t, 0), None), 1)
            self.assertEqual(dlsync.stream_to_arg((t, 0), 1), 1)
            self.assertEqual(dlsync.stream_to_arg((t, 0), 2), 2)
            self.assertEqual(dlsync.stream_to_arg((t, 0), HANDLE), HANDLE)
        for t in ROCM_TYPES:
            self.assertEqual(dlsync.stream_to_arg((t, 0), None), 0)
            self.assertEqual(dlsync.stream_to_arg((t, 0), 1), 0)  # the null stream
            self.assertEqual(dlsync.stream_to_arg((t, 0), HANDLE), HANDLE)
            with self.assertRaisesRegex(ValueError, "per-thread default stream has no stream argument"):
                dlsync.stream_to_arg((t, 0), 2)
        self.assertIsNone(dlsync.stream_to_arg((1, 0), None))

    def test_the_table_is_in_the_help(self):
        doc = dlsync.export.__doc__
        for cell in ("legacy default", "no sync", "ambiguous", "per-thread", "null stream", "nothing to do"):
            self.assertIn(cell, doc)
        self.assertIn("dlsync.export(self.__dlpack_device__(), self.stream, stream)", doc)


class ArgumentTypes(unittest.TestCase):
    def test_stream_must_be_none_or_int(self):
        for bad in (True, False, 1.0, "1", b"1", [1], object()):
            for call in (
                lambda: dlsync.export((2, 0), HANDLE, bad),
                lambda: dlsync.stream_from_arg((2, 0), bad),
            ):
                with self.subTest(stream=bad):
                    with self.assertRaisesRegex(TypeError, "expected None or an int") as raised:
                        call()
                    self.assertIn(f"stream={bad!r}", str(raised.exception))

    def test_any_index_integer_is_an_int(self):
        # The array API's callers pass numpy integers; any __index__ integer is an int.
        class Index:
            def __init__(self, value):
                self.value = value

            def __index__(self):
                return self.value

        kinds = [Index]
        try:
            import numpy as np

            kinds += [np.int64, np.uint64]
        except ImportError:
            pass
        for kind in kinds:
            with self.subTest(kind=kind.__name__):
                self.assertEqual(dlsync.stream_from_arg((2, 0), kind(2)), (dlsync.STREAM_PER_THREAD, True))
                self.assertIsNone(dlsync.export((2, 0), HANDLE, kind(HANDLE)))  # its own stream
                self.assertIsNone(dlsync.export((kind(1), kind(0)), None, None))
                self.assertIsNone(dlsync.push_dep((1, 0), kind(0), kind(0)))

    def test_stream_beyond_64_bits(self):
        with self.assertRaisesRegex(ValueError, "does not fit a 64-bit int") as raised:
            dlsync.stream_from_arg((2, 0), 2**64)
        # what each device accepts, never 0 for CUDA
        self.assertIn("CUDA: 1, 2 or a stream handle; ROCm: 0 or a stream handle", str(raised.exception))

    def test_device_must_be_a_pair_of_ints(self):
        for bad in (None, 2, (2,), (2, 0, 0), [2, 0], "cuda"):
            with self.subTest(device=bad):
                with self.assertRaisesRegex(TypeError, r"expected a \(device_type, device_id\) tuple"):
                    dlsync.export(bad, None, None)
        with self.assertRaisesRegex(TypeError, "device_type must be an int"):
            dlsync.export((True, 0), None, None)
        with self.assertRaisesRegex(TypeError, "device_id must be an int"):
            dlsync.export((2, 0.0), None, None)
        with self.assertRaisesRegex(ValueError, "does not fit a 32-bit int"):
            dlsync.export((2, 2**31), None, None)

    def test_keywords(self):
        dlsync.export(device=(1, 0), producer_stream=None, stream=None)
        dlsync.export((1, 0), stream=None, producer_stream=None)
        self.assertEqual(dlsync.stream_from_arg(device=(2, 0), stream=2), (2, True))
        # Keywords built at run time are not interned: matched by value.
        self.assertEqual(dlsync.stream_from_arg(**{"dev" + "ice": (2, 0), "str" + "eam": 2}), (2, True))

    def test_calls_the_signature_does_not_take(self):
        for call, message in [
            (lambda: dlsync.export((1, 0), None), r"export\(\) missing required argument 'stream' \(pos 3\)"),
            (lambda: dlsync.export((1, 0), None, None, None), r"export\(\) takes 3 positional arguments but 4 were given"),
            (lambda: dlsync.export((1, 0), None, strem=None), r"export\(\) got an unexpected keyword argument 'strem'"),
            (lambda: dlsync.export((1, 0), None, None, device=(1, 0)),
             r"export\(\) got multiple values for argument 'device'"),
            (lambda: dlsync.push_dep((2, 0), src=1), r"push_dep\(\) missing required argument 'dst'"),
            (lambda: dlsync.group_wait(), r"group_wait\(\) missing required argument 'device' \(pos 1\)"),
            (lambda: dlsync.stream_to_arg((2, 0), 1, 2), r"stream_to_arg\(\) takes 2 positional"),
            (lambda: dlsync.tensor_release(tensor=None, stream=1, extra=2), r"unexpected keyword argument 'extra'"),
        ]:
            with self.subTest(message=message):
                with self.assertRaisesRegex(TypeError, message):
                    call()


class CudaStreamV0:
    def __init__(self, address):
        self.address = address

    def __cuda_stream__(self):
        return (0, self.address)


class CudaStreamV1(CudaStreamV0):
    def __cuda_stream__(self):
        return (1, self.address)


class TorchLikeStream:
    def __init__(self, address):
        self.cuda_stream = address


class CuPyLikeStream:
    def __init__(self, address):
        self.ptr = address


class EveryProtocol(CudaStreamV0):
    cuda_stream = 111
    ptr = 222


class TorchAndCuPy:
    """Both attribute protocols: .cuda_stream (PyTorch's) is the one read."""

    def __init__(self, address):
        self.cuda_stream = address
        self.ptr = address + 4096


class SlotsStream:
    """.ptr as a member of the type, as a Cython class's attribute."""

    __slots__ = ("ptr",)

    def __init__(self, address):
        self.ptr = address


class PropertyStream:
    def __init__(self, address):
        self._address = address

    @property
    def cuda_stream(self):
        return self._address


class DynamicStream:
    """Attributes from __getattr__: only the generic lookup finds them."""

    def __init__(self, address):
        self._address = address

    def __getattr__(self, name):
        if name == "ptr":
            return self._address
        raise AttributeError(name)


class RedirectedSlots:
    """A __slots__ member the class's own __getattribute__ overrides."""

    __slots__ = ("ptr",)

    def __init__(self, address):
        self.ptr = address + 4096

    def __getattribute__(self, name):
        if name == "ptr":
            return HANDLE
        return object.__getattribute__(self, name)


class FailingProperty:
    @property
    def ptr(self):
        raise RuntimeError("no stream yet")


class StreamObjects(unittest.TestCase):
    """Each protocol yields the handle, observed through stream_to_arg (handles > 2 come
    back as themselves)."""

    def handle(self, obj):
        return dlsync.stream_to_arg((2, 0), obj)

    def test_each_protocol(self):
        self.assertEqual(self.handle(HANDLE), HANDLE)
        self.assertEqual(self.handle(CudaStreamV0(HANDLE)), HANDLE)
        self.assertEqual(self.handle(TorchLikeStream(HANDLE)), HANDLE)
        self.assertEqual(self.handle(CuPyLikeStream(HANDLE)), HANDLE)
        self.assertEqual(self.handle(None), 1)  # the default stream: legacy on CUDA

    def test_on_the_type_or_on_the_instance(self):
        self.assertEqual(self.handle(SlotsStream(HANDLE)), HANDLE)
        self.assertEqual(self.handle(PropertyStream(HANDLE)), HANDLE)
        self.assertEqual(self.handle(DynamicStream(HANDLE)), HANDLE)
        self.assertEqual(self.handle(RedirectedSlots(HANDLE)), HANDLE)
        only_the_instance = types.SimpleNamespace(__cuda_stream__=lambda: (0, HANDLE))
        self.assertEqual(self.handle(only_the_instance), HANDLE)
        with self.assertRaisesRegex(RuntimeError, "no stream yet"):
            self.handle(FailingProperty())

    def test_cuda_stream_protocol_comes_first(self):
        self.assertEqual(self.handle(EveryProtocol(HANDLE)), HANDLE)

    def test_cuda_stream_attribute_comes_before_ptr(self):
        self.assertEqual(self.handle(TorchAndCuPy(HANDLE)), HANDLE)

    def test_stream_objects_everywhere(self):
        dlsync.export((2, 0), CudaStreamV0(HANDLE), -1)
        dlsync.export((2, 0), TorchLikeStream(HANDLE), HANDLE)
        dlsync.push_dep((2, 0), CuPyLikeStream(HANDLE), CudaStreamV0(HANDLE))

    def test_unknown_protocol_version(self):
        with self.assertRaises(ValueError) as raised:
            dlsync.export((2, 0), CudaStreamV1(HANDLE), -1)
        message = str(raised.exception)
        self.assertIn("CudaStreamV1.__cuda_stream__() speaks protocol version 1", message)
        self.assertIn("understands version 0", message)

    def test_malformed_protocol_results(self):
        class NotATuple:
            def __cuda_stream__(self):
                return HANDLE

        class Raises:
            def __cuda_stream__(self):
                raise KeyError("from the stream")

        class ThreeItems:
            def __cuda_stream__(self):
                return (0, HANDLE, 7)

        with self.assertRaisesRegex(TypeError, r"expected a \(version, address\) tuple"):
            self.handle(NotATuple())
        with self.assertRaisesRegex(TypeError, r"returned \(0, \d+, 7\): expected a \(version"):
            self.handle(ThreeItems())
        with self.assertRaisesRegex(KeyError, "from the stream"):
            self.handle(Raises())
        with self.assertRaisesRegex(TypeError, "expected an int stream handle"):
            self.handle(CudaStreamV0("0x1000"))
        with self.assertRaisesRegex(TypeError, "expected an int stream handle"):
            self.handle(TorchLikeStream(None))

    def test_bad_handles(self):
        with self.assertRaisesRegex(ValueError, "expected an int >= 0"):
            dlsync.export((2, 0), -5, -1)
        with self.assertRaisesRegex(ValueError, "expected an int >= 0"):
            dlsync.export((2, 0), CuPyLikeStream(-5), -1)
        with self.assertRaisesRegex(ValueError, "too large for an address"):
            dlsync.export((2, 0), 2**64, -1)
        with self.assertRaisesRegex(TypeError, "a bool is not a stream"):
            dlsync.export((2, 0), True, -1)
        # A bool behind a protocol is no handle either (True would be the legacy stream).
        with self.assertRaisesRegex(TypeError, "its .ptr is True: expected an int stream handle"):
            dlsync.export((2, 0), CuPyLikeStream(True), -1)
        with self.assertRaisesRegex(TypeError, "expected an int stream handle"):
            dlsync.export((2, 0), CudaStreamV0(False), -1)

    def test_a_cuda_stream_attribute_that_is_not_a_method(self):
        class NotCallable:
            __cuda_stream__ = 5

        with self.assertRaisesRegex(TypeError, r"NotCallable.__cuda_stream__ is 5, not a method"):
            dlsync.export((2, 0), NotCallable(), -1)

    def test_not_a_stream(self):
        with self.assertRaises(TypeError) as raised:
            dlsync.push_dep((2, 0), HANDLE, object())
        message = str(raised.exception)
        self.assertIn("dlsync.push_dep: dst=", message)
        for protocol in ("__cuda_stream__()", ".cuda_stream", ".ptr"):
            self.assertIn(protocol, message)


class ExceptionKinds(unittest.TestCase):
    def test_every_status_has_its_exception(self):
        """The status table of dlsync/status.h: each status, the exception it becomes."""
        expected = {
            -1: ValueError,  # DL_SYNC_EINVAL
            -2: BufferError,  # DL_SYNC_ENOTSUP
            -3: BufferError,  # DL_SYNC_ENODEV
            -4: BufferError,  # DL_SYNC_ECAPTURE
            -5: MemoryError,  # DL_SYNC_ENOMEM
            -6: RuntimeError,  # DL_SYNC_EBACKEND
            -99: RuntimeError,  # a status this build does not know
        }
        self.assertIsNone(_raise_status(0))
        for status, kind in expected.items():
            with self.subTest(status=status):
                with self.assertRaises(Exception) as raised:
                    _raise_status(status)
                self.assertIs(type(raised.exception), kind)
        with self.assertRaises(TypeError):
            _raise_status("ENOMEM")

    def test_push_dep_on_a_streamless_device_has_nothing_to_order(self):
        dlsync.push_dep((1, 0), None, None)

    def test_no_runtime_is_a_buffer_error(self):
        """Without a device the runtime backends answer ENODEV or ENOTSUP: BufferError,
        naming the device. (Where a device answers, the call succeeds.)"""
        for device, consumer in (((2, 0), 2), ((10, 0), 0)):
            with self.subTest(device=device):
                try:
                    # between the two default streams: real streams wherever a device is
                    dlsync.export(device, dlsync.STREAM_LEGACY if device[0] == 2 else None, consumer)
                except BufferError as error:
                    self.assertRegex(str(error), r"^dl_sync_\w+: ")


class CapturePolicy(unittest.TestCase):
    def tearDown(self):
        dlsync.set_capture_policy(dlsync.CAPTURE_STRICT)

    def test_round_trip(self):
        self.assertEqual(dlsync.get_capture_policy(), dlsync.CAPTURE_STRICT)
        dlsync.set_capture_policy(dlsync.CAPTURE_NONE_IS_NO_SYNC)
        self.assertEqual(dlsync.get_capture_policy(), dlsync.CAPTURE_NONE_IS_NO_SYNC)

    def test_bad_policies(self):
        for bad in (2, -1, 2**40):
            with self.subTest(policy=bad):
                with self.assertRaisesRegex(ValueError, "policy"):
                    dlsync.set_capture_policy(bad)
        for bad in (True, None, "strict", 0.0):
            with self.subTest(policy=bad):
                with self.assertRaises(TypeError):
                    dlsync.set_capture_policy(bad)
        self.assertEqual(dlsync.get_capture_policy(), dlsync.CAPTURE_STRICT)


class Package(unittest.TestCase):
    def test_device_types(self):
        self.assertEqual(dlsync.DeviceType.CUDA, 2)
        self.assertEqual(dlsync.DeviceType.ROCM_HOST, 11)
        self.assertEqual(dlsync.DeviceType.CUDA_MANAGED, 13)
        self.assertEqual(dlsync.DeviceType.TRN, 18)

    def test_version(self):
        self.assertRegex(dlsync.__version__, r"^\d+\.\d+\.\d+$")


# What the extension exports (dlsync/exports.map): its init function, and the two deleters by
# whose names other copies of dlsync recognise the tensors the module records.
DELETERS = ("dl_sync_legacy_tensor_event_deleter_v1", "dl_sync_tensor_event_deleter_v1")
EXPORTED = ("PyInit__dlsync",) + DELETERS


@unittest.skipUnless(sys.platform.startswith("linux"), "an ELF dynamic symbol table: Linux only")
class Exports(unittest.TestCase):
    """The extension's dynamic symbol table lists exactly EXPORTED: its copy of dlsync stays
    private, but another copy can name the deleter of a tensor the module records."""

    def test_the_dynamic_symbol_table(self):
        nm = shutil.which("nm")
        if nm is None:
            self.skipTest("nm is not installed (Debian: binutils)")
        table = subprocess.run([nm, "-D", "--defined-only", _dlsync.__file__], check=True,
                               capture_output=True, text=True).stdout
        self.assertEqual(sorted(line.split()[-1] for line in table.splitlines()), sorted(EXPORTED))

    def test_a_recorded_tensor_carries_the_exported_deleter(self):
        """The deleter of a tensor the module records (a pool's export with its reuse
        stream) is the function the module exports under the versioned name."""
        module = ctypes.CDLL(_dlsync.__file__)  # the loaded module: dlsym sees its exports only
        exported = ctypes.cast(module.dl_sync_tensor_event_deleter_v1, ctypes.c_void_p).value
        pointer = ctypes.pythonapi.PyCapsule_GetPointer
        pointer.restype, pointer.argtypes = ctypes.c_void_p, (ctypes.py_object, ctypes.c_char_p)
        with dlsync.testing.SimulatedDevice() as sim:
            stream = sim.stream(non_blocking=True)
            pool = dlsync.testing.StreamOrderedPool(8)
            capsule = pool.export(pool.alloc(stream), stream, reuse=True)
            tensor = pointer(capsule, b"dltensor_versioned")
            # DLManagedTensorVersioned: version (8 bytes), manager_ctx, then the deleter.
            deleter = ctypes.c_void_p.from_address(tensor + 8 + ctypes.sizeof(ctypes.c_void_p))
            self.assertEqual(deleter.value, exported)
            del capsule


if __name__ == "__main__":
    unittest.main()
