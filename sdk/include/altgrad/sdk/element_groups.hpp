// AltGrad SDK: the work of one GPU thread of the CUDA kernels
// (cuda_kernels.cuh), written as plain functions that the host can run too,
// so the CPU test suite checks the kernels' indexing, random bits and
// scaling without a GPU (tests/sdk/element_groups_test.cpp).
//
// A call's elements are cut into groups of four whose global indices
// (offset + i) share one Philox block, index >> 2: group g covers global
// indices [(offset & ~3) + 4g, +4), clipped to the call's [offset,
// offset + count). One Philox evaluation then gives the random bits of all
// four, the very bits random_bits(seed, offset + i) gives the host loop.
// A group whose four lanes all lie in the call is whole: the kernels read
// and write it as one 16-byte quad where the buffers allow (quads_aligned).
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

// The Philox words of the four global indices first .. first + 3, masked to
// the call's random_bits (random_mask: random_bits_mask): one block when
// first is a multiple of 4, else the two it straddles. Zeros unless R is
// stochastic.
template <altgrad_rounding R>
ALTGRAD_SDK_HD inline philox_block random_quad(uint64_t seed, uint64_t first, uint32_t random_mask) {
    philox_block r{{0u, 0u, 0u, 0u}};
    if constexpr (R == ALTGRAD_ROUND_STOCHASTIC) {
        const auto block_at = [seed](uint64_t block) {
            return philox4x32_10(static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), 0u, 0u,
                                 static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
        };
        const uint64_t block = first >> 2;
        const unsigned lead = static_cast<unsigned>(first & 3u);
        r = block_at(block);
        if (lead != 0) {
            const philox_block next = block_at(block + 1);
            // Word w of the pair (w = lane + lead < 8) by selects, not an indexed array: on the GPU an
            // array indexed at run time would live in local memory.
            const auto word = [&](unsigned w) {
                const uint32_t in_first =
                    (w & 2u) ? ((w & 1u) ? r.word[3] : r.word[2]) : ((w & 1u) ? r.word[1] : r.word[0]);
                const uint32_t in_next = (w & 2u) ? ((w & 1u) ? next.word[3] : next.word[2])
                                                  : ((w & 1u) ? next.word[1] : next.word[0]);
                return w < 4u ? in_first : in_next;
            };
            r = philox_block{{word(lead), word(lead + 1u), word(lead + 2u), word(lead + 3u)}};
        }
        for (unsigned lane = 0; lane < 4; ++lane) r.word[lane] &= random_mask;
    } else {
        (void)seed, (void)first, (void)random_mask;
    }
    return r;
}

