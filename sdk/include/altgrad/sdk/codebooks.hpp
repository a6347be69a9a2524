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
// Both return a codebook_format, so they round as every codebook does
// (nearest code by value, ties to the even code, nothing beyond the ends:
// an input past either end is an overflow, which for a format without zero
// includes 0 and every negative number).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <altgrad/sdk/codebook.hpp>

namespace altgrad::sdk {

inline codebook_format power_of_two_codebook(int exponent_bits, int bias, bool nan_at_top) {
    if (exponent_bits < 1 || exponent_bits > 8)
        throw plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT,
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
    return codebook_format(exponent_bits, std::move(values));
}

inline codebook_format symmetric_int_codebook(int bits) {
    if (bits < 2 || bits > 16)
        throw plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT,
                           "symmetric_int_codebook: bits must be 2..16, got " + std::to_string(bits));
    const int32_t kmax = (int32_t{1} << (bits - 1)) - 1;
    const uint32_t codes = uint32_t{1} << bits;
    std::vector<float> values(codes);
    for (uint32_t c = 0; c < codes; ++c) {
        const int32_t k = c <= static_cast<uint32_t>(kmax) ? static_cast<int32_t>(c)
                                                             : static_cast<int32_t>(c) - static_cast<int32_t>(codes);
        // A float32 division is correctly rounded: the float nearest k / kmax.
        values[c] = k < -kmax ? std::numeric_limits<float>::quiet_NaN()
                              : static_cast<float>(k) / static_cast<float>(kmax);
    }
    return codebook_format(bits, std::move(values));
}

}  // namespace altgrad::sdk
