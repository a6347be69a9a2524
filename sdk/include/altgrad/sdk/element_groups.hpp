// AltGrad SDK: the work of one GPU thread of the CUDA kernels
// (cuda_kernels.cuh), written as plain functions that the host can run too,
// so the CPU test suite checks the kernels' indexing, random bits, scaling
// and block scales without a GPU (tests/sdk/element_groups_test.cpp,
// tests/cuda/block_groups_test.cpp).
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
#include <string>
#include <type_traits>

#include <altgrad/abi/format.h>
#include <altgrad/sdk/error.hpp>
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

// ---- Block scales derived on the device (MXFP8, NVFP4) ----
//
// The rules of the host's scales_from_amaxes (host/src/quant/block_scales.hpp
// states them), per block, bit for bit, for the grids a kernel can hold:
// mx_floor and round_up on powers of two (OCP MX's E8M0, "pow2"), two_level
// on an ExMy scale format's values (NVFP4's E4M3). A block's amax is the
// largest of its |x| as bits (a NaN wins, as block_amaxes has it); its
// encode scale s = 1/X then quantizes it as a block-scaled call would.

enum class block_scale_rule : uint32_t { mx_floor, round_up, two_level };  // the config's scale_rule

// What the rule gave one block: its encode scale s, and the host's
// block_scale_stats for it (neutral: amax 0, Inf or NaN, s = 1).
struct block_scale {
    float scale = 1.0f;
    bool neutral = false, saturated = false, underflowed = false;
};

// The powers of two 2^kmin .. 2^kmax, -127 <= kmin <= kmax <= 127 (E8M0:
// -127 .. 127; "pow2": -126 .. 126).
struct power_of_two_grid {
    int32_t kmin = -127, kmax = 127;
};

// The positive finite values of an ExMy scale format, whose kernel SK rounds
// onto them: toward zero is the grid value at or below x, stochastic with
// every random bit set the one at or above (it steps away whenever a dropped
// bit is set; from x >= smallest at most 23 bits drop, so none is lost).
template <class SK>
struct format_grid {
    SK kernel;
    float smallest = 0, largest = 0;
    float nearest_limit = 0;  // largest + half the gap below it: from here on a nearest X is saturated

    // x in [smallest, largest].
    ALTGRAD_SDK_HD float down(float x) const {
        element_counts unused;
        return bits_float(kernel.template quantize_bits<ALTGRAD_ROUND_TOWARD_ZERO, ALTGRAD_OVERFLOW_SATURATE>(
            float_bits(x), 0u, unused));
    }
    ALTGRAD_SDK_HD float up(float x) const {
        element_counts unused;
        return bits_float(kernel.template quantize_bits<ALTGRAD_ROUND_STOCHASTIC, ALTGRAD_OVERFLOW_SATURATE>(
            float_bits(x), ~0u, unused));
    }
    // The nearest, a tie to the larger (scale_grid::nearest). Both differences
    // are exact in float: neighbouring grid values differ by at most a factor 2.
    ALTGRAD_SDK_HD float nearest(float x) const {
        const float below = down(x), above = up(x);
        return x - below < above - x ? below : above;
    }
};

constexpr uint32_t kFloatMaxBits = 0x7F7FFFFFu;
ALTGRAD_SDK_HD inline bool finite_bits(uint32_t b) { return (b & kInfBits) != kInfBits; }

// floor(log2 a) and the significand scaled into [2^23, 2^24) of a positive
// finite float given as bits, subnormals included.
ALTGRAD_SDK_INLINE uint32_t leading_zeros(uint32_t x) {  // x != 0
#ifdef __CUDA_ARCH__
    return static_cast<uint32_t>(__clz(x));
#else
    return static_cast<uint32_t>(__builtin_clz(x));
#endif
}
ALTGRAD_SDK_HD inline int32_t floor_log2_bits(uint32_t b) {
    const int32_t field = static_cast<int32_t>(b >> 23);
    return field != 0 ? field - 127 : (31 - static_cast<int32_t>(leading_zeros(b))) - 149;
}
ALTGRAD_SDK_HD inline uint32_t significand_bits(uint32_t b) {
    return (b >> 23) != 0 ? (b & 0x7FFFFFu) | 0x800000u : b << (leading_zeros(b) - 8u);
}

