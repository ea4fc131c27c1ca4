/* SPDX-License-Identifier: Apache-2.0 */
/* dlsync statuses as the Python exceptions dlsync/status.h lists. */
#include <string.h>

#include "binding.h"

PyObject *dl_sync_py_raise(int status) {
  const char *kind = dl_sync_python_exception(status);
  PyObject *type = PyExc_RuntimeError; /* EBACKEND and statuses this build does not know */
  if (kind != NULL && strcmp(kind, "ValueError") == 0)
    type = PyExc_ValueError;
  else if (kind != NULL && strcmp(kind, "BufferError") == 0)
    type = PyExc_BufferError;
  else if (kind != NULL && strcmp(kind, "MemoryError") == 0)
    type = PyExc_MemoryError;
  PyErr_SetString(type, dl_sync_last_error());
  return NULL;
}
