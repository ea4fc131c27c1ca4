/* SPDX-License-Identifier: Apache-2.0 */
/* dl_sync_stream_view in a translation unit compiled with per-thread default streams
   (this file is built with CUDA_API_PER_THREAD_DEFAULT_STREAM, as nvcc --default-stream
   per-thread does): handle 0 is the calling thread's per-thread default stream there. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dlsync/dlsync.h"

#ifndef CUDA_API_PER_THREAD_DEFAULT_STREAM
#error "this suite must be compiled with CUDA_API_PER_THREAD_DEFAULT_STREAM"
#endif

static const int32_t stream_types[] = {kDLCUDA, kDLCUDAHost, kDLCUDAManaged, kDLROCM, kDLROCMHost};

static void test_handle_zero_is_the_per_thread_default_stream(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof stream_types / sizeof stream_types[0]; i++) {
    DLDevice device = {(DLDeviceType)stream_types[i], 0};
    assert_ptr_equal(dl_sync_stream_view(device, NULL).handle, DL_SYNC_STREAM_PER_THREAD);
  }
}

static void test_other_handles_are_viewed_as_in_legacy_builds(void **state) {
  (void)state;
  DLDevice cuda = {kDLCUDA, 1}, rocm = {kDLROCM, 0};
  assert_ptr_equal(dl_sync_stream_view(cuda, DL_SYNC_STREAM_LEGACY).handle, DL_SYNC_STREAM_LEGACY);
  assert_ptr_equal(dl_sync_stream_view(cuda, (void *)0x1234).handle, (void *)0x1234);
  assert_int_equal(dl_sync_stream_view(cuda, NULL).device.device_id, 1);
  assert_null(dl_sync_stream_view(rocm, DL_SYNC_STREAM_LEGACY).handle);
}

static void test_streamless_devices_keep_handle_zero(void **state) {
  (void)state;
  DLDevice cpu = {kDLCPU, 0};
  assert_null(dl_sync_stream_view(cpu, NULL).handle);
}

static void test_compound_literal_arguments_pass_through(void **state) {
  (void)state;
  assert_ptr_equal(dl_sync_stream_view((DLDevice){kDLCUDA, 0}, NULL).handle,
                   DL_SYNC_STREAM_PER_THREAD);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_handle_zero_is_the_per_thread_default_stream),
      cmocka_unit_test(test_other_handles_are_viewed_as_in_legacy_builds),
      cmocka_unit_test(test_streamless_devices_keep_handle_zero),
      cmocka_unit_test(test_compound_literal_arguments_pass_through),
  };
  return cmocka_run_group_tests_name("stream_view_per_thread", tests, NULL, NULL);
}
