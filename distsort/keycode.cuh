// Order-preserving codes of numeric keys' bits (keys.py's plain encoding), one copy for every
// kernel that needs them: keys.cu's encode and decode passes, and the radix passes that take
// the code of a key as they load it and give back its bits as they store it (radix.cu), so a
// one-rank sort of signed or float keys moves no extra pass over them.
//
// kind: 0 unsigned, 1 signed, 2 float (IEEE of the word's width). A float's code is the usual
// sign flip, rotated down by the count of one sign's NaN patterns so that the negative-signed
// NaNs, which the flip puts at the bottom, land at the top beside the positive ones: NaN last.
// Descending is the complement, rotated again so that NaN stays last. Both are bijections on the
// bit patterns: KeyCoder::bits(code(u)) == u for every u.

template <typename U> __device__ __forceinline__ constexpr int mantissa_bits()
{
    return sizeof(U) == 8 ? 52 : sizeof(U) == 4 ? 23 : sizeof(U) == 2 ? 10 : 0;
}

// The codes one sign's NaN patterns occupy (zero for integers, which have none).
template <typename U> __device__ __forceinline__ U nan_half(int kind)
{
    return kind == 2 ? U((U(1) << mantissa_bits<U>()) - 1) : U(0);
}

// A float's bits with every NaN made the one quiet NaN and -0.0 made +0.0: equal values, equal
// codes (the canonical encoding, for sorts where ties keep their input order).
template <typename U> __device__ __forceinline__ U canonical_bits(U u)
{
    const U sign = U(U(1) << (sizeof(U) * 8 - 1));
    const U inf = U(U(sign - 1) ^ nan_half<U>(2));
    const int quiet = mantissa_bits<U>() > 0 ? mantissa_bits<U>() - 1 : 0;  // no float of 1 byte
    const U qnan = U(inf | U(U(1) << quiet));
    u = U(u & U(~sign)) > inf ? qnan : u;
    return u == sign ? U(0) : u;
}

// One encoding (kind, descending) as five words, so that a code and its inverse are straight-line
// code (no branches: the radix passes inline them once per key they load and store):
// code = (((u ^ (u's top bit ? neg : pos)) - rot) ^ flip) - top, and back in reverse order.
// canonical: canonical_bits first (not inverted: for orders only, as argsort's).
template <typename U> struct KeyCoder {
    U neg, pos, rot, flip, top;
    bool canonical;

    __device__ __forceinline__ KeyCoder(int kind, int descending, bool canon = false)
    {
        const U sign = U(U(1) << (sizeof(U) * 8 - 1)), ones = U(~U(0));
        neg = kind == 2 ? ones : kind == 1 ? sign : U(0);  // float: a negative's bits inverted
        pos = kind == 0 ? U(0) : sign;
        rot = nan_half<U>(kind);
        flip = descending ? ones : U(0);
        top = descending ? U(2 * rot) : U(0);
        canonical = canon && kind == 2;
    }
    __device__ __forceinline__ static bool high(U u) { return U(u >> (sizeof(U) * 8 - 1)) != 0; }
    __device__ __forceinline__ U code(U u) const
    {
        u = canonical ? canonical_bits(u) : u;
        return U(U(U(U(u ^ (high(u) ? neg : pos)) - rot) ^ flip) - top);
    }
    __device__ __forceinline__ U bits(U c) const
    {
        const U x = U(U(U(c + top) ^ flip) + rot);
        return U(x ^ (high(x) ? pos : neg));
    }
};
