/* SPDX-License-Identifier: Apache-2.0 */
/* dl_sync_stream_from_exchange_api: validating producers' exchange tables. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "dlsync/dlsync.h"
#include "support/error_message.h"

static DLDeviceType seen_type;
static int32_t seen_id;

static int current_stream_ok(DLDeviceType type, int32_t id, void **out) {
  seen_type = type;
  seen_id = id;
  *out = type == kDLCUDA ? (void *)0xC0DE : NULL;
  return 0;
}

static int current_stream_fails(DLDeviceType type, int32_t id, void **out) {
  (void)type;
  (void)id;
  (void)out;
  return -1;
}

static DLPackExchangeAPI table(uint32_t major, uint32_t minor, DLPackExchangeAPIHeader *prev) {
  DLPackExchangeAPI api = {.header = {{major, minor}, prev}};
  api.current_work_stream = current_stream_ok;
  return api;
}

static const DLDevice cuda3 = {kDLCUDA, 3};

static void test_current_work_stream_is_read_through_the_table(void **state) {
  (void)state;
  DLPackExchangeAPI api = table(1, 3, NULL);
  dl_sync_stream out;
  assert_int_equal(dl_sync_stream_from_exchange_api(&api, cuda3, &out), DL_SYNC_OK);
  assert_int_equal(seen_type, kDLCUDA);
  assert_int_equal(seen_id, 3);
  assert_ptr_equal(out.handle, (void *)0xC0DE);
  assert_int_equal(out.device.device_id, 3);
}

static void test_a_null_default_stream_becomes_the_legacy_stream_view(void **state) {
  (void)state;
  DLPackExchangeAPI api = table(1, 2, NULL);
  api.current_work_stream = current_stream_ok;
  dl_sync_stream out;
  DLDevice managed = {kDLCUDAManaged, 0};
  assert_int_equal(dl_sync_stream_from_exchange_api(&api, managed, &out), DL_SYNC_OK);
  assert_ptr_equal(out.handle, DL_SYNC_STREAM_LEGACY);
}

static void test_newer_majors_are_skipped_through_prev_api(void **state) {
  (void)state;
  DLPackExchangeAPI v1 = table(1, 3, NULL);
  DLPackExchangeAPI v2 = table(2, 0, &v1.header);
  v2.current_work_stream = current_stream_fails; /* must not be called */
  DLPackExchangeAPI v3 = table(3, 1, &v2.header);
  dl_sync_stream out;
  assert_int_equal(dl_sync_stream_from_exchange_api(&v3, cuda3, &out), DL_SYNC_OK);
  assert_ptr_equal(out.handle, (void *)0xC0DE);
}

static void test_no_understood_version_is_enotsup(void **state) {
  (void)state;
  DLPackExchangeAPI v2 = table(2, 0, NULL);
  dl_sync_stream out;
  assert_int_equal(dl_sync_stream_from_exchange_api(&v2, cuda3, &out), DL_SYNC_ENOTSUP);
  assert_error_mentions("no exchange table of major version 1 in the chain (newest is 2.0)");
  DLPackExchangeAPI v0 = table(0, 9, NULL);
  assert_int_equal(dl_sync_stream_from_exchange_api(&v0, cuda3, &out), DL_SYNC_ENOTSUP);
}

static void test_a_cyclic_chain_is_rejected(void **state) {
  (void)state;
  DLPackExchangeAPI a = table(2, 0, NULL);
  DLPackExchangeAPI b = table(3, 0, &a.header);
  a.header.prev_api = &b.header;
  dl_sync_stream out;
  assert_int_equal(dl_sync_stream_from_exchange_api(&b, cuda3, &out), DL_SYNC_EINVAL);
  assert_error_mentions("cyclic or corrupt");
  a.header.prev_api = &a.header; /* a self-loop */
  assert_int_equal(dl_sync_stream_from_exchange_api(&a, cuda3, &out), DL_SYNC_EINVAL);
}

