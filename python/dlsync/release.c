/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tensor_release and release_poll: release ordering for a consumer whose imported tensor
 * is a DLPack capsule (dlsync/release.h).
 */
#include "module.h" /* Python.h first */
#include "platform.h"

#include <stdatomic.h>

static const char *const versioned_name = "dltensor_versioned", *const legacy_name = "dltensor";

/* The stream argument as a handle: -1 (an int, or an object whose __index__ gives -1) is
   DL_SYNC_STREAM_NOTHING_PENDING; anything else is a stream as dl_sync_py_stream_handle
   reads it. Each of the argument's conversions runs once (__index__, or __cuda_stream__(),
   .cuda_stream, .ptr); their exceptions propagate. 0, or -1 with the exception set. */
static int release_stream(const char *func, PyObject *obj, void **stream) {
  *stream = NULL;
  if (obj == Py_None) return 0;
  PyObject *index = dl_sync_py_index(obj);
  if (index == NULL) {
    if (PyErr_Occurred()) return -1;                              /* __index__ raised */
    return dl_sync_py_stream_handle(func, "stream", obj, stream); /* a stream object */
  }
  int overflow = 0;
  long value = PyLong_AsLongAndOverflow(index, &overflow);
  int rc = 0;
  if (value == -1 && PyErr_Occurred())
    rc = -1;
  else if (overflow == 0 && value == -1)
    *stream = DL_SYNC_STREAM_NOTHING_PENDING;
  else
    rc = dl_sync_py_stream_handle(func, "stream", index, stream);
  Py_DECREF(index);
  return rc;
}

/* tensor_release(tensor, stream): releases the capsule's tensor after the work enqueued
   so far on stream (a handle, an object with __cuda_stream__, None for the legacy default
   stream, or -1: nothing of the consumer's is pending) and marks the capsule used, as a
   consumer does when it takes the tensor. Returns RELEASED_NOW, RELEASED_ORDERED,
   RELEASE_DEFERRED or RELEASE_GRAPH. */
static const char *const tensor_release_names[] = {"tensor", "stream"};
static PyObject *tensor_release_interned[2];
const dl_sync_py_signature dl_sync_py_tensor_release_signature = {
    "tensor_release", 2, tensor_release_names, tensor_release_interned};

static PyObject *py_tensor_release(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                   PyObject *kwnames) {
  (void)module;
  static const char *const func = "dlsync.tensor_release";
  PyObject *scratch[2];
  PyObject *const *arg_objs =
      dl_sync_py_arguments(&dl_sync_py_tensor_release_signature, args, nargs, kwnames, scratch);
  if (arg_objs == NULL) return NULL;
  PyObject *capsule = arg_objs[0], *stream_obj = arg_objs[1];
  /* The stream first: its conversion runs Python code, which may release this very capsule
     (on this thread, or on another while the GIL is switched). From here on no Python code
     runs until the capsule is marked used, so that what is read of it stays true. */
  void *stream = NULL;
  if (release_stream(func, stream_obj, &stream) != 0) return NULL;
  int legacy = !PyCapsule_IsValid(capsule, versioned_name);
  if (legacy && !PyCapsule_IsValid(capsule, legacy_name))
    return PyErr_Format(PyExc_TypeError,
                        "%s: tensor must be a DLPack capsule not yet consumed (named '%s' or "
                        "'%s'), got %R",
                        func, versioned_name, legacy_name, capsule);
  const char *name = legacy ? legacy_name : versioned_name;
  void *tensor = PyCapsule_GetPointer(capsule, name);
  if (tensor == NULL) return NULL;
  DLDevice device = legacy ? ((DLManagedTensor *)tensor)->dl_tensor.device
                           : ((DLManagedTensorVersioned *)tensor)->dl_tensor.device;
  /* Consumed once: the capsule is marked used with the GIL held, before the GIL is let go,
     so that a second thread releasing it meets a used capsule (TypeError), never a second
     release of its tensor. */
  const char *used = legacy ? "used_dltensor" : "used_dltensor_versioned";
  if (PyCapsule_SetName(capsule, used) != 0) return NULL;
  dl_sync_stream consumer = dl_sync_stream_view(device, stream);
  PyThreadState *thread = PyEval_SaveThread(); /* it may reach the runtime */
  int status = legacy ? dl_sync_legacy_tensor_release(tensor, consumer)
                      : dl_sync_tensor_release(tensor, consumer);
  if (status == DL_SYNC_RELEASE_DEFERRED || status == DL_SYNC_RELEASE_GRAPH)
    dl_sync_py_release_thread_ensure(); /* someone must run its deleter later */
  PyEval_RestoreThread(thread);
  if (status < 0) {
    /* The tensor is still the caller's (release.h): the capsule gets its name back, while
       it still has the name this call gave it, on this tensor. */
    if (PyCapsule_GetName(capsule) == used && PyCapsule_GetPointer(capsule, used) == tensor)
      PyCapsule_SetName(capsule, name);
    PyErr_Clear(); /* a capsule renamed meanwhile stays as it is */
    return dl_sync_py_raise(status);
  }
  return PyLong_FromLong(status);
}

