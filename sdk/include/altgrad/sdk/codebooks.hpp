// AltGrad SDK: codebooks the SDK generates, for formats that are neither
// ExMy (exmy.hpp) nor two's-complement fixed point (fixed_point.hpp), so no
// plugin has to write out a table by hand:
//
//  - power_of_two_codebook: unsigned, no zero, no sign, every code e is
//    2^(e - bias); with nan_at_top the all-ones code is NaN instead. OCP MX
//    E8M0 (the MX block-scale format) is power_of_two_codebook(8, 127, true):
//    2^-127 .. 2^127 and NaN at 0xFF.
//  - symmetric_int_codebook: the values k / (2^(b-1) - 1) for the
//    two's-complement integers k of b bits in [-(2^(b-1) - 1), 2^(b-1) - 1],
//    as int8 symmetric quantization uses them (b = 8: k / 127, one zero); the
//    code of -2^(b-1), which that scheme leaves unused, is NaN.
//
// Both are codebook_formats, so they round as every codebook does (nearest
// code by value, ties to the even code, nothing beyond the ends: an input
// past either end is an overflow, which for a format without zero includes 0
// and every negative number). power_of_two_codebook's class,
// power_of_two_format, adds the adapter's fast path for inputs between its
// ends, where the codebook's search is an exponent operation.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <altgrad/sdk/codebook.hpp>

namespace altgrad::sdk {

// A power-of-two codebook (see power_of_two_codebook) with the adapter's
// fast paths (format_plugin.hpp, has_normal_fast_path). A positive normal
// float x between the lowest and the largest value lies between the
// neighbours 2^k <= x < 2^(k+1), k its float32 exponent, and the codebook's
// fraction (x - 2^k) / 2^k is its mantissa field L / 2^23. So the codebook
// rounding is one add on x's bits and a mask, as for an ExMy format without
// mantissa bits (exmy.hpp, quantize_normal_bits): increment 2^22 - 1 + odd
// (odd: the parity of 2^k's code) for nearest-even, R >> 9 for stochastic
// (L * 2^9 + R >= 2^32), 0 for toward-zero. Such an input never overflows
// (the result is at most the largest value) or underflows (there is no
// zero): quantize_normal_bits. quantize_finite_bits adds what the codebook
// does with every other input but those between a float32-subnormal lowest
// value and 2^-126 (whose neighbours are not a binade apart): NaN stays NaN;
// anything else outside [lowest, largest] (0, negatives, Inf) is an overflow
// to the end on its side, or NaN under the non-finite mode (toward-zero:
// only for an infinite input) when the codebook has a NaN code.
class power_of_two_format : public codebook_format {
public:
    // book: the codes e = 0..top, each 2^(e - bias) (NaN codes above).
    power_of_two_format(codebook_format book, int bias, int top, bool has_nan)
        : codebook_format(std::move(book)) {
        const int lowest = -bias > -126 ? -bias : -126;  // the smallest normal float32 among the values
        low_ = static_cast<uint32_t>(lowest + 127) << 23;
        span_ = (static_cast<uint32_t>(top - bias + 127) << 23) - low_;
        parity_adjust_ = static_cast<uint32_t>(bias + 1) & 1u;  // 2^k's code is E + bias - 127, E = k + 127
        lowest_bits_ = float_bits(std::ldexp(1.0f, -bias));
        band_span_ = lowest_bits_ < low_ ? low_ - lowest_bits_ : 0u;
        has_nan_ = has_nan;
    }

