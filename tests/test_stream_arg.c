/* SPDX-License-Identifier: Apache-2.0 */
/* The __dlpack__(stream=...) conventions (docs/design.md, "The ideas"): every cell, every
   device type. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "dlsync/dlsync.h"
#include "support/error_message.h"

static const int32_t cuda_types[] = {kDLCUDA, kDLCUDAHost, kDLCUDAManaged};
static const int32_t rocm_types[] = {kDLROCM, kDLROCMHost};
static const int32_t streamless_types[] = {kDLCPU,     kDLOpenCL, kDLVulkan, kDLMetal,
                                           kDLVPI,     kDLExtDev, kDLOneAPI, kDLWebGPU,
                                           kDLHexagon, kDLMAIA,   kDLTrn};
static const int32_t unknown_types[] = {0, 5, 6, 19, 100, -1};

#define COUNT(array) (sizeof(array) / sizeof((array)[0]))

/* One cell: what an argument decodes to, or the error it gets. */
typedef struct cell {
  int is_none;
  int64_t value;
  int status;
  int needs_sync;
  void *handle;
  const char *message; /* part of the error message, or NULL */
} cell;

static void check_cell(int32_t type, int32_t id, cell c) {
  DLDevice device = {(DLDeviceType)type, id};
  dl_sync_stream_arg arg = c.is_none ? dl_sync_stream_arg_none() : dl_sync_stream_arg_int(c.value);
  dl_sync_stream out = {{kDLCPU, 99}, (void *)0x5};
  int needs_sync = -1;
  int status = dl_sync_stream_from_arg(device, arg, &out, &needs_sync);
  if (status != c.status)
    fail_msg("type %d id %d stream=%s%lld: status %s, expected %s (%s)", (int)type, (int)id,
             c.is_none ? "None/" : "", (long long)c.value, dl_sync_status_name(status),
             dl_sync_status_name(c.status), dl_sync_last_error());
  if (status != DL_SYNC_OK) {
    assert_error_mentions(c.message);
    return;
  }
  assert_int_equal(needs_sync, c.needs_sync);
  assert_int_equal(out.device.device_type, type);
  assert_int_equal(out.device.device_id, id);
  if (c.needs_sync) assert_ptr_equal(out.handle, c.handle);
}

static const cell cuda_cells[] = {
    {1, 0, DL_SYNC_OK, 1, DL_SYNC_STREAM_LEGACY, NULL},
    {0, -1, DL_SYNC_OK, 0, NULL, NULL},
    {0, 0, DL_SYNC_EINVAL, 0, NULL, "stream=0 is ambiguous on cuda"},
    {0, 1, DL_SYNC_OK, 1, DL_SYNC_STREAM_LEGACY, NULL},
    {0, 2, DL_SYNC_OK, 1, DL_SYNC_STREAM_PER_THREAD, NULL},
    {0, 3, DL_SYNC_OK, 1, (void *)3, NULL},
    {0, 0x7f00deadbeef, DL_SYNC_OK, 1, (void *)0x7f00deadbeef, NULL},
    {0, INT64_MAX, DL_SYNC_OK, 1, (void *)(uintptr_t)INT64_MAX, NULL},
    {0, -2, DL_SYNC_EINVAL, 0, NULL, "stream=-2 is invalid"},
    {0, INT64_MIN, DL_SYNC_EINVAL, 0, NULL, "is invalid"},
};

static const cell rocm_cells[] = {
    {1, 0, DL_SYNC_OK, 1, NULL, NULL},
    {0, -1, DL_SYNC_OK, 0, NULL, NULL},
    {0, 0, DL_SYNC_OK, 1, NULL, NULL},
    {0, 1, DL_SYNC_EINVAL, 0, NULL, "stream=1 is invalid on rocm"},
    {0, 2, DL_SYNC_EINVAL, 0, NULL, "stream=2 is invalid on rocm"},
    {0, 3, DL_SYNC_OK, 1, (void *)3, NULL},
    {0, 0x7f00deadbeef, DL_SYNC_OK, 1, (void *)0x7f00deadbeef, NULL},
    {0, -2, DL_SYNC_EINVAL, 0, NULL, "expected None or 0 (the null stream)"},
};

