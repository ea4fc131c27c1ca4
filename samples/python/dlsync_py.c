/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlsync_py: a CPython extension whose tensor type implements __dlpack__ and
 * __dlpack_device__ with dlsync doing all the stream handling, and a from_dlpack that
 * consumes any producer's capsule. A sample of how a framework uses dlsync from Python.
 */
#include <stdatomic.h>
#include <string.h>

/* The conversions and exceptions of the Python module dlsync (python/dlsync/). */
#include "binding.h"

/* A tensor: either memory it allocated, or a DLPack tensor it imported and must delete. */
typedef struct {
  PyObject_HEAD DLTensor view;
  int64_t shape[8], strides[8];
  void *owned_memory;                  /* allocated by us, or NULL */
  DLManagedTensorVersioned *versioned; /* imported, deleted exactly once in dealloc */
  DLManagedTensor *legacy;
} Tensor;

static PyTypeObject TensorType;
static atomic_long deleter_calls; /* our own deleters run (exports that were released) */

/* --- export ------------------------------------------------------------------------ */

/* The exported tensor keeps the Tensor alive; its deleter may run on any thread. */
typedef struct export_ctx {
  PyObject *owner;
  int64_t shape[8], strides[8];
} export_ctx;

static void release_owner(export_ctx *ctx) {
  PyGILState_STATE gil = PyGILState_Ensure();
  Py_DECREF(ctx->owner);
  PyGILState_Release(gil);
  PyMem_RawFree(ctx);
  atomic_fetch_add(&deleter_calls, 1);
}

static void versioned_deleter(DLManagedTensorVersioned *m) {
  release_owner(m->manager_ctx);
  PyMem_RawFree(m);
}

static void legacy_deleter(DLManagedTensor *m) {
  release_owner(m->manager_ctx);
  PyMem_RawFree(m);
}

static DLTensor export_view(Tensor *self, export_ctx *ctx) {
  DLTensor t = self->view;
  memcpy(ctx->shape, self->view.shape, sizeof(int64_t) * (size_t)t.ndim);
  t.shape = ctx->shape;
  if (self->view.strides != NULL) {
    memcpy(ctx->strides, self->view.strides, sizeof(int64_t) * (size_t)t.ndim);
    t.strides = ctx->strides;
  }
  return t;
}

/* An owning tensor that keeps self alive until its deleter runs (no synchronization). */
static export_ctx *new_ctx(Tensor *self) {
  export_ctx *ctx = PyMem_RawCalloc(1, sizeof *ctx);
  if (ctx == NULL) return NULL;
  ctx->owner = (PyObject *)self;
  Py_INCREF(self);
  return ctx;
}

static DLManagedTensorVersioned *new_versioned(Tensor *self) {
  export_ctx *ctx = new_ctx(self);
  DLManagedTensorVersioned *m = ctx != NULL ? PyMem_RawCalloc(1, sizeof *m) : NULL;
  if (m == NULL) {
    if (ctx != NULL) release_owner(ctx);
    return NULL;
  }
  *m = (DLManagedTensorVersioned){.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION},
                                  .manager_ctx = ctx,
                                  .deleter = versioned_deleter,
                                  .dl_tensor = export_view(self, ctx)};
  return m;
}

static DLManagedTensor *new_legacy(Tensor *self) {
  export_ctx *ctx = new_ctx(self);
  DLManagedTensor *m = ctx != NULL ? PyMem_RawCalloc(1, sizeof *m) : NULL;
  if (m == NULL) {
    if (ctx != NULL) release_owner(ctx);
    return NULL;
  }
  *m = (DLManagedTensor){
      .dl_tensor = export_view(self, ctx), .manager_ctx = ctx, .deleter = legacy_deleter};
  return m;
}

static void unconsumed_versioned(PyObject *capsule) {
  if (!PyCapsule_IsValid(capsule, "dltensor_versioned")) return; /* consumed: not ours */
  DLManagedTensorVersioned *m = PyCapsule_GetPointer(capsule, "dltensor_versioned");
  if (m->deleter) m->deleter(m);
}

