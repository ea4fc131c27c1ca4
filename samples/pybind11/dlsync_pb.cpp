// SPDX-License-Identifier: Apache-2.0
//
// dlsync_pb: the nanobind sample (samples/nanobind/dlsync_nb.cpp) written with pybind11.
// pybind11 has no DLPack type of its own: the capsules, the stream argument and the
// consumer's import are dlsync_pyext.hpp's, shared with the nanobind sample; what differs
// is the binding's API (py::kw_only, py::cast of a new instance, py::error_already_set) and
// the negative control, which calls __dlpack__() itself. docs/bindings.md walks through it.
//
// The extension works on one current stream (use_stream), as a framework does. Its kernels
// (fill, copy) run on the host for CPU arrays, on dlsync's simulated device once a test
// installs it (use_simulated_device), and are where a GPU build launches its CUDA or HIP
// kernels on that stream.
#include <pybind11/pybind11.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <dlsync/dlsync.h>
#include <dlsync_testing.h>  // the test hook: dl_sync_testing_install

#include "dlsync_pyext.hpp"  // shared with samples/nanobind

namespace py = pybind11;
using namespace py::literals;

namespace {

void *current_stream = nullptr;     // the extension's work stream (NULL: the legacy default one)
PyObject *simulated = nullptr;      // the dlsync.testing.SimulatedDevice its kernels run on
std::atomic<long> deleters_run{0};  // exported tensors given back (tests: exactly once)

void *stream_on(DLDevice device) {
  return device.device_type == kDLCPU ? nullptr : current_stream;
}

// --- the array type ------------------------------------------------------------------------

// A one-dimensional array of bytes on a device. Its memory is a writable buffer it was made
// over (on the simulated device, device memory is host memory), or a tensor it took over.
struct Array {
  DLDevice device{kDLCUDA, 0};
  Py_buffer view{};                             // the buffer's memory, held while we live
  DLManagedTensorVersioned *adopted = nullptr;  // or a tensor's, deleted when we die
  int64_t shape[1] = {0};

