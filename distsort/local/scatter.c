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


/* The destination of key k at global position at: a branch-free binary search over the
   splitters' keys (steps: a power of two, the same for every key), then, for a tie with a
   splitter (rare), a cut by position. */
#define DESTINATION(NAME, T)                                                                 \
  static inline int64_t NAME(T k, int64_t at, const T *skeys, const int64_t *spos,          \
                             int64_t ns, int64_t steps) {                                    \
    int64_t lo = 0;                                                                          \
    for (int64_t step = steps; step > 0; step >>= 1) lo += (skeys[lo + step - 1] < k) * step; \
    while (lo < ns && skeys[lo] == k && spos[lo] <= at) lo++;                                \
    return lo;                                                                               \
  }

/* classify: each destination's count of keys. scatter: each key to its destination's next
   slot, its destination found again rather than stored by classify and read back: two bytes
   a key less written and read, which counts where every core's rank scatters at once
   (memory-bound: bench/RESULTS.md, run 293). */
#define PASSES(T, SUFFIX)                                                                    \
  DESTINATION(destination_##SUFFIX, T)                                                       \
  void classify_##SUFFIX(const T *keys, int64_t n, int64_t offset, const T *skeys,           \
                         const int64_t *spos, int64_t ns, int64_t steps, int64_t *counts) {  \
    for (int64_t i = 0; i < n; i++)                                                          \
      counts[destination_##SUFFIX(keys[i], offset + i, skeys, spos, ns, steps)]++;          \
  }                                                                                          \
  void scatter_##SUFFIX(const T *keys, int64_t n, int64_t offset, const T *skeys,            \
                        const int64_t *spos, int64_t ns, int64_t steps, int64_t *next,       \
                        T *out) {                                                            \
    for (int64_t i = 0; i < n; i++)                                                          \
      out[next[destination_##SUFFIX(keys[i], offset + i, skeys, spos, ns, steps)]++] = keys[i]; \
  }

PASSES(uint32_t, u32)
PASSES(uint64_t, u64)