/* Python's policy for the release thread: the first deferred release starts it (unless
   the program said no: release_thread(False), or DL_SYNC_RELEASE_THREAD=0 in the
   environment, read by dlsync/__init__.py), and the module stops it at interpreter exit
   (dlsync/__init__.py). A deleter it runs takes the GIL itself when it needs Python.

   "wanted" and "parked" (stopped around os.fork) change, and the autostart reads them and
   starts the thread, under policy_lock, so that a release on one thread never starts the
   thread after another turned it off. Stopping happens outside the lock: it waits for a
   deleter, which may release a tensor itself (and so autostart). No thread waits for the
   lock holding the GIL. */
static dl_sync__mutex policy_lock = DL_SYNC__MUTEX_INIT;
static int release_thread_wanted = 1;  /* under policy_lock */
static int release_thread_parked;      /* under policy_lock: from the before-fork hook on */
static int release_thread_was_running; /* under policy_lock: what the parent gets back */

/* A pause for tests (dlsync._testing_pause_autostart): the next autostart stops after its
   read of "wanted" and "parked", until a release_thread call finds policy_lock taken or has
   returned, so that a test turns the thread off in exactly that window on every run. */
enum { PAUSE_OFF, PAUSE_ARMED, PAUSE_PAUSED, PAUSE_RESUMED };
static dl_sync__mutex pause_lock = DL_SYNC__MUTEX_INIT;
static dl_sync__cond pause_reached = DL_SYNC__COND_INIT, pause_resumed = DL_SYNC__COND_INIT;
static atomic_int pause_state = PAUSE_OFF; /* changed under pause_lock; read first without it,
                                              so that no autostart takes it unless armed */

static void testing_pause_autostart_here(void) {
  if (atomic_load(&pause_state) == PAUSE_OFF) return;
  dl_sync__mutex_lock(&pause_lock);
  if (pause_state == PAUSE_ARMED) {
    pause_state = PAUSE_PAUSED;
    dl_sync__cond_signal(&pause_reached);
    while (pause_state == PAUSE_PAUSED) dl_sync__cond_wait(&pause_resumed, &pause_lock, -1);
    pause_state = PAUSE_OFF;
  }
  dl_sync__mutex_unlock(&pause_lock);
}

static void testing_resume_autostart(void) {
  if (atomic_load(&pause_state) != PAUSE_PAUSED) return;
  dl_sync__mutex_lock(&pause_lock);
  if (pause_state == PAUSE_PAUSED) {
    pause_state = PAUSE_RESUMED;
    dl_sync__cond_signal(&pause_resumed);
  }
  dl_sync__mutex_unlock(&pause_lock);
}

void dl_sync_py_release_thread_ensure(void) {
  if (dl_sync_release_thread_running()) return; /* the common case, without the lock */
  dl_sync__mutex_lock(&policy_lock);
  int start = release_thread_wanted && !release_thread_parked;
  testing_pause_autostart_here();
  if (start) dl_sync_release_thread_start();
  dl_sync__mutex_unlock(&policy_lock);
}

