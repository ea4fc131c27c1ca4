/* SPDX-License-Identifier: Apache-2.0 */
// dlsync_testing.h and dlsync_python.h in a C++ producer: compiles with -Wall -Wextra -Werror.
#include <Python.h>

#include <dlsync/dlsync.h>
#include <dlsync_python.h>
#include <dlsync_testing.h>

extern "C" PyObject *use_simulated_device(PyObject *module, PyObject *sim);
extern "C" PyObject *use_simulated_device(PyObject *module, PyObject *sim) {
  static_cast<void>(module);
  if (dl_sync_testing_install(sim) != 0) return nullptr;
  Py_RETURN_NONE;
}

extern "C" PyObject *export_default(PyObject *module, PyObject *unused);
extern "C" PyObject *export_default(PyObject *module, PyObject *unused) {
  static_cast<void>(module);
  static_cast<void>(unused);
  DLDevice device = {kDLCUDA, 0};
  if (dl_sync_python_check(
          dl_sync_export(dl_sync_stream_view(device, nullptr), dl_sync_stream_arg_int(-1))) != 0)
    return dl_sync_python_raise(DL_SYNC_EINVAL);
  Py_RETURN_NONE;
}
