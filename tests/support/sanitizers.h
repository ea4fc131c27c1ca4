/* SPDX-License-Identifier: Apache-2.0 */
/* Which sanitizer a test is built under (gcc says it by macro, clang by __has_feature):
   THREAD_SANITIZER and ADDRESS_SANITIZER are defined to 1 when it is. */
#ifndef DL_SYNC_TEST_SANITIZERS_H_
#define DL_SYNC_TEST_SANITIZERS_H_

#if defined(__SANITIZE_THREAD__)
#define THREAD_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define THREAD_SANITIZER 1
#endif
#endif

#if defined(__SANITIZE_ADDRESS__)
#define ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ADDRESS_SANITIZER 1
#endif
#endif

#endif