// How a tensor's blocks get their scales: the rule, the grid, the element
// format's largest finite value M and what follows from it. Trivially
// copyable, so a kernel takes it by value; made by block_recipe_on_powers_of_two
// and two_level_recipe (cuda_kernels.cuh), which check what the kernels assume.
template <class G>
struct block_scale_recipe {
    block_scale_rule rule = block_scale_rule::mx_floor;
    G grid{};
    float element_max = 1.0f;            // M, a normal float
    int32_t emax = 0;                    // floor(log2 M)
    uint32_t element_max_significand{};  // significand_bits(M)
    float inverse_element_max = 1.0f;    // fl(1/M)
};

// The recipes the kernels hold, checked: M a normal float (so that its
// float and double agree), the rule one the grid serves. Throw
// INVALID_ARGUMENT otherwise.
template <class G>
block_scale_recipe<G> block_scale_recipe_for(block_scale_rule rule, const G& grid, double element_max) {
    const float m = static_cast<float>(element_max);
    if (!(static_cast<double>(m) == element_max && positive_finite_bits(float_bits(m)) &&
          (float_bits(m) >> 23) != 0))
        throw plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT,
                           "block scales: the element format's largest value must be a normal float, got " +
                               std::to_string(element_max));
    block_scale_recipe<G> r;
    r.rule = rule;
    r.grid = grid;
    r.element_max = m;
    r.emax = floor_log2_bits(float_bits(m));
    r.element_max_significand = significand_bits(float_bits(m));
    r.inverse_element_max = 1.0f / m;
    return r;
}

// mx_floor or round_up on the powers of two 2^kmin .. 2^kmax (E8M0: -127, 127).
inline block_scale_recipe<power_of_two_grid> block_recipe_on_powers_of_two(block_scale_rule rule,
                                                                           int32_t kmin, int32_t kmax,
                                                                           double element_max) {
    if (rule == block_scale_rule::two_level)
        throw plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT,
                           "block scales: two_level on powers of two is not done on the device");
    if (!(-127 <= kmin && kmin <= kmax && kmax <= 127))
        throw plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT,
                           "block scales: powers of two 2^" + std::to_string(kmin) + " .. 2^" +
                               std::to_string(kmax) + " reach beyond 2^-127 .. 2^127");
    return block_scale_recipe_for(rule, power_of_two_grid{kmin, kmax}, element_max);
}

// two_level on the positive finite values of ExMy scale format F (an
// exmy_format: NVFP4's E4M3).
template <class F>
auto two_level_recipe(const F& scale_format, double element_max) {
    using SK = std::decay_t<decltype(scale_format.kernel())>;
    const altgrad_format_info info = scale_format.info();
    format_grid<SK> grid;
    grid.kernel = scale_format.kernel();
    grid.smallest = static_cast<float>(info.has_subnormals ? info.min_subnormal : info.min_normal);
    grid.largest = static_cast<float>(info.max_finite);
    const float below_largest = grid.down(bits_float(float_bits(grid.largest) - 1u));
    const double limit =
        static_cast<double>(grid.largest) + (grid.largest - static_cast<double>(below_largest)) / 2;
    grid.nearest_limit = static_cast<float>(limit);
    if (!(grid.smallest > 0.0f && grid.smallest < grid.largest) ||
        static_cast<double>(grid.nearest_limit) != limit)
        throw plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT,
                           "block scales: the scale format's values are no grid the device rounds onto");
    return block_scale_recipe_for(block_scale_rule::two_level, grid, element_max);
}

// two_level's tensor encode scale g = fl(fl(largest * M) / A) (A the tensor's
// amax; g = 1 where A is 0, Inf or NaN, FLT_MAX where the quotient is not
// finite) and the two products every block takes from it, in
// TransformerEngine's order, as scales_from_amaxes has them. Unused by the
// other rules.
struct tensor_scale {
    float g = 1.0f;
    float g_over_max = 1.0f;  // fl(g * fl(1/M))
    float inverse = 1.0f;     // fl(1/g)
};
template <class G>
ALTGRAD_SDK_HD inline tensor_scale tensor_scale_of(const block_scale_recipe<G>& r,
                                                   uint32_t tensor_amax_bits) {
    tensor_scale t;
    if constexpr (!std::is_same_v<G, power_of_two_grid>) {
        if (r.rule == block_scale_rule::two_level && positive_finite_bits(tensor_amax_bits)) {
            t.g = scale_down(scale_up(r.grid.largest, r.element_max), bits_float(tensor_amax_bits));
            if (!finite_bits(float_bits(t.g))) t.g = bits_float(kFloatMaxBits);
        }
    }
    t.g_over_max = scale_up(t.g, r.inverse_element_max);
    t.inverse = scale_down(1.0f, t.g);
    return t;
}

