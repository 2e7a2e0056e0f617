// This rank's share of the splitter sample, drawn on the device in one launch (steps/sample.py).
//
// Why: the stratified draw was a dozen small CuPy operations and a host-to-device copy of the
// random fractions: launches that weighed on the sort even at large sizes. Here
// one thread per stratum draws its fraction from a counter-based generator (splitmix64 of
// base + stratum, the same numbers splitters.uniforms gives on the host), picks the index
// lo + floor(u * (hi - lo)) in stratum [i n / take, (i + 1) n / take), and writes the row
// (key, global position). The driver guarantees take * n < 2^63, so the products fit.

#include "../mix.cuh"

template <typename K>
__global__ void sample_rows(const K* __restrict__ keys, u64 n, u64 take, u64 base, u64 offset,
                            u64* __restrict__ rows)
{
    const u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= take) return;
    const u64 lo = i * n / take, hi = (i + 1) * n / take;
    const double u = (double)(splitmix64(base + i) >> 11) * 0x1p-53;
    const u64 pick = lo + (u64)(u * (double)(hi - lo));
    rows[2 * i] = (u64)keys[pick];
    rows[2 * i + 1] = pick + offset;
}
