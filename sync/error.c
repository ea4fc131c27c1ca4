/* SPDX-License-Identifier: Apache-2.0 */
/* Status names, Python exception kinds and the thread-local error message. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

enum { DL_SYNC__MESSAGE_SIZE = 512 };

static DL_SYNC__THREAD_LOCAL char last_message[DL_SYNC__MESSAGE_SIZE];
/* Set while a question is answered (dl_sync__quiet): the failures it finds are not the
   caller's, and a call that does not fail writes nothing. */
static DL_SYNC__THREAD_LOCAL int quiet;

void dl_sync__quiet(int on) {
  quiet = on;
}

const char *dl_sync_last_error(void) {
  return last_message[0] != '\0' ? last_message : "no error";
}

const char *dl_sync_status_name(int status) {
  switch (status) {
    case DL_SYNC_OK:
      return "DL_SYNC_OK";
#define DL_SYNC__STATUS_NAME(name, value, message, exception) \
  case DL_SYNC_##name:                                        \
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
  case DL_SYNC_##name:                                             \
    return exception;
      /* statuses share an exception kind: the table says which */
      DL_SYNC_STATUS_MAP(DL_SYNC__STATUS_EXCEPTION) /* NOLINT(bugprone-branch-clone) */
#undef DL_SYNC__STATUS_EXCEPTION
  }
  return "RuntimeError";
}

int(dl_sync__error)(int status, const char *fmt, ...) {
  if (quiet) return status;
  va_list args;
  va_start(args, fmt);
  vsnprintf(last_message, sizeof last_message, fmt, args);
  va_end(args);
  return status;
}

/* Puts text (n bytes) in front of the message, which is cut at the buffer's end. */
static void prepend(const char *text, size_t n) {
  if (quiet) return;
  size_t kept = strlen(last_message);
  if (n >= sizeof last_message) n = sizeof last_message - 1;
  if (kept > sizeof last_message - 1 - n) kept = sizeof last_message - 1 - n;
  memmove(last_message + n, last_message, kept);
  memcpy(last_message, text, n);
  last_message[n + kept] = '\0';
}

int dl_sync__error_context(int status, const char *fmt, ...) {
  char context[DL_SYNC__MESSAGE_SIZE];
  va_list args;
  va_start(args, fmt);
  int n = vsnprintf(context, sizeof context - 2, fmt, args);
  va_end(args);
  if (n < 0) return status;
  size_t length = strlen(context);
  memcpy(context + length, ": ", 3);
  prepend(context, length + 2);
  return status;
}

int dl_sync__name_failure(const char *func, int status) {
  size_t length = strlen(func);
  char name[128];
  if (length > sizeof name - 3) length = sizeof name - 3;
  /* name is a counted prefix, not a string: prepend copies length + 2 bytes of it */
  memcpy(name, func, length);     /* NOLINT(bugprone-not-null-terminated-result) */
  memcpy(name + length, ": ", 2); /* NOLINT(bugprone-not-null-terminated-result) */
  prepend(name, length + 2);
  return status;
}

int dl_sync__runtime_call_error(const dl_sync_backend *backend, const char *call, int code,
                                DLDevice device) {
  if (code == DL_SYNC__NO_RUNTIME) /* no call was made: the library is what failed */
    return dl_sync__error(backend->error_status(backend->ctx, code), "[%s] %s (%s backend, %s:%d)",
                          backend->error_name(backend->ctx, code),
                          backend->error_string(backend->ctx, code), backend->name,
                          dl_sync__device_type_name(device.device_type), (int)device.device_id);
  return dl_sync__error(
      backend->error_status(backend->ctx, code), "[%s][%s] %s (%s backend, %s:%d)", call,
      backend->error_name(backend->ctx, code), backend->error_string(backend->ctx, code),
      backend->name, dl_sync__device_type_name(device.device_type), (int)device.device_id);
}

int dl_sync__runtime_error(const dl_sync_backend *backend, dl_sync_op op, int code,
                           DLDevice device) {
  const char *call = (unsigned)op < backend->call_name_count && backend->call_names != NULL &&
                             backend->call_names[op] != NULL
                         ? backend->call_names[op]
                         : "?";
  return dl_sync__runtime_call_error(backend, call, code, device);
}
