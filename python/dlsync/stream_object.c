/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stream objects -> native handles, in the conventions Python GPU libraries already use:
 *   int                 the handle itself (cudaStream_t / hipStream_t as an address)
 *   __cuda_stream__()   returns (version, address); version 0 is the one cuda.core and
 *                       cuda.bindings streams implement
 *   .cuda_stream        PyTorch's torch.cuda.Stream
 *   .ptr                CuPy's cupy.cuda.Stream
 * The handle is borrowed: the object must stay alive for the call, as in C.
 */
#include "binding.h"

/* The protocol version this module understands. */
#define CUDA_STREAM_PROTOCOL_VERSION 0

/* An address: an int in 0 .. UINTPTR_MAX. source names where it came from. */
static int handle_from_index(const char *func, const char *what, const char *source,
                             PyObject *value, void **out) {
  int overflow = 0;
  long long signed_value = PyLong_AsLongLongAndOverflow(value, &overflow);
  if (signed_value == -1 && PyErr_Occurred()) return -1;
  if (overflow < 0 || (overflow == 0 && signed_value < 0)) {
    PyErr_Format(PyExc_ValueError,
                 "%s: %s: %s is %R: a stream handle is an address, expected an int >= 0", func,
                 what, source, value);
    return -1;
  }
  unsigned long long address = PyLong_AsUnsignedLongLong(value);
  if (PyErr_Occurred() || address > UINTPTR_MAX) {
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError, "%s: %s: %s is %R: too large for an address", func, what, source,
                 value);
    return -1;
  }
  *out = (void *)(uintptr_t)address;
  return 0;
}

static int handle_from_int(const char *func, const char *what, const char *source, PyObject *given,
                           void **out) {
  if (PyLong_CheckExact(given)) { /* the common case, read at once */
    int overflow = 0;
    long long value = PyLong_AsLongLongAndOverflow(given, &overflow);
    if (overflow == 0 && value >= 0 && (unsigned long long)value <= UINTPTR_MAX) {
      *out = (void *)(uintptr_t)value;
      return 0;
    }
  }
  PyObject *value = dl_sync_py_index(given);
  if (value == NULL) {
    if (PyErr_Occurred()) return -1;
    PyErr_Format(PyExc_TypeError, "%s: %s: %s is %R: expected an int stream handle", func, what,
                 source, given);
    return -1;
  }
  int rc = handle_from_index(func, what, source, value, out);
  Py_DECREF(value);
  return rc;
}

/* What __cuda_stream__() returned: (version, address), version 0. */
static int handle_from_protocol_result(const char *func, const char *what, PyObject *obj,
                                       PyObject *result, void **out) {
  if (!PyTuple_Check(result) || PyTuple_GET_SIZE(result) != 2) {
    PyErr_Format(PyExc_TypeError,
                 "%s: %s: %.100s.__cuda_stream__() returned %R: expected a (version, address) "
                 "tuple",
                 func, what, Py_TYPE(obj)->tp_name, result);
    return -1;
  }
  PyObject *version = PyTuple_GET_ITEM(result, 0);
  int overflow = 0;
  long long v = PyLong_Check(version) && !PyBool_Check(version)
                    ? PyLong_AsLongLongAndOverflow(version, &overflow)
                    : -1;
  if (v != CUDA_STREAM_PROTOCOL_VERSION || overflow != 0) {
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError,
                 "%s: %s: %.100s.__cuda_stream__() speaks protocol version %R: dlsync "
                 "understands version %d",
                 func, what, Py_TYPE(obj)->tp_name, version, CUDA_STREAM_PROTOCOL_VERSION);
    return -1;
  }
  return handle_from_int(func, what, "the address from __cuda_stream__()",
                         PyTuple_GET_ITEM(result, 1), out);
}

static int from_cuda_stream_protocol(const char *func, const char *what, PyObject *obj,
                                     PyObject *method, void **out) {
  if (!PyCallable_Check(method)) {
    PyErr_Format(PyExc_TypeError,
                 "%s: %s: %.100s.__cuda_stream__ is %R, not a method: the __cuda_stream__ "
                 "protocol is a method returning (version, address)",
                 func, what, Py_TYPE(obj)->tp_name, method);
    return -1;
  }
  PyObject *result = PyObject_CallObject(method, NULL) /* CallNoArgs: 3.9 and later */;
  if (result == NULL) return -1;
  int rc = handle_from_protocol_result(func, what, obj, result, out);
  Py_DECREF(result);
  return rc;
}

/* The protocols, in the order they are tried, and how messages name their values. */
static const char *const protocol_names[] = {"__cuda_stream__", "cuda_stream", "ptr"};
static const char *const protocol_sources[] = {"its __cuda_stream__()", "its .cuda_stream",
                                               "its .ptr"};
enum { PROTOCOLS = sizeof protocol_names / sizeof protocol_names[0] };
static PyObject *protocol_keys[PROTOCOLS]; /* interned at initialization; never freed */

