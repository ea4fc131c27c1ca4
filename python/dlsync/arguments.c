/* SPDX-License-Identifier: Apache-2.0 */
/* Vectorcall argument matching for the module's functions: positional arguments, then
   keywords by name, with CPython's own messages for the calls it would refuse. */
#include "module.h"

static const dl_sync_py_signature *const signatures[] = {
    &dl_sync_py_export_signature,        &dl_sync_py_push_dep_signature,
    &dl_sync_py_import_signature,        &dl_sync_py_stream_from_arg_signature,
    &dl_sync_py_stream_to_arg_signature, &dl_sync_py_group_wait_signature,
    &dl_sync_py_time_export_signature,   &dl_sync_py_tensor_release_signature,
};
enum { SIGNATURES = sizeof signatures / sizeof signatures[0] };

int dl_sync_py_signatures_init(PyObject *module) {
  (void)module;
  for (size_t s = 0; s < SIGNATURES; s++)
    for (Py_ssize_t i = 0; i < signatures[s]->count; i++)
      if (signatures[s]->interned[i] == NULL &&
          (signatures[s]->interned[i] = PyUnicode_InternFromString(signatures[s]->names[i])) ==
              NULL)
        return -1;
  return 0;
}

static PyObject *py_testing_keyword_names_interned(PyObject *module, PyObject *unused) {
  (void)module;
  (void)unused;
  for (size_t s = 0; s < SIGNATURES; s++)
    for (Py_ssize_t i = 0; i < signatures[s]->count; i++)
      if (signatures[s]->interned[i] == NULL) Py_RETURN_FALSE;
  Py_RETURN_TRUE;
}

PyMethodDef dl_sync_py_argument_methods[] = {
    {"_testing_keyword_names_interned", py_testing_keyword_names_interned, METH_NOARGS,
     "_testing_keyword_names_interned()\n--\n\nWhether every keyword name is interned."},
    {NULL, NULL, 0, NULL},
};

/* Call sites pass interned keyword strings: a pointer compare finds them, and a string
   compare the rest. The names were interned at initialization: this only reads them. */
static Py_ssize_t keyword_index(const dl_sync_py_signature *signature, PyObject *keyword) {
  for (Py_ssize_t i = 0; i < signature->count; i++)
    if (signature->interned[i] == keyword) return i;
  for (Py_ssize_t i = 0; i < signature->count; i++)
    if (PyUnicode_CompareWithASCIIString(keyword, signature->names[i]) == 0) return i;
  return -1;
}

int dl_sync_py_match_keywords(const dl_sync_py_signature *signature, PyObject *const *args,
                              Py_ssize_t nargs, PyObject *kwnames, PyObject **out) {
  const Py_ssize_t count = signature->count;
  if (nargs > count) {
    PyErr_Format(PyExc_TypeError, "%s() takes %zd positional arguments but %zd were given",
                 signature->name, count, nargs);
    return -1;
  }
  for (Py_ssize_t i = 0; i < count; i++) out[i] = i < nargs ? args[i] : NULL;
  Py_ssize_t keywords = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t k = 0; k < keywords; k++) {
    PyObject *keyword = PyTuple_GET_ITEM(kwnames, k);
    Py_ssize_t i = keyword_index(signature, keyword);
    if (i < 0) {
      PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%U'", signature->name,
                   keyword);
      return -1;
    }
    if (out[i] != NULL) {
      PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", signature->name,
                   signature->names[i]);
      return -1;
    }
    out[i] = args[nargs + k];
  }
  for (Py_ssize_t i = 0; i < count; i++)
    if (out[i] == NULL) {
      PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s' (pos %zd)",
                   signature->name, signature->names[i], i + 1);
      return -1;
    }
  return 0;
}
