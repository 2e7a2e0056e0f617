// The partition by (destination, first radix digit): the GPU exchange's default for plain keys
// and key-value pairs (steps/chunks.ByDigit), driven by digit_partition.py.
//
// Why: a key's bucket is dest << sbits | ((key - low[dest]) & (2^sbits - 1)): its destination
// rank (the splitters below it) and the low sbits bits of key - low, low being its receiver's
// lowest key, so 2^sbits x ranks <= 256 buckets. Each block then leaves sorted by the receiver's
// first radix digit, and the receiver runs one radix pass fewer (landing.py). Two kernels, as
// the plain partition (partition.cu): bucket_counts finds every key's bucket and counts the
// buckets (one read of the keys, one byte a key written), bucket_scatter is one onesweep pass
// over the bucket bytes (~2 moves per key and the byte).
// A destination is the number of splitters below (key, position in the shard): ties with a
// splitter's key are broken by position, as in partition.cu.

#include "onesweep.cuh"

#define MAX_SPLITTERS 15  // up to 16 ranks: every key is compared with every splitter
#define COUNT_BLOCK 512   // bucket_counts: 512 threads, so that U keys each fit in registers

// dest -= 1 where (key, index) < (split, threshold) in lexicographic order: a borrow chain over
// (index, key words) whose final borrow comes off dest (3-4 instructions a splitter, where
// separate compares of the key and the tie took ~9 and a 0/1 result and its subtraction 2 more).
__device__ __forceinline__ void take_below(u32& dest, u32 k, u32 idx, u32 s, u32 t)
{
    asm("{\n\t.reg .u32 x;\n\tsub.cc.u32 x, %1, %2;\n\tsubc.cc.u32 x, %3, %4;\n\t"
        "subc.u32 %0, %0, 0;\n\t}"
        : "+r"(dest)
        : "r"(idx), "r"(t), "r"(k), "r"(s));
}
__device__ __forceinline__ void take_below(u32& dest, u64 k, u32 idx, u64 s, u32 t)
{
    asm("{\n\t.reg .u32 x;\n\tsub.cc.u32 x, %1, %2;\n\tsubc.cc.u32 x, %3, %4;\n\t"
        "subc.cc.u32 x, %5, %6;\n\tsubc.u32 %0, %0, 0;\n\t}"
        : "+r"(dest)
        : "r"(idx), "r"(t), "r"((u32)k), "r"((u32)s), "r"((u32)(k >> 32)), "r"((u32)(s >> 32)));
}

template <typename K> struct Buckets {
    K split[MAX_SPLITTERS];
    u32 thr[MAX_SPLITTERS];       // keys equal to split[j] from this shard index on are above it
    K low[MAX_SPLITTERS + 1];
    int sbits;  // bits of the digit: 2^sbits buckets a destination
    int ns;

    // first: the global position of the shard's key 0 (its n < 2^32 keys are indexed in 32 bits).
    __device__ void load(const K* split_keys, const u64* split_pos, int n_split, const K* lows,
                         int digit_bits, u64 first)
    {
        const int t = threadIdx.x;
        if (t < n_split) {
            const u64 p = split_pos[t];
            split[t] = split_keys[t];
            thr[t] = p <= first ? 0u : (u32)min(p - first, (u64)0xffffffffu);
        }
        if (t <= n_split) low[t] = lows[t];
        if (t == 0) {
            ns = n_split;
            sbits = digit_bits;
        }
    }

    // The buckets of U keys of a thread, key u at index idx[u] of the shard.
    // Splitter-major: each splitter is read from shared memory once for all U keys (key-major,
    // the shared loads bound the kernel).
    template <int U>
    __device__ __forceinline__ void of(const K (&k)[U], const u32 (&idx)[U], u32 (&out)[U]) const
    {
        u32 dest[U];
#pragma unroll
        for (int u = 0; u < U; ++u) dest[u] = ns;
        for (int j = 0; j < ns; ++j) {
            const K s = split[j];
            const u32 t = thr[j];
#pragma unroll
            for (int u = 0; u < U; ++u) take_below(dest[u], k[u], idx[u], s, t);
        }
#pragma unroll
        for (int u = 0; u < U; ++u)
            out[u] = dest[u] << sbits | ((u32)(k[u] - low[dest[u]]) & ((1u << sbits) - 1u));
    }
};

