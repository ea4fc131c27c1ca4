/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlsync/tensor_event.h: the owner record of a per-tensor event, an ABI shared by every
 * copy of dlsync in a process.
 *
 * Frameworks usually vendor dlsync: each links its own static copy into its own extension
 * module, loaded with RTLD_LOCAL. A tensor one copy recorded must be usable by every
 * other copy, of any dlsync version with the same DL_SYNC_TENSOR_EVENT_ABI_MAJOR, so what
 * the tensor carries is not a private struct but the record below, and the deleter dlsync
 * installs is an exported function with a fixed, versioned name:
 *
 *   DLManagedTensorVersioned: deleter == dl_sync_tensor_event_deleter_v1
 *   DLManagedTensor:          deleter == dl_sync_legacy_tensor_event_deleter_v1
 *   manager_ctx -> dl_sync_tensor_event_owner
 *
 * Recognition starts from the deleter, never from manager_ctx (reading another producer's
 * manager_ctx as a record would be undefined behaviour): a tensor is dlsync's when its
 * deleter is this copy's, or when dladdr() names the deleter's exact address with one of
 * the names above (the verdict is cached per deleter address, so the steady state is a
 * pointer compare). Only then is the record read, and its magic, major and size checked.
 *
 * Waits use the consumer copy's backend on the native event handle: CUDA and HIP events
 * are runtime objects shared by the whole process. The event stays alive for graphs
 * through the owner's retain / release, never through the consumer copy's event pool.
 *
 * Limit: a copy linked with all its symbols hidden (-Wl,--exclude-libs,ALL, a version
 * script with "local: *;") exports no deleter name, so other copies cannot tell its
 * tensors from another producer's and see no event. dl_sync_tensor_events_visible() says
 * so to the producer at run time; docs/vendoring.md says what to do.
 */
#ifndef DL_SYNC_TENSOR_EVENT_H_
#define DL_SYNC_TENSOR_EVENT_H_

#include <stddef.h>
#include <stdint.h>

#include "dlsync/dlpack.h"
#include "dlsync/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/** "dlsyncev" in ASCII: the first field of every owner record. */
#define DL_SYNC_TENSOR_EVENT_MAGIC UINT64_C(0x646c73796e636576)
/** A copy waits only on records of its own major; minors only add fields at the end. */
#define DL_SYNC_TENSOR_EVENT_ABI_MAJOR 1
#define DL_SYNC_TENSOR_EVENT_ABI_MINOR 4

/** Runtime families: which runtime's events the native handle is. Derived from the
    device type: CUDA for kDLCUDA, kDLCUDAHost, kDLCUDAManaged; ROCm for kDLROCM and
    kDLROCMHost. */
#define DL_SYNC_RUNTIME_FAMILY_CUDA 1
#define DL_SYNC_RUNTIME_FAMILY_ROCM 2

/**
 * What a dlsync tensor's manager_ctx points to. Written once by the copy that recorded
 * the event (the owner) and read-only for every other copy. ABI rule: the first four
 * fields (magic, abi_major, abi_minor, size) never move, whatever the major; within a
 * major, fields are only added at the end, and size says how many bytes are valid.
 */
typedef struct dl_sync_tensor_event_owner {
  uint64_t magic;     /**< DL_SYNC_TENSOR_EVENT_MAGIC; 0 once the tensor is deleted */
  uint32_t abi_major; /**< DL_SYNC_TENSOR_EVENT_ABI_MAJOR of the owner */
  uint32_t abi_minor; /**< DL_SYNC_TENSOR_EVENT_ABI_MINOR of the owner */
  uint64_t size;      /**< sizeof the record as the owner wrote it */
  /** The producer's own manager_ctx, restored by the deleter. */
  void *manager_ctx;
  /** The producer's own deleter of a DLManagedTensorVersioned (else NULL). */
  void (*versioned_deleter)(struct DLManagedTensorVersioned *tensor);
  /** The producer's own deleter of a DLManagedTensor (else NULL). */
  void (*legacy_deleter)(struct DLManagedTensor *tensor);
  DLDevice device;        /**< where the event was recorded */
  int32_t runtime_family; /**< DL_SYNC_RUNTIME_FAMILY_* */
  uint32_t reserved;      /**< 0 */
  /** The native event: a cudaEvent_t or hipEvent_t (for the simulated device, its event).
      Equal handles are one event. Created with timing disabled. */
  void *event;
  /** Passed to retain and release. */
  void *event_ctx;
  /** Adds a reference to the event (e.g. for a graph that waits on it). Thread-safe,
      makes no runtime call. */
  void (*retain)(void *event_ctx);
  /** Drops a reference; the last one gives the event back to the owner copy's pool.
      Thread-safe, makes no runtime call: safe from a graph user object's destructor. */
  void (*release)(void *event_ctx);
  /* Minor 1 (present when size covers it). */
  /** The identity of the context the event belongs to (a backend with contexts: the CUDA
      driver's cuCtxGetId), else 0. An event records only in its own context. */
  uint64_t context_id;
  /* Minor 2 (present when size covers it). */
  /** The producer's reuse stream: the stream its allocator hands the tensor's memory out
      again on once the deleter ran (a stream-ordered pool's free stream). A consumer that
      releases the tensor (dl_sync_tensor_release) makes it wait for the consumer's work
      first. Its device type is 0 when the producer named none, and from minor 4 when the
      reuse stream is a default stream of a backend with contexts (reuse_default_stream). */
  void *reuse_stream;
  DLDevice reuse_device;
  /* Minor 3 (present when size covers it). */
  /** With a backend that has contexts (the CUDA driver) and a legacy default reuse stream:
      the context that was current when the producer named it (else its device's primary
      context), since the same special handle names another context's legacy stream on a
      thread with another context current. NULL otherwise: an explicit handle names its own
      context. */
  void *reuse_context;
  /** That context's identity (cuCtxGetId), 0 without one: a consumer orders the reuse
      stream only while its context is still this one. */
  uint64_t reuse_context_id;
  /* Minor 4 (present when size covers it). */
  /** With a backend that has contexts, a default reuse stream (a legacy handle): its handle
      and device, written here instead of reuse_stream and reuse_device. A copy before
      minor 3 reads those without a context and would order the legacy stream of its own
      thread's current context; a copy of minor 3 reads a green context's there without
      one. Such copies find no reuse stream, and defer the release. Device type 0: none. */
  void *reuse_default_stream;
  DLDevice reuse_default_device;
  /** The stream the event was last recorded on, as the recording call named it (written
      by whichever copy records it, the owner's record re-recorded in place included):
      where a runtime's synchronization of the event reads that stream (HIP 5.7 to 7.2.0,
      which invalidates its capture), dl_sync_tensor_synchronize asks first whether it
      captures or is gone. A per-thread default stream is the recording thread's. */
  void *producer_stream;
} dl_sync_tensor_event_owner;

