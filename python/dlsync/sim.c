/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The simulated device for dlsync.testing (the submodule dlsync._dlsync._sim): installs
 * dlsync's simulator backend under chosen device types, makes simulated streams and
 * reads the race checker's verdict; sim_kernels.c runs work on the streams. The Python
 * wrapper (testing.py) is the documented interface; these are its primitives.
 */
#include <dlsync/sim.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "include/dlsync_testing.h"
#include "platform.h"
#include "sim_binding.h"

/* --- installing ----------------------------------------------------------------------- */

enum { MAX_TYPES = DL_SYNC_TESTING_MAX_TYPES, MAX_COPIES = DL_SYNC_TESTING_MAX_COPIES };
/* Whether the simulator is installed, and into what. state_lock guards installed_count and
   the copies below; it is held only to read or change them, never across Python code, the
   runtime or another copy's code, so that a thread waits for it only briefly, and a call
   made meanwhile (from another thread, or from Python code that install runs) meets
   CHANGING and is refused, never a half-built state. installed_types and previous are
   written only by the thread that set CHANGING. */
enum { CLOSED = -1, CHANGING = -2 };
static dl_sync__mutex state_lock = DL_SYNC__MUTEX_INIT;
static int installed_count = CLOSED; /* under state_lock: CLOSED, CHANGING, or the count */
static int32_t installed_types[MAX_TYPES];
static const dl_sync_backend *previous[MAX_TYPES];

/* Other copies of dlsync the simulator was installed into (dlsync_testing.h), detached
   when it closes; under state_lock. */
static struct {
  void (*detach)(void *ctx);
  void *ctx;
} copies[MAX_COPIES];
static int copy_count;

/* RuntimeError for a call that found installed_count so; NULL. */
static PyObject *refuse(int found) {
  PyErr_SetString(PyExc_RuntimeError,
                  found == CHANGING
                      ? "dlsync.testing: the simulated device is being opened or closed (on "
                        "another thread, or by the call that runs this code)"
                  : found == CLOSED ? "dlsync.testing: the simulated device is not open"
                                    : "dlsync.testing: the simulated device is already "
                                      "installed (one at a time; close the other "
                                      "SimulatedDevice first)");
  return NULL;
}

/* Moves installed_count to to, from CLOSED (from_open 0) or from open (1), under the
   lock: its state before, or CHANGING, CLOSED or the count it found otherwise with
   RuntimeError set and *moved 0. */
static int change_state(int from_open, int to, int *moved) {
  dl_sync__mutex_lock(&state_lock);
  int found = installed_count;
  *moved = from_open ? found >= 0 : found == CLOSED;
  if (*moved) installed_count = to;
  dl_sync__mutex_unlock(&state_lock);
  return found;
}

static void set_state(int to) {
  dl_sync__mutex_lock(&state_lock);
  installed_count = to;
  dl_sync__mutex_unlock(&state_lock);
}

static int attach_copy(void (*detach)(void *ctx), void *ctx) {
  dl_sync__mutex_lock(&state_lock);
  int open = installed_count >= 0, full = 0;
  if (open) {
    int known = 0;
    for (int i = 0; i < copy_count; i++)
      known |= copies[i].detach == detach && copies[i].ctx == ctx;
    full = !known && copy_count == MAX_COPIES;
    if (!known && !full) {
      copies[copy_count].detach = detach;
      copies[copy_count].ctx = ctx;
      copy_count++;
    }
  }
  dl_sync__mutex_unlock(&state_lock);
  if (!open) {
    PyErr_SetString(PyExc_RuntimeError,
                    "dlsync.testing: the simulated device is not open (install it into another "
                    "copy of dlsync inside the with block)");
    return -1;
  }
  if (full) {
    PyErr_Format(PyExc_RuntimeError,
                 "dlsync.testing: the simulated device is installed into %d other copies of "
                 "dlsync already, the most it serves",
                 MAX_COPIES);
    return -1;
  }
  return 0;
}

/* The executable graphs made since the last reset, so that a stray int never reaches the
   simulator as one: a set of ints, made once at module initialization, changed only by
   the set's own operations (as the streams' set, sim_streams.c). */
