// AltGrad SDK: a two's-complement fixed-point format.
//
// Codes are total_bits-bit two's-complement integers k; the value of k is
// k * 2^-fraction_bits. So Q0.7 (total 8, fraction 7) covers [-1, 127/128] in
// steps of 1/128 with one zero and no Inf or NaN: E0M7 is this class.
//
// Rounding works on the magnitude |x| * 2^fraction_bits (exact: a shift of
// the float32 significand), so ties go to the even integer (the even code)
// and stochastic rounding moves away from zero with the P3109 StochasticA rule; the sign is applied
// after, then the range [-2^(B-1), 2^(B-1) - 1] decides overflow. Having no
// Inf or NaN, the format saturates under both overflow modes.
//
// Symmetric (the int8 quantization of most frameworks): k = -2^(B-1) is left
// out, so the range is [-(2^(B-1) - 1), 2^(B-1) - 1]; its code, 2^(B-1),
// decodes to NaN (the canonical NaN: encode writes it for NaN), and having a
// NaN, the format sends overflow to NaN under the non-finite mode (the rule
// of abi/format.h; toward-zero keeps a finite input finite).
//
// The class is trivially copyable and its element functions run on the host
// and, in a plugin compiled by nvcc, on the GPU: it is its own kernel().
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include <altgrad/abi/format.h>
#include <altgrad/sdk/error.hpp>
#include <altgrad/sdk/rounding.hpp>

namespace altgrad::sdk {

struct fixed_point_spec {
    int total_bits;          // 2..24
    int fraction_bits;       // 0..120; the step is 2^-fraction_bits
    bool symmetric = false;  // leave out -2^(B-1), whose code is then NaN
};

class fixed_point_format {
public:
    explicit fixed_point_format(const fixed_point_spec& spec) : spec_(spec) {
        if (spec.total_bits < 2 || spec.total_bits > 24)
            throw plugin_error(
                ALTGRAD_STATUS_INVALID_ARGUMENT,
                "fixed_point: total_bits must be 2..24, got " + std::to_string(spec.total_bits));
        if (spec.fraction_bits < 0 || spec.fraction_bits > 120)
            throw plugin_error(
                ALTGRAD_STATUS_INVALID_ARGUMENT,
                "fixed_point: fraction_bits must be 0..120, got " + std::to_string(spec.fraction_bits));
        kmax_ = (int64_t{1} << (spec.total_bits - 1)) - 1;
        kmin_ = spec.symmetric ? -kmax_ : -(int64_t{1} << (spec.total_bits - 1));
        negative_extra_ = spec.symmetric ? 0u : 1u;
        step_ = std::ldexp(1.0, -spec.fraction_bits);
        inv_step_ = std::ldexp(1.0, spec.fraction_bits);
        // The finite fast path (see quantize_finite_bits): the grid is
        // uniform, so round_to_step serves every |x| < 2^(total - fraction)
        // (beyond that everything overflows) when that bound is at most its
        // magic number 2^(23 - fraction), and when a float32 subnormal is
        // below 2^-32 of a step (fraction <= 93), as for exmy.hpp's path.
        const int F = spec.fraction_bits;
        if (spec.total_bits <= 23 && F <= 93) {
            fast_bound_ = float_bits(std::ldexp(1.0f, spec.total_bits - F));
            grid_magic_ = std::ldexp(1.0f, 23 - F);
            grid_step_ = std::ldexp(1.0f, -F);
            grid_frac_scale_ = std::ldexp(1.0f, 32 + F);
            limit_positive_ = static_cast<float>(kmax_) * grid_step_;  // exact: |k| < 2^23
            limit_negative_ = static_cast<float>(-kmin_) * grid_step_;
        }
    }

    uint32_t total_bits() const { return static_cast<uint32_t>(spec_.total_bits); }

    // The element arithmetic, for the adapter's CUDA kernels.
    const fixed_point_format& kernel() const { return *this; }

