/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlsync_python.h: a dlsync status as a Python exception, for producers written in C or
 * C++ (Cython has dl_sync_check in dlsync.pxd). Header only: it needs Python.h and the C
 * headers from dlsync.get_include(), and links nothing of its own.
 *
 *     int status;
 *     Py_BEGIN_ALLOW_THREADS
 *     status = dl_sync_export(dl_sync_stream_view(device, handle), arg);
 *     Py_END_ALLOW_THREADS
 *     if (status != DL_SYNC_OK) return dl_sync_python_raise(status);
 *
 * The exception is the one dl_sync_python_exception(status) names (ValueError,
 * BufferError, MemoryError, else RuntimeError), with the thread's dl_sync_last_error():
 * call it on the thread that got the status, with the GIL held.
 */
#ifndef DL_SYNC_PYTHON_H_
#define DL_SYNC_PYTHON_H_

#include <Python.h>
#include <string.h>

#include "dlsync/status.h"

/** Sets the exception of status, which is a failure (< 0); always returns NULL. */
static inline PyObject *dl_sync_python_raise(int status) {
  const char *kind = dl_sync_python_exception(status);
  PyObject *type = PyExc_RuntimeError; /* EBACKEND, and statuses this build does not know */
  if (kind != NULL && strcmp(kind, "ValueError") == 0)
    type = PyExc_ValueError;
  else if (kind != NULL && strcmp(kind, "BufferError") == 0)
    type = PyExc_BufferError;
  else if (kind != NULL && strcmp(kind, "MemoryError") == 0)
    type = PyExc_MemoryError;
  PyErr_SetString(type, dl_sync_last_error());
  return NULL;
}

/** 0 for a status that is not a failure (>= 0); else sets its exception and returns -1. */
static inline int dl_sync_python_check(int status) {
  if (status >= 0) return 0;
  dl_sync_python_raise(status);
  return -1;
}

#endif /* DL_SYNC_PYTHON_H_ */