// The bucket digit for onesweep_tile: each key's bucket, found by bucket_counts (ties need the
// key's position, which the write-out no longer knows, and the splitter search cost the scatter
// ~40 instructions a key), read as a byte beside the key and staged in shared memory. A tile's
// bytes come in as aligned 16-byte vectors through `window` (the tile's key buffer, not yet in
// use), a vector or two a thread, where a byte load per key took 24 load instructions a thread
// and made the scatter slower. The
// buckets have 16 bytes to spare on either side (digit_partition.py) for the vectors' overhang.
template <typename K, int ITEMS> struct BucketDigit {
    static constexpr bool STAGED = true;
    const unsigned char* __restrict__ buckets;
    void* own_keys;  // buckets [own_first, + own_count) go here (their bases count from it)
    void* own_vals;
    u32 own_first, own_count;
    u32 pack[(ITEMS + 3) / 4];
    __device__ __forceinline__ K load(K raw) const { return raw; }
    __device__ __forceinline__ K store(K kept) const { return kept; }
    __device__ __forceinline__ void prepare(const K (&)[ITEMS], u64 tile_base, u32 first,
                                            u32 tile_n, unsigned char* window)
    {
#pragma unroll
        for (int i = 0; i < (ITEMS + 3) / 4; ++i) pack[i] = 0;
        const unsigned char* from = buckets + tile_base;
        const u32 lead = (u32)((size_t)from & 15);
        const uint4* vec = reinterpret_cast<const uint4*>(from - lead);
        const u32 words = (lead + tile_n + 15) / 16;
        for (u32 w = threadIdx.x; w < words; w += BLOCK)
            reinterpret_cast<uint4*>(window)[w] = __ldcs(vec + w);
        __syncthreads();
#pragma unroll
        for (int i = 0; i < ITEMS; ++i)
            if (first + 32 * i < tile_n)
                pack[i / 4] |= (u32)window[lead + first + 32 * i] << (8 * (i % 4));
    }
    __device__ __forceinline__ u32 item(const K (&)[ITEMS], int i) const
    {
        return (pack[i / 4] >> (8 * (i % 4))) & 0xffu;
    }
    __device__ __forceinline__ u32 staged(K, const unsigned char* stage, u32 idx) const
    {
        return stage[idx];
    }
    template <typename T> __device__ __forceinline__ T* to(T* out, int column, u32 d) const
    {
        return d - own_first < own_count ? static_cast<T*>(column ? own_vals : own_keys) : out;
    }
};

