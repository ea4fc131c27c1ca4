/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlsync.testing.ExchangeArray: a model framework's array whose type exposes a DLPack
 * exchange table (DLPack 1.3) and a __dlpack__ that orders with dlsync, for testing (and
 * timing) a consumer in CPU-only CI. Its memory is a buffer the caller gives; the
 * framework's current work stream is one for the process (ExchangeArray.use_stream).
 */
#include "module.h" /* Python.h first */

#include <stdatomic.h>

typedef struct exchange_array {
  PyObject_HEAD Py_buffer view; /* the memory (view.obj NULL for an adopted tensor's) */
  DLDevice device;
  int64_t shape[1];
  DLManagedTensorVersioned *adopted; /* what managed_tensor_to_py_object_no_sync handed over */
} exchange_array;

static PyTypeObject exchange_array_type;
/* The framework's current work stream: an atomic, since the table's current_work_stream may
   be asked without the GIL. */
static _Atomic(void *) current_stream;

/* A tensor of an array: holds a reference to it, which its deleter gives back (taking the
   GIL: deleters run on any thread). */
typedef struct array_tensor {
  union {
    DLManagedTensorVersioned versioned;
    DLManagedTensor legacy;
  } tensor;
  PyObject *array;
} array_tensor;

static void let_go(array_tensor *t) {
  PyGILState_STATE gil = PyGILState_Ensure();
  Py_DECREF(t->array);
  PyGILState_Release(gil);
  PyMem_RawFree(t);
}

static void versioned_deleter(DLManagedTensorVersioned *t) {
  let_go((array_tensor *)t);
}

static void legacy_deleter(DLManagedTensor *t) {
  let_go((array_tensor *)t);
}

static DLTensor describe(exchange_array *a) {
  return (DLTensor){.data = a->view.buf,
                    .device = a->device,
                    .ndim = 1,
                    .dtype = {kDLUInt, 8, 1},
                    .shape = a->shape};
}

/* A tensor of array (versioned or legacy), or NULL with MemoryError. */
static array_tensor *new_tensor(exchange_array *a, int legacy) {
  array_tensor *t = PyMem_RawCalloc(1, sizeof *t);
  if (t == NULL) {
    PyErr_NoMemory();
    return NULL;
  }
  if (legacy) {
    t->tensor.legacy = (DLManagedTensor){.dl_tensor = describe(a), .deleter = legacy_deleter};
  } else {
    t->tensor.versioned =
        (DLManagedTensorVersioned){.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION},
                                   .deleter = versioned_deleter,
                                   .dl_tensor = describe(a)};
  }
  t->array = (PyObject *)a;
  Py_INCREF(t->array);
  return t;
}

/* --- the table --------------------------------------------------------------------------- */

static int from_py_object(void *object, DLManagedTensorVersioned **out) {
  if (!PyObject_TypeCheck((PyObject *)object, &exchange_array_type)) {
    PyErr_Format(PyExc_TypeError, "ExchangeArray's table: %R is no ExchangeArray", object);
    return -1;
  }
  array_tensor *t = new_tensor(object, 0);
  if (t == NULL) return -1;
  *out = &t->tensor.versioned;
  return 0;
}

static int dltensor_from_py_object(void *object, DLTensor *out) {
  if (!PyObject_TypeCheck((PyObject *)object, &exchange_array_type)) {
    PyErr_Format(PyExc_TypeError, "ExchangeArray's table: %R is no ExchangeArray", object);
    return -1;
  }
  *out = describe(object);
  return 0;
}

static int current_work_stream(DLDeviceType type, int32_t id, void **out) {
  (void)type;
  (void)id;
  *out = atomic_load(&current_stream);
  return 0;
}

/* An array adopting a one-dimensional tensor of bytes. */
static int to_py_object(DLManagedTensorVersioned *tensor, void **out) {
  const DLTensor *t = &tensor->dl_tensor;
  if (t->ndim != 1 || t->dtype.bits * t->dtype.lanes != 8) {
    PyErr_SetString(PyExc_TypeError,
                    "ExchangeArray's table: adopts one-dimensional tensors of bytes only");
    return -1;
  }
  exchange_array *a = PyObject_New(exchange_array, &exchange_array_type);
  if (a == NULL) return -1;
  a->view = (Py_buffer){.buf = (char *)t->data + t->byte_offset, .len = (Py_ssize_t)t->shape[0]};
  a->device = t->device;
  a->shape[0] = t->shape[0];
  a->adopted = tensor;
  *out = a;
  return 0;
}

