/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sim_binding.h: what the files of the _sim submodule share: sim.c (installing, streams,
 * capture, verdicts) and sim_kernels.c (work on the streams) both use sim_streams.c (the
 * streams made), and sim.c uses the kernels. Need the GIL.
 */
#ifndef DL_SYNC_PY_SIM_BINDING_H_
#define DL_SYNC_PY_SIM_BINDING_H_

#include <dlsync/sim.h>

#include "module.h"

/** Raises RuntimeError naming the simulator call and its error. Returns NULL. */
static inline PyObject *dl_sync_py_sim_raise(const char *call, int error) {
  PyErr_Format(PyExc_RuntimeError, "dlsync.testing: %s failed: %s (%d)", call,
               dl_sync_sim_error_name(error), error);
  return NULL;
}

/** Runs a simulator call without the GIL (it may wait for streams); raises on failure. */
#define DL_SYNC_PY_SIM_CHECK(call, expr)                                                  \
  do {                                                                                    \
    PyThreadState *sim_thread_ = PyEval_SaveThread();                                     \
    int sim_error_ = (expr);                                                              \
    PyEval_RestoreThread(sim_thread_);                                                    \
    if (sim_error_ != DL_SYNC_SIM_SUCCESS) return dl_sync_py_sim_raise(call, sim_error_); \
  } while (0)

/** A stream of the simulator: one made since the last reset, None/1 (legacy) or 2
    (per-thread); ValueError for any other handle (sim_streams.c). */
int dl_sync_py_sim_stream(PyObject *obj, dl_sync_sim_stream **out);
/** The set of streams made (at the module's creation), a new one's handle as an int (NULL
    with an exception), and forgetting them all at a reset. */
int dl_sync_py_sim_streams_init(void);
PyObject *dl_sync_py_sim_stream_made(dl_sync_sim_stream *stream);
void dl_sync_py_sim_streams_forget(void);

/** fill, copy, hold, release, host_access (sim_kernels.c). */
extern PyMethodDef dl_sync_py_sim_kernel_methods[];
/** Opens every gate, so that a reset can drain the streams. */
void dl_sync_py_sim_open_gates(void);
/** Frees the kernels' arguments and gates; after a reset only. */
void dl_sync_py_sim_release_kernels(void);

#endif /* DL_SYNC_PY_SIM_BINDING_H_ */
