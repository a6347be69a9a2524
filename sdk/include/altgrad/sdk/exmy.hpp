// AltGrad SDK: a generic ExMy floating-point format.
//
// Any exponent width 1..8, mantissa width 0..23 and bias, with one of five
// special-value conventions, with or without a sign bit and with or without
// subnormals, every rounding mode, exact at ties, at the max boundary and in
// the subnormal range. A format plugin that is an ExMy format is one
// exmy_spec; see plugins/e5m2/e5m2.cpp (and plugins/float/ for all of them).
//
// Values: a magnitude code c = (e << M) | m means m * 2^(1 - bias - M) when
// e == 0 (subnormal, or zero when m == 0) and (2^M + m) * 2^(e - bias - M)
// otherwise. Without subnormals (and M > 0), e == 0 is one more binade of
// normal numbers, (2^M + m) * 2^(-bias - M), but for c == 0, which is zero:
// Graphcore's gfloat decodes has_subnormals = False this way. With a sign
// bit the code is sign << (E + M) | c, without one just c. The representable
// values must lie in float32 (checked at construction): the smallest normal
// at least 2^-126 and max finite <= FLT_MAX.
//
// The arithmetic works on the bits of the float32 input: the significand is
// shifted right by d = 23 - M bits (more in the subnormal range), the dropped
// bits become the fraction handed to round_away (rounding.hpp), and the result
// is rebuilt from the kept bits, so nothing depends on the FPU rounding mode.
//
// The element arithmetic lives in exmy_kernel: a trivially copyable value
// holding the constants derived from the spec, whose functions run on the host
// and, in a plugin compiled by nvcc, on the GPU (ALTGRAD_SDK_HD), so both
// sides compute the same bits. exmy_format validates the spec, builds the
// kernel, and adds what only the host needs (info, a decode table).
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <altgrad/abi/format.h>
#include <altgrad/sdk/error.hpp>
#include <altgrad/sdk/rounding.hpp>

namespace altgrad::sdk {

// Which codes are special.
enum class exmy_specials {
    // IEEE 754: the top exponent is Inf (mantissa 0) or NaN; +0 and -0.
    // OCP FP8 E5M2, ml_dtypes float8_e3m4, binary16, bfloat16.
    ieee,
    // OCP FP8 "FN": no Inf; NaN only where exponent and mantissa are all ones
    // (S.1111.111 in E4M3FN); +0 and -0.
    finite_nan,
    // IEEE P3109 signed extended: one zero (0x00), NaN at the would-be -0
    // (0x80), +Inf and -Inf at the all-ones magnitudes (0x7F, 0xFF). Unsigned
    // (P3109's unsigned extended formats): NaN at all ones, +Inf just below.
    p3109,
    // No Inf and no NaN: every code is a finite number; +0 and -0 (OCP MX E2M1).
    finite,
    // ml_dtypes' "fnuz" (float8_e4m3fnuz, float8_e5m2fnuz): no Inf, one zero
    // (0x00), NaN at the would-be -0 (0x80), every other code a number (max
    // at the all-ones magnitude). Needs a sign bit.
    fnuz
};

struct exmy_spec {
    int exponent_bits;  // 1..8
    int mantissa_bits;  // 0..23
    int bias;
    exmy_specials specials;
    // false: no subnormals. Exponent field 0 is then a binade of normal
    // numbers, 2^-bias * 1.m, except code 0 (zero), so the smallest positive
    // value is 2^-bias * (1 + 2^-M) (gfloat's has_subnormals = False). With
    // M == 0 field 0 holds zero alone either way.
    bool subnormals = true;
    // false: no sign bit; E + M bits, one zero, no negative values.
    bool has_sign = true;
};

class exmy_format;

// The per-element arithmetic of one ExMy format (see above). Made only by
// exmy_format; copied by value into CUDA kernels.
class exmy_kernel {
public:
    // Fake-quantize one scaled float32 (given and returned as bits). Without a
    // sign bit a negative input rounds as its magnitude would; a result of 0
    // stands (an underflow), anything else lies below the lowest value, 0: an
    // overflow, to 0 or (non-finite) NaN, and so is -Inf.
    template <altgrad_rounding R, altgrad_overflow O>
    ALTGRAD_SDK_HD uint32_t quantize_bits(uint32_t bits, uint32_t random, element_counts& counts) const {
        const uint32_t sign = bits & kSignBit;
        const uint32_t a = bits ^ sign;
        const uint32_t mag = round_magnitude<R>(a, random);
        const bool is_nan = a > kInfBits, is_inf = a == kInfBits;
        const bool negative = sign != 0;
        const bool overflow = !is_nan && (is_inf || mag > (negative ? negative_max_bits_ : max_bits_));
        uint32_t out = mag;
        if (overflow) out = negative ? negative_overflow_target<R, O>(is_inf) : overflow_target<R, O>(is_inf);
        if (is_nan) out = kQuietNanBits;
        counts.overflow += overflow;
        counts.underflow += (!is_nan && !is_inf && a != 0 && out == 0);
        const bool keep_sign = !is_nan && (out != 0 || signed_zero_);
        return out | (keep_sign ? sign & sign_mask_ : 0u);
    }

