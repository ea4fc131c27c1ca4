/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A producer's DLPack exchange table as Python finds it (the type attribute
 * __dlpack_c_exchange_api__, DLPack 1.3: a capsule "dlpack_exchange_api"; DLPack 1.2: an
 * int under __c_dlpack_exchange_api__), the capsules that carry tensors, and the
 * primitives dlsync.testing.check_exchange_api calls each entry point through.
 */
#include <stdatomic.h>

#include "module.h"

static const char *const versioned_name = "dltensor_versioned";

/* The attribute names, newest first, interned at module initialization (never changed
   after, so that any thread reads them). */
static const char *const table_names[] = {"__dlpack_c_exchange_api__", "__c_dlpack_exchange_api__"};
enum { TABLE_NAMES = sizeof table_names / sizeof table_names[0] };
static PyObject *table_keys[TABLE_NAMES];

/* The table an attribute's value points to: a capsule "dlpack_exchange_api", or an int
   address (DLPack 1.2's form). */
static int table_from_value(const char *func, PyTypeObject *type, const char *name, PyObject *value,
                            const DLPackExchangeAPI **api) {
  if (PyCapsule_CheckExact(value)) {
    if (!PyCapsule_IsValid(value, "dlpack_exchange_api")) {
      const char *capsule_name = PyCapsule_GetName(value);
      PyErr_Clear(); /* an invalid capsule's name: said as NULL below */
      PyErr_Format(PyExc_TypeError,
                   "%s: %.100s.%s is a capsule named %s%.100s%s: expected a PyCapsule named "
                   "\"dlpack_exchange_api\" holding the table",
                   func, type->tp_name, name, capsule_name != NULL ? "\"" : "",
                   capsule_name != NULL ? capsule_name : "NULL", capsule_name != NULL ? "\"" : "");
      return -1;
    }
    *api = PyCapsule_GetPointer(value, "dlpack_exchange_api");
    return *api != NULL ? 0 : -1;
  }
  if (PyLong_Check(value) && !PyBool_Check(value)) {
    *api = PyLong_AsVoidPtr(value);
    if (*api != NULL) return 0;
    if (PyErr_Occurred()) return -1;
    PyErr_Format(PyExc_ValueError, "%s: %.100s.%s is 0: expected the address of a table", func,
                 type->tp_name, name);
    return -1;
  }
  PyErr_Format(PyExc_TypeError,
               "%s: %.100s.%s is a %.100s: expected a PyCapsule named \"dlpack_exchange_api\" "
               "(DLPack 1.3) or the table's address as an int (DLPack 1.2)",
               func, type->tp_name, name, Py_TYPE(value)->tp_name);
  return -1;
}

int dl_sync_py_exchange_table_init(PyObject *module) {
  (void)module;
  for (size_t i = 0; i < TABLE_NAMES; i++)
    if (table_keys[i] == NULL &&
        (table_keys[i] = PyUnicode_InternFromString(table_names[i])) == NULL)
      return -1;
  return 0;
}

int dl_sync_py_exchange_table(const char *func, PyObject *obj, const DLPackExchangeAPI **api) {
  *api = NULL;
  PyTypeObject *type = Py_TYPE(obj);
  for (size_t i = 0; i < TABLE_NAMES; i++) {
    PyObject *value = dl_sync_py_type_lookup(type, table_keys[i]); /* no exception */
    if (value == NULL) continue;
    int rc = table_from_value(func, type, table_names[i], value, api);
    Py_DECREF(value);
    return rc;
  }
  return 0;
}

/* The exception set now, normalized (on 3.11 and before, one set with PyErr_SetNone has no
   value until normalized), its traceback attached; NULL when none is set. */
