/* The CPU partition's second pass for ranks that write into each other's memory: each key goes
   straight to its place in its receiver's area, through a small buffer a destination.

   Why: scatter's rows for other ranks are written to new pages and read again by their
   receiver (the exchange), ~37 bytes moved a 4-byte key with the destinations stored between
   the passes; here a block of BLOCK keys is classified into destinations that stay in L1
   (scatter.c's classify, every way of it), each key is appended to its destination's buffer
   (STAGE_BYTES: all of them stay in L2 at the ranks of one node), and a full buffer goes out
   by one copy: memcpy for this rank's own block, process_vm_writev into a peer's receive area
   (the kernel's cross-memory attach) for the others. ~16 bytes a key: the keys read twice
   (count and this pass), each written once where it stays (bench/RESULTS.md, session 51).
   Rows keep their input order within a destination, as scatter's do. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "classify.h"

#define BLOCK 512
#define STAGE_BYTES 16384 /* a destination's buffer: one write call moves this much */

/* nbytes at local to address `to` of process pid (0: this one); 0 or an errno. */
static int put(int64_t pid, uint64_t to, const void *local, size_t nbytes) {
  if (pid == 0) {
    memcpy((void *)(uintptr_t)to, local, nbytes);
    return 0;
  }
#ifdef __linux__
  while (nbytes) {
    struct iovec mine = {(void *)local, nbytes}, theirs = {(void *)(uintptr_t)to, nbytes};
    const ssize_t got = process_vm_writev((pid_t)pid, &mine, 1, &theirs, 1, 0);
    if (got <= 0) return got < 0 ? errno : EIO;
    local = (const char *)local + got;
    to += (uint64_t)got;
    nbytes -= (size_t)got;
  }
  return 0;
#else /* no cross-memory attach: cma.py's transport is never made, so never called */
  return ENOSYS;
#endif
}

/* Keys k[0, m) (dest: each key's destination) appended to their destinations' buffers, a
   full one sent on; 0 or an errno. */
#define APPEND(T)                                                                           \
  static int append_##T(const T *k, const uint16_t *dest, int64_t m, T *stage, int64_t room, \
                        int64_t *fill, const int64_t *pids, uint64_t *to) {                 \
    for (int64_t i = 0; i < m; i++) {                                                       \
      const int d = dest[i];                                                                \
      T *buf = stage + d * room;                                                            \
      buf[fill[d]++] = k[i];                                                                \
      if (fill[d] == room) {                                                                \
        const int err = put(pids[d], to[d], buf, room * sizeof(T));                         \
        if (err) return err;                                                                \
        to[d] += room * sizeof(T);                                                          \
        fill[d] = 0;                                                                        \
      }                                                                                     \
    }                                                                                       \
    return 0;                                                                               \
  }
APPEND(uint32_t)
APPEND(uint64_t)

/* push_NAME(keys, n, offset, splitters as classify takes them, pids, to, stage): destination
   d's keys to address to[d] of process pids[d] (0: this process) and on, to[] advanced past
   them; stage: (ns + 1) x STAGE_BYTES of scratch. Returns 0 or the errno of the first write
   that failed. */
#define PUSH(NAME, T)                                                                       \
  int push_##NAME(const T *keys, int64_t n, int64_t offset, const T *skeys,                 \
                  const int64_t *spos, int64_t ns, int64_t steps, const int64_t *pids,      \
                  uint64_t *to, T *stage) {                                                 \
    const int64_t room = STAGE_BYTES / sizeof(T);                                           \
    int64_t fill[ns + 1], ignored[ns + 1];                                                  \
    uint16_t dest[BLOCK];                                                                   \
    memset(fill, 0, sizeof fill);                                                           \
    memset(ignored, 0, sizeof ignored); /* classify adds to them */                         \
    for (int64_t at = 0; at < n; at += BLOCK) {                                             \
      const int64_t m = n - at < BLOCK ? n - at : BLOCK;                                    \
      const T *k = keys + at;                                                               \
      classify_##NAME(k, m, offset + at, skeys, spos, ns, steps, dest, ignored);            \
      const int err = append_##T(k, dest, m, stage, room, fill, pids, to);                  \
      if (err) return err;                                                                  \
    }                                                                                       \
    for (int64_t d = 0; d <= ns; d++) {                                                     \
      const int err = fill[d] ? put(pids[d], to[d], stage + d * room, fill[d] * sizeof(T)) : 0; \
      if (err) return err;                                                                  \
      to[d] += fill[d] * sizeof(T);                                                         \
    }                                                                                       \
    return 0;                                                                               \
  }
/* count_NAME_blocks: the first pass for push_NAME, keys counted per destination (counts,
   ns + 1), their destinations kept only for a block, in L1. */
#define COUNT(NAME, T)                                                                      \
  void count_##NAME##_blocks(const T *keys, int64_t n, int64_t offset, const T *skeys,      \
                             const int64_t *spos, int64_t ns, int64_t steps,                \
                             int64_t *counts) {                                             \
    uint16_t dest[BLOCK];                                                                   \
    for (int64_t at = 0; at < n; at += BLOCK) {                                             \
      const int64_t m = n - at < BLOCK ? n - at : BLOCK;                                    \
      const T *k = keys + at;                                                               \
      classify_##NAME(k, m, offset + at, skeys, spos, ns, steps, dest, counts);             \
    }                                                                                       \
  }
PUSH(u32, uint32_t)
PUSH(u64, uint64_t)
COUNT(u32, uint32_t)
COUNT(u64, uint64_t)

int64_t push_stage_bytes(void) { return STAGE_BYTES; }
/* Destinations the push takes: from 5 (fewer: scatter.c's few-destination passes and the
   exchange were as fast, a key a time into two buffers waiting on the same count half the
   time: bench/RESULTS.md, session 51) to 64 (their buffers, 1 MiB at most, stay in L2). */
int64_t push_min_ranks(void) { return 5; }
int64_t push_max_ranks(void) { return 64; }
