// SPDX-License-Identifier: Apache-2.0
//
// dlsync_pyext.hpp: the part of a C++ extension's DLPack exchange that no binding library
// does for you, written once over the CPython API so that a nanobind and a pybind11
// extension share it (samples/nanobind, samples/pybind11; docs/bindings.md). Copy it into
// your extension; it needs <Python.h>, dlsync's headers and dlsync_python.h.
//
// Producer side (your tensor type's __dlpack__):
//   stream_arg      stream= (None or an int) as dlsync's argument
//   export_to       the producer's stream ordered before the consumer's (dl_sync_export),
//                   the GIL released only around the runtime calls
//   record_event    for stream=-1, a per-tensor event the consumer can wait on later
//   capsule_of      an owned tensor as a DLPack capsule that deletes it if never consumed
// Consumer side (a function that takes arrays of any framework and runs on your stream):
//   Importer        each argument through its type's exchange table where it has one,
//                   __dlpack__(stream=yours) otherwise; one dl_sync_group_wait for all of
//                   them; after the kernel, each released with dl_sync_tensor_release.
//
// Every function returns 0, or -1 with a Python exception set (the binding turns that into
// its own error: nb::python_error, py::error_already_set). Call them with the GIL held.
#ifndef DLSYNC_PYEXT_HPP_
#define DLSYNC_PYEXT_HPP_

#include <Python.h>
#include <dlsync/dlsync.h>
#include <dlsync_python.h>

#include <cstddef>
#include <cstdint>

namespace dlsync_pyext {

// --- producer ------------------------------------------------------------------------------

inline int dl_sync_tensor_record_any(DLManagedTensorVersioned *t, dl_sync_stream producer) {
  return dl_sync_tensor_record(t, producer);
}
inline int dl_sync_tensor_record_any(DLManagedTensor *t, dl_sync_stream producer) {
  return dl_sync_legacy_tensor_record(t, producer);
}

// stream= of __dlpack__: None, or an int (a bool is no stream: TypeError).
inline int stream_arg(PyObject *stream, dl_sync_stream_arg *out) {
  if (stream == Py_None) {
    *out = dl_sync_stream_arg_none();
    return 0;
  }
  if (!PyLong_Check(stream) || PyBool_Check(stream)) {
    PyErr_Format(PyExc_TypeError, "__dlpack__: stream=%R: expected None or an int", stream);
    return -1;
  }
  long long value = PyLong_AsLongLong(stream);
  if (value == -1 && PyErr_Occurred()) return -1;
  *out = dl_sync_stream_arg_int(value);
  return 0;
}

// The synchronization step of __dlpack__(stream=...): the producer's work so far ordered
// before the consumer's stream. -1 needs nothing, None is the device's legacy default stream,
// a capturing stream follows the capture rules (dlsync/dep.h). The GIL is let go only where
// the runtime is called (dl_sync_export_calls_runtime), so a call with nothing to do costs
// no GIL round trip.
inline int export_to(dl_sync_stream producer, PyObject *stream) {
  dl_sync_stream_arg arg;
  if (stream_arg(stream, &arg) != 0) return -1;
  int status;
  if (dl_sync_export_calls_runtime(producer, arg)) {
    PyThreadState *thread = PyEval_SaveThread();
    status = dl_sync_export(producer, arg);
    PyEval_RestoreThread(thread);
  } else {
    status = dl_sync_export(producer, arg);
  }
  return dl_sync_python_check(status);
}

// A type that keeps per-tensor events: for stream=-1 (the consumer orders itself) the tensor
// carries an event recorded on the producer's stream, which any copy of dlsync waits on when
// the consumer uses the tensor (dl_sync_tensor_wait, a group's dl_sync_group_add_tensor), so
// that a consumer that keeps the tensor need not know our stream. Not while the producer
// captures (the event would belong to the capture): the tensor then carries none.
inline bool is_minus_one(PyObject *stream) {
  return PyLong_Check(stream) && !PyBool_Check(stream) && PyLong_AsLongLong(stream) == -1;
}

template <typename Tensor>
int record_event(Tensor *tensor, dl_sync_stream producer) {
  PyThreadState *thread = PyEval_SaveThread();
  int status = dl_sync_tensor_record_any(tensor, producer);
  PyEval_RestoreThread(thread);
  return status == DL_SYNC_ECAPTURE ? 0 : dl_sync_python_check(status);
}

// max_version=: versioned (DLPack 1) when the consumer names a major of 1 or more.
inline int wants_versioned(PyObject *max_version, bool *out) {
  *out = false;
  if (max_version == Py_None) return 0;
  long major = -1;
  if (PyTuple_Check(max_version) && PyTuple_GET_SIZE(max_version) == 2)
    major = PyLong_AsLong(PyTuple_GET_ITEM(max_version, 0));
  if (major < 0) {
    if (!PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_TypeError)) {
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError,
                   "__dlpack__: max_version=%R: expected a (major, minor) tuple of ints",
                   max_version);
    }
    return -1;
  }
  *out = major >= 1;
  return 0;
}

