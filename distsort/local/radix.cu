// LSD radix sort kernels for 32- and 64-bit unsigned keys (Onesweep style), loaded by radix.py
// through cupy.RawModule; the pass's device code is in onesweep.cuh.
//
// One sort = 1 histogram kernel (all passes' digit counts from one read of the keys), 1 tiny scan
// kernel (digit counts -> first output position of each digit), then one onesweep kernel per
// 8-bit digit pass. Each pass reads every key once and writes it once (~2n moves): the global
// offset of a tile's digits comes from a chained scan with decoupled look-back over the tiles,
// instead of a separate counting sweep per pass (which would be ~3n).
//
// Positions are 32-bit: the driver only sends arrays of fewer than 2^32 keys here.
//
// Ends (in_end, out_ends; null where not used): device words read as a kernel starts, each
// standing, where not 0, for the address that its parameter gives: in_end for the keys and
// the values read, out_ends for the keys and the values written. A sort replayed as a CUDA
// graph (graphs.py) is captured once with its parameters fixed; its first pass and the
// histogram read the caller's keys (and values), and its last pass writes new result arrays,
// through these words, set before each replay: no copy into the graph's buffers and none out
// of them (each moves 2n words).
//
// Digits are those of (key - low), modulo 2^bits of the key: a driver that knows every key lies
// in [low, high] passes low, and sorting the bits of key - low below (high - low).bit_length()
// orders the keys with fewer passes than their own varying bits would need (a range [2^31 - 2^23,
// 2^31 + 2^23] varies in 32 bits but spans 2^24 values: 3 passes, not 4). The keys written out
// are the original keys.

#include "onesweep.cuh"

// Why: one read of the keys (n moves, 16-byte streaming loads) yields the digit histogram of
// every pass, so the passes need no counting sweep of their own. Persistent grid, one block of
// 1024 threads per SM, each thread loading 4 vectors before counting them. Each counter has
// LANES copies, copy l in bank l, so the lanes of a warp add to different banks whatever their
// digits (2 lanes a bank for 64-bit keys, which have twice the passes): with one copy, bank
// conflicts of the shared atomics bound the kernel (ncu). The pass count is a template
// parameter, so the count of a key is straight-line
// code. Dynamic shared memory: PASSES x 256 x LANES x 4 bytes. Pass p's digit is bits
// [begin_bit + 8p, +8) of key - low; the last pass takes every bit up to end_bit, and where
// that is more than 8, its digit is clamped to 255 (the landing sort's clamped last pass).
template <typename K, int PASSES>
__global__ void __launch_bounds__(HIST_BLOCK, 1)
    radix_histogram(const K* __restrict__ keys, u64 n, K low, int begin_bit, int end_bit,
                    int code, u32* __restrict__ counts, const u64* __restrict__ in_end)
{
    if (in_end && *in_end) keys = reinterpret_cast<const K*>(*in_end);
    constexpr int LANES = sizeof(K) == 4 ? 32 : 16;
    constexpr int VEC = 16 / (int)sizeof(K);
    constexpr int NBINS = PASSES * RADIX;
    const RawKeys<K> raw(code ? code | CODE_LOAD : 0);  // it reads the caller's raw keys
    extern __shared__ u32 s_hist[];
    for (int i = threadIdx.x; i < NBINS * LANES; i += blockDim.x) s_hist[i] = 0;
    int shift[PASSES];
    u32 mask[PASSES], at[PASSES];
    const u32 mine = (u32)__cvta_generic_to_shared(s_hist) + 4 * (threadIdx.x % LANES);
#pragma unroll
    for (int p = 0; p < PASSES; ++p) {
        shift[p] = begin_bit + 8 * p;
        const int bits = end_bit - shift[p] < 8 || p == PASSES - 1 ? end_bit - shift[p] : 8;
        mask[p] = bits >= 32 ? 0xffffffffu : (1u << bits) - 1u;
        at[p] = mine + p * RADIX * LANES * 4;
    }
    __syncthreads();
    const u64 nvec = n / VEC;
    constexpr int U = 4;  // vectors loaded before any is counted: more bytes in flight
    const u64 round = (u64)gridDim.x * blockDim.x * U;
    const u64 full = nvec / round * round;
    for (u64 v = (u64)blockIdx.x * blockDim.x * U + threadIdx.x; v < full; v += round) {
        K k[U][VEC];
#pragma unroll
        for (int u = 0; u < U; ++u) load_vec(keys, v + (u64)u * blockDim.x, k[u]);
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
            for (int j = 0; j < VEC; ++j)
                count_key<K, PASSES, LANES>(raw.code(k[u][j]) - low, shift, mask, at);
    }
    for (u64 v = full + (u64)blockIdx.x * blockDim.x + threadIdx.x; v < nvec;
         v += (u64)gridDim.x * blockDim.x) {
        K k[VEC];
        load_vec(keys, v, k);
#pragma unroll
        for (int j = 0; j < VEC; ++j)
            count_key<K, PASSES, LANES>(raw.code(k[j]) - low, shift, mask, at);
    }
    if (blockIdx.x == 0 && threadIdx.x < n - nvec * VEC)
        count_key<K, PASSES, LANES>(raw.code(keys[nvec * VEC + threadIdx.x]) - low, shift, mask,
                                    at);
    __syncthreads();
    flush_copies<LANES>(s_hist, NBINS, counts);
}

