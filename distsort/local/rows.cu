// Rows taken in an order (rows.py: take): dst[i] = src[order[i]], each row `words` words of W.
//
// Why a kernel: CuPy's indexing computes a source index for every element, so 100-byte records
// moved as 4-byte words went well below the memory's rate. Here a row's
// words are read by 2^SHIFT lanes side by side (the least power of two >= words, 8 to 32: one
// coalesced read of the row), so a warp reads 32 >> SHIFT rows an instruction, and each lane
// loads its word of R such rows before it stores any: R loads in flight a lane. With one row a
// warp and one load a lane, the copy waited on memory latency; several loads in flight (R = 8)
// made it markedly faster (bench/history/take_rows.py). The
// lanes of a step hold its rows' order, one a lane (R << (5 - SHIFT) <= 32 rows), handed round
// by shuffles. No division per element. Rows of 32 bytes or more only (rows.py keeps CuPy's
// indexing for narrower ones).
// SHIFT is a template parameter: with run-time lane arithmetic the copy went slower.
template <typename I, typename W, int R, int SHIFT>
__global__ void take_rows(const W* __restrict__ src, W* __restrict__ dst,
                          const I* __restrict__ order, long long n, int words)
{
    constexpr int per = 32 >> SHIFT, step = R * per;
    static_assert(step <= 32, "a step's rows: one order index a lane");
    const int lane = threadIdx.x & 31, sub = lane >> SHIFT, col = lane & ((1 << SHIFT) - 1);
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long i = ((blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5) * step; i < n;
         i += warps * step) {
        const long long mine = lane < step && i + lane < n ? (long long)order[i + lane] : 0;
        long long from[R];
#pragma unroll
        for (int r = 0; r < R; ++r) from[r] = __shfl_sync(0xffffffffu, mine, r * per + sub) * words;
        const int rows = (int)min((long long)step, n - i);
        W* out = dst + (i + sub) * words;
        for (int j = col; j < words; j += 1 << SHIFT) {
            W v[R];
#pragma unroll
            for (int r = 0; r < R; ++r)
                if (r * per + sub < rows) v[r] = __ldcs(src + from[r] + j);
#pragma unroll
            for (int r = 0; r < R; ++r)
                if (r * per + sub < rows) out[(long long)r * per * words + j] = v[r];
        }
    }
}