// A capsule that owns tensor: its destructor runs the deleter when no consumer took it
// (a consumer renames it "used_dltensor..."). On failure the deleter runs here.
inline void delete_unconsumed_versioned(PyObject *capsule) {
  if (!PyCapsule_IsValid(capsule, "dltensor_versioned")) return;  // consumed: not ours
  auto *t =
      static_cast<DLManagedTensorVersioned *>(PyCapsule_GetPointer(capsule, "dltensor_versioned"));
  if (t->deleter != nullptr) t->deleter(t);
}

inline void delete_unconsumed_legacy(PyObject *capsule) {
  if (!PyCapsule_IsValid(capsule, "dltensor")) return;
  auto *t = static_cast<DLManagedTensor *>(PyCapsule_GetPointer(capsule, "dltensor"));
  if (t->deleter != nullptr) t->deleter(t);
}

inline PyObject *capsule_of(DLManagedTensorVersioned *tensor) {
  PyObject *capsule = PyCapsule_New(tensor, "dltensor_versioned", delete_unconsumed_versioned);
  if (capsule == nullptr && tensor->deleter != nullptr) tensor->deleter(tensor);
  return capsule;
}

inline PyObject *capsule_of(DLManagedTensor *tensor) {
  PyObject *capsule = PyCapsule_New(tensor, "dltensor", delete_unconsumed_legacy);
  if (capsule == nullptr && tensor->deleter != nullptr) tensor->deleter(tensor);
  return capsule;
}

// --- consumer ------------------------------------------------------------------------------

