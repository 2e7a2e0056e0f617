// Tile descriptors of the onesweep passes that read pieces lying apart (tiles.py), built on the
// device.
//
// Why: a pass over pieces (the landing sort's second pass: every block's run of each digit,
// digit-major) reads them cut into tiles of at most `tile` keys; one (start, rows) entry a
// tile tells the onesweep kernel where to read (radix.cu). There are ~n / tile entries (~350 k
// for 2^31 keys): built here, one thread block per piece, they cost far less than a NumPy build
// on the host, which lay on the critical path of every pass. A piece's first tile and start
// come from scans done before (CuPy, or the host for a few thousand pieces). Descriptors past
// the last piece's are left as the driver zeroed them (0 rows), so a pass may launch an upper
// bound of tiles.

typedef unsigned int u32;
typedef long long i64;

extern "C" __global__ void piece_tiles(const i64* __restrict__ rows, const i64* __restrict__ starts,
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
