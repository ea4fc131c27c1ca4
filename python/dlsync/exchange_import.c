/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlsync.import_tensor: the consumer's side of an exchange for a Python framework. Through
 * the producer's DLPack exchange table when its type has one (dl_sync_exchange_import),
 * through its __dlpack__ otherwise; either way a capsule ready on the consumer's stream.
 */
#include <string.h>

#include "module.h"

PyDoc_STRVAR(
    import_tensor_doc,
    "import_tensor(obj, device, stream)\n"
    "--\n"
    "\n"
    "obj's tensor as a DLPack capsule (\"dltensor_versioned\") ready on the consumer's\n"
    "``stream``: work enqueued on it from now on sees the producer's writes. The host never\n"
    "blocks.\n"
    "\n"
    "With a DLPack exchange table on obj's type (``__dlpack_c_exchange_api__``, a capsule;\n"
    "DLPack 1.2's int ``__c_dlpack_exchange_api__``), the tensor is taken through the table\n"
    "and the producer's current work stream is ordered before ``stream``: nothing on the\n"
    "producer's own stream, nothing for a tensor on a device without streams (the C call\n"
    "dl_sync_exchange_import, in two steps). Otherwise\n"
    "``obj.__dlpack__(stream=..., max_version=(1, 3))``\n"
    "with the argument that names ``stream`` (None for a tensor on a device without\n"
    "streams): the producer orders. A producer older than DLPack 1.0 (one that refuses the\n"
    "keyword max_version) is asked again without it, and its tensor handed back inside a\n"
    "versioned one.\n"
    "\n"
    "device: ``(device_type, device_id)`` of the consumer's stream.\n"
    "stream: the consumer's stream, as ``export`` takes a stream: an int handle or a stream\n"
    "    object; None for the legacy default stream, and on a device without streams.\n"
    "\n"
    "Release the tensor after the work that reads it with ``tensor_release(capsule,\n"
    "stream)``. A table dlsync cannot use, or a producer's function that fails, raises the\n"
    "exception of dl_sync_exchange_import's status (ValueError, BufferError, RuntimeError)\n"
    "with the producer's own exception as its cause (one that is no Exception, such as\n"
    "KeyboardInterrupt, goes on as it is); the tensor is then given back and obj\n"
    "is untouched. The GIL is released only while dlsync calls the runtime (a table's\n"
    "functions need it).\n");

/* What import_tensor's calls use, made once at module initialization (never lazily: a
   garbage collection while they were made could call import_tensor on half of them). */
static PyObject *dlpack_key, *dlpack_device_key, *max_version_key, *names_versioned, *names_stream,
    *max_version;

int dl_sync_py_exchange_import_init(PyObject *module) {
  (void)module;
  if (dlpack_key != NULL) return 0; /* made by an earlier import of the module */
  /* Interned: a callee matches keyword names by identity first. */
  PyObject *keys[4] = {
      PyUnicode_InternFromString("__dlpack__"), PyUnicode_InternFromString("__dlpack_device__"),
      PyUnicode_InternFromString("max_version"), PyUnicode_InternFromString("stream")};
  PyObject *versioned = NULL, *stream_only = NULL, *version = NULL;
  if (keys[0] != NULL && keys[1] != NULL && keys[2] != NULL && keys[3] != NULL) {
    versioned = PyTuple_Pack(2, keys[3], keys[2]);
    stream_only = PyTuple_Pack(1, keys[3]);
    version = Py_BuildValue("(ii)", DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION);
  }
  Py_XDECREF(keys[3]); /* the tuples hold it */
  if (versioned == NULL || stream_only == NULL || version == NULL) {
    for (int i = 0; i < 3; i++) Py_XDECREF(keys[i]);
    Py_XDECREF(versioned);
    Py_XDECREF(stream_only);
    Py_XDECREF(version);
    return -1;
  }
  dlpack_device_key = keys[1];
  max_version_key = keys[2];
  names_versioned = versioned;
  names_stream = stream_only;
  max_version = version;
  dlpack_key = keys[0]; /* last: the sign that all are made */
  return 0;
}

