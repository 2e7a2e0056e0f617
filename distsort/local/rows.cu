// Rows taken in an order (rows.py: take): dst[i] = src[order[i]], each row `words` words of W.
//
// Why a kernel: CuPy's indexing computes a source index for every element, so 100-byte records
// moved as 4-byte words went at ~1.2 TB/s (5.4 ms for 2^25 of them on an H200). Here one warp
// copies one row: its lanes read the row's words side by side (one coalesced read of the row,
// one write), and there is no division per element. Rows of 32 bytes or more only: a narrower
// row would leave most of the warp idle (rows.py keeps CuPy's indexing for those).
template <typename I, typename W>
__global__ void take_rows(const W* src, W* dst, const I* order, long long n, int words) {
    const int lane = threadIdx.x & 31;
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long i = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5; i < n;
         i += warps) {
        const W* from = src + (long long)order[i] * words;
        W* to = dst + i * words;
        for (int j = lane; j < words; j += 32) to[j] = from[j];
    }
}