    ALTGRAD_SDK_INLINE uint32_t fast_flags(uint32_t bits) const {
        const uint32_t outside =
            static_cast<uint32_t>(bits - low_ > span_);  // a set sign bit is above any span
        return outside | (static_cast<uint32_t>(bits - lowest_bits_ < band_span_) << 1);
    }
    template <altgrad_rounding R, altgrad_overflow O>
    ALTGRAD_SDK_INLINE uint32_t quantize_normal_bits(uint32_t bits, uint32_t random,
                                                     uint32_t& overflow) const {
        (void)overflow;
        return round_normal<R>(bits, random);
    }
    template <altgrad_rounding R, altgrad_overflow O>
    ALTGRAD_SDK_INLINE uint32_t quantize_finite_bits(uint32_t bits, uint32_t random, uint32_t& overflow,
                                                     uint32_t& underflow) const {
        using detail::select_bits;
        (void)underflow;
        const uint32_t a = bits & ~kSignBit;
        const bool in_range = bits - low_ <= span_;
        const bool nan = a > kInfBits;
        const bool above = (bits > low_ + span_) & (bits < kSignBit);  // NaN is decided first
        const bool to_nan = has_nan_ & (O == ALTGRAD_OVERFLOW_NONFINITE) &
                            ((R != ALTGRAD_ROUND_TOWARD_ZERO) | (a == kInfBits));
        const uint32_t end = select_bits(above, low_ + span_, lowest_bits_);
        const uint32_t beyond = select_bits(to_nan, kQuietNanBits, end);
        overflow += (!nan) & (!in_range);
        return select_bits(nan, kQuietNanBits, select_bits(in_range, round_normal<R>(bits, random), beyond));
    }

private:
    template <altgrad_rounding R>
    ALTGRAD_SDK_INLINE uint32_t round_normal(uint32_t bits, uint32_t random) const {
        uint32_t increment = 0;
        if constexpr (R == ALTGRAD_ROUND_NEAREST_EVEN)
            increment = 0x3FFFFFu + (((bits >> 23) + parity_adjust_) & 1u);
        if constexpr (R == ALTGRAD_ROUND_STOCHASTIC) increment = random >> 9;
        (void)random;
        return (bits + increment) & ~0x7FFFFFu;
    }

    uint32_t low_ = 0, span_ = 0, parity_adjust_ = 0, lowest_bits_ = 0, band_span_ = 0;
    bool has_nan_ = false;
};

inline power_of_two_format power_of_two_codebook(int exponent_bits, int bias, bool nan_at_top) {
    if (exponent_bits < 1 || exponent_bits > 8)
        throw plugin_error(
            ALTGRAD_STATUS_INVALID_ARGUMENT,
            "power_of_two_codebook: exponent_bits must be 1..8, got " + std::to_string(exponent_bits));
    const int codes = 1 << exponent_bits;
    const int top = codes - 1 - (nan_at_top ? 1 : 0);  // the largest code holding a number
    if (-bias < -149 || top - bias > 127)
        throw plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT,
                           "power_of_two_codebook: 2^" + std::to_string(-bias) + " .. 2^" +
                               std::to_string(top - bias) + " is not inside float32's range");
    std::vector<float> values(static_cast<size_t>(codes));
    for (int e = 0; e < codes; ++e) values[static_cast<size_t>(e)] = std::ldexp(1.0f, e - bias);
    if (nan_at_top) values.back() = std::numeric_limits<float>::quiet_NaN();
    return power_of_two_format(codebook_format(exponent_bits, std::move(values)), bias, top, nan_at_top);
}

inline codebook_format symmetric_int_codebook(int bits) {
    if (bits < 2 || bits > 16)
        throw plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT,
                           "symmetric_int_codebook: bits must be 2..16, got " + std::to_string(bits));
    const int32_t kmax = (int32_t{1} << (bits - 1)) - 1;
    const uint32_t codes = uint32_t{1} << bits;
    std::vector<float> values(codes);
    for (uint32_t c = 0; c < codes; ++c) {
        const int32_t k = c <= static_cast<uint32_t>(kmax)
                              ? static_cast<int32_t>(c)
                              : static_cast<int32_t>(c) - static_cast<int32_t>(codes);
        // A float32 division is correctly rounded: the float nearest k / kmax.
        values[c] = k < -kmax ? std::numeric_limits<float>::quiet_NaN()
                              : static_cast<float>(k) / static_cast<float>(kmax);
    }
    return codebook_format(bits, std::move(values));
}

}  // namespace altgrad::sdk