  Array() = default;
  Array(const Array &) = delete;
  Array &operator=(const Array &) = delete;
  ~Array() {
    if (view.obj != nullptr) PyBuffer_Release(&view);
    if (adopted != nullptr && adopted->deleter != nullptr) adopted->deleter(adopted);
  }
  void *data() const {
    return adopted != nullptr
               ? static_cast<char *>(adopted->dl_tensor.data) + adopted->dl_tensor.byte_offset
               : view.buf;
  }
  DLTensor describe() {
    DLTensor t{};
    t.data = data();
    t.device = device;
    t.ndim = 1;
    t.dtype = {kDLUInt, 8, 1};
    t.shape = shape;
    return t;
  }
  // What the simulator's kernels take: the buffer, or a writable view of an adopted tensor.
  py::object memory() {
    if (view.obj != nullptr) return py::reinterpret_borrow<py::object>(view.obj);
    return py::reinterpret_steal<py::object>(
        PyMemoryView_FromMemory(static_cast<char *>(data()), shape[0], PyBUF_WRITE));
  }
};

DLDevice parse_device(py::handle device) {
  int type = 0, id = 0;
  if (!PyArg_ParseTuple(device.ptr(), "ii", &type, &id)) throw py::error_already_set();
  if (type != kDLCPU && type != kDLCUDA && type != kDLCUDAHost && type != kDLCUDAManaged &&
      type != kDLROCM && type != kDLROCMHost)
    throw py::value_error("Array: device type: expected kDLCPU (1), a CUDA or a ROCm type");
  return DLDevice{static_cast<DLDeviceType>(type), id};
}

// An exported tensor keeps its array alive; its deleter may run on any thread.
struct Export {
  union {
    DLManagedTensorVersioned versioned;
    DLManagedTensor legacy;
  };
  int64_t shape[1];
  PyObject *array;
};

void let_go(Export *e) {
  PyGILState_STATE gil = PyGILState_Ensure();
  Py_DECREF(e->array);
  PyGILState_Release(gil);
  std::free(e);
  deleters_run.fetch_add(1);
}
void versioned_deleter(DLManagedTensorVersioned *t) {
  let_go(reinterpret_cast<Export *>(t));
}
void legacy_deleter(DLManagedTensor *t) {
  let_go(reinterpret_cast<Export *>(t));
}

Export *new_export(PyObject *self, bool versioned) {
  Array &a = py::cast<Array &>(py::handle(self));
  auto *e = static_cast<Export *>(std::calloc(1, sizeof(Export)));
  if (e == nullptr) return nullptr;
  DLTensor t = a.describe();
  e->shape[0] = a.shape[0];
  t.shape = e->shape;
  if (versioned) {
    e->versioned.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    e->versioned.deleter = versioned_deleter;
    e->versioned.dl_tensor = t;
  } else {
    e->legacy.deleter = legacy_deleter;
    e->legacy.dl_tensor = t;
  }
  e->array = self;
  Py_INCREF(self);
  return e;
}

// __dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)
py::object array_dlpack(py::handle self, py::object stream, py::object max_version,
                        py::object dl_device, py::object copy) {
  Array &a = py::cast<Array &>(self);
  if (copy.ptr() == Py_True)
    throw py::buffer_error(
        "__dlpack__: copy=True is not supported; the memory is exported in place");
  if (!dl_device.is_none()) {
    DLDevice wanted = parse_device(dl_device);
    if (wanted.device_type != a.device.device_type || wanted.device_id != a.device.device_id)
      throw py::buffer_error("__dlpack__: dl_device is not the array's device (no copies)");
  }
  bool versioned = false;
  if (dlsync_pyext::wants_versioned(max_version.ptr(), &versioned) != 0)
    throw py::error_already_set();
  // The one line that orders the export: our stream's work so far before the consumer's.
  if (dlsync_pyext::export_to(dl_sync_stream_view(a.device, stream_on(a.device)), stream.ptr()) !=
      0)
    throw py::error_already_set();
  Export *e = new_export(self.ptr(), versioned);
  if (e == nullptr) throw std::bad_alloc();
  // stream=-1: the tensor carries an event of our stream instead (per-tensor events).
  if (dlsync_pyext::is_minus_one(stream.ptr())) {
    dl_sync_stream producer = dl_sync_stream_view(a.device, stream_on(a.device));
    if ((versioned ? dlsync_pyext::record_event(&e->versioned, producer)
                   : dlsync_pyext::record_event(&e->legacy, producer)) != 0) {
      versioned ? e->versioned.deleter(&e->versioned) : e->legacy.deleter(&e->legacy);
      throw py::error_already_set();
    }
  }
  PyObject *capsule =
      versioned ? dlsync_pyext::capsule_of(&e->versioned) : dlsync_pyext::capsule_of(&e->legacy);
  if (capsule == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(capsule);
}

// --- the exchange table: the same tensors without a Python call ----------------------------
// Every entry sets a Python exception and returns -1 on failure; none may let a C++
// exception out (the consumer calling it is C).

int fail_with_current_exception(const char *where) {
  try {
    throw;
  } catch (py::error_already_set &e) {
    e.restore();
  } catch (std::bad_alloc &) {
    PyErr_NoMemory();
  } catch (std::exception &e) {
    PyErr_Format(PyExc_RuntimeError, "dlsync_pb exchange table: %s: %s", where, e.what());
  }
  return -1;
}

bool is_array(void *object) {
  if (py::isinstance<Array>(py::handle(static_cast<PyObject *>(object)))) return true;
  PyErr_Format(PyExc_TypeError, "dlsync_pb exchange table: %R is no dlsync_pb.Array",
               static_cast<PyObject *>(object));
  return false;
}

int table_from_py_object(void *object, DLManagedTensorVersioned **out) {
  try {
    if (!is_array(object)) return -1;
    Export *e = new_export(static_cast<PyObject *>(object), true);
    if (e == nullptr) throw std::bad_alloc();
    *out = &e->versioned;
    return 0;
  } catch (...) {
    return fail_with_current_exception("managed_tensor_from_py_object_no_sync");
  }
}

int table_dltensor_from_py_object(void *object, DLTensor *out) {
  try {
    if (!is_array(object)) return -1;
    *out = py::cast<Array &>(py::handle(static_cast<PyObject *>(object))).describe();
    return 0;
  } catch (...) {
    return fail_with_current_exception("dltensor_from_py_object_no_sync");
  }
}

// A new Array that takes tensor over (deleted when the Array dies).
int table_to_py_object(DLManagedTensorVersioned *tensor, void **out) {
  try {
    const DLTensor &t = tensor->dl_tensor;
    if (t.ndim != 1 || t.dtype.bits * t.dtype.lanes != 8 ||
        (t.strides != nullptr && t.strides[0] != 1))
      throw py::type_error("dlsync_pb exchange table: adopts contiguous 1-D tensors of bytes only");
    auto a = std::make_unique<Array>();
    a->device = t.device;
    a->shape[0] = t.shape[0];
    py::object object = py::cast(a.get(), py::return_value_policy::take_ownership);
    a.release()->adopted = tensor;  // the new Array owns it from here
    *out = object.release().ptr();
    return 0;
  } catch (...) {
    return fail_with_current_exception("managed_tensor_to_py_object_no_sync");
  }
}

void free_block(DLManagedTensorVersioned *t) {
  std::free(t);
}

// One block: the tensor, its shape, its bytes (contiguous).
int table_allocate(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                   DLPackSetError set_error) {
  constexpr int kMaxDims = 8;
  if (prototype->ndim < 0 || prototype->ndim > kMaxDims || prototype->dtype.lanes == 0) {
    set_error(error_ctx, "ValueError", "dlsync_pb exchange table: 0 to 8 dimensions");
    return -1;
  }
  size_t bytes = (static_cast<size_t>(prototype->dtype.bits) * prototype->dtype.lanes + 7) / 8;
  for (int32_t i = 0; i < prototype->ndim; i++) bytes *= static_cast<size_t>(prototype->shape[i]);
  const size_t head = sizeof(DLManagedTensorVersioned) + kMaxDims * sizeof(int64_t);
  auto *t = static_cast<DLManagedTensorVersioned *>(std::calloc(1, head + bytes));
  if (t == nullptr) {
    set_error(error_ctx, "MemoryError", "dlsync_pb exchange table: out of memory");
    return -1;
  }
  auto *shape = reinterpret_cast<int64_t *>(t + 1);
  for (int32_t i = 0; i < prototype->ndim; i++) shape[i] = prototype->shape[i];
  t->version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  t->deleter = free_block;
  t->dl_tensor = *prototype;
  t->dl_tensor.data = reinterpret_cast<char *>(t) + head;
  t->dl_tensor.shape = shape;
  t->dl_tensor.strides = nullptr;
  t->dl_tensor.byte_offset = 0;
  *out = t;
  return 0;
}

// The stream the table's tensors are ready on: our current work stream (none on the CPU).
int table_current_work_stream(DLDeviceType type, int32_t id, void **out) {
  *out = stream_on(DLDevice{type, id});
  return 0;
}

DLPackExchangeAPI make_exchange_api() {
  DLPackExchangeAPI api{};
  api.header.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  api.managed_tensor_allocator = table_allocate;
  api.managed_tensor_from_py_object_no_sync = table_from_py_object;
  api.managed_tensor_to_py_object_no_sync = table_to_py_object;
  api.dltensor_from_py_object_no_sync = table_dltensor_from_py_object;
  api.current_work_stream = table_current_work_stream;
  return api;
}
const DLPackExchangeAPI exchange_api = make_exchange_api();

// --- kernels -------------------------------------------------------------------------------

py::object stream_object(DLDevice device) {
  void *stream = stream_on(device);
  return stream == nullptr ? py::none()
                           : py::reinterpret_steal<py::object>(PyLong_FromVoidPtr(stream));
}

py::handle simulator(DLDevice device) {
  if (simulated == nullptr)
    throw py::value_error(
        "dlsync_pb: this build has kernels for the CPU and dlsync's simulated device only "
        "(a GPU build launches its CUDA or HIP kernels here)");
  (void)device;
  return simulated;
}

// dst's bytes = value, on our stream.
void kernel_fill(Array &dst, int value) {
  if (dst.device.device_type == kDLCPU) {
    std::memset(dst.data(), value, static_cast<size_t>(dst.shape[0]));
    return;
  }
  simulator(dst.device).attr("write")(stream_object(dst.device), dst.memory(), value);
}

// dst's bytes = src's, on our stream.
void kernel_copy(const void *src, Array &dst) {
  if (dst.device.device_type == kDLCPU) {
    std::memcpy(dst.data(), src, static_cast<size_t>(dst.shape[0]));
    return;
  }
  py::object source = py::reinterpret_steal<py::object>(PyMemoryView_FromMemory(
      static_cast<char *>(const_cast<void *>(src)), dst.shape[0], PyBUF_READ));
  simulator(dst.device).attr("copy")(stream_object(dst.device), source, dst.memory());
}

size_t contiguous_bytes(const DLTensor &t) {
  size_t bytes = (static_cast<size_t>(t.dtype.bits) * t.dtype.lanes + 7) / 8;
  int64_t expected = 1;
  for (int32_t i = t.ndim; i-- > 0;) {
    if (t.strides != nullptr && t.shape[i] != 1 && t.strides[i] != expected)
      throw py::value_error("dlsync_pb: a contiguous array was expected");
    expected *= t.shape[i];
  }
  return bytes * static_cast<size_t>(expected);
}

// copy(src, dst): src of any framework, ordered onto our stream, read by our kernel, then
// released after it.
void copy(py::handle src, Array &dst) {
  {
    py::gil_scoped_release unlocked;  // deleters of earlier calls whose kernels completed
    dl_sync_release_poll();
  }
  dlsync_pyext::Importer args(dst.device, stream_on(dst.device));
  dlsync_pyext::Imported in;
  if (args.add(src.ptr(), &in) != 0 || args.wait() != 0) throw py::error_already_set();
  const DLTensor &t = *in.tensor();
  if (contiguous_bytes(t) != static_cast<size_t>(dst.shape[0]))
    throw py::value_error("dlsync_pb.copy: src and dst differ in size");
  kernel_copy(static_cast<const char *>(t.data) + t.byte_offset, dst);
  if (args.release() != 0) throw py::error_already_set();
}

// What not to do: what a pybind11 extension writes by hand without dlsync, src's capsule
// taken with __dlpack__() (no stream: ready on the producer's legacy default stream, not
// ours) and its tensor deleted when the call returns, while our kernel may still read it.
void copy_unordered(py::handle src, Array &dst) {
  py::object capsule = src.attr("__dlpack__")();
  const char *name = PyCapsule_GetName(capsule.ptr());
  void *pointer = PyCapsule_GetPointer(capsule.ptr(), name);
  if (pointer == nullptr) throw py::error_already_set();
  const DLTensor &t = std::strcmp(name, "dltensor_versioned") == 0
                          ? static_cast<DLManagedTensorVersioned *>(pointer)->dl_tensor
                          : static_cast<DLManagedTensor *>(pointer)->dl_tensor;
  if (contiguous_bytes(t) != static_cast<size_t>(dst.shape[0]))
    throw py::value_error("dlsync_pb.copy_unordered: src and dst differ in size");
  kernel_copy(static_cast<const char *>(t.data) + t.byte_offset, dst);
}  // the unconsumed capsule deletes the tensor here

}  // namespace

PYBIND11_MODULE(dlsync_pb, m) {
  m.doc() = "A pybind11 extension that orders its DLPack exchanges with dlsync.";

  py::class_<Array> array(m, "Array",
                          "Array(buffer, device=(2, 0)): a 1-D array of bytes over a writable "
                          "buffer, exported with dlsync's ordering.");
  array
      .def(py::init([](py::handle buffer, py::handle device) {
             DLDevice parsed = parse_device(device);
             auto a = std::make_unique<Array>();
             if (PyObject_GetBuffer(buffer.ptr(), &a->view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) !=
                 0)
               throw py::error_already_set();
             a->device = parsed;
             a->shape[0] = a->view.len;
             return a;
           }),
           "buffer"_a, "device"_a = py::make_tuple(2, 0))
      .def("__dlpack__", &array_dlpack, py::kw_only(), "stream"_a = py::none(),
           "max_version"_a = py::none(), "dl_device"_a = py::none(), "copy"_a = py::none())
      .def("__dlpack_device__",
           [](Array &a) {
             return py::make_tuple(static_cast<int>(a.device.device_type), a.device.device_id);
           })
      .def_property_readonly("memory", &Array::memory,
                             "The memory: the buffer the array was made over.")
      .def_property_readonly("nbytes", [](Array &a) { return a.shape[0]; })
      .def_property_readonly("data_ptr",
                             [](Array &a) { return reinterpret_cast<uintptr_t>(a.data()); });
  PyObject *table =
      PyCapsule_New(const_cast<DLPackExchangeAPI *>(&exchange_api), "dlpack_exchange_api", nullptr);
  if (table == nullptr) throw py::error_already_set();
  array.attr("__dlpack_c_exchange_api__") = py::reinterpret_steal<py::object>(table);

  m.def("copy", &copy, "src"_a, "dst"_a,
        "copy(src, dst): src (any framework's array) into dst on the extension's stream, "
        "ordered after src's producer, released after the kernel.");
  m.def("copy_unordered", &copy_unordered, "src"_a, "dst"_a,
        "The same through __dlpack__() with no stream and no release ordering: what not to do.");
  m.def("fill", &kernel_fill, "dst"_a, "value"_a, "fill(dst, value): a kernel on our stream.");
  m.def(
      "use_stream",
      [](py::handle stream) {
        void *handle = nullptr;
        if (!stream.is_none()) {
          handle = PyLong_AsVoidPtr(stream.ptr());
          if (handle == nullptr && PyErr_Occurred()) throw py::error_already_set();
        }
        current_stream = handle;
      },
      "stream"_a, "use_stream(handle): the extension's work stream (None: legacy default).");
  m.def("current_stream", []() { return stream_object(DLDevice{kDLCUDA, 0}); });
  m.def(
      "use_simulated_device",
      [](py::handle sim) {
        if (dl_sync_testing_install(sim.ptr()) != 0) throw py::error_already_set();
        Py_XDECREF(simulated);
        simulated = sim.inc_ref().ptr();
      },
      "sim"_a, "The test hook: this copy of dlsync and our kernels on sim, until it closes.");
  m.def("release_poll", []() {
    py::gil_scoped_release unlocked;
    return dl_sync_release_poll();
  });
  m.def("release_pending", []() { return dl_sync_release_pending(); });
  m.def("deleters_run", []() { return deleters_run.load(); });
}
