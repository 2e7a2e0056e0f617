// Tile descriptors of the landing sort's second pass (landing.py), built on the device.
//
// Why: the second pass reads every block's run of each digit, digit-major (piece p = digit d of
// block b, p = d * blocks + b), cut into tiles of at most `tile` keys; one (start, rows) pair a
// tile tells the onesweep kernel where to read (radix.cu). The counts are on the device when
// the last block lands; building the pairs here spares a device-to-host read and a host loop
// of ~n / tile entries on the critical path. One thread block per piece writes its tiles; the
// piece's first tile and start come from scans done by CuPy. Descriptors past the last piece's
// are left as the driver zeroed them (0 rows), so the pass may launch an upper bound of tiles.

typedef unsigned int u32;
typedef long long i64;

extern "C" __global__ void landing_tiles(const i64* __restrict__ rows, const i64* __restrict__ starts,
                                         const i64* __restrict__ first_tile, int tile,
                                         u32* __restrict__ tile_start, u32* __restrict__ tile_rows)
{
    const int p = blockIdx.x;
    const i64 r = rows[p], s = starts[p], t0 = first_tile[p];
    for (i64 k = threadIdx.x; k * tile < r; k += blockDim.x) {
        tile_start[t0 + k] = (u32)(s + k * tile);
        tile_rows[t0 + k] = (u32)min((i64)tile, r - k * tile);
    }
}
