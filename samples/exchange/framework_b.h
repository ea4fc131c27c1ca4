/* SPDX-License-Identifier: Apache-2.0 */
/* Framework B, the consumer: imports DLPack tensors and runs a checking kernel on them. */
#ifndef DEMO_FRAMEWORK_B_H_
#define DEMO_FRAMEWORK_B_H_

#include <stdint.h>

#include <dlsync/dlsync.h>
#include <dlsync/sim.h>

/* A producer's __dlpack__: returns an owning tensor made safe for the stream argument. */
typedef int (*fb_dlpack_fn)(void *object, dl_sync_stream_arg stream,
                            DLManagedTensorVersioned **out);

int fb_init(int sync);
void fb_shutdown(void);
/* N0: runs the check on the producer's current work stream (asked from its table). */
int fb_check_on_producer_stream(const DLPackExchangeAPI *api, void *object, int32_t expected);
/* Stream argument: asks the producer to make the data ready on B's own stream. */
int fb_check_with_stream_argument(fb_dlpack_fn dlpack, void *object, int32_t expected);
/* Release: checks the tensor on B.main and is done with it at once (a garbage-collected
   import): releases it after that work (dl_sync_tensor_release), or with --no-sync calls
   its deleter directly. */
int fb_check_then_release(fb_dlpack_fn dlpack, void *object, int32_t expected);
/* Group: one kernel on B.main reads three tensors of the producer whose table is api;
   one dependency group orders the producer's stream before B.main once for all three. */
int fb_check_three_with_group(const DLPackExchangeAPI *api, void *objects[3],
                              const int32_t expected[3]);
/* N1: takes ownership of tensor; another thread waits on its event and checks it later. */
int fb_check_later_on_another_thread(DLManagedTensorVersioned *tensor, int32_t expected);
/* Waits for all of B's work; returns the number of wrong elements B saw. */
int64_t fb_finish(void);

#endif
