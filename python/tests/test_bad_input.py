# SPDX-License-Identifier: Apache-2.0
"""The Python API's bad-input matrix: every row is called and must raise its exception
with a message that contains its text. `python3 test_bad_input.py --markdown` writes
docs/errors-python.md, and the test python_errors_doc_is_current fails when that page is
stale."""
import ctypes
import sys
import unittest

import dlsync
import dlsync.testing
from arrays import Array

try:
    import numpy
    import table_producer as tp
except ImportError:  # the numpy rows are checked where numpy is installed
    numpy = tp = None

CUDA, ROCM, CPU = (2, 0), (10, 0), (1, 0)
HANDLE = 0x5000


class NotCallable:
    __cuda_stream__ = 5


class Version1:
    def __cuda_stream__(self):
        return (1, HANDLE)


class Pair:
    def __cuda_stream__(self):
        return (0, HANDLE, 7)


class PtrMinusOne:  # CuPy's convention, the member on the instance
    def __init__(self):
        self.ptr = -1


class CudaStreamMinusOne:  # PyTorch's convention, a property of the class
    @property
    def cuda_stream(self):
        return -1


class ProtocolMinusOne:
    def __cuda_stream__(self):
        return (0, -1)


class MinusOne:  # an integer through __index__ only, as numpy's are
    def __index__(self):
        return -1


class IndexPtrMinusOne:
    ptr = MinusOne()


class NumpyPtrMinusOne:
    def __init__(self):
        self.ptr = numpy.int64(-1)


SIM = None  # the open simulated device, while the rows run


def fresh_capsule():
    pool = dlsync.testing.StreamOrderedPool(16)
    stream = SIM.stream()
    return pool.export(pool.alloc(stream), stream)


def used_capsule():
    pool = dlsync.testing.StreamOrderedPool(16)
    stream = SIM.stream()
    capsule = pool.export(pool.alloc(stream), stream)
    dlsync.tensor_release(capsule, -1)
    return capsule


def import_from(cls=None, fault=None, device=CUDA, consumer_device=CUDA, answer_device=None):
    """dlsync.import_tensor of an array of the Python table producer (table_producer.py)
    made to misbehave; then checks what a failure promises: every tensor the producer made
    was given back, and the array is as it was."""
    tp.reset()
    array = (cls or tp.TableArray)(numpy.arange(16, dtype=numpy.uint8), device)
    before = (dict(tp.FRAMEWORK.live), array.data.copy(), sys.getrefcount(array))
    tp.FRAMEWORK.local.stream = SIM.stream()
    tp.FRAMEWORK.fault = fault
    if answer_device is not None:
        tp.FRAMEWORK.answer = SIM.stream(device=answer_device)
    try:
        dlsync.tensor_release(dlsync.import_tensor(array, consumer_device, SIM.stream()), -1)
    finally:
        after = (dict(tp.FRAMEWORK.live), array.data, sys.getrefcount(array))
        tp.reset()
        if after[0] != before[0] or (after[1] != before[1]).any() or after[2] != before[2]:
            raise AssertionError("the failed import kept a tensor or touched the object")


class NoTable:
    """Neither a table nor __dlpack__."""


class BadAttribute:
    __dlpack_c_exchange_api__ = "a table"


_OTHER_NAME = b"other_api"  # outlives the capsule that points to it
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class OtherCapsule:
    __dlpack_c_exchange_api__ = _capsule_new(8, _OTHER_NAME, None)


class ZeroAddress:
    __c_dlpack_exchange_api__ = 0


class DlpackReturnsStr:
    def __dlpack_device__(self):
        return CPU

    def __dlpack__(self, **kwargs):
        return "no capsule"