    altgrad_format_info info() const {
        altgrad_format_info i{};
        i.struct_size = sizeof i;
        i.family = ALTGRAD_FAMILY_FIXED_POINT;
        i.total_bits = total_bits();
        i.code_bytes = total_bits() <= 8 ? 1u : total_bits() <= 16 ? 2u : 4u;
        i.mantissa_bits = static_cast<uint32_t>(spec_.fraction_bits);
        i.is_signed = 1;
        i.zero = ALTGRAD_ZERO_UNSIGNED;
        i.nan_code_count = spec_.symmetric ? 1u : 0u;
        i.canonical_nan_code = nan_code();
        i.max_finite = static_cast<double>(kmax_) * step_;
        i.lowest_finite = static_cast<double>(kmin_) * step_;
        i.min_normal = step_;
        i.min_subnormal = 0.0;
        i.rounding_modes = kAllRoundingModes;
        i.memory_kinds = 1u << ALTGRAD_MEMORY_HOST;
        return i;
    }

    template <altgrad_rounding R, altgrad_overflow O>
    ALTGRAD_SDK_INLINE uint32_t quantize_bits(uint32_t bits, uint32_t random, element_counts& counts) const {
        bool to_nan = false;
        const int32_t k = round_to_integer<R, O>(bits, random, counts, to_nan);
        // |k| <= 2^23 and 2^-fraction_bits >= 2^-120, so k * step is exact in
        // float32 (as it was in double before the conversion).
        const float value = static_cast<float>(k) * static_cast<float>(step_);
        return detail::select_bits(is_nan(bits) | to_nan, kQuietNanBits, float_bits(value));
    }

    // The adapter's finite fast path (format_plugin.hpp): a chunk whose
    // inputs all have |x| < 2^(total - fraction) rounds |x| onto the grid
    // with round_to_step (rounding.hpp), the same rounding of the magnitude
    // as round_to_integer, then clamps it to kmax or -kmin by the sign.
    // fast_flags: bit 0 always set (no normal-range path), bit 1 when x is
    // outside that range (NaN and Inf included).
    ALTGRAD_SDK_INLINE uint32_t fast_flags(uint32_t bits) const {
        return 1u | (static_cast<uint32_t>((bits & ~kSignBit) >= fast_bound_) << 1);
    }
    // fast_flags: bit 1 for the magnitudes from one bound up, bit 0 outside one interval
    // (has_interval_fast_ranges, rounding.hpp).
    static constexpr bool fast_ranges_are_intervals = true;
    template <altgrad_rounding R, altgrad_overflow O>
    ALTGRAD_SDK_INLINE uint32_t quantize_finite_bits(uint32_t bits, uint32_t random, uint32_t& overflow,
                                                     uint32_t& underflow) const {
        const uint32_t sign = bits & kSignBit;
        const uint32_t a = bits ^ sign;
        const float m = round_to_step<R>(bits_float(a), grid_magic_, grid_step_, grid_frac_scale_, random);
        const float limit = sign != 0 ? limit_negative_ : limit_positive_;
        const bool over = m > limit;
        const float v = over ? limit : m;
        overflow += over;
        underflow += (a != 0) & (v == 0.0f);
        const uint32_t out = float_bits(v) | (sign & detail::mask_if(v != 0.0f));  // one zero: +0
        // A symmetric format has a NaN for the non-finite mode (toward-zero: a finite input stays finite).
        if constexpr (O == ALTGRAD_OVERFLOW_NONFINITE && R != ALTGRAD_ROUND_TOWARD_ZERO)
            return detail::select_bits(over & spec_.symmetric, kQuietNanBits, out);
        return out;
    }

    template <altgrad_rounding R, altgrad_overflow O>
    ALTGRAD_SDK_INLINE uint32_t encode_bits(uint32_t bits, uint32_t random, element_counts& counts,
                                            bool& unrepresentable) const {
        bool to_nan = false;
        const int32_t k = round_to_integer<R, O>(bits, random, counts, to_nan);
        if (is_nan(bits) | to_nan) {
            if (!spec_.symmetric) unrepresentable = true;
            return nan_code();
        }
        return static_cast<uint32_t>(k) & ((1u << spec_.total_bits) - 1u);
    }

    ALTGRAD_SDK_HD float decode(uint32_t code) const {
        if (spec_.symmetric && code == nan_code()) return bits_float(kQuietNanBits);
        int64_t k = code;
        if (k > kmax_) k -= int64_t{1} << spec_.total_bits;  // sign-extend
        return static_cast<float>(static_cast<double>(k) * step_);
    }

private:
    // The code of -2^(B-1): NaN in a symmetric format (else -2^(B-1) itself, and unused here).
    ALTGRAD_SDK_HD uint32_t nan_code() const { return 1u << (spec_.total_bits - 1); }

