// Device code shared by the sort and partition kernels: the integer types and the warp's
// ranking of equal values (included where needed).
typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;

// Lanes of the warp whose digit equals this lane's, from one ballot per digit bit (NBITS = 9 in
// a partial tile, where absent keys carry digit RADIX). __match_any_sync does the same in one
// instruction but is slow: the pass ran markedly faster with ballots (ncu).
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
