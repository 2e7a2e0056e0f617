// Stable partition of one-word keys into p buckets by splitters on (key, global position).
//
// Why this shape: the pipeline's partition step should move every key once. It takes two passes
// over the keys -- count (read 4 or 8 B/key) and scatter (read + write) -- so 12 B per 4-byte key
// instead of a full sort's ~36. A tile is 256 threads x 16 keys = 4096 keys. The count kernel
// gives each tile's count per bucket; one exclusive scan over the (bucket, tile) counts
// (bucket-major) gives every tile's start in every bucket; the scatter ranks the tile's keys
// stably and stages them in shared memory in bucket order, so that its writes are coalesced runs,
// not scattered partial sectors.
// Both kernels are bound by instructions per key, not by memory (both ran well below a device
// copy's rate, and ncu shows the scatter busy on the SMs rather than on DRAM:
// bench/history/partition.py), so the per-key work is
// kept small: counts go to lane-private shared counters (no votes), ranking takes one ballot per
// bit of the bucket number (2 for 4 buckets, 8 for 256) instead of one per bucket, the staged
// bucket numbers spare the write-out a search, the tie with a splitter is one 32-bit compare of
// the key's index, and only threads of the last tile check bounds (these two sped up both
// kernels markedly).
// Ties with a splitter's key are broken by global position (offset + index), which spreads runs of
// equal keys over ranks. Splitters live in shared memory; the bucket search is a binary search.

#define BLOCK 256
#define ITEMS 16
#define WARPS (BLOCK / 32)
#define TILE (BLOCK * ITEMS)
#define MAX_BUCKETS 256

#include "warp.cuh"

template <typename K>
__device__ __forceinline__ int bucket_of(K key, u64 pos, const K* sk, const u64* sp, int ns) {
    int lo = 0, hi = ns;
    while (lo < hi) {
        int mid = (lo + hi) >> 1;
        bool below = sk[mid] < key || (sk[mid] == key && sp[mid] <= pos);
        if (below) lo = mid + 1; else hi = mid;
    }
    return lo;
}

// bucket[k] = bucket of key[k] (global position pos0 + 32 k), or `absent` past n. All buckets are
// found before any is used, so the searches of the ITEMS keys overlap (inside the ranking loop
// each waited on the previous key's shared-memory update). Up to 15 splitters are compared with
// every key -- splitter-major, one broadcast read of each splitter for all keys, no dependent
// loads -- and more take a binary search per key.
template <typename K>
__device__ __forceinline__ void buckets_of(const K (&key)[ITEMS], u64 pos0, long long first,
                                           long long n, const K* sk, const u64* sp, int ns,
                                           int absent, unsigned int (&bucket)[ITEMS]) {
    if (ns <= 15) {
        #pragma unroll
        for (int k = 0; k < ITEMS; ++k) bucket[k] = 0;
        for (int j = 0; j < ns; ++j) {
            const K s = sk[j];
            // key k ties above iff sp[j] - pos0 <= 32 k, i.e. iff k >= from: one 32-bit compare
            // of a constant per key instead of a 64-bit one
            const long long d = (long long)(sp[j] - pos0);
            const int from = d <= 0 ? 0 : (int)min((d + 31) / 32, (long long)ITEMS);
            #pragma unroll
            for (int k = 0; k < ITEMS; ++k)
                bucket[k] += (key[k] > s) | ((key[k] == s) & (k >= from));
        }
    } else {
        #pragma unroll
        for (int k = 0; k < ITEMS; ++k) bucket[k] = bucket_of(key[k], pos0 + 32 * k, sk, sp, ns);
    }
    if (first + 32 * (ITEMS - 1) >= n) {  // only a thread of the last tile has keys past n
        #pragma unroll
        for (int k = 0; k < ITEMS; ++k)
            if (first + 32 * k >= n) bucket[k] = absent;
    }
}

template <typename K>
__device__ void load_splitters(const K* keys, const u64* pos, int ns, K* sk, u64* sp) {
    for (int i = threadIdx.x; i < ns; i += BLOCK) {
        sk[i] = keys[i];
        sp[i] = pos[i];
    }
}

