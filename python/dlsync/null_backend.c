/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A backend whose calls return at once, behind dlsync.testing.NullBackend: what a
 * benchmark times is then dlsync's own work, not a runtime's or the simulator's. It
 * orders nothing, so it is for timing only; with it, the C loops a benchmark sets beside
 * the Python calls (the export alone, the GIL's release and retake).
 */
#include "module.h" /* Python.h first: it sets the POSIX level clock_gettime needs */

#include <time.h>

static int null_get_device(void *ctx, int32_t *device) {
  (void)ctx;
  *device = 0;
  return 0;
}
static int null_set_device(void *ctx, int32_t device) {
  (void)ctx;
  (void)device;
  return 0;
}
static int null_event_create(void *ctx, void **event) {
  (void)ctx;
  static char token;
  *event = &token;
  return 0;
}
static int null_event(void *ctx, void *event) {
  (void)ctx;
  (void)event;
  return 0;
}
static int null_event_stream(void *ctx, void *a, void *b) {
  (void)ctx;
  (void)a;
  (void)b;
  return 0;
}
static int null_event_query(void *ctx, void *event, int *done) {
  (void)ctx;
  (void)event;
  *done = 1;
  return 0;
}
static int null_capture_info(void *ctx, void *stream, dl_sync_capture_info *out) {
  (void)ctx;
  (void)stream;
  out->status = DL_SYNC_CAPTURE_NONE;
  return 0;
}
static const char *null_error_name(void *ctx, int error) {
  (void)ctx;
  (void)error;
  return "nullError";
}
static int null_error_status(void *ctx, int error) {
  (void)ctx;
  (void)error;
  return DL_SYNC_EBACKEND;
}

static const dl_sync_backend null_backend = {
    DL_SYNC_BACKEND_INIT,
    .name = "null",
    .get_device = null_get_device,
    .set_device = null_set_device,
    .event_create = null_event_create,
    .event_destroy = null_event,
    .event_record = null_event_stream,
    .stream_wait = null_event_stream,
    .event_synchronize = null_event,
    .event_query = null_event_query,
    .capture_info = null_capture_info,
    .error_name = null_error_name,
    .error_string = null_error_name,
    .error_status = null_error_status,
};

/* _null_backend(on): the null backend behind kDLCUDA, or (False) the default again. */
static PyObject *py_null_backend(PyObject *module, PyObject *on) {
  (void)module;
  int enable = PyObject_IsTrue(on);
  if (enable < 0) return NULL;
  /* No pooled event of one backend is handed to the other. Shutdown waits for a deleter
     the release thread runs, which may wait for the GIL: it is let go, as sim.c does. */
  PyThreadState *thread = PyEval_SaveThread();
  dl_sync_shutdown();
  int status = dl_sync_set_backend(kDLCUDA, enable ? &null_backend : NULL);
  PyEval_RestoreThread(thread);
  if (status != DL_SYNC_OK) return dl_sync_py_raise(status);
  Py_RETURN_NONE;
}

static const char *const time_export_names[] = {"device", "producer_stream", "stream", "n"};
static PyObject *time_export_interned[4];
const dl_sync_py_signature dl_sync_py_time_export_signature = {"_time_export", 4, time_export_names,
                                                               time_export_interned};

/* _time_export(device, producer_stream, stream, n): nanoseconds per dl_sync_export call,
   n calls in a C loop: what a Python call of export costs beyond its binding. */
static PyObject *py_time_export(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames) {
  (void)module;
  static const char *const func = "dlsync.testing.NullBackend.time_export";
  PyObject *scratch[4];
  PyObject *const *arg_objs =
      dl_sync_py_arguments(&dl_sync_py_time_export_signature, args, nargs, kwnames, scratch);
  if (arg_objs == NULL) return NULL;
  dl_sync_stream view;
  dl_sync_stream_arg arg;
  if (dl_sync_py_export_arguments(func, arg_objs, &view, &arg) != 0) return NULL;
  long n = PyLong_AsLong(arg_objs[3]);
  if (n == -1 && PyErr_Occurred()) return NULL;
  if (n <= 0) return PyErr_Format(PyExc_ValueError, "%s: n=%ld: expected a count > 0", func, n);
  struct timespec start, end;
  int status = DL_SYNC_OK;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (long i = 0; i < n && status == DL_SYNC_OK; i++) status = dl_sync_export(view, arg);
  clock_gettime(CLOCK_MONOTONIC, &end);
  if (status != DL_SYNC_OK) return dl_sync_py_raise(status);
  double ns = (double)(end.tv_sec - start.tv_sec) * 1e9 + (double)(end.tv_nsec - start.tv_nsec);
  return PyFloat_FromDouble(ns / (double)n);
}

/* _time_gil_release(n): nanoseconds per release and retake of the GIL, n in a C loop: what
   a call that reaches the runtime pays for letting other threads run meanwhile. */
static PyObject *py_time_gil_release(PyObject *module, PyObject *count) {
  (void)module;
  long n = PyLong_AsLong(count);
  if (n == -1 && PyErr_Occurred()) return NULL;
  if (n <= 0)
    return PyErr_Format(PyExc_ValueError, "_time_gil_release: n=%ld: expected a count > 0", n);
  struct timespec start, end;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (long i = 0; i < n; i++) {
    PyThreadState *thread = PyEval_SaveThread();
    PyEval_RestoreThread(thread);
  }
  clock_gettime(CLOCK_MONOTONIC, &end);
  double ns = (double)(end.tv_sec - start.tv_sec) * 1e9 + (double)(end.tv_nsec - start.tv_nsec);
  return PyFloat_FromDouble(ns / (double)n);
}

PyMethodDef dl_sync_py_null_backend_methods[] = {
    {"_time_gil_release", py_time_gil_release, METH_O, "_time_gil_release(n, /)\n--\n\n"},
    {"_null_backend", py_null_backend, METH_O,
     "_null_backend(on, /)\n--\n\nBehind dlsync.testing.NullBackend."},
    DL_SYNC_PY_FASTCALL("_time_export", py_time_export,
                        "_time_export(device, producer_stream, stream, n)\n--\n\n"),
    {NULL, NULL, 0, NULL},
};
