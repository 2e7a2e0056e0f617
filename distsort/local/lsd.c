/* LSD radix sort of unsigned keys on CPUs, for the CPU backend's local sorts (local/lsd.py).

   Why: where NumPy has no SIMD sort for the CPU (introsort: ~50 ns a 32-bit key at 2^25 keys),
   a radix sort moves each key once a pass at a few ns (bench/RESULTS.md, session 32). Digits of
   8 bits: a pass's 256 counters and write heads stay in L1, and the 256 write streams stay
   within what the caches and TLB follow. 11-bit digits (a pass fewer for 32-bit keys, two for
   64-bit) gained 10-22% at 2^25 keys and lost up to 60% at 2^20 (bench/RESULTS.md, run 267).
   One read counts every pass's digits; a pass where all keys share the digit (narrow
   keys: small integers, the codes of floats of one sign and exponent range) is skipped. A pass
   reads and writes every key (and its value) once: 8 bytes a 32-bit key, 16 a 64-bit one.

   The sort ping-pongs between the keys' own buffer and a scratch buffer of the same size and
   says which holds the result. LSD is stable, so pairs keep equal keys in input order. */
#include <stdint.h>
#include <string.h>

#define COUNT(T, PASSES, keys, n, hist)                                                   \
  memset(hist, 0, sizeof(int64_t) * (PASSES) * 256);                                      \
  for (int64_t i = 0; i < n; i++) {                                                       \
    const T k = keys[i];                                                                  \
    for (int p = 0; p < PASSES; p++) hist[p][(k >> (8 * p)) & 255]++;                     \
  }

/* Exclusive prefix sums of pass p's counts; 0 where every key has one digit (skip it). */
static int heads(int64_t *h, int64_t n) {
  int64_t sum = 0;
  for (int d = 0; d < 256; d++) {
    const int64_t c = h[d];
    if (c == n) return 0;
    h[d] = sum;
    sum += c;
  }
  return 1;
}

/* The passes, ping-ponging between a and b; MOVE(at, i) writes source row i to destination
   row `at` of every column, SWAP swaps the other columns' buffers as src and dst swap.
   Returns 1 if the result is in b, 0 if in a. */
#define LSD_PASSES(T, PASSES, MOVE, SWAP)                                                 \
  int64_t hist[PASSES][256];                                                              \
  COUNT(T, PASSES, a, n, hist)                                                            \
  T *src = a, *dst = b;                                                                   \
  for (int p = 0; p < PASSES; p++) {                                                      \
    int64_t *h = hist[p];                                                                 \
    if (n == 0 || !heads(h, n)) continue;                                                 \
    for (int64_t i = 0; i < n; i++) {                                                     \
      const T k = src[i];                                                                 \
      const int64_t at = h[(k >> (8 * p)) & 255]++;                                       \
      dst[at] = k;                                                                        \
      MOVE(at, i);                                                                        \
    }                                                                                     \
    T *t = src; src = dst; dst = t;                                                       \
    SWAP;                                                                                 \
  }                                                                                       \
  return src == b;

#define NO_VALUES(at, i)
#define VALUE(at, i) (vdst[at] = vsrc[i])
#define SWAP_VALUES                                                                       \
  do {                                                                                    \
    void *vt_ = vsrc;                                                                     \
    vsrc = vdst;                                                                          \
    vdst = vt_;                                                                           \
  } while (0)

/* Keys in a, scratch b (n each): sorted. */
#define LSD(NAME, T, PASSES)                                                              \
  int NAME(T *a, T *b, int64_t n) { LSD_PASSES(T, PASSES, NO_VALUES, (void)0) }

/* Keys in a with values in va, scratch b and vb: both sorted by key, stably. V: an unsigned
   type of the values' width (the bytes move, not the values). */
#define LSD_PAIRS(NAME, T, V, PASSES)                                                     \
  int NAME(T *a, V *va, T *b, V *vb, int64_t n) {                                         \
    V *vsrc = va, *vdst = vb;                                                             \
    LSD_PASSES(T, PASSES, VALUE, SWAP_VALUES)                                             \
  }

LSD(lsd_u32, uint32_t, 4)
LSD(lsd_u64, uint64_t, 8)
LSD_PAIRS(lsd_pairs_u32_v32, uint32_t, uint32_t, 4)
LSD_PAIRS(lsd_pairs_u32_v64, uint32_t, uint64_t, 4)
LSD_PAIRS(lsd_pairs_u64_v32, uint64_t, uint32_t, 8)
LSD_PAIRS(lsd_pairs_u64_v64, uint64_t, uint64_t, 8)