static PyObject *take_exception(void) {
#if PY_VERSION_HEX >= 0x030C0000
  return PyErr_GetRaisedException();
#else
  PyObject *type = NULL, *value = NULL, *traceback = NULL;
  PyErr_Fetch(&type, &value, &traceback);
  if (type == NULL) return NULL;
  PyErr_NormalizeException(&type, &value, &traceback);
  if (value != NULL && traceback != NULL) PyException_SetTraceback(value, traceback);
  Py_XDECREF(type);
  Py_XDECREF(traceback);
  return value;
#endif
}

static void restore_exception(PyObject *exception) { /* steals the reference */
#if PY_VERSION_HEX >= 0x030C0000
  PyErr_SetRaisedException(exception);
#else
  PyObject *type = (PyObject *)Py_TYPE(exception);
  Py_INCREF(type);
  PyErr_Restore(type, exception, PyException_GetTraceback(exception));
#endif
}

/* The exception for status, for the Python function func, with the one the producer set
   (if any) as its cause. An exception that is no Exception (KeyboardInterrupt, SystemExit)
   goes on as it is, never turned into one that `except Exception:` would catch. */
PyObject *dl_sync_py_raise_from_producer(const char *func, int status) {
  PyObject *cause = take_exception();
  if (cause != NULL && !PyErr_GivenExceptionMatches(cause, PyExc_Exception)) {
    restore_exception(cause);
    return NULL;
  }
  dl_sync_py_raise_in(func, status);
  PyObject *ours = take_exception();
  if (ours == NULL) { /* no memory for ours: the producer's is the answer */
    if (cause != NULL) restore_exception(cause);
    return NULL;
  }
  if (cause == NULL) {
    /* The producer's function failed and set nothing: say so, rather than point to a
       cause that is not there. */
    if (status == DL_SYNC_EBACKEND) {
      PyObject *type = (PyObject *)Py_TYPE(ours);
      PyErr_Format(type, "%S (the producer set no Python exception)", ours);
      Py_DECREF(ours);
      return NULL;
    }
    restore_exception(ours);
    return NULL;
  }
  Py_INCREF(cause);
  PyException_SetContext(ours, cause);
  PyException_SetCause(ours, cause); /* both steal a reference */
  restore_exception(ours);
  return NULL;
}

/* Runs the tensor's deleter when its capsule goes unconsumed (the DLPack rule): a consumer
   that took it renamed the capsule. */
static void capsule_gone(PyObject *capsule) {
  if (!PyCapsule_IsValid(capsule, versioned_name)) return;
  DLManagedTensorVersioned *tensor = PyCapsule_GetPointer(capsule, versioned_name);
  if (tensor != NULL && tensor->deleter != NULL) tensor->deleter(tensor);
}

PyObject *dl_sync_py_tensor_capsule(DLManagedTensorVersioned *tensor) {
  PyObject *capsule = PyCapsule_New(tensor, versioned_name, capsule_gone);
  if (capsule == NULL && tensor->deleter != NULL) tensor->deleter(tensor);
  return capsule;
}

/* A versioned tensor that owns another object (a legacy tensor, another versioned one)
   and gives it back through give_back when its own deleter runs. */
typedef struct wrapped_tensor {
  DLManagedTensorVersioned tensor;
  void *inner;
  void (*give_back)(void *inner);
} wrapped_tensor;

static void wrapped_deleter(DLManagedTensorVersioned *tensor) {
  wrapped_tensor *w = (wrapped_tensor *)tensor;
  w->give_back(w->inner);
  PyMem_RawFree(w);
}

DLManagedTensorVersioned *dl_sync_py_wrap_tensor(const DLTensor *view, uint64_t flags, void *inner,
                                                 void (*give_back)(void *inner)) {
  wrapped_tensor *w = PyMem_RawMalloc(sizeof *w);
  if (w == NULL) return NULL;
  w->tensor = (DLManagedTensorVersioned){.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION},
                                         .deleter = wrapped_deleter,
                                         .flags = flags,
                                         .dl_tensor = *view};
  w->inner = inner;
  w->give_back = give_back;
  return &w->tensor;
}

/* --- what dlsync.testing.check_exchange_api calls ------------------------------------ */

