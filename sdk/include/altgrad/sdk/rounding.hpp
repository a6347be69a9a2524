// AltGrad SDK: the rounding step every format helper shares.
//
// A helper reduces a value to an integer count of grid steps q plus the
// fraction f in [0, 1) of the next step, given as the 32-bit fixed-point
// number frac32 = floor(f * 2^32). Whether q moves one step away from zero is
// then one rule for all modes: q += carry(frac32 + threshold), with
//   nearest-even: threshold = 2^31 - 1 + odd  (odd: the code of q is odd),
//   stochastic:   threshold = R, 32 random bits (IEEE P3109 StochasticA),
//                 or their top b (random_bits_mask below: the caller masks R),
//   toward-zero:  threshold = 0.
// The fraction is exact whenever at most 32 bits are discarded; beyond that it
// is truncated, which biases stochastic rounding by less than 2^-32 of a step.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include <altgrad/abi/format.h>

// A per-element helper runs on both sides: in the adapter's host loops and,
// when the plugin is compiled by nvcc, in its CUDA kernels (cuda_kernels.cuh).
// ALTGRAD_SDK_HD marks such a function for both; it is empty for a plain C++
// compiler.
#ifdef __CUDACC__
#define ALTGRAD_SDK_HD __host__ __device__
#else
#define ALTGRAD_SDK_HD
#endif

// Force inlining of a per-element helper into the adapter's element loop, so
// the loop is compiled (and vectorized) for the loop's target, AVX2 included.
#if defined(__CUDACC__)
#define ALTGRAD_SDK_INLINE __host__ __device__ __forceinline__
#elif defined(__GNUC__) || defined(__clang__)
#define ALTGRAD_SDK_INLINE __attribute__((always_inline)) inline
#elif defined(_MSC_VER)
#define ALTGRAD_SDK_INLINE __forceinline
#else
#define ALTGRAD_SDK_INLINE inline
#endif

namespace altgrad::sdk {

ALTGRAD_SDK_INLINE uint32_t float_bits(float x) {
#ifdef __CUDA_ARCH__
    return __float_as_uint(x);
#else
    uint32_t b;
    std::memcpy(&b, &x, sizeof b);
    return b;
#endif
}

// Whether the float with bits b is finite and > 0: b - 1 lies below FLT_MAX's bits (the wrap sends
// +0 up; every negative, Inf and NaN pattern is above). Branch-free, so loops over it vectorize.
ALTGRAD_SDK_INLINE bool positive_finite_bits(uint32_t b) { return b - 1u < 0x7F7FFFFFu; }

ALTGRAD_SDK_INLINE float bits_float(uint32_t b) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(b);
#else
    float x;
    std::memcpy(&x, &b, sizeof x);
    return x;
#endif
}

// altgrad_format_info.rounding_modes of a format that rounds every way the
// SDK's helpers do (ExMy, codebook, fixed point).
constexpr uint32_t kAllRoundingModes =
    (1u << ALTGRAD_ROUND_NEAREST_EVEN) | (1u << ALTGRAD_ROUND_STOCHASTIC) | (1u << ALTGRAD_ROUND_TOWARD_ZERO);

constexpr uint32_t kSignBit = 0x80000000u;
constexpr uint32_t kInfBits = 0x7F800000u;
constexpr uint32_t kQuietNanBits = 0x7FC00000u;

// 1 when the step away from zero is taken (see above).
// Computed as a comparison rather than a 64-bit sum, so it stays in 32-bit
// vector lanes: frac32 + threshold carries exactly when
//   frac32 > ~threshold (unsigned), which for nearest-even is
//   (frac32 ^ 2^31) > -odd as signed 32-bit numbers, and for stochastic
//   random > ~frac32.
template <altgrad_rounding R>
ALTGRAD_SDK_INLINE uint32_t round_away(uint32_t frac32, uint32_t odd, uint32_t random) {
    if constexpr (R == ALTGRAD_ROUND_NEAREST_EVEN) {
        (void)random;
        return static_cast<uint32_t>(static_cast<int32_t>(frac32 ^ 0x80000000u) >
                                     static_cast<int32_t>(0u - odd));
    } else if constexpr (R == ALTGRAD_ROUND_STOCHASTIC) {
        (void)odd;
        return static_cast<uint32_t>(random > ~frac32);
    } else {
        (void)frac32, (void)odd, (void)random;
        return 0u;
    }
}

// The mask that keeps the top b of an element's 32 random bits for
// stochastic rounding with b random bits (format.h, random_bits):
// R' = R & ~(2^(32-b) - 1). b = 0 and b = 32 keep all 32; b must be <= 32.
ALTGRAD_SDK_HD inline uint32_t random_bits_mask(uint32_t b) {
    return b == 0 || b >= 32 ? ~0u : ~0u << (32u - b);
}