static PyObject *created_graphs;

/* What SimulatedDevice.backend_capsule points to; its types are filled at install. */
static dl_sync_testing_device testing_device = {
    .abi = DL_SYNC_TESTING_ABI,
    .dlsync_version = DL_SYNC_VERSION_HEX,
    .device_types = installed_types,
    .attach = attach_copy,
};

/* The simulator as this module's own copy of dlsync uses it: each call on a stream also
   notes whether the calling thread holds the GIL. The binding releases it around every
   call that reaches the runtime (else each such call stalls every other Python thread for
   as long as the runtime takes); runtime_calls_holding_the_gil() says whether it did. */
static dl_sync_backend gil_checked;
/* Counted by any thread that calls the simulator holding the GIL; an atomic, so that the
   count does not rest on the GIL it counts. */
static atomic_long calls_holding_the_gil;

static void note_the_gil(void) {
  if (PyGILState_Check()) atomic_fetch_add(&calls_holding_the_gil, 1);
}

static int checked_record(void *ctx, void *event, void *stream) {
  note_the_gil();
  return dl_sync_sim_backend()->event_record(ctx, event, stream);
}

static int checked_wait(void *ctx, void *stream, void *event) {
  note_the_gil();
  return dl_sync_sim_backend()->stream_wait(ctx, stream, event);
}

static int checked_capture_info(void *ctx, void *stream, dl_sync_capture_info *out) {
  note_the_gil();
  return dl_sync_sim_backend()->capture_info(ctx, stream, out);
}

static const dl_sync_backend *gil_checked_backend(void) {
  gil_checked = *dl_sync_sim_backend();
  gil_checked.event_record = checked_record;
  gil_checked.stream_wait = checked_wait;
  gil_checked.capture_info = checked_capture_info;
  return &gil_checked;
}

/* What to give dl_sync_set_backend to bring back what dl_sync_get_backend returned. */
static const dl_sync_backend *restorable(const dl_sync_backend *b) {
  return b == dl_sync_cuda_backend() || b == dl_sync_hip_backend() ? NULL : b;
}

/* Drains the simulator and forgets everything, with dlsync's pools (their events were
   the simulator's). */
static void reset_all(void) {
  dl_sync_py_sim_open_gates(); /* else the reset would wait for them forever */
  /* The other copies first: their pools hold the simulator's events. Taken out under the
     lock, detached outside it (their code may need the GIL, or this module). */
  struct {
    void (*detach)(void *ctx);
    void *ctx;
  } detaching[MAX_COPIES];
  dl_sync__mutex_lock(&state_lock);
  int detach_count = copy_count;
  memcpy(detaching, copies, sizeof detaching);
  copy_count = 0;
  dl_sync__mutex_unlock(&state_lock);
  PyThreadState *thread = PyEval_SaveThread();
  for (int i = detach_count - 1; i >= 0; i--) detaching[i].detach(detaching[i].ctx);
  dl_sync_shutdown(); /* the releases still pending finish while their events are valid */
  dl_sync_sim_reset();
  dl_sync_shutdown();
  PyEval_RestoreThread(thread);
  dl_sync_py_sim_release_kernels();
  dl_sync_py_sim_streams_forget();
  if (created_graphs != NULL) PySet_Clear(created_graphs); /* the reset freed them */
}

static void restore_backends(int count) {
  for (int i = count - 1; i >= 0; i--) dl_sync_set_backend(installed_types[i], previous[i]);
}