static void unconsumed_legacy(PyObject *capsule) {
  if (!PyCapsule_IsValid(capsule, "dltensor")) return;
  DLManagedTensor *m = PyCapsule_GetPointer(capsule, "dltensor");
  if (m->deleter) m->deleter(m);
}

/* Decodes stream=, and makes the data ready on the consumer's stream with dlsync. */
static int sync_for_consumer(Tensor *self, PyObject *stream) {
  dl_sync_stream_arg arg;
  if (dl_sync_py_stream_arg("__dlpack__", stream, &arg) != 0) return -1;
  /* This producer's work stream: the CPU has none; a GPU framework passes its own. */
  int status = dl_sync_export(dl_sync_stream_view(self->view.device, NULL), arg);
  if (status != DL_SYNC_OK) {
    dl_sync_py_raise(status);
    return -1;
  }
  return 0;
}

static PyObject *Tensor_dlpack(Tensor *self, PyObject *args, PyObject *kwargs) {
  static char *keywords[] = {"stream", "max_version", "dl_device", "copy", NULL};
  PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OOOO:__dlpack__", keywords, &stream,
                                   &max_version, &dl_device, &copy))
    return NULL;
  if (copy == Py_True) {
    PyErr_SetString(PyExc_BufferError,
                    "__dlpack__: copy=True is not supported; the data is exported in place");
    return NULL;
  }
  if (dl_device != Py_None) {
    int type = 0, id = 0;
    if (!PyArg_ParseTuple(dl_device, "ii", &type, &id)) return NULL;
    if (type != (int)self->view.device.device_type || id != self->view.device.device_id) {
      PyErr_Format(PyExc_BufferError,
                   "__dlpack__: dl_device=(%d, %d) but the tensor is on (%d, %d)", type, id,
                   (int)self->view.device.device_type, (int)self->view.device.device_id);
      return NULL;
    }
  }
  int versioned = 0;
  if (max_version != Py_None) {
    int major = 0, minor = 0;
    if (!PyArg_ParseTuple(max_version, "ii", &major, &minor)) return NULL;
    versioned = major >= 1;
  }
  if (sync_for_consumer(self, stream) != 0) return NULL;

  if (versioned) {
    DLManagedTensorVersioned *m = new_versioned(self);
    if (m == NULL) return PyErr_NoMemory();
    PyObject *capsule = PyCapsule_New(m, "dltensor_versioned", unconsumed_versioned);
    if (capsule == NULL) versioned_deleter(m);
    return capsule;
  }
  DLManagedTensor *m = new_legacy(self);
  if (m == NULL) return PyErr_NoMemory();
  PyObject *capsule = PyCapsule_New(m, "dltensor", unconsumed_legacy);
  if (capsule == NULL) legacy_deleter(m);
  return capsule;
}

static PyObject *Tensor_dlpack_device(Tensor *self, PyObject *unused) {
  (void)unused;
  return Py_BuildValue("(ii)", (int)self->view.device.device_type,
                       (int)self->view.device.device_id);
}

/* --- import ------------------------------------------------------------------------ */

static Tensor *tensor_alloc(void) {
  return (Tensor *)TensorType.tp_alloc(&TensorType, 0);
}

static int adopt_view(Tensor *t, const DLTensor *view) {
  if (view->ndim < 0 || view->ndim > 8) {
    PyErr_Format(PyExc_BufferError, "from_dlpack: ndim %d: this sample supports 0 to 8",
                 (int)view->ndim);
    return -1;
  }
  t->view = *view;
  memcpy(t->shape, view->shape, sizeof(int64_t) * (size_t)view->ndim);
  t->view.shape = t->shape;
  if (view->strides != NULL) {
    memcpy(t->strides, view->strides, sizeof(int64_t) * (size_t)view->ndim);
    t->view.strides = t->strides;
  }
  return 0;
}

