/* SPDX-License-Identifier: Apache-2.0 */
/*
 * binding.h: conversions between Python objects and dlsync's C types, shared by the
 * dlsync extension module and by the C-extension sample (samples/python).
 *
 * Every function takes the name of the Python-level caller (e.g. "dlsync.export") so its
 * message says where the bad value came from. On failure they set a Python exception and
 * return -1 (or NULL). They need the GIL.
 */
#ifndef DL_SYNC_PY_BINDING_H_
#define DL_SYNC_PY_BINDING_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlsync/dlsync.h>

/** The class's attribute name, a strong reference (NULL where it has none; it raises
   nothing): another thread may delete it from the class meanwhile (with the GIL switched,
   or where there is none), so it is never held borrowed, and Python code that runs while
   it is used (a getter) may delete it too. 3.13 looks it up and takes the reference in one
   step. */
static inline PyObject *dl_sync_py_type_lookup(PyTypeObject *type, PyObject *name) {
#if PY_VERSION_HEX >= 0x030D0000
  return _PyType_LookupRef(type, name);
#else
  PyObject *found = _PyType_Lookup(type, name); /* borrowed, and held before Python runs */
  Py_XINCREF(found);
  return found;
#endif
}

/** Raises the exception kind dl_sync_python_exception(status) names, with this thread's
    dlsync message. Call it on the thread that got status. Always returns NULL. */
PyObject *dl_sync_py_raise(int status);

/** obj as an int (a new reference): an int, or an object with __index__ (numpy's integers),
    never a bool; NULL, with no exception set, for anything else. */
PyObject *dl_sync_py_index(PyObject *obj);

/** (device_type, device_id), as __dlpack_device__ returns it -> DLDevice. */
int dl_sync_py_device(const char *func, PyObject *obj, DLDevice *out);

/** The consumer's stream= argument: None or an int (a bool or any other type is a
    TypeError, as the array API specifies). */
int dl_sync_py_stream_arg(const char *func, PyObject *obj, dl_sync_stream_arg *out);

/** A stream object -> native handle: None (the default stream, or no stream), an int
    handle, or an object with __cuda_stream__ (protocol version 0), cuda_stream or ptr.
    what names the parameter in messages. */
int dl_sync_py_stream_handle(const char *func, const char *what, PyObject *obj, void **out);

/** Interns the stream protocols' attribute names, once per process, before any
    dl_sync_py_stream_handle (the dlsync module does it when it is executed), so that a call
    only reads them. module is unused. 0, or -1 with an exception. */
int dl_sync_py_stream_keys_init(PyObject *module);

#endif /* DL_SYNC_PY_BINDING_H_ */