/* install(device_types): the simulator behind dlsync for each device type. */
static PyObject *sim_install(PyObject *module, PyObject *types) {
  (void)module;
  int moved, found = change_state(0, CHANGING, &moved); /* before any Python code runs */
  if (!moved) return refuse(found);
  PyObject *seq = PySequence_Fast(types, "dlsync.testing: device_types must be a sequence");
  if (seq == NULL) {
    set_state(CLOSED);
    return NULL;
  }
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  if (n < 1 || n > MAX_TYPES) {
    Py_DECREF(seq);
    set_state(CLOSED);
    return PyErr_Format(PyExc_ValueError, "dlsync.testing: device_types=%R: expected 1 to %d types",
                        types, MAX_TYPES);
  }
  reset_all();
  const dl_sync_backend *own = gil_checked_backend();
  atomic_store(&calls_holding_the_gil, 0);
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *item = PySequence_Fast_GET_ITEM(seq, i);
    long type = PyLong_Check(item) && !PyBool_Check(item) ? PyLong_AsLong(item) : -1;
    if (type == -1 && PyErr_Occurred()) PyErr_Clear();
    int status = type >= 0 && type <= INT32_MAX ? DL_SYNC_OK : DL_SYNC_EINVAL;
    if (status == DL_SYNC_OK) {
      installed_types[i] = (int32_t)type;
      previous[i] = restorable(dl_sync_get_backend((int32_t)type));
      status = dl_sync_set_backend((int32_t)type, own);
    }
    if (status != DL_SYNC_OK) {
      restore_backends((int)i);
      Py_DECREF(seq);
      set_state(CLOSED);
      if (type < 0 || type > INT32_MAX)
        return PyErr_Format(PyExc_TypeError,
                            "dlsync.testing: device_types: %R is not a device type", item);
      return dl_sync_py_raise(status);
    }
  }
  Py_DECREF(seq);
  testing_device.backend = dl_sync_sim_backend();
  testing_device.device_type_count = (uint32_t)n;
  set_state((int)n);
  Py_RETURN_NONE;
}

/* uninstall(): drains the simulator and brings the previous backends back. */
static PyObject *sim_uninstall(PyObject *module, PyObject *unused) {
  (void)module;
  (void)unused;
  int moved, count = change_state(1, CHANGING, &moved);
  if (count == CLOSED) Py_RETURN_NONE;
  if (!moved) return refuse(count);
  reset_all();
  dl_sync_sim_set_jitter(0, 0);
  restore_backends(count);
  testing_device.device_type_count = 0;
  set_state(CLOSED);
  Py_RETURN_NONE;
}

static PyObject *sim_calls_holding_the_gil(PyObject *module, PyObject *unused) {
  (void)module;
  (void)unused;
  return PyLong_FromLong(atomic_load(&calls_holding_the_gil));
}

/* tensor(stream, buffer, on_delete, reuse): a producer's DLPack capsule
   ("dltensor_versioned") of buffer on the simulated device (CUDA device 0), for
   dlsync.testing's pools. Its deleter takes the GIL and calls on_delete() (the pool frees
   the block); with a reuse stream, its owner record names it (dl_sync_tensor_record_reuse
   on stream). The capsule calls the deleter when it goes unconsumed. */
typedef struct pool_tensor {
  DLManagedTensorVersioned tensor; /* first: the capsule's pointer */
  Py_buffer view;
  PyObject *on_delete;
  int64_t shape[1];
} pool_tensor;

static void pool_tensor_deleter(DLManagedTensorVersioned *tensor) {
  pool_tensor *p = (pool_tensor *)tensor;
  PyGILState_STATE gil = PyGILState_Ensure(); /* deleters may run on any thread */
  /* A capsule dropped while an exception unwinds runs this with the exception set: it is
     put aside for the call and back after, untouched. */
#if PY_VERSION_HEX >= 0x030C0000
  PyObject *pending = PyErr_GetRaisedException();
#else
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
#endif
  PyObject *result = PyObject_CallObject(p->on_delete, NULL);
  if (result == NULL) PyErr_WriteUnraisable(p->on_delete);
  Py_XDECREF(result);
  PyBuffer_Release(&p->view);
  Py_DECREF(p->on_delete);
#if PY_VERSION_HEX >= 0x030C0000
  PyErr_SetRaisedException(pending);
#else
  PyErr_Restore(type, value, traceback);
#endif
  PyGILState_Release(gil);
  free(p);
}