static const cell streamless_cells[] = {
    {1, 0, DL_SYNC_OK, 0, NULL, NULL},
    {0, -1, DL_SYNC_EINVAL, 0, NULL, "which has no streams: expected None"},
    {0, 0, DL_SYNC_EINVAL, 0, NULL, "stream=0 is invalid"},
    {0, 1, DL_SYNC_EINVAL, 0, NULL, NULL},
    {0, 2, DL_SYNC_EINVAL, 0, NULL, NULL},
    {0, 3, DL_SYNC_EINVAL, 0, NULL, NULL},
    {0, -7, DL_SYNC_EINVAL, 0, NULL, NULL},
};

static void check_family(const int32_t *types, size_t ntypes, const cell *cells, size_t ncells) {
  const int32_t ids[] = {0, 1, DL_SYNC_MAX_DEVICES - 1};
  for (size_t t = 0; t < ntypes; t++)
    for (size_t i = 0; i < COUNT(ids); i++)
      for (size_t c = 0; c < ncells; c++) check_cell(types[t], ids[i], cells[c]);
}

static void test_cuda_family_follows_the_table(void **state) {
  (void)state;
  check_family(cuda_types, COUNT(cuda_types), cuda_cells, COUNT(cuda_cells));
}

static void test_cuda_stream_zero_is_rejected_as_ambiguous(void **state) {
  (void)state;
  dl_sync_stream out;
  int needs_sync;
  DLDevice device = {kDLCUDA, 3};
  assert_int_equal(dl_sync_stream_from_arg(device, dl_sync_stream_arg_int(0), &out, &needs_sync),
                   DL_SYNC_EINVAL);
  assert_string_equal(dl_sync_last_error(),
                      "dl_sync_stream_from_arg: stream=0 is ambiguous on cuda:3: pass 1 (legacy "
                      "default), 2 (per-thread default) or a stream handle");
}

static void test_rocm_family_follows_the_table(void **state) {
  (void)state;
  check_family(rocm_types, COUNT(rocm_types), rocm_cells, COUNT(rocm_cells));
}

static void test_streamless_devices_accept_only_none(void **state) {
  (void)state;
  check_family(streamless_types, COUNT(streamless_types), streamless_cells,
               COUNT(streamless_cells));
}

static void test_unknown_device_types_are_rejected(void **state) {
  (void)state;
  for (size_t t = 0; t < COUNT(unknown_types); t++) {
    check_cell(unknown_types[t], 0,
               (cell){1, 0, DL_SYNC_EINVAL, 0, NULL, "has unknown device type"});
    check_cell(unknown_types[t], 0,
               (cell){0, 5, DL_SYNC_EINVAL, 0, NULL, "expected a DLDeviceType"});
  }
}

static void test_out_of_range_device_ids_are_rejected(void **state) {
  (void)state;
  const int32_t ids[] = {-1, INT32_MIN, DL_SYNC_MAX_DEVICES, INT32_MAX};
  const int32_t types[] = {kDLCUDA, kDLROCM, kDLCPU};
  for (size_t t = 0; t < COUNT(types); t++)
    for (size_t i = 0; i < COUNT(ids); i++)
      check_cell(types[t], ids[i], (cell){1, 0, DL_SYNC_EINVAL, 0, NULL, "expected 0 to 255"});
}

static void test_null_outputs_are_rejected(void **state) {
  (void)state;
  DLDevice device = {kDLCUDA, 0};
  dl_sync_stream out;
  int needs_sync;
  assert_int_equal(dl_sync_stream_from_arg(device, dl_sync_stream_arg_none(), NULL, &needs_sync),
                   DL_SYNC_EINVAL);
  assert_error_mentions("must not be NULL");
  assert_int_equal(dl_sync_stream_from_arg(device, dl_sync_stream_arg_none(), &out, NULL),
                   DL_SYNC_EINVAL);
  assert_int_equal(dl_sync_stream_to_arg(dl_sync_stream_view(device, NULL), NULL), DL_SYNC_EINVAL);
  assert_error_mentions("out must not be NULL");
}

static void test_views_canonicalize_default_streams(void **state) {
  (void)state;
  for (size_t t = 0; t < COUNT(cuda_types); t++) {
    DLDevice device = {(DLDeviceType)cuda_types[t], 0};
    assert_ptr_equal(dl_sync_stream_view(device, NULL).handle, DL_SYNC_STREAM_LEGACY);
    assert_ptr_equal(dl_sync_stream_view(device, (void *)2).handle, DL_SYNC_STREAM_PER_THREAD);
    assert_ptr_equal(dl_sync_stream_view(device, (void *)0x99).handle, (void *)0x99);
  }
  for (size_t t = 0; t < COUNT(rocm_types); t++) {
    DLDevice device = {(DLDeviceType)rocm_types[t], 1};
    dl_sync_stream view = dl_sync_stream_view(device, DL_SYNC_STREAM_LEGACY);
    assert_null(view.handle);
    assert_int_equal(view.device.device_id, 1);
  }
}