    // The same function as quantize_bits, bit for bit (counts included), for
    // the adapter's vectorized loop: no branches, no 64-bit arithmetic and
    // every member read up front, so the compiler can if-convert the element
    // loop and run it in 32-bit vector lanes (8 elements per AVX2 vector). As
    // scalar code quantize_bits is the faster of the two, so the adapter uses
    // this one only in its AVX2 loop. Only for formats with a sign bit and
    // subnormals (branchless_applies): the adapter runs quantize_bits for the
    // others, whose steps (a negative input without a sign bit, the gap
    // below the smallest value without subnormals) this kernel leaves out.
    template <altgrad_rounding R, altgrad_overflow O>
    ALTGRAD_SDK_INLINE uint32_t quantize_bits_branchless(uint32_t bits, uint32_t random,
                                                         element_counts& counts) const {
        using detail::mask_if;
        using detail::select_bits;
        const uint32_t max_bits = max_bits_;
        const uint32_t target_finite = overflow_target<R, O>(false), target_inf = overflow_target<R, O>(true);
        const bool signed_zero = signed_zero_;
        const uint32_t sign = bits & kSignBit;
        const uint32_t a = bits ^ sign;  // < 2^31, so signed compares below are exact
        const uint32_t mag = round_magnitude_branchless<R>(a, random);
        const bool is_nan = static_cast<int32_t>(a) > static_cast<int32_t>(kInfBits);
        const bool is_inf = a == kInfBits;
        const bool is_finite = static_cast<int32_t>(a) < static_cast<int32_t>(kInfBits);
        // For a finite input mag <= 255 << 23 < 2^31, so the signed compare is
        // exact; Inf and NaN are decided by is_inf and is_nan whatever mag is.
        const bool overflow =
            (!is_nan) & (is_inf | (static_cast<int32_t>(mag) > static_cast<int32_t>(max_bits)));
        const uint32_t out = select_bits(overflow, select_bits(is_inf, target_inf, target_finite), mag);
        counts.overflow += overflow;
        // A finite input gives 0 exactly when mag is 0 (an overflow gives a
        // non-zero target).
        counts.underflow += is_finite & (a != 0) & (mag == 0);
        const uint32_t signed_out = out | (sign & (mask_if(out != 0) | mask_if(signed_zero)));
        return select_bits(is_nan, kQuietNanBits, signed_out);
    }

    // The fast path of the adapter's vector loop. A scaled input whose
    // magnitude a (float32 bits) is finite and at least the format's min
    // normal, i.e. a - normal_low_ <= normal_span_ as unsigned numbers,
    // rounds in the normal range: quantize_bits gives
    // ((a + increment) & ~step_mask), or the overflow target when that
    // exceeds max finite, with the sign, and never an underflow. This is the
    // rounding of round_magnitude done on the float's bits directly: with
    // d = 23 - M dropped bits (the low d bits of a, L), the carry of
    // a + increment into bit d is
    //   nearest-even: increment 2^(d-1) - 1 + odd, carry iff L > half or
    //     L == half and odd (odd: bit d of a, or with M == 0 the code's
    //     exponent parity, as in round_magnitude);
    //   stochastic: increment R >> (32 - d), carry iff L * 2^(32-d) + R >= 2^32,
    //     which is round_away's R > ~frac32 with frac32 = L << (32 - d);
    //   toward-zero: no increment;
    // and a carry out of the mantissa steps into the next binade, as the
    // code's does (a + increment < 2^31 for finite a). d == 0 (M == 23)
    // drops nothing.
    // A zero input takes the path too where zeros keep their sign (the
    // formula gives 0 and 0 is no underflow).
    //
    // The finite fast path (quantize_finite_bits) takes any finite input,
    // the subnormal range included: there the grid step is constant, 2^k
    // with k = emin - M, so the input rounds by round_to_step (rounding.hpp)
    // instead of by a shift of its significand that differs per element;
    // the normal range rounds as above, and a select picks the one that
    // applies. Only for formats whose smallest step is at least 2^-67
    // (emin_f - M >= 60: every 8-bit format and fp16, not bf16 or fp32):
    // then a float32 subnormal input is below 2^-32 of a step and rounds to
    // 0 in every mode however the FPU treats it (flush-to-zero included), and
    // every result is a normal float32.
    //
    // fast_flags tells the adapter which path an element may take, OR-ed
    // over a chunk: bit 0 set if not the normal one, bit 1 if not the finite
    // one either.
    ALTGRAD_SDK_INLINE uint32_t fast_flags(uint32_t bits) const {
        const uint32_t a = bits & ~kSignBit;
        const uint32_t fast_zero = signed_zero_ ? 0u : 1u;
        const uint32_t outside_normal = static_cast<uint32_t>(a - normal_low_ > normal_span_) &
                                        static_cast<uint32_t>((a | fast_zero) != 0);
        return outside_normal | (static_cast<uint32_t>(a >= finite_limit_) << 1);
    }
    template <altgrad_rounding R, altgrad_overflow O>
    ALTGRAD_SDK_INLINE uint32_t quantize_normal_bits(uint32_t bits, uint32_t random,
                                                     uint32_t& overflow) const {
        uint32_t out;
        quantize_normal_lanes<R, O>(bits, random, overflow, out);
        return out;
    }
    // The same on lanes of type U: uint32_t, or a GCC vector of them (the
    // SDK's explicit-vector block loop, format_plugin.hpp), lane by lane.
    template <altgrad_rounding R, altgrad_overflow O, class U>
    ALTGRAD_SDK_INLINE void quantize_normal_lanes(const U& bits, const U& random, U& overflow, U& out) const {
        const U sign = bits & kSignBit, a = bits ^ sign;
        U mag, over;
        round_normal_lanes<R>(a, random, mag);
        detail::lane_mask(mag > max_bits_, over);
        overflow += over & 1u;
        out = (overflow_target<R, O>(false) & over) | (mag & ~over) | sign;
    }
    template <altgrad_rounding R, altgrad_overflow O>
    ALTGRAD_SDK_INLINE uint32_t quantize_finite_bits(uint32_t bits, uint32_t random, uint32_t& overflow,
                                                     uint32_t& underflow) const {
        using detail::mask_if;
        using detail::select_bits;
        const uint32_t sign = bits & kSignBit;
        const uint32_t a = bits ^ sign;
        const bool below = a < normal_low_;
        // Normal-range elements round 0 there (no overflow, no out-of-range conversion), then are not picked.
        const float sub = round_to_step<R>(bits_float(a & mask_if(below)), grid_magic_, grid_step_,
                                           grid_frac_scale_, random);
        const uint32_t mag = select_bits(below, float_bits(sub), round_normal<R>(a, random));
        const bool over = mag > max_bits_;  // only a normal-range result can be
        const uint32_t out = select_bits(over, overflow_target<R, O>(false), mag);
        overflow += over;
        // Nearest-even and toward-zero round a nonzero input to 0 exactly when
        // it lies in (0, half a step] or (0, a step): one compare on the input,
        // off the result's dependency chain.
        if constexpr (R == ALTGRAD_ROUND_NEAREST_EVEN) underflow += (a - 1u) < zero_half_step_bits_;
        if constexpr (R == ALTGRAD_ROUND_TOWARD_ZERO) underflow += (a - 1u) < zero_step_bits_ - 1u;
        if constexpr (R == ALTGRAD_ROUND_STOCHASTIC) underflow += (a != 0) & (out == 0);
        // A zero keeps its sign where the format's zero has one. Nearest-even
        // gives 0 exactly for the magnitudes up to half a step, toward-zero
        // for those below a step (as above), so where the zero is unsigned the
        // sign is kept from the next magnitude on (where it is signed, from 0):
        // one compare on the input, and no branch, which the vectorizer would
        // have to take out of the loop. Stochastic rounding decides by the result.
        if constexpr (R == ALTGRAD_ROUND_NEAREST_EVEN)
            return out | (sign & mask_if(a >= keep_sign_nearest_from_));
        if constexpr (R == ALTGRAD_ROUND_TOWARD_ZERO)
            return out | (sign & mask_if(a >= keep_sign_toward_zero_from_));
        return out | (sign & (mask_if(out != 0) | mask_if(signed_zero_)));
    }