# (function, bad input, call, exception, message contains)
ROWS = [
    ("dlsync.export", "device not a tuple: `[2, 0]`", lambda: dlsync.export([2, 0], None, None),
     TypeError, "expected a (device_type, device_id) tuple"),
    ("dlsync.export", "device_type a float", lambda: dlsync.export((2.0, 0), None, None),
     TypeError, "device_type must be an int"),
    ("dlsync.export", "device_id 2**31", lambda: dlsync.export((2, 2**31), None, None),
     ValueError, "does not fit a 32-bit int"),
    ("dlsync.export", "unknown device type 99", lambda: dlsync.export((99, 0), None, None),
     ValueError, "unknown device type 99"),
    ("dlsync.export", "stream=True", lambda: dlsync.export(CUDA, None, True),
     TypeError, "expected None or an int, not bool"),
    ("dlsync.export", "stream='1'", lambda: dlsync.export(CUDA, None, "1"),
     TypeError, "expected None or an int, not str"),
    ("dlsync.export", "stream=2**63", lambda: dlsync.export(CUDA, None, 2**63),
     ValueError, "does not fit a 64-bit int"),
    ("dlsync.export", "stream=0 on CUDA", lambda: dlsync.export(CUDA, None, 0),
     ValueError, "stream=0 is ambiguous"),
    ("dlsync.export", "stream=1 on ROCm", lambda: dlsync.export(ROCM, None, 1),
     ValueError, "stream=1"),
    ("dlsync.export", "stream=-2", lambda: dlsync.export(CUDA, None, -2),
     ValueError, "stream=-2"),
    ("dlsync.export", "stream=1 on the CPU", lambda: dlsync.export(CPU, None, 1),
     ValueError, "has no streams: expected None"),
    ("dlsync.export", "producer_stream=-5", lambda: dlsync.export(CUDA, -5, -1),
     ValueError, "a stream handle is an address, expected an int >= 0"),
    ("dlsync.export", "producer_stream=-1", lambda: dlsync.export(CUDA, -1, -1),
     ValueError, "is -1: a stream handle is an address, expected an int >= 0"),
    ("dlsync.export", "producer_stream whose `.ptr` is -1", lambda: dlsync.export(CUDA, PtrMinusOne(), -1),
     ValueError, "its .ptr is -1: a stream handle is an address, expected an int >= 0"),
    ("dlsync.export", "producer_stream whose `.ptr` is an `__index__` integer -1",
     lambda: dlsync.export(CUDA, IndexPtrMinusOne(), -1),
     ValueError, "its .ptr is -1: a stream handle is an address, expected an int >= 0"),
    ("dlsync.export", "producer_stream whose `.cuda_stream` is -1",
     lambda: dlsync.export(CUDA, CudaStreamMinusOne(), -1),
     ValueError, "its .cuda_stream is -1: a stream handle is an address, expected an int >= 0"),
    ("dlsync.export", "producer_stream whose `__cuda_stream__()` is (0, -1)",
     lambda: dlsync.export(CUDA, ProtocolMinusOne(), -1), ValueError,
     "the address from __cuda_stream__() is -1: a stream handle is an address, expected an int >= 0"),
    ("dlsync.export", "producer_stream=2**64", lambda: dlsync.export(CUDA, 2**64, -1),
     ValueError, "too large for an address"),
    ("dlsync.export", "producer_stream=False", lambda: dlsync.export(CUDA, False, -1),
     TypeError, "a bool is not a stream"),
    ("dlsync.export", "producer_stream an object with no stream protocol",
     lambda: dlsync.export(CUDA, object(), -1), TypeError, "object has none of them"),
    ("dlsync.export", "`__cuda_stream__` not callable", lambda: dlsync.export(CUDA, NotCallable(), -1),
     TypeError, "NotCallable.__cuda_stream__ is 5, not a method"),
    ("dlsync.export", "`__cuda_stream__()` of protocol version 1", lambda: dlsync.export(CUDA, Version1(), -1),
     ValueError, "speaks protocol version 1: dlsync understands version 0"),
    ("dlsync.export", "`__cuda_stream__()` returns three items", lambda: dlsync.export(CUDA, Pair(), -1),
     TypeError, "expected a (version, address) tuple"),
    ("dlsync.export", "a missing argument", lambda: dlsync.export(CUDA, None),
     TypeError, "export() missing required argument 'stream' (pos 3)"),
    ("dlsync.export", "four positional arguments", lambda: dlsync.export(CUDA, None, None, None),
     TypeError, "export() takes 3 positional arguments but 4 were given"),
    ("dlsync.export", "an unknown keyword", lambda: dlsync.export(CUDA, None, steam=None),
     TypeError, "export() got an unexpected keyword argument 'steam'"),
    ("dlsync.export", "a keyword given twice", lambda: dlsync.export(CUDA, None, None, device=CUDA),
     TypeError, "export() got multiple values for argument 'device'"),
    ("dlsync.push_dep", "dst an object with no stream protocol",
     lambda: dlsync.push_dep(CUDA, HANDLE, object()), TypeError, "dlsync.push_dep: dst="),
    ("dlsync.stream_from_arg", "stream=2 on ROCm", lambda: dlsync.stream_from_arg(ROCM, 2),
     ValueError, "stream=2"),
    ("dlsync.stream_to_arg", "the per-thread stream on ROCm", lambda: dlsync.stream_to_arg(ROCM, 2),
     ValueError, "has no stream argument"),
    ("dlsync.set_capture_policy", "policy 5", lambda: dlsync.set_capture_policy(5),
     ValueError, "policy 5: expected DL_SYNC_CAPTURE_STRICT (0)"),
    ("dlsync.group_wait", "producers not iterable", lambda: dlsync.group_wait(CUDA, None, 5),
     TypeError, "not iterable"),
    ("dlsync.group_wait", "a producer that is no stream", lambda: dlsync.group_wait(CUDA, None, ["s"]),
     TypeError, "dlsync.group_wait: producer='s'"),
    ("dlsync.Group.add", "True", lambda: dlsync.Group(CUDA, None).add(True),
     TypeError, "dlsync.Group.add: producer=True: a bool is not a stream"),
    ("dlsync.tensor_release", "not a capsule", lambda: dlsync.tensor_release(b"x", -1),
     TypeError, "tensor must be a DLPack capsule not yet consumed"),
    ("dlsync.tensor_release", "a capsule already consumed", lambda: dlsync.tensor_release(used_capsule(), -1),
     TypeError, "tensor must be a DLPack capsule not yet consumed"),
    ("dlsync.tensor_release", "stream=2**70", lambda: dlsync.tensor_release(fresh_capsule(), 2**70),
     ValueError, "too large for an address"),
    ("dlsync.tensor_release", "stream=-2", lambda: dlsync.tensor_release(fresh_capsule(), -2),
     ValueError, "a stream handle is an address, expected an int >= 0"),
    ("dlsync.tensor_release", "stream whose `.ptr` is -1 (not the int -1, nothing pending)",
     lambda: dlsync.tensor_release(fresh_capsule(), PtrMinusOne()),
     ValueError, "its .ptr is -1: a stream handle is an address, expected an int >= 0"),
    ("dlsync.runtime", "an unknown backend", lambda: dlsync.runtime("opencl"),
     ValueError, "opencl"),
    ("dlsync.testing.NullBackend.time_export", "n=0",
     lambda: dlsync.testing.NullBackend().time_export(CUDA, HANDLE, -1, 0),
     ValueError, "n=0: expected a count > 0"),
]
# Rows checked where numpy is installed (and listed on the page everywhere).
NUMPY_ROWS = [
    ("dlsync.import_tensor", "device not a tuple", lambda: dlsync.import_tensor(numpy.zeros(1), [1, 0], None),
     TypeError, "expected a (device_type, device_id) tuple"),
    ("dlsync.import_tensor", "stream an object with no stream protocol",
     lambda: dlsync.import_tensor(numpy.zeros(1), CUDA, object()), TypeError, "dlsync.import_tensor: stream="),
    ("dlsync.import_tensor", "neither a table nor `__dlpack__`", lambda: dlsync.import_tensor(NoTable(), CUDA, None),
     TypeError, "NoTable has neither a DLPack exchange table (__dlpack_c_exchange_api__) nor __dlpack__"),
    ("dlsync.import_tensor", "`__dlpack_c_exchange_api__` a str", lambda: dlsync.import_tensor(BadAttribute(), CUDA, None),
     TypeError, "BadAttribute.__dlpack_c_exchange_api__ is a str: expected a PyCapsule named \"dlpack_exchange_api\""),
    ("dlsync.import_tensor", "a capsule of another name", lambda: dlsync.import_tensor(OtherCapsule(), CUDA, None),
     TypeError, "OtherCapsule.__dlpack_c_exchange_api__ is a capsule named \"other_api\": expected a PyCapsule "
     "named \"dlpack_exchange_api\""),
    ("dlsync.import_tensor", "`__c_dlpack_exchange_api__` 0 (DLPack 1.2's int)",
     lambda: dlsync.import_tensor(ZeroAddress(), CUDA, None), ValueError, "ZeroAddress.__c_dlpack_exchange_api__ is 0"),
    ("dlsync.import_tensor", "a table of major version 2 only",
     lambda: import_from(tp.variant("Major2", version=(2, 0))), BufferError,
     "no exchange table of major version 1 in the chain (newest is 2.0)"),
    ("dlsync.import_tensor", "a table of version 0.9 only",
     lambda: import_from(tp.variant("Old09", version=(0, 9))), BufferError,
     "no exchange table of major version 1 in the chain (newest is 0.9): expected a table of DLPack 1.2 or later"),
    ("dlsync.import_tensor", "prev_api cycle", lambda: import_from(tp.variant("Cyclic", version=(2, 0), cyclic=True)),
     ValueError, "cyclic or corrupt"),
    ("dlsync.import_tensor", "no managed_tensor_from_py_object_no_sync",
     lambda: import_from(tp.variant("NoConversion", managed_tensor_from_py_object_no_sync=None)),
     BufferError, "has no managed_tensor_from_py_object_no_sync: import through __dlpack__"),
    ("dlsync.import_tensor", "no current_work_stream, a CUDA tensor",
     lambda: import_from(tp.variant("NoStream", current_work_stream=None)), BufferError, "has no current_work_stream"),
    ("dlsync.import_tensor", "current_work_stream returns -1", lambda: import_from(fault="stream fails"),
     RuntimeError, "current_work_stream(cuda, 0) failed with -1"),
    ("dlsync.import_tensor", "current_work_stream answers a stream of device 1",
     lambda: import_from(fault="stream answers", answer_device=1), RuntimeError,
     "dlsync.import_tensor: producer stream 1 of 1"),
    ("dlsync.import_tensor", "the conversion returns -1", lambda: import_from(fault="conversion fails"),
     RuntimeError, "managed_tensor_from_py_object_no_sync failed with -1 (the producer set no Python exception)"),
    ("dlsync.import_tensor", "device (99, 0), `__dlpack__` on the CPU",
     lambda: dlsync.import_tensor(numpy.zeros(1), (99, 0), None), ValueError,
     "dlsync.import_tensor: consumer stream has unknown device type 99"),
    ("dlsync.import_tensor", "device (1, -1), `__dlpack__` on the CPU",
     lambda: dlsync.import_tensor(numpy.zeros(1), (1, -1), None), ValueError,
     "dlsync.import_tensor: consumer stream has device id -1 on cpu: expected 0 to"),
    ("dlsync.import_tensor", "device (99, 0), a table on the CPU",
     lambda: import_from(device=CPU, consumer_device=(99, 0)), ValueError,
     "dlsync.import_tensor: consumer stream has unknown device type 99"),
    ("dlsync.import_tensor", "the conversion returns no tensor", lambda: import_from(fault="no tensor"),
     RuntimeError, "returned 0 and no tensor"),
    ("dlsync.import_tensor", "a tensor of DLPack 2.0", lambda: import_from(fault="major 2"),
     ValueError, "is of DLPack version 2.0: expected major version 1"),
    ("dlsync.import_tensor", "CUDA tensor, ROCm consumer stream", lambda: import_from(consumer_device=ROCM),
     ValueError, "expected a device of the consumer's family"),
    ("dlsync.import_tensor", "CUDA `__dlpack__`, ROCm consumer stream",
     lambda: dlsync.import_tensor(Array(numpy.zeros(4), CUDA), ROCM, None), ValueError,
     "obj is on device (2, 0) and the consumer's stream on (10, 0): expected a consumer stream of obj's device family"),
    ("dlsync.import_tensor", "`__dlpack__` returns a str", lambda: dlsync.import_tensor(DlpackReturnsStr(), CPU, None),
     TypeError, "DlpackReturnsStr.__dlpack__ returned 'no capsule': expected a DLPack capsule not yet consumed"),
    ("dlsync.testing.check_exchange_api", "a table without managed_tensor_allocator",
     lambda: dlsync.testing.check_exchange_api(
         lambda sim: tp.variant("NoAllocator", managed_tensor_allocator=None)(numpy.zeros(4, numpy.uint8), CPU)),
     AssertionError, "the table (version 1.3) lacks managed_tensor_allocator"),
    ("dlsync.export", "stream=numpy.float64(1)", lambda: dlsync.export(CUDA, None, numpy.float64(1)),
     TypeError, "expected None or an int, not numpy.float64"),
    ("dlsync.export", "stream=numpy.bool_(True)", lambda: dlsync.export(CUDA, None, numpy.bool_(True)),
     TypeError, "expected None or an int, not numpy.bool"),  # numpy.bool_ before NumPy 2
    ("dlsync.export", "producer_stream whose `.ptr` is numpy.int64(-1)",
     lambda: dlsync.export(CUDA, NumpyPtrMinusOne(), -1),
     ValueError, "its .ptr is -1: a stream handle is an address, expected an int >= 0"),
]