static void check_to_arg(DLDevice device, void *handle, int status, int is_none, int64_t value) {
  dl_sync_stream_arg arg = {-1, -99};
  int got = dl_sync_stream_to_arg(dl_sync_stream_view(device, handle), &arg);
  if (got != status)
    fail_msg("to_arg type %d handle %p: %s, expected %s (%s)", (int)device.device_type, handle,
             dl_sync_status_name(got), dl_sync_status_name(status), dl_sync_last_error());
  if (got != DL_SYNC_OK) return;
  assert_int_equal(arg.is_none, is_none);
  if (!is_none) assert_int_equal(arg.value, value);
}

static void test_consumer_streams_become_the_argument_a_producer_expects(void **state) {
  (void)state;
  for (size_t t = 0; t < COUNT(cuda_types); t++) {
    DLDevice device = {(DLDeviceType)cuda_types[t], 0};
    check_to_arg(device, NULL, DL_SYNC_OK, 0, 1);
    check_to_arg(device, DL_SYNC_STREAM_LEGACY, DL_SYNC_OK, 0, 1);
    check_to_arg(device, DL_SYNC_STREAM_PER_THREAD, DL_SYNC_OK, 0, 2);
    check_to_arg(device, (void *)0x7f00, DL_SYNC_OK, 0, 0x7f00);
  }
  for (size_t t = 0; t < COUNT(rocm_types); t++) {
    DLDevice device = {(DLDeviceType)rocm_types[t], 0};
    check_to_arg(device, NULL, DL_SYNC_OK, 0, 0);
    check_to_arg(device, DL_SYNC_STREAM_LEGACY, DL_SYNC_OK, 0, 0);
    check_to_arg(device, DL_SYNC_STREAM_PER_THREAD, DL_SYNC_EINVAL, 0, 0);
    assert_error_mentions("per-thread default stream has no stream argument");
    check_to_arg(device, (void *)0x7f00, DL_SYNC_OK, 0, 0x7f00);
  }
  for (size_t t = 0; t < COUNT(streamless_types); t++) {
    DLDevice device = {(DLDeviceType)streamless_types[t], 0};
    check_to_arg(device, NULL, DL_SYNC_OK, 1, 0);
  }
  check_to_arg((DLDevice){(DLDeviceType)19, 0}, NULL, DL_SYNC_EINVAL, 0, 0);
  check_to_arg((DLDevice){kDLCUDA, -3}, NULL, DL_SYNC_EINVAL, 0, 0);
}

static void test_round_trip_through_the_argument_names_the_same_stream(void **state) {
  (void)state;
  void *handles[] = {NULL, DL_SYNC_STREAM_PER_THREAD, (void *)0x1000};
  for (size_t h = 0; h < COUNT(handles); h++) {
    dl_sync_stream consumer = dl_sync_stream_view((DLDevice){kDLCUDA, 2}, handles[h]);
    dl_sync_stream_arg arg;
    dl_sync_stream decoded;
    int needs_sync;
    assert_int_equal(dl_sync_stream_to_arg(consumer, &arg), DL_SYNC_OK);
    assert_int_equal(dl_sync_stream_from_arg(consumer.device, arg, &decoded, &needs_sync),
                     DL_SYNC_OK);
    assert_int_equal(needs_sync, 1);
    assert_ptr_equal(decoded.handle, consumer.handle);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cuda_family_follows_the_table),
      cmocka_unit_test(test_cuda_stream_zero_is_rejected_as_ambiguous),
      cmocka_unit_test(test_rocm_family_follows_the_table),
      cmocka_unit_test(test_streamless_devices_accept_only_none),
      cmocka_unit_test(test_unknown_device_types_are_rejected),
      cmocka_unit_test(test_out_of_range_device_ids_are_rejected),
      cmocka_unit_test(test_null_outputs_are_rejected),
      cmocka_unit_test(test_views_canonicalize_default_streams),
      cmocka_unit_test(test_consumer_streams_become_the_argument_a_producer_expects),
      cmocka_unit_test(test_round_trip_through_the_argument_names_the_same_stream),
  };
  return cmocka_run_group_tests_name("stream_arg", tests, NULL, NULL);
}
