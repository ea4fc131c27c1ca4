# SPDX-License-Identifier: Apache-2.0
"""A producer written in Python that exposes a DLPack exchange table (DLPack 1.3), as a
framework does on its tensor type: the table's five functions are Python functions made
callable from C with ctypes, the table a capsule "dlpack_exchange_api" on the type
attribute __dlpack_c_exchange_api__. Its arrays are contiguous NumPy arrays (the memory the
tensors point to) written on the framework's current stream, which is per thread, as
PyTorch's current stream is; its __dlpack__ orders with dlsync.export.

Switches on the class make it misbehave, to see what a consumer gets: a failing
current_work_stream, a stream answered that is not the current one, a failing or empty
conversion, tensors of DLPack 2.
"""
import ctypes
import threading

import numpy as np

import dlsync

c_int, c_int32, c_int64, c_uint8, c_uint16, c_uint32, c_uint64, c_void_p = (
    ctypes.c_int, ctypes.c_int32, ctypes.c_int64, ctypes.c_uint8, ctypes.c_uint16,
    ctypes.c_uint32, ctypes.c_uint64, ctypes.c_void_p)


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", c_void_p), ("device", DLDevice), ("ndim", c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(c_int64)), ("strides", ctypes.POINTER(c_int64)),
                ("byte_offset", c_uint64)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


TensorPointer = ctypes.POINTER(DLManagedTensorVersioned)
Deleter = ctypes.CFUNCTYPE(None, TensorPointer)
DLManagedTensorVersioned._fields_ = [("version", DLPackVersion), ("manager_ctx", c_void_p),
                                     ("deleter", Deleter), ("flags", c_uint64),
                                     ("dl_tensor", DLTensor)]

SetError = ctypes.CFUNCTYPE(None, c_void_p, ctypes.c_char_p, ctypes.c_char_p)
Allocator = ctypes.CFUNCTYPE(c_int, ctypes.POINTER(DLTensor), ctypes.POINTER(TensorPointer), c_void_p,
                             SetError)
FromPyObject = ctypes.CFUNCTYPE(c_int, c_void_p, ctypes.POINTER(TensorPointer))
ToPyObject = ctypes.CFUNCTYPE(c_int, TensorPointer, ctypes.POINTER(c_void_p))
DLTensorFromPyObject = ctypes.CFUNCTYPE(c_int, c_void_p, ctypes.POINTER(DLTensor))
CurrentWorkStream = ctypes.CFUNCTYPE(c_int, c_int32, c_int32, ctypes.POINTER(c_void_p))


class DLPackExchangeAPIHeader(ctypes.Structure):
    pass


DLPackExchangeAPIHeader._fields_ = [("version", DLPackVersion),
                                    ("prev_api", ctypes.POINTER(DLPackExchangeAPIHeader))]


