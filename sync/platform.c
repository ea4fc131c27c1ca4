/* SPDX-License-Identifier: Apache-2.0 */
/* What platform.h offers that is the same on every system, over the system's own file. */
#include "platform.h"

#include <stdatomic.h>

static const char this_copy; /* an address inside the object that holds this copy */

static void pin_this_copy(void) {
  dl_sync__pin_object_at(&this_copy);
}

void dl_sync__pin_this_copy(void) {
  static dl_sync__once once = DL_SYNC__ONCE_INIT;
  dl_sync__once_run(&once, pin_this_copy);
}

uint64_t dl_sync__thread_number(void) {
  static DL_SYNC__THREAD_LOCAL uint64_t number; /* 0: not drawn yet */
  static atomic_uint_fast64_t drawn;
  if (number == 0) number = atomic_fetch_add(&drawn, 1) + 1;
  return number;
}
