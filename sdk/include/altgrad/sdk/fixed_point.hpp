// AltGrad SDK: a two's-complement fixed-point format.
//
// Codes are total_bits-bit two's-complement integers k; the value of k is
// k * 2^-fraction_bits. So Q0.7 (total 8, fraction 7) covers [-1, 127/128] in
// steps of 1/128 with one zero and no Inf or NaN: E0M7 is this class.
//
// Rounding works on the magnitude |x| * 2^fraction_bits (exact in double),
// so ties go to the even integer (the even code) and stochastic rounding
// moves away from zero with the P3109 StochasticA rule; the sign is applied
// after, then the range [-2^(B-1), 2^(B-1) - 1] decides overflow. Having no
// Inf or NaN, the format saturates under both overflow modes.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include <altgrad/abi/format.h>
#include <altgrad/sdk/error.hpp>
#include <altgrad/sdk/rounding.hpp>

namespace altgrad::sdk {

struct fixed_point_spec {
    int total_bits;     // 2..24
    int fraction_bits;  // 0..total_bits + 100; the step is 2^-fraction_bits
};

class fixed_point_format {
public:
    explicit fixed_point_format(const fixed_point_spec& spec) : spec_(spec) {
        if (spec.total_bits < 2 || spec.total_bits > 24)
            throw plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT,
                               "fixed_point: total_bits must be 2..24, got " + std::to_string(spec.total_bits));
        if (spec.fraction_bits < 0 || spec.fraction_bits > 120)
            throw plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT,
                               "fixed_point: fraction_bits must be 0..120, got " +
                                   std::to_string(spec.fraction_bits));
        kmax_ = (int64_t{1} << (spec.total_bits - 1)) - 1;
        kmin_ = -(int64_t{1} << (spec.total_bits - 1));
        step_ = std::ldexp(1.0, -spec.fraction_bits);
        inv_step_ = std::ldexp(1.0, spec.fraction_bits);
    }

    uint32_t total_bits() const { return static_cast<uint32_t>(spec_.total_bits); }

    altgrad_format_info info() const {
        altgrad_format_info i{};
        i.struct_size = sizeof i;
        i.family = ALTGRAD_FAMILY_FIXED_POINT;
        i.total_bits = total_bits();
        i.code_bytes = total_bits() <= 8 ? 1u : total_bits() <= 16 ? 2u : 4u;
        i.mantissa_bits = static_cast<uint32_t>(spec_.fraction_bits);
        i.is_signed = 1;
        i.zero = ALTGRAD_ZERO_UNSIGNED;
        i.max_finite = static_cast<double>(kmax_) * step_;
        i.lowest_finite = static_cast<double>(kmin_) * step_;
        i.min_normal = step_;
        i.min_subnormal = 0.0;
        i.rounding_modes = (1u << ALTGRAD_ROUND_NEAREST_EVEN) | (1u << ALTGRAD_ROUND_STOCHASTIC) |
                           (1u << ALTGRAD_ROUND_TOWARD_ZERO);
        i.memory_kinds = 1u << ALTGRAD_MEMORY_HOST;
        return i;
    }

    template <altgrad_rounding R, altgrad_overflow O>
    uint32_t quantize_bits(uint32_t bits, uint32_t random, element_counts& counts) const {
        bool nan = false;
        const int64_t k = round_to_integer<R>(bits, random, counts, nan);
        if (nan) return kQuietNanBits;
        return float_bits(static_cast<float>(static_cast<double>(k) * step_));
    }

    template <altgrad_rounding R, altgrad_overflow O>
    uint32_t encode_bits(uint32_t bits, uint32_t random, element_counts& counts, bool& unrepresentable) const {
        bool nan = false;
        const int64_t k = round_to_integer<R>(bits, random, counts, nan);
        if (nan) unrepresentable = true;
        return static_cast<uint32_t>(k) & ((1u << spec_.total_bits) - 1u);
    }

    float decode(uint32_t code) const {
        int64_t k = code;
        if (k > kmax_) k -= int64_t{1} << spec_.total_bits;  // sign-extend
        return static_cast<float>(static_cast<double>(k) * step_);
    }

private:
    template <altgrad_rounding R>
    int64_t round_to_integer(uint32_t bits, uint32_t random, element_counts& counts, bool& nan) const {
        const float x = bits_float(bits);
        if (std::isnan(x)) {
            nan = true;
            return 0;
        }
        const bool negative = (bits & kSignBit) != 0;
        // |x| in steps; anything at or past 2^total_bits overflows whatever
        // the rounding, so cap it there (this also catches Inf).
        const double cap = std::ldexp(1.0, spec_.total_bits);
        double t = std::fabs(static_cast<double>(x)) * inv_step_;
        if (!(t < cap)) t = cap;
        const double whole = std::floor(t);
        const uint32_t frac32 = static_cast<uint32_t>(std::ldexp(t - whole, 32));
        int64_t m = static_cast<int64_t>(whole);
        m += round_away<R>(frac32, static_cast<uint32_t>(m & 1), random);
        int64_t k = negative ? -m : m;
        if (k > kmax_ || k < kmin_) {
            counts.overflow += 1;
            k = k > kmax_ ? kmax_ : kmin_;
        }
        counts.underflow += (k == 0 && x != 0.0f && !std::isinf(x));
        return k;
    }

    fixed_point_spec spec_;
    int64_t kmax_ = 0, kmin_ = 0;
    double step_ = 0, inv_step_ = 0;
};

}  // namespace altgrad::sdk