/* Takes ownership of a capsule's tensor: renames the capsule so nobody consumes it twice. */
static PyObject *from_capsule(PyObject *module, PyObject *capsule) {
  (void)module;
  int versioned = PyCapsule_IsValid(capsule, "dltensor_versioned");
  if (!versioned && !PyCapsule_IsValid(capsule, "dltensor")) {
    PyErr_SetString(PyExc_ValueError,
                    "from_dlpack: expected an unconsumed DLPack capsule named \"dltensor\" or "
                    "\"dltensor_versioned\" (a consumed one is named \"used_dltensor...\")");
    return NULL;
  }
  Tensor *t = tensor_alloc();
  if (t == NULL) return NULL;
  if (versioned) {
    DLManagedTensorVersioned *m = PyCapsule_GetPointer(capsule, "dltensor_versioned");
    if (m->version.major != DLPACK_MAJOR_VERSION) {
      Py_DECREF(t);
      PyErr_Format(PyExc_BufferError,
                   "from_dlpack: DLPack major version %u is not supported (expected 1)",
                   (unsigned)m->version.major);
      return NULL;
    }
    if (adopt_view(t, &m->dl_tensor) != 0) {
      Py_DECREF(t);
      return NULL;
    }
    t->versioned = m;
    PyCapsule_SetName(capsule, "used_dltensor_versioned");
  } else {
    DLManagedTensor *m = PyCapsule_GetPointer(capsule, "dltensor");
    if (adopt_view(t, &m->dl_tensor) != 0) {
      Py_DECREF(t);
      return NULL;
    }
    t->legacy = m;
    PyCapsule_SetName(capsule, "used_dltensor");
  }
  return (PyObject *)t;
}

static PyObject *call_dlpack(PyObject *obj, PyObject *stream, int with_max_version) {
  PyObject *method = PyObject_GetAttrString(obj, "__dlpack__");
  if (method == NULL) return NULL;
  PyObject *kwargs = PyDict_New();
  PyObject *result = NULL;
  if (kwargs != NULL && PyDict_SetItemString(kwargs, "stream", stream) == 0) {
    PyObject *version =
        with_max_version ? Py_BuildValue("(ii)", DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION) : NULL;
    if (!with_max_version ||
        (version != NULL && PyDict_SetItemString(kwargs, "max_version", version) == 0)) {
      PyObject *empty = PyTuple_New(0);
      if (empty != NULL) result = PyObject_Call(method, empty, kwargs);
      Py_XDECREF(empty);
    }
    Py_XDECREF(version);
  }
  Py_XDECREF(kwargs);
  Py_DECREF(method);
  return result;
}

/* The consumer side of the protocol: ask the device, pick the stream argument with
   dlsync, call __dlpack__ (retrying without max_version for older producers). */
static PyObject *from_dlpack(PyObject *module, PyObject *obj) {
  PyObject *device = PyObject_CallMethod(obj, "__dlpack_device__", NULL);
  if (device == NULL) return NULL;
  int type = 0, id = 0;
  int parsed = PyArg_ParseTuple(device, "ii", &type, &id);
  Py_DECREF(device);
  if (!parsed) return NULL;
  dl_sync_stream_arg arg;
  /* This consumer works on the default stream of its device (CPU: none). */
  int status =
      dl_sync_stream_to_arg(dl_sync_stream_view((DLDevice){(DLDeviceType)type, id}, NULL), &arg);
  if (status != DL_SYNC_OK) return dl_sync_py_raise(status);
  PyObject *stream = arg.is_none ? Py_NewRef(Py_None) : PyLong_FromLongLong(arg.value);
  if (stream == NULL) return NULL;
  PyObject *capsule = call_dlpack(obj, stream, 1);
  if (capsule == NULL && PyErr_ExceptionMatches(PyExc_TypeError)) {
    PyErr_Clear(); /* a producer older than max_version */
    capsule = call_dlpack(obj, stream, 0);
  }
  Py_DECREF(stream);
  if (capsule == NULL) return NULL;
  PyObject *tensor = from_capsule(module, capsule);
  Py_DECREF(capsule);
  return tensor;
}