static PyObject *sim_tensor(PyObject *module, PyObject *args) {
  (void)module;
  PyObject *stream_obj, *on_delete, *reuse_obj;
  pool_tensor *p = calloc(1, sizeof *p);
  if (p == NULL) return PyErr_NoMemory();
  if (!PyArg_ParseTuple(args, "Ow*OO:tensor", &stream_obj, &p->view, &on_delete, &reuse_obj)) {
    free(p);
    return NULL;
  }
  dl_sync_sim_stream *stream = NULL, *reuse = NULL;
  if (dl_sync_py_sim_stream(stream_obj, &stream) != 0 ||
      (reuse_obj != Py_None && dl_sync_py_sim_stream(reuse_obj, &reuse) != 0)) {
    PyBuffer_Release(&p->view);
    free(p);
    return NULL;
  }
  DLDevice device = {kDLCUDA, 0};
  p->shape[0] = (int64_t)p->view.len;
  p->tensor = (DLManagedTensorVersioned){.version = {1, 3}, .deleter = pool_tensor_deleter};
  p->tensor.dl_tensor = (DLTensor){.data = p->view.buf,
                                   .device = device,
                                   .ndim = 1,
                                   .dtype = {kDLUInt, 8, 1},
                                   .shape = p->shape};
  Py_INCREF(on_delete);
  p->on_delete = on_delete;
  int status = DL_SYNC_OK;
  if (reuse != NULL) {
    PyThreadState *thread = PyEval_SaveThread();
    status = dl_sync_tensor_record_reuse(&p->tensor, dl_sync_stream_view(device, stream),
                                         dl_sync_stream_view(device, reuse));
    PyEval_RestoreThread(thread);
  }
  if (status != DL_SYNC_OK) { /* nothing was installed: the tensor is still ours alone */
    PyBuffer_Release(&p->view);
    Py_DECREF(on_delete);
    free(p);
    return dl_sync_py_raise(status);
  }
  return dl_sync_py_tensor_capsule(&p->tensor); /* without a capsule, the deleter gives all back */
}

/* backend_capsule(): the capsule other copies of dlsync install the simulator from
   (dlsync_testing.h). */
static PyObject *sim_backend_capsule(PyObject *module, PyObject *unused) {
  (void)module;
  (void)unused;
  dl_sync__mutex_lock(&state_lock);
  int found = installed_count;
  dl_sync__mutex_unlock(&state_lock);
  if (found < 0) return refuse(found);
  return PyCapsule_New(&testing_device, DL_SYNC_TESTING_CAPSULE, NULL);
}

/* --- streams -------------------------------------------------------------------------- */

static PyObject *sim_stream_create(PyObject *module, PyObject *args) {
  (void)module;
  int non_blocking, device;
  if (!PyArg_ParseTuple(args, "pi:stream_create", &non_blocking, &device)) return NULL;
  if (device < 0 || device >= DL_SYNC_SIM_DEVICES)
    return PyErr_Format(PyExc_ValueError,
                        "dlsync.testing: device %d: the simulated device has ids 0 to %d", device,
                        DL_SYNC_SIM_DEVICES - 1);
  int32_t current = 0;
  dl_sync_sim_stream *stream = NULL;
  unsigned flags = non_blocking ? DL_SYNC_SIM_STREAM_NON_BLOCKING : DL_SYNC_SIM_STREAM_DEFAULT;
  DL_SYNC_PY_SIM_CHECK("dl_sync_sim_get_device", dl_sync_sim_get_device(&current));
  DL_SYNC_PY_SIM_CHECK("dl_sync_sim_set_device", dl_sync_sim_set_device(device));
  int error = dl_sync_sim_stream_create(&stream, flags);
  dl_sync_sim_set_device(current);
  if (error != DL_SYNC_SIM_SUCCESS) return dl_sync_py_sim_raise("dl_sync_sim_stream_create", error);
  return dl_sync_py_sim_stream_made(stream);
}

static PyObject *sim_stream_destroy(PyObject *module, PyObject *obj) {
  (void)module;
  dl_sync_sim_stream *stream;
  if (dl_sync_py_sim_stream(obj, &stream) != 0) return NULL;
  DL_SYNC_PY_SIM_CHECK("dl_sync_sim_stream_destroy", dl_sync_sim_stream_destroy(stream));
  Py_RETURN_NONE;
}

