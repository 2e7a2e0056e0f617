// The onesweep digit pass's device code, included by the kernels that run passes: the tile sizes,
// the digit policies, the decoupled look-back and the work on one tile. radix.cu's passes and
// digit_partition.cu's scatter by bucket both run onesweep_next; why each is shaped so is said
// where it is defined.
#include "warp.cuh"
#include "../keycode.cuh"

#ifndef RADIX_KEY_CODES
#define RADIX_KEY_CODES 0  // 1: the build whose passes sort signed and float keys by their codes
#endif
#ifndef RADIX_FIXED_CODE
#define RADIX_FIXED_CODE -1  // a coded build's one code (its low 4 bits), or -1: the kernels'
#endif

// The coder of raw keys that a sort orders by their codes (code: kind | descending << 2 |
// canonical << 3, as keys.NumericCodec.code), with which ends of a kernel meet raw keys:
// CODE_LOAD, it reads raw keys (and codes them), CODE_STORE, it writes raw keys (their codes'
// bits). A sort's first pass reads raw keys and its last writes them; the keys between stay
// codes, so the passes between run the plain build (radix.py): a pass that coded both ways
// took ~1.7x a plain one's time at 2^20 keys (ncu). Code 0 (keys that are codes already) and
// the build without RADIX_KEY_CODES leave keys as they are. A build of one code
// (RADIX_FIXED_CODE; radix.FIXED_CODES: the common ones) folds the coder's words into its
// instructions: the passes hold no registers for them, and they are short of registers.
#define CODE_LOAD 16
#define CODE_STORE 32
template <typename K> struct RawKeys {
    KeyCoder<K> coder;
    bool in, out;
    __device__ __forceinline__ RawKeys(int code)
        : coder(kind(code) & 3, (kind(code) >> 2) & 1, (kind(code) >> 3) & 1),
          in(RADIX_KEY_CODES && (code & CODE_LOAD)), out(RADIX_KEY_CODES && (code & CODE_STORE)) {}
    __device__ __forceinline__ static int kind(int code)
    {
        return RADIX_FIXED_CODE >= 0 ? RADIX_FIXED_CODE : code;
    }
    __device__ __forceinline__ K code(K raw) const { return in ? coder.code(raw) : raw; }
    __device__ __forceinline__ K bits(K kept) const { return out ? coder.bits(kept) : kept; }
};


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

#define RADIX 256
#define BLOCK 256  // one thread per digit in the look-back and the scans
#define WARPS (BLOCK / 32)
#define HIST_BLOCK 1024

#define FLAG_AGG 1u     // the tile's own count of this digit
#define FLAG_PREFIX 2u  // count of this digit in this tile and all before it

#ifndef RADIX_KEY_BLOCKS
#define RADIX_KEY_BLOCKS 3  // blocks per SM that key-only passes' registers leave room for
#endif

#ifndef ITEMS32_KEYS
#define ITEMS32_KEYS ITEMS32  // keys per thread of key-only passes (no value in shared memory)
#endif
#ifndef ITEMS64_KEYS
#define ITEMS64_KEYS ITEMS64
#endif

template <typename K, int VMODE> struct Items {
    static const int value = VMODE == 0 ? ITEMS32_KEYS : ITEMS32;
};
template <int VMODE> struct Items<u64, VMODE> {
    static const int value = VMODE == 0 ? ITEMS64_KEYS : ITEMS64;
};

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

// One shared-memory counter += 1, at a 32-bit shared address (no result: a reduction).
__device__ __forceinline__ void shared_inc(u32 addr)
{
    asm volatile("red.shared.add.u32 [%0], 1;" ::"r"(addr) : "memory");
}

// A block's share of a grid's histogram: each of `bins` counters, held in LANES copies (copy l
// of bin b at b * LANES + l, in bank l), summed and added to counts[bin]; each thread starts at
// its bin's own copy, so a warp's lanes read different banks.
template <int LANES>
__device__ __forceinline__ void flush_copies(const u32* hist, int bins, u32* counts)
{
    for (int bin = threadIdx.x; bin < bins; bin += blockDim.x) {
        u32 sum = 0;
        for (int l = 0; l < LANES; ++l) sum += hist[bin * LANES + (l + bin) % LANES];
        if (sum) atomicAdd(&counts[bin], sum);
    }
}

