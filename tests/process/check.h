/* SPDX-License-Identifier: Apache-2.0 */
/* The process-shape programs' checks: each failure names its line and what was expected,
   and the program exits 1 (a program that needs a fresh process cannot use cmocka's
   groups, and a forked child must not unwind into the parent's test runner). */
#ifndef DL_SYNC_TEST_PROCESS_CHECK_H_
#define DL_SYNC_TEST_PROCESS_CHECK_H_

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef CHECK_WITHOUT_DLSYNC
#include "dlsync/dlsync.h"
#endif

__attribute__((format(printf, 3, 4), noreturn)) static inline void check_failed(const char *file,
                                                                                int line,
                                                                                const char *fmt,
                                                                                ...) {
  fprintf(stderr, "%s:%d: ", file, line);
  va_list args;
  va_start(args, fmt);
  vfprintf(stderr, fmt, args);
  va_end(args);
  fputc('\n', stderr);
  fflush(stderr);
  exit(1);
}

#define FAIL(...) check_failed(__FILE__, __LINE__, __VA_ARGS__)

/* Exit status 77: ctest reports the test skipped (SKIP_RETURN_CODE), with the reason. */
__attribute__((noreturn)) static inline void skip(const char *reason) {
  printf("skipped: %s\n", reason);
  fflush(stdout);
  exit(77);
}

/* Sanitizer builds: their allocators and thread bookkeeping change what a process may do
   around fork(), and their shadow memory what its footprint means. */
#if defined(__SANITIZE_ADDRESS__)
#define PROCESS_UNDER_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define PROCESS_UNDER_TSAN 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) && !defined(PROCESS_UNDER_ASAN)
#define PROCESS_UNDER_ASAN 1
#endif
#if __has_feature(thread_sanitizer) && !defined(PROCESS_UNDER_TSAN)
#define PROCESS_UNDER_TSAN 1
#endif
#endif
#define CHECK(condition) ((condition) ? (void)0 : FAIL("check failed: %s", #condition))
#define CHECK_INT(actual, expected)                                                   \
  do {                                                                                \
    long long actual_ = (long long)(actual), expected_ = (long long)(expected);       \
    if (actual_ != expected_)                                                         \
      FAIL("%s is %lld, expected %s (%lld)", #actual, actual_, #expected, expected_); \
  } while (0)
/* text must occur in message. */
#define CHECK_MENTIONS(message, text)                                                             \
  do {                                                                                            \
    const char *message_ = (message), *text_ = (text);                                            \
    if (strstr(message_, text_) == NULL) FAIL("\"%s\" does not mention \"%s\"", message_, text_); \
  } while (0)

#ifndef CHECK_WITHOUT_DLSYNC
/* A dlsync call that must succeed, or one that must fail with status. */
#define CHECK_DL(call)                                                               \
  do {                                                                               \
    int status_ = (call);                                                            \
    if (status_ != DL_SYNC_OK)                                                       \
      FAIL("%s: %s: %s", #call, dl_sync_status_name(status_), dl_sync_last_error()); \
  } while (0)
#define CHECK_DL_STATUS(call, expected)                                    \
  do {                                                                     \
    int status_ = (call);                                                  \
    if (status_ != (expected))                                             \
      FAIL("%s: %s, expected %s: %s", #call, dl_sync_status_name(status_), \
           dl_sync_status_name(expected), dl_sync_last_error());           \
  } while (0)
#endif

#endif