    // Encode one scaled float32 (as bits) into a code. NaN into a format
    // without NaN sets `unrepresentable`.
    template <altgrad_rounding R, altgrad_overflow O>
    ALTGRAD_SDK_HD uint32_t encode_bits(uint32_t bits, uint32_t random, element_counts& counts,
                                        bool& unrepresentable) const {
        const uint32_t r = quantize_bits<R, O>(bits, random, counts);
        const uint32_t sign = (r & kSignBit) ? (1u << mag_bits_) : 0u;
        const uint32_t a = r & ~kSignBit;
        if (a > kInfBits) {
            if (specials_ == exmy_specials::finite) unrepresentable = true;
            return nan_code();
        }
        if (a == kInfBits) return sign | inf_magnitude_code();
        return sign | magnitude_code(a);
    }

    // The value of one code; codes wider than total_bits must be rejected
    // before. Exact: m * 2^k with m < 2^24 and the result inside float32's
    // range (checked at construction).
    ALTGRAD_SDK_HD float decode(uint32_t code) const {
        const bool negative = (code >> mag_bits_) & 1u;  // never without a sign bit: code < 2^mag_bits
        const uint32_t c = code & mag_mask_;
        const uint32_t e = c >> mantissa_bits_, m = c & ((1u << mantissa_bits_) - 1u);
        const float nan = bits_float(kQuietNanBits), inf = bits_float(kInfBits);
        switch (specials_) {
            case exmy_specials::ieee:
                if (e == (1u << exponent_bits_) - 1u) return m != 0 ? nan : negative ? -inf : inf;
                break;
            case exmy_specials::finite_nan:
                if (c == mag_mask_) return nan;
                break;
            case exmy_specials::p3109:
                if (c == 0 && negative) return nan;
                if (c == nan_code()) return nan;  // unsigned: all ones
                if (c == inf_magnitude_code()) return negative ? -inf : inf;
                break;
            case exmy_specials::fnuz:
                if (c == 0 && negative) return nan;
                break;
            case exmy_specials::finite: break;
        }
        // Field 0 is subnormal, or (without subnormals) normal but for zero.
        const bool subnormal = e == 0 && (gap_bits_ == 0 || m == 0);
        const float v = subnormal
                            ? ldexpf(static_cast<float>(m), 1 - bias_ - static_cast<int>(mantissa_bits_))
                            : ldexpf(static_cast<float>((1u << mantissa_bits_) + m),
                                     static_cast<int>(e) - bias_ - static_cast<int>(mantissa_bits_));
        return negative ? -v : v;
    }

