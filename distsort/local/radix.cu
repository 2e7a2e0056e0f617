// LSD radix sort kernels for 32- and 64-bit unsigned keys (Onesweep style), loaded by radix.py
// through cupy.RawModule. No headers: NVRTC compiles this file as it is.
//
// One sort = 1 histogram kernel (all passes' digit counts from one read of the keys), 1 tiny scan
// kernel (digit counts -> first output position of each digit), then one onesweep kernel per
// 8-bit digit pass. Each pass reads every key once and writes it once (~2n moves): the global
// offset of a tile's digits comes from a chained scan with decoupled look-back over the tiles,
// instead of a separate counting sweep per pass (which would be ~3n).
//
// Positions are 32-bit: the driver only sends arrays of fewer than 2^32 keys here.

typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;

#ifndef ITEMS32
#define ITEMS32 16
#endif
#ifndef ITEMS64
#define ITEMS64 12
#endif

#define RADIX 256
#define BLOCK 256  // one thread per digit in the look-back and the scans
#define WARPS (BLOCK / 32)
#define HIST_BLOCK 1024

#define FLAG_AGG 1u     // the tile's own count of this digit
#define FLAG_PREFIX 2u  // count of this digit in this tile and all before it

template <typename K> struct Items { static const int value = ITEMS32; };
template <> struct Items<u64> { static const int value = ITEMS64; };

__device__ __forceinline__ u32 digit_of(u32 k, int shift, u32 mask) { return (k >> shift) & mask; }
__device__ __forceinline__ u32 digit_of(u64 k, int shift, u32 mask)
{
    return (u32)(k >> shift) & mask;
}

// 16-byte vector load of 4 (u32) or 2 (u64) keys.
__device__ __forceinline__ void load_vec(const u32* p, u64 v, u32 (&k)[4])
{
    uint4 q = __ldcs(reinterpret_cast<const uint4*>(p) + v);
    k[0] = q.x; k[1] = q.y; k[2] = q.z; k[3] = q.w;
}
__device__ __forceinline__ void load_vec(const u64* p, u64 v, u64 (&k)[2])
{
    ulonglong2 q = __ldcs(reinterpret_cast<const ulonglong2*>(p) + v);
    k[0] = q.x; k[1] = q.y;
}

// Why: one read of the keys (n moves, 16-byte streaming loads) yields the digit histogram of
// every pass, so the passes need no counting sweep of their own. Persistent grid, one block of
// 1024 threads per SM. Each counter has LANES copies, copy l in bank l, so the lanes of a warp add
// to different banks whatever their digits (2 lanes a bank for 64-bit keys, which have twice the
// passes): with one copy, bank conflicts of the shared atomics bound the kernel (ncu, H100, 2^28
// uint32: 1.15 ms at 84% SM throughput). Dynamic shared memory: passes x 256 x LANES x 4 bytes.
template <typename K>
__global__ void __launch_bounds__(HIST_BLOCK, 1)
    radix_histogram(const K* __restrict__ keys, u64 n, int begin_bit, int end_bit, int passes,
                    u32* __restrict__ counts)
{
    constexpr int MAXP = (int)sizeof(K);  // 8-bit digits: at most one pass per key byte
    constexpr int LANES = sizeof(K) == 4 ? 32 : 16;
    constexpr int VEC = 16 / (int)sizeof(K);
    extern __shared__ u32 s_hist[];
    const int nbins = passes * RADIX;
    for (int i = threadIdx.x; i < nbins * LANES; i += blockDim.x) s_hist[i] = 0;
    int shift[MAXP];
    u32 mask[MAXP];
#pragma unroll
    for (int p = 0; p < MAXP; ++p) {
        shift[p] = begin_bit + 8 * p;
        const int bits = end_bit - shift[p] < 8 ? end_bit - shift[p] : 8;
        mask[p] = bits > 0 ? (1u << bits) - 1u : 0u;
    }
    u32* const mine = s_hist + threadIdx.x % LANES;
    __syncthreads();
    const u64 nvec = n / VEC;
    const u64 stride = (u64)gridDim.x * blockDim.x;
    for (u64 v = (u64)blockIdx.x * blockDim.x + threadIdx.x; v < nvec; v += stride) {
        K k[VEC];
        load_vec(keys, v, k);
#pragma unroll
        for (int j = 0; j < VEC; ++j)
#pragma unroll
            for (int p = 0; p < MAXP; ++p)
                if (p < passes)
                    atomicAdd(mine + (p * RADIX + digit_of(k[j], shift[p], mask[p])) * LANES, 1u);
    }
    if (blockIdx.x == 0 && threadIdx.x < n - nvec * VEC) {
        const K key = keys[nvec * VEC + threadIdx.x];
#pragma unroll
        for (int p = 0; p < MAXP; ++p)
            if (p < passes)
                atomicAdd(mine + (p * RADIX + digit_of(key, shift[p], mask[p])) * LANES, 1u);
    }
    __syncthreads();
    for (int bin = threadIdx.x; bin < nbins; bin += blockDim.x) {
        u32 sum = 0;
        for (int l = 0; l < LANES; ++l) sum += s_hist[bin * LANES + (l + bin) % LANES];
        if (sum) atomicAdd(&counts[bin], sum);
    }
}

