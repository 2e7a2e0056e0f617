/* The CPU backend's partition of keys (and a column of values) by destination rank, in two
   passes.

   Why: a rank that sorts its keys before cutting them at the splitters (partition.sorted_first)
   sorts every key twice, once there and once more, merged or sorted, where they land; these
   two passes cost less than that second sort: classify counts each key's destination, scatter
   copies each key (or value) to its destination's next slot. Rows keep their input order
   within a destination (global position order), as the exchange expects.

   A key's destination is the number of splitters (key, global position) at or below its own
   (key, offset + i): splitters.classify's order, in which equal keys are cut by position.

   Classify compares a block of keys with every splitter in turn, the same compare for every
   key, so the compiler makes each one a vector compare (16 uint32 keys an instruction with
   AVX-512): a binary search's steps depend on each other's loads and bounded the pass
   (bench/RESULTS.md, run 294). A key equal to a splitter is cut in the same vectors, by its
   lane's index against the splitter's position in the block. Where there are many splitters
   a key's destination is found by a branch-free binary search instead, a tie cut by position.
   Where the CPU has AVX-512 and the splitters fit two vector registers (32 ranks of uint32
   keys, 16 of uint64), the search runs on 16 (8) keys at once, its splitters looked up by
   permutes: fewer instructions a key than either (_permute, below). */
#include <stdint.h>

#include "classify.h"
#include "code.h"
#include "widest.h"
#if defined(__x86_64__) && defined(__GNUC__) && defined(__has_attribute)
#if __has_attribute(target)
#include <immintrin.h>
#define PERMUTE_SEARCH 1 /* the search below, where the CPU has AVX-512 */
#endif
#endif

#define BLOCK 512 /* keys a block: their counters stay in L1 through the splitters' loop */
/* Past this many bytes of splitters a key's compares cost more than a search's steps. */
#define COMPARE_MAX_BYTES 64


#define CLASSIFY(NAME, T)                                                                  \
  void NAME##_search(const T *keys, int64_t n, int64_t offset, const T *skeys,              \
                     const int64_t *spos, int64_t ns, int64_t steps, uint16_t *dest,        \
                     int64_t *counts) {                                                      \
    for (int64_t i = 0; i < n; i++) {                                                        \
      const T k = keys[i];                                                                   \
      int64_t lo = 0;                                                                        \
      for (int64_t step = steps; step > 0; step >>= 1) { /* the same steps for every key */  \
        lo += (skeys[lo + step - 1] < k) * step; /* no branch on the data */                 \
      }                                                                                      \
      if (lo < ns && skeys[lo] == k) { /* a tie with a splitter: cut by position */          \
        const int64_t at = offset + i;                                                       \
        while (lo < ns && skeys[lo] == k && spos[lo] <= at) lo++;                            \
      }                                                                                      \
      dest[i] = (uint16_t)lo;                                                                \
      counts[lo]++;                                                                          \
    }                                                                                        \
  }                                                                                          \
                                                                                             \
  WIDEST void NAME##_compare(const T *keys, int64_t n, int64_t offset, const T *skeys,      \
                             const int64_t *spos, int64_t ns, int64_t steps, uint16_t *dest, \
                             int64_t *counts) {                                              \
    (void)steps; /* the search's; the same arguments for every way */                        \
    T below[BLOCK], lane[BLOCK]; /* of the key's width: a compare's lanes are the counters' */ \
    for (int64_t i = 0; i < BLOCK; i++) lane[i] = (T)i;                                      \
    for (int64_t at = 0; at < n; at += BLOCK) {                                              \
      const T *k = keys + at;                                                                \
      const int64_t m = n - at < BLOCK ? n - at : BLOCK;                                     \
      T above_prev = (T)m;                                                                   \
      for (int64_t i = 0; i < m; i++) below[i] = 0;                                          \
      for (int64_t j = 0; j < ns; j++) {                                                     \
        const T s = skeys[j];                                                                \
        /* a key equal to s is above the splitter from the block's lane `from` on */          \
        const int64_t rel = spos[j] - (offset + at);                                         \
        const T from = (T)(rel < 0 ? 0 : rel > BLOCK ? BLOCK : rel);                         \
        T above = 0; /* keys above splitter j: those of destination j + 1 or later */        \
        for (int64_t i = 0; i < m; i++) {                                                    \
          const T past = (s < k[i]) | ((s == k[i]) & (from <= lane[i]));                     \
          below[i] += past;                                                                  \
          above += past;                                                                     \
        }                                                                                    \
        counts[j] += above_prev - above;                                                     \
        above_prev = above;                                                                  \
      }                                                                                      \
      counts[ns] += above_prev;                                                              \
      for (int64_t i = 0; i < m; i++) dest[at + i] = (uint16_t)below[i];                     \
    }                                                                                        \
  }

