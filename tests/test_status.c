/* SPDX-License-Identifier: Apache-2.0 */
/* Status codes, their names and Python exception kinds, and the thread-local message. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "dlsync/dlsync.h"

static void test_status_values_are_the_documented_ones(void **state) {
  (void)state;
  assert_int_equal(DL_SYNC_OK, 0);
  assert_int_equal(DL_SYNC_EINVAL, -1);
  assert_int_equal(DL_SYNC_ENOTSUP, -2);
  assert_int_equal(DL_SYNC_ENODEV, -3);
  assert_int_equal(DL_SYNC_ECAPTURE, -4);
  assert_int_equal(DL_SYNC_ENOMEM, -5);
  assert_int_equal(DL_SYNC_EBACKEND, -6);
}

static void test_status_names(void **state) {
  (void)state;
  assert_string_equal(dl_sync_status_name(DL_SYNC_OK), "DL_SYNC_OK");
  assert_string_equal(dl_sync_status_name(DL_SYNC_EINVAL), "DL_SYNC_EINVAL");
  assert_string_equal(dl_sync_status_name(DL_SYNC_ECAPTURE), "DL_SYNC_ECAPTURE");
  assert_string_equal(dl_sync_status_name(DL_SYNC_EBACKEND), "DL_SYNC_EBACKEND");
  assert_string_equal(dl_sync_status_name(-42), "DL_SYNC_UNKNOWN");
  assert_string_equal(dl_sync_status_name(1), "DL_SYNC_UNKNOWN");
}

static void test_python_exceptions_match_what_peers_raise(void **state) {
  (void)state;
  assert_null(dl_sync_python_exception(DL_SYNC_OK));
  assert_string_equal(dl_sync_python_exception(DL_SYNC_EINVAL), "ValueError");
  assert_string_equal(dl_sync_python_exception(DL_SYNC_ENOTSUP), "BufferError");
  assert_string_equal(dl_sync_python_exception(DL_SYNC_ENODEV), "BufferError");
  assert_string_equal(dl_sync_python_exception(DL_SYNC_ECAPTURE), "BufferError");
  assert_string_equal(dl_sync_python_exception(DL_SYNC_ENOMEM), "MemoryError");
  assert_string_equal(dl_sync_python_exception(DL_SYNC_EBACKEND), "RuntimeError");
  assert_string_equal(dl_sync_python_exception(-99), "RuntimeError");
}

static void *fail_on_another_thread(void *arg) {
  char *seen = arg;
  strcpy(seen, dl_sync_last_error());
  DLDevice bad = {kDLCUDA, -7};
  dl_sync_stream out;
  int needs_sync;
  dl_sync_stream_from_arg(bad, dl_sync_stream_arg_none(), &out, &needs_sync);
  strcat(seen, "|");
  strcat(seen, dl_sync_last_error());
  return NULL;
}

static void test_last_error_is_per_thread(void **state) {
  (void)state;
  dl_sync_stream out;
  int needs_sync;
  assert_int_equal(
      dl_sync_stream_from_arg((DLDevice){kDLCUDA, 0}, dl_sync_stream_arg_int(0), &out, &needs_sync),
      DL_SYNC_EINVAL);
  char mine[512];
  strcpy(mine, dl_sync_last_error());
  char seen[1024] = "";
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, fail_on_another_thread, seen), 0);
  pthread_join(thread, NULL);
  assert_string_equal(dl_sync_last_error(), mine);
  assert_non_null(strstr(seen, "no error|dl_sync_stream_from_arg: device has device id -7"));
}

static void test_long_messages_are_truncated_safely(void **state) {
  (void)state;
  dl_sync_backend backend = {DL_SYNC_BACKEND_INIT,
                             .name = "a-backend-name-that-is-long-enough-to-matter"};
  assert_int_equal(dl_sync_set_backend(kDLCUDA, &backend), DL_SYNC_EINVAL);
  assert_non_null(strstr(dl_sync_last_error(), "lacks the required callback get_device"));
  assert_true(strlen(dl_sync_last_error()) < 512);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_status_values_are_the_documented_ones),
      cmocka_unit_test(test_status_names),
      cmocka_unit_test(test_python_exceptions_match_what_peers_raise),
      cmocka_unit_test(test_last_error_is_per_thread),
      cmocka_unit_test(test_long_messages_are_truncated_safely),
  };
  return cmocka_run_group_tests_name("status", tests, NULL, NULL);
}
