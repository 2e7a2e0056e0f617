// Order-preserving key codes on the GPU: the transforms of keys.py, fused into one kernel each way.
//
// Why: written as array expressions the float transform takes five or six passes with
// temporaries (slower than the sort itself); one kernel reads each
// key once and writes its code once (8 bytes per 4-byte key). Everything works on the bit pattern,
// so one template per width serves integers and floats (keycode.cuh).

#include "keycode.cuh"

// merged: set to 1 where a canonical code merged some key's bits into another's, so that the
// caller knows whether the codes alone give the keys back (a plain store: every writer writes 1).
template <typename U>
__global__ void encode_keys(const U* in, U* out, long long n, int kind, int canonical,
                            int descending, unsigned int* merged) {
    const KeyCoder<U> coder(kind, descending);
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        U u = in[i];
        if (kind == 2 && canonical) {
            const U c = canonical_bits(u);
            if (c != u) *merged = 1;
            u = c;
        }
        out[i] = coder.code(u);
    }
}

template <typename U>
__global__ void decode_keys(const U* in, U* out, long long n, int kind, int descending) {
    const KeyCoder<U> coder(kind, descending);
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        out[i] = coder.bits(in[i]);
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