/* The table of obj's type, or a TypeError saying it has none. */
static const DLPackExchangeAPI *table_of(const char *func, PyObject *obj) {
  const DLPackExchangeAPI *api = NULL;
  if (dl_sync_py_exchange_table(func, obj, &api) != 0) return NULL;
  if (api == NULL)
    PyErr_Format(PyExc_TypeError, "%s: %.100s has no __dlpack_c_exchange_api__", func,
                 Py_TYPE(obj)->tp_name);
  return api;
}

/* The newest table of major 1 in the chain, or a BufferError saying why dlsync cannot
   use it (the message of dl_sync_stream_from_exchange_api's checks). */
static const DLPackExchangeAPI *usable_table(const char *func, PyObject *obj) {
  const DLPackExchangeAPI *api = table_of(func, obj);
  if (api == NULL) return NULL;
  const DLPackExchangeAPIHeader *header = &api->header;
  for (int depth = 0; header != NULL && depth < DL_SYNC_EXCHANGE_MAX_CHAIN;
       depth++, header = header->prev_api)
    if (header->version.major == 1 && header->version.minor >= 2)
      return (const DLPackExchangeAPI *)header;
  PyErr_Format(PyExc_BufferError,
               "%s: %.100s's exchange table chain has no table of version 1.2 "
               "or later within %d tables",
               func, Py_TYPE(obj)->tp_name, DL_SYNC_EXCHANGE_MAX_CHAIN);
  return NULL;
}

/* A producer's function returned rc: the producer's exception when it set one, else a
   RuntimeError naming the function. */
static PyObject *producer_failed(const char *func, const char *entry, int rc) {
  if (!PyErr_Occurred())
    PyErr_Format(PyExc_RuntimeError, "%s: the producer's %s returned %d and set no exception", func,
                 entry, rc);
  return NULL;
}

/* _exchange_table_chain(obj): (attribute found, [(major, minor, entries) ...]) for the chain
   of obj's type's table, newest first; entries is a tuple of the five entry points' presence
   (allocator, from_py_object, to_py_object, dltensor_from_py_object, current_work_stream),
   None for a table of another major (whose layout is not DLPack 1's). At most
   DL_SYNC_EXCHANGE_MAX_CHAIN + 1 tables: a longer chain is cyclic or corrupt. */
static PyObject *py_exchange_table_chain(PyObject *module, PyObject *obj) {
  (void)module;
  const DLPackExchangeAPI *api = table_of("dlsync.testing.check_exchange_api", obj);
  if (api == NULL) return NULL;
  PyObject *chain = PyList_New(0);
  const DLPackExchangeAPIHeader *header = &api->header;
  for (int depth = 0; chain != NULL && header != NULL && depth <= DL_SYNC_EXCHANGE_MAX_CHAIN;
       depth++, header = header->prev_api) {
    const DLPackExchangeAPI *t = (const DLPackExchangeAPI *)header;
    PyObject *entries = Py_None;
    Py_INCREF(entries);
    if (header->version.major == 1) {
      Py_DECREF(entries);
      entries = Py_BuildValue("(NNNNN)", PyBool_FromLong(t->managed_tensor_allocator != NULL),
                              PyBool_FromLong(t->managed_tensor_from_py_object_no_sync != NULL),
                              PyBool_FromLong(t->managed_tensor_to_py_object_no_sync != NULL),
                              PyBool_FromLong(t->dltensor_from_py_object_no_sync != NULL),
                              PyBool_FromLong(t->current_work_stream != NULL));
    }
    PyObject *item = entries == NULL ? NULL
                                     : Py_BuildValue("(IIN)", (unsigned)header->version.major,
                                                     (unsigned)header->version.minor, entries);
    if (item == NULL || PyList_Append(chain, item) != 0) Py_CLEAR(chain);
    Py_XDECREF(item);
  }
  return chain;
}

