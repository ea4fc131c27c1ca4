/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A producer written in C whose DLPack exchange table fails the way a framework's can:
 * its managed_tensor_from_py_object_no_sync sets an exception the way C code does
 * (PyErr_SetNone(PyExc_KeyboardInterrupt), whose value Python 3.11 and before make only when
 * the exception is normalized; SystemExit; a ValueError) or none at all, and returns -1.
 * fail_with(kind) picks the failure of the next conversions; fail_with(None) lets them
 * succeed (a CPU tensor of 4 bytes whose deleter deletions() counts). The CMake build
 * makes it the module hostile_table, for test_exchange_import.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>

#include <dlsync/dlpack.h>

static char failure[32]; /* "" succeeds */
static long deletions;
static unsigned char memory[4];
static int64_t shape[1] = {4};

static void deleter(DLManagedTensorVersioned *tensor) {
  deletions++;
  PyMem_RawFree(tensor);
}

static int from_py_object(void *object, DLManagedTensorVersioned **out) {
  (void)object;
  if (strcmp(failure, "interrupt") == 0) {
    PyErr_SetNone(PyExc_KeyboardInterrupt);
    return -1;
  }
  if (strcmp(failure, "exit") == 0) {
    PyErr_SetObject(PyExc_SystemExit, Py_None);
    return -1;
  }
  if (strcmp(failure, "value") == 0) {
    PyErr_SetString(PyExc_ValueError, "hostile_table: this tensor is refused");
    return -1;
  }
  if (strcmp(failure, "nothing") == 0) return -1;
  DLManagedTensorVersioned *t = PyMem_RawCalloc(1, sizeof *t);
  if (t == NULL) {
    PyErr_NoMemory();
    return -1;
  }
  t->version = (DLPackVersion){1, 3};
  t->deleter = deleter;
  t->dl_tensor = (DLTensor){
      .data = memory, .device = {kDLCPU, 0}, .ndim = 1, .dtype = {kDLUInt, 8, 1}, .shape = shape};
  *out = t;
  return 0;
}

static int current_work_stream(DLDeviceType type, int32_t id, void **out) {
  (void)type;
  (void)id;
  *out = NULL;
  return 0;
}

static DLPackExchangeAPI table = {
    .header = {.version = {1, 3}},
    .managed_tensor_from_py_object_no_sync = from_py_object,
    .current_work_stream = current_work_stream,
};

static PyTypeObject HostileType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "hostile_table.Hostile",
    .tp_basicsize = sizeof(PyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_doc = "An object whose type's exchange table fails as fail_with() says.",
};

static PyObject *fail_with(PyObject *module, PyObject *kind) {
  (void)module;
  if (kind == Py_None) {
    failure[0] = '\0';
    Py_RETURN_NONE;
  }
  const char *text = PyUnicode_AsUTF8(kind);
  if (text == NULL) return NULL;
  PyOS_snprintf(failure, sizeof failure, "%s", text);
  Py_RETURN_NONE;
}

static PyObject *py_deletions(PyObject *module, PyObject *unused) {
  (void)module;
  (void)unused;
  return PyLong_FromLong(deletions);
}

static PyMethodDef methods[] = {
    {"fail_with", fail_with, METH_O,
     "fail_with(kind): 'interrupt', 'exit', 'value', 'nothing' or None"},
    {"deletions", py_deletions, METH_NOARGS, "deletions(): how many tensors were deleted"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, .m_name = "hostile_table",
                                        .m_size = -1, .m_methods = methods};

PyMODINIT_FUNC PyInit_hostile_table(void);
PyMODINIT_FUNC PyInit_hostile_table(void) {
  if (PyType_Ready(&HostileType) < 0) return NULL;
  PyObject *api = PyCapsule_New(&table, "dlpack_exchange_api", NULL);
  if (api == NULL ||
      PyDict_SetItemString(HostileType.tp_dict, "__dlpack_c_exchange_api__", api) < 0) {
    Py_XDECREF(api);
    return NULL;
  }
  Py_DECREF(api);
  PyType_Modified(&HostileType);
  PyObject *module = PyModule_Create(&module_def);
  if (module == NULL) return NULL;
  Py_INCREF(&HostileType);
  if (PyModule_AddObject(module, "Hostile", (PyObject *)&HostileType) < 0) {
    Py_DECREF(&HostileType);
    Py_DECREF(module);
    return NULL;
  }
  return module;
}