static PyObject *sim_stream_synchronize(PyObject *module, PyObject *obj) {
  (void)module;
  dl_sync_sim_stream *stream;
  if (dl_sync_py_sim_stream(obj, &stream) != 0) return NULL;
  DL_SYNC_PY_SIM_CHECK("dl_sync_sim_stream_synchronize", dl_sync_sim_stream_synchronize(stream));
  Py_RETURN_NONE;
}

static PyObject *sim_device_synchronize(PyObject *module, PyObject *unused) {
  (void)module;
  (void)unused;
  DL_SYNC_PY_SIM_CHECK("dl_sync_sim_device_synchronize", dl_sync_sim_device_synchronize());
  Py_RETURN_NONE;
}

/* set_device(device): the calling thread's current device (cudaSetDevice): kernels are
   launched on streams of the current device only. */
static PyObject *sim_set_device(PyObject *module, PyObject *obj) {
  (void)module;
  int overflow = 0;
  long device = PyLong_AsLongAndOverflow(obj, &overflow);
  if (device == -1 && PyErr_Occurred()) return NULL;
  if (overflow != 0 || device < INT32_MIN || device > INT32_MAX)
    return PyErr_Format(PyExc_ValueError, "dlsync.testing: device %R out of range", obj);
  DL_SYNC_PY_SIM_CHECK("dl_sync_sim_set_device", dl_sync_sim_set_device((int32_t)device));
  Py_RETURN_NONE;
}

/* --- capture -------------------------------------------------------------------------- */

static PyObject *sim_begin_capture(PyObject *module, PyObject *args) {
  (void)module;
  PyObject *obj;
  int mode;
  if (!PyArg_ParseTuple(args, "Oi:begin_capture", &obj, &mode)) return NULL;
  dl_sync_sim_stream *stream;
  if (dl_sync_py_sim_stream(obj, &stream) != 0) return NULL;
  DL_SYNC_PY_SIM_CHECK("dl_sync_sim_stream_begin_capture",
                       dl_sync_sim_stream_begin_capture(stream, mode));
  Py_RETURN_NONE;
}

/* end_capture(stream): ends the capture and destroys its graph; returns the graph's
   (kernels, external waits) counts, or None when the capture had failed. */
static PyObject *sim_end_capture(PyObject *module, PyObject *obj) {
  (void)module;
  dl_sync_sim_stream *stream;
  if (dl_sync_py_sim_stream(obj, &stream) != 0) return NULL;
  dl_sync_sim_graph *graph = NULL;
  PyThreadState *thread = PyEval_SaveThread();
  int error = dl_sync_sim_stream_end_capture(stream, &graph);
  PyEval_RestoreThread(thread);
  if (graph == NULL) {
    if (error == DL_SYNC_SIM_ERROR_CAPTURE_INVALIDATED) Py_RETURN_NONE;
    return dl_sync_py_sim_raise("dl_sync_sim_stream_end_capture", error);
  }
  size_t kernels = 0, waits = 0;
  dl_sync_sim_graph_count_nodes(graph, &kernels, &waits, NULL);
  dl_sync_sim_graph_destroy(graph);
  return Py_BuildValue("(nn)", (Py_ssize_t)kernels, (Py_ssize_t)waits);
}

static PyObject *no_graph(PyObject *obj) {
  return PyErr_Format(PyExc_ValueError,
                      "dlsync.testing: %R is no graph of the simulated device (made since it was "
                      "opened)",
                      obj);
}

static int known_graph(PyObject *obj, dl_sync_sim_graph_exec **exec) {
  int known = PyLong_Check(obj) ? PySet_Contains(created_graphs, obj) : 0;
  if (known < 0) return -1;
  if (!known) {
    no_graph(obj);
    return -1;
  }
  *exec = PyLong_AsVoidPtr(obj);
  return 0;
}

