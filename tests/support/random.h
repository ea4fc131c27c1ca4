/* SPDX-License-Identifier: Apache-2.0 */
/* A seeded generator for the random-program tests (splitmix64): reproducible from its seed. */
#ifndef DL_SYNC_TEST_RANDOM_H_
#define DL_SYNC_TEST_RANDOM_H_

#include <stdint.h>

typedef struct rng {
  uint64_t state;
} rng;

static inline uint64_t rng_next(rng *r) {
  uint64_t z = (r->state += UINT64_C(0x9e3779b97f4a7c15));
  z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
  return z ^ (z >> 31);
}

/* A number in [0, n); 0 when n is not positive. */
static inline int below(rng *r, int n) {
  return n > 0 ? (int)(rng_next(r) % (uint64_t)n) : 0;
}

static inline int chance(rng *r, int percent) {
  return below(r, 100) < percent;
}

/* An index in [0, n): i with percent cumulative[i] - cumulative[i - 1], the last 100. */
static inline int weighted(rng *r, const int *cumulative, int n) {
  int roll = below(r, 100), i = 0;
  while (i < n - 1 && roll >= cumulative[i]) i++;
  return i;
}

#endif
