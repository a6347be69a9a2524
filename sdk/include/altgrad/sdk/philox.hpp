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

#include <altgrad/sdk/rounding.hpp>

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif

namespace altgrad::sdk {

struct philox_block {
    uint32_t word[4];
};

// Philox4x32 with 10 rounds on counter (c0, c1, c2, c3) and key (k0, k1).
ALTGRAD_SDK_HD inline philox_block philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
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
        c0 = n0;
        c1 = n1;
        c2 = n2;
        c3 = n3;
        k0 += kWeyl0;
        k1 += kWeyl1;
    }
    return {{c0, c1, c2, c3}};
}

// The 32 random bits of element `index` under `seed`.
ALTGRAD_SDK_HD inline uint32_t random_bits(uint64_t seed, uint64_t index) {
    const uint64_t block = index >> 2;
    const philox_block r = philox4x32_10(static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0u,
                                         0u, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
    return r.word[index & 3u];
}

namespace detail {

// The widest x86 vector unit this CPU has that the SDK's loops are compiled
// for (AVX-512 means F, VL, BW and DQ, as Skylake-SP, Ice Lake and Zen 4/5
// have them), detected once; baseline elsewhere.
enum class vector_isa { baseline, avx2, avx512 };

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
inline vector_isa cpu_vector_isa() {
    static const vector_isa isa = [] {
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
            __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq"))
            return vector_isa::avx512;
        return __builtin_cpu_supports("avx2") ? vector_isa::avx2 : vector_isa::baseline;
    }();
    return isa;
}
#else
inline vector_isa cpu_vector_isa() { return vector_isa::baseline; }
#endif

// Whole Philox blocks block0, block0 + 1, ... (block numbers taken mod 2^62,
// as index >> 2 of a wrapped 64-bit index is), `blocks` of them, their four
// words stored in element order at dst. Portable: one independent block per
// iteration, written so that the compiler can vectorize across blocks.
inline void philox_fill_blocks_generic(uint32_t k0, uint32_t k1, uint64_t block0, size_t blocks,
                                       uint32_t* dst) {
    constexpr uint64_t kBlockMask = (uint64_t{1} << 62) - 1u;
    for (size_t b = 0; b < blocks; ++b) {
        const uint64_t block = (block0 + b) & kBlockMask;
        const philox_block r =
            philox4x32_10(static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0u, 0u, k0, k1);
        dst[4 * b + 0] = r.word[0];
        dst[4 * b + 1] = r.word[1];
        dst[4 * b + 2] = r.word[2];
        dst[4 * b + 3] = r.word[3];
    }
}

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define ALTGRAD_SDK_PHILOX_AVX2 1

// The same with AVX2, 16 blocks (64 elements) per step. Each 64-bit lane
// holds one block's 32-bit word in its low half: _mm256_mul_epu32 multiplies
// exactly those low halves into the full 64-bit product, whose two halves
// are the next round's words, so a round is two multiplies, two shifts and
// four XORs for four blocks. Only the low halves are meaningful; the high
// halves carry garbage that no multiply reads and the final pack drops.
__attribute__((target("avx2"), noinline)) inline void philox_fill_blocks_avx2(uint32_t k0, uint32_t k1,
                                                                              uint64_t block0, size_t blocks,
                                                                              uint32_t* dst) {
    constexpr int kVectors = 4;  // independent groups of four blocks in flight
    const __m256i mul0 = _mm256_set1_epi64x(0xD2511F53u), mul1 = _mm256_set1_epi64x(0xCD9E8D57u);
    const __m256i block_mask = _mm256_set1_epi64x(static_cast<long long>((uint64_t{1} << 62) - 1u));
    __m256i key0[10], key1[10];
    for (int r = 0; r < 10; ++r) {
        key0[r] = _mm256_set1_epi64x(static_cast<uint32_t>(k0 + static_cast<uint32_t>(r) * 0x9E3779B9u));
        key1[r] = _mm256_set1_epi64x(static_cast<uint32_t>(k1 + static_cast<uint32_t>(r) * 0xBB67AE85u));
    }
    const __m256i lane = _mm256_setr_epi64x(0, 1, 2, 3);
    size_t b = 0;
    while (b < blocks) {
        const size_t left = blocks - b;
        const int groups = left >= 4 * kVectors ? kVectors : static_cast<int>(left / 4);
        if (groups == 0) break;
        __m256i c0[kVectors], c1[kVectors], c2[kVectors], c3[kVectors];
        for (int g = 0; g < kVectors; ++g) {
            const uint64_t first_block = block0 + b + 4u * static_cast<unsigned>(g);
            const __m256i start = _mm256_set1_epi64x(static_cast<long long>(first_block));
            const __m256i block = _mm256_and_si256(_mm256_add_epi64(start, lane), block_mask);
            c0[g] = block;
            c1[g] = _mm256_srli_epi64(block, 32);
            c2[g] = _mm256_setzero_si256();
            c3[g] = _mm256_setzero_si256();
        }
        for (int r = 0; r < 10; ++r)
            for (int g = 0; g < kVectors; ++g) {
                const __m256i p0 = _mm256_mul_epu32(c0[g], mul0);
                const __m256i p1 = _mm256_mul_epu32(c2[g], mul1);
                c0[g] = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p1, 32), c1[g]), key0[r]);
                c1[g] = p1;
                c2[g] = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p0, 32), c3[g]), key1[r]);
                c3[g] = p0;
            }
        for (int g = 0; g < groups; ++g) {
            // Lane j of w01 is words 0,1 of block j; of w23, words 2,3.
            const __m256i w01 = _mm256_blend_epi32(c0[g], _mm256_slli_epi64(c1[g], 32), 0xAA);
            const __m256i w23 = _mm256_blend_epi32(c2[g], _mm256_slli_epi64(c3[g], 32), 0xAA);
            const __m256i lo = _mm256_unpacklo_epi64(w01, w23);  // blocks 0, 2
            const __m256i hi = _mm256_unpackhi_epi64(w01, w23);  // blocks 1, 3
            uint32_t* out = dst + 4 * (b + 4u * static_cast<unsigned>(g));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_permute2x128_si256(lo, hi, 0x20));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8), _mm256_permute2x128_si256(lo, hi, 0x31));
        }
        b += 4u * static_cast<unsigned>(groups);
    }
    if (b < blocks) philox_fill_blocks_generic(k0, k1, block0 + b, blocks - b, dst + 4 * b);
}