/* end_capture_graph(stream): ends the capture and instantiates its graph (the executable
   graph keeps what the graph held); returns the executable graph, or None when the capture
   had failed. */
static PyObject *sim_end_capture_graph(PyObject *module, PyObject *obj) {
  (void)module;
  dl_sync_sim_stream *stream;
  if (dl_sync_py_sim_stream(obj, &stream) != 0) return NULL;
  dl_sync_sim_graph *graph = NULL;
  dl_sync_sim_graph_exec *exec = NULL;
  PyThreadState *thread = PyEval_SaveThread();
  int error = dl_sync_sim_stream_end_capture(stream, &graph);
  if (graph != NULL) {
    error = dl_sync_sim_graph_instantiate(&exec, graph);
    dl_sync_sim_graph_destroy(graph);
  }
  PyEval_RestoreThread(thread);
  if (graph == NULL && error == DL_SYNC_SIM_ERROR_CAPTURE_INVALIDATED) Py_RETURN_NONE;
  if (exec == NULL) return dl_sync_py_sim_raise("dl_sync_sim_graph_instantiate", error);
  PyObject *handle = PyLong_FromVoidPtr(exec);
  if (handle != NULL && PySet_Add(created_graphs, handle) < 0) Py_CLEAR(handle);
  return handle;
}

/* graph_launch(graph, stream) */
static PyObject *sim_graph_launch(PyObject *module, PyObject *args) {
  (void)module;
  PyObject *graph_obj, *stream_obj;
  dl_sync_sim_graph_exec *exec;
  dl_sync_sim_stream *stream;
  if (!PyArg_ParseTuple(args, "OO:graph_launch", &graph_obj, &stream_obj) ||
      known_graph(graph_obj, &exec) != 0 || dl_sync_py_sim_stream(stream_obj, &stream) != 0)
    return NULL;
  DL_SYNC_PY_SIM_CHECK("dl_sync_sim_graph_launch", dl_sync_sim_graph_launch(exec, stream));
  Py_RETURN_NONE;
}

/* graph_destroy(graph): once its launches are done. */
static PyObject *sim_graph_destroy(PyObject *module, PyObject *graph_obj) {
  (void)module;
  dl_sync_sim_graph_exec *exec;
  if (known_graph(graph_obj, &exec) != 0) return NULL;
  /* Destroyed by the call that takes it out of the set: of two racing, the other finds it
     gone (the set is one object, its own lock where there is no GIL). */
  int taken = PySet_Discard(created_graphs, graph_obj);
  if (taken < 0) return NULL;
  if (taken == 0) return no_graph(graph_obj);
  DL_SYNC_PY_SIM_CHECK("dl_sync_sim_graph_exec_destroy", dl_sync_sim_graph_exec_destroy(exec));
  Py_RETURN_NONE;
}

static PyObject *sim_capture_status(PyObject *module, PyObject *obj) {
  (void)module;
  dl_sync_sim_stream *stream;
  if (dl_sync_py_sim_stream(obj, &stream) != 0) return NULL;
  int32_t status = 0;
  uint64_t id = 0;
  DL_SYNC_PY_SIM_CHECK("dl_sync_sim_stream_capture_info",
                       dl_sync_sim_stream_capture_info(stream, &status, &id, NULL));
  return PyLong_FromLong(status);
}

/* --- verdicts ------------------------------------------------------------------------- */

static PyObject *sim_set_jitter(PyObject *module, PyObject *args) {
  (void)module;
  unsigned long long seed;
  unsigned int max_us;
  if (!PyArg_ParseTuple(args, "KI:set_jitter", &seed, &max_us)) return NULL;
  dl_sync_sim_set_jitter(seed, max_us);
  Py_RETURN_NONE;
}

static PyObject *sim_race_count(PyObject *module, PyObject *unused) {
  (void)module;
  (void)unused;
  return PyLong_FromUnsignedLongLong(dl_sync_sim_race_count());
}

static PyObject *sim_race_report(PyObject *module, PyObject *unused) {
  (void)module;
  (void)unused;
  char report[4096];
  report[0] = '\0';
  dl_sync_sim_race_report(report, sizeof report);
  return PyUnicode_DecodeUTF8(report, (Py_ssize_t)strlen(report), "replace");
}