/* The way for these splitters on this CPU (every way takes the same arguments). */
#define DISPATCH(NAME, T)                                                                    \
  void NAME(const T *keys, int64_t n, int64_t offset, const T *skeys, const int64_t *spos,  \
            int64_t ns, int64_t steps, uint16_t *dest, int64_t *counts) {                   \
    if (ns <= NAME##_PERMUTE_MAX && classify_avx512())                                       \
      NAME##_permute(keys, n, offset, skeys, spos, ns, steps, dest, counts);                 \
    else if (ns * (int64_t)sizeof(T) <= COMPARE_MAX_BYTES)                                   \
      NAME##_compare(keys, n, offset, skeys, spos, ns, steps, dest, counts);                 \
    else                                                                                     \
      NAME##_search(keys, n, offset, skeys, spos, ns, steps, dest, counts);                  \
  }

#define SCATTER(NAME, T)                                                                     \
  void NAME(const T *keys, int64_t n, const uint16_t *dest, int64_t *next, T *out) {         \
    for (int64_t i = 0; i < n; i++) out[next[dest[i]]++] = keys[i];                          \
  }

CLASSIFY(classify_u32, uint32_t)
CLASSIFY(classify_u64, uint64_t)

#ifdef PERMUTE_SEARCH
/* The binary search with the splitters in two vector registers (up to 31 uint32 or 15 uint64
   splitters: 32 ranks, 16): each step looks its splitter up by a permute, not a load, for 16
   (8) keys at once. The destinations are counted in byte counters, bins 8q to 8q + 7 in the
   bytes of acc[q]'s 64-bit lanes (one shifted by 8 x (bin - 8q) bits: past 63, nothing), and
   added up every 127 vectors, before a byte can overflow: a scalar count a key cost the search
   three times its own time (bench/RESULTS.md, session 47). Keys past the last full vector go
   to _search. */
#define classify_u32_PERMUTE_MAX 31
#define classify_u64_PERMUTE_MAX 15
#define AVX512 __attribute__((target("avx512f")))
#define FLUSH_EVERY 127 /* vectors: two counts a byte each (uint32 keys), at most 254 */

/* Asked outside the AVX-512 functions: their own code may use AVX-512 from its first line. */
int classify_avx512(void) { return __builtin_cpu_supports("avx512f") != 0; }

AVX512 static inline void tally(__m512i bins, __m512i *acc, int groups) {
  for (int q = 0; q < groups; q++) {
    const __m512i bits = _mm512_slli_epi64(_mm512_sub_epi64(bins, _mm512_set1_epi64(8 * q)), 3);
    acc[q] = _mm512_add_epi64(acc[q], _mm512_sllv_epi64(_mm512_set1_epi64(1), bits));
  }
}

AVX512 static void flush(__m512i *acc, int groups, int64_t *counts, int64_t ns) {
  uint8_t bytes[64];
  for (int q = 0; q < groups; q++) {
    _mm512_storeu_si512(bytes, acc[q]);
    for (int i = 0; i < 64; i++)
      if (8 * q + (i & 7) <= ns) counts[8 * q + (i & 7)] += bytes[i]; /* counts: ns + 1 */
    acc[q] = _mm512_setzero_si512();
  }
}

/* Lanes `ties` of d (a key equal to the first splitter not below it) cut by position, as in
   _search. */
#define SETTLE(T)                                                                            \
  static inline void settle_##T(const T *keys, int64_t at, int64_t offset, const T *skeys,   \
                                const int64_t *spos, int64_t ns, uint32_t ties, T *d) {      \
    for (; ties; ties &= ties - 1) {                                                         \
      const int l = __builtin_ctz(ties);                                                     \
      int64_t x = (int64_t)d[l];                                                             \
      while (x < ns && skeys[x] == keys[at + l] && spos[x] <= offset + at + l) x++;          \
      d[l] = (T)x;                                                                           \
    }                                                                                        \
  }
