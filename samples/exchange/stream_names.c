/* SPDX-License-Identifier: Apache-2.0 */
#include "stream_names.h"

#include <pthread.h>
#include <stdio.h>

enum { MAX_NAMES = 16 };
typedef struct named_stream {
  void *stream;
  const char *name;
} named_stream;
static named_stream names[MAX_NAMES];
static int count;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void stream_name_set(void *stream, const char *name) {
  pthread_mutex_lock(&lock);
  if (count < MAX_NAMES) names[count++] = (named_stream){stream, name};
  pthread_mutex_unlock(&lock);
}

const char *stream_name(void *stream) {
  static _Thread_local char unknown[32];
  pthread_mutex_lock(&lock);
  for (int i = 0; i < count; i++)
    if (names[i].stream == stream) {
      pthread_mutex_unlock(&lock);
      return names[i].name;
    }
  pthread_mutex_unlock(&lock);
  snprintf(unknown, sizeof unknown, "stream %p", stream);
  return unknown;
}
