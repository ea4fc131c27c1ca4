/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The driver gate of dlsync.audit (dlsync._dlsync._driver_gate_*): it holds a CUDA stream
 * until the host opens it, with no kernel and no compiler, on any machine with a driver.
 * cuStreamWaitValue32 "Enqueues a synchronization of the stream on the given memory
 * location. Work ordered after the operation will block until the given condition on the
 * memory is satisfied"; the memory is a word of host memory mapped into the device
 * (cuMemHostAlloc with CU_MEMHOSTALLOC_DEVICEMAP and PORTABLE, its device pointer from
 * cuMemHostGetDevicePointer: "all memory pointers passed as parameters to these operations
 * are device pointers"). A producer's work enqueued behind the wait cannot run before the
 * host writes the word, so a consumer that nothing orders after it reads before the write,
 * every time.
 *
 * The entry points come through dlsync's own driver loading (sync/backends/
 * cuda_driver_entry.h: the backend's libcuda, cuGetProcAddress at its API version). Each
 * context gets one gate, kept until the process exits: a stream may still read its word
 * after Python is done with it. A timer thread opens a gate from outside Python, for a
 * consumer call that blocks the host while holding the GIL.
 */
#include "module.h" /* Python.h first: it sets the POSIX level the system headers read */

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "backends/cuda_driver_entry.h"
#include "driver_gate_api.h"

typedef struct gate_calls {
#define GATE_POINTER(name, params) CUresult(*name) params;
  DL_SYNC_PY_GATE_CALLS(GATE_POINTER)
#undef GATE_POINTER
} gate_calls;
/* The driver's entry points: resolved outside any lock of ours (the driver loads meanwhile),
   then set once under registry_lock; never changed after driver_ready is set. */
static gate_calls driver;
static atomic_int driver_ready;
/* A leaf lock, held only to read or change driver and the gates' list below, never across
   a driver call or Python code. */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;

enum { MAX_GATES = 16 };
typedef struct gate {
  void *context;
  volatile uint32_t *word; /* host memory; the device reads it at device_word */
  CUdeviceptr device_word;
  uint32_t closed; /* the value the last hold waits for: the word reaches it when opened */
  /* The timer: opens the gate at its deadline unless stopped first. */
  pthread_t timer;
  int timer_running;
  int timer_fired;
  int timer_stop;
  struct timespec timer_deadline;
  pthread_mutex_t lock;
  pthread_cond_t changed;
} gate;

/* Under registry_lock; a gate, once listed, is never freed (see above). */
static gate *gates[MAX_GATES];
static int gate_count;

/* RuntimeError((message, code)): the driver call that failed and the driver's name and text
   for its code; code -1 is "no driver". */
static PyObject *raise_driver(const char *call, int code) {
  const dl_sync_backend *backend = dl_sync_cuda_backend();
  PyObject *args = NULL;
  if (code == -1) {
    dl_sync_runtime_info info;
    int status = dl_sync_backend_runtime(backend, &info);
    args =
        Py_BuildValue("(si)", status != DL_SYNC_OK ? dl_sync_last_error() : "no CUDA driver", code);
  } else {
    PyObject *message = PyUnicode_FromFormat("[%s][%s] %s", call, backend->error_name(NULL, code),
                                             backend->error_string(NULL, code));
    if (message != NULL) args = Py_BuildValue("(Ni)", message, code);
  }
  if (args != NULL) PyErr_SetObject(PyExc_RuntimeError, args);
  Py_XDECREF(args);
  return NULL;
}

static int resolve_driver(void) {
  if (atomic_load(&driver_ready)) return 0;
  gate_calls resolved;
  void *address = NULL;
  int code = 0;
#define GATE_RESOLVE(name, params)                                                      \
  code = dl_sync__cuda_driver_entry_point(#name, &address);                             \
  if (code != 0) {                                                                      \
    raise_driver("cuGetProcAddress(" #name ")", code);                                  \
    return -1;                                                                          \
  }                                                                                     \
  if (address == NULL) {                                                                \
    PyErr_SetObject(                                                                    \
        PyExc_RuntimeError,                                                             \
        Py_BuildValue("(si)", "the CUDA driver has no " #name " at the 12.0 API", -2)); \
    return -1;                                                                          \
  }                                                                                     \
  memcpy(&resolved.name, &address, sizeof address);
  DL_SYNC_PY_GATE_CALLS(GATE_RESOLVE)
#undef GATE_RESOLVE
  pthread_mutex_lock(&registry_lock);
  if (!atomic_load(&driver_ready)) {
    driver = resolved;
    atomic_store(&driver_ready, 1);
  }
  pthread_mutex_unlock(&registry_lock);
  return 0;
}

/* A stream argument's handle (an int or a stream object, as dlsync.export takes them). */
static int stream_of(PyObject *obj, void **stream) {
  return dl_sync_py_stream_handle("dlsync.audit", "stream", obj, stream);
}

/* Runs with the stream's context current ("Every call on a stream runs with that stream's
   context current", docs/design.md), the caller's put back. */
static CUresult push_stream_context(void *stream, void **context) {
  CUresult code = driver.cuStreamGetCtx(stream, context);
  return code != CUDA_SUCCESS ? code : driver.cuCtxPushCurrent(*context);
}

static void pop_context(void) {
  void *popped = NULL;
  driver.cuCtxPopCurrent(&popped);
}

static gate *gate_at(PyObject *index_obj) {
  long index = PyLong_AsLong(index_obj);
  if (index == -1 && PyErr_Occurred()) return NULL;
  pthread_mutex_lock(&registry_lock);
  gate *g = index >= 0 && index < gate_count ? gates[index] : NULL;
  pthread_mutex_unlock(&registry_lock);
  if (g == NULL) PyErr_Format(PyExc_ValueError, "dlsync.audit: %R is no gate", index_obj);
  return g;
}

/* The word and its device pointer, in the current context. */
static CUresult map_word(gate *g, const char **call) {
  void *host = NULL;
  *call = "cuMemHostAlloc";
  CUresult code =
      driver.cuMemHostAlloc(&host, 64, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
  if (code != CUDA_SUCCESS) return code;
  g->word = host;
  *g->word = 0;
  *call = "cuMemHostGetDevicePointer";
  return driver.cuMemHostGetDevicePointer(&g->device_word, host, 0);
}

static gate *new_gate(void *context) {
  gate *g = PyMem_RawCalloc(1, sizeof *g);
  if (g == NULL) return NULL;
  g->context = context;
  pthread_mutex_init(&g->lock, NULL);
  pthread_cond_init(&g->changed, NULL);
  return g;
}

static void free_gate(gate *g) {
  pthread_cond_destroy(&g->changed);
  pthread_mutex_destroy(&g->lock);
  PyMem_RawFree(g);
}

/* The index of context's gate, -1 where it has none yet; *full: no other may be listed. */
static int gate_index(void *context, int *full) {
  int index = -1;
  pthread_mutex_lock(&registry_lock);
  for (int i = 0; i < gate_count; i++)
    if (gates[i]->context == context) index = i;
  *full = gate_count == MAX_GATES;
  pthread_mutex_unlock(&registry_lock);
  return index;
}

static PyObject *too_many_gates(void) {
  pop_context();
  return PyErr_Format(PyExc_RuntimeError, "dlsync.audit: more than %d contexts gated", MAX_GATES);
}

/* _driver_gate(stream) -> (index, info): the gate of the stream's context, made at its first
   use. info: the device and what it says of mapped memory and stream memory operations. */
static PyObject *py_driver_gate(PyObject *module, PyObject *stream_obj) {
  (void)module;
  void *stream = NULL, *context = NULL;
  if (stream_of(stream_obj, &stream) != 0 || resolve_driver() != 0) return NULL;
  CUresult code = push_stream_context(stream, &context);
  if (code != CUDA_SUCCESS) return raise_driver("cuStreamGetCtx", code);
  int device = 0, map = 0, nor = 0, mem_ops = 0;
  const char *call = "cuCtxGetDevice";
  code = driver.cuCtxGetDevice(&device);
  /* cuMemHostGetDevicePointer "will fail if ... called on a GPU that does not support mapped
     pinned memory": asked first, so that the audit can say why it falls back. */
  if (code == CUDA_SUCCESS) {
    call = "cuDeviceGetAttribute";
    code = driver.cuDeviceGetAttribute(&map, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, device);
  }
  /* Reported, not required: the gate's GEQ wait needs neither (CUDA 12's stream memory
     operations have no attribute of their own; a device without them answers the wait
     with CUDA_ERROR_NOT_SUPPORTED, among cuStreamWaitValue32's documented results). */
  if (code == CUDA_SUCCESS &&
      driver.cuDeviceGetAttribute(&nor, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR,
                                  device) != CUDA_SUCCESS)
    nor = -1;
  if (code == CUDA_SUCCESS &&
      driver.cuDeviceGetAttribute(&mem_ops, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_MEM_OPS_V1,
                                  device) != CUDA_SUCCESS)
    mem_ops = -1;
  int full = 0, index = code == CUDA_SUCCESS ? gate_index(context, &full) : -1;
  if (code == CUDA_SUCCESS && index < 0 && map != 0) {
    if (full) return too_many_gates(); /* before a word is mapped for nothing */
    gate *g = new_gate(context);
    if (g == NULL) {
      pop_context();
      return PyErr_NoMemory();
    }
    code = map_word(g, &call); /* outside the lock: a driver call */
    if (code != CUDA_SUCCESS) {
      free_gate(g); /* its word, if it was mapped, stays: nothing else knows it */
    } else {
      /* Listed unless another thread listed a gate for this context meanwhile (then this
         one goes, its word staying mapped) or the list is full. */
      pthread_mutex_lock(&registry_lock);
      for (int i = 0; i < gate_count; i++)
        if (gates[i]->context == context) index = i;
      full = index < 0 && gate_count == MAX_GATES;
      if (index < 0 && !full) {
        index = gate_count;
        gates[gate_count++] = g;
      }
      int listed = index >= 0 && gates[index] == g;
      pthread_mutex_unlock(&registry_lock);
      if (!listed) free_gate(g);
      if (full) return too_many_gates();
    }
  }
  pop_context();
  if (code != CUDA_SUCCESS) return raise_driver(call, code);
  return Py_BuildValue("(i{s:i,s:i,s:i,s:i})", index, "device", device, "can_map_host_memory", map,
                       "can_use_stream_wait_value_nor", nor, "can_use_stream_mem_ops_v1", mem_ops);
}

/* _driver_gate_hold(index, stream): the stream's later work waits until the gate opens.
   RuntimeError((message, code)) when the driver refuses the wait (CUDA_ERROR_NOT_SUPPORTED:
   no stream memory operations on this device). */
static PyObject *py_driver_gate_hold(PyObject *module, PyObject *args) {
  (void)module;
  PyObject *index_obj, *stream_obj;
  void *stream = NULL, *context = NULL;
  if (!PyArg_ParseTuple(args, "OO:_driver_gate_hold", &index_obj, &stream_obj)) return NULL;
  gate *g = gate_at(index_obj);
  if (g == NULL || stream_of(stream_obj, &stream) != 0) return NULL;
  CUresult code = push_stream_context(stream, &context);
  if (code != CUDA_SUCCESS) return raise_driver("cuStreamGetCtx", code);
  /* CU_STREAM_WAIT_VALUE_GEQ: "Wait until (int32_t)(*addr - value) >= 0 ... a cyclic
     comparison which ignores wraparound": each hold waits for a value the word has not
     reached, so a later hold never reopens an earlier one's wait. */
  uint32_t value = g->closed + 1;
  code = driver.cuStreamWaitValue32(stream, g->device_word, value, CU_STREAM_WAIT_VALUE_GEQ);
  pop_context();
  if (code != CUDA_SUCCESS) return raise_driver("cuStreamWaitValue32", code);
  g->closed = value;
  Py_RETURN_NONE;
}

static void open_gate(gate *g, uint32_t value) {
  atomic_thread_fence(memory_order_seq_cst); /* the host's writes before it land first */
  *g->word = value;
  atomic_thread_fence(memory_order_seq_cst);
}

/* _driver_gate_open(index): every stream held by the gate goes on. */
static PyObject *py_driver_gate_open(PyObject *module, PyObject *index_obj) {
  (void)module;
  gate *g = gate_at(index_obj);
  if (g == NULL) return NULL;
  open_gate(g, g->closed);
  Py_RETURN_NONE;
}

static void *timer_main(void *arg) {
  gate *g = arg;
  pthread_mutex_lock(&g->lock);
  int waited = 0;
  while (!g->timer_stop && waited != ETIMEDOUT)
    waited = pthread_cond_timedwait(&g->changed, &g->lock, &g->timer_deadline);
  if (!g->timer_stop) {
    open_gate(g, g->closed);
    g->timer_fired = 1;
  }
  pthread_mutex_unlock(&g->lock);
  return NULL;
}

/* _driver_gate_timer(index, seconds): opens the gate after seconds unless stopped first. */
static PyObject *py_driver_gate_timer(PyObject *module, PyObject *args) {
  (void)module;
  PyObject *index_obj;
  double seconds;
  if (!PyArg_ParseTuple(args, "Od:_driver_gate_timer", &index_obj, &seconds)) return NULL;
  gate *g = gate_at(index_obj);
  if (g == NULL) return NULL;
  if (g->timer_running) return PyErr_Format(PyExc_RuntimeError, "dlsync.audit: timer running");
  clock_gettime(CLOCK_REALTIME, &g->timer_deadline);
  long long nanoseconds = g->timer_deadline.tv_nsec + (long long)(seconds * 1e9);
  g->timer_deadline.tv_sec += (time_t)(nanoseconds / 1000000000);
  g->timer_deadline.tv_nsec = (long)(nanoseconds % 1000000000);
  g->timer_fired = g->timer_stop = 0;
  if (pthread_create(&g->timer, NULL, timer_main, g) != 0)
    return PyErr_Format(PyExc_RuntimeError, "dlsync.audit: no timer thread");
  g->timer_running = 1;
  Py_RETURN_NONE;
}

/* _driver_gate_timer_stop(index) -> whether the timer had opened the gate. */
static PyObject *py_driver_gate_timer_stop(PyObject *module, PyObject *index_obj) {
  (void)module;
  gate *g = gate_at(index_obj);
  if (g == NULL) return NULL;
  if (!g->timer_running) Py_RETURN_FALSE;
  pthread_mutex_lock(&g->lock);
  g->timer_stop = 1;
  pthread_cond_broadcast(&g->changed);
  pthread_mutex_unlock(&g->lock);
  PyThreadState *thread = PyEval_SaveThread();
  pthread_join(g->timer, NULL);
  PyEval_RestoreThread(thread);
  g->timer_running = 0;
  return PyBool_FromLong(g->timer_fired);
}

/* _driver_stream_non_blocking(stream) -> bool: made with CU_STREAM_NON_BLOCKING ("the
   created stream should perform no implicit synchronization with stream 0"). */
static PyObject *py_driver_stream_non_blocking(PyObject *module, PyObject *stream_obj) {
  (void)module;
  void *stream = NULL;
  unsigned flags = 0;
  if (stream_of(stream_obj, &stream) != 0 || resolve_driver() != 0) return NULL;
  CUresult code = driver.cuStreamGetFlags(stream, &flags);
  if (code != CUDA_SUCCESS) return raise_driver("cuStreamGetFlags", code);
  return PyBool_FromLong((flags & CU_STREAM_NON_BLOCKING) != 0);
}

PyMethodDef dl_sync_py_driver_gate_methods[] = {
    {"_driver_gate", py_driver_gate, METH_O,
     "_driver_gate(stream, /)\n--\n\nReturns (index, info)."},
    {"_driver_gate_hold", py_driver_gate_hold, METH_VARARGS,
     "_driver_gate_hold(index, stream, /)\n--\n\n"},
    {"_driver_gate_open", py_driver_gate_open, METH_O, "_driver_gate_open(index, /)\n--\n\n"},
    {"_driver_gate_timer", py_driver_gate_timer, METH_VARARGS,
     "_driver_gate_timer(index, seconds, /)\n--\n\n"},
    {"_driver_gate_timer_stop", py_driver_gate_timer_stop, METH_O,
     "_driver_gate_timer_stop(index, /)\n--\n\nReturns bool."},
    {"_driver_stream_non_blocking", py_driver_stream_non_blocking, METH_O,
     "_driver_stream_non_blocking(stream, /)\n--\n\nReturns bool."},
    {NULL, NULL, 0, NULL},
};
