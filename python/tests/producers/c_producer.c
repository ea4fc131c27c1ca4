/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A producer written in C with its own static copy of dlsync (linked with libdlsync.a from
 * the installed package): export() is the synchronization step of its __dlpack__, and its
 * TableArray type exposes a DLPack exchange table.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlsync/dlsync.h>
#include <dlsync_python.h>
#include <dlsync_testing.h>

/* export(device, producer_stream, stream): dl_sync_export on this copy. */
static PyObject *py_export(PyObject *module, PyObject *args) {
  (void)module;
  int device_type, device_id;
  Py_ssize_t producer;
  PyObject *stream;
  if (!PyArg_ParseTuple(args, "(ii)nO:export", &device_type, &device_id, &producer, &stream))
    return NULL;
  dl_sync_stream_arg arg = dl_sync_stream_arg_none();
  if (stream != Py_None) {
    long long value = PyLong_AsLongLong(stream);
    if (value == -1 && PyErr_Occurred()) return NULL;
    arg = dl_sync_stream_arg_int(value);
  }
  DLDevice device = {(DLDeviceType)device_type, device_id};
  int status;
  Py_BEGIN_ALLOW_THREADS status =
      dl_sync_export(dl_sync_stream_view(device, (void *)producer), arg);
  Py_END_ALLOW_THREADS if (status != DL_SYNC_OK) return dl_sync_python_raise(status);
  Py_RETURN_NONE;
}

static PyObject *py_backend_name(PyObject *module, PyObject *arg) {
  (void)module;
  long type = PyLong_AsLong(arg);
  if (type == -1 && PyErr_Occurred()) return NULL;
  const dl_sync_backend *backend = dl_sync_get_backend((int32_t)type);
  if (backend == NULL) Py_RETURN_NONE;
  return PyUnicode_FromString(backend->name);
}

/* The test hook: this copy of dlsync on sim's streams until sim closes. */
static PyObject *use_simulated_device(PyObject *module, PyObject *sim) {
  (void)module;
  if (dl_sync_testing_install(sim) != 0) return NULL;
  Py_RETURN_NONE;
}

/* --- a DLPack exchange table (DLPack 1.3) on the type TableArray -------------------------
   An array of this producer is a writable buffer on a device, written on the producer's
   current stream (use_stream). Its table's tensors hold the array (a reference, given back
   by the deleter, which takes the GIL); refuse_next() makes the next conversion fail with a
   Python exception, as a framework's does. */

typedef struct {
  PyObject_HEAD Py_buffer view;
  int64_t shape[1];
  DLDevice device;
  DLManagedTensorVersioned *adopted; /* a tensor handed over by to_py_object, or NULL */
} TableArray;

static PyTypeObject TableArrayType;
static void *current_stream;
static int refuse_next;

typedef struct {
  DLManagedTensorVersioned tensor;
  PyObject *owner;
} table_tensor;

static void table_tensor_deleter(DLManagedTensorVersioned *t) {
  PyGILState_STATE gil = PyGILState_Ensure();
  Py_DECREF(((table_tensor *)t)->owner);
  PyGILState_Release(gil);
  PyMem_RawFree(t);
}

static DLTensor describe(TableArray *a) {
  return (DLTensor){.data = a->view.buf,
                    .device = a->device,
                    .ndim = 1,
                    .dtype = {kDLUInt, 8, 1},
                    .shape = a->shape};
}

static int from_py_object(void *object, DLManagedTensorVersioned **out) {
  if (refuse_next) {
    refuse_next = 0;
    PyErr_SetString(PyExc_RuntimeError, "c_producer: this conversion is refused");
    return -1;
  }
  if (!PyObject_TypeCheck((PyObject *)object, &TableArrayType)) {
    PyErr_SetString(PyExc_TypeError, "c_producer: expected a TableArray");
    return -1;
  }
  table_tensor *t = PyMem_RawCalloc(1, sizeof *t);
  if (t == NULL) {
    PyErr_NoMemory();
    return -1;
  }
  t->tensor = (DLManagedTensorVersioned){.version = {1, 3}, .deleter = table_tensor_deleter};
  t->tensor.dl_tensor = describe(object);
  t->owner = object;
  Py_INCREF(t->owner);
  *out = &t->tensor;
  return 0;
}

static int dltensor_from_py_object(void *object, DLTensor *out) {
  *out = describe(object);
  return 0;
}

static int current_work_stream(DLDeviceType type, int32_t id, void **out) {
  (void)type;
  (void)id;
  *out = current_stream;
  return 0;
}

/* A TableArray over the tensor's memory (one-dimensional uint8 only), owning the tensor. */
static int to_py_object(DLManagedTensorVersioned *tensor, void **out) {
  const DLTensor *t = &tensor->dl_tensor;
  if (t->ndim != 1 || t->dtype.code != kDLUInt || t->dtype.bits != 8) {
    PyErr_SetString(PyExc_TypeError, "c_producer: adopts one-dimensional uint8 tensors only");
    return -1;
  }
  TableArray *a = PyObject_New(TableArray, &TableArrayType);
  if (a == NULL) return -1;
  if (PyBuffer_FillInfo(&a->view, NULL, (char *)t->data + t->byte_offset, t->shape[0], 0,
                        PyBUF_WRITABLE) != 0) {
    a->adopted = NULL;
    Py_DECREF(a);
    return -1;
  }
  a->shape[0] = t->shape[0];
  a->device = t->device;
  a->adopted = tensor;
  *out = a;
  return 0;
}