/* The exception of a dlsync status for the Python function func: its message without the
   C function's name the library puts first ("dl_sync_group_init: "). */
PyObject *dl_sync_py_raise_in(const char *func, int status) {
  const char *message = dl_sync_last_error();
  const char *colon = strstr(message, ": ");
  if (strncmp(message, "dl_sync_", 8) == 0 && colon != NULL &&
      strspn(message, "abcdefghijklmnopqrstuvwxyz_0123456789") == (size_t)(colon - message))
    message = colon + 2;
  dl_sync_py_raise(status); /* the exception type of status */
  PyObject *type = PyExc_RuntimeError;
  if (PyErr_ExceptionMatches(PyExc_ValueError))
    type = PyExc_ValueError;
  else if (PyErr_ExceptionMatches(PyExc_BufferError))
    type = PyExc_BufferError;
  else if (PyErr_ExceptionMatches(PyExc_MemoryError))
    type = PyExc_MemoryError;
  PyErr_Clear();
  return PyErr_Format(type, "%s: %s", func, message);
}

/* dl_sync_exchange_import in two steps, so that the GIL is let go only where the runtime
   is called: the producer's functions need it (the tensor is taken and the producer's
   stream found through a group, which orders nothing yet), the ordering does not (the
   group's one dependency). */
static PyObject *import_through_table(const char *func, const DLPackExchangeAPI *api, PyObject *obj,
                                      dl_sync_stream consumer) {
  dl_sync_group group;
  DLManagedTensorVersioned *tensor = NULL;
  int status = dl_sync_group_init(&group, consumer);
  if (status == DL_SYNC_OK) status = dl_sync_group_add_exchange_import(&group, api, obj, &tensor);
  if (status != DL_SYNC_OK) return dl_sync_py_raise_from_producer(func, status);
  if (group.stream_count > 0) { /* a stream other than the consumer's: the runtime is called */
    PyThreadState *thread = PyEval_SaveThread();
    status = dl_sync_group_wait(&group);
    PyEval_RestoreThread(thread);
    if (status != DL_SYNC_OK) {
      tensor->deleter(tensor); /* refused: back to its producer */
      return dl_sync_py_raise_in(func, status);
    }
  }
  return dl_sync_py_tensor_capsule(tensor);
}

/* Whether two devices are of one stream family: the legacy default stream's argument is 1
   on CUDA, 0 (the null stream) on ROCm, None without streams. */
static int same_family(DLDevice a, DLDevice b) {
  dl_sync_stream_arg x, y;
  return dl_sync_stream_to_arg(dl_sync_stream_view(a, DL_SYNC_STREAM_LEGACY), &x) == DL_SYNC_OK &&
         dl_sync_stream_to_arg(dl_sync_stream_view(b, DL_SYNC_STREAM_LEGACY), &y) == DL_SYNC_OK &&
         x.is_none == y.is_none && (x.is_none || x.value == y.value);
}

/* obj.<key>, NULL with no exception when it has none (other errors propagate). */
static int lookup(PyObject *obj, PyObject *key, PyObject **out) {
#if PY_VERSION_HEX >= 0x030D0000
  return PyObject_GetOptionalAttr(obj, key, out) < 0 ? -1 : 0;
#else
  return _PyObject_LookupAttr(obj, key, out) < 0 ? -1 : 0;
#endif
}

