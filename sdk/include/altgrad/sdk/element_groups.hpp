// AltGrad SDK: the work of one GPU thread of the format adapter's CUDA
// kernels (cuda_kernels.cuh), written as plain functions that the host can
// run too, so the CPU test suite checks the kernels' indexing, random bits
// and scaling without a GPU (tests/sdk/element_groups_test.cpp).
//
// A call's elements are cut into groups of four whose global indices
// (offset + i) share one Philox block, index >> 2: group g covers global
// indices [(offset & ~3) + 4g, +4), clipped to the call's [offset,
// offset + count). One Philox evaluation then gives the random bits of all
// four, the very bits random_bits(seed, offset + i) gives the host loop.
#pragma once

#include <cstddef>
#include <cstdint>

#include <altgrad/abi/format.h>
#include <altgrad/sdk/philox.hpp>
#include <altgrad/sdk/rounding.hpp>
#include <altgrad/sdk/scales.hpp>

namespace altgrad::sdk {

constexpr uint64_t kNoElement = ~uint64_t{0};

// The groups a call of `count` elements starting at global index `offset` has.
ALTGRAD_SDK_HD inline uint64_t group_count(uint64_t offset, size_t count) {
    return count == 0 ? 0 : ((offset & 3u) + count + 3u) / 4u;
}

struct element_group {
    uint64_t base;        // global index of the group's lane 0
    philox_block random;  // the lanes' random bits (stochastic rounding only)
};

// random_mask: the top bits the call's random_bits keeps (random_bits_mask).
template <altgrad_rounding R>
ALTGRAD_SDK_HD inline element_group group_of(uint64_t g, uint64_t offset, uint64_t seed,
                                             uint32_t random_mask = ~0u) {
    element_group e{(offset & ~uint64_t{3}) + 4u * g, {{0u, 0u, 0u, 0u}}};
    if constexpr (R == ALTGRAD_ROUND_STOCHASTIC) {
        const uint64_t block = e.base >> 2;
        e.random = philox4x32_10(static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0u, 0u,
                                 static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
        for (unsigned lane = 0; lane < 4; ++lane) e.random.word[lane] &= random_mask;
    } else {
        (void)random_mask;
    }
    return e;
}

// fl(x*s) and fl(r/s), correctly rounded on both sides (on the GPU whatever
// the compiler's fast-math flags). The host loop's shortcuts (no multiply
// for s == 1, a multiply by 1/s for a power of two) give the same bits.
ALTGRAD_SDK_INLINE float scale_up(float x, float s) {
#ifdef __CUDA_ARCH__
    return __fmul_rn(x, s);
#else
    return x * s;
#endif
}
ALTGRAD_SDK_INLINE float scale_down(float r, float s) {
#ifdef __CUDA_ARCH__
    return __fdiv_rn(r, s);
#else
    return r / s;
#endif
}

// One scaled element by the shortest kernel that takes it: the format's
// normal-range fast path where it has one and the element lies in its range
// (the bits and counts of quantize_bits, see exmy.hpp), else quantize_bits.
template <class K, altgrad_rounding R, altgrad_overflow O>
ALTGRAD_SDK_HD inline uint32_t quantize_element(const K& k, uint32_t bits, uint32_t random,
                                                element_counts& c) {
    if constexpr (detail::has_normal_fast_path<K>::value) {
        if ((k.fast_flags(bits) & 1u) == 0) {
            uint32_t overflow = 0;
            const uint32_t q = k.template quantize_normal_bits<R, O>(bits, random, overflow);
            c.overflow += overflow;
            return q;
        }
    }
    return k.template quantize_bits<R, O>(bits, random, c);
}

// Quantize the elements of group g of a call: in and out are the call's
// buffers (element i at global index offset + i, scale scales.at(i), random
// bits masked by random_mask).
template <class K, altgrad_rounding R, altgrad_overflow O>
ALTGRAD_SDK_HD inline void quantize_group(const K& k, const float* in, float* out, size_t count,
                                          const scale_source& scales, uint64_t seed, uint64_t offset,
                                          uint32_t random_mask, uint64_t g, element_counts& c) {
    const element_group e = group_of<R>(g, offset, seed, random_mask);
    for (unsigned lane = 0; lane < 4; ++lane) {
        const uint64_t index = e.base + lane;
        if (index < offset || index - offset >= count) continue;
        const size_t i = static_cast<size_t>(index - offset);
        const float s = scales.at(i);
        const uint32_t q =
            quantize_element<K, R, O>(k, float_bits(scale_up(in[i], s)), e.random.word[lane], c);
        out[i] = scale_down(bits_float(q), s);
    }
}

// Encode the elements of group g into codes of type Code; returns the first
// element (call-relative) the format could not hold, or kNoElement.
template <class K, altgrad_rounding R, altgrad_overflow O, class Code>
ALTGRAD_SDK_HD inline uint64_t encode_group(const K& k, const float* in, Code* codes, size_t count,
                                            const scale_source& scales, uint64_t seed, uint64_t offset,
                                            uint32_t random_mask, uint64_t g, element_counts& c) {
    const element_group e = group_of<R>(g, offset, seed, random_mask);
    uint64_t first_bad = kNoElement;
    for (unsigned lane = 0; lane < 4; ++lane) {
        const uint64_t index = e.base + lane;
        if (index < offset || index - offset >= count) continue;
        const size_t i = static_cast<size_t>(index - offset);
        bool bad = false;
        const uint32_t code = k.template encode_bits<R, O>(float_bits(scale_up(in[i], scales.at(i))),
                                                           e.random.word[lane], c, bad);
        if (bad && first_bad == kNoElement) first_bad = i;
        codes[i] = static_cast<Code>(code);
    }
    return first_bad;
}

// Decode element i; a code with bits above total_bits sets *bad (and decodes
// as code 0 so nothing reads past the format).
template <class K, class Code>
ALTGRAD_SDK_HD inline float decode_element(const K& k, const Code* codes, size_t i,
                                           const scale_source& scales, uint64_t limit, bool& bad) {
    const uint32_t code = codes[i];
    bad = code >= limit;
    const float v = k.decode(bad ? 0u : code);
    const float s = scales.at(i);
    return s == 1.0f ? v : scale_down(v, s);
}

}  // namespace altgrad::sdk
