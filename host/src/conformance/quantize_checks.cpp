// The quantize.* checks (but quantize.block_scales, block_scales_checks.cpp):
// each rounding mode against the model built from the format's own codes,
// ties, idempotence, monotonicity, sign symmetry, overflow, specials, the
// subnormal boundary, encode and decode against quantize, scaling and the
// overflow and underflow counts.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "conformance/checks.hpp"
#include "util/error.hpp"

namespace altgrad::host::conformance {

namespace {

std::vector<float> beyond_range(const format_table& t) {
    std::vector<float> p;
    for (float x : grid_probes(t))
        if (x > t.max() || x < t.lowest()) p.push_back(x);
    p.push_back(INFINITY);
    p.push_back(-INFINITY);
    p.push_back(t.max());
    p.push_back(t.lowest());
    return p;
}

// Whether quantize disagrees with decode(encode(x, o), o.scale) on `in`.
std::optional<result> quantize_differs_from_codes(const env& e, const std::vector<float>& in,
                                                  const quantize_options& o) {
    const std::vector<float> q = quantize(e, in, o);
    const std::vector<float> d = decode(e, encode(e, in, o), o.scale);
    for (size_t k = 0; k < in.size(); ++k)
        if (!same(q[k], d[k]))
            return fail(
                "quantize gave " + hex_float(q[k]) + " but decode(encode(x)) gave " + hex_float(d[k]),
                "x = " + hex_float(in[k]) + " (" + mode_text(o) + ", seed " + std::to_string(o.seed) + ")",
                o.scale == 1.0f ? "quantize, encode and decode must share one rounding"
                                : "encode rounds x*scale; decode must return the code's value / scale");
    return std::nullopt;
}

}  // namespace

result check_nearest(env& e) {
    if (!e.table) return needs_table(e);
    return against_reference(
        e, all_probes(e), mode(ALTGRAD_ROUND_NEAREST_EVEN),
        "round to the nearest representable value (altgrad/sdk/exmy.hpp does this for ExMy)");
}

result check_ties(env& e) {
    if (!e.table) return needs_table(e);
    std::vector<float> ties;
    const auto& f = e.table->finite();
    for (size_t k = 0; k + 1 < f.size(); ++k) {
        const double mid = (static_cast<double>(f[k].value) + f[k + 1].value) / 2;
        if (static_cast<double>(static_cast<float>(mid)) == mid) ties.push_back(static_cast<float>(mid));
    }
    if (ties.empty()) return skip("no midpoint between two codes is a float32");
    return against_reference(
        e, ties, mode(ALTGRAD_ROUND_NEAREST_EVEN),
        "at an exact tie pick the neighbour whose code is even (not the one away from zero)");
}

result check_toward_zero(env& e) {
    if (!e.table) return needs_table(e);
    if (!(e.format->info().rounding_modes & (1u << ALTGRAD_ROUND_TOWARD_ZERO)))
        return skip("the format does not implement toward-zero");
    return against_reference(e, all_probes(e), mode(ALTGRAD_ROUND_TOWARD_ZERO),
                             "truncate: the neighbour nearer zero; never Inf for a finite input");
}

result check_idempotent(env& e) {
    for (altgrad_rounding r :
         {ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_ROUND_TOWARD_ZERO, ALTGRAD_ROUND_STOCHASTIC}) {
        if (!(e.format->info().rounding_modes & (1u << r))) continue;
        const quantize_options o = mode(r);
        const std::vector<float> in = all_probes(e);
        const std::vector<float> once = quantize(e, in, o);
        const std::vector<float> twice = quantize(e, once, o);
        for (size_t k = 0; k < in.size(); ++k)
            if (!same(once[k], twice[k]))
                return fail("q(x) = " + hex_float(once[k]) + " but q(q(x)) = " + hex_float(twice[k]),
                            "x = " + hex_float(in[k]) + " (" + mode_text(o) + ")",
                            "a representable value must come back unchanged");
    }
    return pass("q(q(x)) = q(x) under every implemented rounding mode");
}

result check_monotone(env& e) {
    std::vector<float> in = all_probes(e);
    std::sort(in.begin(), in.end());
    for (altgrad_rounding r : {ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_ROUND_TOWARD_ZERO}) {
        if (!(e.format->info().rounding_modes & (1u << r))) continue;
        const quantize_options o = mode(r);
        const std::vector<float> out = quantize(e, in, o);
        for (size_t k = 1; k < in.size(); ++k)
            if (out[k] < out[k - 1])
                return fail(
                    "x1 = " + hex_float(in[k - 1]) + " < x2 = " + hex_float(in[k]) +
                        " but q(x1) = " + hex_float(out[k - 1]) + " > q(x2) = " + hex_float(out[k]),
                    "x1 = " + hex_float(in[k - 1]) + ", x2 = " + hex_float(in[k]) + " (" + mode_text(o) + ")",
                    "quantize must never reorder values");
    }
    return pass("x1 <= x2 implies q(x1) <= q(x2) on " + std::to_string(in.size()) + " sorted inputs");
}

result check_sign_symmetric(env& e) {
    const altgrad_format_info& i = e.format->info();
    if (!i.is_signed) return skip("the format is unsigned");
    const double bound = std::min(i.max_finite, -i.lowest_finite);
    std::vector<float> in;
    for (float x : all_probes(e))
        if (std::fabs(x) <= bound && x != 0) in.push_back(std::fabs(x));
    std::vector<float> neg(in.size());
    std::transform(in.begin(), in.end(), neg.begin(), [](float x) { return -x; });
    for (altgrad_rounding r : {ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_ROUND_TOWARD_ZERO}) {
        if (!(i.rounding_modes & (1u << r))) continue;
        const quantize_options o = mode(r);
        const std::vector<float> p = quantize(e, in, o), n = quantize(e, neg, o);
        for (size_t k = 0; k < in.size(); ++k)
            if (p[k] != -n[k])
                return fail("q(x) = " + hex_float(p[k]) + " but q(-x) = " + hex_float(n[k]),
                            "x = " + hex_float(in[k]) + " (" + mode_text(o) + ")",
                            "round the magnitude, then apply the sign");
    }
    return pass("q(-x) = -q(x) for |x| <= " + hex_float(bound));
}

result check_overflow_saturate(env& e) {
    if (!e.table) return needs_table(e);
    return against_reference(
        e, beyond_range(*e.table), mode(ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_OVERFLOW_SATURATE),
        "saturate mode sends finite overflow and +-Inf to the extreme finite values, after "
        "rounding (the tie just above max may round down to max)");
}

result check_overflow_nonfinite(env& e) {
    if (!e.table) return needs_table(e);
    for (altgrad_rounding r : {ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_ROUND_TOWARD_ZERO}) {
        if (!(e.format->info().rounding_modes & (1u << r))) continue;
        result res =
            against_reference(e, beyond_range(*e.table), mode(r, ALTGRAD_OVERFLOW_NONFINITE),
                              "non-finite mode sends overflow to +-Inf where the format has Inf, else NaN, "
                              "else saturates; toward-zero never turns a finite input into Inf");
        if (res.status != outcome::passed) return res;
    }
    return pass("overflow goes where the rules say under non-finite mode");
}

result check_specials(env& e) {
    const altgrad_format_info& i = e.format->info();
    for (altgrad_rounding r :
         {ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_ROUND_STOCHASTIC, ALTGRAD_ROUND_TOWARD_ZERO}) {
        if (!(i.rounding_modes & (1u << r))) continue;
        for (altgrad_overflow ov : {ALTGRAD_OVERFLOW_SATURATE, ALTGRAD_OVERFLOW_NONFINITE}) {
            const quantize_options o = mode(r, ov);
            const std::vector<float> in = {NAN, -NAN, 0.0f, -0.0f};
            const std::vector<float> out = quantize(e, in, o);
            for (int k = 0; k < 2; ++k)
                if (!std::isnan(out[k]))
                    return fail("NaN gave " + hex_float(out[k]),
                                "x = " + hex_float(in[k]) + " (" + mode_text(o) + ")",
                                "quantize must keep NaN visible: NaN in, NaN out, in every format");
            if (i.zero == ALTGRAD_ZERO_NONE) continue;  // 0 lies beyond its lowest value: checked below
            if (!same(out[2], 0.0f))
                return fail("+0 gave " + hex_float(out[2]), "x = 0x0p+0 (" + mode_text(o) + ")",
                            "zero is exact");
            const bool signed_zero = i.zero == ALTGRAD_ZERO_SIGNED;
            if (!(same(out[3], -0.0f) || (!signed_zero && same(out[3], 0.0f))))
                return fail("-0 gave " + hex_float(out[3]), "x = -0x0p+0 (" + mode_text(o) + ")",
                            "-0 stays -0 where the format has a negative zero, else becomes +0");
        }
    }
    if (!e.table) return pass("NaN and +-0 behave (Inf needs a code table)");
    result saturate = against_reference(e, {INFINITY, -INFINITY},
                                        mode(ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_OVERFLOW_SATURATE),
                                        "+-Inf saturate to the extreme finite values");
    if (saturate.status != outcome::passed) return saturate;
    result nonfinite = against_reference(
        e, {INFINITY, -INFINITY}, mode(ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_OVERFLOW_NONFINITE),
        "+-Inf stay +-Inf where the format has Inf, else NaN, else saturate");
    if (nonfinite.status != outcome::passed) return nonfinite;
    if (i.zero == ALTGRAD_ZERO_NONE)
        for (altgrad_overflow ov : {ALTGRAD_OVERFLOW_SATURATE, ALTGRAD_OVERFLOW_NONFINITE}) {
            result zero =
                against_reference(e, {0.0f, -0.0f}, mode(ALTGRAD_ROUND_NEAREST_EVEN, ov),
                                  "a format without zero has nothing at 0: it lies beyond the lowest "
                                  "value, an overflow (saturate: the lowest value; non-finite: NaN)");
            if (zero.status != outcome::passed) return zero;
        }
    return pass("NaN, +-Inf and +-0 behave under every mode");
}

result check_subnormal_boundary(env& e) {
    if (!e.table) return needs_table(e);
    const auto& f = e.table->finite();
    std::vector<float> in;
    for (size_t k = 0; k < f.size(); ++k) {
        if (f[k].value <= 0) continue;
        // The smallest positive values and the gap below them.
        for (size_t j = k; j < f.size() && j < k + 3; ++j) {
            const float v = f[j].value;
            for (float x : {v, v / 2, v / 4, std::nextafter(v / 2, 0.0f), std::nextafter(v / 2, INFINITY),
                            std::nextafter(v, 0.0f), v * 0.75f})
                if (x != 0) {
                    in.push_back(x);
                    in.push_back(-x);
                }
        }
        break;
    }
    const double min_normal = e.format->info().min_normal;
    for (double k : {0.5, 0.99, 1.0, 1.01, 1.5})
        if (min_normal * k > 0) {
            in.push_back(static_cast<float>(min_normal * k));
            in.push_back(static_cast<float>(-min_normal * k));
        }
    in.push_back(std::nextafter(0.0f, 1.0f));  // the smallest float32 subnormal
    in.push_back(-std::nextafter(0.0f, 1.0f));
    for (altgrad_rounding r : {ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_ROUND_TOWARD_ZERO}) {
        if (!(e.format->info().rounding_modes & (1u << r))) continue;
        result res = against_reference(e, in, mode(r),
                                       "values below the smallest code round to 0 or to it; "
                                       "half the smallest value is a tie with zero (code 0, even)");
        if (res.status != outcome::passed) return res;
    }
    return pass("the smallest values, the normal boundary and the gap to zero round as the codes say");
}

result check_encode_decode(env& e) {
    e.drew_random = true;
    const altgrad_format_info& i = e.format->info();
    std::vector<float> in = all_probes(e);
    in.push_back(INFINITY);
    in.push_back(-INFINITY);
    if (i.nan_code_count > 0) in.push_back(NAN);
    for (altgrad_rounding r :
         {ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_ROUND_STOCHASTIC, ALTGRAD_ROUND_TOWARD_ZERO}) {
        if (!(i.rounding_modes & (1u << r))) continue;
        for (altgrad_overflow ov : {ALTGRAD_OVERFLOW_SATURATE, ALTGRAD_OVERFLOW_NONFINITE}) {
            quantize_options o = mode(r, ov);
            o.seed = e.opts.seed;
            if (auto bad = quantize_differs_from_codes(e, in, o)) return *bad;
        }
    }
    // Scales other than 1: decode must divide by the scale, as quantize does.
    for (float s : {0.125f, 3.0f, 0.1f}) {
        quantize_options o = mode(ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_OVERFLOW_SATURATE, s);
        o.seed = e.opts.seed;
        if (auto bad = quantize_differs_from_codes(e, in, o)) return *bad;
    }
    if (i.nan_code_count == 0) {
        try {
            encode(e, {NAN}, mode(ALTGRAD_ROUND_NEAREST_EVEN));
            return fail("encoding NaN into a format without NaN succeeded", "x = nan",
                        "return ALTGRAD_STATUS_NOT_REPRESENTABLE naming the element");
        } catch (const error& x) {
            if (std::string(x.what()).find("not representable") == std::string::npos)
                return fail(std::string("encoding NaN failed with the wrong status: ") + x.what(), "x = nan",
                            "return ALTGRAD_STATUS_NOT_REPRESENTABLE");
        }
    }
    return pass("quantize(x) = decode(encode(x)) under every mode, and with scales 1/8, 3 and 0.1");
}

result check_scaling(env& e) {
    if (!e.table) return needs_table(e);
    for (float s : {0.125f, 32.0f, 3.0f, 0.1f}) {
        result r = against_reference(e, all_probes(e, 5000),
                                     mode(ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_OVERFLOW_SATURATE, s),
                                     "the result must be q(fl(x*s)) / s in float32");
        if (r.status != outcome::passed) return r;
    }
    return pass("q(x*s)/s for s = 1/8, 32, 3, 0.1");
}

result check_counts(env& e) {
    if (!e.table) return needs_table(e);
    std::vector<float> in = all_probes(e);
    in.push_back(INFINITY);
    in.push_back(-INFINITY);
    in.push_back(NAN);
    for (altgrad_rounding r : {ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_ROUND_TOWARD_ZERO}) {
        if (!(e.format->info().rounding_modes & (1u << r))) continue;
        for (altgrad_overflow ov : {ALTGRAD_OVERFLOW_SATURATE, ALTGRAD_OVERFLOW_NONFINITE}) {
            const quantize_options o = mode(r, ov);
            quantize_counts got;
            const std::vector<float> out = quantize(e, in, o, &got);
            // Underflow is visible in the outputs themselves; overflow is not
            // (a saturated max looks like a rounded one), so it comes from the
            // model of the codes.
            uint64_t over = 0, under = 0;
            for (size_t k = 0; k < in.size(); ++k) {
                over += e.table->expect(in[k], r, ov).overflow;
                under += std::isfinite(in[k]) && in[k] != 0 && out[k] == 0;
            }
            if (got.overflow != over || got.underflow != under)
                return fail(
                    "reported overflow " + std::to_string(got.overflow) + ", underflow " +
                        std::to_string(got.underflow) + "; the outputs hold " + std::to_string(under) +
                        " finite non-zero inputs that came out zero, and the model of the codes gives " +
                        std::to_string(over) + " overflows",
                    std::to_string(in.size()) + " grid and random inputs plus +-Inf and NaN (" +
                        mode_text(o) + ")",
                    "overflow: +-Inf or finite inputs rounded beyond the range; underflow: finite non-zero "
                    "inputs that came out zero");
        }
    }
    return pass("overflow and underflow counts equal a count over the outputs");
}

}  // namespace altgrad::host::conformance
