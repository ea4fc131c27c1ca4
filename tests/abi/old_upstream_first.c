/* Must not compile: an upstream dlpack.h older than 1.0 included before dlsync. */
#include <dlpack/dlpack.h>
#include <dlsync/dlsync.h>
int main(void) { return 0; }