// Exclusive scan of one value per thread over a block of BLOCK threads; *total gets the sum.
// Contains two __syncthreads; s_warp has WARPS entries.
__device__ __forceinline__ u32 block_excl_scan(u32 v, u32* s_warp, u32* total)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    u32 x = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        u32 y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    if (lane == 31) s_warp[warp] = x;
    __syncthreads();
    if (warp == 0) {
        u32 w = lane < WARPS ? s_warp[lane] : 0u;
#pragma unroll
        for (int o = 1; o < WARPS; o <<= 1) {
            u32 y = __shfl_up_sync(0xffffffffu, w, o);
            if (lane >= o) w += y;
        }
        if (lane < WARPS) s_warp[lane] = w;
    }
    __syncthreads();
    *total = s_warp[WARPS - 1];
    return (warp ? s_warp[warp - 1] : 0u) + x - v;
}

// Why: turns each pass's 256 digit counts into the first output position of each digit
// (exclusive scan). One block of 256 threads; reads and writes passes x 1 KB, negligible.
extern "C" __global__ void __launch_bounds__(BLOCK)
    radix_scan(const u32* __restrict__ counts, int passes, u32* __restrict__ bases)
{
    __shared__ u32 s_warp[WARPS];
    for (int p = 0; p < passes; ++p) {
        u32 total;
        u32 e = block_excl_scan(counts[p * RADIX + threadIdx.x], s_warp, &total);
        bases[p * RADIX + threadIdx.x] = e;
        __syncthreads();
    }
}

// Look-back flags: one word per (tile, digit), status in the top 2 bits, count below. The value
// and status travel in one aligned word, so a volatile load sees both or neither: no fence needed.
// 32-bit words hold counts below 2^30; the driver asks for 64-bit words (wide) above that.
__device__ __forceinline__ void publish(void* flags, int wide, u32 tile, int dig, u32 status,
                                        u32 value)
{
    const u64 at = (u64)tile * RADIX + dig;
    if (wide)
        ((volatile u64*)flags)[at] = ((u64)status << 62) | value;
    else
        ((volatile u32*)flags)[at] = (status << 30) | value;
}

// Sum this digit's counts over the tiles before `tile`, walking back until an inclusive prefix.
// Safe to spin: tile ids come from an atomic counter, so every earlier tile's block is running or
// done, and it publishes its aggregate without waiting on anyone.
__device__ __forceinline__ u32 look_back(const void* flags, int wide, u32 tile, int dig)
{
    u32 sum = 0;
    long long j = (long long)tile - 1;
    while (j >= 0) {
        u32 status, value;
        if (wide) {
            u64 x = ((const volatile u64*)flags)[(u64)j * RADIX + dig];
            status = (u32)(x >> 62);
            value = (u32)x;
        } else {
            u32 x = ((const volatile u32*)flags)[(u64)j * RADIX + dig];
            status = x >> 30;
            value = x & 0x3fffffffu;
        }
        if (status == 0) continue;  // predecessor has not published yet
        sum += value;
        if (status == FLAG_PREFIX) break;
        --j;
    }
    return sum;
}

