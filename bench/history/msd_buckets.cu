// The last pass of the hybrid sort of 32-bit keys: keys already in order of their top bits (two
// onesweep passes over [split, 32)), each bucket of equal top bits is sorted on its low `split`
// bits by one block, in shared memory, and written out once.
//
// Why: an LSD pass over device memory reads and writes 8 bytes a key and runs at about half the
// copy rate (the look-back and the ranking's latency, not bandwidth, hold it). Here the last two
// (or three) digits cost one read and one write of each key: 28 bytes a key for the whole sort
// (histogram 4, two passes 16, this 8) against 36 for four LSD passes. A bucket holds at most
// BLOCK * CUB_ITEMS keys; a larger one is listed in `over` and left for the host to sort apart.
// A probe (msd_hybrid.py beside it), not adopted: bench/RESULTS.md, runs 285-288.
#include <cub/block/block_radix_sort.cuh>  // before onesweep.cuh, whose macros (WARPS) it names
#include "../../distsort/local/onesweep.cuh"

// The first index of sorted-by-top-bits `keys` whose key >> shift is at least b, for every
// bucket b in [0, buckets]: one thread a bound, all at once (the searches' first steps hit the
// same cached words).
extern "C" __global__ void bucket_bounds(const u32* __restrict__ keys, u64 n, int shift,
                                         u32 buckets, u32* __restrict__ bounds)
{
    const u32 b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b > buckets) return;
    u64 lo = 0, hi = n;
    while (lo < hi) {
        const u64 mid = (lo + hi) >> 1;
        if ((u64)(keys[mid] >> shift) < b) lo = mid + 1; else hi = mid;
    }
    bounds[b] = (u32)lo;
}

// One block a bucket, sorted by CUB's block sort (its ranking counts digits per thread; the
// onesweep tile's warp ranking by ballots, tried in 1bfa8c8, took 1.5x as long). Absent keys
// are the bucket's largest possible key, which ties only with itself.
extern "C" __global__ void __launch_bounds__(BLOCK)
bucket_sort_cub(const u32* __restrict__ in, u32* __restrict__ out, const u32* __restrict__ bounds,
                int split, u32* __restrict__ over, u32* __restrict__ overs)
{
    using Sort = cub::BlockRadixSort<u32, BLOCK, CUB_ITEMS, cub::NullType, CUB_BITS>;
    __shared__ typename Sort::TempStorage temp;
    const int tid = threadIdx.x;
    const u32 lo = bounds[blockIdx.x], n = bounds[blockIdx.x + 1] - lo;
    if (n > BLOCK * CUB_ITEMS) {
        if (tid == 0) over[atomicAdd(overs, 1u)] = blockIdx.x;
        return;
    }
    if (n < 2) {
        if (n == 1 && tid == 0) out[lo] = in[lo];
        return;
    }
    const u32 pad = in[lo] | ((1u << split) - 1u);
    u32 k[CUB_ITEMS];
#pragma unroll
    for (int i = 0; i < CUB_ITEMS; ++i)
        k[i] = i * BLOCK + tid < n ? in[lo + i * BLOCK + tid] : pad;
    Sort(temp).SortBlockedToStriped(k, 0, split);
#pragma unroll
    for (int i = 0; i < CUB_ITEMS; ++i)
        if (i * BLOCK + tid < n) out[lo + i * BLOCK + tid] = k[i];
}