    ALTGRAD_SDK_HD uint32_t total_bits() const { return mag_bits_ + (sign_mask_ != 0 ? 1u : 0u); }

private:
    friend class exmy_format;

    // The normal-range rounding of the fast paths (see quantize_normal_bits).
    template <altgrad_rounding R>
    ALTGRAD_SDK_INLINE uint32_t round_normal(uint32_t a, uint32_t random) const {
        uint32_t out;
        round_normal_lanes<R>(a, random, out);
        return out;
    }
    template <altgrad_rounding R, class U>
    ALTGRAD_SDK_INLINE void round_normal_lanes(const U& a, const U& random, U& out) const {
        U increment{};
        if constexpr (R == ALTGRAD_ROUND_NEAREST_EVEN)
            increment = half_step_less_one_ + (((a >> d_normal_) + parity_adjust_normal_) & odd_bit_);
        if constexpr (R == ALTGRAD_ROUND_STOCHASTIC) increment = (random >> random_shift_) & step_mask_;
        (void)random;
        out = (a + increment) & ~step_mask_;
    }

    // Round a finite magnitude (float32 bits `a`, no sign) onto the grid.
    // Garbage for Inf/NaN inputs; the caller overrides those.
    template <altgrad_rounding R>
    ALTGRAD_SDK_HD uint32_t round_magnitude(uint32_t a, uint32_t random) const {
        if (a < gap_bits_) return round_in_gap<R>(a, random);  // never with subnormals: gap_bits_ 0
        const uint32_t E = a >> 23;
        const uint32_t eff = E | static_cast<uint32_t>(E == 0);  // float32 subnormals: exponent 1
        const uint32_t sig = (a & 0x7FFFFFu) | (static_cast<uint32_t>(E != 0) << 23);
        const int32_t extra = emin_f_ - static_cast<int32_t>(eff);  // > 0: subnormal in the format
        uint32_t d = d_normal_ + static_cast<uint32_t>(extra > 0 ? extra : 0);
        d = d < 56u ? d : 56u;
        const uint64_t wide = (uint64_t{sig} << 32) >> d;
        uint32_t q = static_cast<uint32_t>(wide >> 32);
        const uint32_t frac32 = static_cast<uint32_t>(wide);
        // Ties go to the even code. With mantissa bits (or below the normal
        // range) the code's last bit is q's; with none it is the exponent's.
        const uint32_t odd = (mantissa_bits_ > 0 || extra > 0) ? (q & 1u) : ((eff + parity_adjust_) & 1u);
        q += round_away<R>(frac32, odd, random);
        const uint32_t normal = ((eff - 1u) << 23) + (q << d_normal_);
        const uint32_t subnormal = q == 0 ? 0u : float_bits(static_cast<float>(q)) + sub_exponent_adjust_;
        return extra > 0 ? subnormal : normal;
    }

    // Without subnormals, a magnitude below the smallest positive value v =
    // gap_bits_ = (2^M + 1) * 2^(-bias - M) lies between 0 (code 0) and v
    // (code 1): a gap whose width is no power of two. |x| = sig * 2^(eff - 150)
    // is at f = sig * 2^t / D of the way from 0 to v, with D = 2^M + 1 and
    // t = eff + bias + M - 118 <= M + 9 (|x| < v). Exact in 64-bit integers:
    //   nearest-even: away iff f > 1/2 (a tie goes to code 0), i.e.
    //     sig * 2^(t+1) > D * 2^32 (for t + 1 < 0 the left side is < 2^24);
    //   stochastic: away iff floor(f * 2^32) + R >= 2^32, i.e. (K = 2^32 - R
    //     an integer) sig * 2^t >= D * K, compared as floor(sig * 2^t) >= D * K;
    //   toward-zero: 0.
    // Both sides stay below 2^58.
    template <altgrad_rounding R>
    ALTGRAD_SDK_HD uint32_t round_in_gap(uint32_t a, uint32_t random) const {
        if constexpr (R == ALTGRAD_ROUND_TOWARD_ZERO) {
            (void)a, (void)random;
            return 0u;
        } else {
            const uint32_t E = a >> 23;
            const int32_t eff = static_cast<int32_t>(E | static_cast<uint32_t>(E == 0));
            const uint64_t sig = (a & 0x7FFFFFu) | (static_cast<uint32_t>(E != 0) << 23);
            const uint64_t divisor = (uint64_t{1} << mantissa_bits_) + 1u;
            const int32_t t = eff + gap_shift_ + (R == ALTGRAD_ROUND_NEAREST_EVEN ? 1 : 0);
            const uint64_t scaled = t >= 0 ? sig << t : -t < 64 ? sig >> -t : 0u;
            bool away;
            if constexpr (R == ALTGRAD_ROUND_NEAREST_EVEN) away = scaled > (divisor << 32);
            else away = scaled >= divisor * ((uint64_t{1} << 32) - random);
            return away ? gap_bits_ : 0u;
        }
    }