SETTLE(uint32_t)
SETTLE(uint64_t)

/* The destinations in lo stored at dest and counted: 16 (32-bit lanes) or 8 (64-bit). */
AVX512 static inline void store_tally_32(__m512i lo, uint16_t *dest, __m512i *acc, int groups) {
  _mm256_storeu_si256((__m256i *)dest, _mm512_cvtepi32_epi16(lo));
  tally(_mm512_cvtepu32_epi64(_mm512_castsi512_si256(lo)), acc, groups);
  tally(_mm512_cvtepu32_epi64(_mm512_extracti64x4_epi64(lo, 1)), acc, groups);
}

AVX512 static inline void store_tally_64(__m512i lo, uint16_t *dest, __m512i *acc, int groups) {
  _mm_storeu_si128((__m128i *)dest, _mm512_cvtepi64_epi16(lo));
  tally(lo, acc, groups);
}

/* NAME##_permute for keys of W bits, LANES a vector; keys past the last full vector go to
   NAME##_search. The search's rows reach 2 x steps - 2: at most 2 x LANES - 2. */
#define PERMUTE(NAME, T, W, LANES, LARGEST)                                                  \
  AVX512 void NAME##_permute(const T *keys, int64_t n, int64_t offset, const T *skeys,       \
                             const int64_t *spos, int64_t ns, int64_t steps, uint16_t *dest, \
                             int64_t *counts) {                                              \
    T table[2 * LANES], d[LANES];                                                            \
    for (int j = 0; j < 2 * LANES; j++) table[j] = j < ns ? skeys[j] : LARGEST;              \
    const __m512i low = _mm512_loadu_si512(table), high = _mm512_loadu_si512(table + LANES); \
    const int groups = (int)(ns / 8) + 1; /* bins 0 to ns */                                 \
    __m512i acc[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(),                        \
                      _mm512_setzero_si512(), _mm512_setzero_si512()};                       \
    const int64_t full = n & ~(int64_t)(LANES - 1);                                          \
    for (int64_t at = 0; at < full; at += LANES) {                                           \
      const __m512i k = _mm512_loadu_si512(keys + at);                                       \
      __m512i lo = _mm512_setzero_si512();                                                   \
      for (int64_t step = steps; step > 0; step >>= 1) {                                     \
        const __m512i row = _mm512_add_epi##W(lo, _mm512_set1_epi##W(step - 1));             \
        const __m512i s = _mm512_permutex2var_epi##W(low, row, high);                        \
        lo = _mm512_mask_add_epi##W(lo, _mm512_cmplt_epu##W##_mask(s, k), lo,                \
                                    _mm512_set1_epi##W(step));                               \
      }                                                                                      \
      const __m512i first = _mm512_permutex2var_epi##W(low, lo, high);                       \
      const uint32_t ties = _mm512_mask_cmpeq_epu##W##_mask(                                 \
          _mm512_cmplt_epu##W##_mask(lo, _mm512_set1_epi##W(ns)), first, k);                 \
      if (ties) {                                                                            \
        _mm512_storeu_si512(d, lo);                                                          \
        settle_##T(keys, at, offset, skeys, spos, ns, ties, d);                              \
        lo = _mm512_loadu_si512(d);                                                          \
      }                                                                                      \
      store_tally_##W(lo, dest + at, acc, groups);                                           \
      if ((at / LANES) % FLUSH_EVERY == FLUSH_EVERY - 1) flush(acc, groups, counts, ns);     \
    }                                                                                        \
    flush(acc, groups, counts, ns);                                                          \
    NAME##_search(keys + full, n - full, offset + full, skeys, spos, ns, steps, dest + full, \
                  counts);                                                                   \
  }