// Count one key's digit of every pass: at[p] is the shared address of this lane's copy of pass
// p's digit 0, the copies of one digit 4 * LANES bytes apart. Per pass: shift, mask, one add for
// the address, the reduction. (With index arithmetic and a run-time pass count it took 33
// instructions per uint32 key over 3 passes and the kernel was issue-bound; now 13 in the PTX,
// and faster.)
// The last pass's digit is clamped to 255 (see radix_histogram).
template <typename K, int PASSES, int LANES>
__device__ __forceinline__ void count_key(K key, const int (&shift)[PASSES],
                                          const u32 (&mask)[PASSES], const u32 (&at)[PASSES])
{
#pragma unroll
    for (int p = 0; p < PASSES; ++p) {
        const u32 d = digit_of(key, shift[p], mask[p]);
        shared_inc(at[p] + (p == PASSES - 1 ? min(d, 255u) : d) * (4 * LANES));
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

__device__ __forceinline__ void load_flag(const void* flags, int wide, long long j, int dig,
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

// Sum this digit's counts over the tiles before `tile`, walking back until an inclusive prefix.
// W predecessors' flags are loaded at once (independent loads, one L2 round trip for W tiles),
// then consumed in order up to the first one not yet published, where the next round starts.
// Safe to spin: tile ids come from an atomic counter, so every earlier tile's block is running or
// done, and it publishes its aggregate without waiting on anyone.
__device__ __forceinline__ u32 look_back(const void* flags, int wide, u32 tile, int dig)
{
    constexpr int W = RADIX_LOOKBACK_WINDOW;
    u32 sum = 0;
    long long j = (long long)tile - 1;
    while (true) {
        u32 status[W], value[W];
#pragma unroll
        for (int w = 0; w < W; ++w) load_flag(flags, wide, j - w, dig, status[w], value[w]);
        int used = 0;
        bool open = true;
#pragma unroll
        for (int w = 0; w < W; ++w) {
            if (open && status[w] != 0) {
                sum += value[w];
                ++used;
                if (status[w] == FLAG_PREFIX) return sum;
            } else {
                open = false;
            }
        }
        j -= used;
    }
}


template <typename K, typename VO, int VMODE>
struct OnesweepSmem {
    static constexpr int ITEMS = Items<K, VMODE>::value;
    static constexpr int SB = (VMODE != 0 && sizeof(VO) > sizeof(K)) ? (int)sizeof(VO) : (int)sizeof(K);
    __align__(16) unsigned char buf[BLOCK * ITEMS * SB];  // the tile's keys, then its values
    u32 whist[WARPS][RADIX];  // per-warp digit counts, then each warp's first rank per digit
    u32 off[RADIX];           // output position of the tile's first key of each digit, minus its rank
    u32 counts[RADIX];        // the tile's digit counts (early counts)
    u32 warp_sums[WARPS];
    u32 tile;
};

// Digit policies of onesweep_tile. RadixDigit: up to 8 bits of key - low (a wider digit is
// clamped to 255: the landing sort's last pass, landing.py), recomputed from the key
// wherever needed (cheaper than holding a digit per key in registers). Digits are those of
// key - low: 64-bit keys are rebased as they are loaded and restored as they are stored; 32-bit
// keys subtract low where a digit is taken. Each spills least that way (ptxas -v, sm_90: the
// other way round, 64-bit keys spilled 2-10x more, 32-bit ones ~1.5x). Policies whose digit
// cannot be recomputed from the key alone (digit_partition.cu's bucket digit, which breaks ties by
// position) set STAGED and keep each key's digit in shared memory for the write-out.
template <typename K, int ITEMS> struct RadixDigit {
    static constexpr bool STAGED = false;
    static constexpr bool REBASED = sizeof(K) == 8;
    K low;
    int shift;
    u32 mask;
    RawKeys<K> raw;  // keys ordered by their codes: held as codes between load and store
    __device__ __forceinline__ K load(K key) const
    {
        const K c = raw.code(key);
        return REBASED ? c - low : c;
    }
    __device__ __forceinline__ K store(K kept) const { return raw.bits(REBASED ? kept + low : kept); }
    __device__ __forceinline__ u32 of(K kept) const
    {
        return min(digit_of(REBASED ? kept : kept - low, shift, mask), 255u);
    }
    __device__ __forceinline__ void prepare(const K (&)[ITEMS], u64, u32, u32, unsigned char*) {}
    __device__ __forceinline__ u32 item(const K (&k)[ITEMS], int i) const { return of(k[i]); }
    __device__ __forceinline__ u32 staged(K kept, const unsigned char*, u32) const
    {
        return of(kept);
    }
    template <typename T> __device__ __forceinline__ T* to(T* out, int, u32) const { return out; }
};

// The work on one tile; FULL tiles (all but the last) skip every bounds check. `head`: the tile
// is the first of the array: its prefix is 0.
template <bool FULL, typename K, typename VI, typename VO, int VMODE, typename D>
__device__ __forceinline__ void onesweep_tile(const K* __restrict__ keys_in, K* __restrict__ keys_out,
                                              const VI* __restrict__ vals_in, VO* __restrict__ vals_out,
                                              u32 tile, bool head, u64 tile_base, u32 tile_n,
                                              D& dig, const u32* __restrict__ bases, void* flags,
                                              int wide, OnesweepSmem<K, VO, VMODE>& sm)
{
    constexpr int ITEMS = Items<K, VMODE>::value;
    static_assert(!D::STAGED || BLOCK * ITEMS <= sizeof(sm.whist), "staged digits: whist");
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const u32 first = warp * 32 * ITEMS + lane;  // this thread's first item, within the tile
    K* s_keys = reinterpret_cast<K*>(sm.buf);
    VO* s_vals = reinterpret_cast<VO*>(sm.buf);
    unsigned char* stage = reinterpret_cast<unsigned char*>(sm.whist);  // after the ranking

    K k[ITEMS];
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
        if (FULL || first + 32 * i < tile_n) k[i] = dig.load(keys_in[tile_base + first + 32 * i]);
    dig.prepare(k, tile_base, first, tile_n, sm.buf);  // buf is free until the ranking

    if constexpr (RADIX_EARLY_COUNTS) {  // successors' look-backs need not wait for our ranking
#pragma unroll
        for (int i = 0; i < ITEMS; ++i)
            if (FULL || first + 32 * i < tile_n) atomicAdd(&sm.counts[dig.item(k, i)], 1u);
        __syncthreads();
        publish(flags, wide, tile, tid, head ? FLAG_PREFIX : FLAG_AGG, sm.counts[tid]);
    }

    // Rank within the warp: lanes with equal digits share one counter update by their leader.
    const u32 lt_mask = (1u << lane) - 1u;
    u32 r[ITEMS];
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const bool valid = FULL || first + 32 * i < tile_n;
        const u32 d = valid ? dig.item(k, i) : (u32)RADIX;
        const u32 peers = match_peers<FULL ? 8 : 9>(d);
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

    // Thread tid owns digit tid: warp counts -> per-warp exclusive offsets and the tile's count.
    u32 cnt = 0;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) {
        const u32 c = sm.whist[w][tid];
        sm.whist[w][tid] = cnt;
        cnt += c;
    }
    if constexpr (!RADIX_EARLY_COUNTS)
        publish(flags, wide, tile, tid, head ? FLAG_PREFIX : FLAG_AGG, cnt);
    u32 total;
    const u32 excl = block_excl_scan(cnt, sm.warp_sums, &total);
#pragma unroll
    for (int w = 0; w < WARPS; ++w) sm.whist[w][tid] += excl;  // one table read per key below
    __syncthreads();

    // Keys into shared memory in (digit, input order) order.
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        if (FULL || first + 32 * i < tile_n) {
            r[i] += sm.whist[warp][dig.item(k, i)];
            s_keys[r[i]] = k[i];
        }
    }
    if constexpr (D::STAGED) {  // the digits beside their keys, over the ranking's table
        __syncthreads();
#pragma unroll
        for (int i = 0; i < ITEMS; ++i)
            if (FULL || first + 32 * i < tile_n) stage[r[i]] = (unsigned char)dig.item(k, i);
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

    const u32 prefix = head ? 0u : look_back(flags, wide, tile, tid);
    if (!head) publish(flags, wide, tile, tid, FLAG_PREFIX, prefix + cnt);
    sm.off[tid] = bases[tid] + prefix - excl;  // wraps below zero; adding the index fixes it
    __syncthreads();

    u32 od[VMODE != 0 ? ITEMS : 1];
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
        const u32 idx = j * BLOCK + tid;
        if (FULL || idx < tile_n) {
            const K key = s_keys[idx];
            const u32 d = dig.staged(key, stage, idx);
            const u32 o = sm.off[d] + idx;
            dig.to(keys_out, 0, d)[o] = dig.store(key);
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
            if (FULL || j * BLOCK + tid < tile_n)
                dig.to(vals_out, 1, D::STAGED ? (u32)stage[j * BLOCK + tid] : 0u)[od[j]] =
                    s_vals[j * BLOCK + tid];
    }
}

// One tile of a pass: its id (from the counter: every earlier tile's block has started), where
// its keys are; then onesweep_tile, full or partial.
template <typename K, typename VI, typename VO, int VMODE, typename D>
__device__ __forceinline__ void onesweep_next(const K* keys_in, K* keys_out, const VI* vals_in,
                                              VO* vals_out, u64 n, D& dig, const u32* bases,
                                              u32* tile_counter, void* flags, int wide,
                                              const u32* tile_start, const u32* tile_rows,
                                              OnesweepSmem<K, VO, VMODE>& sm)
{
    constexpr int TILE = BLOCK * Items<K, VMODE>::value;
    if (threadIdx.x == 0) sm.tile = atomicAdd(tile_counter, 1u);
#pragma unroll
    for (int w = 0; w < WARPS; ++w) sm.whist[w][threadIdx.x] = 0;
    sm.counts[threadIdx.x] = 0;
    __syncthreads();
    const u32 tile = sm.tile;
    const u64 base = tile_start ? (u64)tile_start[tile] : (u64)tile * TILE;
    const u64 left = tile_start ? (u64)tile_rows[tile] : n - base;
    if (left >= (u64)TILE)
        onesweep_tile<true>(keys_in, keys_out, vals_in, vals_out, tile, tile == 0, base,
                            (u32)TILE, dig, bases, flags, wide, sm);
    else
        onesweep_tile<false>(keys_in, keys_out, vals_in, vals_out, tile, tile == 0, base,
                             (u32)left, dig, bases, flags, wide, sm);
}
