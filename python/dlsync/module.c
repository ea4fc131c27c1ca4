/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The dlsync extension module (dlsync._dlsync): dlsync's calls for code whose __dlpack__
 * is Python. The package dlsync re-exports it; dlsync.testing wraps its _sim submodule.
 */
#include "module.h"

/* Every area's functions; a new area adds its table here. */
static PyMethodDef *const areas[] = {
    dl_sync_py_exchange_methods,       dl_sync_py_convention_methods,   dl_sync_py_policy_methods,
    dl_sync_py_group_methods,          dl_sync_py_runtime_methods,      dl_sync_py_status_methods,
    dl_sync_py_release_methods,        dl_sync_py_null_backend_methods, dl_sync_py_import_methods,
    dl_sync_py_exchange_table_methods, dl_sync_py_driver_gate_methods,  dl_sync_py_argument_methods,
};

static int add_constants(PyObject *module) {
  const struct {
    const char *name;
    long value;
  } constants[] = {
      {"CAPTURE_STRICT", DL_SYNC_CAPTURE_STRICT},
      {"CAPTURE_NONE_IS_NO_SYNC", DL_SYNC_CAPTURE_NONE_IS_NO_SYNC},
      {"STREAM_LEGACY", (long)(intptr_t)DL_SYNC_STREAM_LEGACY},
      {"STREAM_PER_THREAD", (long)(intptr_t)DL_SYNC_STREAM_PER_THREAD},
      {"RELEASED_NOW", DL_SYNC_RELEASED_NOW},
      {"RELEASED_ORDERED", DL_SYNC_RELEASED_ORDERED},
      {"RELEASE_DEFERRED", DL_SYNC_RELEASE_DEFERRED},
      {"RELEASE_GRAPH", DL_SYNC_RELEASE_GRAPH},
  };
  for (size_t i = 0; i < sizeof constants / sizeof constants[0]; i++)
    if (PyModule_AddIntConstant(module, constants[i].name, constants[i].value) < 0) return -1;
  PyObject *version = PyUnicode_FromFormat("%d.%d.%d", DL_SYNC_VERSION_MAJOR, DL_SYNC_VERSION_MINOR,
                                           DL_SYNC_VERSION_PATCH);
  if (version == NULL) return -1;
  if (PyModule_AddObject(module, "__version__", version) < 0) {
    Py_DECREF(version);
    return -1;
  }
  return 0;
}

/* The process's state that areas build before any of their functions may run, each once
   per process (the library they wrap is one per process: its backends, its release thread,
   the simulated device), whichever interpreter or module object executes first. Each takes
   the module being executed; 0, or -1 with an exception. A new area's state is built here,
   and nowhere lazily: a function called from a gc callback or __del__ while it was half
   built would see it so. The GIL (held during execution) makes "once" exact. */
static int (*const process_inits[])(PyObject *module) = {
    dl_sync_py_stream_keys_init,    dl_sync_py_signatures_init, dl_sync_py_exchange_import_init,
    dl_sync_py_exchange_table_init, dl_sync_py_sim_init,
};
static int process_initialized;

/* What each module object gets: the functions, the constants, ExchangeArray, _sim. */
static int module_exec(PyObject *module) {
  if (!process_initialized) {
    for (size_t i = 0; i < sizeof process_inits / sizeof process_inits[0]; i++)
      if (process_inits[i](module) < 0) return -1;
    process_initialized = 1;
  }
  for (size_t i = 0; i < sizeof areas / sizeof areas[0]; i++)
    if (PyModule_AddFunctions(module, areas[i]) < 0) return -1;
  if (add_constants(module) < 0) return -1;
  PyObject *array_type = dl_sync_py_exchange_array_type();
  if (array_type == NULL || PyModule_AddObject(module, "ExchangeArray", array_type) < 0) {
    Py_XDECREF(array_type);
    return -1;
  }
  PyObject *sim = dl_sync_py_sim_module();
  if (sim == NULL || PyModule_AddObject(module, "_sim", sim) < 0) {
    Py_XDECREF(sim);
    return -1;
  }
  return 0;
}

/* Multi-phase initialization (PEP 489). The module keeps no state of its own: all it holds
   is the process's (above). From 3.12 it says where it may be imported: interpreters that
   share the main GIL, not those with their own (the process's state is not theirs to
   share). The GIL is declared used (docs/python.md says what free-threading needs). */
static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, (void *)module_exec},
#if PY_VERSION_HEX >= 0x030C0000
    {Py_mod_multiple_interpreters, Py_MOD_MULTIPLE_INTERPRETERS_SUPPORTED},
#endif
#if PY_VERSION_HEX >= 0x030D0000
    {Py_mod_gil, Py_MOD_GIL_USED},
#endif
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "dlsync._dlsync",
    .m_doc = "dlsync: stream synchronization around DLPack exchange, for __dlpack__ in Python.",
    .m_size = 0,
    .m_slots = module_slots,
};

#if PY_VERSION_HEX < 0x03090000 && defined(__GNUC__)
/* Before 3.9, PyMODINIT_FUNC leaves the function to -fvisibility=hidden. */
#define DL_SYNC_PY_INIT __attribute__((visibility("default"))) PyMODINIT_FUNC
#else
#define DL_SYNC_PY_INIT PyMODINIT_FUNC
#endif
DL_SYNC_PY_INIT PyInit__dlsync(void);
DL_SYNC_PY_INIT PyInit__dlsync(void) {
  return PyModuleDef_Init(&module_def);
}