// 2^-k as a float, k in [-127, 127] (2^-127 is subnormal).
ALTGRAD_SDK_HD inline float power_of_two_inverse(int32_t k) {
    return bits_float(k <= 126 ? static_cast<uint32_t>(127 - k) << 23 : 0x00400000u);
}

// The largest float s' <= s with fl(a * s') <= M (a, M > 0): the host's
// encode_scale_never_clipping, which steps s down one float at a time while
// fl(a * s) > M. As fl(a * s) never falls when s grows, the answer is s or the
// largest such float below it, which lies within a few floats of fl(M / a):
// found from there, not in up to 2^23 steps from s. Only a clamped X moves s.
ALTGRAD_SDK_HD inline float never_clipping(float s, float a, float m) {
    if (!(scale_up(a, s) > m)) return s;
    const auto clips = [&](float c) { return scale_up(a, c) > m; };
    float c = scale_down(m, a);  // < s, as fl(a * s) > M
    while (c > 0.0f && clips(c)) c = bits_float(float_bits(c) - 1u);
    while (float_bits(c) + 1u < float_bits(s) && !clips(bits_float(float_bits(c) + 1u)))
        c = bits_float(float_bits(c) + 1u);
    return c;
}

// mx_floor and round_up on powers of two. mx_floor is the host's branch-free
// mx_floor_on_powers_of_two: X = 2^clamp(floor(log2 a) - emax). round_up is
// X = a/M rounded up to a power of two: with a = A 2^ea and M = B 2^eb (A, B
// their significands) floor(log2(a/M)) is ea - eb - (A < B), and a/M a power
// of two exactly when A == B; the host's double quotient gives the same, as
// A/B lies at least 2^-25 away from every power of two it is not. Then
// s = never_clipping(1/X).
ALTGRAD_SDK_HD inline block_scale block_scale_for(const block_scale_recipe<power_of_two_grid>& r,
                                                  uint32_t amax_bits, const tensor_scale&) {
    block_scale b;
    if (!positive_finite_bits(amax_bits)) {
        b.neutral = true;
        return b;
    }
    const int32_t kmin = r.grid.kmin, kmax = r.grid.kmax, log2_a = floor_log2_bits(amax_bits);
    int32_t k = 0;  // X = 2^k
    if (r.rule == block_scale_rule::mx_floor) {
        const int32_t ideal = log2_a - r.emax;
        b.saturated = ideal > kmax;
        b.underflowed = ideal < kmin;
        k = ideal < kmin ? kmin : ideal > kmax ? kmax : ideal;
        b.scale = power_of_two_inverse(k);
        return b;
    }
    const uint32_t significand = significand_bits(amax_bits);
    const bool exact = significand == r.element_max_significand;
    const int32_t floor_k = log2_a - r.emax - (significand < r.element_max_significand ? 1 : 0);
    b.saturated = floor_k > kmax || (floor_k == kmax && !exact);
    b.underflowed = !b.saturated && floor_k < kmin;
    k = b.saturated ? kmax : b.underflowed ? kmin : exact ? floor_k : floor_k + 1;
    b.scale = never_clipping(power_of_two_inverse(k), bits_float(amax_bits), r.element_max);
    return b;
}

