// LSD radix sort kernels for 32- and 64-bit unsigned keys (Onesweep style), loaded by radix.py
// through cupy.RawModule. No headers: NVRTC compiles this file as it is.
//
// One sort = 1 histogram kernel (all passes' digit counts from one read of the keys), 1 tiny scan
// kernel (digit counts -> first output position of each digit), then one onesweep kernel per
// digit pass. Each pass reads every key once and writes it once (~2n moves): the global offset of
// a tile's digits comes from a chained scan with decoupled look-back over the tiles, instead of a
// separate counting sweep per pass (which would be ~3n).
//
// The digit width DBITS (7 to 11 bits: RADIX = 2^DBITS bins) is a template parameter of every
// kernel; the driver compiles one module per width and picks the width per sort (radix.py).
//
// Positions are 32-bit: the driver only sends arrays of fewer than 2^32 keys here.
//
// Digits are those of (key - low), modulo 2^bits of the key: a driver that knows every key lies
// in [low, high] passes low, and sorting the bits of key - low below (high - low).bit_length()
// orders the keys with fewer passes than their own varying bits would need (a range [2^31 - 2^23,
// 2^31 + 2^23] varies in 32 bits but spans 2^24 values: 3 passes, not 4). The keys written out
// are the original keys.

typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;

#ifndef ITEMS32
#define ITEMS32 18
#endif
#ifndef ITEMS64
#define ITEMS64 16
#endif

#ifndef RADIX_LOOKBACK_WINDOW
#define RADIX_LOOKBACK_WINDOW 4  // predecessor tiles' flags read at once by the look-back
#endif
#ifndef RADIX_EARLY_COUNTS
#define RADIX_EARLY_COUNTS 1  // publish the tile's digit counts before ranking its keys
#endif

#define BLOCK 256  // threads of the onesweep and scan blocks
#define WARPS (BLOCK / 32)
#define HIST_BLOCK 1024

#define FLAG_AGG 1u     // the tile's own count of this digit
#define FLAG_PREFIX 2u  // count of this digit in this tile and all before it

template <typename K> struct Items { static const int value = ITEMS32; };
template <> struct Items<u64> { static const int value = ITEMS64; };

// Digits of DBITS bits in the onesweep and scan blocks: thread t owns the DPT consecutive digits
// from t * DPT (one each up to 8 bits; with 7-bit digits threads 128-255 own none, with 11-bit
// digits each owns 8) for the scans, the look-back and the flags.
template <int DBITS> struct Digits {
    static constexpr int RADIX = 1 << DBITS;
    static constexpr int DPT = RADIX > BLOCK ? RADIX / BLOCK : 1;
    static __device__ __forceinline__ bool owns(int d) { return RADIX >= BLOCK || d < RADIX; }
};

// Per-warp digit counters of a tile: 32-bit up to 8-bit digits; 16-bit above (they never exceed
// the tile's BLOCK x ITEMS keys), so that 11-bit digits take 32 KB, not 64 KB, of shared memory.
template <bool NARROW> struct Counter { typedef u32 type; };
template <> struct Counter<false> { typedef unsigned short type; };

