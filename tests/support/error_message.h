/* SPDX-License-Identifier: Apache-2.0 */
/* cmocka assertions on dlsync's messages (include after <cmocka.h>). */
#ifndef DL_SYNC_TEST_ERROR_MESSAGE_H_
#define DL_SYNC_TEST_ERROR_MESSAGE_H_

#include <string.h>

/* Fails unless message contains text (NULL text: nothing to check). */
static inline void assert_message_mentions(const char *message, const char *text) {
  if (text != NULL && strstr(message, text) == NULL)
    fail_msg("last error \"%s\" does not mention \"%s\"", message, text);
}

/* Fails unless this thread's last dlsync message contains text. */
#define assert_error_mentions(text) assert_message_mentions(dl_sync_last_error(), (text))

/* Fails unless a dlsync call answers DL_SYNC_OK, naming the call, its status and message. */
#define DL_OK(call)                                                                      \
  do {                                                                                   \
    int status_ = (call);                                                                \
    if (status_ != DL_SYNC_OK)                                                           \
      fail_msg("%s: %s: %s", #call, dl_sync_status_name(status_), dl_sync_last_error()); \
  } while (0)

#endif
