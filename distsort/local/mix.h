/* The checksum's hash of a row's words (mix.py, mix.cuh: the same numbers): splitmix64's
   mixer, and a row's words chained (check._hash_rows). Shared by hash.c and sorted.c. */
#ifndef DISTSORT_MIX_H
#define DISTSORT_MIX_H
#include <stdint.h>

#define GOLDEN 0x9E3779B97F4A7C15ull

static inline uint64_t mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/* h with a row's word j chained in (check._hash_rows): the first word is splitmix64's, each
   later one is stepped by (j + 1) GOLDEN and mixed into the hash so far. */
static inline uint64_t link(uint64_t h, uint64_t w, int64_t j) {
  return j ? mix64(h ^ mix64(w + (uint64_t)(j + 1) * GOLDEN)) : mix64(w + GOLDEN);
}
#endif