__device__ __forceinline__ u32 digit_of(u32 k, int shift, u32 mask) { return (k >> shift) & mask; }
__device__ __forceinline__ u32 digit_of(u64 k, int shift, u32 mask)
{
    const u32 lo = (u32)k, hi = (u32)(k >> 32);  // 32-bit shifts: cheaper than a 64-bit one
    return (shift >= 32 ? hi >> (shift - 32) : __funnelshift_r(lo, hi, shift)) & mask;
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

// Count one key's digit of every pass in this thread's copy of the counters.
template <typename K, int MAXP, int RADIX, int LANES>
__device__ __forceinline__ void count_key(K key, int passes, const int (&shift)[MAXP],
                                          const u32 (&mask)[MAXP], u32* mine)
{
#pragma unroll
    for (int p = 0; p < MAXP; ++p)
        if (p < passes) atomicAdd(mine + (p * RADIX + digit_of(key, shift[p], mask[p])) * LANES, 1u);
}

// Why: one read of the keys (n moves, 16-byte streaming loads) yields the digit histogram of
// every pass, so the passes need no counting sweep of their own. Persistent grid, one block of
// 1024 threads per SM, each thread loading 4 vectors before counting them. Each counter has LANES
// copies, copy l in bank l (mod 32), so lanes that share no copy add to different banks whatever
// their digits: with one copy, bank conflicts of the shared atomics bound the kernel (ncu, H100,
// 2^28 uint32, 8-bit digits: 1.15 ms at 84% SM throughput). The driver picks LANES (32 for 32-bit
// keys, 16 for 64-bit ones at 8-bit digits; fewer for wider digits, which have more bins and so
// fewer conflicts) to fit the dynamic shared memory: passes x RADIX x LANES x 4 bytes.
template <typename K, int DBITS, int LANES>
__global__ void __launch_bounds__(HIST_BLOCK, 1)
    radix_histogram(const K* __restrict__ keys, u64 n, K low, int begin_bit, int end_bit,
                    int passes, u32* __restrict__ counts)
{
    constexpr int RADIX = Digits<DBITS>::RADIX;
    constexpr int MAXP = (8 * (int)sizeof(K) + DBITS - 1) / DBITS;  // passes of a whole key
    constexpr int VEC = 16 / (int)sizeof(K);
    extern __shared__ u32 s_hist[];
    const int nbins = passes * RADIX;
    for (int i = threadIdx.x; i < nbins * LANES; i += blockDim.x) s_hist[i] = 0;
    int shift[MAXP];
    u32 mask[MAXP];
#pragma unroll
    for (int p = 0; p < MAXP; ++p) {
        shift[p] = begin_bit + DBITS * p;
        const int bits = end_bit - shift[p] < DBITS ? end_bit - shift[p] : DBITS;
        mask[p] = bits > 0 ? (1u << bits) - 1u : 0u;
    }
    u32* const mine = s_hist + threadIdx.x % LANES;
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
                count_key<K, MAXP, RADIX, LANES>(k[u][j] - low, passes, shift, mask, mine);
    }
    for (u64 v = full + (u64)blockIdx.x * blockDim.x + threadIdx.x; v < nvec;
         v += (u64)gridDim.x * blockDim.x) {
        K k[VEC];
        load_vec(keys, v, k);
#pragma unroll
        for (int j = 0; j < VEC; ++j)
            count_key<K, MAXP, RADIX, LANES>(k[j] - low, passes, shift, mask, mine);
    }
    if (blockIdx.x == 0 && threadIdx.x < n - nvec * VEC)
        count_key<K, MAXP, RADIX, LANES>(keys[nvec * VEC + threadIdx.x] - low, passes, shift, mask, mine);
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

// Exclusive scan over the block of the D consecutive digits each thread owns (Digits<DBITS>):
// the sum of the counts of all digits before the thread's first one. Two __syncthreads.
template <int D>
__device__ __forceinline__ u32 owned_excl_base(const u32 (&cnt)[D], u32* s_warp)
{
    u32 sum = 0;
#pragma unroll
    for (int j = 0; j < D; ++j) sum += cnt[j];
    u32 total;
    return block_excl_scan(sum, s_warp, &total);
}

// Why: turns each pass's RADIX digit counts into the first output position of each digit
// (exclusive scan). One block of 256 threads; reads and writes passes x RADIX x 4 bytes (at most
// 8 KB a pass), negligible.
template <int DBITS>
__global__ void __launch_bounds__(BLOCK)
    radix_scan(const u32* __restrict__ counts, int passes, u32* __restrict__ bases)
{
    typedef Digits<DBITS> Dg;
    __shared__ u32 s_warp[WARPS];
    const int d0 = threadIdx.x * Dg::DPT;
    for (int p = 0; p < passes; ++p) {
        u32 cnt[Dg::DPT];
#pragma unroll
        for (int j = 0; j < Dg::DPT; ++j) cnt[j] = Dg::owns(d0 + j) ? counts[p * Dg::RADIX + d0 + j] : 0u;
        u32 run = owned_excl_base(cnt, s_warp);
#pragma unroll
        for (int j = 0; j < Dg::DPT; ++j) {
            if (Dg::owns(d0 + j)) bases[p * Dg::RADIX + d0 + j] = run;
            run += cnt[j];
        }
        __syncthreads();
    }
}

// Look-back flags: one word per (tile, digit), status in the top 2 bits, count below. The value
// and status travel in one aligned word, so a volatile load sees both or neither: no fence needed.
// 32-bit words hold counts below 2^30; the driver asks for 64-bit words (wide) above that.
template <int RADIX>
__device__ __forceinline__ void publish(void* flags, int wide, u32 tile, int dig, u32 status,
                                        u32 value)
{
    const u64 at = (u64)tile * RADIX + dig;
    if (wide)
        ((volatile u64*)flags)[at] = ((u64)status << 62) | value;
    else
        ((volatile u32*)flags)[at] = (status << 30) | value;
}

template <int RADIX>
__device__ __forceinline__ void load_flag(const void* flags, int wide, int j, int dig,
                                          u32& status, u32& value)
{
    if (j < 0) {  // before tile 0: nothing
        status = FLAG_PREFIX;
        value = 0;
    } else if (wide) {
        const u64 x = ((const volatile u64*)flags)[(u64)j * RADIX + dig];
        status = (u32)(x >> 62);
        value = (u32)x;
    } else {
        const u32 x = ((const volatile u32*)flags)[(u64)j * RADIX + dig];
        status = x >> 30;
        value = x & 0x3fffffffu;
    }
}

// Sum each owned digit's counts over the tiles before `tile`, walking back until an inclusive
// prefix. A round loads W predecessors' flags of every digit still open (W x D independent loads,
// at least RADIX_LOOKBACK_WINDOW: one L2 round trip), then consumes each digit's in order up to
// the first one not yet published, where its next round starts. Digits the thread does not own
// are never open. Safe to spin: tile ids come from an atomic counter, so every earlier tile's
// block is running or done, and it publishes its aggregates without waiting on anyone.
template <int DBITS>
__device__ __forceinline__ void look_back(const void* flags, int wide, u32 tile, int d0,
                                          u32 (&sum)[Digits<DBITS>::DPT])
{
    typedef Digits<DBITS> Dg;
    constexpr int D = Dg::DPT;
    constexpr int W = RADIX_LOOKBACK_WINDOW / D > 1 ? RADIX_LOOKBACK_WINDOW / D : 1;
    int j[D];  // tiles are fewer than 2^31
    u32 open = 0;
#pragma unroll
    for (int e = 0; e < D; ++e) {
        sum[e] = 0;
        j[e] = (int)tile - 1;
        if (Dg::owns(d0 + e)) open |= 1u << e;
    }
    while (open) {
        u32 status[D][W], value[D][W];
#pragma unroll
        for (int e = 0; e < D; ++e)
#pragma unroll
            for (int w = 0; w < W; ++w)
                if (open >> e & 1u)
                    load_flag<Dg::RADIX>(flags, wide, j[e] - w, d0 + e, status[e][w], value[e][w]);
#pragma unroll
        for (int e = 0; e < D; ++e) {
            bool run = open >> e & 1u;
#pragma unroll
            for (int w = 0; w < W; ++w) {
                if (run && status[e][w] != 0) {
                    sum[e] += value[e][w];
                    --j[e];
                    if (status[e][w] == FLAG_PREFIX) {
                        open &= ~(1u << e);
                        run = false;
                    }
                } else {
                    run = false;
                }
            }
        }
    }
}

// Lanes of the warp whose digit equals this lane's, from one ballot per digit bit (NBITS = DBITS
// + 1 in a partial tile, where absent keys carry digit RADIX). __match_any_sync does the same in one
// instruction but is slow: the pass took 2.7 ms with it, 1.9 ms with ballots (ncu, H100, 2^28
// uint32 keys, other changes alongside).
template <int NBITS>
__device__ __forceinline__ u32 match_peers(u32 d)
{
    u32 peers = 0xffffffffu;
#pragma unroll
    for (int b = 0; b < NBITS; ++b) {
        u32 vote;
        asm("{\n\t.reg .pred p;\n\t.reg .b32 t;\n\t"
            "and.b32 t, %1, %2;\n\tsetp.ne.u32 p, t, 0;\n\t"
            "vote.sync.ballot.b32 %0, p, 0xffffffff;\n\t@!p not.b32 %0, %0;\n\t}"
            : "=r"(vote)
            : "r"(d), "r"(1u << b));
        peers &= vote;
    }
    return peers;
}

// Shared memory of a onesweep block, dynamic (over 48 KB from 10-bit digits on): the driver
// passes its size (radix.py, _onesweep_smem; the kernel traps if given less). 8-bit digits, 32-bit
// keys: 28.7 KB; 11-bit digits: 59.4 KB (3 blocks per SM still fit), 73.8 KB with 64-bit keys
// and values (3 fit in 228 KB), 77.9 KB with 32-bit keys and 64-bit values (2 blocks).
template <typename K, typename VO, int VMODE, int DBITS>
struct OnesweepSmem {
    static constexpr int ITEMS = Items<K>::value;
    static constexpr int RADIX = Digits<DBITS>::RADIX;
    static constexpr int SB = (VMODE != 0 && sizeof(VO) > sizeof(K)) ? (int)sizeof(VO) : (int)sizeof(K);
    typedef typename Counter<DBITS <= 8>::type C;
    __align__(16) unsigned char buf[BLOCK * ITEMS * SB];  // the tile's keys, then its values
    C whist[WARPS][RADIX];  // per-warp digit counts, then each warp's first rank per digit
    // the tile's digit counts (early counts), then the output position of its first key of each
    // digit, minus its rank: each digit's entry is only touched by its owner until the write-out
    u32 off[RADIX];
    u32 warp_sums[WARPS];
    u32 tile;
};

// Zero `bytes` (a multiple of 16) of 16-byte aligned shared memory with the whole block.
__device__ __forceinline__ void zero_shared(void* p, int bytes)
{
    uint4 z;
    z.x = z.y = z.z = z.w = 0u;
    for (int i = threadIdx.x; i < bytes / 16; i += blockDim.x) reinterpret_cast<uint4*>(p)[i] = z;
}

// The work on one tile; FULL tiles (all but the last) skip every bounds check.
template <bool FULL, typename K, typename VI, typename VO, int VMODE, int DBITS>
__device__ __forceinline__ void onesweep_tile(const K* __restrict__ keys_in, K* __restrict__ keys_out,
                                              const VI* __restrict__ vals_in, VO* __restrict__ vals_out,
                                              u32 tile, u32 tile_n, K low, int shift, u32 mask,
                                              const u32* __restrict__ bases, void* flags, int wide,
                                              OnesweepSmem<K, VO, VMODE, DBITS>& sm)
{
    typedef Digits<DBITS> Dg;
    constexpr int RADIX = Dg::RADIX, DPT = Dg::DPT;
    constexpr int ITEMS = Items<K>::value;
    constexpr int TILE = BLOCK * ITEMS;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int d0 = tid * DPT;  // this thread's first owned digit
    const u64 tile_base = (u64)tile * TILE;
    const u32 first = warp * 32 * ITEMS + lane;  // this thread's first item, within the tile
    K* s_keys = reinterpret_cast<K*>(sm.buf);
    VO* s_vals = reinterpret_cast<VO*>(sm.buf);

    // Digits are those of key - low. 64-bit keys are rebased as they are loaded and restored as
    // they are stored; 32-bit keys subtract low where a digit is taken. Each spills least that way
    // (ptxas -v, sm_90: the other way round, 64-bit keys spilled 2-10x more, 32-bit ones ~1.5x).
    constexpr bool REBASED = sizeof(K) == 8;
    const K on_load = REBASED ? low : (K)0, at_digit = REBASED ? (K)0 : low;
    K k[ITEMS];
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
        if (FULL || first + 32 * i < tile_n) k[i] = keys_in[tile_base + first + 32 * i] - on_load;

    if constexpr (RADIX_EARLY_COUNTS) {  // successors' look-backs need not wait for our ranking
#pragma unroll
        for (int i = 0; i < ITEMS; ++i)
            if (FULL || first + 32 * i < tile_n) atomicAdd(&sm.off[digit_of(k[i] - at_digit, shift, mask)], 1u);
        __syncthreads();
#pragma unroll
        for (int j = 0; j < DPT; ++j)
            if (Dg::owns(d0 + j))
                publish<RADIX>(flags, wide, tile, d0 + j, tile == 0 ? FLAG_PREFIX : FLAG_AGG, sm.off[d0 + j]);
    }

    // Rank within the warp: lanes with equal digits share one counter update by their leader.
    const u32 lt_mask = (1u << lane) - 1u;
    u32 r[ITEMS];
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const bool valid = FULL || first + 32 * i < tile_n;
        const u32 d = valid ? digit_of(k[i] - at_digit, shift, mask) : (u32)RADIX;
        const u32 peers = match_peers<FULL ? DBITS : DBITS + 1>(d);
        const int leader = 31 - __clz(peers);
        u32 before = 0;
        if (lane == leader && valid) {
            before = sm.whist[warp][d];
            sm.whist[warp][d] = before + __popc(peers);
        }
        r[i] = __shfl_sync(0xffffffffu, before, leader) + __popc(peers & lt_mask);
        __syncwarp();
    }
    __syncthreads();

    // Each thread, for its digits: warp counts -> per-warp exclusive offsets and the tile's count.
    u32 cnt[DPT];
#pragma unroll
    for (int j = 0; j < DPT; ++j) {
        cnt[j] = 0;
        if (Dg::owns(d0 + j)) {
#pragma unroll
            for (int w = 0; w < WARPS; ++w) {
                const u32 c = sm.whist[w][d0 + j];
                sm.whist[w][d0 + j] = cnt[j];
                cnt[j] += c;
            }
        }
    }
    if constexpr (!RADIX_EARLY_COUNTS) {
#pragma unroll
        for (int j = 0; j < DPT; ++j)
            if (Dg::owns(d0 + j))
                publish<RADIX>(flags, wide, tile, d0 + j, tile == 0 ? FLAG_PREFIX : FLAG_AGG, cnt[j]);
    }
    u32 excl = owned_excl_base(cnt, sm.warp_sums);
#pragma unroll
    for (int j = 0; j < DPT; ++j) {
        if (Dg::owns(d0 + j)) {
#pragma unroll
            for (int w = 0; w < WARPS; ++w) sm.whist[w][d0 + j] += excl;  // one read per key below
            sm.off[d0 + j] = bases[d0 + j] - excl;  // wraps below zero; adding the index fixes it
        }
        excl += cnt[j];
    }
    __syncthreads();  // from here whist[0][d] holds the tile's keys before digit d (excl), read-only

    // Keys into shared memory in (digit, input order) order.
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        if (FULL || first + 32 * i < tile_n) {
            r[i] += sm.whist[warp][digit_of(k[i] - at_digit, shift, mask)];
            s_keys[r[i]] = k[i];
        }
    }
    VO v[VMODE != 0 ? ITEMS : 1];
    if constexpr (VMODE == 1) {
#pragma unroll
        for (int i = 0; i < ITEMS; ++i)
            if (FULL || first + 32 * i < tile_n) v[i] = (VO)vals_in[tile_base + first + 32 * i];
    } else if constexpr (VMODE == 2) {
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) v[i] = (VO)(tile_base + first + 32 * i);
    }

    if (tile != 0) {
        u32 prefix[DPT];
        look_back<DBITS>(flags, wide, tile, d0, prefix);
#pragma unroll
        for (int j = 0; j < DPT; ++j) {
            const int d = d0 + j;
            if (Dg::owns(d)) {  // the tile's count of d from the excl table: no register held
                const u32 next = d + 1 < RADIX ? (u32)sm.whist[0][d + 1] : tile_n;
                publish<RADIX>(flags, wide, tile, d, FLAG_PREFIX, prefix[j] + next - sm.whist[0][d]);
                sm.off[d] += prefix[j];
            }
        }
    }
    __syncthreads();

    u32 od[VMODE != 0 ? ITEMS : 1];
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
        const u32 idx = j * BLOCK + tid;
        if (FULL || idx < tile_n) {
            const K key = s_keys[idx];
            const u32 o = sm.off[digit_of(key - at_digit, shift, mask)] + idx;
            keys_out[o] = key + on_load;
            if constexpr (VMODE != 0) od[j] = o;
        }
    }
    if constexpr (VMODE != 0) {
        __syncthreads();  // every key read back before values overwrite the buffer
#pragma unroll
        for (int i = 0; i < ITEMS; ++i)
            if (FULL || first + 32 * i < tile_n) s_vals[r[i]] = v[i];
        __syncthreads();
#pragma unroll
        for (int j = 0; j < ITEMS; ++j)
            if (FULL || j * BLOCK + tid < tile_n) vals_out[od[j]] = s_vals[j * BLOCK + tid];
    }
}

