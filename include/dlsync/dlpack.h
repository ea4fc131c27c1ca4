/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlsync/dlpack.h: the DLPack 1.3 ABI, declared by dlsync so that it builds with
 * nothing but a C compiler, or taken from upstream's dlpack/dlpack.h (1.0 or newer).
 *
 * Which declarations a translation unit gets:
 *  - an upstream dlpack.h included before dlsync (any 1.x): its types. dlsync adds what
 *    an older 1.x header lacks: the DLManagedTensorVersioned typedef (1.0 and 1.1 declare
 *    only the struct tag) and the exchange-table types (added in DLPack 1.2; with a
 *    header that declares them but reports an older minor, define
 *    DL_SYNC_DLPACK_HAS_EXCHANGE_API to 1);
 *  - DL_SYNC_DLPACK_HEADER defined (e.g. -DDL_SYNC_DLPACK_HEADER='<dlpack/dlpack.h>'):
 *    dlsync includes that header itself and proceeds as above, so every include order
 *    uses the project's own upstream header;
 *  - otherwise dlsync's own declarations (DLPack 1.3), under this header's own guard.
 *    They also mark upstream's guard as taken: C cannot declare DLPack's unnamed structs
 *    twice in one translation unit, so a dlpack/dlpack.h included after this header adds
 *    nothing and the unit keeps one set of types. A project that needs names newer than
 *    1.3 includes its header first or names it in DL_SYNC_DLPACK_HEADER;
 *  - an upstream header older than 1.0 (0.x: no DLPACK_MAJOR_VERSION) included first,
 *    or a 2.x one: #error.
 *
 * ABI rule: whichever declarations are in use, every size and offset below is checked by
 * static assertions (C11 and C++11) against the 1.x layout, so dlsync and the upstream
 * header agree. Only <stddef.h> and <stdint.h> are needed.
 */
#ifndef DL_SYNC_DLPACK_H_
#define DL_SYNC_DLPACK_H_

#include <stddef.h>
#include <stdint.h>

#if defined(DL_SYNC_DLPACK_HEADER) && !defined(DLPACK_DLPACK_H_)
#include DL_SYNC_DLPACK_HEADER
#endif

#if defined(DLPACK_DLPACK_H_) && !defined(DLPACK_MAJOR_VERSION)
#error \
    "dlsync needs DLPack 1.0 or newer, but an older dlpack/dlpack.h (0.x, DLPACK_VERSION < 100) was included first; include <dlsync/dlpack.h> instead or upgrade dlpack"
#elif defined(DLPACK_DLPACK_H_) && DLPACK_MAJOR_VERSION != 1
#error \
    "dlsync declares the DLPack 1.x ABI, but a dlpack/dlpack.h of another major version was included first"
#endif

#if defined(DLPACK_DLPACK_H_) && !defined(DLPACK_MAJOR_VERSION)
/* After the #error above, the 1.0 types a 0.x header lacks, so that it stays the only
   message. */
#ifdef __cplusplus
extern "C" {
#endif
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned *self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;
#ifdef __cplusplus
}
#endif
#undef DL_SYNC_DLPACK_HAS_EXCHANGE_API
#define DL_SYNC_DLPACK_HAS_EXCHANGE_API 0
#elif defined(DLPACK_DLPACK_H_)
/* Upstream's header is in use. 1.0 and 1.1 declare `struct DLManagedTensorVersioned`
   without a typedef; C11 and C++ allow repeating a typedef of the same type. */
#ifdef __cplusplus
extern "C" {
#endif
typedef struct DLManagedTensorVersioned DLManagedTensorVersioned;
#ifdef __cplusplus
}
#endif
#ifndef DL_SYNC_DLPACK_HAS_EXCHANGE_API
#if DLPACK_MINOR_VERSION >= 2
#define DL_SYNC_DLPACK_HAS_EXCHANGE_API 1
#else
#define DL_SYNC_DLPACK_HAS_EXCHANGE_API 0
#endif
#endif
#else /* no upstream header: dlsync's own declarations */
#define DLPACK_DLPACK_H_
#define DL_SYNC_OWNS_DLPACK_TYPES 1
#undef DL_SYNC_DLPACK_HAS_EXCHANGE_API
#define DL_SYNC_DLPACK_HAS_EXCHANGE_API 0

#ifdef __cplusplus
#define DLPACK_EXTERN_C extern "C"
#else
#define DLPACK_EXTERN_C
#endif
#define DLPACK_DLL

