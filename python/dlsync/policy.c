/* SPDX-License-Identifier: Apache-2.0 */
/* dlsync.set_capture_policy: what stream=None means while the producer's stream captures. */
#include "module.h"

PyDoc_STRVAR(
    set_capture_policy_doc,
    "set_capture_policy(policy, /)\n"
    "--\n"
    "\n"
    "Sets the process-wide answer to ``stream=None`` (ROCm also 0; CUDA also 1) while the\n"
    "producer's stream is capturing a graph: ``CAPTURE_STRICT`` (the default) raises\n"
    "BufferError saying what to pass instead; ``CAPTURE_NONE_IS_NO_SYNC`` does not\n"
    "synchronize, as PyTorch chose. Any other value is a ValueError.\n");

static PyObject *py_set_capture_policy(PyObject *module, PyObject *policy_obj) {
  (void)module;
  if (!PyLong_Check(policy_obj) || PyBool_Check(policy_obj)) {
    PyErr_Format(PyExc_TypeError,
                 "dlsync.set_capture_policy: policy=%R: expected dlsync.CAPTURE_STRICT or "
                 "dlsync.CAPTURE_NONE_IS_NO_SYNC, not %.100s",
                 policy_obj, Py_TYPE(policy_obj)->tp_name);
    return NULL;
  }
  int overflow = 0;
  long long policy = PyLong_AsLongLongAndOverflow(policy_obj, &overflow);
  if (policy == -1 && PyErr_Occurred()) return NULL;
  if (overflow != 0 || policy < INT_MIN || policy > INT_MAX) {
    PyErr_Format(PyExc_ValueError,
                 "dlsync.set_capture_policy: policy=%R: expected dlsync.CAPTURE_STRICT (%d) or "
                 "dlsync.CAPTURE_NONE_IS_NO_SYNC (%d)",
                 policy_obj, DL_SYNC_CAPTURE_STRICT, DL_SYNC_CAPTURE_NONE_IS_NO_SYNC);
    return NULL;
  }
  int status = dl_sync_set_capture_policy((int)policy);
  if (status != DL_SYNC_OK) return dl_sync_py_raise(status);
  Py_RETURN_NONE;
}

static PyObject *py_get_capture_policy(PyObject *module, PyObject *unused) {
  (void)module;
  (void)unused;
  return PyLong_FromLong(dl_sync_get_capture_policy());
}

PyMethodDef dl_sync_py_policy_methods[] = {
    {"set_capture_policy", py_set_capture_policy, METH_O, set_capture_policy_doc},
    {"get_capture_policy", py_get_capture_policy, METH_NOARGS,
     "get_capture_policy()\n--\n\nThe process-wide capture policy."},
    {NULL, NULL, 0, NULL},
};