static PyObject *py_release_thread(PyObject *module, PyObject *arg) {
  (void)module;
  int run = PyObject_IsTrue(arg);
  if (run < 0) return NULL;
  PyThreadState *thread = PyEval_SaveThread(); /* the lock, and stopping: a deleter's GIL */
  if (!dl_sync__mutex_trylock(&policy_lock)) {
    testing_resume_autostart(); /* an autostart paused for a test holds it */
    dl_sync__mutex_lock(&policy_lock);
  }
  release_thread_wanted = run;
  dl_sync__mutex_unlock(&policy_lock);
  int status = run ? DL_SYNC_OK : dl_sync_release_thread_stop();
  testing_resume_autostart(); /* one that read "wanted" outside the lock goes on only now */
  PyEval_RestoreThread(thread);
  if (status != DL_SYNC_OK) return dl_sync_py_raise(status);
  Py_RETURN_NONE;
}

/* os.register_at_fork's hooks (dlsync/__init__.py): the thread is stopped before a fork,
   so that no deleter of its holds a producer's lock the child would inherit held, and
   "parked" keeps any autostart off until the fork is over; the parent gets it back, the
   child starts its own at its next deferred release. policy_lock is not held across the
   fork (other libraries' hooks run meanwhile); the child makes it anew, since a thread
   the child does not have may have held it. */
static PyObject *py_release_thread_before_fork(PyObject *module, PyObject *unused) {
  (void)module;
  (void)unused;
  PyThreadState *thread = PyEval_SaveThread(); /* stopping waits for a deleter (the GIL) */
  dl_sync__mutex_lock(&policy_lock);
  release_thread_parked = 1;
  dl_sync__mutex_unlock(&policy_lock);
  int was_running = dl_sync_release_thread_running();
  int status = dl_sync_release_thread_stop(); /* EINVAL only from its own deleter */
  dl_sync__mutex_lock(&policy_lock);
  release_thread_was_running = was_running && status == DL_SYNC_OK;
  dl_sync__mutex_unlock(&policy_lock);
  PyEval_RestoreThread(thread);
  if (status != DL_SYNC_OK) return dl_sync_py_raise(status);
  Py_RETURN_NONE;
}

static PyObject *py_release_thread_after_fork(PyObject *module, PyObject *in_child) {
  (void)module;
  int child = PyObject_IsTrue(in_child);
  if (child < 0) return NULL;
  if (child) { /* this thread alone: the parent's thread and its releases are not here */
    dl_sync__mutex_renew(&policy_lock);
    dl_sync__mutex_renew(&pause_lock); /* a testing pause, as policy_lock */
    dl_sync__cond_renew(&pause_reached);
    dl_sync__cond_renew(&pause_resumed);
    atomic_store(&pause_state, PAUSE_OFF);
    release_thread_parked = 0;
    release_thread_was_running = 0;
    Py_RETURN_NONE;
  }
  PyThreadState *thread = PyEval_SaveThread();
  dl_sync__mutex_lock(&policy_lock);
  int status = DL_SYNC_OK;
  /* The parent gets its thread back at once where releases wait for it, else at its next
     deferred release: 3.13 counts the threads after these hooks ran, and warns of any. */
  if (release_thread_was_running && release_thread_wanted && dl_sync_release_pending() > 0)
    status = dl_sync_release_thread_start();
  release_thread_parked = 0;
  release_thread_was_running = 0;
  dl_sync__mutex_unlock(&policy_lock);
  PyEval_RestoreThread(thread);
  if (status != DL_SYNC_OK) return dl_sync_py_raise(status);
  Py_RETURN_NONE;
}

/* _testing_pause_autostart(): arms the pause for the next autostart.
   _testing_wait_autostart_paused(): waits (the GIL let go) until an autostart is paused
   there; False where none came within a minute (a guard against a hang, not a timing),
   and then disarms it. */
