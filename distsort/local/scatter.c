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
   (The clones are named by feature, not x86-64-v4/v3: GCC before 12 refuses those names, and
   a library that does not build leaves the CPU ranks without any C kernel.) */
#include <stdint.h>

#define BLOCK 512 /* keys a block: their counters stay in L1 through the splitters' loop */
/* Past this many bytes of splitters a key's compares cost more than a search's steps. */
#define COMPARE_MAX_BYTES 64

#if defined(__x86_64__) && defined(__GLIBC__) && defined(__has_attribute)
#if __has_attribute(target_clones) /* the widest vectors the CPU has, chosen at load time */
#define WIDEST __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef WIDEST
#define WIDEST
#endif

#define CLASSIFY(NAME, T)                                                                  \
  static void NAME##_search(const T *keys, int64_t n, int64_t offset, const T *skeys,      \
                            const int64_t *spos, int64_t ns, int64_t steps, uint16_t *dest, \
                            int64_t *counts) {                                               \
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
  static WIDEST void NAME##_compare(const T *keys, int64_t n, int64_t offset, const T *skeys, \
                                    const int64_t *spos, int64_t ns, uint16_t *dest,         \
                                    int64_t *counts) {                                       \
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
  }                                                                                          \
                                                                                             \
  void NAME(const T *keys, int64_t n, int64_t offset, const T *skeys, const int64_t *spos,  \
            int64_t ns, int64_t steps, uint16_t *dest, int64_t *counts) {                   \
    if (ns * (int64_t)sizeof(T) <= COMPARE_MAX_BYTES)                                        \
      NAME##_compare(keys, n, offset, skeys, spos, ns, dest, counts);                        \
    else                                                                                     \
      NAME##_search(keys, n, offset, skeys, spos, ns, steps, dest, counts);                  \
  }

#define SCATTER(NAME, T)                                                                     \
  void NAME(const T *keys, int64_t n, const uint16_t *dest, int64_t *next, T *out) {         \
    for (int64_t i = 0; i < n; i++) out[next[dest[i]]++] = keys[i];                          \
  }

CLASSIFY(classify_u32, uint32_t)
CLASSIFY(classify_u64, uint64_t)
SCATTER(scatter_u32, uint32_t)
SCATTER(scatter_u64, uint64_t)
