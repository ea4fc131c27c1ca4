/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer: recognizing dlsync's tensors from random deleters and manager_ctx values.
   A tensor whose deleter is not exactly a dlsync deleter is never read and never has an
   event, whatever its manager_ctx points to (unmapped memory, bytes that spell the owner
   record's magic); a real dlsync tensor whose record fields are mutated is either usable
   (has_event 1) or an error, never "no event", and a wait on it is never OK unless it is
   usable. The target exports its symbols (ENABLE_EXPORTS), so dladdr names the static
   copy's functions as it would another copy's. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dlsync/dlsync.h"
#include "dlsync/sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef void (*deleter_fn)(DLManagedTensorVersioned *);
typedef void (*legacy_fn)(DLManagedTensor *);

static void foreign_deleter(DLManagedTensorVersioned *t) {
  (void)t;
}

static const DLDevice cuda0 = {kDLCUDA, 0};

typedef struct input {
  const uint8_t *data;
  size_t size, at;
} input;

static uint64_t take(input *in, size_t bytes) {
  uint64_t value = 0;
  for (size_t i = 0; i < bytes; i++)
    value = value << 8 | (in->at < in->size ? in->data[in->at++] : 0);
  return value;
}

/* Addresses near dlsync's deleters, other exported functions, this program, libc, or
   anything at all; never exactly a dlsync deleter. */
static uintptr_t pick_deleter(input *in) {
  const uintptr_t bases[] = {
      (uintptr_t)dl_sync_tensor_event_deleter_v1,
      (uintptr_t)dl_sync_legacy_tensor_event_deleter_v1,
      (uintptr_t)dl_sync_tensor_record,
      (uintptr_t)dl_sync_tensor_events_visible,
      (uintptr_t)foreign_deleter,
      (uintptr_t)free,
      (uintptr_t)memcpy,
      0,
  };
  uint64_t choice = take(in, 1);
  uintptr_t base = choice < 224 ? bases[choice % 8] : (uintptr_t)take(in, 8);
  uintptr_t address = base + (uintptr_t)(int8_t)take(in, 1);
  return address;
}

static int is_dlsync_deleter(uintptr_t address) {
  return address == (uintptr_t)dl_sync_tensor_event_deleter_v1 ||
         address == (uintptr_t)dl_sync_legacy_tensor_event_deleter_v1;
}

static void fuzz_foreign(input *in) {
  static uint64_t fake[16]; /* what manager_ctx may point to: a forged record */
  uintptr_t deleter = pick_deleter(in);
  if (is_dlsync_deleter(deleter)) return;
  for (size_t i = 0; i < 16; i++) fake[i] = take(in, 1) & 1 ? take(in, 8) : 0;
  fake[0] = take(in, 1) & 1 ? DL_SYNC_TENSOR_EVENT_MAGIC : fake[0];
  uint64_t ctx_choice = take(in, 1) % 3;
  void *ctx = ctx_choice == 0   ? (void *)fake
              : ctx_choice == 1 ? NULL
                                : (void *)(uintptr_t)take(in, 8);
  DLManagedTensorVersioned t = {
      .version = {1, 3}, .manager_ctx = ctx, .deleter = (deleter_fn)deleter};
  t.dl_tensor.device = cuda0;
  DLManagedTensor l = {.manager_ctx = ctx, .deleter = (legacy_fn)deleter};
  l.dl_tensor.device = cuda0;
  dl_sync_stream consumer = dl_sync_stream_view(cuda0, NULL);
  if (dl_sync_tensor_has_event(&t) != 0 || dl_sync_legacy_tensor_has_event(&l) != 0) abort();
  if (dl_sync_tensor_wait(&t, consumer) != DL_SYNC_OK) abort();
  if (dl_sync_legacy_tensor_wait(&l, consumer) != DL_SYNC_OK) abort();
  if (dl_sync_tensor_synchronize(&t) != DL_SYNC_OK) abort();
}

static void fuzz_mutated_record(input *in) {
  DLManagedTensorVersioned t = {.version = {1, 3}};
  t.dl_tensor.device = cuda0;
  dl_sync_stream consumer = dl_sync_stream_view(cuda0, NULL);
  if (dl_sync_tensor_record(&t, consumer) != DL_SYNC_OK) abort();
  dl_sync_tensor_event_owner *record = t.manager_ctx;
  dl_sync_tensor_event_owner saved = *record;
  uint64_t which = take(in, 1);
  if (which & 1) record->magic ^= take(in, 8);
  if (which & 2) record->abi_major = (uint32_t)take(in, 4);
  if (which & 4) record->size = take(in, 8);
  if (which & 8) record->runtime_family = (int32_t)take(in, 4);
  int usable = record->magic == DL_SYNC_TENSOR_EVENT_MAGIC &&
               record->abi_major == DL_SYNC_TENSOR_EVENT_ABI_MAJOR &&
               /* every record has the fields of minor 0; later minors add to them */
               record->size >= offsetof(dl_sync_tensor_event_owner, context_id) &&
               (record->runtime_family == DL_SYNC_RUNTIME_FAMILY_CUDA ||
                record->runtime_family == DL_SYNC_RUNTIME_FAMILY_ROCM);
  int has = dl_sync_tensor_has_event(&t);
  if (usable ? has != 1 : has >= 0) abort(); /* unusable: an error, never "no event" */
  int waited = dl_sync_tensor_wait(&t, consumer);
  if (waited == DL_SYNC_OK && !(usable && record->runtime_family == DL_SYNC_RUNTIME_FAMILY_CUDA))
    abort();
  *record = saved;
  t.deleter(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int initialized;
  if (!initialized) {
    dl_sync_set_backend(kDLCUDA, dl_sync_sim_backend());
    initialized = 1;
  }
  input in = {data, size, 0};
  while (in.at < in.size) {
    if (take(&in, 1) & 1)
      fuzz_mutated_record(&in);
    else
      fuzz_foreign(&in);
  }
  dl_sync_pool_stats stats;
  dl_sync_pool_stats_get(dl_sync_sim_backend(), 0, &stats);
  if (stats.outstanding != 0) abort();
  return 0;
}
