/* Internal declarations shared by the library's files; not installed. */
#ifndef DL_SYNC_INTERNAL_H_
#define DL_SYNC_INTERNAL_H_

#include "dlsync/dlsync.h"

#if defined(__GNUC__)
#define DL_SYNC__PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define DL_SYNC__PRINTF(fmt, args)
#endif

/* error.c: set this thread's message "func: ..." and return status. */
int dl_sync__error(int status, const char *func, const char *fmt, ...) DL_SYNC__PRINTF(3, 4);
/* A failed runtime call: "func: [call][error name] error string (device)". */
int dl_sync__runtime_error(const char *func, const dl_sync_backend *backend, dl_sync_op op,
                           int code, DLDevice device);

/* device.c: device families, validation and the current-device guard. */
enum { DL_SYNC__FAMILY_UNKNOWN = -1, DL_SYNC__FAMILY_NONE, DL_SYNC__FAMILY_CUDA, DL_SYNC__FAMILY_ROCM };
int dl_sync__family(int32_t device_type);
const char *dl_sync__device_type_name(int32_t device_type);
/* EINVAL naming `what` unless device has a known type and an id in range. */
int dl_sync__check_device(const char *func, const char *what, DLDevice device);
/* The handle as dl_sync_stream_view canonicalizes it. */
void *dl_sync__canonical_handle(DLDevice device, void *handle);
/* Default streams resolve against the current device: using them needs it set. */
int dl_sync__is_default_stream(void *canonical_handle);

typedef struct dl_sync__device_guard {
  const dl_sync_backend *backend;
  int32_t saved;   /* the caller's device, valid once have_saved */
  int have_saved;
  int32_t current; /* the device made current by the guard, valid once switched */
  int switched;
} dl_sync__device_guard;

void dl_sync__device_guard_init(dl_sync__device_guard *guard, const dl_sync_backend *backend);
/* Makes device.device_id current, querying and switching only when needed. */
int dl_sync__device_guard_use(dl_sync__device_guard *guard, const char *func, DLDevice device);
/* Calls on a default stream resolve it on the current device: makes stream's device
   current when stream.handle is a default stream. */
int dl_sync__device_guard_use_stream(dl_sync__device_guard *guard, const char *func,
                                     dl_sync_stream stream);
/* Restores the caller's device; status is returned unchanged unless it was OK. */
int dl_sync__device_guard_end(dl_sync__device_guard *guard, const char *func, DLDevice device,
                              int status);

/* backend.c */
int dl_sync__backend_for(const char *func, DLDevice device, const dl_sync_backend **out);

/* event_pool.c: one pool per (backend, device); events are created on that device. */
typedef struct dl_sync__pool dl_sync__pool;
int dl_sync__pool_get(const char *func, const dl_sync_backend *backend, DLDevice device,
                      dl_sync__pool **out);
/* Takes an idle event, or creates one (guard makes the pool's device current). */
int dl_sync__pool_acquire(dl_sync__pool *pool, const char *func, dl_sync__device_guard *guard,
                          void **event);
/* Gives an event back. Makes no runtime call, so it is safe from runtime callbacks. */
void dl_sync__pool_release(dl_sync__pool *pool, void *event);
/* Makes a child process after fork() start with no pools (registered once). */
void dl_sync__pool_watch_fork(void);

#endif /* DL_SYNC_INTERNAL_H_ */
