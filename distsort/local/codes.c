/* Order-preserving codes of numbers on CPUs (keys.NumericCodec; keycode.cuh's KeyCoder does the
   same on GPUs): code.h's CODE_OF, with flip all ones for descending codes, else zero; and
   back. Signed integers flip their sign bit, floats all bits of the negative ones, NaN moved
   past infinity (rot), descending reversed.

   Why: NumPy's steps over a block (five whole-block operations, a temporary each) coded about
   5 ns a key on one core (bench/RESULTS.md, session 48); here each word is read once and
   written once, in one vectorizable loop (widest.h). */
#include <stdint.h>

#include "code.h"
#include "widest.h"

#define CODES(W, T)                                                                        \
  WIDEST void encode_u##W(const T *src, T *dst, int64_t n, T neg, T pos, T rot, T flip,     \
                          T top) {                                                         \
    for (int64_t i = 0; i < n; i++) {                                                      \
      const T u = src[i];                                                                  \
      dst[i] = CODE_OF(T, W, u, neg, pos, rot, flip, top);                                 \
    }                                                                                      \
  }                                                                                        \
  WIDEST void decode_u##W(const T *src, T *dst, int64_t n, T neg, T pos, T rot, T flip,     \
                          T top) {                                                         \
    for (int64_t i = 0; i < n; i++) {                                                      \
      T v = (T)((T)((T)(src[i] + top) ^ flip) + rot);                                      \
      dst[i] = (T)(v ^ ((v >> (W - 1)) ? pos : neg));                                      \
    }                                                                                      \
  }

CODES(8, uint8_t)
CODES(16, uint16_t)
CODES(32, uint32_t)
CODES(64, uint64_t)