// Round x (>= 0, finite) onto a uniform grid of step 2^k, for x below
// 2^(k+23) (where the grid is finer than x's float32 spacing would allow
// anything else): the subnormal range of an ExMy format, a fixed-point
// format. magic = 2^(k+23), frac_scale = 2^(32-k). x + magic lies in
// [magic, 2 magic), whose float32 spacing is exactly the step, so the add
// rounds x to the grid, ties to the even multiple (the even code), and the
// subtraction is exact; that is nearest-even, provided the FPU rounds to
// nearest (the caller checks: fpu_rounds_to_nearest in format_plugin.hpp).
// Toward-zero steps back when that went up; stochastic adds a step by
// round_away with frac32 = floor((x - below) / step * 2^32), the fraction
// the bit-level kernels compute (x - below is exact: Sterbenz, or below = 0).
// A handful of vector instructions instead of shifting the significand by
// a per-element count.
template <altgrad_rounding R>
ALTGRAD_SDK_INLINE float round_to_step(float x, float magic, float step, float frac_scale, uint32_t random) {
    const float nearest = (x + magic) - magic;
    if constexpr (R == ALTGRAD_ROUND_NEAREST_EVEN) {
        (void)step, (void)frac_scale, (void)random;
        return nearest;
    } else {
        const float below = nearest - (nearest > x ? step : 0.0f);
        if constexpr (R == ALTGRAD_ROUND_TOWARD_ZERO) {
            (void)frac_scale, (void)random;
            return below;
        } else {
            const uint32_t frac32 = static_cast<uint32_t>((x - below) * frac_scale);  // < 2^32
            return below + (round_away<R>(frac32, 0u, random) != 0 ? step : 0.0f);
        }
    }
}

namespace detail {

// All ones when c, else zero; and a branch-free c ? a : b on 32-bit words.
// Element kernels use these (and & | on bools rather than && ||) so that the
// compiler sees no control flow and can vectorize the element loop.
ALTGRAD_SDK_INLINE uint32_t mask_if(bool c) { return 0u - static_cast<uint32_t>(c); }
ALTGRAD_SDK_INLINE uint32_t select_bits(bool c, uint32_t a, uint32_t b) {
    const uint32_t m = mask_if(c);
    return (a & m) | (b & ~m);
}
// mask_if for a kernel written for lanes of type U: uint32_t, or a GCC vector
// of uint32_t, whose compares give all ones or zero per lane already. By
// reference, as every lane function: a 64-byte vector passed or returned by
// value has another calling convention outside AVX-512 code, which GCC warns
// about (-Wpsabi) even where every call is inlined.
template <class U, class C>
ALTGRAD_SDK_INLINE void lane_mask(const C& c, U& mask) {
    if constexpr (std::is_same_v<C, bool>) mask = mask_if(c);
    else mask = (U)c;
}

}  // namespace detail

// Per-call tallies a helper's element kernel adds to.
struct element_counts {
    uint64_t overflow = 0;
    uint64_t underflow = 0;
};

namespace detail {

// Whether F has quantize_bits_branchless (exmy_format does): the same
// function as quantize_bits, written so that the element loop vectorizes.
template <class F, class = void>
struct has_branchless_kernel : std::false_type {};
template <class F>
struct has_branchless_kernel<
    F, std::void_t<decltype(std::declval<const F&>()
                                .template quantize_bits_branchless<ALTGRAD_ROUND_NEAREST_EVEN,
                                                                   ALTGRAD_OVERFLOW_SATURATE>(
                                    uint32_t{}, uint32_t{}, std::declval<element_counts&>()))>>
    : std::true_type {};

// Whether F has fast paths for inputs in a range (exmy_format,
// fixed_point_format and power_of_two_format do; see exmy.hpp):
// fast_flags(bits) has bit 0 clear when the element may take
// quantize_normal_bits (a short kernel that never underflows), bit 1 clear
// when it may take quantize_finite_bits. A format may have either or both.
// The host loops (format_plugin.hpp) OR the flags over a chunk and use both;
// the CUDA kernels (element_groups.hpp) decide per element and use the
// normal one, which is integer arithmetic only.
template <class F, class = void>
struct has_normal_fast_path : std::false_type {};
template <class F>
struct has_normal_fast_path<
    F, std::void_t<
           decltype(std::declval<const F&>()
                        .template quantize_normal_bits<ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_OVERFLOW_SATURATE>(
                            uint32_t{}, uint32_t{}, std::declval<uint32_t&>()))>> : std::true_type {};
template <class F, class = void>
struct has_finite_fast_path : std::false_type {};
template <class F>
struct has_finite_fast_path<
    F, std::void_t<
           decltype(std::declval<const F&>()
                        .template quantize_finite_bits<ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_OVERFLOW_SATURATE>(
                            uint32_t{}, uint32_t{}, std::declval<uint32_t&>(), std::declval<uint32_t&>()))>>
    : std::true_type {};

// Whether F's fast_flags depend on the magnitude alone, in intervals: F
// says so with `static constexpr bool fast_ranges_are_intervals = true`
// (exmy_format and fixed_point_format; not power_of_two_format, whose finite
// path skips a band). That is: bit 1 set exactly for the magnitudes (float32
// bits, no sign) at or above one bound, bit 0 for the nonzero magnitudes
// outside one interval, and for zero as fast_flags(0) says. Then the largest
// and smallest magnitudes of a chunk give its flags (magnitude_range,
// format_plugin.hpp).
template <class F, class = void>
struct has_interval_fast_ranges : std::false_type {};
template <class F>
struct has_interval_fast_ranges<F, std::void_t<decltype(F::fast_ranges_are_intervals)>>
    : std::bool_constant<F::fast_ranges_are_intervals> {};

}  // namespace detail

}  // namespace altgrad::sdk