// Why: turns each pass's 256 digit counts into the first output position of each digit
// (exclusive scan). One block of 256 threads; reads and writes passes x 1 KB, negligible.
// With `constant` (page-locked host memory, mapped), it also writes there, per pass, whether
// one digit holds every key (the pass can be skipped): the driver reads that word from the host
// once this kernel is done, where a copy from the device would wait behind the large copies
// that other streams have in flight (the out-of-core runs).
// `skip` (device words, or null) gets the same flags, for a pass launched before the host knows
// them (radix_onesweep's skip).
extern "C" __global__ void __launch_bounds__(BLOCK)
    radix_scan(const u32* __restrict__ counts, int passes, u32* __restrict__ bases,
               volatile u32* constant, u32* __restrict__ skip)
{
    __shared__ u32 s_warp[WARPS];
    for (int p = 0; p < passes; ++p) {
        u32 total;
        const u32 count = counts[p * RADIX + threadIdx.x];
        u32 e = block_excl_scan(count, s_warp, &total);
        bases[p * RADIX + threadIdx.x] = e;
        const int whole = __syncthreads_or(count == total);
        if (constant && threadIdx.x == 0)
            constant[p] = whole;
        if (skip && threadIdx.x == 0)
            skip[p] = whole;
    }
}

// Why: one stable 8-bit digit pass that reads each key (and value) once and writes it once.
// Tile = BLOCK x ITEMS keys (key-only passes: 24 per thread for 32-bit keys, 18 for 64-bit;
// passes with values: 18 and 16), loaded warp-striped so each load is one 128-byte line per warp.
// The tile's digit counts are counted (shared atomics) and published before the keys are ranked,
// so successors' look-backs rarely wait; warps then rank their keys with ballots against per-warp
// digit counters in shared memory (stable: items in memory order), the keys are placed in shared
// memory in digit order, and written out so that runs of one digit go to consecutive addresses
// (coalesced). Values follow the same ranks through the same shared buffer. The per-tile latency
// (tile id, loads, look-back) bounds this kernel more than bandwidth does, hence large tiles and
// the early counts.
// VMODE 0: keys only; 1: values read from vals_in (VI) and written as VO; 2: the value is the
// key's input position (argsort's first pass), written as VO. Registers are held to 80 (3 blocks
// per SM), or 128 (2 blocks) with a value wider than the key; larger tiles spill, yet ran faster:
// 18/16 keys per thread (~90 bytes) beat 16/12 (none), and for key-only passes 24/18 (~300
// bytes) beat 18/16, 26 was no better than 24, 28 and 32 slower (bench/local_sort.py --tune).
// Tile descriptors (tile_start, tile_rows; both null for the usual consecutive tiles): tile t
// reads tile_rows[t] <= TILE keys from tile_start[t] on. Tiles cut from pieces that lie apart
// read the pieces in tile order as if they were one array: the landing sort's second pass
// (landing.py) reads every block's run of each digit, digit by digit, with no gather first.
// in_end, out_ends: see Ends above.
// skip (or null): a word radix_scan sets where this pass's digit never varies; then every block
// returns at once, so the driver can queue the first pass before it reads which passes vary,
// and the GPU does not wait for the host in between.
template <typename K, typename VI, typename VO, int VMODE>
__global__ void __launch_bounds__(BLOCK, VMODE == 0                          ? RADIX_KEY_BLOCKS
                                        : (VMODE != 0 && sizeof(VO) > sizeof(K)) ? 2
                                                                                 : 3)
    radix_onesweep(const K* __restrict__ keys_in, K* __restrict__ keys_out,
                   const VI* __restrict__ vals_in, VO* __restrict__ vals_out, u64 n, K low,
                   int shift, int bits, int code, const u32* __restrict__ bases,
                   u32* tile_counter,
                   void* flags, int wide, const u32* __restrict__ tile_start,
                   const u32* __restrict__ tile_rows, const u32* __restrict__ skip,
                   const u64* __restrict__ in_end, const u64* __restrict__ out_ends)
{
    __shared__ OnesweepSmem<K, VO, VMODE> sm;
    if (skip && *skip) return;  // the digit is the same for every key: the pass is not needed
    if (in_end && in_end[0]) keys_in = reinterpret_cast<const K*>(in_end[0]);
    if (VMODE == 1 && in_end && in_end[1]) vals_in = reinterpret_cast<const VI*>(in_end[1]);
    if (out_ends && out_ends[0]) keys_out = reinterpret_cast<K*>(out_ends[0]);
    if (out_ends && out_ends[1]) vals_out = reinterpret_cast<VO*>(out_ends[1]);
    RadixDigit<K, Items<K, VMODE>::value> dig{low, shift, (1u << bits) - 1u, RawKeys<K>(code)};
    onesweep_next(keys_in, keys_out, vals_in, vals_out, n, dig, bases, tile_counter, flags, wide,
                  tile_start, tile_rows, sm);
}
