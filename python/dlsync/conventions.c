/* SPDX-License-Identifier: Apache-2.0 */
/* dlsync.stream_from_arg and dlsync.stream_to_arg: the stream= conventions themselves. */
#include "module.h"

PyDoc_STRVAR(
    stream_from_arg_doc,
    "stream_from_arg(device, stream)\n"
    "--\n"
    "\n"
    "Producer side: decodes the consumer's ``stream`` argument for a tensor on ``device``.\n"
    "Returns ``(handle, needs_sync)``: the consumer's native stream as an int (1 is CUDA's\n"
    "legacy default stream, 2 its per-thread default stream; 0 is ROCm's null stream) and\n"
    "whether the producer must order its work before it (False for -1 and for devices\n"
    "without streams). The table and the errors are those of ``export``.\n");

static const char *const stream_from_arg_names[] = {"device", "stream"};
static PyObject *stream_from_arg_interned[2];
const dl_sync_py_signature dl_sync_py_stream_from_arg_signature = {
    "stream_from_arg", 2, stream_from_arg_names, stream_from_arg_interned};

static PyObject *py_stream_from_arg(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                    PyObject *kwnames) {
  (void)module;
  static const char *const func = "dlsync.stream_from_arg";
  PyObject *scratch[2];
  PyObject *const *arg_objs =
      dl_sync_py_arguments(&dl_sync_py_stream_from_arg_signature, args, nargs, kwnames, scratch);
  if (arg_objs == NULL) return NULL;
  PyObject *device_obj = arg_objs[0], *stream_obj = arg_objs[1];
  DLDevice device;
  dl_sync_stream_arg arg;
  if (dl_sync_py_device(func, device_obj, &device) != 0 ||
      dl_sync_py_stream_arg(func, stream_obj, &arg) != 0)
    return NULL;
  dl_sync_stream out;
  int needs_sync = 0;
  int status = dl_sync_stream_from_arg(device, arg, &out, &needs_sync);
  if (status != DL_SYNC_OK) return dl_sync_py_raise(status);
  return Py_BuildValue("(NO)", PyLong_FromVoidPtr(out.handle), needs_sync ? Py_True : Py_False);
}

PyDoc_STRVAR(
    stream_to_arg_doc,
    "stream_to_arg(device, stream)\n"
    "--\n"
    "\n"
    "Consumer side: the ``stream=`` value that asks a producer to make data ready on the\n"
    "consumer's ``stream`` (an int handle or a stream object) on ``device``. CUDA's legacy\n"
    "default stream (None or 1) -> 1, its per-thread default stream -> 2, ROCm's null stream\n"
    "-> 0, other streams -> their handle, devices without streams -> None.\n");

static const char *const stream_to_arg_names[] = {"device", "stream"};
static PyObject *stream_to_arg_interned[2];
const dl_sync_py_signature dl_sync_py_stream_to_arg_signature = {
    "stream_to_arg", 2, stream_to_arg_names, stream_to_arg_interned};

static PyObject *py_stream_to_arg(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames) {
  (void)module;
  static const char *const func = "dlsync.stream_to_arg";
  PyObject *scratch[2];
  PyObject *const *arg_objs =
      dl_sync_py_arguments(&dl_sync_py_stream_to_arg_signature, args, nargs, kwnames, scratch);
  if (arg_objs == NULL) return NULL;
  PyObject *device_obj = arg_objs[0], *stream_obj = arg_objs[1];
  DLDevice device;
  void *handle = NULL;
  if (dl_sync_py_device(func, device_obj, &device) != 0 ||
      dl_sync_py_stream_handle(func, "stream", stream_obj, &handle) != 0)
    return NULL;
  dl_sync_stream_arg arg;
  int status = dl_sync_stream_to_arg(dl_sync_stream_view(device, handle), &arg);
  if (status != DL_SYNC_OK) return dl_sync_py_raise(status);
  if (arg.is_none) Py_RETURN_NONE;
  return PyLong_FromLongLong(arg.value);
}

PyMethodDef dl_sync_py_convention_methods[] = {
    DL_SYNC_PY_FASTCALL("stream_from_arg", py_stream_from_arg, stream_from_arg_doc),
    DL_SYNC_PY_FASTCALL("stream_to_arg", py_stream_to_arg, stream_to_arg_doc),
    {NULL, NULL, 0, NULL},
};
