/* SPDX-License-Identifier: Apache-2.0 */
/* dlsync statuses as the Python exceptions dlsync/status.h lists: the header producers
   use (include/dlsync_python.h) is the one home of the mapping. */
#include "binding.h"
#include "include/dlsync_python.h"

PyObject *dl_sync_py_raise(int status) {
  return dl_sync_python_raise(status);
}