class DLPackExchangeAPI(ctypes.Structure):
    _fields_ = [("header", DLPackExchangeAPIHeader), ("managed_tensor_allocator", Allocator),
                ("managed_tensor_from_py_object_no_sync", FromPyObject),
                ("managed_tensor_to_py_object_no_sync", ToPyObject),
                ("dltensor_from_py_object_no_sync", DLTensorFromPyObject),
                ("current_work_stream", CurrentWorkStream)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [c_void_p, ctypes.c_char_p, c_void_p]
_incref = ctypes.pythonapi.Py_IncRef
_incref.argtypes = [ctypes.py_object]

_DTYPES = {np.dtype(np.uint8): (1, 8), np.dtype(np.int32): (0, 32), np.dtype(np.float32): (2, 32)}
_KINDS = {code_bits: dtype for dtype, code_bits in _DTYPES.items()}  # (code, bits): dtype


class _Framework:
    """The framework's state: its current stream per thread, the tensors it handed out
    (kept alive until their deleter runs) and what its table was asked."""

    def __init__(self):
        self.local = threading.local()
        self.lock = threading.Lock()
        self.live = {}  # tensor address -> (tensor struct, shape array, owner)
        self.deleted = 0
        self.asked = 0
        self.fault = None  # "stream fails", "stream answers", "conversion fails", "no tensor", "major 2"
        self.answer = None  # the stream "stream answers" answers

    def current_stream(self):
        return getattr(self.local, "stream", None)

    def tensor(self, data, device, owner, version=(1, 3)):
        """A managed tensor of data (kept alive with owner until its deleter runs)."""
        shape = (c_int64 * data.ndim)(*data.shape)
        code, bits = _DTYPES[data.dtype]
        t = DLManagedTensorVersioned()
        t.version = DLPackVersion(*version)
        t.deleter = _deleter
        t.dl_tensor = DLTensor(data.ctypes.data, DLDevice(*device), data.ndim, DLDataType(code, bits, 1),
                               shape, None, 0)
        address = ctypes.addressof(t)
        with self.lock:
            self.live[address] = (t, shape, owner)
        return address


FRAMEWORK = _Framework()


@Deleter
def _deleter(tensor):
    with FRAMEWORK.lock:
        FRAMEWORK.live.pop(ctypes.addressof(tensor.contents), None)
        FRAMEWORK.deleted += 1


def _object(pointer):
    return ctypes.cast(pointer, ctypes.py_object).value


@FromPyObject
def _from_py_object(pointer, out):
    fault = FRAMEWORK.fault
    if fault == "conversion fails":
        return -1
    if fault == "no tensor":
        return 0
    array = _object(pointer)
    out[0] = ctypes.cast(FRAMEWORK.tensor(array.data, array.device, array, (2, 0) if fault == "major 2" else (1, 3)),
                         TensorPointer)
    return 0


@ToPyObject
def _to_py_object(tensor, out):
    """A new TableArray over the tensor's memory, which gives the tensor back when it dies."""
    t = tensor.contents.dl_tensor
    count = 1
    for i in range(t.ndim):
        count *= t.shape[i]
    kind = _KINDS[(t.dtype.code, t.dtype.bits)]
    memory = (ctypes.c_char * (count * t.dtype.bits // 8)).from_address(t.data + t.byte_offset)
    array = TableArray(np.frombuffer(memory, kind), (t.device.device_type, t.device.device_id))
    array._owned = _Owned(ctypes.cast(tensor, c_void_p).value)
    _incref(array)  # the reference the caller takes
    out[0] = id(array)
    return 0


class _Owned:
    """Gives an adopted tensor back when the array that adopted it goes away."""

    def __init__(self, address):
        self.address = address

    def __del__(self):
        tensor = ctypes.cast(self.address, TensorPointer)
        tensor.contents.deleter(tensor)


@DLTensorFromPyObject
def _dltensor_from_py_object(pointer, out):
    array = _object(pointer)
    code, bits = _DTYPES[array.data.dtype]
    out[0] = DLTensor(array.data.ctypes.data, DLDevice(*array.device), array.data.ndim, DLDataType(code, bits, 1),
                      array._shape, None, 0)
    return 0


@Allocator
def _allocator(prototype, out, error_context, set_error):
    p = prototype.contents
    kind = _KINDS.get((p.dtype.code, p.dtype.bits))
    if kind is None or p.dtype.lanes != 1:
        set_error(error_context, b"TypeError", b"the table producer allocates uint8, int32 and float32")
        return -1
    array = TableArray(np.zeros([p.shape[i] for i in range(p.ndim)], kind), (p.device.device_type, p.device.device_id))
    out[0] = ctypes.cast(FRAMEWORK.tensor(array.data, array.device, array), TensorPointer)
    return 0


@CurrentWorkStream
def _current_work_stream(device_type, device_id, out):
    FRAMEWORK.asked += 1
    if FRAMEWORK.fault == "stream fails":
        return -1
    stream = FRAMEWORK.answer if FRAMEWORK.fault == "stream answers" else FRAMEWORK.current_stream()
    out[0] = int(stream) if stream is not None else None
    return 0


TABLE = DLPackExchangeAPI()
TABLE.header.version = DLPackVersion(1, 3)
TABLE.managed_tensor_allocator = _allocator
TABLE.managed_tensor_from_py_object_no_sync = _from_py_object
TABLE.managed_tensor_to_py_object_no_sync = _to_py_object
TABLE.dltensor_from_py_object_no_sync = _dltensor_from_py_object
TABLE.current_work_stream = _current_work_stream


class TableArray:
    """An array of the framework: data (a contiguous NumPy array) on device, written on the
    framework's current stream."""

    __dlpack_c_exchange_api__ = _capsule_new(ctypes.addressof(TABLE), b"dlpack_exchange_api", None)

    def __init__(self, data, device=(2, 0)):
        self.data = data
        self.device = tuple(device)
        self._shape = (c_int64 * data.ndim)(*data.shape)

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        dlsync.export(self.device, FRAMEWORK.current_stream(), stream)
        return self.data.__dlpack__()


class use_stream:
    """with use_stream(s): the framework's current stream on this thread is s."""

    def __init__(self, stream):
        self.stream = stream

    def __enter__(self):
        self.previous = FRAMEWORK.current_stream()
        FRAMEWORK.local.stream = self.stream

    def __exit__(self, *exc):
        FRAMEWORK.local.stream = self.previous


def reset():
    """No fault, no stream current on this thread, the counts zero (tensors still handed out
    stay alive until their deleter runs)."""
    FRAMEWORK.fault = FRAMEWORK.answer = None
    FRAMEWORK.local.stream = None
    FRAMEWORK.asked = 0
    with FRAMEWORK.lock:
        FRAMEWORK.deleted = 0


def variant(name, version=(1, 3), cyclic=False, **entries):
    """A TableArray class whose type carries a copy of the table with version, a prev_api
    cycle, or entry points replaced (None: NULL), under its own name."""
    table = DLPackExchangeAPI.from_buffer_copy(TABLE)
    table.header.version = DLPackVersion(*version)
    if cyclic:
        table.header.prev_api = ctypes.pointer(table.header)
    for entry, value in entries.items():
        setattr(table, entry, value if value is not None else type(getattr(TABLE, entry))())
    capsule = _capsule_new(ctypes.addressof(table), b"dlpack_exchange_api", None)
    return type(name, (TableArray,), {"__dlpack_c_exchange_api__": capsule, "_table": table})