static void free_block(DLManagedTensorVersioned *t) {
  PyMem_RawFree(t);
}

/* One block holds the tensor, its shape and its bytes (contiguous). */
static int allocate(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                    DLPackSetError set_error) {
  enum { MAX_DIMS = 8 };
  if (prototype->ndim < 0 || prototype->ndim > MAX_DIMS || prototype->dtype.lanes == 0) {
    set_error(error_ctx, "ValueError", "ExchangeArray's table: up to 8 dimensions");
    return -1;
  }
  size_t count = ((size_t)prototype->dtype.bits * prototype->dtype.lanes + 7) / 8;
  for (int32_t i = 0; i < prototype->ndim; i++) count *= (size_t)prototype->shape[i];
  size_t head = sizeof(DLManagedTensorVersioned) + MAX_DIMS * sizeof(int64_t);
  DLManagedTensorVersioned *t = PyMem_RawCalloc(1, head + count);
  if (t == NULL) {
    set_error(error_ctx, "MemoryError", "ExchangeArray's table: out of memory");
    return -1;
  }
  int64_t *shape = (int64_t *)(t + 1);
  for (int32_t i = 0; i < prototype->ndim; i++) shape[i] = prototype->shape[i];
  *t = (DLManagedTensorVersioned){.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION},
                                  .deleter = free_block,
                                  .dl_tensor = *prototype};
  t->dl_tensor.data = (char *)t + head;
  t->dl_tensor.shape = shape;
  t->dl_tensor.strides = NULL;
  t->dl_tensor.byte_offset = 0;
  *out = t;
  return 0;
}

static const DLPackExchangeAPI exchange_api = {
    .header = {.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION}},
    .managed_tensor_allocator = allocate,
    .managed_tensor_from_py_object_no_sync = from_py_object,
    .managed_tensor_to_py_object_no_sync = to_py_object,
    .dltensor_from_py_object_no_sync = dltensor_from_py_object,
    .current_work_stream = current_work_stream,
};

/* --- the type ---------------------------------------------------------------------------- */

static int array_init(exchange_array *self, PyObject *args, PyObject *kwargs) {
  static char *names[] = {"buffer", "device", NULL};
  PyObject *buffer, *device_obj = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:ExchangeArray", names, &buffer, &device_obj))
    return -1;
  DLDevice device = {kDLCUDA, 0};
  if (device_obj != NULL &&
      dl_sync_py_device("dlsync.testing.ExchangeArray", device_obj, &device) != 0)
    return -1;
  if (self->view.obj != NULL || self->adopted != NULL) {
    PyErr_SetString(PyExc_RuntimeError, "dlsync.testing.ExchangeArray: initialized already");
    return -1;
  }
  if (PyObject_GetBuffer(buffer, &self->view, PyBUF_WRITABLE) != 0) return -1;
  self->device = device;
  self->shape[0] = self->view.len;
  return 0;
}

