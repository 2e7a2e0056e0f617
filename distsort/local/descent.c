/* The check's order test on CPUs (check.first_disorder): the first i with w[i] > w[i + 1] in a
   column of unsigned words, or -1.

   Why: NumPy's steps (two compares, an and, an or over the whole column, each a new array of
   n booleans, then an argmax) took longer than reading the column and hashing it (bench/
   RESULTS.md, session 47). Here a block's pairs are compared into one flag, with no branch in
   the loop, so the compiler makes it vector compares at the speed of the read; only a block
   whose flag is set is searched for its first descent. */
#include <stdint.h>

#define DESCENT_BLOCK 4096

#define FIRST_DESCENT(W, T)                                                               \
  int64_t first_descent_u##W(const T *w, int64_t n) {                                     \
    for (int64_t lo = 0; lo + 1 < n; lo += DESCENT_BLOCK) {                               \
      const int64_t hi = lo + DESCENT_BLOCK < n - 1 ? lo + DESCENT_BLOCK : n - 1;         \
      int bad = 0;                                                                        \
      for (int64_t i = lo; i < hi; i++) bad |= w[i] > w[i + 1];                           \
      if (bad)                                                                            \
        for (int64_t i = lo; i < hi; i++)                                                 \
          if (w[i] > w[i + 1]) return i;                                                  \
    }                                                                                     \
    return -1;                                                                            \
  }

FIRST_DESCENT(8, uint8_t)
FIRST_DESCENT(16, uint16_t)
FIRST_DESCENT(32, uint32_t)
FIRST_DESCENT(64, uint64_t)
