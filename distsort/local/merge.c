/* Stable merge of two sorted runs of unsigned keys, for the CPU backend's finish.

   Why: on CPUs each rank sorts its rows before the exchange, so a rank receives one sorted run
   from every rank. NumPy has no merge: its stable sort of concatenated runs (timsort) takes
   longer than a fresh SIMD sort, so the rank sorted everything twice. A two-way merge reads
   and writes each key once (8 bytes a 32-bit key moved), with no branch on the data in the
   loop (the choice is a conditional move), so it runs at a few ns a key; merge.py merges p
   runs in log2(p) such passes, the pairs of a pass on threads (ctypes drops the GIL).

   Ties take the left run first: runs come in source-rank order, which is global input order,
   so the merge is stable as the sort it replaces. With positions, each key's int64 position
   travels beside it (the order that gathers the other columns). */
#include <stdint.h>

#define MERGE(NAME, T)                                                                   \
  void NAME(const T *a, int64_t na, const T *b, int64_t nb, T *out) {                    \
    int64_t i = 0, j = 0, k = 0;                                                         \
    while (i < na && j < nb) {                                                           \
      T x = a[i], y = b[j];                                                              \
      int right = y < x;                                                                 \
      out[k++] = right ? y : x;                                                          \
      j += right;                                                                        \
      i += !right;                                                                       \
    }                                                                                    \
    while (i < na) out[k++] = a[i++];                                                    \
    while (j < nb) out[k++] = b[j++];                                                    \
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
