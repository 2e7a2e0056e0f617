/* WIDEST: a function built for the widest vectors the CPU has (AVX-512, AVX2, or plain
   x86-64), the one to run chosen when the library loads; elsewhere an ordinary function.
   (Named by feature, not x86-64-v4/v3: GCC before 12 refuses those names, and a library that
   does not build leaves the CPU ranks without any C kernel.) */
#ifndef DISTSORT_WIDEST_H
#define DISTSORT_WIDEST_H
#if defined(__x86_64__) && defined(__GLIBC__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define WIDEST __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef WIDEST
#define WIDEST
#endif
#endif
