/* SPDX-License-Identifier: Apache-2.0 */
/* A program that makes a thread, linked with the simulator's archive (static_link.cmake). */
#include <pthread.h>
#include <stddef.h>

#ifndef WITHOUT_SIMULATOR
#include <dlsync/sim.h>
#endif

static void *run(void *arg) {
  return arg;
}

int main(void) {
  pthread_t thread;
  if (pthread_create(&thread, NULL, run, NULL) != 0) return 1;
  return pthread_join(thread, NULL);
}
