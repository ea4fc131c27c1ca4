/* SPDX-License-Identifier: Apache-2.0 */
/*
 * module.h: the areas of the dlsync extension module. Each area is one file with its
 * method table; module.c adds every table to the module. A new area is a new file, a
 * declaration here and one line in module.c's list (and its part of _dlsync.pyi).
 */
#ifndef DL_SYNC_PY_MODULE_H_
#define DL_SYNC_PY_MODULE_H_

#include "binding.h"

/* export, push_dep (exchange.c) */
extern PyMethodDef dl_sync_py_exchange_methods[];
/* stream_from_arg, stream_to_arg (conventions.c) */
extern PyMethodDef dl_sync_py_convention_methods[];
/* set_capture_policy, get_capture_policy (policy.c) */
extern PyMethodDef dl_sync_py_policy_methods[];
/* group_wait (group.c) */
extern PyMethodDef dl_sync_py_group_methods[];
/* _runtime, behind dlsync.runtime (runtime.c) */
extern PyMethodDef dl_sync_py_runtime_methods[];
/* tensor_release, release_poll (release.c) */
extern PyMethodDef dl_sync_py_release_methods[];
/* _raise_status (status.c) */
extern PyMethodDef dl_sync_py_status_methods[];

/* The simulated device for dlsync.testing, a submodule named _sim (sim.c). */
PyObject *dl_sync_py_sim_module(void);

#endif /* DL_SYNC_PY_MODULE_H_ */
