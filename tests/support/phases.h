/* SPDX-License-Identifier: Apache-2.0 */
/* A thread the test steps through phases 1, 2, ...: phases_tell(p, n) tells it to do phase
   n and returns once it has; the thread waits for each (phases_await) and reports it done
   (phases_done). */
#ifndef DL_SYNC_TEST_PHASES_H_
#define DL_SYNC_TEST_PHASES_H_

#include <pthread.h>

typedef struct phases {
  pthread_mutex_t lock;
  pthread_cond_t changed;
  int told, done;
} phases;
#define PHASES_INIT \
  { .lock = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER }

static inline void phases_tell(phases *p, int phase) {
  pthread_mutex_lock(&p->lock);
  p->told = phase;
  pthread_cond_broadcast(&p->changed);
  while (p->done < phase) pthread_cond_wait(&p->changed, &p->lock);
  pthread_mutex_unlock(&p->lock);
}

static inline void phases_await(phases *p, int phase) {
  pthread_mutex_lock(&p->lock);
  while (p->told < phase) pthread_cond_wait(&p->changed, &p->lock);
  pthread_mutex_unlock(&p->lock);
}

static inline void phases_done(phases *p, int phase) {
  pthread_mutex_lock(&p->lock);
  p->done = phase;
  pthread_cond_broadcast(&p->changed);
  pthread_mutex_unlock(&p->lock);
}

#endif /* DL_SYNC_TEST_PHASES_H_ */
