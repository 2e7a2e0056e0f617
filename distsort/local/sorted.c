/* A sorted output's checksum and order test in one pass on CPUs (check.Summary.add_output):
   the sum of its elements' hashes (hash.c's hash_sum, the same numbers) and the first i whose
   pair (x[i], x[i + 1]) is out of order, or -1.

   Why: the order test read the output once more after the checksum, and for signed and float
   keys it first coded the whole output (canonical codes, so that -0.0 ties 0.0 and NaNs tie)
   into new memory. Here a block of 4096 elements (in L1) is hashed and its pairs compared as
   numbers, NaN last in either order; a block whose pairs are not all in order is searched for
   its first descent. One read of the output, no new memory. */
#include <stdint.h>
#include <string.h>

#include "mix.h"
#include "widest.h"

#define SORTED_BLOCK 4096

/* Out of order for ascending and descending numbers; floats: NaN last in both orders, -0.0
   and 0.0 equal (the comparison's own), as the sort's canonical codes order them. */
#define ASC(a, b) ((a) > (b))
#define DESC(a, b) ((a) < (b))
#define ASC_F(a, b) (((a) > (b)) | (((a) != (a)) & ((b) == (b))))
#define DESC_F(a, b) (((a) < (b)) | (((a) != (a)) & ((b) == (b))))

/* The hash sum of x[0, n) (0 where hashed is 0: the order test alone, for keys whose
   checksum is their pairs' with values) and, in *descent, the first i < pairs with x[i],
   x[i + 1] out of order (pairs: n where x[n] is the next piece's first element, else n - 1),
   or -1. */
#define SORTED_SUM(NAME, T, U, BAD)                                                         \
  WIDEST uint64_t sorted_sum_##NAME(const T *x, int64_t n, int64_t pairs, int hashed,      \
                                    int64_t *descent) {                                     \
    uint64_t sum = 0;                                                                       \
    *descent = -1;                                                                          \
    for (int64_t lo = 0; lo < n; lo += SORTED_BLOCK) {                                      \
      const int64_t hi = lo + SORTED_BLOCK < n ? lo + SORTED_BLOCK : n;                     \
      const int64_t last = hi < pairs ? hi : pairs;                                         \
      for (int64_t i = lo; hashed && i < hi; i++) {                                         \
        U u;                                                                                \
        memcpy(&u, x + i, sizeof u); /* the element's bits, as hash_sum reads them */       \
        sum += link(0, u, 0);                                                               \
      }                                                                                     \
      if (*descent >= 0) continue;                                                          \
      int bad = 0;                                                                          \
      for (int64_t i = lo; i < last; i++) bad |= BAD(x[i], x[i + 1]);                       \
      if (bad)                                                                              \
        for (int64_t i = lo; i < last; i++)                                                 \
          if (BAD(x[i], x[i + 1])) {                                                        \
            *descent = i;                                                                   \
            break;                                                                          \
          }                                                                                 \
    }                                                                                       \
    return sum;                                                                             \
  }

#define SORTED_BOTH(NAME, T, U, A, D) SORTED_SUM(NAME, T, U, A) SORTED_SUM(NAME##_desc, T, U, D)

SORTED_BOTH(u8, uint8_t, uint8_t, ASC, DESC)
SORTED_BOTH(u16, uint16_t, uint16_t, ASC, DESC)
SORTED_BOTH(u32, uint32_t, uint32_t, ASC, DESC)
SORTED_BOTH(u64, uint64_t, uint64_t, ASC, DESC)
SORTED_BOTH(i8, int8_t, uint8_t, ASC, DESC)
SORTED_BOTH(i16, int16_t, uint16_t, ASC, DESC)
SORTED_BOTH(i32, int32_t, uint32_t, ASC, DESC)
SORTED_BOTH(i64, int64_t, uint64_t, ASC, DESC)
SORTED_BOTH(f32, float, uint32_t, ASC_F, DESC_F)
SORTED_BOTH(f64, double, uint64_t, ASC_F, DESC_F)
