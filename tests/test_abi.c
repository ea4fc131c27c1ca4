/* SPDX-License-Identifier: Apache-2.0 */
/* The DLPack ABI as declared by dlsync/dlpack.h: values and layout on this target. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "dlsync/dlsync.h"

static void test_device_type_values_are_dlpack_1_3(void **state) {
  (void)state;
  const struct {
    int value, expected;
  } types[] = {
      {kDLCPU, 1},       {kDLCUDA, 2},     {kDLCUDAHost, 3},     {kDLOpenCL, 4},
      {kDLVulkan, 7},    {kDLMetal, 8},    {kDLVPI, 9},          {kDLROCM, 10},
      {kDLROCMHost, 11}, {kDLExtDev, 12},  {kDLCUDAManaged, 13}, {kDLOneAPI, 14},
      {kDLWebGPU, 15},   {kDLHexagon, 16}, {kDLMAIA, 17},        {kDLTrn, 18},
  };
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
    assert_int_equal(types[i].value, types[i].expected);
  assert_int_equal(DLPACK_MAJOR_VERSION, 1);
  assert_int_equal(DLPACK_MINOR_VERSION, 3);
}

static void test_versioned_tensor_layout(void **state) {
  (void)state;
  if (sizeof(void *) != 8) skip();
  assert_int_equal(offsetof(DLManagedTensorVersioned, version), 0);
  assert_int_equal(offsetof(DLManagedTensorVersioned, manager_ctx), 8);
  assert_int_equal(offsetof(DLManagedTensorVersioned, deleter), 16);
  assert_int_equal(offsetof(DLManagedTensorVersioned, flags), 24);
  assert_int_equal(offsetof(DLManagedTensorVersioned, dl_tensor), 32);
  assert_int_equal(sizeof(DLManagedTensorVersioned), 80);
  assert_int_equal(sizeof(DLManagedTensor), 64);
}

static void test_exchange_table_layout(void **state) {
  (void)state;
  if (sizeof(void *) != 8) skip();
  assert_int_equal(offsetof(DLPackExchangeAPI, header), 0);
  assert_int_equal(offsetof(DLPackExchangeAPI, managed_tensor_allocator), 16);
  assert_int_equal(offsetof(DLPackExchangeAPI, current_work_stream), 48);
  assert_int_equal(sizeof(DLPackExchangeAPI), 56);
}

static void test_flag_bits(void **state) {
  (void)state;
  assert_int_equal(DLPACK_FLAG_BITMASK_READ_ONLY, 1);
  assert_int_equal(DLPACK_FLAG_BITMASK_IS_COPIED, 2);
  assert_int_equal(DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED, 4);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_device_type_values_are_dlpack_1_3),
      cmocka_unit_test(test_versioned_tensor_layout),
      cmocka_unit_test(test_exchange_table_layout),
      cmocka_unit_test(test_flag_bits),
  };
  return cmocka_run_group_tests_name("abi", tests, NULL, NULL);
}
