// Order-preserving key codes on the GPU: the transforms of keys.py, fused into one kernel each way.
//
// Why: written as array expressions the float transform takes five or six passes with
// temporaries (slower than the sort itself); one kernel reads each
// key once and writes its code once (8 bytes per 4-byte key). Everything works on the bit pattern,
// so one template per width serves integers and floats. kind: 0 unsigned, 1 signed, 2 float.

// merged: set to 1 where a canonical code merged some key's bits into another's, so that the
// caller knows whether the codes alone give the keys back (a plain store: every writer writes 1).
template <typename U>
__global__ void encode_keys(const U* in, U* out, long long n, int kind, int canonical,
                            int descending, U inf_bits, U nan_half, U nan_top, U qnan,
                            unsigned int* merged) {
    const U sign = U(U(1) << (sizeof(U) * 8 - 1));
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        U u = in[i];
        if (kind == 2) {
            if (canonical) {
                U c = U(u & U(~sign)) > inf_bits ? qnan : u;  // every NaN the same
                if (c == sign) c = 0;                           // -0.0 == 0.0
                if (c != u) *merged = 1;
                u = c;
            }
            u = u >= sign ? U(~u) : U(u | sign);
            u = U(u - nan_half);  // rotate: negative-signed NaNs go to the top too
        } else if (kind == 1) {
            u = U(u ^ sign);
        }
        out[i] = descending ? U(U(~u) - nan_top) : u;
    }
}

template <typename U>
__global__ void decode_keys(const U* in, U* out, long long n, int kind, int descending,
                            U nan_half, U nan_top) {
    const U sign = U(U(1) << (sizeof(U) * 8 - 1));
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        U u = in[i];
        if (descending) u = U(~U(u + nan_top));
        if (kind == 2) {
            u = U(u + nan_half);
            u = u >= sign ? U(u & U(~sign)) : U(~u);
        } else if (kind == 1) {
            u = U(u ^ sign);
        }
        out[i] = u;
    }
}

// One key word of fixed-size byte records (keys.py: record_key_words): `size` bytes from byte
// `start` of every record, big-endian, zero-padded on the right to the word's width (memcmp
// order), complemented for a descending sort. Why a kernel: as array expressions every key byte
// is a pass over all records; here a thread reads its record's bytes once: a 32-byte sector a
// record.
template <typename W>
__global__ void record_word(const unsigned char* records, W* out, long long n,
                            long long record_size, int start, int size, int descending) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const unsigned char* key = records + i * record_size + start;
        unsigned long long w = 0;
        for (int j = 0; j < size; ++j) w = (w << 8) | key[j];
        if (size < (int)sizeof(W)) w <<= 8 * ((int)sizeof(W) - size);
        out[i] = descending ? W(~W(w)) : W(w);
    }
}
