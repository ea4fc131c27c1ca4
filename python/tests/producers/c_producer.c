/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A producer written in C with its own static copy of dlsync (linked with libdlsync.a from
 * the installed package): export() is the synchronization step of its __dlpack__.
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

static PyMethodDef methods[] = {
    {"export", py_export, METH_VARARGS, "export(device, producer_stream, stream)"},
    {"backend_name", py_backend_name, METH_O, "backend_name(device_type)"},
    {"use_simulated_device", use_simulated_device, METH_O, "use_simulated_device(sim)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "c_producer", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_c_producer(void);
PyMODINIT_FUNC PyInit_c_producer(void) {
  return PyModule_Create(&module_def);
}
