/* SPDX-License-Identifier: Apache-2.0 */
/* dlsync._raise_status: the exception each dlsync status becomes, for the tests and for
   C extensions that map statuses the same way (dlsync/status.h lists them). */
#include "module.h"

PyDoc_STRVAR(raise_status_doc,
             "_raise_status(status, /)\n"
             "--\n"
             "\n"
             "Raises the exception dlsync raises for the C status ``status`` (an int from\n"
             "dlsync/status.h); returns None for DL_SYNC_OK (0).\n");

static PyObject *py_raise_status(PyObject *module, PyObject *arg) {
  (void)module;
  int overflow = 0;
  long status = PyLong_Check(arg) ? PyLong_AsLongAndOverflow(arg, &overflow) : -1;
  if (!PyLong_Check(arg) || overflow != 0 || status < INT_MIN || status > INT_MAX) {
    if (!PyErr_Occurred())
      PyErr_Format(PyExc_TypeError, "dlsync._raise_status: expected an int status, got %R", arg);
    return NULL;
  }
  if (status == DL_SYNC_OK) Py_RETURN_NONE;
  return dl_sync_py_raise((int)status);
}

PyMethodDef dl_sync_py_status_methods[] = {
    {"_raise_status", py_raise_status, METH_O, raise_status_doc},
    {NULL, NULL, 0, NULL},
};
