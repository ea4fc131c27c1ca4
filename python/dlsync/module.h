/* SPDX-License-Identifier: Apache-2.0 */
/*
 * module.h: the areas of the dlsync extension module. Each area is one file with its
 * method table; module.c adds every table to the module. A new area is a new file, a
 * declaration here and one line in module.c's list (and its part of _dlsync.pyi).
 */
#ifndef DL_SYNC_PY_MODULE_H_
#define DL_SYNC_PY_MODULE_H_

#include "binding.h"

/* A function's parameters, all required, for dl_sync_py_arguments (arguments.c). */
typedef struct dl_sync_py_signature {
  const char *name; /* as Python shows it: "export" */
  Py_ssize_t count;
  const char *const *names;
  PyObject **interned; /* count slots, filled at module initialization, never changed after */
} dl_sync_py_signature;

/* Every signature, each in its area's file: dl_sync_py_signatures_init interns their names
   once per process, before any function may run (module.c), so that a call by keyword
   reads them and never writes. A new signature is added to the list in arguments.c. */
extern const dl_sync_py_signature dl_sync_py_export_signature, dl_sync_py_push_dep_signature,
    dl_sync_py_import_signature, dl_sync_py_stream_from_arg_signature,
    dl_sync_py_stream_to_arg_signature, dl_sync_py_group_wait_signature,
    dl_sync_py_time_export_signature, dl_sync_py_tensor_release_signature;
int dl_sync_py_signatures_init(PyObject *module);
/* The module's _testing_keyword_names_interned(): whether every slot is filled. */
extern PyMethodDef dl_sync_py_argument_methods[];

/* The arguments of a METH_FASTCALL | METH_KEYWORDS call, in signature's order (borrowed):
   args itself when all are positional, else matched into scratch (count slots). NULL with
   TypeError, as CPython words it, for a call the signature does not take. */
int dl_sync_py_match_keywords(const dl_sync_py_signature *signature, PyObject *const *args,
                              Py_ssize_t nargs, PyObject *kwnames, PyObject **scratch);
static inline PyObject *const *dl_sync_py_arguments(const dl_sync_py_signature *signature,
                                                    PyObject *const *args, Py_ssize_t nargs,
                                                    PyObject *kwnames, PyObject **scratch) {
  if (kwnames == NULL && nargs == signature->count) return args; /* the common call */
  return dl_sync_py_match_keywords(signature, args, nargs, kwnames, scratch) == 0 ? scratch : NULL;
}

/* export's three arguments (device, producer_stream, stream) as the producer's stream
   and the consumer's argument (exchange.c); -1 with the exception set. */
int dl_sync_py_export_arguments(const char *func, PyObject *const *args, dl_sync_stream *producer,
                                dl_sync_stream_arg *consumer);
/* dl_sync_export with the GIL let go only while it calls the runtime (inline: dlsync.export's
   path); 0, or -1 with the status's exception set. */
static inline int dl_sync_py_export(dl_sync_stream producer, dl_sync_stream_arg consumer) {
  int status;
  if (!dl_sync_export_calls_runtime(producer, consumer)) { /* -1, its own stream, no streams */
    status = dl_sync_export(producer, consumer);
  } else {
    PyThreadState *thread = PyEval_SaveThread();
    status = dl_sync_export(producer, consumer);
    PyEval_RestoreThread(thread);
  }
  if (status == DL_SYNC_OK) return 0;
  dl_sync_py_raise(status);
  return -1;
}

/* The DLPack exchange table of obj's type (exchange_table.c): *api is NULL when the type has
   none; -1 with an exception set for an attribute that is no table. */
int dl_sync_py_exchange_table(const char *func, PyObject *obj, const DLPackExchangeAPI **api);
/* Interns the table's attribute names; the module's init calls it. */
int dl_sync_py_exchange_table_init(PyObject *module);
/* Raises the exception of a failed exchange call's status for the Python function func,
   with the exception a producer's function set (if any) as its cause; one that is no
   Exception (KeyboardInterrupt) is left as it is. Returns NULL. */
PyObject *dl_sync_py_raise_from_producer(const char *func, int status);
/* Raises the exception of status with the library's message, func (the Python function)
   in place of the C function's name. Returns NULL. */
PyObject *dl_sync_py_raise_in(const char *func, int status);
/* Makes what dlsync.import_tensor uses on every call; the module's init calls it. */
int dl_sync_py_exchange_import_init(PyObject *module);
/* A capsule "dltensor_versioned" that owns tensor: its deleter runs when the capsule goes
   unconsumed. NULL with an exception, the tensor then deleted. */
PyObject *dl_sync_py_tensor_capsule(DLManagedTensorVersioned *tensor);
/* A versioned tensor describing view that owns inner and gives it back with
   give_back(inner) when its deleter runs; NULL without memory. */
DLManagedTensorVersioned *dl_sync_py_wrap_tensor(const DLTensor *view, uint64_t flags, void *inner,
                                                 void (*give_back)(void *inner));

/* A vectorcall function's method table entry. */
#define DL_SYNC_PY_FASTCALL(name, function, doc) \
  { name, (PyCFunction)(void (*)(void))(function), METH_FASTCALL | METH_KEYWORDS, doc }

/* export, push_dep (exchange.c) */
extern PyMethodDef dl_sync_py_exchange_methods[];
/* import_tensor (exchange_import.c) */
extern PyMethodDef dl_sync_py_import_methods[];
/* _exchange_*: what dlsync.testing.check_exchange_api calls a table's entry points with
   (exchange_table.c) */
extern PyMethodDef dl_sync_py_exchange_table_methods[];
/* stream_from_arg, stream_to_arg (conventions.c) */
extern PyMethodDef dl_sync_py_convention_methods[];
/* set_capture_policy, get_capture_policy (policy.c) */
extern PyMethodDef dl_sync_py_policy_methods[];
/* group_wait (group.c) */
extern PyMethodDef dl_sync_py_group_methods[];
/* _runtime, behind dlsync.runtime (runtime.c) */
extern PyMethodDef dl_sync_py_runtime_methods[];
/* tensor_release, release_poll, release_thread (release.c) */
extern PyMethodDef dl_sync_py_release_methods[];
/* Starts the release thread unless the program turned it off (release.c; GIL not held). */
void dl_sync_py_release_thread_ensure(void);
/* _null_backend, _time_export, _time_gil_release: dlsync.testing.NullBackend (null_backend.c) */
extern PyMethodDef dl_sync_py_null_backend_methods[];
/* _driver_gate*: the driver gate of dlsync.audit (driver_gate.c) */
extern PyMethodDef dl_sync_py_driver_gate_methods[];
/* _raise_status (status.c) */
extern PyMethodDef dl_sync_py_status_methods[];

/* dlsync.testing.ExchangeArray, a model producer with an exchange table (exchange_array.c):
   the type, a new reference, or NULL with an exception. */
PyObject *dl_sync_py_exchange_array_type(void);

/* The simulated device for dlsync.testing, a submodule named _sim (sim.c), and the
   process's state behind it (the streams and graphs it made), built once at the module's
   first execution. */
PyObject *dl_sync_py_sim_module(void);
int dl_sync_py_sim_init(PyObject *module);

#endif /* DL_SYNC_PY_MODULE_H_ */
