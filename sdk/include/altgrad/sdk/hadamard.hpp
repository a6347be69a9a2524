// AltGrad SDK: the fast Walsh-Hadamard transform, orthonormal, in place.
//
// H_d is Sylvester's Hadamard matrix of order d (a power of two): H_1 = [1],
// H_2k = [[H_k, H_k], [H_k, -H_k]], so H_d[i][j] = (-1)^popcount(i & j). The
// transform here computes y = H_d x / sqrt(d), which is orthonormal and its
// own inverse (H_d H_d = d I, H_d symmetric), in log2(d) butterfly stages of
// d/2 additions and d/2 subtractions each, then one multiplication of every
// element by fl(1/sqrt(d)) (exact when log2(d) is even: 1/4 for d = 16, 1/8
// for d = 64).
//
// Determinism: the order of operations is fixed (stage by stage, span 1, 2,
// 4, ...; within a stage, element j pairs with j + span), float32 throughout,
// and no multiplication feeds an addition (so no contraction into a fused
// multiply-add can change a result; a compiler may vectorise the independent
// butterflies but not reassociate them): the same bits on every call and
// every machine with IEEE float32.
// Every element of a block takes part in every stage: a NaN or Inf spreads
// over its whole block.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include <altgrad/sdk/philox.hpp>
#include <altgrad/sdk/rounding.hpp>  // ALTGRAD_SDK_HD

namespace altgrad::sdk {

// fl(1/sqrt(d)), the normalisation of H_d: sqrt and division in double, both
// correctly rounded, then one rounding to float (the same on every machine).
inline float hadamard_scale(uint32_t d) {
    return static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
}

// The unnormalised butterflies on one block of d elements: x <- H_d x.
ALTGRAD_SDK_HD inline void fwht_unnormalised(float* x, uint32_t d) {
    for (uint32_t span = 1; span < d; span *= 2)
        for (uint32_t start = 0; start < d; start += 2 * span) {
            float* lo = x + start;
            float* hi = lo + span;
            for (uint32_t j = 0; j < span; ++j) {  // independent pairs: vectorisable
                const float a = lo[j], b = hi[j];
                lo[j] = a + b;
                hi[j] = a - b;
            }
        }
}

namespace detail {

// fwht below, one scalar butterfly at a time: the definition the vector path must match bit for bit.
inline void fwht_baseline(float* x, size_t blocks, uint32_t d) {
    const float scale = hadamard_scale(d);
    for (size_t b = 0; b < blocks; ++b) {
        float* block = x + b * d;
        fwht_unnormalised(block, d);
        for (uint32_t j = 0; j < d; ++j) block[j] *= scale;
    }
}

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
// The same stages on 8 lanes, for d a multiple of 8: spans 1, 2 and 4 inside each vector (a lane's
// partner brought beside it by a permute; the low lane of a pair keeps a + b, the high one takes
// partner - itself = a - b), then spans 8 and up between whole vectors, then the scale. Every
// element sees fwht_baseline's operations in its order, so the results are its bits.
__attribute__((target("avx2"))) inline void fwht_avx2(float* x, size_t blocks, uint32_t d) {
    const __m256 scale = _mm256_set1_ps(hadamard_scale(d));
    for (size_t b = 0; b < blocks; ++b) {
        float* block = x + b * d;
        for (uint32_t i = 0; i < d; i += 8) {
            __m256 v = _mm256_loadu_ps(block + i);
            __m256 p = _mm256_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1));  // span 1: high lanes 1, 3, 5, 7
            v = _mm256_blend_ps(_mm256_add_ps(v, p), _mm256_sub_ps(p, v), 0xAA);
            p = _mm256_permute_ps(v, _MM_SHUFFLE(1, 0, 3, 2));  // span 2: high lanes 2, 3, 6, 7
            v = _mm256_blend_ps(_mm256_add_ps(v, p), _mm256_sub_ps(p, v), 0xCC);
            p = _mm256_permute2f128_ps(v, v, 1);  // span 4: high lanes 4 to 7
            _mm256_storeu_ps(block + i, _mm256_blend_ps(_mm256_add_ps(v, p), _mm256_sub_ps(p, v), 0xF0));
        }
        for (uint32_t span = 8; span < d; span *= 2)
            for (uint32_t start = 0; start < d; start += 2 * span)
                for (uint32_t j = 0; j < span; j += 8) {
                    float* lo = block + start + j;
                    float* hi = lo + span;
                    const __m256 a = _mm256_loadu_ps(lo), c = _mm256_loadu_ps(hi);
                    _mm256_storeu_ps(lo, _mm256_add_ps(a, c));
                    _mm256_storeu_ps(hi, _mm256_sub_ps(a, c));
                }
        for (uint32_t i = 0; i < d; i += 8)
            _mm256_storeu_ps(block + i, _mm256_mul_ps(_mm256_loadu_ps(block + i), scale));
    }
}
#endif

}  // namespace detail

// y = H_d x / sqrt(d) on `blocks` consecutive blocks of d elements at x, in
// place. d must be a power of two (the caller checks it: power_of_two_param
// in transform_plugin.hpp does for a plugin's parameter). On x86-64 with AVX2
// and d >= 8, eight butterflies at a time, with the same results.
inline void fwht(float* x, size_t blocks, uint32_t d) {
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
    if (d >= 8 && detail::cpu_vector_isa() != detail::vector_isa::baseline)
        return detail::fwht_avx2(x, blocks, d);
#endif
    detail::fwht_baseline(x, blocks, d);
}

// The random sign vector of a randomised Hadamard transform H_d diag(s):
// s_j = -1 when bit 31 of random_bits(seed, j) (philox.hpp: Philox4x32-10
// keyed by the seed, element j) is set, else +1, for j in 0..d-1. One vector
// for every block of every row (Transformer Engine's choice), so a product's
// two operands, transformed in separate calls, meet the same signs.
inline void hadamard_signs(uint64_t seed, uint32_t d, float* signs) {
    for (uint32_t j = 0; j < d; ++j) signs[j] = (random_bits(seed, j) >> 31) != 0 ? -1.0f : 1.0f;
}

// What one CUDA thread does to one block of d elements (hadamard_cuda.cuh):
// x * s before the butterflies (forward) or after them and the scale
// (inverse), none without signs (s null): the operations of the host path
// (apply_signs, fwht) in its order, so the GPU gives its bits. Host code
// too, so the CPU tests check it.
ALTGRAD_SDK_HD inline void transform_block(float* x, uint32_t d, const float* signs, bool inverse,
                                           float scale) {
    if (signs != nullptr && !inverse)
        for (uint32_t j = 0; j < d; ++j) x[j] *= signs[j];
    fwht_unnormalised(x, d);
    for (uint32_t j = 0; j < d; ++j) x[j] *= scale;
    if (signs != nullptr && inverse)
        for (uint32_t j = 0; j < d; ++j) x[j] *= signs[j];
}

// x <- x * s on `blocks` consecutive blocks of d elements (exact: s is +-1).
inline void apply_signs(float* x, size_t blocks, uint32_t d, const float* signs) {
    for (size_t b = 0; b < blocks; ++b) {
        float* block = x + b * d;
        for (uint32_t j = 0; j < d; ++j) block[j] *= signs[j];
    }
}

}  // namespace altgrad::sdk
