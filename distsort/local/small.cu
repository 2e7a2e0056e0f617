// A whole LSD radix sort of keys in one launch, for sorts too small to fill the GPU (small.py).
//
// Why: below a few million keys the sort's time is the launches', not the GPU's. 2^20 uint32
// keys (4 MiB) sit in L2, and each onesweep pass over them is a few microseconds of device work,
// while the host spends longer than that preparing and launching each of radix.py's kernels
// (memset, histogram, scan, one per pass). Here one launch does it all: every pass's digit
// counts in one read of the keys, then each pass whose digit varies, the grid meeting at a
// barrier between passes. The passes are onesweep.cuh's tiles (the same ranking and look-back),
// claimed in a loop by a grid of resident blocks: the driver launches it cooperatively, so every
// block runs at once and the barrier cannot wait on a block that never starts.
// Keys move as in radix.cu: the histogram reads each key once, each pass reads and writes it once;
// where skipped passes leave the result in the other buffer, one copy (a read and a write) more.
// A pass reads its keys past L1 (__ldcg): the buffer it reads was written in this same launch by
// other SMs, whose writes an SM's L1 (or the read-only cache) would not see.

#include "onesweep.cuh"

template <typename K, int ITEMS> struct SmallDigit : RadixDigit<K, ITEMS> {
    static constexpr bool COHERENT = true;
};

// Every block of the grid arrives here before any goes on. `count` is zero at the launch; the
// k-th barrier (from 1) waits until k x gridDim.x arrivals.
__device__ __forceinline__ void grid_barrier(u32* count, u32 target)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();  // this block's writes, before its arrival
        atomicAdd(count, 1u);
        while (*(volatile u32*)count < target) __nanosleep(32);
        __threadfence();
    }
    __syncthreads();
}

template <typename K> union SmallSmem {
    OnesweepSmem<K, u32, 0> pass;
    u32 hist[sizeof(K) * RADIX];  // every pass's digit counts, during the histogram
};

// words (zeroed by the driver): every pass's digit counts (8 x 256), its tile counter (8), the
// barrier's count, then from SMALL_FLAGS each pass's look-back flags, `region` words each.
#define SMALL_COUNTERS (8 * RADIX)
#define SMALL_BARRIER (SMALL_COUNTERS + 8)
#define SMALL_FLAGS (SMALL_BARRIER + 8)

// Sorts keys (n < 2^30) on bits [begin_bit, end_bit) of code(key) - low, as radix.cu's passes
// do, into `result` (buf0 or buf1). The passes alternate buf0, buf1, buf0, ...; buf1 may be keys
// itself (the driver's overwrite: the first pass reads keys and writes buf0).
template <typename K>
__global__ void __launch_bounds__(BLOCK, 2)
    radix_small(const K* keys, K* buf0, K* buf1, K* result, u64 n, K low, int begin_bit,
                int end_bit, int code, u32* words, u32 region)
{
    constexpr int ITEMS = Items<K, 0>::value;
    constexpr u64 TILE = BLOCK * ITEMS;
    __shared__ SmallSmem<K> sm;
    __shared__ u32 s_bases[RADIX];
    __shared__ u32 s_warp[WARPS];
    const int tid = threadIdx.x;
    const int passes = (end_bit - begin_bit + 7) / 8;
    const RawKeys<K> raw(code);
    u32* barrier = words + SMALL_BARRIER;
    u32 arrivals = 0;

    for (int i = tid; i < passes * RADIX; i += BLOCK) sm.hist[i] = 0;
    __syncthreads();
    for (u64 i = (u64)blockIdx.x * BLOCK + tid; i < n; i += (u64)gridDim.x * BLOCK) {
        const K c = raw.code(keys[i]) - low;
        for (int p = 0; p < passes; ++p) {
            const int shift = begin_bit + 8 * p;
            atomicAdd(&sm.hist[p * RADIX + digit_of(c, shift, (1u << min(8, end_bit - shift)) - 1u)],
                      1u);
        }
    }
    __syncthreads();
    for (int i = tid; i < passes * RADIX; i += BLOCK)
        if (sm.hist[i]) atomicAdd(&words[i], sm.hist[i]);
    grid_barrier(barrier, ++arrivals * gridDim.x);

    const u32 tiles = (u32)((n + TILE - 1) / TILE);
    const K* src = keys;
    K* const bufs[2] = {buf0, buf1};
    int ran = 0;
    for (int p = 0; p < passes; ++p) {
        const u32 count = __ldcg(&words[p * RADIX + tid]);
        if (__syncthreads_or(count == n)) continue;  // one digit holds every key: no pass
        u32 total;
        s_bases[tid] = block_excl_scan(count, s_warp, &total);
        const int shift = begin_bit + 8 * p;
        SmallDigit<K, ITEMS> dig{{low, shift, (1u << min(8, end_bit - shift)) - 1u, raw}};
        if (ran > 0) grid_barrier(barrier, ++arrivals * gridDim.x);  // the last pass is written
        K* dst = bufs[ran % 2];
        void* flags = words + SMALL_FLAGS + (u64)p * region;
        for (u32 tile; (tile = claim_tile(words + SMALL_COUNTERS + p, sm.pass)) < tiles;) {
            onesweep_at(tile, src, dst, (const u32*)nullptr, (u32*)nullptr, n, dig, s_bases,
                        flags, 0, nullptr, nullptr, sm.pass);
            __syncthreads();  // the tile's shared memory is read before the next claim clears it
        }
        src = dst;
        ++ran;
    }
    if (src == result) return;
    if (ran > 0) grid_barrier(barrier, ++arrivals * gridDim.x);
    for (u64 i = (u64)blockIdx.x * BLOCK + tid; i < n; i += (u64)gridDim.x * BLOCK)
        result[i] = __ldcg(src + i);
}