static PyObject *tuple_of(const int64_t *values, int32_t n) {
  if (values == NULL) Py_RETURN_NONE;
  PyObject *tuple = PyTuple_New(n < 0 ? 0 : n);
  for (int32_t i = 0; tuple != NULL && i < n; i++) {
    PyObject *value = PyLong_FromLongLong(values[i]);
    if (value == NULL)
      Py_CLEAR(tuple);
    else
      PyTuple_SET_ITEM(tuple, i, value);
  }
  return tuple;
}

/* A DLTensor's fields as a dict (shape and strides read only for ndim in 0..64). */
static PyObject *fields_of(const DLTensor *t) {
  int32_t ndim = t->ndim >= 0 && t->ndim <= 64 ? t->ndim : 0;
  return Py_BuildValue("{s:N,s:K,s:(ii),s:i,s:N,s:N,s:(iii)}", "data", PyLong_FromVoidPtr(t->data),
                       "byte_offset", (unsigned long long)t->byte_offset, "device",
                       (int)t->device.device_type, (int)t->device.device_id, "ndim", (int)t->ndim,
                       "shape", tuple_of(t->shape, ndim), "strides", tuple_of(t->strides, ndim),
                       "dtype", (int)t->dtype.code, (int)t->dtype.bits, (int)t->dtype.lanes);
}

static DLManagedTensorVersioned *capsule_tensor(const char *func, PyObject *capsule) {
  if (!PyCapsule_IsValid(capsule, versioned_name)) {
    PyErr_Format(PyExc_TypeError, "%s: expected a capsule \"%s\" not yet consumed, got %R", func,
                 versioned_name, capsule);
    return NULL;
  }
  return PyCapsule_GetPointer(capsule, versioned_name);
}

/* _exchange_describe(capsule): the capsule's tensor's fields, its version, flags and
   whether it has a deleter. */
static PyObject *py_exchange_describe(PyObject *module, PyObject *capsule) {
  (void)module;
  DLManagedTensorVersioned *t = capsule_tensor("dlsync.testing", capsule);
  if (t == NULL) return NULL;
  PyObject *fields = fields_of(&t->dl_tensor);
  if (fields == NULL) return NULL;
  PyObject *extra = Py_BuildValue("{s:(II),s:K,s:O}", "version", (unsigned)t->version.major,
                                  (unsigned)t->version.minor, "flags", (unsigned long long)t->flags,
                                  "has_deleter", t->deleter != NULL ? Py_True : Py_False);
  if (extra == NULL || PyDict_Update(fields, extra) != 0) Py_CLEAR(fields);
  Py_XDECREF(extra);
  return fields;
}

/* _exchange_bare_import(obj): the table's managed_tensor_from_py_object_no_sync alone, as a
   capsule: the _NoSync tensor a consumer gets without dlsync (the checker's control). */
static PyObject *py_exchange_bare_import(PyObject *module, PyObject *obj) {
  (void)module;
  static const char *const func = "dlsync.testing.check_exchange_api";
  const DLPackExchangeAPI *api = usable_table(func, obj);
  if (api == NULL) return NULL;
  if (api->managed_tensor_from_py_object_no_sync == NULL)
    return PyErr_Format(PyExc_BufferError,
                        "%s: the table has no managed_tensor_from_py_object_no_sync", func);
  DLManagedTensorVersioned *tensor = NULL;
  int rc = api->managed_tensor_from_py_object_no_sync(obj, &tensor);
  if (rc != 0) return producer_failed(func, "managed_tensor_from_py_object_no_sync", rc);
  if (tensor == NULL)
    return PyErr_Format(PyExc_RuntimeError,
                        "%s: managed_tensor_from_py_object_no_sync returned "
                        "no tensor",
                        func);
  return dl_sync_py_tensor_capsule(tensor);
}

/* _exchange_dltensor(obj): the fields dltensor_from_py_object_no_sync fills, or None when
   the table has no such function. */
