/* SPDX-License-Identifier: Apache-2.0 */
/* dlsync.export and dlsync.push_dep: ordering a producer's stream before a consumer's. */
#include "module.h"

PyDoc_STRVAR(
    export_doc,
    "export(device, producer_stream, stream)\n"
    "--\n"
    "\n"
    "The synchronization step of ``__dlpack__(stream=...)``: makes the data the producer\n"
    "wrote on ``producer_stream`` safe to use on the consumer's ``stream``, without blocking\n"
    "the host (an event recorded on the producer's stream, waited on by the consumer's).\n"
    "\n"
    "device: ``(device_type, device_id)``, what ``__dlpack_device__()`` returns.\n"
    "producer_stream: the stream the producer's work on the tensor was enqueued on: an int\n"
    "    handle, an object with ``__cuda_stream__()`` (protocol version 0), ``.cuda_stream``\n"
    "    (PyTorch) or ``.ptr`` (CuPy); None for the device's default stream or no stream.\n"
    "stream: the consumer's argument, None or an int; what it means depends on the device:\n"
    "\n"
    "    ======== ============== ======= ========= ======= ========== ====== ==========\n"
    "    device   None           -1      0         1       2          > 2    < -1\n"
    "    ======== ============== ======= ========= ======= ========== ====== ==========\n"
    "    CUDA     legacy default no sync ambiguous legacy  per-thread handle ValueError\n"
    "    ROCm     null stream    no sync null      error   error      handle ValueError\n"
    "    others   nothing to do  error   error     error   error      error  ValueError\n"
    "    ======== ============== ======= ========= ======= ========== ====== ==========\n"
    "\n"
    "    CUDA: kDLCUDA (2), kDLCUDAHost (3), kDLCUDAManaged (13); ROCm: kDLROCM (10),\n"
    "    kDLROCMHost (11). 2 is the per-thread default stream of the calling thread.\n"
    "    'ambiguous' and 'error' raise ValueError.\n"
    "\n"
    "Raises TypeError for a bool or non-int ``stream`` and for objects that are not streams;\n"
    "ValueError for a stream value the device does not accept (the message names the value\n"
    "and what is valid); BufferError when the tensor cannot be exported now (graph capture,\n"
    "no device or runtime, unsupported); MemoryError; RuntimeError when the runtime fails.\n"
    "The GIL is released only while dlsync calls the runtime.\n"
    "\n"
    "In a framework's ``__dlpack__``::\n"
    "\n"
    "    dlsync.export(self.__dlpack_device__(), self.stream, stream)\n"
    "    return self._capsule()\n");

int dl_sync_py_export_arguments(const char *func, PyObject *const *args, dl_sync_stream *producer,
                                dl_sync_stream_arg *consumer) {
  DLDevice device;
  void *handle = NULL;
  if (dl_sync_py_device(func, args[0], &device) != 0 ||
      dl_sync_py_stream_handle(func, "producer_stream", args[1], &handle) != 0 ||
      dl_sync_py_stream_arg(func, args[2], consumer) != 0)
    return -1;
  *producer = dl_sync_stream_view(device, handle);
  return 0;
}

static const char *const export_names[] = {"device", "producer_stream", "stream"};
static PyObject *export_interned[3];
const dl_sync_py_signature dl_sync_py_export_signature = {"export", 3, export_names,
                                                          export_interned};

static PyObject *py_export(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                           PyObject *kwnames) {
  (void)module;
  static const char *const func = "dlsync.export";
  PyObject *scratch[3];
  PyObject *const *arg_objs =
      dl_sync_py_arguments(&dl_sync_py_export_signature, args, nargs, kwnames, scratch);
  if (arg_objs == NULL) return NULL;
  dl_sync_stream view;
  dl_sync_stream_arg arg;
  if (dl_sync_py_export_arguments(func, arg_objs, &view, &arg) != 0 ||
      dl_sync_py_export(view, arg) != 0)
    return NULL;
  Py_RETURN_NONE;
}

PyDoc_STRVAR(
    push_dep_doc,
    "push_dep(device, src, dst)\n"
    "--\n"
    "\n"
    "Makes all work enqueued so far on stream ``src`` visible to work enqueued later on\n"
    "stream ``dst`` (both on ``device``), without blocking the host. The same stream twice\n"
    "costs nothing. Streams as in ``export``: int handles or stream objects.\n"
    "\n"
    "Graph capture: src capturing and dst not (or dst the legacy default stream) raises\n"
    "BufferError; dst capturing and src not captures an external event wait.\n"
    "The GIL is released only while dlsync calls the runtime.\n");

static const char *const push_dep_names[] = {"device", "src", "dst"};
static PyObject *push_dep_interned[3];
const dl_sync_py_signature dl_sync_py_push_dep_signature = {"push_dep", 3, push_dep_names,
                                                            push_dep_interned};

static PyObject *py_push_dep(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames) {
  (void)module;
  static const char *const func = "dlsync.push_dep";
  PyObject *scratch[3];
  PyObject *const *arg_objs =
      dl_sync_py_arguments(&dl_sync_py_push_dep_signature, args, nargs, kwnames, scratch);
  if (arg_objs == NULL) return NULL;
  DLDevice device;
  void *src = NULL, *dst = NULL;
  if (dl_sync_py_device(func, arg_objs[0], &device) != 0 ||
      dl_sync_py_stream_handle(func, "src", arg_objs[1], &src) != 0 ||
      dl_sync_py_stream_handle(func, "dst", arg_objs[2], &dst) != 0)
    return NULL;
  dl_sync_stream from = dl_sync_stream_view(device, src), to = dl_sync_stream_view(device, dst);
  int status;
  if (from.handle == to.handle) { /* the same stream: nothing to order, no runtime call */
    status = dl_sync_push_dep(from, to);
  } else {
    PyThreadState *thread = PyEval_SaveThread();
    status = dl_sync_push_dep(from, to);
    PyEval_RestoreThread(thread);
  }
  if (status != DL_SYNC_OK) return dl_sync_py_raise(status);
  Py_RETURN_NONE;
}

PyMethodDef dl_sync_py_exchange_methods[] = {
    DL_SYNC_PY_FASTCALL("export", py_export, export_doc),
    DL_SYNC_PY_FASTCALL("push_dep", py_push_dep, push_dep_doc),
    {NULL, NULL, 0, NULL},
};
