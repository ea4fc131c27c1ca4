/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dlsync/version.h: the library version and the export macro.
 *
 * ABI rule: within one MAJOR version, public structs only grow at their end, enum
 * values and status codes never change, and no exported function changes its signature.
 * A MINOR release adds API; a PATCH release changes none.
 */
#ifndef DL_SYNC_VERSION_H_
#define DL_SYNC_VERSION_H_

#define DL_SYNC_VERSION_MAJOR 0
#define DL_SYNC_VERSION_MINOR 1
#define DL_SYNC_VERSION_PATCH 0
#define DL_SYNC_VERSION_HEX \
  ((DL_SYNC_VERSION_MAJOR << 16) | (DL_SYNC_VERSION_MINOR << 8) | DL_SYNC_VERSION_PATCH)

/* Everything the shared library exports carries DL_SYNC_API; everything else is hidden.
   A static copy (the static archives, sources compiled into another library) exports
   nothing: copies in one process stay independent under RTLD_GLOBAL and in -rdynamic
   executables. The exception is DL_SYNC_RECOGNIZED_API, the versioned tensor-event
   deleters, which other copies recognize by name (dlsync/tensor_event.h). dlsync's own
   build defines DL_SYNC_BUILDING_LIBRARY, and DL_SYNC_BUILDING_SHARED for the shared library. */
#if defined(_WIN32)
#if defined(DL_SYNC_BUILDING_SHARED)
#define DL_SYNC_API __declspec(dllexport)
#elif defined(DL_SYNC_USING_SHARED)
#define DL_SYNC_API __declspec(dllimport)
#else
#define DL_SYNC_API
#endif
#define DL_SYNC_RECOGNIZED_API DL_SYNC_API
#elif defined(__GNUC__)
#if defined(DL_SYNC_BUILDING_LIBRARY) && !defined(DL_SYNC_BUILDING_SHARED)
#define DL_SYNC_API __attribute__((visibility("hidden")))
#else
#define DL_SYNC_API __attribute__((visibility("default")))
#endif
#define DL_SYNC_RECOGNIZED_API __attribute__((visibility("default")))
#else
#define DL_SYNC_API
#define DL_SYNC_RECOGNIZED_API
#endif

/* A constant handle in the public macros (DL_SYNC_STREAM_LEGACY, ...), written without an
   old-style cast for C++ (-Wold-style-cast). */
#ifdef __cplusplus
#define DL_SYNC_HANDLE_CAST(type, value) (reinterpret_cast<type>(value))
#else
#define DL_SYNC_HANDLE_CAST(type, value) ((type)(value))
#endif

#endif /* DL_SYNC_VERSION_H_ */