// All of a lane's keys are loaded before any is ranked: the ranking's warp votes would otherwise
// keep one load per warp in flight at a time, and the kernel would wait on memory latency.
template <typename K>
__device__ __forceinline__ void load_keys(const K* keys, long long n, long long first, int lane,
                                          K (&key)[ITEMS]) {
    #pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        long long i = first + k * 32 + lane;
        key[k] = i < n ? keys[i] : K(0);
    }
}

// Both kernels are persistent (a few blocks per SM, each walking tiles tile += gridDim.x): the
// splitters are loaded once per block, and the next tile's keys are loaded while this one's are
// still being counted or written, so the load latency hides behind work (the first version, one
// block per tile, waited on it and was markedly slower).

// counts[b * tiles + t] = keys of tile t that go to bucket b. Dynamic shared memory: (ns + 1) x 32
// counters, copy l of each in bank l, so a warp's adds never conflict whatever their buckets.
template <typename K>
__global__ void __launch_bounds__(BLOCK) partition_count(
        const K* keys, long long n, u64 offset, const K* split_keys, const u64* split_pos, int ns,
        long long* counts, long long tiles) {
    __shared__ K sk[MAX_BUCKETS];
    __shared__ u64 sp[MAX_BUCKETS];
    extern __shared__ unsigned int hist[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    K key[ITEMS];
    long long tile = blockIdx.x;
    if (tile < tiles) load_keys(keys, n, tile * TILE + warp * 32 * ITEMS, lane, key);
    load_splitters(split_keys, split_pos, ns, sk, sp);
    for (int i = threadIdx.x; i < (ns + 1) * 32; i += BLOCK) hist[i] = 0;
    __syncthreads();
    for (; tile < tiles; tile += gridDim.x) {
        const long long first = tile * TILE + (long long)warp * 32 * ITEMS;
        unsigned int bucket[ITEMS];
        buckets_of(key, offset + (u64)(first + lane), first + lane, n, sk, sp, ns, ns + 1, bucket);
        #pragma unroll
        for (int k = 0; k < ITEMS; ++k)
            if (bucket[k] <= (unsigned int)ns) atomicAdd(&hist[bucket[k] * 32 + lane], 1u);
        if (tile + gridDim.x < tiles)
            load_keys(keys, n, first + (long long)gridDim.x * TILE, lane, key);
        __syncthreads();
        if (threadIdx.x <= ns) {
            const int b = threadIdx.x;
            unsigned int sum = 0;
            for (int l = 0; l < 32; ++l) {
                const int at = b * 32 + ((l + b) & 31);
                sum += hist[at];
                hist[at] = 0;
            }
            counts[(long long)b * tiles + tile] = sum;
        }
        __syncthreads();
    }
}

// Rank each of a warp's keys among the warp's keys of its bucket (bucket numbers < 2^NBITS;
// `absent`, past n, not counted): rank[k] holds the bucket on entry, rank << 8 | bucket on exit.
template <int NBITS>
__device__ __forceinline__ void rank_in_warp(unsigned int (&rank)[ITEMS], unsigned int absent,
                                             unsigned short* warp_count) {
    const int lane = threadIdx.x & 31;
    const unsigned int lower = (1u << lane) - 1u;
    #pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const unsigned int bucket = rank[k];
        const unsigned int peers = match_peers<NBITS>(bucket);
        const int leader = 31 - __clz(peers);
        unsigned int before = 0;
        if (lane == leader && bucket != absent) {
            before = warp_count[bucket];
            warp_count[bucket] = (unsigned short)(before + __popc(peers));
        }
        rank[k] = (__shfl_sync(0xffffffffu, before, leader) + __popc(peers & lower)) << 8 |
                  (bucket & 0xff);
        __syncwarp();
    }
}

