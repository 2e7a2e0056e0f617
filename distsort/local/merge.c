/* Stable merge of two sorted runs of unsigned keys, for the CPU backend's finish.

   Why: on CPUs each rank sorts its rows before the exchange, so a rank receives one sorted run
   from every rank. NumPy has no merge: its stable sort of concatenated runs (timsort) takes
   longer than a fresh SIMD sort, so the rank sorted everything twice. A two-way merge reads
   and writes each key once (8 bytes a 32-bit key moved), with no branch on the data in the
   loop (the choice is a conditional move), so it runs at a ns or two a key; merge.py merges p
   runs in log2(p) such passes, the pairs of a pass on threads (ctypes drops the GIL).

   Ties take the left run first: runs come in source-rank order, which is global input order,
   so the merge is stable as the sort it replaces. With positions, each key's int64 position
   travels beside it (the order that gathers the other columns). */
#include <stdint.h>

/* Keys alone: the output's front from the runs' heads and its back from their tails, in one
   loop: two chains of dependent loads where one merge has one, 1.7x its speed (bench/RESULTS.md,
   run 269). On a tie the front takes a's key and the back b's, so both build the one stable
   order and take every key once between them. A block runs as many steps as no index can
   leave its run in; the last few steps check bounds. */
#define MIN(x, y) ((x) < (y) ? (x) : (y))
#define MERGE(NAME, T)                                                                   \
  void NAME(const T *a, int64_t na, const T *b, int64_t nb, T *out) {                    \
    int64_t i = 0, j = 0, p = na - 1, q = nb - 1, lo = 0, hi = na + nb - 1;              \
    int64_t front = (na + nb) / 2, back = na + nb - front; /* steps left at each end */   \
    for (;;) {                                                                           \
      int64_t s = MIN(MIN(front, back), MIN(MIN(na - i, nb - j), MIN(p + 1, q + 1)));   \
      if (s <= 0) break;                                                                 \
      front -= s;                                                                        \
      back -= s;                                                                         \
      for (int64_t k = 0; k < s; k++) {                                                  \
        const T x = a[i], y = b[j], u = a[p], v = b[q];                                  \
        const int right = y < x, left = u > v;                                           \
        out[lo++] = right ? y : x;                                                       \
        j += right;                                                                      \
        i += !right;                                                                     \
        out[hi--] = left ? u : v;                                                        \
        p -= left;                                                                       \
        q -= !left;                                                                      \
      }                                                                                  \
    }                                                                                    \
    for (; front > 0; front--) {                                                         \
      const int right = i >= na || (j < nb && b[j] < a[i]);                              \
      out[lo++] = right ? b[j++] : a[i++];                                               \
    }                                                                                    \
    for (; back > 0; back--) {                                                           \
      const int left = q < 0 || (p >= 0 && a[p] > b[q]);                                 \
      out[hi--] = left ? a[p--] : b[q--];                                                \
    }                                                                                    \
  }

#define MERGE_POSITIONS(NAME, T)                                                         \
  void NAME(const T *a, const int64_t *pa, int64_t na, const T *b, const int64_t *pb,    \
            int64_t nb, T *out, int64_t *pout) {                                         \
    int64_t i = 0, j = 0, k = 0;                                                         \
    while (i < na && j < nb) {                                                           \
      T x = a[i], y = b[j];                                                              \
      int right = y < x;                                                                 \
      out[k] = right ? y : x;                                                            \
      pout[k++] = right ? pb[j] : pa[i];                                                 \
      j += right;                                                                        \
      i += !right;                                                                       \
    }                                                                                    \
    for (; i < na; i++, k++) { out[k] = a[i]; pout[k] = pa[i]; }                         \
    for (; j < nb; j++, k++) { out[k] = b[j]; pout[k] = pb[j]; }                         \
  }

MERGE(merge_u8, uint8_t)
MERGE(merge_u16, uint16_t)
MERGE(merge_u32, uint32_t)
MERGE(merge_u64, uint64_t)
MERGE_POSITIONS(merge_positions_u8, uint8_t)
MERGE_POSITIONS(merge_positions_u16, uint16_t)
MERGE_POSITIONS(merge_positions_u32, uint32_t)
MERGE_POSITIONS(merge_positions_u64, uint64_t)