PERMUTE(classify_u32, uint32_t, 32, 16, UINT32_MAX)
PERMUTE(classify_u64, uint64_t, 64, 8, UINT64_MAX)

/* Plain keys for a few destinations (2 to FEW_MAX ranks), where the CPU has AVX-512: a count
   pass that only reads the keys, then a pass that sends each vector's keys of each destination
   to its slots by a compress and a masked store, the destinations found again by compares. No
   destination is stored between the passes (2 bytes a key written and read again), and no
   key is placed alone: at 2 ranks the grouping took about half the time of classify and
   scatter; at 8 the compresses cost what they save (bench/RESULTS.md, session 49). Lanes keep
   their order in a compress: each destination's keys stay in input order, as scatter's do.
   Keys past the last full vector are classified by _search and placed one by one. */
#define FEW_MAX 4
int scatter_few_max(void) { return classify_avx512() ? FEW_MAX : 0; }

/* past(j): the lanes of k (global positions first to first + LANES - 1) past splitter j:
   above its key, or equal and at or after its position (_search's order). */
#define PAST(W, MASK, LANES, s, k, sp, first)                                                \
  (_mm512_cmplt_epu##W##_mask(s, k)                                                          \
   | (_mm512_cmpeq_epu##W##_mask(s, k)                                                       \
      & (MASK)((sp) <= (first)           ? ~0u                                               \
               : (sp) - (first) >= LANES ? 0u                                                \
                                         : ~0u << ((sp) - (first)))))

/* A vector of raw keys' codes (code.h; coder: neg, pos, rot, flip, top, each in every lane). */
#define CODE_VEC(W, MASK)                                                                    \
  AVX512 static inline __m512i code_vec_##W(__m512i u, const __m512i *coder) {               \
    const MASK negative = _mm512_cmplt_epi##W##_mask(u, _mm512_setzero_si512());             \
    const __m512i pick = _mm512_mask_blend_epi##W(negative, coder[1], coder[0]);             \
    const __m512i x = _mm512_xor_si512(u, pick);                                             \
    return _mm512_sub_epi##W(_mm512_xor_si512(_mm512_sub_epi##W(x, coder[2]), coder[3]),     \
                             coder[4]);                                                      \
  }
CODE_VEC(32, __mmask16)
CODE_VEC(64, __mmask8)

/* count_NAME_few and scatter_NAME_few; with CODED (the _coded pair) the keys are raw numbers
   whose codes (code.h, the words at coder) are compared with the splitters and written out:
   the keys need no pass of their own to be coded (keys.NumericCodec's encode), and the
   grouped array holds codes. Keys past the last full vector are coded into `tail`. */