/* The record's layout on 64-bit targets, pinned: every copy must agree on it. */
#if UINTPTR_MAX == 0xFFFFFFFFFFFFFFFFu && !defined(__cplusplus)
#define DL_SYNC_ABI_PIN(field, at)                                  \
  _Static_assert(offsetof(dl_sync_tensor_event_owner, field) == at, \
                 "owner record: " #field " at " #at)
DL_SYNC_ABI_PIN(magic, 0);
DL_SYNC_ABI_PIN(abi_major, 8);
DL_SYNC_ABI_PIN(abi_minor, 12);
DL_SYNC_ABI_PIN(size, 16);
DL_SYNC_ABI_PIN(manager_ctx, 24);
DL_SYNC_ABI_PIN(versioned_deleter, 32);
DL_SYNC_ABI_PIN(legacy_deleter, 40);
DL_SYNC_ABI_PIN(device, 48);
DL_SYNC_ABI_PIN(runtime_family, 56);
DL_SYNC_ABI_PIN(reserved, 60);
DL_SYNC_ABI_PIN(event, 64);
DL_SYNC_ABI_PIN(event_ctx, 72);
DL_SYNC_ABI_PIN(retain, 80);
DL_SYNC_ABI_PIN(release, 88);
DL_SYNC_ABI_PIN(context_id, 96);
DL_SYNC_ABI_PIN(reuse_stream, 104);
DL_SYNC_ABI_PIN(reuse_device, 112);
DL_SYNC_ABI_PIN(reuse_context, 120);
DL_SYNC_ABI_PIN(reuse_context_id, 128);
DL_SYNC_ABI_PIN(reuse_default_stream, 136);
DL_SYNC_ABI_PIN(reuse_default_device, 144);
DL_SYNC_ABI_PIN(producer_stream, 152);
_Static_assert(sizeof(dl_sync_tensor_event_owner) == 160, "owner record: 160 bytes in ABI 1.4");
#undef DL_SYNC_ABI_PIN
#endif

/**
 * The deleters dlsync installs. Call them only as tensor->deleter(tensor): each puts the
 * producer's manager_ctx and deleter back, releases the tensor's reference to the event
 * and calls the producer's deleter (if not NULL) exactly once. They make no runtime
 * call, so they may run on any thread. Their names carry the ABI major.
 */
DL_SYNC_RECOGNIZED_API void dl_sync_tensor_event_deleter_v1(DLManagedTensorVersioned *tensor);
DL_SYNC_RECOGNIZED_API void dl_sync_legacy_tensor_event_deleter_v1(DLManagedTensor *tensor);

/**
 * 1 when other copies of dlsync in this process can recognize the tensors this copy
 * records (dladdr names its deleters), 0 when this copy's symbols are hidden (a vendoring
 * build that hides every symbol, or a static link into an executable without
 * -rdynamic). With 0, per-tensor events still work within this copy, but a consumer that
 * uses another copy sees "no event": export with the stream argument instead
 * (dl_sync_export), which orders at export time.
 */
DL_SYNC_API int dl_sync_tensor_events_visible(void);

#ifdef __cplusplus
}
#endif
#endif /* DL_SYNC_TENSOR_EVENT_H_ */
