/* SPDX-License-Identifier: Apache-2.0 */
/* dlsync.group_wait: a consumer's call on many producers pays one dependency per distinct
   producer stream (dlsync/group.h). dlsync.Group (in __init__.py) collects producers
   and calls it. */
#include "module.h"

PyDoc_STRVAR(
    group_wait_doc,
    "group_wait(device, consumer, producers)\n"
    "--\n"
    "\n"
    "Orders every producer stream before the consumer's stream at once, without blocking\n"
    "the host: one event record and one wait per *distinct* producer stream (f(a, b, c)\n"
    "with a, b and c written on one stream costs one dependency, not three). The\n"
    "consumer's own stream costs nothing.\n"
    "\n"
    "device: ``(device_type, device_id)`` of the consumer's stream.\n"
    "consumer: the consumer's stream (an int handle or a stream object, as in ``export``).\n"
    "producers: an iterable of producer streams on ``device``, or ``(device, stream)``\n"
    "    pairs for streams on other devices of the same family; at most 16 distinct.\n"
    "\n"
    "Graph capture follows ``push_dep``, per producer. On an error the exception names the\n"
    "producer that failed; the producers before it stay ordered. The GIL is released while\n"
    "dlsync runs.\n");

/* One producer: a stream on the consumer's device, or a (device, stream) pair. */
static int producer_stream(const char *func, PyObject *item, DLDevice consumer_device,
                           dl_sync_stream *out) {
  DLDevice device = consumer_device;
  PyObject *stream_obj = item;
  if (PyTuple_Check(item) && PyTuple_GET_SIZE(item) == 2 &&
      PyTuple_Check(PyTuple_GET_ITEM(item, 0))) {
    if (dl_sync_py_device(func, PyTuple_GET_ITEM(item, 0), &device) != 0) return -1;
    stream_obj = PyTuple_GET_ITEM(item, 1);
  }
  void *handle = NULL;
  if (dl_sync_py_stream_handle(func, "producer", stream_obj, &handle) != 0) return -1;
  *out = dl_sync_stream_view(device, handle);
  return 0;
}

/* Adds every producer to group; the GIL is held (the items are Python objects). */
static int add_producers(const char *func, dl_sync_group *group, PyObject *producers,
                         DLDevice device) {
  PyObject *iterator = PyObject_GetIter(producers);
  if (iterator == NULL) return -1;
  PyObject *item;
  int result = 0;
  while (result == 0 && (item = PyIter_Next(iterator)) != NULL) {
    dl_sync_stream producer;
    result = producer_stream(func, item, device, &producer);
    Py_DECREF(item);
    if (result == 0 && group->stream_count == DL_SYNC_GROUP_MAX) {
      /* Full: what it holds is ordered now, and the group takes the rest. */
      PyThreadState *thread = PyEval_SaveThread();
      int status = dl_sync_group_wait(group);
      PyEval_RestoreThread(thread);
      if (status != DL_SYNC_OK) {
        dl_sync_py_raise(status);
        result = -1;
      }
    }
    if (result == 0) {
      int status = dl_sync_group_add_stream(group, producer);
      if (status != DL_SYNC_OK) {
        dl_sync_py_raise(status);
        result = -1;
      }
    }
  }
  Py_DECREF(iterator);
  return result != 0 || PyErr_Occurred() ? -1 : 0;
}

static const char *const group_wait_names[] = {"device", "consumer", "producers"};
static PyObject *group_wait_interned[3];
const dl_sync_py_signature dl_sync_py_group_wait_signature = {"group_wait", 3, group_wait_names,
                                                              group_wait_interned};

static PyObject *py_group_wait(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                               PyObject *kwnames) {
  (void)module;
  static const char *const func = "dlsync.group_wait";
  PyObject *scratch[3];
  PyObject *const *arg_objs =
      dl_sync_py_arguments(&dl_sync_py_group_wait_signature, args, nargs, kwnames, scratch);
  if (arg_objs == NULL) return NULL;
  PyObject *device_obj = arg_objs[0], *consumer_obj = arg_objs[1], *producers = arg_objs[2];
  DLDevice device;
  void *consumer = NULL;
  if (dl_sync_py_device(func, device_obj, &device) != 0 ||
      dl_sync_py_stream_handle(func, "consumer", consumer_obj, &consumer) != 0)
    return NULL;
  dl_sync_group group;
  int status = dl_sync_group_init(&group, dl_sync_stream_view(device, consumer));
  if (status != DL_SYNC_OK) return dl_sync_py_raise(status);
  if (add_producers(func, &group, producers, device) != 0) return NULL;
  PyThreadState *thread = PyEval_SaveThread();
  status = dl_sync_group_wait(&group);
  PyEval_RestoreThread(thread);
  if (status != DL_SYNC_OK) return dl_sync_py_raise(status);
  Py_RETURN_NONE;
}

/* _check_producer(producer): raises what group_wait would for producer (the stream
   objects and (device, stream) tuples it takes), so that Group.add refuses it at once. */
static PyObject *py_check_producer(PyObject *module, PyObject *item) {
  (void)module;
  dl_sync_stream producer;
  if (producer_stream("dlsync.Group.add", item, (DLDevice){kDLCUDA, 0}, &producer) != 0)
    return NULL;
  Py_RETURN_NONE;
}

PyMethodDef dl_sync_py_group_methods[] = {
    DL_SYNC_PY_FASTCALL("group_wait", py_group_wait, group_wait_doc),
    {"_check_producer", py_check_producer, METH_O, "_check_producer(producer, /)\n--\n\n"},
    {NULL, NULL, 0, NULL},
};