class BadInput(unittest.TestCase):
    def test_every_row(self):
        global SIM
        with dlsync.testing.SimulatedDevice() as SIM:
            for function, bad, call, exception, message in ROWS + (NUMPY_ROWS if numpy else []):
                with self.subTest(function=function, bad_input=bad):
                    with self.assertRaises(exception) as raised:
                        call()
                    self.assertIn(message, str(raised.exception))
                    if function == "dlsync.import_tensor":  # the Python name, never the C one
                        self.assertTrue(str(raised.exception).startswith(function + ": "), str(raised.exception))

    def test_accepted_values_are_not_rows(self):
        # What the array API's callers pass: any __index__ integer, numpy's included.
        dlsync.export(CUDA, None, -1)
        if numpy is not None:
            dlsync.export(CUDA, numpy.int64(HANDLE), numpy.int64(-1))
            dlsync.export(CUDA, None, numpy.int32(-1))


def markdown():
    lines = [
        "# Bad input: what the Python API answers",
        "",
        "Generated by `python/tests/test_bad_input.py --markdown`; every row is checked by the",
        "test `python_bad_input`, and `python_errors_doc_is_current` fails when this page is",
        "stale. The C API's rows, with the exception each status becomes, are in",
        "[errors.md](errors.md).",
        "",
        "| function | bad input | exception | message contains |",
        "|---|---|---|---|",
    ]
    for function, bad, _, exception, message in ROWS + NUMPY_ROWS:
        cell = message.replace("|", "\\|")
        lines.append(f"| `{function}` | {bad} | {exception.__name__} | {cell} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if sys.argv[1:] == ["--markdown"]:
        sys.stdout.write(markdown())
    else:
        unittest.main()