/* obj.<method>(), looked up as a method (no bound method made). */
static PyObject *call_method0(PyObject *obj, PyObject *method) {
#if PY_VERSION_HEX >= 0x03090000
  return PyObject_VectorcallMethod(method, &obj, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
#else
  return PyObject_CallMethodObjArgs(obj, method, NULL);
#endif
}

/* obj.__dlpack_device__() failed: where obj has no __dlpack__ either, a TypeError saying
   it is no DLPack producer; otherwise the failure as it is (and a failing lookup's own). */
static PyObject *no_device(const char *func, PyObject *obj) {
  if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return NULL;
  PyObject *type, *value, *traceback, *dlpack = NULL;
  PyErr_Fetch(&type, &value, &traceback);
  if (lookup(obj, dlpack_key, &dlpack) != 0) {
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
    return NULL;
  }
  if (dlpack != NULL) {
    Py_DECREF(dlpack);
    PyErr_Restore(type, value, traceback);
    return NULL;
  }
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
  return PyErr_Format(PyExc_TypeError,
                      "%s: %.100s has neither a DLPack exchange table "
                      "(__dlpack_c_exchange_api__) nor __dlpack__",
                      func, Py_TYPE(obj)->tp_name);
}

/* The stream argument obj's __dlpack__ gets for the consumer's stream (a new reference). */
static PyObject *stream_argument(const char *func, PyObject *obj, dl_sync_stream consumer) {
  PyObject *device_obj = call_method0(obj, dlpack_device_key);
  if (device_obj == NULL) return no_device(func, obj);
  DLDevice device;
  int rc = dl_sync_py_device(func, device_obj, &device);
  Py_DECREF(device_obj);
  if (rc != 0) return NULL;
  dl_sync_stream_arg arg;
  int status = dl_sync_stream_to_arg(dl_sync_stream_view(device, NULL), &arg);
  if (status != DL_SYNC_OK) return dl_sync_py_raise_in(func, status);
  if (arg.is_none) Py_RETURN_NONE; /* a device without streams: nothing to order */
  if (!same_family(device, consumer.device))
    return PyErr_Format(PyExc_ValueError,
                        "%s: obj is on device (%d, %d) and the consumer's stream on (%d, %d): "
                        "expected a consumer stream of obj's device family",
                        func, (int)device.device_type, (int)device.device_id,
                        (int)consumer.device.device_type, (int)consumer.device.device_id);
  status = dl_sync_stream_to_arg(consumer, &arg);
  if (status != DL_SYNC_OK) return dl_sync_py_raise_in(func, status);
  return PyLong_FromLongLong(arg.value);
}

static void give_back_legacy(void *inner) {
  DLManagedTensor *tensor = inner;
  if (tensor->deleter != NULL) tensor->deleter(tensor);
}

/* A legacy capsule "dltensor" as a versioned one: its tensor inside a versioned tensor
   whose deleter gives it back; the legacy capsule is marked consumed. */
static PyObject *versioned_from_legacy(PyObject *legacy) {
  DLManagedTensor *inner = PyCapsule_GetPointer(legacy, "dltensor");
  if (inner == NULL) return NULL;
  DLManagedTensorVersioned *outer =
      dl_sync_py_wrap_tensor(&inner->dl_tensor, 0, inner, give_back_legacy);
  if (outer == NULL) return PyErr_NoMemory();
  if (PyCapsule_SetName(legacy, "used_dltensor") != 0) {
    PyMem_RawFree(outer);
    return NULL;
  }
  return dl_sync_py_tensor_capsule(outer);
}

/* obj.__dlpack__ called with keyword arguments: names (a tuple) and their values. */
static PyObject *call_with_keywords(PyObject *obj, PyObject *const *values, PyObject *names) {
#if PY_VERSION_HEX >= 0x03090000
  PyObject *args[] = {obj, values[0], PyTuple_GET_SIZE(names) > 1 ? values[1] : NULL};
  return PyObject_VectorcallMethod(dlpack_key, args, 1, names);
#else
  PyObject *bound = PyObject_GetAttr(obj, dlpack_key);
  PyObject *kwargs = bound != NULL ? PyDict_New() : NULL;
  for (Py_ssize_t i = 0; kwargs != NULL && i < PyTuple_GET_SIZE(names); i++)
    if (PyDict_SetItem(kwargs, PyTuple_GET_ITEM(names, i), values[i]) != 0) Py_CLEAR(kwargs);
  PyObject *empty = kwargs != NULL ? PyTuple_New(0) : NULL;
  PyObject *result = empty != NULL ? PyObject_Call(bound, empty, kwargs) : NULL;
  Py_XDECREF(empty);
  Py_XDECREF(kwargs);
  Py_XDECREF(bound);
  return result;
#endif
}

/* Whether the exception set is a TypeError refusing the keyword max_version (a producer
   older than DLPack 1.0: "unexpected keyword argument 'max_version'"), and not another
   TypeError the producer raised. */
static int max_version_refused(void) {
  if (!PyErr_ExceptionMatches(PyExc_TypeError)) return 0;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  PyObject *text = value != NULL ? PyObject_Str(value) : NULL;
  PyObject *keyword = text != NULL ? PyUnicode_FromString("keyword") : NULL;
  int refused = keyword != NULL && PyUnicode_Check(text) &&
                PyUnicode_Find(text, max_version_key, 0, PyUnicode_GetLength(text), 1) >= 0 &&
                PyUnicode_Find(text, keyword, 0, PyUnicode_GetLength(text), 1) >= 0;
  Py_XDECREF(keyword);
  Py_XDECREF(text);
  PyErr_Clear(); /* whatever Str or Find raised: the producer's own error is the one */
  PyErr_Restore(type, value, traceback);
  return refused;
}

/* obj.__dlpack__(stream=arg, max_version=(1, 3)); again without max_version only where
   the producer refused that keyword (it predates DLPack 1.0). */
static PyObject *call_dlpack(PyObject *obj, PyObject *arg) {
  PyObject *values[] = {arg, max_version};
  PyObject *capsule = call_with_keywords(obj, values, names_versioned);
  if (capsule != NULL || !max_version_refused()) return capsule;
  PyErr_Clear();
  return call_with_keywords(obj, values, names_stream);
}

static PyObject *import_through_dlpack(const char *func, PyObject *obj, dl_sync_stream consumer) {
  PyObject *arg = stream_argument(func, obj, consumer);
  if (arg == NULL) return NULL;
  PyObject *capsule = call_dlpack(obj, arg);
  Py_DECREF(arg);
  if (capsule == NULL || PyCapsule_IsValid(capsule, "dltensor_versioned")) return capsule;
  PyObject *result = PyCapsule_IsValid(capsule, "dltensor")
                         ? versioned_from_legacy(capsule)
                         : PyErr_Format(PyExc_TypeError,
                                        "%s: %.100s.__dlpack__ returned %R: expected a DLPack "
                                        "capsule not yet consumed",
                                        func, Py_TYPE(obj)->tp_name, capsule);
  Py_DECREF(capsule);
  return result;
}

static const char *const import_names[] = {"obj", "device", "stream"};
static PyObject *import_interned[3];
const dl_sync_py_signature dl_sync_py_import_signature = {"import_tensor", 3, import_names,
                                                          import_interned};

static PyObject *py_import_tensor(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames) {
  (void)module;
  static const char *const func = "dlsync.import_tensor";
  PyObject *scratch[3];
  PyObject *const *arg_objs =
      dl_sync_py_arguments(&dl_sync_py_import_signature, args, nargs, kwnames, scratch);
  if (arg_objs == NULL) return NULL;
  PyObject *obj = arg_objs[0];
  DLDevice device;
  void *handle = NULL;
  if (dl_sync_py_device(func, arg_objs[1], &device) != 0 ||
      dl_sync_py_stream_handle(func, "stream", arg_objs[2], &handle) != 0)
    return NULL;
  /* The consumer's device is checked on every path: the table's (the group checks it) and
     __dlpack__'s (where a producer on a device without streams would not). */
  dl_sync_stream_arg unused;
  int status = dl_sync_stream_to_arg(dl_sync_stream_view(device, DL_SYNC_STREAM_LEGACY), &unused);
  if (status != DL_SYNC_OK) return dl_sync_py_raise_in(func, status);
  dl_sync_stream consumer = dl_sync_stream_view(device, handle);
  const DLPackExchangeAPI *api = NULL;
  if (dl_sync_py_exchange_table(func, obj, &api) != 0) return NULL;
  return api != NULL ? import_through_table(func, api, obj, consumer)
                     : import_through_dlpack(func, obj, consumer);
}

PyMethodDef dl_sync_py_import_methods[] = {
    DL_SYNC_PY_FASTCALL("import_tensor", py_import_tensor, import_tensor_doc),
    {NULL, NULL, 0, NULL},
};
