/* Radix sort of unsigned keys on CPUs, for the CPU backend's local sorts (local/lsd.py).

   Why: where NumPy has no SIMD sort for the CPU (introsort: ~50 ns a 32-bit key at 2^25 keys),
   a radix sort moves each key once a pass at a few ns (bench/RESULTS.md, session 32). Digits of
   8 bits: a pass's 256 counters and write heads stay in L1, and the 256 write streams stay
   within what the caches and TLB follow. 11-bit digits (a pass fewer for 32-bit keys, two for
   64-bit) gained 10-22% at 2^25 keys and lost up to 60% at 2^20 (bench/RESULTS.md, run 267).
   One read counts every pass's digits; a pass where all keys share the digit (narrow
   keys: small integers, the codes of floats of one sign and exponent range) is skipped. A pass
   reads and writes every key (and its value) once: 8 bytes a 32-bit key, 16 a 64-bit one.

   Arrays larger than the caches (HYBRID_BYTES) take one MSD pass first, on the most significant
   digit that varies, into 256 buckets, and then each bucket's lower digits by LSD passes while
   the bucket is in cache: every LSD pass over memory then costs a pass over cache, so the
   bytes moved to and from memory drop from ~52 to ~28 a 32-bit key (bench/RESULTS.md,
   session 43). Same passes, same stability.

   The sort ping-pongs between the keys' own buffer and a scratch buffer of the same size and
   says which holds the result. LSD is stable and the MSD pass too, so pairs keep equal keys in
   input order. */
#include <stdint.h>
#include <string.h>

#define HYBRID_BYTES (24 << 20) /* keys and values of one buffer: from here, the hybrid */

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

/* The move of a row: MOVE(at, i) writes source row i's value to row `at`, SWAP swaps the
   values' source and destination as the keys' do; COPY(lo, len, in_b) copies values' rows
   [lo, lo + len) into vb (in_b), else into va. */
#define NO_VALUES(at, i)
#define NO_SWAP (void)0
#define NO_COPY(lo, len, in_b)
#define VALUE(at, i) (vdst[at] = vsrc[i])
#define SWAP_VALUES                                                                       \
  do {                                                                                    \
    void *vt_ = vsrc;                                                                     \
    vsrc = vdst;                                                                          \
    vdst = vt_;                                                                           \
  } while (0)
#define COPY_VALUES(lo, len, in_b)                                                        \
  memcpy(((in_b) ? vb : va) + (lo), ((in_b) ? va : vb) + (lo), (len) * sizeof(*va))

/* One pass over digit p: row i of src goes to row h[its digit]++ of dst, its value alike. */
#define SCATTER(T, src, dst, h, p, MOVE)                                                  \
  for (int64_t i = 0; i < n; i++) {                                                       \
    const T k = src[i];                                                                   \
    const int64_t at = h[(k >> (8 * (p))) & 255]++;                                       \
    dst[at] = k;                                                                          \
    MOVE(at, i);                                                                          \
  }

/* LSD passes over digits [0, top) of the n keys in a (values in va), ping-ponging with b (vb).
   Returns 1 if the result is in b, 0 if in a. */
#define LSD_PASSES(T, top, MOVE, SWAP)                                                    \
  int64_t hist[sizeof(T)][256];                                                           \
  COUNT(T, top, a, n, hist)                                                               \
  T *src = a, *dst = b;                                                                   \
  for (int p = 0; p < top; p++) {                                                         \
    int64_t *h = hist[p];                                                                 \
    if (n == 0 || !heads(h, n)) continue;                                                 \
    SCATTER(T, src, dst, h, p, MOVE)                                                      \
    T *t = src; src = dst; dst = t;                                                       \
    SWAP;                                                                                 \
  }                                                                                       \
  return src == b;

/* The hybrid (see the top): the MSD pass from a (va) to b (vb) on digit m, the most significant
   that varies, then BUCKET for each bucket: the LSD passes of its digits below m from its rows
   of b to its rows of a (an expression of lo, len and m: 1 if they end in a). A bucket whose
   result lands in the other buffer than most (a digit constant within it) is copied there.
   DECL declares what MOVE uses. Returns 1 if the result is in b, 0 if in a. */
