// Order-preserving codes of numeric keys' bits (keys.py's plain encoding), one copy for every
// kernel that needs them: keys.cu's encode and decode passes, and the radix passes that take
// the code of a key as they load it and give back its bits as they store it (radix.cu), so a
// one-rank sort of signed or float keys moves no extra pass over them.
//
// kind: 0 unsigned, 1 signed, 2 float (IEEE of the word's width). A float's code is the usual
// sign flip, rotated down by the count of one sign's NaN patterns so that the negative-signed
// NaNs, which the flip puts at the bottom, land at the top beside the positive ones: NaN last.
// Descending is the complement, rotated again so that NaN stays last. Both are bijections on the
// bit patterns, so key_bits(key_code(u)) == u for every u.

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

template <typename U> __device__ __forceinline__ U key_code(U u, int kind, int descending)
{
    const U sign = U(U(1) << (sizeof(U) * 8 - 1));
    if (kind == 2) {
        u = u >= sign ? U(~u) : U(u | sign);
        u = U(u - nan_half<U>(kind));
    } else if (kind == 1) {
        u = U(u ^ sign);
    }
    return descending ? U(U(~u) - U(2 * nan_half<U>(kind))) : u;
}

template <typename U> __device__ __forceinline__ U key_bits(U u, int kind, int descending)
{
    const U sign = U(U(1) << (sizeof(U) * 8 - 1));
    if (descending) u = U(~U(u + U(2 * nan_half<U>(kind))));
    if (kind == 2) {
        u = U(u + nan_half<U>(kind));
        u = u >= sign ? U(u & U(~sign)) : U(~u);
    } else if (kind == 1) {
        u = U(u ^ sign);
    }
    return u;
}
