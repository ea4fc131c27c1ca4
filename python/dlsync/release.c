/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tensor_release and release_poll: release ordering for a consumer whose imported tensor
 * is a DLPack capsule (dlsync/release.h).
 */
#include <stdatomic.h>

#include "module.h"

static const char *const versioned_name = "dltensor_versioned", *const legacy_name = "dltensor";

/* stream=-1: an int (or __index__ integer) equal to -1; any other value is a stream. 1 or
   0; -1 with the exception an __index__ raised (never swallowed). */
static int is_minus_one(PyObject *obj) {
  PyObject *index = dl_sync_py_index(obj);
  if (index == NULL) /* not an int: dl_sync_py_stream_handle says what it is */
    return PyErr_Occurred() ? -1 : 0;
  int overflow = 0;
  long value = PyLong_AsLongAndOverflow(index, &overflow);
  Py_DECREF(index);
  int failed = value == -1 && PyErr_Occurred() != NULL;
  if (failed) PyErr_Clear();
  return !failed && overflow == 0 && value == -1;
}

/* tensor_release(tensor, stream): releases the capsule's tensor after the work enqueued
   so far on stream (a handle, an object with __cuda_stream__, None for the legacy default
   stream, or -1: nothing of the consumer's is pending) and marks the capsule used, as a
   consumer does when it takes the tensor. Returns RELEASED_NOW, RELEASED_ORDERED,
   RELEASE_DEFERRED or RELEASE_GRAPH. */
static const char *const tensor_release_names[] = {"tensor", "stream"};
static PyObject *tensor_release_interned[2];
static const dl_sync_py_signature tensor_release_signature = {
    "tensor_release", 2, tensor_release_names, tensor_release_interned};

static PyObject *py_tensor_release(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                   PyObject *kwnames) {
  (void)module;
  static const char *const func = "dlsync.tensor_release";
  PyObject *scratch[2];
  PyObject *const *arg_objs =
      dl_sync_py_arguments(&tensor_release_signature, args, nargs, kwnames, scratch);
  if (arg_objs == NULL) return NULL;
  PyObject *capsule = arg_objs[0], *stream_obj = arg_objs[1];
  int legacy = !PyCapsule_IsValid(capsule, versioned_name);
  if (legacy && !PyCapsule_IsValid(capsule, legacy_name))
    return PyErr_Format(PyExc_TypeError,
                        "%s: tensor must be a DLPack capsule not yet consumed (named '%s' or "
                        "'%s'), got %R",
                        func, versioned_name, legacy_name, capsule);
  const char *name = legacy ? legacy_name : versioned_name;
  void *tensor = PyCapsule_GetPointer(capsule, name);
  if (tensor == NULL) return NULL;
  DLDevice device = legacy ? ((DLManagedTensor *)tensor)->dl_tensor.device
                           : ((DLManagedTensorVersioned *)tensor)->dl_tensor.device;
  void *stream = NULL;
  int minus_one = is_minus_one(stream_obj);
  if (minus_one < 0) return NULL;
  if (minus_one)
    stream = DL_SYNC_STREAM_NOTHING_PENDING;
  else if (stream_obj != Py_None &&
           dl_sync_py_stream_handle(func, "stream", stream_obj, &stream) != 0)
    return NULL;
  /* Consumed once: the capsule is marked used with the GIL held, before the GIL is let go,
     so that a second thread releasing it meets a used capsule (TypeError), never a second
     release of its tensor; a failed release gives the capsule its name back. */
  const char *used = legacy ? "used_dltensor" : "used_dltensor_versioned";
  if (PyCapsule_SetName(capsule, used) != 0) return NULL;
  dl_sync_stream consumer = dl_sync_stream_view(device, stream);
  PyThreadState *thread = PyEval_SaveThread(); /* it may reach the runtime */
  int status = legacy ? dl_sync_legacy_tensor_release(tensor, consumer)
                      : dl_sync_tensor_release(tensor, consumer);
  if (status == DL_SYNC_RELEASE_DEFERRED || status == DL_SYNC_RELEASE_GRAPH)
    dl_sync_py_release_thread_ensure(); /* someone must run its deleter later */
  PyEval_RestoreThread(thread);
  if (status < 0) {
    PyCapsule_SetName(capsule, name); /* the tensor is still the capsule's */
    return dl_sync_py_raise(status);
  }
  return PyLong_FromLong(status);
}

/* Python's policy for the release thread: the first deferred release starts it (unless
   the program said no), and the module stops it at interpreter exit (dlsync/__init__.py),
   before the interpreter's own threads shut down. A deleter it runs takes the GIL itself
   when it needs Python. */
static atomic_int release_thread_wanted = 1;

void dl_sync_py_release_thread_ensure(void) {
  if (atomic_load(&release_thread_wanted) && !dl_sync_release_thread_running())
    dl_sync_release_thread_start();
}

static PyObject *py_release_thread(PyObject *module, PyObject *arg) {
  (void)module;
  int run = PyObject_IsTrue(arg);
  if (run < 0) return NULL;
  atomic_store(&release_thread_wanted, run);
  PyThreadState *thread = PyEval_SaveThread(); /* stopping waits for a deleter (the GIL) */
  int status = run ? DL_SYNC_OK : dl_sync_release_thread_stop();
  PyEval_RestoreThread(thread);
  if (status != DL_SYNC_OK) return dl_sync_py_raise(status);
  Py_RETURN_NONE;
}

static PyObject *py_release_thread_running(PyObject *module, PyObject *unused) {
  (void)module;
  (void)unused;
  return PyBool_FromLong(dl_sync_release_thread_running());
}

static PyObject *py_release_poll(PyObject *module, PyObject *unused) {
  (void)module;
  (void)unused;
  PyThreadState *thread = PyEval_SaveThread();
  int ran = dl_sync_release_poll();
  PyEval_RestoreThread(thread);
  return PyLong_FromLong(ran);
}

PyMethodDef dl_sync_py_release_methods[] = {
    DL_SYNC_PY_FASTCALL(
        "tensor_release", py_tensor_release,
        "tensor_release(tensor, stream): release a DLPack capsule's tensor after stream's work"),
    {"release_poll", py_release_poll, METH_NOARGS,
     "release_poll(): run the deleters of the deferred releases that are done"},
    {"release_thread", py_release_thread, METH_O,
     "release_thread(run): whether dlsync's release thread runs the deferred deleters (True, "
     "the default: started by the first deferred release) or only release_poll does (False: "
     "stops it, waiting for a deleter it runs)"},
    {"release_thread_running", py_release_thread_running, METH_NOARGS,
     "release_thread_running(): whether the release thread runs now"},
    {NULL, NULL, 0, NULL},
};