// Keys per bucket over the whole shard (counts: 256 words, zeroed), for the scatter's bases, and
// every key's bucket (one byte a key) for the scatter. One read of the keys, a quarter (uint32)
// or an eighth of it written. Issue-bound: with ~67 PTX instructions a key it took about twice
// as long as reading the keys. Now ~36: 16-byte loads of V keys, U of them a
// thread in flight before any is counted (one load in flight per thread leaves the kernel
// waiting on memory latency), 32-bit indices (a shard has fewer than 2^32 keys), one store of a
// vector's V bucket bytes (buckets + head is V bytes aligned: the host shifts the buckets), and
// the splitter tests as borrow chains. The keys before the first 16-byte boundary (head) and
// after the last whole vector go one a thread. 32 copies of each counter, copy l in bank l, so
// a warp's adds never conflict (as in partition.cu).
template <typename K>
__global__ void __launch_bounds__(COUNT_BLOCK)
    bucket_counts(const K* __restrict__ keys, u32 n, u32 head, const K* split_keys,
                  const u64* split_pos, int ns, const K* lows, int sbits, u64 offset,
                  u32* __restrict__ counts,
                  unsigned char* __restrict__ buckets)
{
    constexpr int V = 16 / sizeof(K), U = 8 / V;  // 8 keys a thread a step
    __shared__ Buckets<K> b;
    __shared__ u32 hist[RADIX * 32];
    for (int i = threadIdx.x; i < RADIX * 32; i += blockDim.x) hist[i] = 0;
    b.load(split_keys, split_pos, ns, lows, sbits, offset);
    __syncthreads();
    const u32 lane = threadIdx.x & 31, step = gridDim.x * blockDim.x;
    const u32 first = blockIdx.x * blockDim.x + threadIdx.x, vecs = (n - head) / V;
    const K* body = keys + head;
    for (u32 v = first; v < vecs; v += U * step) {
        K k[U * V];
        u32 idx[U * V], d[U * V];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const u32 at = min(v + u * step, vecs - 1);  // past the end: counted by nobody
            K part[V];
            load_vec(body, at, part);
#pragma unroll
            for (int j = 0; j < V; ++j) {
                k[u * V + j] = part[j];
                idx[u * V + j] = head + at * V + j;
            }
        }
        b.of(k, idx, d);
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (v + u * step >= vecs) break;
            u32 packed = 0;
#pragma unroll
            for (int j = 0; j < V; ++j) {
                atomicAdd(&hist[d[u * V + j] * 32 + lane], 1u);
                packed |= d[u * V + j] << (8 * j);
            }
            unsigned char* to = buckets + idx[u * V];
            if (V == 4)
                *reinterpret_cast<u32*>(to) = packed;
            else
                *reinterpret_cast<unsigned short*>(to) = (unsigned short)packed;
        }
    }
    const u32 tail = n - head - vecs * V;  // keys outside whole vectors: head + tail < 2V
    if (first < head + tail) {
        const u32 i = first < head ? first : n - tail + (first - head);
        const K k[1] = {keys[i]};
        const u32 idx[1] = {i};
        u32 d[1];
        b.of(k, idx, d);
        atomicAdd(&hist[d[0] * 32 + lane], 1u);
        buckets[i] = (unsigned char)d[0];
    }
    __syncthreads();
    flush_copies<32>(hist, RADIX, counts);
}

// Why: the partition as one stable onesweep pass over the bucket digit: every key (and value,
// VMODE 1: key-value pairs, steps/chunks.ByDigit) read once (with its bucket byte) and written once, at
// bases[bucket] (the sender's layout: any place per bucket) plus its rank among the bucket's keys
// before it. Consecutive tiles of the shard, of the onesweep pass's size for the VMODE.
// Buckets [own_first, own_first + own_count) (the sender's own destination, steps/chunks.py) go to
// own_keys (own_vals) instead, their bases counted from there: the sender's own block lands in
// its receive buffer with no copy from the send buffer after.
template <typename K, typename V, int VMODE>
__global__ void __launch_bounds__(BLOCK, (VMODE != 0 && sizeof(V) > sizeof(K)) ? 2 : 3)
    bucket_scatter(const K* __restrict__ keys_in, K* __restrict__ keys_out,
                   const V* __restrict__ vals_in, V* __restrict__ vals_out, u64 n,
                   const unsigned char* __restrict__ buckets, const u32* __restrict__ bases,
                   u32* tile_counter, void* flags, int wide, K* own_keys, V* own_vals,
                   u32 own_first, u32 own_count)
{
    __shared__ OnesweepSmem<K, V, VMODE> sm;
    BucketDigit<K, Items<K, VMODE>::value> dig{buckets, own_keys, own_vals, own_first, own_count};
    onesweep_next(keys_in, keys_out, vals_in, vals_out, n, dig, bases, tile_counter, flags, wide,
                  (const u32*)nullptr, (const u32*)nullptr, sm);
}
