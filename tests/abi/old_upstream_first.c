/* SPDX-License-Identifier: Apache-2.0 */
/* Must not compile: an upstream dlpack.h older than 1.0 included before dlsync. The
   #error must be the only message. */
#include <dlpack/dlpack.h>
#include <dlsync/dlsync.h>
#include <dlsync/sim.h>
int main(void) {
  return 0;
}
