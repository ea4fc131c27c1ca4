/* SPDX-License-Identifier: Apache-2.0 */
/* dl_sync_export_calls_runtime against dl_sync_export itself: on every device kind, stream
   argument and producer stream, it says 1 exactly when the export calls the backend, and
   it writes no message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "dlsync/dlsync.h"

/* A backend that answers every call at once and counts them. */
static long calls;
static int get_device(void *c, int32_t *d) {
  (void)c;
  calls++;
  *d = 0;
  return 0;
}
static int set_device(void *c, int32_t d) {
  (void)c;
  (void)d;
  calls++;
  return 0;
}
static int event_create(void *c, void **e) {
  (void)c;
  calls++;
  *e = &calls;
  return 0;
}
static int event_only(void *c, void *e) {
  (void)c;
  (void)e;
  calls++;
  return 0;
}
static int two(void *c, void *a, void *b) {
  (void)c;
  (void)a;
  (void)b;
  calls++;
  return 0;
}
static int event_query(void *c, void *e, int *done) {
  (void)c;
  (void)e;
  calls++;
  *done = 1;
  return 0;
}
static int capture_info(void *c, void *s, dl_sync_capture_info *out) {
  (void)c;
  (void)s;
  calls++;
  out->status = DL_SYNC_CAPTURE_NONE;
  return 0;
}
static const char *error_name(void *c, int e) {
  (void)c;
  (void)e;
  return "countingError";
}
static int error_status(void *c, int e) {
  (void)c;
  (void)e;
  return DL_SYNC_EBACKEND;
}

static const dl_sync_backend answering = {
    DL_SYNC_BACKEND_INIT,       .name = "answering",          .get_device = get_device,
    .set_device = set_device,   .event_create = event_create, .event_destroy = event_only,
    .event_record = two,        .stream_wait = two,           .event_synchronize = event_only,
    .event_query = event_query, .capture_info = capture_info, .error_name = error_name,
    .error_string = error_name, .error_status = error_status,
};

static const int32_t stream_types[] = {kDLCUDA, kDLCUDAHost, kDLCUDAManaged, kDLROCM, kDLROCMHost};

static int install(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof stream_types / sizeof stream_types[0]; i++)
    if (dl_sync_set_backend(stream_types[i], &answering) != DL_SYNC_OK) return -1;
  return 0;
}

static int uninstall(void **state) {
  (void)state;
  dl_sync_shutdown();
  for (size_t i = 0; i < sizeof stream_types / sizeof stream_types[0]; i++)
    dl_sync_set_backend(stream_types[i], NULL);
  return 0;
}

static void test_it_says_1_exactly_when_the_export_calls_the_runtime(void **state) {
  (void)state;
  const DLDevice devices[] = {{kDLCPU, 0},
                              {kDLCUDA, 0},
                              {kDLCUDA, 3},
                              {kDLCUDA, -1},
                              {kDLCUDA, DL_SYNC_MAX_DEVICES},
                              {kDLCUDAHost, 0},
                              {kDLCUDAManaged, 1},
                              {kDLROCM, 0},
                              {kDLROCMHost, 0},
                              {kDLOpenCL, 0},
                              {(DLDeviceType)99, 0},
                              {(DLDeviceType)-3, 0}};
  void *const producers[] = {NULL, DL_SYNC_STREAM_LEGACY, DL_SYNC_STREAM_PER_THREAD, (void *)0x5000,
                             (void *)0x6000};
  const int64_t values[] = {-1, 0, 1, 2, 0x5000, 0x6000, -2, INT64_MIN, INT64_MAX};
  int said_1 = 0, said_0 = 0;
  for (size_t d = 0; d < sizeof devices / sizeof devices[0]; d++)
    for (size_t p = 0; p < sizeof producers / sizeof producers[0]; p++)
      for (size_t v = 0; v <= sizeof values / sizeof values[0]; v++) {
        dl_sync_stream producer = dl_sync_stream_view(devices[d], producers[p]);
        dl_sync_stream_arg arg = v == sizeof values / sizeof values[0]
                                     ? dl_sync_stream_arg_none()
                                     : dl_sync_stream_arg_int(values[v]);
        int says = dl_sync_export_calls_runtime(producer, arg);
        long before = calls;
        (void)dl_sync_export(producer, arg);
        int called = calls != before;
        if (says != called)
          fail_msg("device %d:%d, producer %p, stream %s%lld: says %d, the export %s the runtime",
                   (int)devices[d].device_type, (int)devices[d].device_id, producers[p],
                   arg.is_none ? "None " : "", (long long)arg.value, says,
                   called ? "called" : "did not call");
        said_1 += says;
        said_0 += !says;
      }
  assert_true(said_1 > 20); /* both answers were reached, many times */
  assert_true(said_0 > 20);
}

static void test_it_writes_no_message(void **state) {
  (void)state;
  /* A failure's message, then the question about arguments the export refuses. */
  assert_int_equal(
      dl_sync_export(dl_sync_stream_view((DLDevice){kDLCUDA, 0}, NULL), dl_sync_stream_arg_int(0)),
      DL_SYNC_EINVAL);
  char before[512];
  snprintf(before, sizeof before, "%s", dl_sync_last_error());
  assert_int_equal(dl_sync_export_calls_runtime(dl_sync_stream_view((DLDevice){kDLROCM, 0}, NULL),
                                                dl_sync_stream_arg_int(2)),
                   0);
  assert_int_equal(dl_sync_export_calls_runtime(dl_sync_stream_view((DLDevice){kDLCUDA, 0}, NULL),
                                                dl_sync_stream_arg_int(-7)),
                   0);
  assert_string_equal(dl_sync_last_error(), before);
  /* And the export still says what was wrong. */
  assert_int_equal(
      dl_sync_export(dl_sync_stream_view((DLDevice){kDLROCM, 0}, NULL), dl_sync_stream_arg_int(2)),
      DL_SYNC_EINVAL);
  assert_non_null(strstr(dl_sync_last_error(), "stream=2"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_it_says_1_exactly_when_the_export_calls_the_runtime,
                                      install, uninstall),
      cmocka_unit_test_setup_teardown(test_it_writes_no_message, install, uninstall),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