    // round_magnitude without branches or 64-bit arithmetic (see
    // quantize_bits_branchless). The significand sig (< 2^24) is shifted
    // right by d bits into q, the count of grid steps, and rounded by the
    // dropped bits, with 32-bit shifts only since a 64-bit shift would split
    // each vector in two:
    //   toward-zero:  q = sig >> d (0 for d >= 24).
    //   nearest-even: in the doubled significand s2 = 2 sig (< 2^25),
    //     q = (s2 + 2^d - 1 + odd) >> (d + 1), odd the last bit of the
    //     truncated code. This is round_away's rule: with L the d dropped
    //     bits, it adds 1 exactly when 2L >= 2^d + 1 - odd, i.e. L > half a
    //     step, or L == half and odd; d == 0 adds nothing. For d >= 25 the
    //     value is below half the smallest step and rounds to 0, as it does
    //     with d clamped to 25.
    //   stochastic:   frac32 = the 32 bits below the kept ones (the low word
    //     of (sig << 32) >> d, d up to 56), q = (sig >> d) + round_away.
    template <altgrad_rounding R>
    ALTGRAD_SDK_INLINE uint32_t round_magnitude_branchless(uint32_t a, uint32_t random) const {
        using detail::mask_if;
        using detail::select_bits;
        const int32_t emin_f = emin_f_;
        const uint32_t d_normal = d_normal_, parity_adjust = parity_adjust_;
        const uint32_t sub_exponent_adjust = sub_exponent_adjust_;
        const bool has_mantissa = mantissa_bits_ > 0;
        const int32_t E = static_cast<int32_t>(a >> 23);
        const int32_t eff = E > 1 ? E : 1;  // float32 subnormals: exponent 1
        const uint32_t sig = (a & 0x7FFFFFu) | (0x800000u & mask_if(E != 0));
        const int32_t extra = emin_f - eff;  // > 0: subnormal in the format
        const bool below = extra > 0;
        const int32_t d = static_cast<int32_t>(d_normal) + (extra > 0 ? extra : 0);
        uint32_t q;
        if constexpr (R == ALTGRAD_ROUND_NEAREST_EVEN) {
            const uint32_t dc = static_cast<uint32_t>(d < 25 ? d : 25);
            const uint32_t s2 = sig << 1;
            const uint32_t odd = select_bits(has_mantissa | below, s2 >> (dc + 1u),
                                             static_cast<uint32_t>(eff) + parity_adjust) &
                                 1u;
            q = (s2 + ((1u << dc) - 1u) + odd) >> (dc + 1u);
        } else if constexpr (R == ALTGRAD_ROUND_TOWARD_ZERO) {
            (void)random, (void)parity_adjust, (void)has_mantissa;
            q = sig >> static_cast<uint32_t>(d < 31 ? d : 31);  // d >= 24 leaves 0
        } else {
            (void)parity_adjust, (void)has_mantissa;
            const int32_t dc = d < 56 ? d : 56;
            const uint32_t q0 = sig >> static_cast<uint32_t>(dc < 31 ? dc : 31);
            const uint32_t frac_lo =
                (sig << static_cast<uint32_t>((32 - dc) & 31)) & mask_if(dc != 0);  // dc <= 32
            const uint32_t frac_hi = sig >> static_cast<uint32_t>((dc - 32) & 31);  // dc in [33, 56]
            const uint32_t frac32 = select_bits(dc > 32, frac_hi, frac_lo);
            q = q0 + round_away<R>(frac32, 0u, random);
        }
        const uint32_t normal = ((static_cast<uint32_t>(eff) - 1u) << 23) + (q << d_normal);
        // q <= 2^23 + 1 below the normal range, so the signed conversion is exact.
        const uint32_t subnormal =
            (float_bits(static_cast<float>(static_cast<int32_t>(q))) + sub_exponent_adjust) & mask_if(q != 0);
        return select_bits(below, subnormal, normal);
    }

    template <altgrad_rounding R, altgrad_overflow O>
    ALTGRAD_SDK_INLINE uint32_t overflow_target(bool input_is_inf) const {
        if constexpr (O == ALTGRAD_OVERFLOW_SATURATE) return max_bits_;
        // Round-toward-zero never turns a finite input into Inf (or NaN).
        if constexpr (R == ALTGRAD_ROUND_TOWARD_ZERO) return input_is_inf ? nonfinite_bits_ : max_bits_;
        return nonfinite_bits_;
    }
    // The same for a negative input (before its sign is applied): without a
    // sign bit the lowest value is 0, the non-finite one NaN (or 0); with
    // one, overflow_target's.
    template <altgrad_rounding R, altgrad_overflow O>
    ALTGRAD_SDK_INLINE uint32_t negative_overflow_target(bool input_is_inf) const {
        if constexpr (O == ALTGRAD_OVERFLOW_SATURATE) return negative_max_bits_;
        if constexpr (R == ALTGRAD_ROUND_TOWARD_ZERO)
            return input_is_inf ? negative_nonfinite_bits_ : negative_max_bits_;
        return negative_nonfinite_bits_;
    }

    ALTGRAD_SDK_HD uint32_t nan_code() const {
        switch (specials_) {
            case exmy_specials::ieee:
                return (((1u << exponent_bits_) - 1u) << mantissa_bits_) | (1u << (mantissa_bits_ - 1u));
            case exmy_specials::finite_nan: return mag_mask_;
            case exmy_specials::p3109: return sign_mask_ != 0 ? mag_mask_ + 1u : mag_mask_;
            case exmy_specials::fnuz: return mag_mask_ + 1u;
            case exmy_specials::finite: return 0u;
        }
        return 0u;
    }

    ALTGRAD_SDK_HD uint32_t inf_magnitude_code() const {
        if (specials_ == exmy_specials::ieee) return ((1u << exponent_bits_) - 1u) << mantissa_bits_;
        return sign_mask_ != 0 ? mag_mask_ : mag_mask_ - 1u;  // p3109; unsigned: below the NaN
    }

