/* scatter.c's classify: each key's destination (its count of splitters below it, ties broken
   by position), and each destination's count added to counts. push.c classifies its blocks by
   it too. */
#ifndef DISTSORT_CLASSIFY_H
#define DISTSORT_CLASSIFY_H
#include <stdint.h>

void classify_u32(const uint32_t *keys, int64_t n, int64_t offset, const uint32_t *skeys,
                  const int64_t *spos, int64_t ns, int64_t steps, uint16_t *dest,
                  int64_t *counts);
void classify_u64(const uint64_t *keys, int64_t n, int64_t offset, const uint64_t *skeys,
                  const int64_t *spos, int64_t ns, int64_t steps, uint16_t *dest,
                  int64_t *counts);
#endif
