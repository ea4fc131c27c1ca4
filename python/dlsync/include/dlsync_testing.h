/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlsync_testing.h: dlsync.testing for producers written in C, C++ or Cython.
 *
 * An extension that compiles or links its own copy of dlsync (the static library from
 * dlsync.get_library_dirs(), or vendored sources) calls dl_sync_export on that copy, not
 * on the copy inside the Python module dlsync. dlsync.testing.SimulatedDevice installs the
 * simulated device into the module's copy only; dl_sync_testing_install installs it into
 * the copy this header is compiled with, so the extension's own dl_sync_export calls run
 * on the simulated streams and the race checker judges them. The extension exposes one
 * test hook:
 *
 *     #include <Python.h>
 *     #include <dlsync/dlsync.h>
 *     #include <dlsync_testing.h>
 *
 *     static PyObject *use_simulated_device(PyObject *module, PyObject *sim) {
 *       if (dl_sync_testing_install(sim) != 0) return NULL;
 *       Py_RETURN_NONE;
 *     }
 *
 * and its tests call it in the block:
 *
 *     with dlsync.testing.SimulatedDevice() as sim:
 *         mylib.use_simulated_device(sim)
 *         ...  # mylib's __dlpack__ now orders its work on sim's streams
 *
 * (Cython: `cimport dlsync`, then `dlsync.dl_sync_testing_install(sim)`.) Closing the
 * simulated device detaches every copy that installed it: the copy's pooled events are
 * given back (its dl_sync_shutdown) and its previous backends come back. Call it from one
 * source file of the extension (each file including this header keeps its own record).
 * The rules of SimulatedDevice apply to the copy too: while it is installed, no other
 * thread uses the copy on those device types.
 */
#ifndef DL_SYNC_TESTING_H_
#define DL_SYNC_TESTING_H_

#include <Python.h>
#include <stdint.h>

#include "dlsync/backend.h"
#include "dlsync/status.h"
#include "dlsync/version.h"