    // Code of a finite float32 magnitude that is exactly on the grid.
    ALTGRAD_SDK_HD uint32_t magnitude_code(uint32_t a) const {
        if (a == 0) return 0u;
        const uint32_t E = a >> 23;
        const uint32_t eff = E | static_cast<uint32_t>(E == 0);
        const uint32_t sig = (a & 0x7FFFFFu) | (static_cast<uint32_t>(E != 0) << 23);
        if (E != 0 && static_cast<int32_t>(E) >= emin_f_) {
            // Without subnormals the binade at emin_f_ is field 0.
            const uint32_t e_field = eff - static_cast<uint32_t>(emin_f_) + (gap_bits_ == 0 ? 1u : 0u);
            return (e_field << mantissa_bits_) | ((sig >> d_normal_) & ((1u << mantissa_bits_) - 1u));
        }
        return sig >> (d_normal_ + static_cast<uint32_t>(emin_f_ - static_cast<int32_t>(eff)));
    }

    exmy_specials specials_ = exmy_specials::ieee;
    uint32_t exponent_bits_ = 0, mantissa_bits_ = 0;
    int32_t bias_ = 0;
    int32_t emin_f_ = 0;  // biased float32 exponent of the format's lowest normal binade
    uint32_t mag_bits_ = 0, mag_mask_ = 0, max_bits_ = 0;
    uint32_t d_normal_ = 0, sub_exponent_adjust_ = 0, parity_adjust_ = 0;
    uint32_t nonfinite_bits_ = 0;
    bool signed_zero_ = true;
    // The fast path (quantize_normal_bits).
    uint32_t normal_low_ = 0, normal_span_ = 0;
    uint32_t step_mask_ = 0, half_step_less_one_ = 0, odd_bit_ = 0, parity_adjust_normal_ = 0,
             random_shift_ = 31;
    // The finite fast path (quantize_finite_bits); finite_limit_ 0 turns it off.
    uint32_t finite_limit_ = 0;
    float grid_magic_ = 0, grid_step_ = 0, grid_frac_scale_ = 0;
    uint32_t zero_half_step_bits_ = 0,
             zero_step_bits_ = 0;  // the bits of half the grid step, and of the step
    uint32_t keep_sign_nearest_from_ = 0,
             keep_sign_toward_zero_from_ =
                 0;  // the smallest magnitudes not rounded to 0 (unsigned zero), or 0
    // Without a sign bit: sign_mask_ 0, and a negative input overflows past
    // negative_max_bits_ (0) to negative_nonfinite_bits_; with one, kSignBit,
    // max_bits_ and nonfinite_bits_.
    uint32_t sign_mask_ = kSignBit, negative_max_bits_ = 0, negative_nonfinite_bits_ = 0;
    // Without subnormals (M > 0): the bits of the smallest positive value,
    // below which round_in_gap rounds, and bias + M - 118 (its t); else 0.
    uint32_t gap_bits_ = 0;
    int32_t gap_shift_ = 0;
};

class exmy_format {
public:
    explicit exmy_format(const exmy_spec& spec) : spec_(spec) {
        check_shape();
        set_codes();
        set_rounding();
        set_fast_paths();
        if (total_bits() <= 16) {
            decode_table_.resize(size_t{1} << total_bits());
            for (uint32_t c = 0; c < decode_table_.size(); ++c) decode_table_[c] = kernel_.decode(c);
        }
    }

    uint32_t total_bits() const { return kernel_.total_bits(); }

    // The element arithmetic, for the adapter's CUDA kernels.
    const exmy_kernel& kernel() const { return kernel_; }

    altgrad_format_info info() const {
        const uint32_t M = kernel_.mantissa_bits_;
        altgrad_format_info i{};
        i.struct_size = sizeof i;
        i.family = ALTGRAD_FAMILY_FLOAT;
        i.total_bits = total_bits();
        i.code_bytes = total_bits() <= 8 ? 1u : total_bits() <= 16 ? 2u : 4u;
        i.exponent_bits = static_cast<uint32_t>(spec_.exponent_bits);
        i.mantissa_bits = M;
        i.bias = spec_.bias;
        i.is_signed = spec_.has_sign ? 1u : 0u;
        i.zero = kernel_.signed_zero_ ? ALTGRAD_ZERO_SIGNED : ALTGRAD_ZERO_UNSIGNED;
        i.has_subnormals = M > 0 && !has_gap() ? 1u : 0u;
        i.has_inf = kernel_.nonfinite_bits_ == kInfBits ? 1u : 0u;
        const uint32_t signs = spec_.has_sign ? 2u : 1u;
        switch (spec_.specials) {
            case exmy_specials::ieee: i.nan_code_count = signs * ((1u << M) - 1u); break;
            case exmy_specials::finite_nan: i.nan_code_count = signs; break;
            case exmy_specials::p3109:
            case exmy_specials::fnuz: i.nan_code_count = 1; break;
            case exmy_specials::finite: i.nan_code_count = 0; break;
        }
        i.canonical_nan_code = kernel_.nan_code();
        i.max_finite = code_value(max_code_);
        i.lowest_finite = spec_.has_sign ? -i.max_finite : 0.0;
        // Without subnormals every positive value is normal, from code 1 on.
        i.min_normal = code_value(has_gap() ? 1u : 1u << M);
        i.min_subnormal = i.has_subnormals ? code_value(1u) : 0.0;
        i.rounding_modes = kAllRoundingModes;
        i.memory_kinds = 1u << ALTGRAD_MEMORY_HOST;
        return i;
    }