static void array_dealloc(exchange_array *self) {
  if (self->adopted != NULL) self->adopted->deleter(self->adopted);
  if (self->view.obj != NULL) PyBuffer_Release(&self->view);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *array_dlpack_device(exchange_array *self, PyObject *unused) {
  (void)unused;
  return Py_BuildValue("(ii)", (int)self->device.device_type, (int)self->device.device_id);
}

static void unconsumed_versioned(PyObject *capsule) {
  if (!PyCapsule_IsValid(capsule, "dltensor_versioned")) return;
  DLManagedTensorVersioned *t = PyCapsule_GetPointer(capsule, "dltensor_versioned");
  t->deleter(t);
}

static void unconsumed_legacy(PyObject *capsule) {
  if (!PyCapsule_IsValid(capsule, "dltensor")) return;
  DLManagedTensor *t = PyCapsule_GetPointer(capsule, "dltensor");
  t->deleter(t);
}

/* __dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None): the current
   work stream ordered before the consumer's (dl_sync_export), then a capsule: versioned
   when max_version is 1.x or later, else legacy. */
static PyObject *array_dlpack(exchange_array *self, PyObject *args, PyObject *kwargs) {
  static char *names[] = {"stream", "max_version", "dl_device", "copy", NULL};
  PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OOOO:__dlpack__", names, &stream, &max_version,
                                   &dl_device, &copy))
    return NULL;
  static const char *const func = "dlsync.testing.ExchangeArray.__dlpack__";
  dl_sync_stream_arg arg;
  if (dl_sync_py_stream_arg(func, stream, &arg) != 0) return NULL;
  if (dl_sync_py_export(dl_sync_stream_view(self->device, atomic_load(&current_stream)), arg) != 0)
    return NULL;
  long major = 0;
  if (max_version != Py_None) {
    PyObject *first = PySequence_GetItem(max_version, 0);
    major = first != NULL ? PyLong_AsLong(first) : -1;
    Py_XDECREF(first);
    if (major == -1 && PyErr_Occurred()) return NULL;
  }
  array_tensor *t = new_tensor(self, major < 1);
  if (t == NULL) return NULL;
  if (major < 1) return PyCapsule_New(&t->tensor.legacy, "dltensor", unconsumed_legacy);
  return PyCapsule_New(&t->tensor.versioned, "dltensor_versioned", unconsumed_versioned);
}

/* use_stream(stream): the framework's current work stream from now on (a handle or a stream
   object; None: the legacy default stream). */
static PyObject *array_use_stream(PyObject *type, PyObject *stream) {
  (void)type;
  void *handle = NULL;
  if (dl_sync_py_stream_handle("dlsync.testing.ExchangeArray.use_stream", "stream", stream,
                               &handle) != 0)
    return NULL;
  atomic_store(&current_stream, handle);
  Py_RETURN_NONE;
}

/* current_stream(): the framework's current work stream (an int; None: the legacy one). */
static PyObject *array_current_stream(PyObject *type, PyObject *unused) {
  (void)type;
  (void)unused;
  void *stream = atomic_load(&current_stream);
  if (stream == NULL) Py_RETURN_NONE;
  return PyLong_FromVoidPtr(stream);
}

static int array_getbuffer(exchange_array *self, Py_buffer *view, int flags) {
  return PyBuffer_FillInfo(view, (PyObject *)self, self->view.buf, self->view.len, 0, flags);
}

static PyBufferProcs array_buffer = {(getbufferproc)array_getbuffer, NULL};

static PyMethodDef array_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))array_dlpack, METH_VARARGS | METH_KEYWORDS,
     "__dlpack__($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\n"
     "The tensor as a DLPack capsule, ordered before ``stream``."},
    {"__dlpack_device__", (PyCFunction)array_dlpack_device, METH_NOARGS,
     "__dlpack_device__($self, /)\n--\n\n(device_type, device_id)"},
    {"use_stream", array_use_stream, METH_O | METH_CLASS,
     "use_stream($type, stream, /)\n--\n\nThe framework's current work stream from now on."},
    {"current_stream", array_current_stream, METH_NOARGS | METH_CLASS,
     "current_stream($type, /)\n--\n\nThe framework's current work stream (None: the legacy "
     "default stream)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject exchange_array_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "dlsync.testing.ExchangeArray",
    .tp_basicsize = sizeof(exchange_array),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc =
        "ExchangeArray(buffer, device=(2, 0))\n--\n\n"
        "A model framework's array over a writable\n"
        "buffer, whose type has a DLPack exchange table and whose __dlpack__ orders with\n"
        "dlsync; its framework works on one current stream (ExchangeArray.use_stream).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)array_init,
    .tp_dealloc = (destructor)array_dealloc,
    .tp_methods = array_methods,
    .tp_as_buffer = &array_buffer,
};

PyObject *dl_sync_py_exchange_array_type(void) {
  if (PyType_Ready(&exchange_array_type) < 0) return NULL;
  PyObject *api = PyCapsule_New((void *)&exchange_api, "dlpack_exchange_api", NULL);
  if (api == NULL) return NULL;
  int failed = PyDict_SetItemString(exchange_array_type.tp_dict, "__dlpack_c_exchange_api__", api);
  Py_DECREF(api);
  if (failed) return NULL;
  PyType_Modified(&exchange_array_type);
  Py_INCREF(&exchange_array_type);
  return (PyObject *)&exchange_array_type;
}
