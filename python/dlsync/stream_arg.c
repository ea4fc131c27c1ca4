/* SPDX-License-Identifier: Apache-2.0 */
/* The values __dlpack__ passes around: the device tuple and the stream= argument. */
#include "binding.h" /* Python.h first */

#include <string.h>

/* numpy's bool scalar has __index__ (numpy.bool_, numpy.bool from numpy 2), yet is no
   more an int than Python's bool. */
static int is_numpy_bool(PyObject *obj) {
  const char *name = Py_TYPE(obj)->tp_name;
  return strcmp(name, "numpy.bool_") == 0 || strcmp(name, "numpy.bool") == 0;
}

PyObject *dl_sync_py_index(PyObject *obj) {
  if (PyBool_Check(obj)) return NULL; /* an int subclass, but True is a mistake, not 1 */
  if (PyLong_Check(obj)) {
    Py_INCREF(obj);
    return obj;
  }
  return PyIndex_Check(obj) && !is_numpy_bool(obj) ? PyNumber_Index(obj) : NULL;
}

/* An int that fits int32_t, for the two fields of a DLDevice. */
static int int32_item(const char *func, PyObject *device, Py_ssize_t index, const char *name,
                      int32_t *out) {
  PyObject *item = dl_sync_py_index(PyTuple_GET_ITEM(device, index));
  if (item == NULL) {
    if (PyErr_Occurred()) return -1;
    PyErr_Format(PyExc_TypeError, "%s: device=%R: %s must be an int, not %.100s", func, device,
                 name, Py_TYPE(PyTuple_GET_ITEM(device, index))->tp_name);
    return -1;
  }
  int overflow = 0;
  long long value = PyLong_AsLongLongAndOverflow(item, &overflow);
  Py_DECREF(item);
  if (value == -1 && PyErr_Occurred()) return -1;
  if (overflow != 0 || value < INT32_MIN || value > INT32_MAX) {
    PyErr_Format(PyExc_ValueError, "%s: device=%R: %s %R does not fit a 32-bit int", func, device,
                 name, item);
    return -1;
  }
  *out = (int32_t)value;
  return 0;
}

int dl_sync_py_device(const char *func, PyObject *obj, DLDevice *out) {
  /* What __dlpack_device__() returns: a tuple of two ints, read without conversions. */
  if (PyTuple_CheckExact(obj) && PyTuple_GET_SIZE(obj) == 2 &&
      PyLong_CheckExact(PyTuple_GET_ITEM(obj, 0)) && PyLong_CheckExact(PyTuple_GET_ITEM(obj, 1))) {
    int overflow_type = 0, overflow_id = 0;
    long type = PyLong_AsLongAndOverflow(PyTuple_GET_ITEM(obj, 0), &overflow_type);
    long id = PyLong_AsLongAndOverflow(PyTuple_GET_ITEM(obj, 1), &overflow_id);
    if (!overflow_type && !overflow_id && type >= INT32_MIN && type <= INT32_MAX &&
        id >= INT32_MIN && id <= INT32_MAX) {
      *out = (DLDevice){(DLDeviceType)type, (int32_t)id};
      return 0;
    }
  }
  if (!PyTuple_Check(obj) || PyTuple_GET_SIZE(obj) != 2) {
    PyErr_Format(PyExc_TypeError,
                 "%s: device=%R: expected a (device_type, device_id) tuple, as "
                 "__dlpack_device__() returns",
                 func, obj);
    return -1;
  }
  int32_t type = 0, id = 0;
  if (int32_item(func, obj, 0, "device_type", &type) != 0) return -1;
  if (int32_item(func, obj, 1, "device_id", &id) != 0) return -1;
  /* The values themselves are dlsync's to judge (unknown types, ids out of range). */
  *out = (DLDevice){(DLDeviceType)type, id};
  return 0;
}

int dl_sync_py_stream_arg(const char *func, PyObject *obj, dl_sync_stream_arg *out) {
  if (obj == Py_None) {
    *out = dl_sync_stream_arg_none();
    return 0;
  }
  if (PyLong_CheckExact(obj)) {
    int overflow = 0;
    long long value = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (!overflow) {
      *out = dl_sync_stream_arg_int(value);
      return 0;
    }
  }
  /* Any int, numpy's included (__index__); a bool is a mistake, not stream 1. */
  PyObject *index = dl_sync_py_index(obj);
  if (index == NULL) {
    if (PyErr_Occurred()) return -1;
    PyErr_Format(PyExc_TypeError, "%s: stream=%R: expected None or an int, not %.100s", func, obj,
                 Py_TYPE(obj)->tp_name);
    return -1;
  }
  int overflow = 0;
  long long value = PyLong_AsLongLongAndOverflow(index, &overflow);
  Py_DECREF(index);
  if (value == -1 && PyErr_Occurred()) return -1;
  if (overflow != 0) {
    PyErr_Format(PyExc_ValueError,
                 "%s: stream=%R does not fit a 64-bit int: expected None, -1 (no "
                 "synchronization), or a value of the device's conventions (CUDA: 1, 2 or a "
                 "stream handle; ROCm: 0 or a stream handle)",
                 func, obj);
    return -1;
  }
  *out = dl_sync_stream_arg_int(value);
  return 0;
}
