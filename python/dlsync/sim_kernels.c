/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Work on the simulated streams for dlsync.testing: kernels that write and copy Python
 * buffers (declaring their accesses to the race checker), gates that hold a stream until
 * Python releases them, and host accesses.
 */
#include <pthread.h>
#include <string.h>

#include "sim_binding.h"

/* A launched kernel's arguments, with the buffers it uses held (Python cannot free or
   resize them). Kept until the simulator is reset, which waits for every kernel and
   graph: a captured kernel may run any number of times until then. */
typedef struct kernel_args {
  struct kernel_args *next;
  Py_buffer src; /* copy only; src.obj is NULL otherwise */
  Py_buffer dst; /* fill and copy; dst.obj is NULL for a gate */
  unsigned char value;
  /* A gate: the kernel waits until open is set. */
  pthread_mutex_t lock;
  pthread_cond_t opened;
  int open;
} kernel_args;

/* The launched kernels, newest first, under launched_lock: a lock held only to link,
   find or take them out, never across Python code or the simulator (a buffer's release
   may run Python code), so that no thread waits for it long, the GIL held or not. */
static pthread_mutex_t launched_lock = PTHREAD_MUTEX_INITIALIZER;
static kernel_args *launched;

void dl_sync_py_sim_release_kernels(void) {
  pthread_mutex_lock(&launched_lock);
  kernel_args *taken = launched;
  launched = NULL;
  pthread_mutex_unlock(&launched_lock);
  while (taken != NULL) {
    kernel_args *args = taken;
    taken = args->next;
    if (args->src.obj != NULL) PyBuffer_Release(&args->src);
    if (args->dst.obj != NULL) PyBuffer_Release(&args->dst);
    pthread_cond_destroy(&args->opened);
    pthread_mutex_destroy(&args->lock);
    PyMem_RawFree(args);
  }
}

static void open_gate(kernel_args *gate) {
  pthread_mutex_lock(&gate->lock);
  gate->open = 1;
  pthread_cond_broadcast(&gate->opened);
  pthread_mutex_unlock(&gate->lock);
}

void dl_sync_py_sim_open_gates(void) {
  pthread_mutex_lock(&launched_lock);
  for (kernel_args *args = launched; args != NULL; args = args->next) open_gate(args);
  pthread_mutex_unlock(&launched_lock);
}

static void fill_kernel(void *arg) {
  kernel_args *args = arg;
  memset(args->dst.buf, args->value, (size_t)args->dst.len);
}

static void copy_kernel(void *arg) {
  kernel_args *args = arg;
  Py_ssize_t n = args->src.len < args->dst.len ? args->src.len : args->dst.len;
  memcpy(args->dst.buf, args->src.buf, (size_t)n);
}

static void gate_kernel(void *arg) {
  kernel_args *gate = arg;
  pthread_mutex_lock(&gate->lock);
  while (!gate->open) pthread_cond_wait(&gate->opened, &gate->lock);
  pthread_mutex_unlock(&gate->lock);
}

static kernel_args *new_kernel_args(void) {
  kernel_args *args = PyMem_RawCalloc(1, sizeof *args);
  if (args == NULL) {
    PyErr_NoMemory();
    return NULL;
  }
  pthread_mutex_init(&args->lock, NULL);
  pthread_cond_init(&args->opened, NULL);
  return args;
}

static void free_unlaunched(kernel_args *args) {
  if (args->src.obj != NULL) PyBuffer_Release(&args->src);
  if (args->dst.obj != NULL) PyBuffer_Release(&args->dst);
  pthread_cond_destroy(&args->opened);
  pthread_mutex_destroy(&args->lock);
  PyMem_RawFree(args);
}

/* Keeps args until the next reset and enqueues fn(args) on stream. */
static int launch(dl_sync_sim_stream *stream, kernel_args *args, const char *name,
                  void (*fn)(void *), const dl_sync_sim_access *accesses, size_t count) {
  pthread_mutex_lock(&launched_lock);
  args->next = launched;
  launched = args;
  pthread_mutex_unlock(&launched_lock);
  PyThreadState *thread = PyEval_SaveThread();
  int error = dl_sync_sim_launch(stream, name, fn, args, accesses, count);
  PyEval_RestoreThread(thread);
  if (error != DL_SYNC_SIM_SUCCESS) {
    dl_sync_py_sim_raise("dl_sync_sim_launch", error);
    return -1;
  }
  return 0;
}

/* fill(stream, buffer, value): a kernel writing value into every byte of buffer. */
static PyObject *sim_fill(PyObject *module, PyObject *args_tuple) {
  (void)module;
  PyObject *stream_obj;
  unsigned char value;
  dl_sync_sim_stream *stream;
  kernel_args *args = new_kernel_args();
  if (args == NULL) return NULL;
  if (!PyArg_ParseTuple(args_tuple, "Ow*b:fill", &stream_obj, &args->dst, &value) ||
      dl_sync_py_sim_stream(stream_obj, &stream) != 0) {
    free_unlaunched(args);
    return NULL;
  }
  args->value = value;
  dl_sync_sim_access access = {args->dst.buf, DL_SYNC_SIM_WRITE};
  if (launch(stream, args, "dlsync.testing.fill", fill_kernel, &access, 1) != 0) return NULL;
  Py_RETURN_NONE;
}

/* The memory of a DLPack capsule's tensor (not yet consumed; contiguous), as a read-only
   buffer that holds the capsule. */
