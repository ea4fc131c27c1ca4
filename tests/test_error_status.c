/* SPDX-License-Identifier: Apache-2.0 */
/*
 * How each built-in backend turns its runtime's codes into dlsync statuses: the table a
 * framework's exception mapping relies on (ENODEV: no device or driver, the toolkit's
 * stub library included; ENOMEM; ECAPTURE for every stream-capture code; EBACKEND else).
 * The codes are the runtimes' own values (cuda.h, driver_types.h, hip_runtime_api.h),
 * written out here so that a backend that drops or shifts one is caught. No runtime is
 * needed: error_status is pure.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "dlsync/dlsync.h"

typedef struct row {
  int code;
  int status;
  const char *name;
} row;

static void check(const dl_sync_backend *b, const row *rows, size_t count) {
  for (size_t i = 0; i < count; i++) {
    int status = b->error_status(b->ctx, rows[i].code);
    if (status != rows[i].status)
      fail_msg("%s backend: %s (%d) is %s, expected %s", b->name, rows[i].name, rows[i].code,
               dl_sync_status_name(status), dl_sync_status_name(rows[i].status));
  }
}

static void test_the_driver_backend(void **state) {
  (void)state;
  static const row rows[] = {
      {1, DL_SYNC_EBACKEND, "CUDA_ERROR_INVALID_VALUE"},
      {2, DL_SYNC_ENOMEM, "CUDA_ERROR_OUT_OF_MEMORY"},
      {3, DL_SYNC_ENODEV, "CUDA_ERROR_NOT_INITIALIZED"},
      {4, DL_SYNC_ENODEV, "CUDA_ERROR_DEINITIALIZED"},
      {34, DL_SYNC_ENODEV, "CUDA_ERROR_STUB_LIBRARY"},
      {46, DL_SYNC_ENODEV, "CUDA_ERROR_DEVICE_UNAVAILABLE"},
      {100, DL_SYNC_ENODEV, "CUDA_ERROR_NO_DEVICE"},
      {101, DL_SYNC_EBACKEND, "CUDA_ERROR_INVALID_DEVICE"},
      {201, DL_SYNC_EBACKEND, "CUDA_ERROR_INVALID_CONTEXT"},
      {400, DL_SYNC_EBACKEND, "CUDA_ERROR_INVALID_HANDLE"},
      {803, DL_SYNC_ENODEV, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"},
      {804, DL_SYNC_ENODEV, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE"},
      {899, DL_SYNC_EBACKEND, "(below the capture codes)"},
      {900, DL_SYNC_ECAPTURE, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"},
      {906, DL_SYNC_ECAPTURE, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT"},
      {908, DL_SYNC_ECAPTURE, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD"},
      {909, DL_SYNC_EBACKEND, "CUDA_ERROR_TIMEOUT"},
  };
  check(dl_sync_cuda_backend(), rows, sizeof rows / sizeof rows[0]);
}

static void test_the_runtime_backend(void **state) {
  (void)state;
  static const row rows[] = {
      {1, DL_SYNC_EBACKEND, "cudaErrorInvalidValue"},
      {2, DL_SYNC_ENOMEM, "cudaErrorMemoryAllocation"},
      {3, DL_SYNC_ENODEV, "cudaErrorInitializationError"},
      {34, DL_SYNC_ENODEV, "cudaErrorStubLibrary"},
      {35, DL_SYNC_ENODEV, "cudaErrorInsufficientDriver"},
      {100, DL_SYNC_ENODEV, "cudaErrorNoDevice"},
      {101, DL_SYNC_EBACKEND, "cudaErrorInvalidDevice"},
      {803, DL_SYNC_ENODEV, "cudaErrorSystemDriverMismatch"},
      {899, DL_SYNC_EBACKEND, "(below the capture codes)"},
      {900, DL_SYNC_ECAPTURE, "cudaErrorStreamCaptureUnsupported"},
      {908, DL_SYNC_ECAPTURE, "cudaErrorStreamCaptureWrongThread"},
      {909, DL_SYNC_EBACKEND, "cudaErrorTimeout"},
  };
  check(dl_sync_cudart_backend(), rows, sizeof rows / sizeof rows[0]);
}

static void test_the_hip_backend(void **state) {
  (void)state;
  /* hipErrorInvalidDevice is ENODEV when no device answers (here: no runtime at all). */
  static const row rows[] = {
      {1, DL_SYNC_EBACKEND, "hipErrorInvalidValue"},
      {2, DL_SYNC_ENOMEM, "hipErrorOutOfMemory"},
      {3, DL_SYNC_ENODEV, "hipErrorNotInitialized"},
      {35, DL_SYNC_ENODEV, "hipErrorInsufficientDriver"},
      {100, DL_SYNC_ENODEV, "hipErrorNoDevice"},
      {101, DL_SYNC_ENODEV, "hipErrorInvalidDevice"},
      {899, DL_SYNC_EBACKEND, "(below the capture codes)"},
      {900, DL_SYNC_ECAPTURE, "hipErrorStreamCaptureUnsupported"},
      {908, DL_SYNC_ECAPTURE, "hipErrorStreamCaptureWrongThread"},
      {909, DL_SYNC_EBACKEND, "hipErrorStreamCaptureWrongThread + 1"},
  };
  check(dl_sync_hip_backend(), rows, sizeof rows / sizeof rows[0]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_the_driver_backend),
      cmocka_unit_test(test_the_runtime_backend),
      cmocka_unit_test(test_the_hip_backend),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
