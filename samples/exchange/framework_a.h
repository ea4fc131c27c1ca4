/* SPDX-License-Identifier: Apache-2.0 */
/* Framework A, the producer: owns its streams and tensors, exports them through a DLPack
   1.3 exchange table and through a __dlpack__-style entry taking the stream argument. */
#ifndef DEMO_FRAMEWORK_A_H_
#define DEMO_FRAMEWORK_A_H_

#include <stddef.h>
#include <stdint.h>

#include <dlsync/dlsync.h>
#include <dlsync/sim.h>

typedef struct fa_tensor fa_tensor;

/* Creates A's work stream on the simulated device. sync = 0 turns dlsync off (--no-sync). */
int fa_init(int sync);
void fa_shutdown(void);
fa_tensor *fa_tensor_new(size_t count);
/* A tensor whose block comes from A's stream-ordered pool: freed on A.work when its last
   reference goes, and the next pooled tensor's block at once. */
fa_tensor *fa_pooled_tensor_new(size_t count);
void fa_tensor_release(fa_tensor *tensor);
/* Enqueues a kernel on A's current stream that writes value + i into element i. */
int fa_fill(fa_tensor *tensor, int32_t value);
/* A's table: current_work_stream and managed_tensor_from_py_object_no_sync (the "Python
   object" is an fa_tensor). */
const DLPackExchangeAPI *fa_exchange_api(void);
/* __dlpack__(stream=arg): makes the data safe on the consumer's stream, returns an owning
   tensor. */
int fa_dlpack(fa_tensor *tensor, dl_sync_stream_arg stream, DLManagedTensorVersioned **out);
/* fa_dlpack, naming A.work (where A's pool reuses the block) as the tensor's reuse stream. */
int fa_dlpack_reusable(fa_tensor *tensor, dl_sync_stream_arg stream,
                       DLManagedTensorVersioned **out);
/* The N1 path: an owning tensor that carries an event recorded on A's stream. */
int fa_dlpack_with_event(fa_tensor *tensor, DLManagedTensorVersioned **out);

#endif