static PyObject *py_exchange_dltensor(PyObject *module, PyObject *obj) {
  (void)module;
  static const char *const func = "dlsync.testing.check_exchange_api";
  const DLPackExchangeAPI *api = usable_table(func, obj);
  if (api == NULL) return NULL;
  if (api->dltensor_from_py_object_no_sync == NULL) Py_RETURN_NONE;
  DLTensor view = {0};
  int rc = api->dltensor_from_py_object_no_sync(obj, &view);
  if (rc != 0) return producer_failed(func, "dltensor_from_py_object_no_sync", rc);
  return fields_of(&view);
}

/* The allocator's SetError, which it calls before it fails. */
typedef struct allocator_error {
  int called;
  char kind[64];
  char message[256];
} allocator_error;

static void set_allocator_error(void *context, const char *kind, const char *message) {
  allocator_error *error = context;
  error->called++;
  PyOS_snprintf(error->kind, sizeof error->kind, "%s", kind != NULL ? kind : "(NULL)");
  PyOS_snprintf(error->message, sizeof error->message, "%s", message != NULL ? message : "(NULL)");
}

/* _exchange_allocate(obj, device, shape, dtype): the table's managed_tensor_allocator for a
   contiguous prototype, as a capsule; on failure a RuntimeError "kind: message" from what
   it passed to SetError (or saying it passed nothing). */
static PyObject *py_exchange_allocate(PyObject *module, PyObject *args) {
  (void)module;
  static const char *const func = "dlsync.testing.check_exchange_api";
  PyObject *obj, *device_obj, *shape_obj;
  DLDataType dtype;
  unsigned char code, bits;
  unsigned short lanes;
  if (!PyArg_ParseTuple(args, "OOO(bbH):_exchange_allocate", &obj, &device_obj, &shape_obj, &code,
                        &bits, &lanes))
    return NULL;
  dtype = (DLDataType){code, bits, lanes};
  DLDevice device;
  if (dl_sync_py_device(func, device_obj, &device) != 0) return NULL;
  const DLPackExchangeAPI *api = usable_table(func, obj);
  if (api == NULL) return NULL;
  if (api->managed_tensor_allocator == NULL)
    return PyErr_Format(PyExc_BufferError, "%s: the table has no managed_tensor_allocator", func);
  int64_t shape[8];
  Py_ssize_t ndim = PySequence_Size(shape_obj);
  if (ndim < 0 || ndim > 8)
    return PyErr_Format(PyExc_ValueError, "%s: shape: expected up to 8 sizes", func);
  for (Py_ssize_t i = 0; i < ndim; i++) {
    PyObject *item = PySequence_GetItem(shape_obj, i);
    shape[i] = item != NULL ? PyLong_AsLongLong(item) : -1;
    Py_XDECREF(item);
    if (PyErr_Occurred()) return NULL;
  }
  DLTensor prototype = {.device = device, .ndim = (int32_t)ndim, .dtype = dtype, .shape = shape};
  DLManagedTensorVersioned *tensor = NULL;
  allocator_error error = {0};
  int rc = api->managed_tensor_allocator(&prototype, &tensor, &error, set_allocator_error);
  if (rc != 0 || tensor == NULL) {
    PyErr_Clear(); /* what SetError says is the answer */
    if (error.called) return PyErr_Format(PyExc_RuntimeError, "%s: %s", error.kind, error.message);
    return PyErr_Format(PyExc_RuntimeError,
                        "%s: managed_tensor_allocator returned %d%s and "
                        "called SetError %d times",
                        func, rc, tensor == NULL ? " (no tensor)" : "", error.called);
  }
  return dl_sync_py_tensor_capsule(tensor);
}

static atomic_long counted_deletions;

static void give_back_versioned(void *inner) {
  atomic_fetch_add(&counted_deletions, 1);
  DLManagedTensorVersioned *tensor = inner;
  if (tensor->deleter != NULL) tensor->deleter(tensor);
}

