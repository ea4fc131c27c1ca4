/* SPDX-License-Identifier: Apache-2.0 */
// dlsync_testing.h in a C++ producer: compiles with -Wall -Wextra -Werror.
#include <Python.h>

#include <dlsync/dlsync.h>
#include <dlsync_testing.h>

extern "C" PyObject *use_simulated_device(PyObject *module, PyObject *sim);
extern "C" PyObject *use_simulated_device(PyObject *module, PyObject *sim) {
  static_cast<void>(module);
  if (dl_sync_testing_install(sim) != 0) return nullptr;
  Py_RETURN_NONE;
}