    static ALTGRAD_SDK_INLINE bool is_nan(uint32_t bits) {
        return static_cast<int32_t>(bits & ~kSignBit) > static_cast<int32_t>(kInfBits);
    }

    // Round |x| * 2^fraction_bits to an integer m, apply the sign, then clamp
    // to [kmin, kmax]; 0 for NaN. to_nan: the overflow goes to NaN (a
    // symmetric format under the non-finite mode). Works on the bits of x, branch-free and in
    // 32-bit lanes (so the adapter's AVX2 loop vectorizes it, and no libm
    // call remains): |x| = sig * 2^(eff - 150), so |x| * 2^fraction_bits is
    // sig shifted right by sh = 150 - fraction_bits - eff, its integer part
    // sig >> sh and the next 32 bits the fraction (truncated beyond them, as
    // the double computation this replaces truncated in its conversion).
    // Anything at or past 2^total_bits overflows whatever the rounding, so it
    // is capped there (this also catches Inf).
    template <altgrad_rounding R, altgrad_overflow O>
    ALTGRAD_SDK_INLINE int32_t round_to_integer(uint32_t bits, uint32_t random, element_counts& counts,
                                                bool& to_nan) const {
        using detail::mask_if;
        using detail::select_bits;
        const int32_t B = spec_.total_bits, F = spec_.fraction_bits;
        const uint32_t cap = uint32_t{1} << B;         // 2^total_bits
        const uint32_t half = uint32_t{1} << (B - 1);  // kmax + 1 == -kmin
        const uint32_t a = bits & ~kSignBit;
        const bool negative = (bits & kSignBit) != 0;
        const bool nan = is_nan(bits);
        const bool is_inf = a == kInfBits;
        const int32_t E = static_cast<int32_t>(a >> 23);
        const int32_t eff = E > 1 ? E : 1;
        const uint32_t sig = (a & 0x7FFFFFu) | (0x800000u & mask_if(E != 0));
        const int32_t sh = 150 - F - eff;  // sh < 0 only for normal x, where |x| * 2^F >= 2^24
        const int32_t sh_whole = sh < 0 ? 0 : sh < 31 ? sh : 31;  // sig < 2^24: >= 24 gives 0
        const int32_t sh_hi = sh < 32 ? 0 : sh - 32 < 31 ? sh - 32 : 31;
        const uint32_t whole = sig >> static_cast<uint32_t>(sh_whole);
        const uint32_t frac_lo =
            (sig << static_cast<uint32_t>((32 - sh) & 31)) & mask_if(sh > 0);  // sh in [0, 32]
        const uint32_t frac_hi = sig >> static_cast<uint32_t>(sh_hi);          // sh >= 33
        const uint32_t frac = select_bits(sh > 32, frac_hi, frac_lo);
        const bool capped = is_inf | ((sh < 0) & (sig != 0)) | ((sh >= 0) & (whole >= cap));
        uint32_t m = select_bits(capped, cap, whole);
        m += round_away<R>(frac & ~mask_if(capped), m & 1u, random);
        // kmax = half - 1 for positive k, -kmin = half for negative k (symmetric: half - 1).
        const uint32_t limit = half - 1u + (static_cast<uint32_t>(negative) & negative_extra_);
        const bool overflow = (!nan) & (m > limit);
        if constexpr (O == ALTGRAD_OVERFLOW_NONFINITE)
            to_nan = overflow & spec_.symmetric & ((R != ALTGRAD_ROUND_TOWARD_ZERO) | is_inf);
        const uint32_t magnitude = select_bits(overflow, limit, m) & ~mask_if(nan);
        const int32_t k = static_cast<int32_t>(select_bits(negative, 0u - magnitude, magnitude));
        counts.overflow += overflow;
        counts.underflow += ((!nan) & (!is_inf) & (a != 0) & (k == 0));
        return k;
    }

    fixed_point_spec spec_;
    int64_t kmax_ = 0, kmin_ = 0;
    uint32_t negative_extra_ = 1;  // -kmin - kmax: 1, or 0 when symmetric
    double step_ = 0, inv_step_ = 0;
    // The finite fast path; fast_bound_ 0 turns it off.
    uint32_t fast_bound_ = 0;
    float grid_magic_ = 0, grid_step_ = 0, grid_frac_scale_ = 0, limit_positive_ = 0, limit_negative_ = 0;
};

}  // namespace altgrad::sdk
