// AltGrad SDK: the counter-based random generator behind stochastic rounding.
//
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC'11; the generator of Random123, cuRAND and PyTorch's CUDA RNG). One
// call maps a 128-bit counter and a 64-bit key to four 32-bit words. AltGrad
// keys it with the user's seed and numbers the words by element: element
// index n (the quantize call's offset + i) uses word (n mod 4) of the block
// with counter (n div 4, 0, 0, 0). The bits an element gets therefore depend
// only on (seed, n): never on how an array is chunked, threaded or vectorised.
#pragma once

#include <cstddef>
#include <cstdint>

namespace altgrad::sdk {

struct philox_block {
    uint32_t word[4];
};

// Philox4x32 with 10 rounds on counter (c0, c1, c2, c3) and key (k0, k1).
inline philox_block philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                  uint32_t k0, uint32_t k1) {
    constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
    constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
    for (int round = 0; round < 10; ++round) {
        const uint64_t p0 = uint64_t{kMul0} * c0;
        const uint64_t p1 = uint64_t{kMul1} * c2;
        const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
        const uint32_t n1 = static_cast<uint32_t>(p1);
        const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
        const uint32_t n3 = static_cast<uint32_t>(p0);
        c0 = n0; c1 = n1; c2 = n2; c3 = n3;
        k0 += kWeyl0;
        k1 += kWeyl1;
    }
    return {{c0, c1, c2, c3}};
}

// The 32 random bits of element `index` under `seed`.
inline uint32_t random_bits(uint64_t seed, uint64_t index) {
    const uint64_t block = index >> 2;
    const philox_block r = philox4x32_10(static_cast<uint32_t>(block),
                                         static_cast<uint32_t>(block >> 32), 0u, 0u,
                                         static_cast<uint32_t>(seed),
                                         static_cast<uint32_t>(seed >> 32));
    return r.word[index & 3u];
}

// Fill out[0, n) with the random bits of elements first, first+1, ...:
// identical to calling random_bits for each, a block of four at a time.
inline void fill_random_bits(uint64_t seed, uint64_t first, size_t n, uint32_t* out) {
    const uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
    size_t i = 0;
    while (i < n) {
        const uint64_t index = first + i;
        const uint64_t block = index >> 2;
        const philox_block r = philox4x32_10(static_cast<uint32_t>(block),
                                             static_cast<uint32_t>(block >> 32), 0u, 0u, k0, k1);
        for (unsigned lane = static_cast<unsigned>(index & 3u); lane < 4u && i < n; ++lane, ++i)
            out[i] = r.word[lane];
    }
}

}  // namespace altgrad::sdk