#define ALTGRAD_SDK_TARGET_PHILOX_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2")))

// The same with AVX-512: the AVX2 layout in 512-bit vectors (eight blocks per
// vector), the final interleave by one two-source permute per 16 words.
// Groups: vectors in flight. A round is a chain of multiply, shift and XOR
// per vector, so one vector alone waits on its own latency most of the time:
// measured on Zen 5 (e5m2 stochastic, 256 KiB), 4 groups 20.9 us, 5 17.5,
// 6 15.5, 7 18.7, 8 16.6 (at 7 and 8 the 4 x groups vectors of state no
// longer fit the 32 registers).
template <int Groups>
ALTGRAD_SDK_TARGET_PHILOX_AVX512 inline void philox_groups_avx512(uint32_t k0, uint32_t k1,
                                                                  uint64_t first_block, uint32_t* dst) {
    const __m512i mul0 = _mm512_set1_epi64(0xD2511F53u), mul1 = _mm512_set1_epi64(0xCD9E8D57u);
    const __m512i block_mask = _mm512_set1_epi64(static_cast<long long>((uint64_t{1} << 62) - 1u));
    const __m512i lane = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
    // 64-bit lanes of (w01, w23) in element order: block j's words 0,1 then 2,3.
    const __m512i first_half = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11);
    const __m512i second_half = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
    __m512i c0[Groups], c1[Groups], c2[Groups], c3[Groups];
    for (int g = 0; g < Groups; ++g) {
        const __m512i start =
            _mm512_set1_epi64(static_cast<long long>(first_block + 8u * static_cast<unsigned>(g)));
        const __m512i block = _mm512_and_si512(_mm512_add_epi64(start, lane), block_mask);
        c0[g] = block;
        c1[g] = _mm512_srli_epi64(block, 32);
        c2[g] = _mm512_setzero_si512();
        c3[g] = _mm512_setzero_si512();
    }
    for (int r = 0; r < 10; ++r) {
        const __m512i key0 =
            _mm512_set1_epi64(static_cast<uint32_t>(k0 + static_cast<uint32_t>(r) * 0x9E3779B9u));
        const __m512i key1 =
            _mm512_set1_epi64(static_cast<uint32_t>(k1 + static_cast<uint32_t>(r) * 0xBB67AE85u));
        for (int g = 0; g < Groups; ++g) {
            const __m512i p0 = _mm512_mul_epu32(c0[g], mul0);
            const __m512i p1 = _mm512_mul_epu32(c2[g], mul1);
            // 0x96: three-way XOR.
            c0[g] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p1, 32), c1[g], key0, 0x96);
            c1[g] = p1;
            c2[g] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p0, 32), c3[g], key1, 0x96);
            c3[g] = p0;
        }
    }
    for (int g = 0; g < Groups; ++g) {
        // Lane j of w01 is words 0,1 of block j; of w23, words 2,3.
        const __m512i w01 = _mm512_mask_blend_epi32(0xAAAA, c0[g], _mm512_slli_epi64(c1[g], 32));
        const __m512i w23 = _mm512_mask_blend_epi32(0xAAAA, c2[g], _mm512_slli_epi64(c3[g], 32));
        uint32_t* out = dst + 32u * static_cast<unsigned>(g);
        _mm512_storeu_si512(out, _mm512_permutex2var_epi64(w01, first_half, w23));
        _mm512_storeu_si512(out + 16, _mm512_permutex2var_epi64(w01, second_half, w23));
    }
}

