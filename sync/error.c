/* Status names, Python exception kinds and the thread-local error message. */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"

enum { DL_SYNC__MESSAGE_SIZE = 512 };

static _Thread_local char last_message[DL_SYNC__MESSAGE_SIZE];

const char *dl_sync_last_error(void) {
  return last_message[0] != '\0' ? last_message : "no error";
}

const char *dl_sync_status_name(int status) {
  switch (status) {
    case DL_SYNC_OK:
      return "DL_SYNC_OK";
#define DL_SYNC__STATUS_NAME(name, value, message, exception) \
  case DL_SYNC_##name:                                       \
    return "DL_SYNC_" #name;
      DL_SYNC_STATUS_MAP(DL_SYNC__STATUS_NAME)
#undef DL_SYNC__STATUS_NAME
  }
  return "DL_SYNC_UNKNOWN";
}

const char *dl_sync_python_exception(int status) {
  switch (status) {
    case DL_SYNC_OK:
      return NULL;
#define DL_SYNC__STATUS_EXCEPTION(name, value, message, exception) \
  case DL_SYNC_##name:                                            \
    return exception;
      DL_SYNC_STATUS_MAP(DL_SYNC__STATUS_EXCEPTION)
#undef DL_SYNC__STATUS_EXCEPTION
  }
  return "RuntimeError";
}

int dl_sync__error(int status, const char *func, const char *fmt, ...) {
  int n = snprintf(last_message, sizeof last_message, "%s: ", func);
  if (n < 0 || (size_t)n >= sizeof last_message) return status;
  va_list args;
  va_start(args, fmt);
  vsnprintf(last_message + n, sizeof last_message - (size_t)n, fmt, args);
  va_end(args);
  return status;
}

int dl_sync__runtime_call_error(const char *func, const dl_sync_backend *backend,
                                const char *call, int code, DLDevice device) {
  return dl_sync__error(backend->error_status(backend->ctx, code), func,
                        "[%s][%s] %s (%s backend, %s:%d)", call,
                        backend->error_name(backend->ctx, code),
                        backend->error_string(backend->ctx, code), backend->name,
                        dl_sync__device_type_name(device.device_type), (int)device.device_id);
}

int dl_sync__runtime_error(const char *func, const dl_sync_backend *backend, dl_sync_op op,
                           int code, DLDevice device) {
  const char *call = backend->call_names[op] != NULL ? backend->call_names[op] : "?";
  return dl_sync__runtime_call_error(func, backend, call, code, device);
}