/* --- the type ---------------------------------------------------------------------- */

static const struct {
  const char *name;
  DLDataType dtype;
} dtypes[] = {
    {"bool", {kDLBool, 8, 1}},          {"int8", {kDLInt, 8, 1}},
    {"uint8", {kDLUInt, 8, 1}},         {"int32", {kDLInt, 32, 1}},
    {"int64", {kDLInt, 64, 1}},         {"float16", {kDLFloat, 16, 1}},
    {"float32", {kDLFloat, 32, 1}},     {"float64", {kDLFloat, 64, 1}},
    {"complex64", {kDLComplex, 64, 1}},
};

/* Tensor(count, dtype): a zero-filled 1-D CPU tensor of our own. */
static int Tensor_init(Tensor *self, PyObject *args, PyObject *kwargs) {
  static char *keywords[] = {"count", "dtype", NULL};
  Py_ssize_t count = 0;
  const char *dtype = "float32";
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "n|s", keywords, &count, &dtype)) return -1;
  size_t i = 0;
  while (i < sizeof dtypes / sizeof dtypes[0] && strcmp(dtypes[i].name, dtype) != 0) i++;
  if (i == sizeof dtypes / sizeof dtypes[0] || count < 0) {
    PyErr_Format(PyExc_ValueError,
                 "Tensor(%zd, %s): expected a count >= 0 and one of bool, int8, "
                 "uint8, int32, int64, float16, float32, float64, complex64",
                 count, dtype);
    return -1;
  }
  self->owned_memory = PyMem_RawCalloc((size_t)count ? (size_t)count : 1, dtypes[i].dtype.bits / 8);
  if (self->owned_memory == NULL) {
    PyErr_NoMemory();
    return -1;
  }
  self->shape[0] = count;
  self->view = (DLTensor){.data = self->owned_memory,
                          .device = {kDLCPU, 0},
                          .ndim = 1,
                          .dtype = dtypes[i].dtype,
                          .shape = self->shape};
  return 0;
}

static void Tensor_dealloc(Tensor *self) {
  if (self->versioned != NULL && self->versioned->deleter != NULL)
    self->versioned->deleter(self->versioned);
  if (self->legacy != NULL && self->legacy->deleter != NULL) self->legacy->deleter(self->legacy);
  PyMem_RawFree(self->owned_memory);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *tuple_of(const int64_t *values, int n) {
  PyObject *tuple = PyTuple_New(n);
  for (int i = 0; tuple != NULL && i < n; i++)
    PyTuple_SET_ITEM(tuple, i, PyLong_FromLongLong(values[i]));
  return tuple;
}

static PyObject *Tensor_get_shape(Tensor *self, void *closure) {
  (void)closure;
  return tuple_of(self->view.shape, self->view.ndim);
}

static PyObject *Tensor_get_strides(Tensor *self, void *closure) {
  (void)closure;
  if (self->view.strides == NULL) Py_RETURN_NONE;
  return tuple_of(self->view.strides, self->view.ndim);
}

static PyObject *Tensor_get_dtype(Tensor *self, void *closure) {
  (void)closure;
  return Py_BuildValue("(iii)", self->view.dtype.code, self->view.dtype.bits,
                       self->view.dtype.lanes);
}

static PyObject *Tensor_get_data_ptr(Tensor *self, void *closure) {
  (void)closure;
  return PyLong_FromVoidPtr((char *)self->view.data + self->view.byte_offset);
}

static PyGetSetDef Tensor_getset[] = {
    {"shape", (getter)Tensor_get_shape, NULL, "shape", NULL},
    {"strides", (getter)Tensor_get_strides, NULL, "strides in elements, or None", NULL},
    {"dtype", (getter)Tensor_get_dtype, NULL, "(code, bits, lanes)", NULL},
    {"data_ptr", (getter)Tensor_get_data_ptr, NULL, "address of the first element", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef Tensor_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))Tensor_dlpack, METH_VARARGS | METH_KEYWORDS,
     "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)"},
    {"__dlpack_device__", (PyCFunction)Tensor_dlpack_device, METH_NOARGS,
     "(device_type, device_id)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject TensorType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dlsync_py.Tensor",
    .tp_basicsize = sizeof(Tensor),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A tensor whose __dlpack__ uses dlsync for stream handling.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Tensor_init,
    .tp_dealloc = (destructor)Tensor_dealloc,
    .tp_methods = Tensor_methods,
    .tp_getset = Tensor_getset,
};

