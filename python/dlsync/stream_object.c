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

static int handle_from_int(const char *func, const char *what, const char *source,
                           PyObject *given, void **out) {
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

static int from_cuda_stream_protocol(const char *func, const char *what, PyObject *obj,
                                     PyObject *method, void **out) {
  if (!PyCallable_Check(method)) {
    PyErr_Format(PyExc_TypeError,
                 "%s: %s: %.100s.__cuda_stream__ is %R, not a method: the __cuda_stream__ "
                 "protocol is a method returning (version, address)",
                 func, what, Py_TYPE(obj)->tp_name, method);
    return -1;
  }
  PyObject *result = PyObject_CallNoArgs(method);
  if (result == NULL) return -1;
  int rc = -1;
  if (!PyTuple_Check(result) || PyTuple_GET_SIZE(result) != 2) {
    PyErr_Format(PyExc_TypeError,
                 "%s: %s: %.100s.__cuda_stream__() returned %R: expected a (version, address) "
                 "tuple",
                 func, what, Py_TYPE(obj)->tp_name, result);
  } else {
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
    } else {
      rc = handle_from_int(func, what, "the address from __cuda_stream__()",
                           PyTuple_GET_ITEM(result, 1), out);
    }
  }
  Py_DECREF(result);
  return rc;
}

/* The protocols, in the order they are tried. */
static const char *const protocol_names[] = {"__cuda_stream__", "cuda_stream", "ptr"};
enum { PROTOCOLS = sizeof protocol_names / sizeof protocol_names[0] };
static PyObject *protocol_keys[PROTOCOLS]; /* interned once, under the GIL; never freed */

/* obj's protocol attribute into *attr (NULL when absent, which is not an error). The
   lookup that does not raise AttributeError matters: a PyTorch stream is found on the
   second try, and an exception made and cleared per call would cost more than the rest
   of export. */
static int protocol_attr(PyObject *obj, size_t protocol, PyObject **attr) {
  if (protocol_keys[protocol] == NULL) {
    protocol_keys[protocol] = PyUnicode_InternFromString(protocol_names[protocol]);
    if (protocol_keys[protocol] == NULL) return -1;
  }
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

  for (size_t i = 0; i < PROTOCOLS; i++) {
    PyObject *attr = NULL;
    if (protocol_attr(obj, i, &attr) != 0) return -1;
    if (attr == NULL) continue;
    int rc;
    if (i == 0) {
      rc = from_cuda_stream_protocol(func, what, obj, attr, out);
    } else {
      char source[64];
      PyOS_snprintf(source, sizeof source, "its .%s", protocol_names[i]);
      rc = handle_from_int(func, what, source, attr, out);
    }
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
