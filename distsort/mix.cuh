// splitmix64: Steele, Lea and Flood's 64-bit mixer (a bijection with good avalanche), the same
// numbers as mix.py's splitmix64 computes on the host.

typedef unsigned long long u64;

__device__ __forceinline__ u64 splitmix64(u64 z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