ALTGRAD_SDK_TARGET_PHILOX_AVX512 __attribute__((noinline)) inline void philox_fill_blocks_avx512(
    uint32_t k0, uint32_t k1, uint64_t block0, size_t blocks, uint32_t* dst) {
    constexpr size_t kGroups = 6;
    size_t b = 0;
    for (; b + 8 * kGroups <= blocks; b += 8 * kGroups)
        philox_groups_avx512<kGroups>(k0, k1, block0 + b, dst + 4 * b);
    // The rest in as many groups as it fills (a 512-element chunk: 6 + 6 + 4).
    const size_t groups = (blocks - b) / 8;
    switch (groups) {
        case 5: philox_groups_avx512<5>(k0, k1, block0 + b, dst + 4 * b); break;
        case 4: philox_groups_avx512<4>(k0, k1, block0 + b, dst + 4 * b); break;
        case 3: philox_groups_avx512<3>(k0, k1, block0 + b, dst + 4 * b); break;
        case 2: philox_groups_avx512<2>(k0, k1, block0 + b, dst + 4 * b); break;
        case 1: philox_groups_avx512<1>(k0, k1, block0 + b, dst + 4 * b); break;
        default: break;
    }
    b += 8 * groups;
    if (b < blocks) philox_fill_blocks_avx2(k0, k1, block0 + b, blocks - b, dst + 4 * b);
}

#endif

}  // namespace detail

// Fill out[0, n) with the random bits of elements first, first+1, ...:
// identical to calling random_bits for each, a block of four at a time.
// Whole blocks go through the vectorized generators above (AVX-512 or AVX2
// when the CPU has it); a partial block at either end is cut from one scalar block.
inline void fill_random_bits(uint64_t seed, uint64_t first, size_t n, uint32_t* out) {
    const uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
    size_t i = 0;
    // Leading lanes up to a block boundary.
    if (n > 0 && (first & 3u) != 0) {
        const uint64_t block = first >> 2;
        const philox_block r =
            philox4x32_10(static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0u, 0u, k0, k1);
        for (unsigned lane = static_cast<unsigned>(first & 3u); lane < 4u && i < n; ++lane, ++i)
            out[i] = r.word[lane];
    }
    // Whole blocks.
    const size_t blocks = (n - i) / 4;
    if (blocks > 0) {
        const uint64_t block0 = (first + i) >> 2;
#ifdef ALTGRAD_SDK_PHILOX_AVX2
        const detail::vector_isa isa = detail::cpu_vector_isa();
        if (isa == detail::vector_isa::avx512)
            detail::philox_fill_blocks_avx512(k0, k1, block0, blocks, out + i);
        else if (isa == detail::vector_isa::avx2)
            detail::philox_fill_blocks_avx2(k0, k1, block0, blocks, out + i);
        else
#endif
            detail::philox_fill_blocks_generic(k0, k1, block0, blocks, out + i);
        i += 4 * blocks;
    }
    // Trailing lanes.
    if (i < n) {
        const uint64_t block = (first + i) >> 2;
        const philox_block r =
            philox4x32_10(static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0u, 0u, k0, k1);
        for (unsigned lane = 0; i < n; ++lane, ++i) out[i] = r.word[lane];
    }
}

// fill_random_bits, then each word ANDed with mask (random_bits_mask,
// rounding.hpp: the top bits a call's random_bits keeps). A mask of all ones,
// the 32-bit default, costs one compare per fill.
inline void fill_random_bits(uint64_t seed, uint64_t first, size_t n, uint32_t mask, uint32_t* out) {
    fill_random_bits(seed, first, n, out);
    if (mask != ~0u)
        for (size_t i = 0; i < n; ++i) out[i] &= mask;
}

}  // namespace altgrad::sdk
