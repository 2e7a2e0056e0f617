// The checks of --verify and `check` on plain keys (one word an element), each in one pass.
//
// Why: as CuPy operations the checksum took a dozen elementwise passes a piece (16 bytes moved
// per key each) and the order check five, far below what the HBM can deliver. Here every key
// is read once (4 or 8 bytes): each thread
// walks the array grid-stride, adds splitmix64(word) into its sum (a row's hash: check.py) or
// notes the first i with code[i] > code[i + 1], and one atomic per warp combines them.

#include "mix.cuh"

template <typename W>
__global__ void hash_sum(const W* __restrict__ words, long long n, u64* __restrict__ sum)
{
    u64 mine = 0;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        mine += splitmix64((u64)words[i]);
    for (int step = 16; step; step >>= 1)
        mine += __shfl_down_sync(0xffffffffu, mine, step);
    if ((threadIdx.x & 31) == 0) atomicAdd(sum, mine);
}

template <typename W>
__global__ void first_descent(const W* __restrict__ codes, long long n, long long* __restrict__ at)
{
    long long mine = n;  // none
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i + 1 < n;
         i += (long long)gridDim.x * blockDim.x)
        if (codes[i] > codes[i + 1] && i < mine) mine = i;
    for (int step = 16; step; step >>= 1) {
        const long long other = __shfl_down_sync(0xffffffffu, mine, step);
        mine = other < mine ? other : mine;
    }
    if ((threadIdx.x & 31) == 0 && mine < n) atomicMin(at, mine);
}