template <altgrad_rounding R>
ALTGRAD_SDK_HD inline element_group group_of(uint64_t g, uint64_t offset, uint64_t seed,
                                             uint32_t random_mask = ~0u) {
    const uint64_t base = (offset & ~uint64_t{3}) + 4u * g;
    return element_group{base, random_quad<R>(seed, base, random_mask)};
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

// ---- Whole groups as 16-byte quads (the kernels' vector path) ----

// The four floats of one group, as one aligned 16-byte load gives them.
struct alignas(16) quad {
    float v[4];
};

// Whether all four lanes of group g lie in the call (all but, perhaps, the
// first and the last group).
ALTGRAD_SDK_HD inline bool group_is_whole(uint64_t g, uint64_t offset, size_t count) {
    const uint64_t lead = offset & 3u;  // lanes of group 0 before the call
    return 4u * g >= lead && 4u * g - lead + 4u <= count;
}

// The call-relative index of a whole group's lane 0.
ALTGRAD_SDK_HD inline size_t group_first_element(uint64_t g, uint64_t offset) {
    return static_cast<size_t>(4u * g - (offset & 3u));
}

// Whether buffer p (a call's input or output) holds the lane 0 of every group
// at a 16-byte boundary: element i sits at p + 4i and lane 0 is the element
// whose global index offset + i is a multiple of 4.
inline bool quads_aligned(const void* p, uint64_t offset) {
    const uintptr_t address = reinterpret_cast<uintptr_t>(p);
    return address % 4 == 0 && (address / 4 - offset) % 4 == 0;
}

// A scale s and the way a result returns from it: r * (1/s) where s is a
// power of two whose reciprocal is a float (the product is then the exact
// quotient rounded once, the bits of r / s, and a multiply is a fraction of
// a division's cost), else r / s.
struct group_scale {
    float scale = 1.0f;
    float inverse = 1.0f;
    bool exact_inverse = true;
};
ALTGRAD_SDK_HD inline group_scale group_scale_of(float s) {
    const uint32_t b = float_bits(s), field = b >> 23;  // field > 255: negative, never a power of two here
    group_scale g{s, 1.0f, false};
    if ((b & 0x7FFFFFu) == 0 && field - 1u < 254u) {  // 2^(field - 127), a normal float
        g.inverse = bits_float(field == 254u ? 0x00400000u : (254u - field) << 23);  // 2^-127 is subnormal
        g.exact_inverse = true;
    } else if (b == 0x00400000u) {  // 2^-127, whose reciprocal 2^127 is a float
        g.inverse = bits_float(254u << 23);
        g.exact_inverse = true;
    }
    return g;
}

// Quantize the first `present` lanes of x at scale s, with the lanes' random
// words: q(fl(x*s)) returned from s, per lane as quantize_group does it.
template <class K, altgrad_rounding R, altgrad_overflow O>
ALTGRAD_SDK_HD inline quad quantize_quad(const K& k, const quad& x, const group_scale& s,
                                         const philox_block& random, element_counts& c,
                                         unsigned present = 4) {
    quad y = x;
#ifdef __CUDA_ARCH__
#pragma unroll
#endif
    for (unsigned lane = 0; lane < 4; ++lane) {
        if (lane >= present) continue;
        const uint32_t q =
            quantize_element<K, R, O>(k, float_bits(scale_up(x.v[lane], s.scale)), random.word[lane], c);
        y.v[lane] = s.exact_inverse ? scale_up(bits_float(q), s.inverse) : scale_down(bits_float(q), s.scale);
    }
    return y;
}

// The scale of a whole group's lanes, which share it: the call's one scale,
// or (block scales, with block_size a multiple of 4 and offset of the call a
// multiple of 4, so that no group straddles two blocks) its block's.
// block_shift: log2(block_size) when that is a power of two (a shift instead
// of a 64-bit division), else kNoShift.
constexpr uint32_t kNoShift = ~0u;
// log2(block_size) for a power of two, else kNoShift.
inline uint32_t block_shift_of(size_t block_size) {
    if (block_size == 0 || (block_size & (block_size - 1)) != 0) return kNoShift;
    uint32_t shift = 0;
    while ((size_t{1} << shift) != block_size) ++shift;
    return shift;
}
ALTGRAD_SDK_HD inline float whole_group_scale(const scale_source& s, size_t first, uint32_t block_shift) {
    if (!s.per_block()) return s.scale;
    return s.block_scales[block_shift != kNoShift ? first >> block_shift : first / s.block_size];
}

// Whole group g of a call, given its four inputs x (a quad load): the four
// results quantize_group writes for it.
template <class K, altgrad_rounding R, altgrad_overflow O>
ALTGRAD_SDK_HD inline quad quantize_whole_group(const K& k, const quad& x, const scale_source& scales,
                                                uint32_t block_shift, uint64_t seed, uint64_t offset,
                                                uint32_t random_mask, uint64_t g, element_counts& c) {
    const element_group e = group_of<R>(g, offset, seed, random_mask);
    const float s = whole_group_scale(scales, group_first_element(g, offset), block_shift);
    return quantize_quad<K, R, O>(k, x, group_scale_of(s), e.random, c);
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