#ifdef __cplusplus
extern "C" {
#define DL_SYNC_TESTING__CAST(type, value) static_cast<type>(value)
#else
#define DL_SYNC_TESTING__CAST(type, value) ((type)(value))
#endif

/** The name of the capsule SimulatedDevice.backend_capsule returns. */
#define DL_SYNC_TESTING_CAPSULE "dlsync.testing.simulated_device"
/** The layout below; a new layout gets a new number. */
#define DL_SYNC_TESTING_ABI 1
/** The most device types and copies one simulated device serves. */
#define DL_SYNC_TESTING_MAX_TYPES 8
#define DL_SYNC_TESTING_MAX_COPIES 16

/** What the capsule of an open SimulatedDevice points to (owned by the module dlsync). */
typedef struct dl_sync_testing_device {
  uint32_t abi;            /**< DL_SYNC_TESTING_ABI */
  uint32_t dlsync_version; /**< DL_SYNC_VERSION_HEX of the copy the simulator runs in */
  /** The simulated device's backend, installed under each of device_types. */
  const dl_sync_backend *backend;
  const int32_t *device_types;
  uint32_t device_type_count;
  uint32_t reserved;
  /** Registers a copy that installed the backend: detach(ctx) runs once, when the
      simulated device closes, before the simulator is reset, without the GIL (it must
      not call Python). Needs the GIL; 0, or -1 with a Python exception set. */
  int (*attach)(void (*detach)(void *ctx), void *ctx);
} dl_sync_testing_device;

/* This copy's record: the backends it had before, and whether it is attached. */
typedef struct dl_sync_testing__copy {
  const dl_sync_testing_device *device;
  uint32_t count;
  int32_t types[DL_SYNC_TESTING_MAX_TYPES];
  const dl_sync_backend *previous[DL_SYNC_TESTING_MAX_TYPES];
} dl_sync_testing__copy;

static inline dl_sync_testing__copy *dl_sync_testing__record(void) {
  static dl_sync_testing__copy record;
  return &record;
}

/* What dl_sync_set_backend takes to bring back what dl_sync_get_backend returned. */
static inline const dl_sync_backend *dl_sync_testing__restorable(const dl_sync_backend *b) {
  return b == dl_sync_cuda_backend() || b == dl_sync_hip_backend() ? NULL : b;
}

static inline void dl_sync_testing__restore(dl_sync_testing__copy *record) {
  for (uint32_t i = record->count; i-- > 0;)
    dl_sync_set_backend(record->types[i], record->previous[i]);
  record->count = 0;
  record->device = NULL;
}

static inline void dl_sync_testing__detach(void *ctx) {
  dl_sync_testing__copy *record = DL_SYNC_TESTING__CAST(dl_sync_testing__copy *, ctx);
  dl_sync_shutdown(); /* this copy's pooled events are the simulator's */
  dl_sync_testing__restore(record);
}

/**
 * Installs the simulated device of sim (an open dlsync.testing.SimulatedDevice, or its
 * backend_capsule) into this copy of dlsync, under the same device types, until sim
 * closes. Installing it again before then does nothing. Needs the GIL. 0, or -1 with a
 * Python exception set: TypeError (not a simulated device), RuntimeError (not open, or
 * built against a newer dlsync than the one the module dlsync carries), ValueError (the
 * copy refused the backend).
 */
static inline int dl_sync_testing_install(PyObject *sim) {
  PyObject *capsule = PyCapsule_CheckExact(sim) ? (Py_INCREF(sim), sim)
                                                : PyObject_GetAttrString(sim, "backend_capsule");
  if (capsule == NULL) {
    if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError,
                   "dl_sync_testing_install: expected a dlsync.testing.SimulatedDevice or its "
                   "backend_capsule, got %R",
                   sim);
    }
    return -1;
  }
  const dl_sync_testing_device *device = DL_SYNC_TESTING__CAST(
      const dl_sync_testing_device *, PyCapsule_GetPointer(capsule, DL_SYNC_TESTING_CAPSULE));
  Py_DECREF(capsule); /* the device lives in the module dlsync, which is never unloaded */
  if (device == NULL) return -1;
  if (device->abi != DL_SYNC_TESTING_ABI ||
      (device->dlsync_version >> 16) != DL_SYNC_VERSION_MAJOR ||
      ((device->dlsync_version >> 8) & 0xff) < DL_SYNC_VERSION_MINOR) {
    PyErr_Format(PyExc_RuntimeError,
                 "dl_sync_testing_install: the module dlsync carries dlsync %u.%u (testing ABI "
                 "%u); this extension was built against dlsync %d.%d (testing ABI %d): "
                 "install a dlsync at least as new as the extension's",
                 (unsigned)(device->dlsync_version >> 16),
                 (unsigned)((device->dlsync_version >> 8) & 0xff), (unsigned)device->abi,
                 DL_SYNC_VERSION_MAJOR, DL_SYNC_VERSION_MINOR, DL_SYNC_TESTING_ABI);
    return -1;
  }
  dl_sync_testing__copy *record = dl_sync_testing__record();
  if (record->device == device) return 0; /* installed since sim opened */
  if (record->device != NULL) {           /* a device that closed without detaching */
    PyErr_SetString(PyExc_RuntimeError,
                    "dl_sync_testing_install: this copy of dlsync still has a simulated device "
                    "installed");
    return -1;
  }
  if (device->device_type_count > DL_SYNC_TESTING_MAX_TYPES) {
    PyErr_SetString(PyExc_RuntimeError, "dl_sync_testing_install: too many device types");
    return -1;
  }
  record->count = 0;
  for (uint32_t i = 0; i < device->device_type_count; i++) {
    int32_t type = device->device_types[i];
    const dl_sync_backend *previous = dl_sync_testing__restorable(dl_sync_get_backend(type));
    if (dl_sync_set_backend(type, device->backend) != DL_SYNC_OK) {
      PyErr_Format(PyExc_ValueError, "dl_sync_testing_install: device type %d: %s", (int)type,
                   dl_sync_last_error());
      dl_sync_testing__restore(record);
      return -1;
    }
    record->types[i] = type;
    record->previous[i] = previous;
    record->count = i + 1;
  }
  if (device->attach(dl_sync_testing__detach, record) != 0) {
    dl_sync_testing__restore(record);
    return -1;
  }
  record->device = device;
  return 0;
}

#ifdef __cplusplus
}
#endif
#endif /* DL_SYNC_TESTING_H_ */
