// SPDX-License-Identifier: Apache-2.0
//
// dlsync_nb: a nanobind extension whose array type exports with dlsync's ordering
// (__dlpack__, __dlpack_device__, a DLPack C exchange table) and whose kernels take arrays of
// any framework, ordered onto the extension's stream first and released after the kernel.
// docs/bindings.md walks through it.
//
// The extension works on one current stream (use_stream), as a framework does. Its kernels
// (fill, copy) run on the host for CPU arrays, on dlsync's simulated device once a test
// installs it (use_simulated_device), and are where a GPU build launches its CUDA or HIP
// kernels on that stream.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>

#include <dlsync/dlsync.h>
#include <dlsync_testing.h>  // the test hook: dl_sync_testing_install

#include "dlsync_pyext.hpp"

namespace nb = nanobind;
using namespace nb::literals;

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
  nb::object memory() {
    if (view.obj != nullptr) return nb::borrow(view.obj);
    return nb::steal(PyMemoryView_FromMemory(static_cast<char *>(data()), shape[0], PyBUF_WRITE));
  }
};

DLDevice parse_device(nb::handle device) {
  int type = 0, id = 0;
  if (!PyArg_ParseTuple(device.ptr(), "ii", &type, &id)) throw nb::python_error();
  if (type != kDLCPU && type != kDLCUDA && type != kDLCUDAHost && type != kDLCUDAManaged &&
      type != kDLROCM && type != kDLROCMHost)
    throw nb::value_error("Array: device type: expected kDLCPU (1), a CUDA or a ROCm type");
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
  Array &a = nb::cast<Array &>(nb::handle(self));
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
template <bool kOrdered>
nb::object array_dlpack(nb::handle self, nb::object stream, nb::object max_version,
                        nb::object dl_device, nb::object copy) {
  Array &a = nb::cast<Array &>(self);
  if (copy.ptr() == Py_True)
    throw nb::buffer_error(
        "__dlpack__: copy=True is not supported; the memory is exported in place");
  if (!dl_device.is_none()) {
    DLDevice wanted = parse_device(dl_device);
    if (wanted.device_type != a.device.device_type || wanted.device_id != a.device.device_id)
      throw nb::buffer_error("__dlpack__: dl_device is not the array's device (no copies)");
  }
  bool versioned = false;
  if (dlsync_pyext::wants_versioned(max_version.ptr(), &versioned) != 0) throw nb::python_error();
  // The one line that orders the export: our stream's work so far before the consumer's.
  if (kOrdered && dlsync_pyext::export_to(dl_sync_stream_view(a.device, stream_on(a.device)),
                                          stream.ptr()) != 0)
    throw nb::python_error();
  Export *e = new_export(self.ptr(), versioned);
  if (e == nullptr) throw std::bad_alloc();
  // stream=-1: the tensor carries an event of our stream instead (per-tensor events).
  if (kOrdered && dlsync_pyext::is_minus_one(stream.ptr())) {
    dl_sync_stream producer = dl_sync_stream_view(a.device, stream_on(a.device));
    if ((versioned ? dlsync_pyext::record_event(&e->versioned, producer)
                   : dlsync_pyext::record_event(&e->legacy, producer)) != 0) {
      versioned ? e->versioned.deleter(&e->versioned) : e->legacy.deleter(&e->legacy);
      throw nb::python_error();
    }
  }
  PyObject *capsule =
      versioned ? dlsync_pyext::capsule_of(&e->versioned) : dlsync_pyext::capsule_of(&e->legacy);
  if (capsule == nullptr) throw nb::python_error();
  return nb::steal(capsule);
}

// --- the exchange table: the same tensors without a Python call ----------------------------
// Every entry sets a Python exception and returns -1 on failure; none may let a C++
// exception out (the consumer calling it is C).

int fail_with_current_exception(const char *where) {
  try {
    throw;
  } catch (nb::python_error &e) {
    e.restore();
  } catch (std::bad_alloc &) {
    PyErr_NoMemory();
  } catch (std::exception &e) {
    PyErr_Format(PyExc_RuntimeError, "dlsync_nb exchange table: %s: %s", where, e.what());
  }
  return -1;
}

bool is_array(void *object) {
  if (nb::isinstance<Array>(nb::handle(static_cast<PyObject *>(object)))) return true;
  PyErr_Format(PyExc_TypeError, "dlsync_nb exchange table: %R is no dlsync_nb.Array",
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
    *out = nb::cast<Array &>(nb::handle(static_cast<PyObject *>(object))).describe();
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
      throw nb::type_error("dlsync_nb exchange table: adopts contiguous 1-D tensors of bytes only");
    nb::object object = nb::inst_alloc(nb::type<Array>());
    Array *a = new (nb::inst_ptr<Array>(object)) Array();
    nb::inst_mark_ready(object);
    a->device = t.device;
    a->shape[0] = t.shape[0];
    a->adopted = tensor;
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
    set_error(error_ctx, "ValueError", "dlsync_nb exchange table: 0 to 8 dimensions");
    return -1;
  }
  size_t bytes = (static_cast<size_t>(prototype->dtype.bits) * prototype->dtype.lanes + 7) / 8;
  for (int32_t i = 0; i < prototype->ndim; i++) bytes *= static_cast<size_t>(prototype->shape[i]);
  const size_t head = sizeof(DLManagedTensorVersioned) + kMaxDims * sizeof(int64_t);
  auto *t = static_cast<DLManagedTensorVersioned *>(std::calloc(1, head + bytes));
  if (t == nullptr) {
    set_error(error_ctx, "MemoryError", "dlsync_nb exchange table: out of memory");
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

nb::object stream_object(DLDevice device) {
  void *stream = stream_on(device);
  return stream == nullptr ? nb::none() : nb::steal(PyLong_FromVoidPtr(stream));
}

nb::handle simulator(DLDevice device) {
  if (simulated == nullptr)
    throw nb::value_error(
        "dlsync_nb: this build has kernels for the CPU and dlsync's simulated device only "
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
  nb::object source = nb::steal(PyMemoryView_FromMemory(
      static_cast<char *>(const_cast<void *>(src)), dst.shape[0], PyBUF_READ));
  simulator(dst.device).attr("copy")(stream_object(dst.device), source, dst.memory());
}

size_t contiguous_bytes(const DLTensor &t) {
  size_t bytes = (static_cast<size_t>(t.dtype.bits) * t.dtype.lanes + 7) / 8;
  int64_t expected = 1;
  for (int32_t i = t.ndim; i-- > 0;) {
    if (t.strides != nullptr && t.shape[i] != 1 && t.strides[i] != expected)
      throw nb::value_error("dlsync_nb: a contiguous array was expected");
    expected *= t.shape[i];
  }
  return bytes * static_cast<size_t>(expected);
}

// copy(src, dst): src of any framework, ordered onto our stream, read by our kernel, then
// released after it.
void copy(nb::handle src, Array &dst) {
  {
    nb::gil_scoped_release unlocked;  // deleters of earlier calls whose kernels completed
    dl_sync_release_poll();
  }
  dlsync_pyext::Importer args(dst.device, stream_on(dst.device));
  dlsync_pyext::Imported in;
  if (args.add(src.ptr(), &in) != 0 || args.wait() != 0) throw nb::python_error();
  const DLTensor &t = *in.tensor();
  if (contiguous_bytes(t) != static_cast<size_t>(dst.shape[0]))
    throw nb::value_error("dlsync_nb.copy: src and dst differ in size");
  kernel_copy(static_cast<const char *>(t.data) + t.byte_offset, dst);
  if (args.release() != 0) throw nb::python_error();
}

// What not to do: nanobind's ndarray caster took src through __dlpack__() without naming
// our stream, and let it go when the call returns, while our kernel may still read it.
void copy_unordered(nb::ndarray<nb::ro> src, Array &dst) {
  if (src.nbytes() != static_cast<size_t>(dst.shape[0]))
    throw nb::value_error("dlsync_nb.copy_unordered: src and dst differ in size");
  kernel_copy(src.data(), dst);
}

// --- for bench_dlpack.py: a backend whose calls return at once ------------------------------
// What the bench then times is dlsync's own work in our __dlpack__, not a runtime's or the
// simulator's. It orders nothing: never use it for anything else.

int null_device(void *, int32_t *device) {
  return *device = 0;
}
int null_set_device(void *, int32_t) {
  return 0;
}
int null_event_create(void *, void **event) {
  static char token;
  *event = &token;
  return 0;
}
int null_event(void *, void *) {
  return 0;
}
int null_event_stream(void *, void *, void *) {
  return 0;
}
int null_event_query(void *, void *, int *done) {
  return *done = 1, 0;
}
int null_capture_info(void *, void *, dl_sync_capture_info *out) {
  out->status = DL_SYNC_CAPTURE_NONE;
  return 0;
}
const char *null_error_name(void *, int) {
  return "nullError";
}
int null_error_status(void *, int) {
  return DL_SYNC_EBACKEND;
}

dl_sync_backend make_null_backend() {
  dl_sync_backend b{};
  b.size = sizeof(dl_sync_backend);
  b.abi = DL_SYNC_BACKEND_ABI;
  b.name = "null";
  b.get_device = null_device;
  b.set_device = null_set_device;
  b.event_create = null_event_create;
  b.event_destroy = null_event;
  b.event_record = null_event_stream;
  b.stream_wait = null_event_stream;
  b.event_synchronize = null_event;
  b.event_query = null_event_query;
  b.capture_info = null_capture_info;
  b.error_name = null_error_name;
  b.error_string = null_error_name;
  b.error_status = null_error_status;
  return b;
}
const dl_sync_backend null_backend = make_null_backend();

void use_null_backend(bool on) {
  dl_sync_shutdown();  // no pooled event of one backend goes to the other
  if (dl_sync_python_check(dl_sync_set_backend(kDLCUDA, on ? &null_backend : nullptr)) != 0)
    throw nb::python_error();
}

}  // namespace

NB_MODULE(dlsync_nb, m) {
  m.doc() = "A nanobind extension that orders its DLPack exchanges with dlsync.";

  nb::class_<Array> array(m, "Array",
                          "Array(buffer, device=(2, 0)): a 1-D array of bytes over a writable "
                          "buffer, exported with dlsync's ordering.");
  array
      .def(
          "__init__",
          [](Array *self, nb::handle buffer, nb::handle device) {
            DLDevice parsed = parse_device(device);
            Py_buffer view;
            if (PyObject_GetBuffer(buffer.ptr(), &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) != 0)
              throw nb::python_error();
            Array *a = new (self) Array();
            a->device = parsed;
            a->view = view;
            a->shape[0] = view.len;
          },
          "buffer"_a, "device"_a = nb::make_tuple(2, 0))
      .def("__dlpack__", &array_dlpack<true>, nb::kw_only(), "stream"_a = nb::none(),
           "max_version"_a = nb::none(), "dl_device"_a = nb::none(), "copy"_a = nb::none())
      // For bench_dlpack.py only: the same export without the ordering (what it costs).
      .def("_dlpack_unordered", &array_dlpack<false>, nb::kw_only(), "stream"_a = nb::none(),
           "max_version"_a = nb::none(), "dl_device"_a = nb::none(), "copy"_a = nb::none())
      .def("__dlpack_device__",
           [](Array &a) {
             return nb::make_tuple(static_cast<int>(a.device.device_type), a.device.device_id);
           })
      .def_prop_ro("memory", &Array::memory, "The memory: the buffer the array was made over.")
      .def_prop_ro("nbytes", [](Array &a) { return a.shape[0]; })
      .def_prop_ro("data_ptr", [](Array &a) { return reinterpret_cast<uintptr_t>(a.data()); });
  PyObject *table =
      PyCapsule_New(const_cast<DLPackExchangeAPI *>(&exchange_api), "dlpack_exchange_api", nullptr);
  if (table == nullptr) throw nb::python_error();
  array.attr("__dlpack_c_exchange_api__") = nb::steal(table);

  m.def("copy", &copy, "src"_a, "dst"_a,
        "copy(src, dst): src (any framework's array) into dst on the extension's stream, "
        "ordered after src's producer, released after the kernel.");
  m.def("copy_unordered", &copy_unordered, "src"_a, "dst"_a,
        "The same through an nb::ndarray argument, with no ordering: what not to do.");
  m.def("fill", &kernel_fill, "dst"_a, "value"_a, "fill(dst, value): a kernel on our stream.");
  m.def(
      "use_stream",
      [](nb::handle stream) {
        void *handle = nullptr;
        if (!stream.is_none()) {
          handle = PyLong_AsVoidPtr(stream.ptr());
          if (handle == nullptr && PyErr_Occurred()) throw nb::python_error();
        }
        current_stream = handle;
      },
      "stream"_a.none(), "use_stream(handle): the extension's work stream (None: legacy default).");
  m.def("current_stream", []() { return stream_object(DLDevice{kDLCUDA, 0}); });
  m.def(
      "use_simulated_device",
      [](nb::handle sim) {
        if (dl_sync_testing_install(sim.ptr()) != 0) throw nb::python_error();
        Py_XDECREF(simulated);
        simulated = sim.inc_ref().ptr();
      },
      "sim"_a, "The test hook: this copy of dlsync and our kernels on sim, until it closes.");
  m.def("release_poll", []() {
    nb::gil_scoped_release unlocked;
    return dl_sync_release_poll();
  });
  m.def("release_pending", []() { return dl_sync_release_pending(); });
  m.def("deleters_run", []() { return deleters_run.load(); });
  m.def("_use_null_backend", &use_null_backend, "on"_a,
        "For bench_dlpack.py only: kDLCUDA on a backend whose calls return at once (True), "
        "or the default again (False).");
}
