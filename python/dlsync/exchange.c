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
    "The GIL is released while dlsync runs.\n"
    "\n"
    "In a framework's ``__dlpack__``::\n"
    "\n"
    "    dlsync.export(self.__dlpack_device__(), self.stream, stream)\n"
    "    return self._capsule()\n");

static PyObject *py_export(PyObject *module, PyObject *args, PyObject *kwargs) {
  (void)module;
  static const char *const func = "dlsync.export";
  static char *keywords[] = {"device", "producer_stream", "stream", NULL};
  PyObject *device_obj, *producer_obj, *stream_obj;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO:export", keywords, &device_obj, &producer_obj,
                                   &stream_obj))
    return NULL;
  DLDevice device;
  void *producer = NULL;
  dl_sync_stream_arg arg;
  if (dl_sync_py_device(func, device_obj, &device) != 0 ||
      dl_sync_py_stream_handle(func, "producer_stream", producer_obj, &producer) != 0 ||
      dl_sync_py_stream_arg(func, stream_obj, &arg) != 0)
    return NULL;
  PyThreadState *thread = PyEval_SaveThread();
  int status = dl_sync_export(dl_sync_stream_view(device, producer), arg);
  PyEval_RestoreThread(thread);
  if (status != DL_SYNC_OK) return dl_sync_py_raise(status);
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
    "The GIL is released while dlsync runs.\n");

static PyObject *py_push_dep(PyObject *module, PyObject *args, PyObject *kwargs) {
  (void)module;
  static const char *const func = "dlsync.push_dep";
  static char *keywords[] = {"device", "src", "dst", NULL};
  PyObject *device_obj, *src_obj, *dst_obj;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO:push_dep", keywords, &device_obj, &src_obj,
                                   &dst_obj))
    return NULL;
  DLDevice device;
  void *src = NULL, *dst = NULL;
  if (dl_sync_py_device(func, device_obj, &device) != 0 ||
      dl_sync_py_stream_handle(func, "src", src_obj, &src) != 0 ||
      dl_sync_py_stream_handle(func, "dst", dst_obj, &dst) != 0)
    return NULL;
  PyThreadState *thread = PyEval_SaveThread();
  int status = dl_sync_push_dep(dl_sync_stream_view(device, src), dl_sync_stream_view(device, dst));
  PyEval_RestoreThread(thread);
  if (status != DL_SYNC_OK) return dl_sync_py_raise(status);
  Py_RETURN_NONE;
}

PyMethodDef dl_sync_py_exchange_methods[] = {
    {"export", (PyCFunction)(void (*)(void))py_export, METH_VARARGS | METH_KEYWORDS, export_doc},
    {"push_dep", (PyCFunction)(void (*)(void))py_push_dep, METH_VARARGS | METH_KEYWORDS,
     push_dep_doc},
    {NULL, NULL, 0, NULL},
};