static PyObject *py_testing_pause_autostart(PyObject *module, PyObject *unused) {
  (void)module;
  (void)unused;
  dl_sync__mutex_lock(&pause_lock);
  pause_state = PAUSE_ARMED;
  dl_sync__mutex_unlock(&pause_lock);
  Py_RETURN_NONE;
}

static PyObject *py_testing_wait_autostart_paused(PyObject *module, PyObject *unused) {
  (void)module;
  (void)unused;
  PyThreadState *thread = PyEval_SaveThread();
  dl_sync__mutex_lock(&pause_lock);
  for (int waits = 0; pause_state == PAUSE_ARMED && waits < 600; waits++)
    dl_sync__cond_wait(&pause_reached, &pause_lock, 100);
  int paused = pause_state == PAUSE_PAUSED;
  if (pause_state == PAUSE_ARMED) pause_state = PAUSE_OFF; /* no later autostart pauses */
  dl_sync__mutex_unlock(&pause_lock);
  PyEval_RestoreThread(thread);
  return PyBool_FromLong(paused);
}

static PyObject *py_release_thread_running(PyObject *module, PyObject *unused) {
  (void)module;
  (void)unused;
  return PyBool_FromLong(dl_sync_release_thread_running());
}

static PyObject *py_release_poll(PyObject *module, PyObject *unused) {
  (void)module;
  (void)unused;
  PyThreadState *thread = PyEval_SaveThread();
  int ran = dl_sync_release_poll();
  PyEval_RestoreThread(thread);
  return PyLong_FromLong(ran);
}

PyDoc_STRVAR(tensor_release_doc,
             "tensor_release(tensor, stream)\n"
             "--\n"
             "\n"
             "Releases a DLPack capsule's tensor after the work enqueued so far on ``stream``\n"
             "(a handle, a stream object, None for the legacy default stream, or -1: nothing\n"
             "of the consumer's is pending) and marks the capsule used. Returns RELEASED_NOW,\n"
             "RELEASED_ORDERED, RELEASE_DEFERRED or RELEASE_GRAPH. ``stream`` is converted\n"
             "before the capsule is read: a capsule that its conversion released is a\n"
             "TypeError here.\n");
PyDoc_STRVAR(release_poll_doc,
             "release_poll()\n"
             "--\n"
             "\n"
             "Runs the deleters of the deferred releases whose work completed (and of graphs\n"
             "gone), on this thread; returns how many ran.\n");
PyDoc_STRVAR(release_thread_doc,
             "release_thread(run, /)\n"
             "--\n"
             "\n"
             "Whether dlsync's release thread runs the deferred deleters: True (the default;\n"
             "the first deferred release starts it) or False (stops it, waiting for a deleter\n"
             "it runs; then only release_poll runs them).\n");
PyDoc_STRVAR(release_thread_running_doc,
             "release_thread_running()\n"
             "--\n"
             "\n"
             "Whether the release thread runs now.\n");

PyMethodDef dl_sync_py_release_methods[] = {
    DL_SYNC_PY_FASTCALL("tensor_release", py_tensor_release, tensor_release_doc),
    {"release_poll", py_release_poll, METH_NOARGS, release_poll_doc},
    {"release_thread", py_release_thread, METH_O, release_thread_doc},
    {"release_thread_running", py_release_thread_running, METH_NOARGS, release_thread_running_doc},
    {"_release_thread_before_fork", py_release_thread_before_fork, METH_NOARGS,
     "_release_thread_before_fork()\n--\n\nos.register_at_fork's before hook."},
    {"_release_thread_after_fork", py_release_thread_after_fork, METH_O,
     "_release_thread_after_fork(in_child, /)\n--\n\nos.register_at_fork's after hooks."},
    {"_testing_pause_autostart", py_testing_pause_autostart, METH_NOARGS,
     "_testing_pause_autostart()\n--\n\nPauses the next autostart after it read the policy."},
    {"_testing_wait_autostart_paused", py_testing_wait_autostart_paused, METH_NOARGS,
     "_testing_wait_autostart_paused()\n--\n\nWaits for the paused autostart; returns bool."},
    {NULL, NULL, 0, NULL},
};