/** The DLPack version these declarations follow. */
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 3

#ifdef __cplusplus
extern "C" {
#endif

/** A DLPack ABI version: a major change breaks the ABI, a minor one extends it. */
typedef struct {
  uint32_t major; /**< incompatible changes */
  uint32_t minor; /**< compatible additions */
} DLPackVersion;

/** Where memory lives. Wire values are fixed: never renumber. */
#ifdef __cplusplus
typedef enum : int32_t {
#else
typedef enum {
#endif
  kDLCPU = 1,          /**< host memory */
  kDLCUDA = 2,         /**< CUDA device memory */
  kDLCUDAHost = 3,     /**< CUDA pinned host memory */
  kDLOpenCL = 4,       /**< OpenCL device memory */
  kDLVulkan = 7,       /**< Vulkan buffer */
  kDLMetal = 8,        /**< Metal buffer */
  kDLVPI = 9,          /**< Verilog simulator buffer */
  kDLROCM = 10,        /**< ROCm device memory */
  kDLROCMHost = 11,    /**< ROCm pinned host memory */
  kDLExtDev = 12,      /**< reserved for extension devices */
  kDLCUDAManaged = 13, /**< CUDA managed (unified) memory */
  kDLOneAPI = 14,      /**< oneAPI unified shared memory */
  kDLWebGPU = 15,      /**< WebGPU buffer */
  kDLHexagon = 16,     /**< Qualcomm Hexagon DSP */
  kDLMAIA = 17,        /**< Microsoft MAIA */
  kDLTrn = 18,         /**< AWS Trainium */
} DLDeviceType;

/** A device: its type and its ordinal among devices of that type. */
typedef struct {
  DLDeviceType device_type; /**< see DLDeviceType */
  int32_t device_id;        /**< ordinal, 0 for the host */
} DLDevice;

/** Scalar kinds of DLDataType.code. */
typedef enum {
  kDLInt = 0U,                /**< signed integer */
  kDLUInt = 1U,               /**< unsigned integer */
  kDLFloat = 2U,              /**< IEEE floating point */
  kDLOpaqueHandle = 3U,       /**< opaque handle, bits is the pointer size */
  kDLBfloat = 4U,             /**< bfloat16 */
  kDLComplex = 5U,            /**< complex, bits is the size of both parts */
  kDLBool = 6U,               /**< boolean */
  kDLFloat8_e3m4 = 7U,        /**< float8 e3m4 */
  kDLFloat8_e4m3 = 8U,        /**< float8 e4m3 */
  kDLFloat8_e4m3b11fnuz = 9U, /**< float8 e4m3 bias 11, finite, unsigned zero */
  kDLFloat8_e4m3fn = 10U,     /**< float8 e4m3 finite */
  kDLFloat8_e4m3fnuz = 11U,   /**< float8 e4m3 finite, unsigned zero */
  kDLFloat8_e5m2 = 12U,       /**< float8 e5m2 */
  kDLFloat8_e5m2fnuz = 13U,   /**< float8 e5m2 finite, unsigned zero */
  kDLFloat8_e8m0fnu = 14U,    /**< float8 e8m0, finite, unsigned */
  kDLFloat6_e2m3fn = 15U,     /**< float6 e2m3 finite */
  kDLFloat6_e3m2fn = 16U,     /**< float6 e3m2 finite */
  kDLFloat4_e2m1fn = 17U,     /**< float4 e2m1 finite */
} DLDataTypeCode;

/** An element type: code, bits per lane and lanes per element. */
typedef struct {
  uint8_t code;   /**< a DLDataTypeCode */
  uint8_t bits;   /**< bits per lane */
  uint16_t lanes; /**< lanes, 1 for scalars */
} DLDataType;

/** A strided view of memory; it owns nothing. */
typedef struct {
  void *data;           /**< base pointer, aligned as the producer documents */
  DLDevice device;      /**< where data lives */
  int32_t ndim;         /**< number of dimensions */
  DLDataType dtype;     /**< element type */
  int64_t *shape;       /**< ndim extents */
  int64_t *strides;     /**< ndim strides in elements, or NULL for compact row-major */
  uint64_t byte_offset; /**< offset of the first element from data, in bytes */
} DLTensor;

/** The pre-1.0 owning tensor. Keep dl_tensor first and deleter last: the ABI of 0.x. */
typedef struct DLManagedTensor {
  DLTensor dl_tensor;                            /**< the view */
  void *manager_ctx;                             /**< the producer's context */
  void (*deleter)(struct DLManagedTensor *self); /**< frees it; may be NULL */
} DLManagedTensor;

/** The tensor may not be written by the consumer. */
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
/** The producer made a copy: the consumer owns the only reference. */
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
/** Sub-byte elements are padded to whole bytes. */
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)

/**
 * The versioned owning tensor (DLPack 1.0 and newer).
 * Keep everything up to and including deleter stable, so that any consumer can always
 * read the version and call the deleter.
 */
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;                                  /**< the producer's ABI version */
  void *manager_ctx;                                      /**< the producer's context */
  void (*deleter)(struct DLManagedTensorVersioned *self); /**< frees it; may be NULL */
  uint64_t flags;                                         /**< DLPACK_FLAG_BITMASK_* */
  DLTensor dl_tensor;                                     /**< the view */
} DLManagedTensorVersioned;

