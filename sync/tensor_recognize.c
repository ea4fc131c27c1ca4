/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Recognizing the deleters of every copy of dlsync in the process.
 *
 * A tensor is dlsync's when its deleter is one of the exported, versioned deleters of
 * dlsync/tensor_event.h. This copy's own are a pointer compare (in tensor.c); another
 * copy's are found by asking dladdr() which exported symbol starts exactly at the
 * deleter's address. The answer, dlsync's or not, is cached per address, so a deleter
 * costs one dladdr() per process and then a few pointer compares.
 *
 * Nothing here reads memory the deleter points to, nor the tensor's manager_ctx: a
 * foreign tensor is judged by its deleter's address only.
 */
#include <stdatomic.h>
#include <string.h>

#include "internal.h"

static const char versioned_prefix[] = "dl_sync_tensor_event_deleter_v";
static const char legacy_prefix[] = "dl_sync_legacy_tensor_event_deleter_v";

/* The major in "<prefix><digits>", or 0 when name is not prefix followed by a major. */
static int major_after(const char *name, const char *prefix, size_t prefix_length) {
  if (strncmp(name, prefix, prefix_length) != 0) return 0;
  const char *digits = name + prefix_length;
  int major = 0;
  for (const char *c = digits; *c != '\0'; c++) {
    if (*c < '0' || *c > '9' || c - digits >= 6) return 0;
    major = major * 10 + (*c - '0');
  }
  return major;
}

/* The verdict for an address: +major for a versioned deleter, -major for a legacy one,
   0 for anything else. */
int dl_sync__deleter_verdict(uintptr_t address) {
  /* Only a symbol that starts exactly there: an address inside a dlsync function is
     never taken for a deleter. */
  const char *name = dl_sync__symbol_starting_at((const void *)address);
  if (name == NULL) return 0;
  int major = major_after(name, versioned_prefix, sizeof versioned_prefix - 1);
  if (major > 0) return major;
  return -major_after(name, legacy_prefix, sizeof legacy_prefix - 1);
}

/* Verdicts, filled once each and never overwritten: readers match an address with an
   acquire load and then read its verdict; a writer claims a slot, fills the verdict and
   publishes the address with a release store. No lock: a forked child can never inherit
   one held. A reader that meets a claimed slot not yet published judges the deleter
   itself (dladdr), and may publish it again further on: equal verdicts, still correct.
   When the cache is full, deleters beyond it are judged on every call. */
enum { CACHE_SLOTS = 64 };
static _Atomic uintptr_t cached_address[CACHE_SLOTS];
static int32_t cached_verdict[CACHE_SLOTS];
static atomic_bool claimed[CACHE_SLOTS];

static int cache_find(uintptr_t address, int32_t *verdict) {
  for (size_t i = 0; i < CACHE_SLOTS; i++) {
    uintptr_t at = atomic_load_explicit(&cached_address[i], memory_order_acquire);
    if (at == 0) return 0;
    if (at == address) {
      *verdict = cached_verdict[i];
      return 1;
    }
  }
  return 0;
}

static int32_t cache_insert(uintptr_t address, int32_t verdict) {
  for (size_t i = 0; i < CACHE_SLOTS; i++) {
    uintptr_t at = atomic_load_explicit(&cached_address[i], memory_order_acquire);
    if (at == address) return cached_verdict[i]; /* another thread was first */
    if (at != 0 || atomic_exchange_explicit(&claimed[i], 1, memory_order_relaxed)) continue;
    cached_verdict[i] = verdict;
    atomic_store_explicit(&cached_address[i], address, memory_order_release);
    return verdict;
  }
  return verdict;
}

int dl_sync__deleter_major(uintptr_t deleter, int legacy) {
  if (deleter == 0) return 0;
  int32_t verdict;
  if (!cache_find(deleter, &verdict))
    verdict = cache_insert(deleter, dl_sync__deleter_verdict(deleter));
  if (legacy) return verdict < 0 ? -verdict : 0;
  return verdict > 0 ? verdict : 0;
}