// two_level on an ExMy scale format: X = the grid value nearest
// fl(a * g_over_max) (a tie to the larger), clamped into the grid, counted
// saturated only from nearest_limit on; s = fl(1 / fl(X * fl(1/g))), FLT_MAX
// where that is not finite.
template <class SK>
ALTGRAD_SDK_HD inline block_scale block_scale_for(const block_scale_recipe<format_grid<SK>>& r,
                                                  uint32_t amax_bits, const tensor_scale& t) {
    block_scale b;
    if (!positive_finite_bits(amax_bits)) {
        b.neutral = true;
        return b;
    }
    const float ideal = scale_up(bits_float(amax_bits), t.g_over_max);
    float x = 0.0f;
    if (ideal > r.grid.largest) {
        x = r.grid.largest;
        b.saturated = ideal >= r.grid.nearest_limit;
    } else if (ideal < r.grid.smallest) {
        x = r.grid.smallest;
        b.underflowed = true;
    } else {
        x = r.grid.nearest(ideal);
    }
    const float s = scale_down(1.0f, scale_up(x, t.inverse));
    b.scale = finite_bits(float_bits(s)) ? s : bits_float(kFloatMaxBits);
    return b;
}

// The largest |x| of a quad's lanes, as bits (a lane past the call's end holds 0).
ALTGRAD_SDK_HD inline uint32_t quad_amax_bits(const quad& x) {
    uint32_t m = 0;
    for (unsigned lane = 0; lane < 4; ++lane) {
        const uint32_t a = float_bits(x.v[lane]) & ~kSignBit;
        m = a > m ? a : m;
    }
    return m;
}

// A call's tallies on the device: the elements' overflow and underflow (a
// quantize call's counts) and the blocks' (block_scale_stats without the
// scales' range as doubles: the encode scales' instead, as bits).
struct block_tally {
    enum count_index : unsigned { kOverflow, kUnderflow, kSaturated, kUnderflowed, kNeutral, kCounts };
    unsigned long long counts[kCounts] = {0, 0, 0, 0, 0};
    uint32_t amax_bits = 0;              // the largest block amax (a NaN wins)
    uint32_t largest_scale_bits = 0;     // the largest s of a block that is not neutral (0: none)
    uint32_t smallest_scale_bits = ~0u;  // the smallest (~0u: none)
    uint32_t unused = 0;
};

// A call of quantize_with_block_scales (cuda_kernels.cuh): count elements
// from global index offset, in blocks of block_size along them (the last one
// may be short), each block quantized at the encode scale its amax gives by
// the recipe's rule. Pointers are device memory on the current device.
struct block_scaled_args {
    const float* input = nullptr;
    float* output = nullptr;  // may be input
    size_t count = 0;
    size_t block_size = 32;  // a power of two, 4 .. 128 (a block's lanes in one warp)
    altgrad_rounding rounding = ALTGRAD_ROUND_NEAREST_EVEN;
    altgrad_overflow overflow = ALTGRAD_OVERFLOW_SATURATE;
    uint64_t seed = 0, offset = 0;  // element i rounds stochastically by (seed, offset + i)
    uint32_t random_bits = 0;       // 0 or 32: all of them (format.h)
    float* scales = nullptr;        // optional: each block's encode scale s, written
    // two_level: a device word holding the tensor's amax as float bits (cuda::tensor_amax writes
    // it, the kernel reads it).
    uint32_t* tensor_amax_bits = nullptr;
    // Added to by atomics: the elements' counts and the blocks' (start it as block_tally{}).
    block_tally* tally = nullptr;
    void* cuda_stream = nullptr;  // a cudaStream_t; NULL: the default stream
};

// Group g (call-relative elements [4g, 4g + 4), the first `present` of them
// in the call) of a block-scaled call whose blocks have the amax
// block_amax_bits: that block's scale, and the group quantized by it with the
// random words of global indices offset + 4g ...
template <class K, class G, altgrad_rounding R, altgrad_overflow O>
ALTGRAD_SDK_HD inline quad quantize_block_group(const K& k, const block_scale_recipe<G>& r,
                                                const tensor_scale& t, const quad& x, unsigned present,
                                                uint32_t block_amax_bits, uint64_t seed, uint64_t offset,
                                                uint32_t random_mask, uint64_t g, block_scale& b,
                                                element_counts& c) {
    b = block_scale_for(r, block_amax_bits, t);
    return quantize_quad<K, R, O>(k, x, group_scale_of(b.scale),
                                  random_quad<R>(seed, offset + 4u * g, random_mask), c, present);
}

}  // namespace altgrad::sdk