// Why: one stable DBITS-bit digit pass that reads each key (and value) once and writes it once
// (2n moves; a sort of b bits takes ceil(b / DBITS) passes, so wider digits mean fewer moves).
// Tile = BLOCK x ITEMS keys (4608 for 32-bit keys, 4096 for 64-bit: 18 or 16 per thread, loaded
// warp-striped so each load is one 128-byte line per warp). The tile's digit counts are counted
// (shared atomics) and published before the keys are ranked, so successors' look-backs rarely wait;
// warps then rank their keys with DBITS ballots each against per-warp digit counters in shared
// memory (stable: items in memory order), the keys are placed in shared memory in digit order, and
// written out so that runs of one digit go to consecutive addresses (coalesced). Values follow the
// same ranks through the same shared buffer. The per-tile latency (tile id, loads, look-back)
// bounds this kernel more than bandwidth does, hence large tiles and the early counts.
// What wider digits cost per tile: RADIX look-back flags published twice and read (8 KB at 11
// bits, 4 bytes each, against the tile's 18 KB of 32-bit keys read and written: flags are no longer
// negligible, nor is the memset that clears them), more ballots per key, and shorter runs of one
// digit (4608 / 2048 = 2.25 keys a digit at 11 bits) so that writes coalesce less.
// VMODE 0: keys only; 1: values read from vals_in (VI) and written as VO; 2: the value is the
// key's input position (argsort's first pass), written as VO. Registers are held to 80 (3 blocks
// per SM), or 128 (2 blocks) with a value wider than the key; at 18/16 keys per thread that spills
// up to ~100 bytes, yet ran faster than 16/12 without spills (bench/local_sort.py --tune, H100,
// 8-bit digits).
template <typename K, typename VI, typename VO, int VMODE, int DBITS>
__global__ void __launch_bounds__(BLOCK, (VMODE != 0 && sizeof(VO) > sizeof(K)) ? 2 : 3)
    radix_onesweep(const K* __restrict__ keys_in, K* __restrict__ keys_out,
                   const VI* __restrict__ vals_in, VO* __restrict__ vals_out, u64 n, K low,
                   int shift, int bits, const u32* __restrict__ bases, u32* tile_counter,
                   void* flags, int wide)
{
    typedef OnesweepSmem<K, VO, VMODE, DBITS> Smem;
    constexpr int TILE = BLOCK * Items<K>::value;
    extern __shared__ __align__(16) unsigned char onesweep_smem[];
    Smem& sm = *reinterpret_cast<Smem*>(onesweep_smem);
    if (threadIdx.x == 0) {
        u32 given;
        asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(given));
        if (given < sizeof(Smem)) __trap();  // the driver's size (radix.py) is out of step
        sm.tile = atomicAdd(tile_counter, 1u);
    }
    zero_shared(sm.whist, sizeof(sm.whist));
    zero_shared(sm.off, sizeof(sm.off));
    __syncthreads();
    const u32 tile = sm.tile;
    const u64 left = n - (u64)tile * TILE;
    const u32 mask = (1u << bits) - 1u;
    if (left >= (u64)TILE)
        onesweep_tile<true>(keys_in, keys_out, vals_in, vals_out, tile, (u32)TILE, low, shift,
                            mask, bases, flags, wide, sm);
    else
        onesweep_tile<false>(keys_in, keys_out, vals_in, vals_out, tile, (u32)left, low, shift,
                             mask, bases, flags, wide, sm);
}