#define FEW(NAME, T, W, LANES, MASK, SUFFIX, CODED)                                          \
  AVX512 static inline __m512i load_##NAME##SUFFIX(const T *at, const __m512i *coder) {      \
    const __m512i u = _mm512_loadu_si512(at);                                                \
    return CODED ? code_vec_##W(u, coder) : u;                                               \
  }                                                                                          \
  static inline int64_t tail_##NAME##SUFFIX(const T *keys, int64_t n, const T *coder,       \
                                            T *tail) {                                       \
    const int64_t full = n & ~(int64_t)(LANES - 1);                                          \
    for (int64_t i = full; i < n; i++)                                                       \
      tail[i - full] = CODED ? CODE_OF(T, W, keys[i], coder[0], coder[1], coder[2], coder[3], \
                                       coder[4])                                             \
                             : keys[i];                                                      \
    return full;                                                                             \
  }                                                                                          \
  AVX512 void count_##NAME##_few##SUFFIX(const T *keys, int64_t n, int64_t offset,          \
                                         const T *skeys, const int64_t *spos, int64_t ns,   \
                                         int64_t steps, int64_t *counts, const T *coder) {  \
    __m512i s[FEW_MAX], c[5];                                                                \
    int64_t past[FEW_MAX] = {0};                                                             \
    T tail[LANES];                                                                           \
    for (int64_t j = 0; j < ns; j++) s[j] = _mm512_set1_epi##W(skeys[j]);                   \
    for (int q = 0; q < 5 * CODED; q++) c[q] = _mm512_set1_epi##W(coder[q]);                 \
    const int64_t full = tail_##NAME##SUFFIX(keys, n, coder, tail);                          \
    for (int64_t at = 0; at < full; at += LANES) {                                           \
      const __m512i k = load_##NAME##SUFFIX(keys + at, c);                                   \
      for (int64_t j = 0; j < ns; j++)                                                       \
        past[j] += __builtin_popcount(PAST(W, MASK, LANES, s[j], k, spos[j], offset + at));  \
    }                                                                                        \
    counts[0] += full - (ns ? past[0] : 0);                                                  \
    for (int64_t j = 0; j < ns; j++)                                                         \
      counts[j + 1] += past[j] - (j + 1 < ns ? past[j + 1] : 0);                             \
    uint16_t dest[LANES];                                                                    \
    classify_##NAME##_search(tail, n - full, offset + full, skeys, spos, ns, steps, dest,    \
                             counts);                                                        \
  }                                                                                          \
                                                                                             \
  AVX512 void scatter_##NAME##_few##SUFFIX(const T *keys, int64_t n, int64_t offset,        \
                                           const T *skeys, const int64_t *spos, int64_t ns, \
                                           int64_t steps, int64_t *next, T *out,            \
                                           const T *coder) {                                 \
    __m512i s[FEW_MAX], bin[FEW_MAX + 1], c[5];                                              \
    T tail[LANES];                                                                           \
    for (int64_t j = 0; j < ns; j++) s[j] = _mm512_set1_epi##W(skeys[j]);                   \
    for (int64_t b = 0; b <= ns; b++) bin[b] = _mm512_set1_epi##W(b);                        \
    for (int q = 0; q < 5 * CODED; q++) c[q] = _mm512_set1_epi##W(coder[q]);                 \
    const int64_t full = tail_##NAME##SUFFIX(keys, n, coder, tail);                          \
    for (int64_t at = 0; at < full; at += LANES) {                                           \
      const __m512i k = load_##NAME##SUFFIX(keys + at, c);                                   \
      __m512i d = _mm512_setzero_si512();                                                    \
      for (int64_t j = 0; j < ns; j++)                                                       \
        d = _mm512_mask_add_epi##W(d, PAST(W, MASK, LANES, s[j], k, spos[j], offset + at), d, \
                                   bin[1]);                                                  \
      for (int64_t b = 0; b <= ns; b++) {                                                    \
        const MASK m = _mm512_cmpeq_epu##W##_mask(d, bin[b]);                                \
        const int cnt = __builtin_popcount(m);                                               \
        _mm512_mask_storeu_epi##W(out + next[b], (MASK)((1u << cnt) - 1),                    \
                                  _mm512_maskz_compress_epi##W(m, k));                       \
        next[b] += cnt;                                                                      \
      }                                                                                      \
    }                                                                                        \
    uint16_t dest[LANES];                                                                    \
    int64_t ignored[FEW_MAX + 1];                                                            \
    classify_##NAME##_search(tail, n - full, offset + full, skeys, spos, ns, steps, dest,    \
                             ignored);                                                       \
    for (int64_t i = 0; i < n - full; i++) out[next[dest[i]]++] = tail[i];                   \
  }
