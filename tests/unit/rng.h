/*
 * rng.h — the unit tests' random numbers: xorshift64*, deterministic per
 * seed, so that a failing seed can be replayed. One state per test program.
 */
#ifndef B10_TEST_RNG_H
#define B10_TEST_RNG_H

#include <stdint.h>

static uint64_t rng_state;

static inline void rng_seed(uint64_t seed)
{
    rng_state = seed * UINT64_C(0x9e3779b97f4a7c15) + 1;
}

static inline uint64_t rng_next(void)
{
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * UINT64_C(0x2545f4914f6cdd1d);
}

#endif