// The DLPack C exchange table of obj's type (a capsule "dlpack_exchange_api" in the type
// attribute __dlpack_c_exchange_api__), or NULL without one (no exception). The table
// lives as long as the producer's module.
inline const DLPackExchangeAPI *exchange_table_of(PyObject *obj) {
  PyObject *capsule = PyObject_GetAttrString(reinterpret_cast<PyObject *>(Py_TYPE(obj)),
                                             "__dlpack_c_exchange_api__");
  if (capsule == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  void *api = PyCapsule_IsValid(capsule, "dlpack_exchange_api")
                  ? PyCapsule_GetPointer(capsule, "dlpack_exchange_api")
                  : nullptr;
  Py_DECREF(capsule);
  return static_cast<const DLPackExchangeAPI *>(api);
}

// One imported argument: the consumer owns it until release().
struct Imported {
  DLManagedTensorVersioned *versioned = nullptr;
  DLManagedTensor *legacy = nullptr;  // from a producer older than DLPack 1
  const DLTensor *tensor() const {
    return versioned != nullptr ? &versioned->dl_tensor
           : legacy != nullptr  ? &legacy->dl_tensor
                                : nullptr;
  }
};

// The arguments of one call, ordered onto the consumer's stream (device, stream) before
// its kernel, then released after it. Use: add() each argument, wait(), launch, release().
// At most DL_SYNC_GROUP_MAX arguments.
class Importer {
 public:
  Importer(DLDevice device, void *stream) : consumer_(dl_sync_stream_view(device, stream)) {}
  Importer(const Importer &) = delete;
  Importer &operator=(const Importer &) = delete;
  // Whatever happened, no argument stays taken: released on the consumer's stream.
  ~Importer() {
    release();
  }

  // Takes obj's tensor onto the consumer's stream: through its type's exchange table where
  // it has one (the producer's current work stream joins the group), else through
  // __dlpack_device__ and __dlpack__(stream=<the consumer's>, max_version=(1, 3)) (the
  // producer orders itself; a tensor with a per-tensor event joins the group).
  int add(PyObject *obj, Imported *out) {
    if (count_ == DL_SYNC_GROUP_MAX) {
      PyErr_Format(PyExc_ValueError, "at most %d arguments per call", DL_SYNC_GROUP_MAX);
      return -1;
    }
    if (init() != 0) return -1;
    Imported taken;
    if (const DLPackExchangeAPI *api = exchange_table_of(obj)) {
      int status = dl_sync_group_add_exchange_import(&group_, api, obj, &taken.versioned);
      if (status != DL_SYNC_OK) return raise_from(status);
    } else if (from_dlpack(obj, &taken) != 0) {
      return -1;
    }
    taken_[count_++] = taken;
    const DLDevice device = taken.tensor()->device;
    if (device.device_type != consumer_.device.device_type ||
        device.device_id != consumer_.device.device_id) {
      PyErr_Format(PyExc_ValueError, "%R is on device (%d, %d); this call runs on (%d, %d)", obj,
                   static_cast<int>(device.device_type), static_cast<int>(device.device_id),
                   static_cast<int>(consumer_.device.device_type),
                   static_cast<int>(consumer_.device.device_id));
      return -1;
    }
    *out = taken;
    return 0;
  }

  // Orders every producer of the arguments added before the consumer's stream: one record
  // and one wait per distinct producer stream, without the GIL (no Python runs there).
  int wait() {
    if (init() != 0) return -1;
    PyThreadState *thread = PyEval_SaveThread();
    int status = dl_sync_group_wait(&group_);
    PyEval_RestoreThread(thread);
    return status == DL_SYNC_OK ? 0 : raise_from(status);
  }

  // After the kernel was enqueued: each argument given back once the consumer's work so far
  // is done (ordered on the producer's reuse stream, or deferred: dl_sync_release_poll runs
  // those deleters later), without the GIL (a deleter run now takes it itself). A release
  // that fails leaves that tensor ours and undeleted (leaked, rather than freed under a
  // kernel that may still read it), and is reported.
  int release() {
    int failed = 0;
    for (std::size_t i = 0; i < count_; i++) {
      Imported &t = taken_[i];
      PyThreadState *thread = PyEval_SaveThread();
      int status = t.versioned != nullptr ? dl_sync_tensor_release(t.versioned, consumer_)
                                          : dl_sync_legacy_tensor_release(t.legacy, consumer_);
      PyEval_RestoreThread(thread);
      if (status < 0 && !failed) {
        failed = 1;
        if (!PyErr_Occurred()) dl_sync_python_raise(status);
      }
    }
    count_ = 0;
    return failed ? -1 : 0;
  }

 private:
  int init() {
    if (initialized_) return 0;
    int status = dl_sync_group_init(&group_, consumer_);
    if (status != DL_SYNC_OK) return raise_from(status);
    initialized_ = true;
    return 0;
  }

  // dlsync's error; a producer's exception (a table function that failed) stays its cause.
  static int raise_from(int status) {
    PyObject *type = nullptr, *cause = nullptr, *trace = nullptr;
    PyErr_Fetch(&type, &cause, &trace);
    if (type != nullptr) {
      PyErr_NormalizeException(&type, &cause, &trace);
      if (trace != nullptr) PyException_SetTraceback(cause, trace);
      Py_XDECREF(type);
      Py_XDECREF(trace);
    }
    dl_sync_python_raise(status);
    if (cause != nullptr) {
      PyObject *error_type, *error, *error_trace;
      PyErr_Fetch(&error_type, &error, &error_trace);
      PyErr_NormalizeException(&error_type, &error, &error_trace);
      PyException_SetCause(error, cause);  // steals cause
      PyErr_Restore(error_type, error, error_trace);
    }
    return -1;
  }

  static PyObject *call_dlpack(PyObject *obj, PyObject *stream, bool versioned) {
    PyObject *kwargs = versioned ? Py_BuildValue("{s:O,s:(ii)}", "stream", stream, "max_version",
                                                 DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION)
                                 : Py_BuildValue("{s:O}", "stream", stream);
    if (kwargs == nullptr) return nullptr;
    PyObject *method = PyObject_GetAttrString(obj, "__dlpack__");
    PyObject *empty = method != nullptr ? PyTuple_New(0) : nullptr;
    PyObject *capsule = empty != nullptr ? PyObject_Call(method, empty, kwargs) : nullptr;
    Py_XDECREF(empty);
    Py_XDECREF(method);
    Py_DECREF(kwargs);
    return capsule;
  }

  int from_dlpack(PyObject *obj, Imported *out) {
    if (!PyObject_HasAttrString(obj, "__dlpack__") ||
        !PyObject_HasAttrString(obj, "__dlpack_device__")) {
      PyErr_Format(PyExc_TypeError,
                   "%R: expected an array with a DLPack exchange table, or __dlpack__ and "
                   "__dlpack_device__",
                   obj);
      return -1;
    }
    // The consumer's stream as the producer's device reads stream= (None on the CPU).
    dl_sync_stream_arg arg;
    int status = dl_sync_stream_to_arg(consumer_, &arg);
    if (status != DL_SYNC_OK) return raise_from(status);
    PyObject *stream = arg.is_none ? (Py_INCREF(Py_None), Py_None) : PyLong_FromLongLong(arg.value);
    if (stream == nullptr) return -1;
    if (check_device(obj) != 0) {
      Py_DECREF(stream);
      return -1;
    }
    PyObject *capsule = call_dlpack(obj, stream, true);
    if (capsule == nullptr && PyErr_ExceptionMatches(PyExc_TypeError)) {
      PyErr_Clear();  // a producer older than max_version (DLPack 1): a legacy capsule
      capsule = call_dlpack(obj, stream, false);
    }
    Py_DECREF(stream);
    if (capsule == nullptr) return -1;
    // Consumed: renamed, so that neither its destructor nor anyone else deletes it.
    if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
      out->versioned = static_cast<DLManagedTensorVersioned *>(
          PyCapsule_GetPointer(capsule, "dltensor_versioned"));
      if (out->versioned->version.major != DLPACK_MAJOR_VERSION) {
        PyErr_Format(PyExc_BufferError, "%R: DLPack major version %u; expected %d", obj,
                     static_cast<unsigned>(out->versioned->version.major), DLPACK_MAJOR_VERSION);
        out->versioned = nullptr;
        Py_DECREF(capsule);  // not consumed: its destructor deletes the tensor
        return -1;
      }
      PyCapsule_SetName(capsule, "used_dltensor_versioned");
    } else if (PyCapsule_IsValid(capsule, "dltensor")) {
      out->legacy = static_cast<DLManagedTensor *>(PyCapsule_GetPointer(capsule, "dltensor"));
      PyCapsule_SetName(capsule, "used_dltensor");
    } else {
      PyErr_Format(PyExc_TypeError,
                   "%R.__dlpack__() returned %R: expected a capsule named \"dltensor_versioned\" "
                   "or \"dltensor\"",
                   obj, capsule);
      Py_DECREF(capsule);
      return -1;
    }
    Py_DECREF(capsule);
    // A producer that keeps per-tensor events (dl_sync_tensor_record) may have recorded one
    // instead of ordering at export: its event joins the group (nothing for other tensors).
    status = out->versioned != nullptr ? dl_sync_group_add_tensor(&group_, out->versioned)
                                       : dl_sync_group_add_legacy_tensor(&group_, out->legacy);
    if (status != DL_SYNC_OK) {
      taken_[count_++] = *out;  // released with the others
      return raise_from(status);
    }
    return 0;
  }

  // The Python array API: ask __dlpack_device__ before choosing stream= (an int means
  // another thing on another device type).
  int check_device(PyObject *obj) {
    PyObject *device = PyObject_CallMethod(obj, "__dlpack_device__", nullptr);
    if (device == nullptr) return -1;
    int type = 0, id = 0;
    int parsed = PyArg_ParseTuple(device, "ii", &type, &id);
    Py_DECREF(device);
    if (!parsed) return -1;
    if (type != static_cast<int>(consumer_.device.device_type) ||
        id != consumer_.device.device_id) {
      PyErr_Format(PyExc_ValueError, "%R is on device (%d, %d); this call runs on (%d, %d)", obj,
                   type, id, static_cast<int>(consumer_.device.device_type),
                   static_cast<int>(consumer_.device.device_id));
      return -1;
    }
    return 0;
  }

  dl_sync_stream consumer_;
  dl_sync_group group_{};
  bool initialized_ = false;
  Imported taken_[DL_SYNC_GROUP_MAX];
  std::size_t count_ = 0;
};

}  // namespace dlsync_pyext

#endif  // DLSYNC_PYEXT_HPP_
