/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlsync/status.h: status codes and error messages.
 *
 * Every function returns DL_SYNC_OK (0) or a negative status, and on failure leaves a
 * message for the calling thread that names the function, the offending value and what
 * was expected. A runtime failure keeps the runtime's name for the call and the error:
 *   "dl_sync_push_dep: [cudaStreamWaitEvent][cudaErrorInvalidResourceHandle] invalid ..."
 */
#ifndef DL_SYNC_STATUS_H_
#define DL_SYNC_STATUS_H_

#include "dlsync/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* XX(name, value, default message, Python exception kind) */
#define DL_SYNC_STATUS_MAP(XX)                                                      \
  XX(EINVAL, -1, "invalid argument", "ValueError")                                  \
  XX(ENOTSUP, -2, "not supported for this device or runtime", "BufferError")        \
  XX(ENODEV, -3, "no device or no runtime answers", "BufferError")                  \
  XX(ECAPTURE, -4, "not allowed in the current graph-capture state", "BufferError") \
  XX(ENOMEM, -5, "out of memory", "MemoryError")                                    \
  XX(EBACKEND, -6, "the device runtime reported an error", "RuntimeError")

enum {
  DL_SYNC_OK = 0,
#define DL_SYNC_STATUS_ENUMERATOR(name, value, message, exception) DL_SYNC_##name = value,
  DL_SYNC_STATUS_MAP(DL_SYNC_STATUS_ENUMERATOR)
#undef DL_SYNC_STATUS_ENUMERATOR
};

/** This thread's last error message: "function: what failed", written by the public
    function that failed. A call that succeeds writes nothing, so after a success this is
    still the message of the thread's last failure ("no error" before the first). Never
    NULL. */
DL_SYNC_API const char *dl_sync_last_error(void);

/** "DL_SYNC_EINVAL" and so on; "DL_SYNC_OK" for 0; "DL_SYNC_UNKNOWN" otherwise. */
DL_SYNC_API const char *dl_sync_status_name(int status);

/**
 * The Python exception a binding should raise for a status: "ValueError" for a bad
 * stream value, "BufferError" when the tensor cannot be exported in this state,
 * "MemoryError", "RuntimeError" for runtime failures and unknown statuses; NULL for OK.
 */
DL_SYNC_API const char *dl_sync_python_exception(int status);

#ifdef __cplusplus
}
#endif
#endif /* DL_SYNC_STATUS_H_ */