static int tensor_buffer(PyObject *capsule, Py_buffer *out) {
  const DLTensor *t = NULL;
  if (PyCapsule_IsValid(capsule, "dltensor_versioned"))
    t = &((DLManagedTensorVersioned *)PyCapsule_GetPointer(capsule, "dltensor_versioned"))
             ->dl_tensor;
  else if (PyCapsule_IsValid(capsule, "dltensor"))
    t = &((DLManagedTensor *)PyCapsule_GetPointer(capsule, "dltensor"))->dl_tensor;
  if (t == NULL || t->ndim < 0 || (t->ndim > 0 && t->shape == NULL)) {
    PyErr_Format(PyExc_TypeError,
                 "dlsync.testing.copy: src %R is no DLPack capsule of a tensor not yet consumed",
                 capsule);
    return -1;
  }
  Py_ssize_t bytes = ((Py_ssize_t)t->dtype.bits * t->dtype.lanes + 7) / 8;
  for (int32_t i = 0; i < t->ndim; i++) bytes *= (Py_ssize_t)t->shape[i];
  return PyBuffer_FillInfo(out, capsule, (char *)t->data + t->byte_offset, bytes, 1, PyBUF_SIMPLE);
}

/* copy(stream, src, dst): a kernel copying src's bytes into dst; src may be a DLPack
   capsule (the consumer reads the tensor it imported). */
static PyObject *sim_copy(PyObject *module, PyObject *args_tuple) {
  (void)module;
  PyObject *stream_obj, *src;
  dl_sync_sim_stream *stream;
  kernel_args *args = new_kernel_args();
  if (args == NULL) return NULL;
  if (!PyArg_ParseTuple(args_tuple, "OOw*:copy", &stream_obj, &src, &args->dst) ||
      (PyCapsule_CheckExact(src) ? tensor_buffer(src, &args->src)
                                 : PyObject_GetBuffer(src, &args->src, PyBUF_SIMPLE)) != 0 ||
      dl_sync_py_sim_stream(stream_obj, &stream) != 0) {
    free_unlaunched(args);
    return NULL;
  }
  dl_sync_sim_access accesses[] = {{args->src.buf, DL_SYNC_SIM_READ},
                                   {args->dst.buf, DL_SYNC_SIM_WRITE}};
  if (launch(stream, args, "dlsync.testing.copy", copy_kernel, accesses, 2) != 0) return NULL;
  Py_RETURN_NONE;
}

/* hold(stream) -> gate: a kernel that waits until release(gate); the stream's later work
   waits behind it. */
static PyObject *sim_hold(PyObject *module, PyObject *stream_obj) {
  (void)module;
  dl_sync_sim_stream *stream;
  if (dl_sync_py_sim_stream(stream_obj, &stream) != 0) return NULL;
  kernel_args *gate = new_kernel_args();
  if (gate == NULL) return NULL;
  if (launch(stream, gate, "dlsync.testing.hold", gate_kernel, NULL, 0) != 0) return NULL;
  return PyLong_FromVoidPtr(gate);
}

/* release(gate): lets a held stream go on. */
static PyObject *sim_release(PyObject *module, PyObject *gate_obj) {
  (void)module;
  void *wanted = PyLong_Check(gate_obj) ? PyLong_AsVoidPtr(gate_obj) : NULL;
  if (wanted == NULL && PyErr_Occurred()) return NULL;
  int found = 0;
  pthread_mutex_lock(&launched_lock);
  for (kernel_args *args = launched; args != NULL && !found; args = args->next) {
    found = args == wanted && args->dst.obj == NULL && args->src.obj == NULL;
    if (found) open_gate(args);
  }
  pthread_mutex_unlock(&launched_lock);
  if (found) Py_RETURN_NONE;
  return PyErr_Format(PyExc_ValueError,
                      "dlsync.testing: %R is not a gate of the simulated device (made by hold "
                      "since it was opened)",
                      gate_obj);
}

static PyObject *sim_release_all(PyObject *module, PyObject *unused) {
  (void)module;
  (void)unused;
  dl_sync_py_sim_open_gates();
  Py_RETURN_NONE;
}

/* host_access(buffer, mode): declares that the host reads (1) and/or writes (2) buffer. */
static PyObject *sim_host_access(PyObject *module, PyObject *args) {
  (void)module;
  Py_buffer buffer;
  int mode;
  if (!PyArg_ParseTuple(args, "y*i:host_access", &buffer, &mode)) return NULL;
  int error = dl_sync_sim_host_access("host", buffer.buf, mode);
  PyBuffer_Release(&buffer);
  if (error != DL_SYNC_SIM_SUCCESS) return dl_sync_py_sim_raise("dl_sync_sim_host_access", error);
  Py_RETURN_NONE;
}

PyMethodDef dl_sync_py_sim_kernel_methods[] = {
    {"fill", sim_fill, METH_VARARGS, "fill(stream, buffer, value, /)\n--\n\n"},
    {"copy", sim_copy, METH_VARARGS, "copy(stream, src, dst, /)\n--\n\n"},
    {"hold", sim_hold, METH_O, "hold(stream, /)\n--\n\nReturns gate."},
    {"release", sim_release, METH_O, "release(gate, /)\n--\n\n"},
    {"release_all", sim_release_all, METH_NOARGS, "release_all()\n--\n\n"},
    {"host_access", sim_host_access, METH_VARARGS, "host_access(buffer, mode, /)\n--\n\n"},
    {NULL, NULL, 0, NULL},
};