#ifdef __cplusplus
}
#endif
#endif /* dlsync's own declarations */

/* The exchange-table types (DLPack 1.2), unless the header in use declares them. */
#if !DL_SYNC_DLPACK_HAS_EXCHANGE_API
#define DL_SYNC_HAS_EXCHANGE_API_TYPES 1
#ifdef __cplusplus
extern "C" {
#endif

/** Reports an error from a DLPackManagedTensorAllocator: kind is a Python exception name. */
typedef void (*DLPackSetError)(void *error_ctx, const char *kind, const char *message);

/** Allocates a tensor like prototype. Returns 0, or -1 after calling SetError. */
typedef int (*DLPackManagedTensorAllocator)(DLTensor *prototype, DLManagedTensorVersioned **out,
                                            void *error_ctx, DLPackSetError SetError);

/** Exports a Python object as an owning tensor, with no stream synchronization. */
typedef int (*DLPackManagedTensorFromPyObjectNoSync)(void *py_object,
                                                     DLManagedTensorVersioned **out);

/** Wraps an owning tensor (ownership moves) as the producer's Python object, no sync. */
typedef int (*DLPackManagedTensorToPyObjectNoSync)(DLManagedTensorVersioned *tensor,
                                                   void **out_py_object);

/** Fills a non-owning DLTensor view of a Python object, no sync. */
typedef int (*DLPackDLTensorFromPyObjectNoSync)(void *py_object, DLTensor *out);

/** Returns the producer's current work stream for a device (NULL for the CPU). 0 or -1. */
typedef int (*DLPackCurrentWorkStream)(DLDeviceType device_type, int32_t device_id,
                                       void **out_current_stream);

/** First member of every exchange table: its version and the previous version's table. */
typedef struct DLPackExchangeAPIHeader {
  DLPackVersion version;                    /**< the table's version */
  struct DLPackExchangeAPIHeader *prev_api; /**< an older table, or NULL */
} DLPackExchangeAPIHeader;

/** A producer's C exchange table (DLPack 1.2+). In Python: capsule "dlpack_exchange_api". */
typedef struct DLPackExchangeAPI {
  DLPackExchangeAPIHeader header;                                              /**< version chain */
  DLPackManagedTensorAllocator managed_tensor_allocator;                       /**< allocate */
  DLPackManagedTensorFromPyObjectNoSync managed_tensor_from_py_object_no_sync; /**< export */
  DLPackManagedTensorToPyObjectNoSync managed_tensor_to_py_object_no_sync;     /**< import */
  DLPackDLTensorFromPyObjectNoSync dltensor_from_py_object_no_sync;            /**< view */
  DLPackCurrentWorkStream current_work_stream;                                 /**< stream */
} DLPackExchangeAPI;

#ifdef __cplusplus
}
#endif
#endif /* !DL_SYNC_DLPACK_HAS_EXCHANGE_API */

/* The layout both declarations share. Sizes that hold on every target first, then the
   offsets of 64-bit targets. */
