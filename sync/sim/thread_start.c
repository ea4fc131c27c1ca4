/* SPDX-License-Identifier: Apache-2.0 */
/* The first function of a thread created through the simulator's pthread_create.

   Under a sanitizer (ThreadSanitizer, AddressSanitizer) the program's pthread_create is the
   sanitizer's; it passes the simulator's its own start function, which sets the thread up
   for the sanitizer. This function runs before that, so it is built without sanitizer
   instrumentation and does nothing but file the birth record under its key and call the
   start function. Everything else happens later, on instrumented code paths. */
#include "sim_internal.h"

void *dl_sync__sim_thread_start(void *birth) {
  sim_birth *b = birth;
  pthread_setspecific(b->key, b);
  return b->start(b->arg);
}
