/* SPDX-License-Identifier: Apache-2.0 */
/* The simulated device's streams as the _sim submodule knows them (sim_binding.h): the
   ones made since the last reset, which sim.c makes and sim_kernels.c works on. */
#include <dlsync/sim.h>

#include "sim_binding.h"

/* The handles of the streams made since the last reset: a set of ints, made once at module
   initialization, changed only by the set's own operations (each one step: the GIL, or
   the set's own lock where there is none). The simulator, like a CUDA runtime, reads through any
   handle it is given, so a stray int would crash the process: the primitives here take only these,
   the legacy stream (None, 1) and the per-thread stream (2). */
static PyObject *created_streams;

int dl_sync_py_sim_stream(PyObject *obj, dl_sync_sim_stream **out) {
  void *handle = NULL;
  if (dl_sync_py_stream_handle("dlsync.testing", "stream", obj, &handle) != 0) return -1;
  if (handle != NULL && handle != DL_SYNC_SIM_STREAM_LEGACY &&
      handle != DL_SYNC_SIM_STREAM_PER_THREAD) {
    PyObject *key = PyLong_FromVoidPtr(handle);
    int known = key != NULL ? PySet_Contains(created_streams, key) : -1;
    Py_XDECREF(key);
    if (known < 0) return -1;
    if (!known) {
      PyErr_Format(PyExc_ValueError,
                   "dlsync.testing: stream %R is not a stream of the simulated device (made "
                   "since it was opened), nor 1 (legacy) or 2 (per-thread)",
                   obj);
      return -1;
    }
  }
  *out = handle;
  return 0;
}

int dl_sync_py_sim_streams_init(void) {
  if (created_streams == NULL) created_streams = PySet_New(NULL);
  return created_streams != NULL ? 0 : -1;
}

PyObject *dl_sync_py_sim_stream_made(dl_sync_sim_stream *stream) {
  PyObject *handle = PyLong_FromVoidPtr(stream);
  if (handle != NULL && PySet_Add(created_streams, handle) < 0) Py_CLEAR(handle);
  return handle;
}

void dl_sync_py_sim_streams_forget(void) {
  PySet_Clear(created_streams);
}
