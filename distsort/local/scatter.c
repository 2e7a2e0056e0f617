/* The CPU backend's partition of plain keys by destination rank, in two passes.

   Why: a rank that sorts its keys before cutting them at the splitters (partition.sorted_first)
   sorts every key twice, once there and once more, merged or sorted, where they land; with
   one thread a rank and many ranks that second sort costs more than these two passes:
   classify counts each key's destination (a branch-free binary search over the splitters),
   scatter copies each key to its destination's next slot (partition.SCATTER_MIN_RANKS says
   where). Keys keep their input order within a destination (global position order), as the
   exchange expects.

   A key's destination is the number of splitters (key, global position) at or below its own
   (key, offset + i): splitters.classify's order, in which equal keys are cut by position. */
#include <stdint.h>


#define CLASSIFY(NAME, T)                                                                  \
  void NAME(const T *keys, int64_t n, int64_t offset, const T *skeys, const int64_t *spos,  \
            int64_t ns, int64_t steps, uint16_t *dest, int64_t *counts) {                   \
    for (int64_t i = 0; i < n; i++) {                                                        \
      const T k = keys[i];                                                                   \
      int64_t lo = 0;                                                                        \
      for (int64_t step = steps; step > 0; step >>= 1) { /* the same steps for every key */  \
        lo += (skeys[lo + step - 1] < k) * step; /* no branch on the data */                 \
      }                                                                                      \
      if (lo < ns && skeys[lo] == k) { /* a tie with a splitter (rare): cut by position */   \
        const int64_t at = offset + i;                                                       \
        while (lo < ns && skeys[lo] == k && spos[lo] <= at) lo++;                            \
      }                                                                                      \
      dest[i] = (uint16_t)lo;                                                                \
      counts[lo]++;                                                                          \
    }                                                                                        \
  }

#define SCATTER(NAME, T)                                                                     \
  void NAME(const T *keys, int64_t n, const uint16_t *dest, int64_t *next, T *out) {         \
    for (int64_t i = 0; i < n; i++) out[next[dest[i]]++] = keys[i];                          \
  }

CLASSIFY(classify_u32, uint32_t)
CLASSIFY(classify_u64, uint64_t)
SCATTER(scatter_u32, uint32_t)
SCATTER(scatter_u64, uint64_t)
