/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sim_binding.h: what the two files of the _sim submodule share: sim.c (installing,
 * streams, capture, verdicts) and sim_kernels.c (work on the streams). Need the GIL.
 */
#ifndef DL_SYNC_PY_SIM_BINDING_H_
#define DL_SYNC_PY_SIM_BINDING_H_

#include <dlsync/sim.h>

#include "module.h"

/** Raises RuntimeError naming the simulator call and its error. Returns NULL. */
PyObject *dl_sync_py_sim_raise(const char *call, int error);

/** Runs a simulator call without the GIL (it may wait for streams); raises on failure. */
#define DL_SYNC_PY_SIM_CHECK(call, expr)                                                  \
  do {                                                                                    \
    PyThreadState *sim_thread_ = PyEval_SaveThread();                                     \
    int sim_error_ = (expr);                                                              \
    PyEval_RestoreThread(sim_thread_);                                                    \
    if (sim_error_ != DL_SYNC_SIM_SUCCESS) return dl_sync_py_sim_raise(call, sim_error_); \
  } while (0)

/** A stream of the simulator: one made since the last reset, None/1 (legacy) or 2
    (per-thread); ValueError for any other handle. */
int dl_sync_py_sim_stream(PyObject *obj, dl_sync_sim_stream **out);

/** fill, copy, hold, release, host_access (sim_kernels.c). */
extern PyMethodDef dl_sync_py_sim_kernel_methods[];
/** Opens every gate, so that a reset can drain the streams. */
void dl_sync_py_sim_open_gates(void);
/** Frees the kernels' arguments and gates; after a reset only. */
void dl_sync_py_sim_release_kernels(void);

#endif /* DL_SYNC_PY_SIM_BINDING_H_ */