    template <altgrad_rounding R, altgrad_overflow O>
    uint32_t quantize_bits(uint32_t bits, uint32_t random, element_counts& counts) const {
        return kernel_.quantize_bits<R, O>(bits, random, counts);
    }

    template <altgrad_rounding R, altgrad_overflow O>
    ALTGRAD_SDK_INLINE uint32_t quantize_bits_branchless(uint32_t bits, uint32_t random,
                                                         element_counts& counts) const {
        return kernel_.quantize_bits_branchless<R, O>(bits, random, counts);
    }

    ALTGRAD_SDK_INLINE uint32_t fast_flags(uint32_t bits) const { return kernel_.fast_flags(bits); }
    // fast_flags: bit 1 for the magnitudes from one bound up, bit 0 outside one interval
    // (has_interval_fast_ranges, rounding.hpp).
    static constexpr bool fast_ranges_are_intervals = true;
    template <altgrad_rounding R, altgrad_overflow O>
    ALTGRAD_SDK_INLINE uint32_t quantize_normal_bits(uint32_t bits, uint32_t random,
                                                     uint32_t& overflow) const {
        return kernel_.quantize_normal_bits<R, O>(bits, random, overflow);
    }
    // quantize_normal_bits on lanes (uint32_t or GCC vectors of them): has_normal_lanes, format_plugin.hpp.
    template <altgrad_rounding R, altgrad_overflow O, class U>
    ALTGRAD_SDK_INLINE void quantize_normal_lanes(const U& bits, const U& random, U& overflow, U& out) const {
        kernel_.quantize_normal_lanes<R, O>(bits, random, overflow, out);
    }
    template <altgrad_rounding R, altgrad_overflow O>
    ALTGRAD_SDK_INLINE uint32_t quantize_finite_bits(uint32_t bits, uint32_t random, uint32_t& overflow,
                                                     uint32_t& underflow) const {
        return kernel_.quantize_finite_bits<R, O>(bits, random, overflow, underflow);
    }

    template <altgrad_rounding R, altgrad_overflow O>
    uint32_t encode_bits(uint32_t bits, uint32_t random, element_counts& counts,
                         bool& unrepresentable) const {
        return kernel_.encode_bits<R, O>(bits, random, counts, unrepresentable);
    }

    // Decode one code; codes wider than total_bits must be rejected before.
    float decode(uint32_t code) const {
        return decode_table_.empty() ? kernel_.decode(code) : decode_table_[code];
    }

    // Whether the adapter's vector loops (quantize_bits_branchless and the
    // fast paths) serve this format: not without a sign bit or without
    // subnormals, which take its baseline loop, quantize_bits element by
    // element (format_plugin.hpp, pick_isa).
    bool branchless_applies() const { return kernel_.sign_mask_ != 0 && kernel_.gap_bits_ == 0; }

private:
    [[noreturn]] static void fail(const std::string& why) {
        throw plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT, "exmy: " + why);
    }

    bool has_gap() const { return !spec_.subnormals && spec_.mantissa_bits > 0; }

    // The widths, the sign and the exponent range; the codes' layout.
    void check_shape() {
        const int E = spec_.exponent_bits, M = spec_.mantissa_bits;
        if (E < 1 || E > 8) fail("exponent_bits must be 1..8, got " + std::to_string(E));
        if (M < 0 || M > 23) fail("mantissa_bits must be 0..23, got " + std::to_string(M));
        if (spec_.specials == exmy_specials::fnuz && !spec_.has_sign)
            fail("fnuz puts NaN at the negative zero, which a format without a sign bit has not");
        if (spec_.specials == exmy_specials::ieee && M == 0)
            fail("an IEEE-style format needs at least one mantissa bit for NaN");
        exmy_kernel& k = kernel_;
        k.specials_ = spec_.specials;
        k.exponent_bits_ = static_cast<uint32_t>(E);
        k.mantissa_bits_ = static_cast<uint32_t>(M);
        k.bias_ = spec_.bias;
        // Without subnormals the lowest normal binade is field 0's, 2^-bias.
        k.emin_f_ = (has_gap() ? 0 : 1) - spec_.bias + 127;
        if (k.emin_f_ < 1 && has_gap())
            fail("bias " + std::to_string(spec_.bias) +
                 " puts the smallest value below float32's normals (without subnormals, exponent field 0 "
                 "is 2^-bias * 1.m)");
        if (k.emin_f_ < 1)
            fail("bias " + std::to_string(spec_.bias) + " puts the smallest normal below float32's");
        if (!has_gap() && k.emin_f_ > 1 && k.emin_f_ - M < 1)
            fail("subnormals of this format lie below float32's normal range");
        k.mag_bits_ = static_cast<uint32_t>(E + M);
        k.mag_mask_ = (1u << k.mag_bits_) - 1u;
        k.sign_mask_ = spec_.has_sign ? kSignBit : 0u;
    }