static PyMethodDef sim_methods[] = {
    {"install", sim_install, METH_O, "install(device_types, /)\n--\n\n"},
    {"uninstall", sim_uninstall, METH_NOARGS, "uninstall()\n--\n\n"},
    {"backend_capsule", sim_backend_capsule, METH_NOARGS, "backend_capsule()\n--\n\n"},
    {"calls_holding_the_gil", sim_calls_holding_the_gil, METH_NOARGS,
     "calls_holding_the_gil()\n--\n\n"},
    {"tensor", sim_tensor, METH_VARARGS, "tensor(stream, buffer, on_delete, reuse, /)\n--\n\n"},
    {"stream_create", sim_stream_create, METH_VARARGS,
     "stream_create(non_blocking, device, /)\n--\n\n"},
    {"stream_destroy", sim_stream_destroy, METH_O, "stream_destroy(stream, /)\n--\n\n"},
    {"stream_synchronize", sim_stream_synchronize, METH_O, "stream_synchronize(stream, /)\n--\n\n"},
    {"device_synchronize", sim_device_synchronize, METH_NOARGS, "device_synchronize()\n--\n\n"},
    {"set_device", sim_set_device, METH_O, "set_device(device, /)\n--\n\n"},
    {"begin_capture", sim_begin_capture, METH_VARARGS, "begin_capture(stream, mode, /)\n--\n\n"},
    {"end_capture", sim_end_capture, METH_O, "end_capture(stream, /)\n--\n\n"},
    {"end_capture_graph", sim_end_capture_graph, METH_O, "end_capture_graph(stream, /)\n--\n\n"},
    {"graph_launch", sim_graph_launch, METH_VARARGS, "graph_launch(graph, stream, /)\n--\n\n"},
    {"graph_destroy", sim_graph_destroy, METH_O, "graph_destroy(graph, /)\n--\n\n"},
    {"capture_status", sim_capture_status, METH_O, "capture_status(stream, /)\n--\n\n"},
    {"set_jitter", sim_set_jitter, METH_VARARGS, "set_jitter(seed, max_us, /)\n--\n\n"},
    {"race_count", sim_race_count, METH_NOARGS, "race_count()\n--\n\n"},
    {"race_report", sim_race_report, METH_NOARGS, "race_report()\n--\n\n"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef sim_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "dlsync._dlsync._sim",
    .m_doc = "The simulated device's primitives; use dlsync.testing.",
    .m_size = -1,
    .m_methods = sim_methods,
};

int dl_sync_py_sim_init(PyObject *module) {
  (void)module;
  if (dl_sync_py_sim_streams_init() != 0) return -1;
  if (created_graphs == NULL && (created_graphs = PySet_New(NULL)) == NULL) return -1;
  return 0;
}

PyObject *dl_sync_py_sim_module(void) {
  PyObject *module = PyModule_Create(&sim_def);
  if (module == NULL) return NULL;
  if (PyModule_AddFunctions(module, dl_sync_py_sim_kernel_methods) < 0) {
    Py_DECREF(module);
    return NULL;
  }
  const struct {
    const char *name;
    long value;
  } constants[] = {
      {"READ", DL_SYNC_SIM_READ},
      {"WRITE", DL_SYNC_SIM_WRITE},
      {"CAPTURE_GLOBAL", DL_SYNC_SIM_CAPTURE_GLOBAL},
      {"CAPTURE_THREAD_LOCAL", DL_SYNC_SIM_CAPTURE_THREAD_LOCAL},
      {"CAPTURE_RELAXED", DL_SYNC_SIM_CAPTURE_RELAXED},
      {"DEVICES", DL_SYNC_SIM_DEVICES},
  };
  for (size_t i = 0; i < sizeof constants / sizeof constants[0]; i++) {
    if (PyModule_AddIntConstant(module, constants[i].name, constants[i].value) < 0) {
      Py_DECREF(module);
      return NULL;
    }
  }
  return module;
}