#ifdef __cplusplus
#define DL_SYNC_ABI_PIN(cond, what) static_assert(cond, "DLPack ABI: " what)
#else
#define DL_SYNC_ABI_PIN(cond, what) _Static_assert(cond, "DLPack ABI: " what)
#endif
DL_SYNC_ABI_PIN(sizeof(DLPackVersion) == 8, "sizeof(DLPackVersion) == 8");
DL_SYNC_ABI_PIN(sizeof(DLDeviceType) == 4, "DLDeviceType is 4 bytes");
DL_SYNC_ABI_PIN(sizeof(DLDevice) == 8, "sizeof(DLDevice) == 8");
DL_SYNC_ABI_PIN(offsetof(DLDevice, device_id) == 4, "DLDevice.device_id at 4");
DL_SYNC_ABI_PIN(sizeof(DLDataType) == 4, "sizeof(DLDataType) == 4");
DL_SYNC_ABI_PIN(offsetof(DLDataType, bits) == 1, "DLDataType.bits at 1");
DL_SYNC_ABI_PIN(offsetof(DLDataType, lanes) == 2, "DLDataType.lanes at 2");
DL_SYNC_ABI_PIN(offsetof(DLManagedTensorVersioned, version) == 0, "version at 0");
DL_SYNC_ABI_PIN(offsetof(DLManagedTensor, dl_tensor) == 0, "DLManagedTensor.dl_tensor at 0");
DL_SYNC_ABI_PIN(offsetof(DLPackExchangeAPI, header) == 0, "DLPackExchangeAPI.header at 0");
#if UINTPTR_MAX == 0xFFFFFFFFFFFFFFFFu
DL_SYNC_ABI_PIN(sizeof(DLTensor) == 48, "sizeof(DLTensor) == 48");
DL_SYNC_ABI_PIN(offsetof(DLTensor, device) == 8, "DLTensor.device at 8");
DL_SYNC_ABI_PIN(offsetof(DLTensor, ndim) == 16, "DLTensor.ndim at 16");
DL_SYNC_ABI_PIN(offsetof(DLTensor, dtype) == 20, "DLTensor.dtype at 20");
DL_SYNC_ABI_PIN(offsetof(DLTensor, shape) == 24, "DLTensor.shape at 24");
DL_SYNC_ABI_PIN(offsetof(DLTensor, strides) == 32, "DLTensor.strides at 32");
DL_SYNC_ABI_PIN(offsetof(DLTensor, byte_offset) == 40, "DLTensor.byte_offset at 40");
DL_SYNC_ABI_PIN(sizeof(DLManagedTensor) == 64, "sizeof(DLManagedTensor) == 64");
DL_SYNC_ABI_PIN(offsetof(DLManagedTensor, manager_ctx) == 48, "DLManagedTensor.manager_ctx at 48");
DL_SYNC_ABI_PIN(offsetof(DLManagedTensor, deleter) == 56, "DLManagedTensor.deleter at 56");
DL_SYNC_ABI_PIN(sizeof(DLManagedTensorVersioned) == 80, "sizeof(DLManagedTensorVersioned) == 80");
DL_SYNC_ABI_PIN(offsetof(DLManagedTensorVersioned, manager_ctx) == 8, "manager_ctx at 8");
DL_SYNC_ABI_PIN(offsetof(DLManagedTensorVersioned, deleter) == 16, "deleter at 16");
DL_SYNC_ABI_PIN(offsetof(DLManagedTensorVersioned, flags) == 24, "flags at 24");
DL_SYNC_ABI_PIN(offsetof(DLManagedTensorVersioned, dl_tensor) == 32, "dl_tensor at 32");
DL_SYNC_ABI_PIN(sizeof(DLPackExchangeAPIHeader) == 16, "sizeof(DLPackExchangeAPIHeader) == 16");
DL_SYNC_ABI_PIN(offsetof(DLPackExchangeAPIHeader, prev_api) == 8, "prev_api at 8");
DL_SYNC_ABI_PIN(sizeof(DLPackExchangeAPI) == 56, "sizeof(DLPackExchangeAPI) == 56");
DL_SYNC_ABI_PIN(offsetof(DLPackExchangeAPI, managed_tensor_allocator) == 16, "allocator at 16");
DL_SYNC_ABI_PIN(offsetof(DLPackExchangeAPI, managed_tensor_from_py_object_no_sync) == 24,
                "from_py_object at 24");
DL_SYNC_ABI_PIN(offsetof(DLPackExchangeAPI, managed_tensor_to_py_object_no_sync) == 32,
                "to_py_object at 32");
DL_SYNC_ABI_PIN(offsetof(DLPackExchangeAPI, dltensor_from_py_object_no_sync) == 40,
                "dltensor_from_py_object at 40");
DL_SYNC_ABI_PIN(offsetof(DLPackExchangeAPI, current_work_stream) == 48,
                "current_work_stream at 48");
#endif
#undef DL_SYNC_ABI_PIN

#endif /* DL_SYNC_DLPACK_H_ */
