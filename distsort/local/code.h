/* A number's order-preserving code (keys.NumericCodec; keycode.cuh's KeyCoder on GPUs), from
   its bits u of W bits and the codec's words: (((u ^ (u's top bit ? neg : pos)) - rot) ^ flip)
   - top. codes.c codes whole arrays by it, scatter.c the keys it groups as it reads them. */
#ifndef DISTSORT_CODE_H
#define DISTSORT_CODE_H
#define CODE_OF(T, W, u, neg, pos, rot, flip, top)                                          \
  ((T)((T)((T)((T)((u) ^ (((u) >> ((W) - 1)) ? (neg) : (pos))) - (rot)) ^ (flip)) - (top)))
#endif