/* --- the exchange table ------------------------------------------------------------ */

static int current_work_stream(DLDeviceType type, int32_t id, void **out) {
  (void)id;
  *out = NULL; /* CPU tensors only: no stream */
  return type == kDLCPU ? 0 : -1;
}

static int from_py_object_no_sync(void *py_object, DLManagedTensorVersioned **out) {
  if (!PyObject_TypeCheck((PyObject *)py_object, &TensorType)) {
    PyErr_SetString(PyExc_TypeError, "expected a dlsync_py.Tensor");
    return -1;
  }
  *out = new_versioned((Tensor *)py_object);
  if (*out == NULL) PyErr_NoMemory();
  return *out != NULL ? 0 : -1;
}

static DLPackExchangeAPI exchange_api = {
    .header = {.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION}},
    .managed_tensor_from_py_object_no_sync = from_py_object_no_sync,
    .current_work_stream = current_work_stream,
};

static PyObject *exchange_api_stream(PyObject *module, PyObject *obj) {
  (void)module;
  PyObject *capsule = PyObject_GetAttrString((PyObject *)Py_TYPE(obj), "__dlpack_c_exchange_api__");
  if (capsule == NULL) return NULL;
  const DLPackExchangeAPI *api = PyCapsule_GetPointer(capsule, "dlpack_exchange_api");
  Py_DECREF(capsule);
  if (api == NULL) return NULL;
  dl_sync_stream stream;
  int status = dl_sync_stream_from_exchange_api(api, (DLDevice){kDLCPU, 0}, &stream);
  if (status != DL_SYNC_OK) return dl_sync_py_raise(status);
  return PyLong_FromVoidPtr(stream.handle);
}

static PyObject *get_deleter_calls(PyObject *module, PyObject *unused) {
  (void)module;
  (void)unused;
  return PyLong_FromLong(atomic_load(&deleter_calls));
}

static PyMethodDef module_methods[] = {
    {"from_dlpack", from_dlpack, METH_O, "Imports any object with __dlpack__ (zero copy)."},
    {"from_capsule", from_capsule, METH_O, "Consumes a DLPack capsule."},
    {"exchange_api_stream", exchange_api_stream, METH_O,
     "The current work stream read through obj's type's __dlpack_c_exchange_api__."},
    {"deleter_calls", get_deleter_calls, METH_NOARGS, "How many exported tensors were released."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT,
                                        "dlsync_py",
                                        "DLPack exchange with dlsync's stream handling.",
                                        -1,
                                        module_methods,
                                        NULL,
                                        NULL,
                                        NULL,
                                        NULL};

PyMODINIT_FUNC PyInit_dlsync_py(void);
PyMODINIT_FUNC PyInit_dlsync_py(void) {
  if (PyType_Ready(&TensorType) < 0) return NULL;
  PyObject *api = PyCapsule_New(&exchange_api, "dlpack_exchange_api", NULL);
  if (api == NULL ||
      PyDict_SetItemString(TensorType.tp_dict, "__dlpack_c_exchange_api__", api) < 0) {
    Py_XDECREF(api);
    return NULL;
  }
  Py_DECREF(api);
  PyType_Modified(&TensorType);
  PyObject *module = PyModule_Create(&module_def);
  if (module == NULL) return NULL;
  Py_INCREF(&TensorType);
  if (PyModule_AddObject(module, "Tensor", (PyObject *)&TensorType) < 0) {
    Py_DECREF(&TensorType);
    Py_DECREF(module);
    return NULL;
  }
  return module;
}
