/* The checksum's sum of hashes on CPUs (check.py): every element's bytes as one unsigned word,
   hashed by splitmix64 (mix.py, mix.cuh: the same numbers), the hashes summed mod 2^64; with
   a column of values, each element's hash chained with its value's as check._hash_rows does.

   Why: NumPy's steps over a block (a temporary array each, some ten of them) hashed about
   0.5 GB/s a core; here each word is read once and mixed in registers, one pass at the speed
   of two multiplies a word (bench/RESULTS.md, session 41). */
#include <stdint.h>

#define GOLDEN 0x9E3779B97F4A7C15ull
#define SECOND 0x3C6EF372FE94F82Aull /* 2 * GOLDEN mod 2^64: the second word's step */

static inline uint64_t mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/* The sum of splitmix64 of n words. */
#define HASH_SUM(W, T)                                                                    \
  uint64_t hash_sum_u##W(const T *words, int64_t n) {                                     \
    uint64_t sum = 0;                                                                     \
    for (int64_t i = 0; i < n; i++) sum += mix64((uint64_t)words[i] + GOLDEN);            \
    return sum;                                                                           \
  }

/* The sum of the chained hashes of n (key, value) pairs. */
#define HASH_PAIRS(KW, K, VW, V)                                                          \
  uint64_t hash_pairs_u##KW##_v##VW(const K *keys, const V *values, int64_t n) {          \
    uint64_t sum = 0;                                                                     \
    for (int64_t i = 0; i < n; i++) {                                                     \
      const uint64_t h = mix64((uint64_t)keys[i] + GOLDEN);                               \
      sum += mix64(h ^ mix64((uint64_t)values[i] + SECOND));                              \
    }                                                                                     \
    return sum;                                                                           \
  }

#define HASH_PAIRS_OF(KW, K)                                                              \
  HASH_PAIRS(KW, K, 8, uint8_t)                                                           \
  HASH_PAIRS(KW, K, 16, uint16_t)                                                         \
  HASH_PAIRS(KW, K, 32, uint32_t)                                                         \
  HASH_PAIRS(KW, K, 64, uint64_t)

HASH_SUM(8, uint8_t)
HASH_SUM(16, uint16_t)
HASH_SUM(32, uint32_t)
HASH_SUM(64, uint64_t)
HASH_PAIRS_OF(8, uint8_t)
HASH_PAIRS_OF(16, uint16_t)
HASH_PAIRS_OF(32, uint32_t)
HASH_PAIRS_OF(64, uint64_t)