int dl_sync_py_stream_keys_init(PyObject *module) {
  (void)module;
  for (size_t i = 0; i < PROTOCOLS; i++)
    if (protocol_keys[i] == NULL &&
        (protocol_keys[i] = PyUnicode_InternFromString(protocol_names[i])) == NULL)
      return -1;
  return 0;
}

/* The handle from protocol i's attribute: __cuda_stream__ is called, the others are ints. */
static int from_protocol(const char *func, const char *what, PyObject *obj, size_t i,
                         PyObject *attr, void **out) {
  if (i == 0) return from_cuda_stream_protocol(func, what, obj, attr, out);
  return handle_from_int(func, what, protocol_sources[i], attr, out);
}

/* Most stream classes define their protocol on the type (a method, a property, a member
   of a C or Cython class): found there, it is read without a miss on the instance, and a
   __cuda_stream__ method is called without making a bound method. 1 when the type had
   one, 0 when not, -1 on error. The descriptor is held until its getter returned (the
   getter is Python code that may delete it from the class), as CPython's own lookup does. */
static int from_type_protocol(const char *func, const char *what, PyObject *obj, void **out) {
  for (size_t i = 0; i < PROTOCOLS; i++) {
    PyObject *descriptor = dl_sync_py_type_lookup(Py_TYPE(obj), protocol_keys[i]);
    if (descriptor == NULL) continue; /* the lookup raises nothing */
    int rc;
#if PY_VERSION_HEX >= 0x03090000
    if (i == 0 && (PyFunction_Check(descriptor) || Py_IS_TYPE(descriptor, &PyMethodDescr_Type))) {
      Py_DECREF(descriptor); /* the call looks it up again */
      PyObject *result = PyObject_VectorcallMethod(protocol_keys[0], &obj,
                                                   1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
      if (result == NULL) return -1;
      rc = handle_from_protocol_result(func, what, obj, result, out);
      Py_DECREF(result);
      return rc < 0 ? -1 : 1;
    }
#endif
    /* A data descriptor (a C or Cython property, a __slots__ member) is what the lookup
       of the attribute returns, before any instance attribute, unless the class has
       its own __getattribute__: ask it directly. */
    descrgetfunc get = Py_TYPE(descriptor)->tp_descr_get;
    PyObject *attr;
    if (get != NULL && Py_TYPE(descriptor)->tp_descr_set != NULL &&
        Py_TYPE(obj)->tp_getattro == PyObject_GenericGetAttr)
      attr = get(descriptor, obj, (PyObject *)Py_TYPE(obj));
    else
      attr = PyObject_GetAttr(obj, protocol_keys[i]);
    Py_DECREF(descriptor);
    if (attr == NULL) return -1;
    rc = from_protocol(func, what, obj, i, attr, out);
    Py_DECREF(attr);
    return rc < 0 ? -1 : 1;
  }
  return 0;
}

/* obj's protocol attribute into *attr (NULL when absent, which is not an error). The
   lookup that does not raise AttributeError matters: an exception made and cleared per
   call would cost more than the rest of export. */
static int protocol_attr(PyObject *obj, size_t protocol, PyObject **attr) {
#if PY_VERSION_HEX >= 0x030D0000
  return PyObject_GetOptionalAttr(obj, protocol_keys[protocol], attr) < 0 ? -1 : 0;
#else
  return _PyObject_LookupAttr(obj, protocol_keys[protocol], attr) < 0 ? -1 : 0;
#endif
}

int dl_sync_py_stream_handle(const char *func, const char *what, PyObject *obj, void **out) {
  if (obj == Py_None) {
    *out = NULL;
    return 0;
  }
  if (PyBool_Check(obj)) {
    PyErr_Format(PyExc_TypeError, "%s: %s=%R: a bool is not a stream", func, what, obj);
    return -1;
  }
  if (PyLong_Check(obj)) return handle_from_int(func, what, "the int", obj, out);
  int found = from_type_protocol(func, what, obj, out);
  if (found != 0) return found < 0 ? -1 : 0;
  /* Instance attributes, and classes with __getattr__. */
  for (size_t i = 0; i < PROTOCOLS; i++) {
    PyObject *attr = NULL;
    if (protocol_attr(obj, i, &attr) != 0) return -1;
    if (attr == NULL) continue;
    int rc = from_protocol(func, what, obj, i, attr, out);
    Py_DECREF(attr);
    return rc;
  }
  if (PyIndex_Check(obj)) return handle_from_int(func, what, "the int", obj, out); /* numpy's */
  PyErr_Format(PyExc_TypeError,
               "%s: %s=%R: expected None, an int handle, or a stream object with "
               "__cuda_stream__() (cuda.core), .cuda_stream (PyTorch) or .ptr (CuPy); "
               "%.100s has none of them",
               func, what, obj, Py_TYPE(obj)->tp_name);
  return -1;
}