// Why: one stable 8-bit digit pass that reads each key (and value) once and writes it once.
// Tile = BLOCK x ITEMS keys (4096 for 32-bit keys, 3072 for 64-bit; 16 or 12 per thread, loaded
// warp-striped so each load is one 128-byte line per warp). Warps rank their keys with ballots
// against per-warp digit counters in shared memory (stable: items in memory order), the tile's digit counts are published at once for the look-back, the keys are placed in
// shared memory in digit order, and written out so that runs of one digit go to consecutive
// addresses (coalesced). Values follow the same ranks through the same shared buffer.
// VMODE 0: keys only; 1: values read from vals_in (VI) and written as VO; 2: the value is the
// key's input position (argsort's first pass), written as VO. Registers are held to 80 (3 blocks
// per SM; uint32 pairs spill 16 bytes there), or 128 (2 blocks) with a value wider than the key:
// about what each takes unbounded (ptxas -v, sm_90).
template <typename K, typename VI, typename VO, int VMODE>
__global__ void __launch_bounds__(BLOCK, (VMODE != 0 && sizeof(VO) > sizeof(K)) ? 2 : 3)
    radix_onesweep(const K* __restrict__ keys_in, K* __restrict__ keys_out,
                   const VI* __restrict__ vals_in, VO* __restrict__ vals_out, u64 n, int shift,
                   int bits, const u32* __restrict__ bases, u32* tile_counter, void* flags,
                   int wide)
{
    constexpr int ITEMS = Items<K>::value;
    constexpr int TILE = BLOCK * ITEMS;
    constexpr int SB = (VMODE != 0 && sizeof(VO) > sizeof(K)) ? (int)sizeof(VO) : (int)sizeof(K);
    __shared__ __align__(16) unsigned char s_buf[TILE * SB];
    __shared__ u32 s_whist[WARPS][RADIX];
    __shared__ u32 s_off[RADIX];
    __shared__ u32 s_warp[WARPS];
    __shared__ u32 s_tile;
    K* s_keys = reinterpret_cast<K*>(s_buf);
    VO* s_vals = reinterpret_cast<VO*>(s_buf);

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    if (tid == 0) s_tile = atomicAdd(tile_counter, 1u);
#pragma unroll
    for (int w = 0; w < WARPS; ++w) s_whist[w][tid] = 0;
    __syncthreads();
    const u32 tile = s_tile;
    const u64 tile_base = (u64)tile * TILE;
    const u32 tile_n = n - tile_base < (u64)TILE ? (u32)(n - tile_base) : (u32)TILE;
    const u32 mask = (1u << bits) - 1u;
    const u64 wbase = tile_base + (u64)warp * 32 * ITEMS + lane;

    K k[ITEMS];
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const u64 pos = wbase + 32 * i;
        k[i] = pos < n ? keys_in[pos] : (K)0;
    }
    // Digit of item i, RADIX for a position past the end; recomputed where needed (fewer registers).
    auto dig = [&](int i) -> u32 {
        return wbase + 32 * i < n ? digit_of(k[i], shift, mask) : (u32)RADIX;
    };

    // Rank within the warp: lanes with equal digits share one counter update by their leader.
    // Peers are found with 8 ballots (one per digit bit), not __match_any_sync, which is far slower
    // (ncu, H100: passes compute-bound at 75% SM throughput with it). In a partial tile a ninth
    // ballot keeps the absent keys (digit RADIX) apart from digit 0.
    const u32 lt_mask = (1u << lane) - 1u;
    const bool partial = tile_n < (u32)TILE;
    u32 r[ITEMS];
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const u32 d = dig(i);
        u32 peers = 0xffffffffu;
#pragma unroll
        for (int b = 0; b < 8; ++b) {
            const bool bit = (d >> b) & 1u;
            const u32 vote = __ballot_sync(0xffffffffu, bit);
            peers &= bit ? vote : ~vote;
        }
        if (partial) {
            const bool absent = d >= RADIX;
            const u32 vote = __ballot_sync(0xffffffffu, absent);
            peers &= absent ? vote : ~vote;
        }
        const int leader = __ffs(peers) - 1;
        u32 before = 0;
        if (lane == leader && d < RADIX) {
            before = s_whist[warp][d];
            s_whist[warp][d] = before + __popc(peers);
        }
        r[i] = __shfl_sync(0xffffffffu, before, leader) + __popc(peers & lt_mask);
        __syncwarp();
    }
    __syncthreads();

    // Thread tid owns digit tid: warp counts -> per-warp exclusive offsets and the tile's count.
    u32 cnt = 0;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) {
        const u32 c = s_whist[w][tid];
        s_whist[w][tid] = cnt;
        cnt += c;
    }
    publish(flags, wide, tile, tid, tile == 0 ? FLAG_PREFIX : FLAG_AGG, cnt);
    u32 total;
    const u32 excl = block_excl_scan(cnt, s_warp, &total);
#pragma unroll
    for (int w = 0; w < WARPS; ++w) s_whist[w][tid] += excl;  // one table read per key below
    __syncthreads();

    // Keys into shared memory in (digit, input order) order.
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const u32 d = dig(i);
        if (d < RADIX) {
            r[i] += s_whist[warp][d];
            s_keys[r[i]] = k[i];
        }
    }
    VO v[VMODE != 0 ? ITEMS : 1];
    if constexpr (VMODE == 1) {
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            const u64 pos = wbase + 32 * i;
            v[i] = pos < n ? (VO)vals_in[pos] : (VO)0;
        }
    } else if constexpr (VMODE == 2) {
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) v[i] = (VO)(wbase + 32 * i);
    }

    const u32 prefix = tile == 0 ? 0u : look_back(flags, wide, tile, tid);
    if (tile != 0) publish(flags, wide, tile, tid, FLAG_PREFIX, prefix + cnt);
    s_off[tid] = bases[tid] + prefix - excl;  // wraps below zero; adding the index fixes it
    __syncthreads();

    u32 od[ITEMS];
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
        const u32 idx = j * BLOCK + tid;
        if (idx < tile_n) {
            const K key = s_keys[idx];
            od[j] = digit_of(key, shift, mask);
            keys_out[s_off[od[j]] + idx] = key;
        }
    }
    if constexpr (VMODE != 0) {
        __syncthreads();  // every key read back before values overwrite the buffer
#pragma unroll
        for (int i = 0; i < ITEMS; ++i)
            if (wbase + 32 * i < n) s_vals[r[i]] = v[i];
        __syncthreads();
#pragma unroll
        for (int j = 0; j < ITEMS; ++j) {
            const u32 idx = j * BLOCK + tid;
            if (idx < tile_n) vals_out[s_off[od[j]] + idx] = s_vals[idx];
        }
    }
}