    // The largest finite code, the special values and the zero.
    void set_codes() {
        exmy_kernel& k = kernel_;
        const uint32_t E = k.exponent_bits_, M = k.mantissa_bits_;
        switch (spec_.specials) {
            case exmy_specials::ieee: max_code_ = (((1u << E) - 1u) << M) - 1u; break;
            case exmy_specials::finite_nan: max_code_ = k.mag_mask_ - 1u; break;
            case exmy_specials::p3109: max_code_ = k.mag_mask_ - (spec_.has_sign ? 1u : 2u); break;
            case exmy_specials::finite:
            case exmy_specials::fnuz: max_code_ = k.mag_mask_; break;
        }
        if (max_code_ < (has_gap() ? 1u : 1u << M))  // E1 with ieee specials, E1M0 with fn or p3109
            fail("no normal number: every exponent field above 0 holds special values only");
        const double max = code_value(max_code_);
        if (!(max <= FLT_MAX)) fail("max finite exceeds float32's range");
        k.max_bits_ = float_bits(static_cast<float>(max));
        const bool has_inf = spec_.specials == exmy_specials::ieee || spec_.specials == exmy_specials::p3109;
        const bool has_nan = spec_.specials != exmy_specials::finite;
        k.nonfinite_bits_ = has_inf ? kInfBits : has_nan ? kQuietNanBits : k.max_bits_;
        k.signed_zero_ =
            spec_.has_sign && spec_.specials != exmy_specials::p3109 && spec_.specials != exmy_specials::fnuz;
        k.negative_max_bits_ = spec_.has_sign ? k.max_bits_ : 0u;
        k.negative_nonfinite_bits_ = spec_.has_sign ? k.nonfinite_bits_ : has_nan ? kQuietNanBits : 0u;
    }

    // The constants of the general kernels (round_magnitude, round_in_gap).
    void set_rounding() {
        exmy_kernel& k = kernel_;
        const int M = spec_.mantissa_bits;
        k.d_normal_ = static_cast<uint32_t>(23 - M);
        k.sub_exponent_adjust_ = static_cast<uint32_t>(k.emin_f_ - 127 - M) << 23;
        k.parity_adjust_ = static_cast<uint32_t>(spec_.bias + 1) & 1u;
        if (has_gap()) {
            k.gap_bits_ = float_bits(static_cast<float>(code_value(1)));
            k.gap_shift_ = spec_.bias + M - 118;
        }
    }

    // The constants of the fast paths (see exmy_kernel::fast_flags). Without
    // a sign bit there are none (fast_flags is always 3: the general kernel,
    // which knows what a negative input becomes); without subnormals the
    // normal one starts at the smallest positive value and there is no
    // finite one (the gap is not a grid).
    void set_fast_paths() {
        exmy_kernel& k = kernel_;
        const int M = spec_.mantissa_bits;
        const uint32_t d = k.d_normal_;
        k.step_mask_ = (1u << d) - 1u;
        k.half_step_less_one_ = d > 0 ? (1u << (d - 1u)) - 1u : 0u;
        k.odd_bit_ = d > 0 ? 1u : 0u;
        k.parity_adjust_normal_ = M > 0 ? 0u : k.parity_adjust_;
        k.random_shift_ = d > 0 ? 32u - d : 31u;
        k.normal_low_ = has_gap() ? k.gap_bits_ : static_cast<uint32_t>(k.emin_f_) << 23;  // emin_f <= 254
        k.normal_span_ = 0x7F7FFFFFu - k.normal_low_;                                      // up to FLT_MAX
        if (!spec_.has_sign) k.normal_low_ = kSignBit, k.normal_span_ = 0;  // no magnitude is that far
        const int grid_exponent = k.emin_f_ - 127 - M;  // the subnormal step is 2^grid_exponent
        if (spec_.has_sign && !has_gap() && k.emin_f_ - M >= 60 && grid_exponent + 23 <= 127) {
            k.finite_limit_ = kInfBits;
            k.grid_magic_ = std::ldexp(1.0f, grid_exponent + 23);
            k.grid_step_ = std::ldexp(1.0f, grid_exponent);
            k.grid_frac_scale_ = std::ldexp(1.0f, 32 - grid_exponent);
            k.zero_step_bits_ = float_bits(k.grid_step_);
            k.zero_half_step_bits_ = float_bits(std::ldexp(1.0f, grid_exponent - 1));
            k.keep_sign_nearest_from_ = k.signed_zero_ ? 0u : k.zero_half_step_bits_ + 1u;
            k.keep_sign_toward_zero_from_ = k.signed_zero_ ? 0u : k.zero_step_bits_;
        }
    }

    // Value of a magnitude code, computed in double (exact for every format
    // this class accepts, and finite where float32's range is exceeded, which
    // is what the constructor checks with it).
    double code_value(uint32_t c) const {
        const int M = spec_.mantissa_bits;
        const uint32_t e = c >> M, m = c & ((1u << M) - 1u);
        if (e == 0 && (!has_gap() || m == 0)) return std::ldexp(static_cast<double>(m), 1 - spec_.bias - M);
        if (e == 0) return std::ldexp(static_cast<double>((1u << M) + m), -spec_.bias - M);
        return std::ldexp(static_cast<double>((1u << M) + m), static_cast<int>(e) - spec_.bias - M);
    }

    exmy_spec spec_;
    exmy_kernel kernel_;
    uint32_t max_code_ = 0;
    std::vector<float> decode_table_;
};

}  // namespace altgrad::sdk
