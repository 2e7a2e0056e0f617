// Stable partition of one-word keys into p buckets by splitters on (key, global position).
//
// Why this shape: the pipeline's partition step should move every key once. It takes two passes
// over the keys -- count (read 4 or 8 B/key) and scatter (read + write) -- so 12 B per 4-byte key
// instead of a full sort's ~36. The scatter stages each tile in shared memory (16 or 32 KiB) so
// that its writes are coalesced runs, not scattered partial sectors. A tile is 256 threads x 16 keys = 4096 keys; each tile counts its
// keys per bucket, one exclusive scan over the (bucket, tile) counts (bucket-major) gives every
// tile's start in every bucket, and the scatter ranks keys inside the tile stably with warp
// votes (a ballot per bucket up to 32 buckets, __match_any_sync beyond, up to 256), so equal
// keys keep their input order.
// Ties with a splitter's key are broken by global position (offset + index), which spreads runs of
// equal keys over ranks. Splitters live in shared memory; the bucket search is a binary search.

#define BLOCK 256
#define ITEMS 16
#define WARPS (BLOCK / 32)
#define MAX_BUCKETS 256

typedef unsigned long long u64;

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

// Lanes of this warp whose bucket equals this lane's (invalid lanes carry -1). Up to 32 buckets
// take one ballot per bucket, cheap instructions; beyond that one __match_any_sync, a slow one.
__device__ __forceinline__ unsigned int same_bucket(int bucket, int buckets) {
    if (buckets > 32) return __match_any_sync(0xffffffffu, bucket);
    unsigned int peers = 0;
    for (int b = 0; b < buckets; ++b) {
        unsigned int m = __ballot_sync(0xffffffffu, bucket == b);
        if (bucket == b) peers = m;
    }
    return bucket < 0 ? 0u : peers;
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

// counts[b * tiles + t] = keys of tile t that go to bucket b.
template <typename K>
__global__ void __launch_bounds__(BLOCK) partition_count(
        const K* keys, long long n, u64 offset, const K* split_keys, const u64* split_pos, int ns,
        long long* counts, long long tiles) {
    __shared__ K sk[MAX_BUCKETS];
    __shared__ u64 sp[MAX_BUCKETS];
    __shared__ unsigned int hist[MAX_BUCKETS];
    load_splitters(split_keys, split_pos, ns, sk, sp);
    for (int b = threadIdx.x; b <= ns; b += BLOCK) hist[b] = 0;
    __syncthreads();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const long long first = (long long)blockIdx.x * BLOCK * ITEMS + (long long)warp * 32 * ITEMS;
    K key[ITEMS];
    load_keys(keys, n, first, lane, key);
    #pragma unroll
    for (int k = 0; k < ITEMS; ++k) {  // one shared-memory atomic per bucket per warp step
        long long i = first + k * 32 + lane;
        int bucket = i < n ? bucket_of(key[k], offset + (u64)i, sk, sp, ns) : -1;
        unsigned int peers = same_bucket(bucket, ns + 1);
        if (bucket >= 0 && lane == __ffs(peers) - 1) atomicAdd(&hist[bucket], __popc(peers));
    }
    __syncthreads();
    for (int b = threadIdx.x; b <= ns; b += BLOCK) counts[(long long)b * tiles + blockIdx.x] = hist[b];
}

// Each warp owns 32 * ITEMS consecutive keys of the tile, in order; starts is the exclusive scan of
// counts. The tile's keys are first put in bucket order in shared memory, then each bucket's run is
// written out by consecutive threads to consecutive addresses: full, coalesced sectors instead of
// scattered partial ones. dest_out[i], when given, is where key i went (to move other columns).
template <typename K>
__global__ void __launch_bounds__(BLOCK) partition_scatter(
        const K* keys, long long n, u64 offset, const K* split_keys, const u64* split_pos, int ns,
        const long long* starts, long long tiles, K* out, long long* dest_out) {
    __shared__ K sk[MAX_BUCKETS];
    __shared__ u64 sp[MAX_BUCKETS];
    __shared__ long long tile_start[MAX_BUCKETS];
    __shared__ unsigned int warp_count[WARPS][MAX_BUCKETS];
    __shared__ unsigned int run_start[MAX_BUCKETS + 1];
    __shared__ K staged[BLOCK * ITEMS];
    load_splitters(split_keys, split_pos, ns, sk, sp);
    for (int b = threadIdx.x; b <= ns; b += BLOCK) {
        tile_start[b] = starts[(long long)b * tiles + blockIdx.x];
        for (int w = 0; w < WARPS; ++w) warp_count[w][b] = 0;
    }
    __syncthreads();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const unsigned int lower = (1u << lane) - 1u;
    const long long tile_first = (long long)blockIdx.x * BLOCK * ITEMS;
    const long long first = tile_first + (long long)warp * 32 * ITEMS;
    K key[ITEMS];
    int bucket[ITEMS];
    unsigned int rank[ITEMS];
    load_keys(keys, n, first, lane, key);
    #pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        long long i = first + k * 32 + lane;
        bool valid = i < n;
        bucket[k] = valid ? bucket_of(key[k], offset + (u64)i, sk, sp, ns) : -1;
        unsigned int peers = same_bucket(bucket[k], ns + 1);
        rank[k] = valid ? warp_count[warp][bucket[k]] + __popc(peers & lower) : 0;
        __syncwarp();
        if (valid && lane == __ffs(peers) - 1) warp_count[warp][bucket[k]] += __popc(peers);
        __syncwarp();
    }
    __syncthreads();
    for (int b = threadIdx.x; b <= ns; b += BLOCK) {  // exclusive scan over warps, per bucket
        unsigned int running = 0;
        for (int w = 0; w < WARPS; ++w) {
            unsigned int c = warp_count[w][b];
            warp_count[w][b] = running;
            running += c;
        }
        run_start[b + 1] = running;
    }
    __syncthreads();
    if (threadIdx.x == 0) {  // bucket runs inside the tile: exclusive scan over <= 256 buckets
        run_start[0] = 0;
        for (int b = 1; b <= ns + 1; ++b) run_start[b] += run_start[b - 1];
    }
    __syncthreads();
    #pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        if (bucket[k] < 0) continue;
        unsigned int within = warp_count[warp][bucket[k]] + rank[k];
        staged[run_start[bucket[k]] + within] = key[k];
        if (dest_out) dest_out[first + k * 32 + lane] = tile_start[bucket[k]] + within;
    }
    __syncthreads();
    const int in_tile = (int)min((long long)BLOCK * ITEMS, n - tile_first);
    for (int slot = threadIdx.x; slot < in_tile; slot += BLOCK) {
        int lo = 0, hi = ns;  // the bucket whose run holds this slot
        while (lo < hi) {
            int mid = (lo + hi + 1) >> 1;
            if (run_start[mid] <= (unsigned int)slot) lo = mid; else hi = mid - 1;
        }
        out[tile_start[lo] + (slot - run_start[lo])] = staged[slot];
    }
}
