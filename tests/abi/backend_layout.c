/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The backend vtable as an ABI: a backend built against the layout before size and abi
 * came first (it began with name, then a fixed array of call names) is refused with a
 * message that says what to do; one built against a later header, whose struct is
 * longer, works; one whose size is below the first versioned layout is refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "dlsync/dlsync.h"

static int answer(void) {
  return 0;
}

/* The layout before: name, ctx, flags, call_names[12], then the same callbacks. */
struct previous_backend {
  const char *name;
  void *ctx;
  uint32_t flags;
  const char *call_names[12];
  void (*callbacks[18])(void);
  const char *context_call_names[5];
};

/* A backend of this header whose every callback slot is set (to a function that is
   never called: installing calls nothing). */
static void fill(dl_sync_backend *b) {
  void (*f)(void) = (void (*)(void))answer;
  memcpy(&b->device_count, &f, sizeof f);
  for (char *slot = (char *)&b->device_count; slot < (char *)&b->context_call_names;
       slot += sizeof f)
    memcpy(slot, &f, sizeof f);
  memset(&b->get_context, 0, (size_t)((char *)&b->context_call_names - (char *)&b->get_context));
  b->available = NULL;
}

static void test_a_backend_of_the_previous_layout_is_refused(void **state) {
  (void)state;
  struct previous_backend old = {.name = "old"};
  void (*f)(void) = (void (*)(void))answer;
  for (size_t i = 0; i < sizeof old.callbacks / sizeof *old.callbacks; i++) old.callbacks[i] = f;
  dl_sync_backend as_new;
  memcpy(&as_new, &old, sizeof old < sizeof as_new ? sizeof old : sizeof as_new);
  assert_int_equal(dl_sync_set_backend(kDLCUDA, &as_new), DL_SYNC_EINVAL);
  print_message("%s\n", dl_sync_last_error());
  assert_non_null(strstr(dl_sync_last_error(), "does not begin with DL_SYNC_BACKEND_ABI"));
  assert_non_null(strstr(dl_sync_last_error(), "DL_SYNC_BACKEND_INIT"));
  assert_ptr_equal(dl_sync_get_backend(kDLCUDA), dl_sync_cuda_backend()); /* unchanged */
}

static void test_a_backend_of_a_later_longer_layout_is_installed(void **state) {
  (void)state;
  static union {
    dl_sync_backend backend;
    char longer[sizeof(dl_sync_backend) + 64];
  } later;
  later.backend = (dl_sync_backend){DL_SYNC_BACKEND_INIT, .name = "later"};
  fill(&later.backend);
  later.backend.size = (uint32_t)sizeof later.longer;
  assert_int_equal(dl_sync_set_backend(kDLCUDA, &later.backend), DL_SYNC_OK);
  assert_ptr_equal(dl_sync_get_backend(kDLCUDA), &later.backend);
  assert_int_equal(dl_sync_set_backend(kDLCUDA, NULL), DL_SYNC_OK);
}

static void test_a_backend_below_the_first_layout_is_refused(void **state) {
  (void)state;
  dl_sync_backend short_one = {DL_SYNC_BACKEND_INIT, .name = "short"};
  fill(&short_one);
  short_one.size = (uint32_t)offsetof(dl_sync_backend, error_status);
  assert_int_equal(dl_sync_set_backend(kDLCUDA, &short_one), DL_SYNC_EINVAL);
  print_message("%s\n", dl_sync_last_error());
  assert_non_null(strstr(dl_sync_last_error(), "says its size is"));
  /* the control: the same backend with its own size is installed */
  short_one.size = (uint32_t)sizeof short_one;
  assert_int_equal(dl_sync_set_backend(kDLCUDA, &short_one), DL_SYNC_OK);
  assert_int_equal(dl_sync_set_backend(kDLCUDA, NULL), DL_SYNC_OK);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_a_backend_of_the_previous_layout_is_refused),
      cmocka_unit_test(test_a_backend_of_a_later_longer_layout_is_installed),
      cmocka_unit_test(test_a_backend_below_the_first_layout_is_refused),
  };
  return cmocka_run_group_tests_name("backend_layout", tests, NULL, NULL);
}
