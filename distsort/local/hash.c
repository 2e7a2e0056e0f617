/* The checksum's sum of hashes on CPUs (check.py): every element's bytes as one unsigned word,
   hashed by splitmix64 (mix.py, mix.cuh: the same numbers), the hashes summed mod 2^64; with
   a column of values, each element's hash chained with its value's as check._hash_rows does.

   Why: NumPy's steps over a block (a temporary array each, some ten of them) hashed about
   0.5 GB/s a core; here each word is read once and mixed in registers, one pass at the speed
   of two multiplies a word (bench/RESULTS.md, session 41). Rows of any width (records, wide
   or odd values) are words of 8 bytes, the last zero-padded, chained word by word: the key's
   row, then the value's (little-endian hosts: the words are the rows' bytes as NumPy views
   them there). */
#include <stdint.h>
#include <string.h>

/* The sums built for the widest vectors (widest.h): their loops become vector code, twice as
   fast with AVX-512 (1.6x with AVX2) as the plain x86-64 build on the 2-core machine
   (bench/RESULTS.md, session 47). */
#include "widest.h"
#include "mix.h"

/* The sum of splitmix64 of n words. */
#define HASH_SUM(W, T)                                                                    \
  WIDEST uint64_t hash_sum_u##W(const T *words, int64_t n) {                              \
    uint64_t sum = 0;                                                                     \
    for (int64_t i = 0; i < n; i++) sum += link(0, words[i], 0);                          \
    return sum;                                                                           \
  }

/* The sum of the chained hashes of n (key, value) pairs. */
#define HASH_PAIRS(KW, K, VW, V)                                                          \
  WIDEST uint64_t hash_pairs_u##KW##_v##VW(const K *keys, const V *values, int64_t n) {   \
    uint64_t sum = 0;                                                                     \
    for (int64_t i = 0; i < n; i++) sum += link(link(0, keys[i], 0), values[i], 1);       \
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

/* One row's words linked into h, j counting the words of the whole row (key, then value). */
static inline uint64_t chain(uint64_t h, int64_t *j, const uint8_t *row, int64_t width) {
  for (int64_t at = 0; at < width; at += 8, (*j)++) {
    uint64_t w = 0;
    if (width - at >= 8) {
      memcpy(&w, row + at, 8); /* one load */
    } else { /* the zero-padded tail, byte by byte (little-endian: the last bytes on top) */
      for (int64_t k = 0; k < width - at; k++) w |= (uint64_t)row[at + k] << (8 * k);
    }
    h = link(h, w, *j);
  }
  return h;
}

/* The sum of the hashes of n rows of `width` bytes, each chained with its row of `vwidth`
   bytes in values (none where values is NULL). */
uint64_t hash_rows(const uint8_t *rows, int64_t width, const uint8_t *values, int64_t vwidth,
                   int64_t n) {
  uint64_t sum = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t j = 0;
    uint64_t h = chain(0, &j, rows + i * width, width);
    if (values) h = chain(h, &j, values + i * vwidth, vwidth);
    sum += h;
  }
  return sum;
}
