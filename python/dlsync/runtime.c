/* SPDX-License-Identifier: Apache-2.0 */
/* dlsync._runtime: which GPU runtime library a built-in backend found (dlsync.runtime in
   __init__.py wraps it in a named tuple). */
#include <string.h>

#include "module.h"

PyDoc_STRVAR(runtime_doc,
             "_runtime(name, /)\n"
             "--\n"
             "\n"
             "(path, version, major, minor) of the library the built-in backend ``name``\n"
             "('cuda': the driver, 'cudart' or 'hip') uses; BufferError naming what was\n"
             "tried when there is none. Loads nothing. See dlsync.runtime.\n");

static PyObject *py_runtime(PyObject *module, PyObject *arg) {
  (void)module;
  const char *name = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
  if (name == NULL) {
    if (!PyErr_Occurred())
      PyErr_Format(PyExc_TypeError, "dlsync.runtime: expected 'cuda', 'cudart' or 'hip', got %R",
                   arg);
    return NULL;
  }
  const dl_sync_backend *backend = strcmp(name, "cuda") == 0     ? dl_sync_cuda_backend()
                                   : strcmp(name, "cudart") == 0 ? dl_sync_cudart_backend()
                                   : strcmp(name, "hip") == 0    ? dl_sync_hip_backend()
                                                                 : NULL;
  if (backend == NULL)
    return PyErr_Format(PyExc_ValueError,
                        "dlsync.runtime: expected 'cuda', 'cudart' or 'hip', got %R", arg);
  dl_sync_runtime_info info;
  PyThreadState *thread = PyEval_SaveThread(); /* the loaded objects may be looked through */
  int status = dl_sync_backend_runtime(backend, &info);
  PyEval_RestoreThread(thread);
  if (status != DL_SYNC_OK) return dl_sync_py_raise(status);
  return Py_BuildValue("(siii)", info.path, (int)info.version, (int)info.major, (int)info.minor);
}

PyMethodDef dl_sync_py_runtime_methods[] = {
    {"_runtime", py_runtime, METH_O, runtime_doc},
    {NULL, NULL, 0, NULL},
};
