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

/* Everything the library exports carries DL_SYNC_API; everything else is hidden. */
#if defined(_WIN32)
#if defined(DL_SYNC_BUILDING_SHARED)
#define DL_SYNC_API __declspec(dllexport)
#elif defined(DL_SYNC_USING_SHARED)
#define DL_SYNC_API __declspec(dllimport)
#else
#define DL_SYNC_API
#endif
#elif defined(__GNUC__)
#define DL_SYNC_API __attribute__((visibility("default")))
#else
#define DL_SYNC_API
#endif

#endif /* DL_SYNC_VERSION_H_ */