static void free_allocation(DLManagedTensorVersioned *t) {
  PyMem_RawFree(t);
}

/* One block: the tensor, its shape and its bytes. */
static int allocate(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                    void (*set_error)(void *error_ctx, const char *kind, const char *message)) {
  if (prototype->ndim < 0 || prototype->ndim > 8 || prototype->dtype.lanes != 1) {
    set_error(error_ctx, "ValueError", "c_producer: up to 8 dimensions of one lane");
    return -1;
  }
  size_t count = 1;
  for (int32_t i = 0; i < prototype->ndim; i++) count *= (size_t)prototype->shape[i];
  size_t head = sizeof(DLManagedTensorVersioned) + 8 * sizeof(int64_t);
  DLManagedTensorVersioned *t =
      PyMem_RawCalloc(1, head + count * ((prototype->dtype.bits + 7) / 8));
  if (t == NULL) {
    set_error(error_ctx, "MemoryError", "c_producer: out of memory");
    return -1;
  }
  int64_t *shape = (int64_t *)(t + 1);
  memcpy(shape, prototype->shape, (size_t)prototype->ndim * sizeof *shape);
  *t = (DLManagedTensorVersioned){.version = {1, 3}, .deleter = free_allocation};
  t->dl_tensor = *prototype;
  t->dl_tensor.shape = shape;
  t->dl_tensor.strides = NULL;
  t->dl_tensor.byte_offset = 0;
  t->dl_tensor.data = (char *)t + head;
  *out = t;
  return 0;
}

static DLPackExchangeAPI exchange_api = {
    .header = {.version = {1, 3}},
    .managed_tensor_allocator = allocate,
    .managed_tensor_from_py_object_no_sync = from_py_object,
    .managed_tensor_to_py_object_no_sync = to_py_object,
    .dltensor_from_py_object_no_sync = dltensor_from_py_object,
    .current_work_stream = current_work_stream,
};

/* TableArray(buffer, device): an array over a writable buffer. */
static int TableArray_init(TableArray *self, PyObject *args, PyObject *kwargs) {
  (void)kwargs;
  PyObject *buffer;
  int type, id;
  if (!PyArg_ParseTuple(args, "O(ii)", &buffer, &type, &id)) return -1;
  if (PyObject_GetBuffer(buffer, &self->view, PyBUF_WRITABLE) != 0) return -1;
  self->shape[0] = self->view.len;
  self->device = (DLDevice){(DLDeviceType)type, id};
  self->adopted = NULL;
  return 0;
}

static void TableArray_dealloc(TableArray *self) {
  if (self->adopted != NULL)
    self->adopted->deleter(self->adopted);
  else if (self->view.obj != NULL)
    PyBuffer_Release(&self->view);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *TableArray_dlpack_device(TableArray *self, PyObject *unused) {
  (void)unused;
  return Py_BuildValue("(ii)", (int)self->device.device_type, (int)self->device.device_id);
}

static int TableArray_getbuffer(TableArray *self, Py_buffer *view, int flags) {
  return PyBuffer_FillInfo(view, (PyObject *)self, self->view.buf, self->view.len, 0, flags);
}

static PyBufferProcs TableArray_buffer = {(getbufferproc)TableArray_getbuffer, NULL};

static PyMethodDef TableArray_methods[] = {
    {"__dlpack_device__", (PyCFunction)TableArray_dlpack_device, METH_NOARGS, "(type, id)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject TableArrayType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "c_producer.TableArray",
    .tp_basicsize = sizeof(TableArray),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An array with a DLPack exchange table; its buffer is the array's memory.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)TableArray_init,
    .tp_dealloc = (destructor)TableArray_dealloc,
    .tp_methods = TableArray_methods,
    .tp_as_buffer = &TableArray_buffer,
};

static PyObject *use_stream(PyObject *module, PyObject *handle) {
  (void)module;
  void *stream = handle == Py_None ? NULL : PyLong_AsVoidPtr(handle);
  if (stream == NULL && PyErr_Occurred()) return NULL;
  current_stream = stream;
  Py_RETURN_NONE;
}

static PyObject *refuse(PyObject *module, PyObject *unused) {
  (void)module;
  (void)unused;
  refuse_next = 1;
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"use_stream", use_stream, METH_O, "use_stream(handle): the producer's current stream"},
    {"refuse_next", refuse, METH_NOARGS, "refuse_next(): the next conversion raises"},
    {"export", py_export, METH_VARARGS, "export(device, producer_stream, stream)"},
    {"backend_name", py_backend_name, METH_O, "backend_name(device_type)"},
    {"use_simulated_device", use_simulated_device, METH_O, "use_simulated_device(sim)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "c_producer", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_c_producer(void);
PyMODINIT_FUNC PyInit_c_producer(void) {
  if (PyType_Ready(&TableArrayType) < 0) return NULL;
  PyObject *api = PyCapsule_New(&exchange_api, "dlpack_exchange_api", NULL);
  if (api == NULL ||
      PyDict_SetItemString(TableArrayType.tp_dict, "__dlpack_c_exchange_api__", api) < 0) {
    Py_XDECREF(api);
    return NULL;
  }
  Py_DECREF(api);
  PyType_Modified(&TableArrayType);
  PyObject *module = PyModule_Create(&module_def);
  if (module == NULL) return NULL;
  Py_INCREF(&TableArrayType);
  if (PyModule_AddObject(module, "TableArray", (PyObject *)&TableArrayType) < 0) {
    Py_DECREF(&TableArrayType);
    Py_DECREF(module);
    return NULL;
  }
  return module;
}