/* A chain of length tables whose last (oldest) is the only 1.x one. */
static DLPackExchangeAPI *chain_of(DLPackExchangeAPI *tables, int length) {
  tables[length - 1] = table(1, 3, NULL);
  for (int i = length - 2; i >= 0; i--) tables[i] = table(2, 0, &tables[i + 1].header);
  return &tables[0];
}

static void test_the_chain_limit_is_exact(void **state) {
  (void)state;
  DLPackExchangeAPI tables[DL_SYNC_EXCHANGE_MAX_CHAIN + 1];
  dl_sync_stream out;
  /* DL_SYNC_EXCHANGE_MAX_CHAIN tables are followed to the end... */
  assert_int_equal(
      dl_sync_stream_from_exchange_api(chain_of(tables, DL_SYNC_EXCHANGE_MAX_CHAIN), cuda3, &out),
      DL_SYNC_OK);
  assert_ptr_equal(out.handle, (void *)0xC0DE);
  /* ...one more is taken as corrupt, though it ends. */
  assert_int_equal(dl_sync_stream_from_exchange_api(
                       chain_of(tables, DL_SYNC_EXCHANGE_MAX_CHAIN + 1), cuda3, &out),
                   DL_SYNC_EINVAL);
  assert_error_mentions("longer than 16 tables");
}

static void test_tables_older_than_1_2_are_rejected(void **state) {
  (void)state;
  DLPackExchangeAPI old = table(1, 1, NULL);
  dl_sync_stream out;
  assert_int_equal(dl_sync_stream_from_exchange_api(&old, cuda3, &out), DL_SYNC_EINVAL);
  assert_error_mentions("version 1.1");
}

static void test_missing_current_work_stream_is_enotsup(void **state) {
  (void)state;
  DLPackExchangeAPI api = table(1, 3, NULL);
  api.current_work_stream = NULL;
  dl_sync_stream out;
  assert_int_equal(dl_sync_stream_from_exchange_api(&api, cuda3, &out), DL_SYNC_ENOTSUP);
  assert_error_mentions("has no current_work_stream");
}

static void test_a_failing_producer_is_ebackend(void **state) {
  (void)state;
  DLPackExchangeAPI api = table(1, 3, NULL);
  api.current_work_stream = current_stream_fails;
  dl_sync_stream out = {{kDLCPU, 0}, (void *)0x77};
  assert_int_equal(dl_sync_stream_from_exchange_api(&api, cuda3, &out), DL_SYNC_EBACKEND);
  assert_error_mentions("current_work_stream(cuda, 3) failed with -1");
  assert_ptr_equal(out.handle, (void *)0x77); /* untouched */
}

static void test_bad_arguments_are_einval(void **state) {
  (void)state;
  DLPackExchangeAPI api = table(1, 3, NULL);
  dl_sync_stream out;
  assert_int_equal(dl_sync_stream_from_exchange_api(NULL, cuda3, &out), DL_SYNC_EINVAL);
  assert_int_equal(dl_sync_stream_from_exchange_api(&api, cuda3, NULL), DL_SYNC_EINVAL);
  assert_int_equal(dl_sync_stream_from_exchange_api(&api, (DLDevice){(DLDeviceType)77, 0}, &out),
                   DL_SYNC_EINVAL);
  assert_int_equal(dl_sync_stream_from_exchange_api(&api, (DLDevice){kDLCUDA, -1}, &out),
                   DL_SYNC_EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_current_work_stream_is_read_through_the_table),
      cmocka_unit_test(test_a_null_default_stream_becomes_the_legacy_stream_view),
      cmocka_unit_test(test_newer_majors_are_skipped_through_prev_api),
      cmocka_unit_test(test_no_understood_version_is_enotsup),
      cmocka_unit_test(test_a_cyclic_chain_is_rejected),
      cmocka_unit_test(test_the_chain_limit_is_exact),
      cmocka_unit_test(test_tables_older_than_1_2_are_rejected),
      cmocka_unit_test(test_missing_current_work_stream_is_enotsup),
      cmocka_unit_test(test_a_failing_producer_is_ebackend),
      cmocka_unit_test(test_bad_arguments_are_einval),
  };
  return cmocka_run_group_tests_name("exchange", tests, NULL, NULL);
}
