/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer: random record / wait / synchronize / delete interleavings of per-tensor
   events (versioned and legacy) on the simulated device. Every event must be back in the
   pool once every tensor is deleted. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dlsync/dlsync.h"
#include "dlsync/sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { TENSORS = 4, STREAMS = 3 };

static dl_sync_sim_stream *streams[STREAMS];
static int deleted[TENSORS];

static void versioned_deleter(DLManagedTensorVersioned *t) {
  deleted[(intptr_t)t->manager_ctx]++;
}
static void legacy_deleter(DLManagedTensor *t) {
  deleted[(intptr_t)t->manager_ctx]++;
}

static void init_once(void) {
  if (streams[0] != NULL) return;
  dl_sync_set_backend(kDLCUDA, dl_sync_sim_backend());
  dl_sync_sim_stream_create(&streams[0], DL_SYNC_SIM_STREAM_NON_BLOCKING);
  dl_sync_sim_stream_create(&streams[1], DL_SYNC_SIM_STREAM_DEFAULT);
  streams[2] = DL_SYNC_SIM_STREAM_LEGACY;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  init_once();
  DLManagedTensorVersioned versioned[TENSORS];
  DLManagedTensor legacy[TENSORS];
  int alive[TENSORS];
  for (int i = 0; i < TENSORS; i++) {
    versioned[i] = (DLManagedTensorVersioned){
        .version = {1, 3}, .manager_ctx = (void *)(intptr_t)i, .deleter = versioned_deleter};
    versioned[i].dl_tensor.device = (DLDevice){kDLCUDA, 0};
    legacy[i] = (DLManagedTensor){.manager_ctx = (void *)(intptr_t)i, .deleter = legacy_deleter};
    legacy[i].dl_tensor.device = (DLDevice){kDLCUDA, 0};
    alive[i] = 1;
    deleted[i] = 0;
  }
  for (size_t at = 0; at + 1 < size; at += 2) {
    int op = data[at] % 5, t = (data[at + 1] >> 4) % TENSORS, s = (data[at + 1] & 15) % STREAMS;
    int use_legacy = data[at] & 0x80;
    dl_sync_stream stream = dl_sync_stream_view((DLDevice){kDLCUDA, 0}, streams[s]);
    if (!alive[t]) continue;
    switch (op) {
      case 0:
        use_legacy ? dl_sync_legacy_tensor_record(&legacy[t], stream)
                   : dl_sync_tensor_record(&versioned[t], stream);
        break;
      case 1:
        use_legacy ? dl_sync_legacy_tensor_wait(&legacy[t], stream)
                   : dl_sync_tensor_wait(&versioned[t], stream);
        break;
      case 2:
        use_legacy ? dl_sync_legacy_tensor_synchronize(&legacy[t])
                   : dl_sync_tensor_synchronize(&versioned[t]);
        break;
      case 3:
        if (dl_sync_tensor_has_event(&versioned[t]) < 0 ||
            dl_sync_legacy_tensor_has_event(&legacy[t]) < 0)
          abort();
        break;
      default:
        versioned[t].deleter(&versioned[t]);
        legacy[t].deleter(&legacy[t]);
        alive[t] = 0;
    }
  }
  for (int i = 0; i < TENSORS; i++) {
    if (alive[i]) {
      versioned[i].deleter(&versioned[i]);
      legacy[i].deleter(&legacy[i]);
    }
    if (deleted[i] != 2) abort(); /* each original deleter exactly once */
  }
  dl_sync_pool_stats stats;
  dl_sync_pool_stats_get(dl_sync_sim_backend(), 0, &stats);
  if (stats.outstanding != 0) abort();
  return 0;
}