/* The capsule's tensor inside a wrapper whose deleter _exchange_deletions() counts; the
   capsule is marked consumed. NULL with an exception (the capsule then as it was). */
static DLManagedTensorVersioned *take_counted(const char *func, PyObject *capsule) {
  DLManagedTensorVersioned *inner = capsule_tensor(func, capsule);
  if (inner == NULL) return NULL;
  DLManagedTensorVersioned *counted =
      dl_sync_py_wrap_tensor(&inner->dl_tensor, inner->flags, inner, give_back_versioned);
  if (counted == NULL) {
    PyErr_NoMemory();
    return NULL;
  }
  if (PyCapsule_SetName(capsule, "used_dltensor_versioned") != 0) {
    PyMem_RawFree(counted);
    return NULL;
  }
  return counted;
}

/* _exchange_to_object(obj, capsule): the producer's object of the capsule's tensor, through
   obj's table's managed_tensor_to_py_object_no_sync; the tensor is handed over counted
   (take_counted), so that _exchange_deletions() tells how often the producer ran its
   deleter. The capsule is consumed. */
static PyObject *py_exchange_to_object(PyObject *module, PyObject *args) {
  (void)module;
  static const char *const func = "dlsync.testing.check_exchange_api";
  PyObject *obj, *capsule;
  if (!PyArg_ParseTuple(args, "OO:_exchange_to_object", &obj, &capsule)) return NULL;
  const DLPackExchangeAPI *api = usable_table(func, obj);
  if (api == NULL) return NULL;
  if (api->managed_tensor_to_py_object_no_sync == NULL)
    return PyErr_Format(PyExc_BufferError,
                        "%s: the table has no managed_tensor_to_py_object_no_sync", func);
  DLManagedTensorVersioned *counted = take_counted(func, capsule);
  if (counted == NULL) return NULL;
  void *out = NULL;
  int rc = api->managed_tensor_to_py_object_no_sync(counted, &out);
  if (rc != 0 || out == NULL) {
    /* The producer did not take it: the tensor is still the capsule's. */
    PyMem_RawFree(counted);
    PyCapsule_SetName(capsule, versioned_name);
    if (rc == 0)
      return PyErr_Format(PyExc_RuntimeError,
                          "%s: managed_tensor_to_py_object_no_sync returned 0 and no object", func);
    return producer_failed(func, "managed_tensor_to_py_object_no_sync", rc);
  }
  return out; /* a new reference */
}

/* _exchange_counted(capsule): the capsule's tensor in a new capsule, counted (take_counted):
   a test sees how often a release ran a producer's deleter. */
static PyObject *py_exchange_counted(PyObject *module, PyObject *capsule) {
  (void)module;
  DLManagedTensorVersioned *counted = take_counted("dlsync.testing", capsule);
  return counted != NULL ? dl_sync_py_tensor_capsule(counted) : NULL;
}

static PyObject *py_exchange_deletions(PyObject *module, PyObject *unused) {
  (void)module;
  (void)unused;
  return PyLong_FromLong(atomic_load(&counted_deletions));
}

/* _exchange_current_work_stream(obj, device): what obj's table's current_work_stream answers
   for device, as dlsync reads it (dl_sync_stream_from_exchange_api: an int, the legacy
   stream's 1 for CUDA's NULL), None for NULL elsewhere. */
static PyObject *py_exchange_current_work_stream(PyObject *module, PyObject *args) {
  (void)module;
  static const char *const func = "dlsync.testing.check_exchange_api";
  PyObject *obj, *device_obj;
  if (!PyArg_ParseTuple(args, "OO:_exchange_current_work_stream", &obj, &device_obj)) return NULL;
  DLDevice device;
  if (dl_sync_py_device(func, device_obj, &device) != 0) return NULL;
  const DLPackExchangeAPI *api = table_of(func, obj);
  if (api == NULL) return NULL;
  dl_sync_stream stream;
  int status = dl_sync_stream_from_exchange_api(api, device, &stream);
  if (status != DL_SYNC_OK) return dl_sync_py_raise_from_producer(func, status);
  if (stream.handle == NULL) Py_RETURN_NONE;
  return PyLong_FromVoidPtr(stream.handle);
}