#define HYBRID(T, DECL, BUCKET, MOVE, COPY)                                               \
  int64_t hist[sizeof(T)][256];                                                           \
  COUNT(T, (int)sizeof(T), a, n, hist)                                                    \
  int m = -1, lower = 0;                                                                  \
  for (int p = 0; p < (int)sizeof(T); p++) {                                              \
    int varies = 1;                                                                       \
    for (int d = 0; d < 256; d++) varies &= hist[p][d] != n;                              \
    if (varies) m = p, lower++;                                                           \
  }                                                                                       \
  if (m < 0) return 0;                                                                    \
  lower--; /* the digits that vary below m: an odd count leaves the result in a */        \
  int64_t start[257];                                                                     \
  start[0] = 0;                                                                           \
  for (int d = 0; d < 256; d++) start[d + 1] = start[d] + hist[m][d];                     \
  int64_t *h = hist[m];                                                                   \
  for (int d = 0; d < 256; d++) h[d] = start[d];                                          \
  DECL;                                                                                   \
  SCATTER(T, a, b, h, m, MOVE)                                                            \
  const int in_b = lower % 2 == 0;                                                        \
  for (int d = 0; d < 256; d++) {                                                         \
    const int64_t lo = start[d], len = start[d + 1] - lo;                                 \
    const int got_b = m == 0 || !(BUCKET);                                                \
    if (got_b != in_b) {                                                                  \
      memcpy((in_b ? b : a) + lo, (in_b ? a : b) + lo, len * sizeof(T));                 \
      COPY(lo, len, in_b);                                                                \
    }                                                                                     \
  }                                                                                       \
  return in_b;

/* Keys in a, scratch b (n each): sorted; 1 if the result is in b. */
#define SORT(NAME, T)                                                                     \
  static int NAME##_lsd(T *a, T *b, int64_t n, int top) {                                 \
    LSD_PASSES(T, top, NO_VALUES, NO_SWAP)                                                \
  }                                                                                       \
  static int NAME##_hybrid(T *a, T *b, int64_t n) {                                       \
    HYBRID(T, (void)0, NAME##_lsd(b + lo, a + lo, len, m), NO_VALUES, NO_COPY)            \
  }                                                                                       \
  int NAME(T *a, T *b, int64_t n) {                                                       \
    if (n * (int64_t)sizeof(T) >= HYBRID_BYTES) return NAME##_hybrid(a, b, n);            \
    return NAME##_lsd(a, b, n, sizeof(T));                                                \
  }

/* Keys in a with values in va, scratch b and vb: both sorted by key, stably. V: an unsigned
   type of the values' width (the bytes move, not the values). */
#define SORT_PAIRS(NAME, T, V)                                                            \
  static int NAME##_lsd(T *a, V *va, T *b, V *vb, int64_t n, int top) {                   \
    V *vsrc = va, *vdst = vb;                                                             \
    LSD_PASSES(T, top, VALUE, SWAP_VALUES)                                                \
  }                                                                                       \
  static int NAME##_hybrid(T *a, V *va, T *b, V *vb, int64_t n) {                         \
    HYBRID(T, V *vsrc = va; V *vdst = vb, NAME##_lsd(b + lo, vb + lo, a + lo, va + lo, len, m), \
           VALUE, COPY_VALUES)                                                            \
  }                                                                                       \
  int NAME(T *a, V *va, T *b, V *vb, int64_t n) {                                         \
    if (n * (int64_t)(sizeof(T) + sizeof(V)) >= HYBRID_BYTES)                             \
      return NAME##_hybrid(a, va, b, vb, n);                                              \
    return NAME##_lsd(a, va, b, vb, n, sizeof(T));                                        \
  }

SORT(lsd_u32, uint32_t)
SORT(lsd_u64, uint64_t)
SORT_PAIRS(lsd_pairs_u32_v32, uint32_t, uint32_t)
SORT_PAIRS(lsd_pairs_u32_v64, uint32_t, uint64_t)
SORT_PAIRS(lsd_pairs_u64_v32, uint64_t, uint32_t)
SORT_PAIRS(lsd_pairs_u64_v64, uint64_t, uint64_t)
