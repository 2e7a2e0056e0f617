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

/* The output's front from the runs' heads and its back from their tails, in one loop: two
   chains of dependent loads where a merge from one end has one, about twice its speed
   (bench/RESULTS.md, run 269). On a tie the front takes a's key and the back b's, so both build
   the one stable order and take every key once between them. A block runs as many steps as no
   index can leave its run in, loading both sides before it picks one (no branch on the data);
   the last few steps check bounds. PUT(T, at, from_b, ia, ib) writes output row `at` from
   a[ia], or b[ib] where from_b, having read both; COPY the same, reading only the one. The
   output never overlaps the runs (restrict): every load of a step may come before its stores. */
#define MIN(x, y) ((x) < (y) ? (x) : (y))
#define MERGE_BOTH_ENDS(T, PUT, COPY)                                                     \
  int64_t i = 0, j = 0, p = na - 1, q = nb - 1, lo = 0, hi = na + nb - 1;                \
  int64_t front = (na + nb) / 2, back = na + nb - front; /* steps left at each end */     \
  for (;;) {                                                                             \
    int64_t s = MIN(MIN(front, back), MIN(MIN(na - i, nb - j), MIN(p + 1, q + 1)));     \
    if (s <= 0) break;                                                                   \
    front -= s;                                                                          \
    back -= s;                                                                           \
    for (int64_t k = 0; k < s; k++) {                                                    \
      const int right = b[j] < a[i], left = a[p] > b[q];                                 \
      PUT(T, lo, right, i, j);                                                           \
      lo++, j += right, i += !right;                                                      \
      PUT(T, hi, !left, p, q);                                                           \
      hi--, p -= left, q -= !left;                                                       \
    }                                                                                    \
  }                                                                                      \
  for (; front > 0; front--) {                                                           \
    const int right = i >= na || (j < nb && b[j] < a[i]);                                \
    COPY(lo, right, i, j);                                                               \
    lo++, j += right, i += !right;                                                       \
  }                                                                                      \
  for (; back > 0; back--) {                                                             \
    const int left = q < 0 || (p >= 0 && a[p] > b[q]);                                   \
    COPY(hi, !left, p, q);                                                               \
    hi--, p -= left, q -= !left;                                                         \
  }

#define PUT_KEY(T, at, from_b, ia, ib)                                                   \
  do {                                                                                   \
    const T x_ = a[ia], y_ = b[ib];                                                      \
    out[at] = (from_b) ? y_ : x_;                                                        \
  } while (0)
#define COPY_KEY(at, from_b, ia, ib) (out[at] = (from_b) ? b[ib] : a[ia])
#define PUT_KEY_AND_POSITION(T, at, from_b, ia, ib)                                      \
  do {                                                                                   \
    PUT_KEY(T, at, from_b, ia, ib);                                                      \
    const int64_t px_ = pa[ia], py_ = pb[ib];                                            \
    pout[at] = (from_b) ? py_ : px_;                                                     \
  } while (0)
#define COPY_KEY_AND_POSITION(at, from_b, ia, ib)                                        \
  (COPY_KEY(at, from_b, ia, ib), pout[at] = (from_b) ? pb[ib] : pa[ia])

#define MERGE(NAME, T)                                                                   \
  void NAME(const T *restrict a, int64_t na, const T *restrict b, int64_t nb,            \
            T *restrict out) {                                                           \
    MERGE_BOTH_ENDS(T, PUT_KEY, COPY_KEY)                                                \
  }

#define MERGE_POSITIONS(NAME, T)                                                         \
  void NAME(const T *restrict a, const int64_t *restrict pa, int64_t na,                \
            const T *restrict b, const int64_t *restrict pb, int64_t nb, T *restrict out,  \
            int64_t *restrict pout) {                                                    \
    MERGE_BOTH_ENDS(T, PUT_KEY_AND_POSITION, COPY_KEY_AND_POSITION)                      \
  }

MERGE(merge_u8, uint8_t)
MERGE(merge_u16, uint16_t)
MERGE(merge_u32, uint32_t)
MERGE(merge_u64, uint64_t)
MERGE_POSITIONS(merge_positions_u8, uint8_t)
MERGE_POSITIONS(merge_positions_u16, uint16_t)
MERGE_POSITIONS(merge_positions_u32, uint32_t)
MERGE_POSITIONS(merge_positions_u64, uint64_t)