/* A legacy tensor "dltensor" that owns a versioned one: what a consumer that asks without
   max_version (before DLPack 1.0) must be handed. */
typedef struct legacy_tensor {
  DLManagedTensor tensor;
  DLManagedTensorVersioned *inner;
} legacy_tensor;

static void legacy_deleter(DLManagedTensor *tensor) {
  legacy_tensor *legacy = (legacy_tensor *)tensor;
  if (legacy->inner->deleter != NULL) legacy->inner->deleter(legacy->inner);
  PyMem_RawFree(legacy);
}

static void legacy_capsule_gone(PyObject *capsule) {
  if (!PyCapsule_IsValid(capsule, "dltensor")) return;
  DLManagedTensor *tensor = PyCapsule_GetPointer(capsule, "dltensor");
  if (tensor != NULL && tensor->deleter != NULL) tensor->deleter(tensor);
}

/* _exchange_legacy(capsule): the versioned capsule's tensor as a legacy capsule "dltensor"
   (its flags, which DLPack before 1.0 cannot say, are dropped); the capsule is marked
   consumed. */
static PyObject *py_exchange_legacy(PyObject *module, PyObject *capsule) {
  (void)module;
  DLManagedTensorVersioned *inner = capsule_tensor("dlsync.audit", capsule);
  if (inner == NULL) return NULL;
  legacy_tensor *legacy = PyMem_RawMalloc(sizeof *legacy);
  if (legacy == NULL) return PyErr_NoMemory();
  legacy->tensor = (DLManagedTensor){.dl_tensor = inner->dl_tensor, .deleter = legacy_deleter};
  legacy->inner = inner;
  if (PyCapsule_SetName(capsule, "used_dltensor_versioned") != 0) {
    PyMem_RawFree(legacy);
    return NULL;
  }
  PyObject *result = PyCapsule_New(&legacy->tensor, "dltensor", legacy_capsule_gone);
  if (result == NULL) legacy_deleter(&legacy->tensor); /* given back to its producer */
  return result;
}

PyMethodDef dl_sync_py_exchange_table_methods[] = {
    {"_exchange_current_work_stream", py_exchange_current_work_stream, METH_VARARGS,
     "_exchange_current_work_stream($module, obj, device, /)\n--\n\n"},
    {"_exchange_table_chain", py_exchange_table_chain, METH_O,
     "_exchange_table_chain($module, obj, /)\n--\n\n"},
    {"_exchange_describe", py_exchange_describe, METH_O,
     "_exchange_describe($module, capsule, /)\n--\n\n"},
    {"_exchange_bare_import", py_exchange_bare_import, METH_O,
     "_exchange_bare_import($module, obj, /)\n--\n\n"},
    {"_exchange_dltensor", py_exchange_dltensor, METH_O,
     "_exchange_dltensor($module, obj, /)\n--\n\n"},
    {"_exchange_allocate", py_exchange_allocate, METH_VARARGS,
     "_exchange_allocate($module, obj, device, shape, dtype, /)\n--\n\n"},
    {"_exchange_to_object", py_exchange_to_object, METH_VARARGS,
     "_exchange_to_object($module, obj, capsule, /)\n--\n\n"},
    {"_exchange_counted", py_exchange_counted, METH_O,
     "_exchange_counted($module, capsule, /)\n--\n\n"},
    {"_exchange_legacy", py_exchange_legacy, METH_O,
     "_exchange_legacy($module, capsule, /)\n--\n\n"},
    {"_exchange_deletions", py_exchange_deletions, METH_NOARGS,
     "_exchange_deletions($module, /)\n--\n\n"},
    {NULL, NULL, 0, NULL},
};