FEW(u32, uint32_t, 32, 16, __mmask16, , 0)
FEW(u64, uint64_t, 64, 8, __mmask8, , 0)
FEW(u32, uint32_t, 32, 16, __mmask16, _coded, 1)
FEW(u64, uint64_t, 64, 8, __mmask8, _coded, 1)
#else
#define classify_u32_PERMUTE_MAX (-1) /* never */
#define classify_u64_PERMUTE_MAX (-1)
int classify_avx512(void) { return 0; }
int scatter_few_max(void) { return 0; } /* the few-destination passes: never called */
#define FEW(NAME, T, SUFFIX)                                                                 \
  void count_##NAME##_few##SUFFIX(const T *keys, int64_t n, int64_t offset, const T *skeys,  \
                                  const int64_t *spos, int64_t ns, int64_t steps,            \
                                  int64_t *counts, const T *coder) {}                        \
  void scatter_##NAME##_few##SUFFIX(const T *keys, int64_t n, int64_t offset, const T *skeys, \
                                    const int64_t *spos, int64_t ns, int64_t steps,          \
                                    int64_t *next, T *out, const T *coder) {}
FEW(u32, uint32_t, )
FEW(u64, uint64_t, )
FEW(u32, uint32_t, _coded)
FEW(u64, uint64_t, _coded)
#define classify_u32_permute(...) (void)0 /* never called */
#define classify_u64_permute(...) (void)0
#endif

DISPATCH(classify_u32, uint32_t)
DISPATCH(classify_u64, uint64_t)
SCATTER(scatter_u32, uint32_t)
SCATTER(scatter_u64, uint64_t)

/* classify and scatter of raw numbers by their codes (code.h; coder: neg, pos, rot, flip,
   top): classify codes a block of keys at a time into a buffer that stays in L1 and classifies
   the codes there; scatter writes each key's code. The keys need no pass of their own to be
   coded (keys.NumericCodec's encode), and the grouped array holds codes. Built for the widest
   vectors (widest.h): with x86-64's baseline ones the coding made both passes slower than an
   encode pass and the plain ones (bench/RESULTS.md, session 50). */
#define CODED(NAME, T, W)                                                                    \
  WIDEST void classify_##NAME##_coded(const T *keys, int64_t n, int64_t offset, const T *skeys,    \
                               const int64_t *spos, int64_t ns, int64_t steps,              \
                               uint16_t *dest, int64_t *counts, const T *coder) {            \
    const T neg = coder[0], pos = coder[1], rot = coder[2], flip = coder[3], top = coder[4]; \
    T codes[BLOCK];                                                                          \
    for (int64_t at = 0; at < n; at += BLOCK) {                                              \
      const int64_t m = n - at < BLOCK ? n - at : BLOCK;                                     \
      for (int64_t i = 0; i < m; i++)                                                        \
        codes[i] = CODE_OF(T, W, keys[at + i], neg, pos, rot, flip, top);                    \
      classify_##NAME(codes, m, offset + at, skeys, spos, ns, steps, dest + at, counts);     \
    }                                                                                        \
  }                                                                                          \
  WIDEST void scatter_##NAME##_coded(const T *keys, int64_t n, const uint16_t *dest, int64_t *next, \
                              T *out, const T *coder) {                                      \
    const T neg = coder[0], pos = coder[1], rot = coder[2], flip = coder[3], top = coder[4]; \
    for (int64_t i = 0; i < n; i++)                                                          \
      out[next[dest[i]]++] = CODE_OF(T, W, keys[i], neg, pos, rot, flip, top);               \
  }
CODED(u32, uint32_t, 32)
CODED(u64, uint64_t, 64)