// Each warp owns 32 * ITEMS consecutive keys of the tile, in order; starts is the exclusive scan of
// counts. BITS = bits of the largest bucket number (ns): the ranking's ballots per key; the
// last tile's absent keys take bucket 2^BITS, one bit more. The tile's keys are first put in
// bucket order in shared memory (with their bucket numbers), then written out by consecutive
// threads to consecutive addresses. dest_out[i], when given, is where key i went (to move other
// columns). Bucket b's bookkeeping is thread b's (ns < MAX_BUCKETS = BLOCK).
template <typename K, int BITS>
__global__ void __launch_bounds__(BLOCK, sizeof(K) > 4 ? 3 : 4) partition_scatter(
        const K* keys, long long n, u64 offset, const K* split_keys, const u64* split_pos, int ns,
        const long long* starts, long long tiles, K* out, long long* dest_out) {
    __shared__ K sk[MAX_BUCKETS];
    __shared__ u64 sp[MAX_BUCKETS];
    __shared__ long long base[MAX_BUCKETS];  // output index of the tile's slot 0, per bucket
    __shared__ unsigned short warp_count[WARPS][MAX_BUCKETS];  // <= 32 x ITEMS keys a warp
    __shared__ unsigned int run_start[MAX_BUCKETS];
    __shared__ K staged[TILE];
    __shared__ unsigned char staged_bucket[TILE];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, b = threadIdx.x;
    constexpr int absent = 1 << BITS;  // the bucket of keys past n
    K key[ITEMS];
    long long tile = blockIdx.x;
    if (tile < tiles) load_keys(keys, n, tile * TILE + warp * 32 * ITEMS, lane, key);
    load_splitters(split_keys, split_pos, ns, sk, sp);
    for (; tile < tiles; tile += gridDim.x) {
        const long long tile_first = tile * TILE, first = tile_first + (long long)warp * 32 * ITEMS;
        long long tile_start = 0;
        if (b <= ns) {
            tile_start = starts[(long long)b * tiles + tile];
            for (int w = 0; w < WARPS; ++w) warp_count[w][b] = 0;
        }
        __syncthreads();
        unsigned int rank[ITEMS];  // the bucket, then rank among the warp's keys of it << 8 | bucket
        buckets_of(key, offset + (u64)(first + lane), first + lane, n, sk, sp, ns, absent, rank);
        if (tile_first + TILE <= n)
            rank_in_warp<BITS>(rank, absent, warp_count[warp]);
        else
            rank_in_warp<BITS + 1>(rank, absent, warp_count[warp]);
        __syncthreads();
        if (b <= ns) {  // exclusive scan over warps, per bucket
            unsigned int running = 0;
            for (int w = 0; w < WARPS; ++w) {
                unsigned int c = warp_count[w][b];
                warp_count[w][b] = (unsigned short)running;
                running += c;
            }
            run_start[b] = running;  // the bucket's count in the tile, for now
        }
        __syncthreads();
        if (threadIdx.x == 0) {  // bucket runs inside the tile: exclusive scan over <= 256 buckets
            unsigned int running = 0;
            for (int c = 0; c <= ns; ++c) {
                unsigned int count = run_start[c];
                run_start[c] = running;
                running += count;
            }
        }
        __syncthreads();
        if (b <= ns) base[b] = tile_start - run_start[b];
        __syncthreads();
        const bool whole = first + lane + 32 * (ITEMS - 1) < n;  // all this thread's keys
        #pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            long long i = first + k * 32 + lane;
            if (!whole && i >= n) continue;
            int bucket = rank[k] & 0xff;
            unsigned int slot = run_start[bucket] + warp_count[warp][bucket] + (rank[k] >> 8);
            staged[slot] = key[k];
            staged_bucket[slot] = (unsigned char)bucket;
            if (dest_out) dest_out[i] = base[bucket] + slot;
        }
        if (tile + gridDim.x < tiles)
            load_keys(keys, n, first + (long long)gridDim.x * TILE, lane, key);
        __syncthreads();
        const int in_tile = (int)min((long long)TILE, n - tile_first);
        for (int slot = threadIdx.x; slot < in_tile; slot += BLOCK)
            out[base[staged_bucket[slot]] + slot] = staged[slot];
        __syncthreads();
    }
}
