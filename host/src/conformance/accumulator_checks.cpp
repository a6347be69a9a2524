// The accumulator.* checks of the arithmetic (ABI 1.5): an instruction model
// against exact dot products where no truncation can happen, against the
// kit's own model of the definition (accumulator_model.hpp) on random
// operands and edge cases, the truncation of each aligned term at exactly F
// bits, and the output's rounding. accumulator_call_checks.cpp holds the
// checks of the call's contract.
//
// Operands: a non-grouped instruction takes any format (the ABI names a
// format by its smallest normal exponent), so the checks draw E4M3, E5M2,
// FP16 and BF16 values; a grouped one takes E2M1 operands with the scale
// kinds it declares.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "conformance/accumulator_calls.hpp"

namespace altgrad::host::conformance {

namespace {

// A value (1 + m/8) 2^e, e in [0, span], of a random sign: 3 fraction bits.
float narrow_value(std::mt19937_64& r, int span) {
    const float v = std::ldexp(1.0f + static_cast<float>(r() % 8) / 8, static_cast<int>(r() % (span + 1)));
    return r() % 2 ? -v : v;
}

// Operands on which no term loses a bit to the alignment: a and b and C of 3
// fraction bits within `span` binades above 1 (E2M1 for a grouped
// instruction, with UE8M0 scales up to 2^8, UE4M3 ones of 1; UE8M0 scales up
// to 2^2 otherwise), so every term is a multiple of 2^-6 (2^-2 for a group)
// below 2^(2 span + 2 scale_span + 2 + log2 of their count), and F bits below
// the largest exponent reach below 2^-6.
acc_call exact_call(env& e, const accumulator_handle& acc) {
    const altgrad_accumulator_info& info = acc.info();
    acc_call x = random_call(e, acc, 4, 5, info.depth);
    std::mt19937_64& r = e.rng;
    const int f = static_cast<int>(info.fraction_bits);
    const int terms =
        static_cast<int>(std::ceil(std::log2((info.halves == 2 ? info.depth / 2 : info.depth) + 1.0)));
    // UE8M0 scales of up to 2^scale_span each lift the products, not C, by up
    // to 2^(2 scale_span): the span shrinks by as much, or C's low bits fall
    // below the F bits kept (sm100_tcgen05_mxf8f6f4, F = 25, with scales up to
    // 2^8 failed this check though the plugin was right).
    const bool scaled = x.scale_kind == ALTGRAD_ACC_SCALE_UE8M0_32;
    const int scale_span = !scaled ? 0 : grouped(acc) ? 8 : 2;
    const int span = std::max(0, std::min(6, (f - 8 - terms - (grouped(acc) ? 0 : 2 * scale_span)) / 2));
    if (!grouped(acc)) {
        for (std::vector<float>* v : {&x.a, &x.b})
            for (float& a : *v) a = narrow_value(r, span);
        x.a_min = x.b_min = -126;
    }
    for (std::vector<float>* v : {&x.a_scales, &x.b_scales})
        for (float& s : *v) s = scaled ? std::ldexp(1.0f, static_cast<int>(r() % (scale_span + 1))) : 1.0f;
    for (float& c : x.c) c = r() % 3 == 0 ? 0.0f : narrow_value(r, grouped(acc) ? 4 : span);
    return x;
}

// C + a . b in long double (exact for exact_call's values), rounded once per
// fused dot-add as the output declares.
std::vector<float> exact_products(const altgrad_accumulator_info& info, const acc_call& x) {
    std::vector<float> want(x.m * x.n);
    const size_t half = info.halves == 2 ? info.depth / 2 : std::max<size_t>(x.k, 1),
                 per = x.scales_per_row();
    const size_t block = acc_scale_block(x.scale_kind);
    for (size_t i = 0; i < x.m; ++i)
        for (size_t j = 0; j < x.n; ++j) {
            float d = x.c[i * x.n + j];
            for (size_t l0 = 0; l0 < std::max<size_t>(x.k, 1); l0 += half) {
                long double sum = d;
                for (size_t l = l0; l < std::min(x.k, l0 + half); ++l) {
                    long double p = static_cast<long double>(x.a[i * x.k + l]) * x.b[j * x.k + l];
                    if (block != 0)
                        p *= static_cast<long double>(x.a_scales[i * per + l / block]) *
                             x.b_scales[j * per + l / block];
                    sum += p;
                }
                d = model_round(sum, info.output);
            }
            want[i * x.n + j] = d;
        }
    return want;
}

}  // namespace

result check_accumulator_exact(env& e) {
    accumulator_ptr acc;
    result why;
    if (!make_accumulator(e, acc, why)) return why;
    for (int round = 0; round < 20; ++round) {
        const acc_call x = exact_call(e, *acc);
        const std::string diff =
            difference(x, run(*acc, x), exact_products(acc->info(), x), "the exact C + a . b, rounded, is");
        if (!diff.empty())
            return fail(
                diff, x.text() + ", every term exact after the alignment",
                "where no term loses a bit, D is the exact sum C + a . b rounded to the declared output "
                "(float32 or E8M13 toward zero, FP16 to nearest even), once per fused dot-add");
    }
    return pass(
        "20 calls of 4 x 5 outputs at the full depth whose terms survive the alignment whole: the exact "
        "C + a . b, rounded as declared");
}

result check_accumulator_definition(env& e) {
    accumulator_ptr acc;
    result why;
    if (!make_accumulator(e, acc, why)) return why;
    const size_t depth = acc->info().depth;
    for (int round = 0; round < 40; ++round) {
        const size_t k = round % 4 == 1 ? 1 + e.rng() % depth : round == 2 ? 0 : depth;
        const acc_call x = random_call(e, *acc, 1 + e.rng() % 6, 1 + e.rng() % 6, k);
        const std::string diff = against_model(*acc, x);
        if (!diff.empty())
            return fail(
                diff, x.text(),
                "split each value at its format's smallest normal exponent (a zero at -126), align every "
                "term to the largest exponent, truncate each toward zero to F bits, add exactly, then "
                "round to the output (abi/accumulator.h)");
    }
    return pass(
        "40 random calls (operand codes over their whole range, random C, k = depth, shorter and 0) "
        "give the definition's bits");
}

namespace {

// The probe of accumulator.truncation: C = 0, two terms +1 and -1 that
// cancel at the largest exponent 0, and small terms of a few units of 2^-F
// (F bits below it) with fractions: products of 1.5, 2.75 and -1.25 units,
// each truncated toward zero to 1 + 2 - 1 = 2 units, where an exact sum keeps
// 3, one bit more or less gives 3 or 0 (2^-(F-1) steps) and flooring the
// negative term 1. A grouped instruction's are groups of sums 2.5 and -1.25
// whose scales put them F binades down (UE8M0), or as far as UE4M3 scales
// reach (34 binades): 2 - 1 units at F = 35 (exact 1.25, floored 0).
acc_call truncation_probe(const accumulator_handle& acc) {
    const altgrad_accumulator_info& info = acc.info();
    const int f = static_cast<int>(info.fraction_bits);
    if (!grouped(acc)) {
        acc_call x = single(acc, -126);
        const int hi = (f + 1) / 2, lo = f - hi;  // 2^-hi and 2^-lo are normal float32 values (F <= 46)
        const float small[] = {1.5f, 2.75f, -1.25f};
        x.a[0] = 1.0f;
        x.b[0] = 1.0f;
        x.a[1] = -1.0f;
        x.b[1] = 1.0f;
        for (int t = 0; t < 3; ++t) {
            x.a[2 + t] = std::ldexp(small[t], -hi);
            x.b[2 + t] = std::ldexp(1.0f, -lo);
        }
        return x;
    }
    acc_call x = single(acc, 0);
    const std::vector<altgrad_acc_scale_kind> kinds = declared_scales(acc);
    const bool ue8m0 = std::find(kinds.begin(), kinds.end(), ALTGRAD_ACC_SCALE_UE8M0_32) != kinds.end();
    with_scales(x, ue8m0 ? ALTGRAD_ACC_SCALE_UE8M0_32 : ALTGRAD_ACC_SCALE_UE4M3_16);
    const size_t g = info.group_size, groups = x.k / g;
    // Group sums +1, -1 in the first scale block, 2.75 and -1.25 in the last.
    x.a[0] = 1.0f;
    x.b[0] = 1.0f;
    x.a[g] = -1.0f;
    x.b[g] = 1.0f;
    const size_t last = (groups - 1) * g, before = last - g;
    x.a[before] = 1.5f;  // 2.5 = 1.5 * 1.5 + 0.5 * 0.5
    x.b[before] = 1.5f;
    x.a[before + 1] = 0.5f;
    x.b[before + 1] = 0.5f;
    x.a[last] = -1.5f;  // -1.25 = -1.5 * 0.5 - 0.5 * 1
    x.b[last] = 0.5f;
    x.a[last + 1] = -0.5f;
    x.b[last + 1] = 1.0f;
    if (ue8m0) {
        x.a_scales.back() = std::ldexp(1.0f, -f);  // the last block's groups F binades down
    } else {
        x.a_scales.front() = x.b_scales.front() = 256.0f;              // the first block's up by 2^16,
        x.a_scales.back() = x.b_scales.back() = std::ldexp(1.0f, -9);  // the last ones down by 2^-18
        x.a_scales[before / 16] = x.b_scales[before / 16] = std::ldexp(1.0f, -9);
        x.a_scales[g / 16] = x.b_scales[g / 16] = 256.0f;
    }
    return x;
}

}  // namespace

result check_accumulator_truncation(env& e) {
    accumulator_ptr acc;
    result why;
    if (!make_accumulator(e, acc, why)) return why;
    const altgrad_accumulator_info& info = acc->info();
    if (grouped(*acc) && (info.depth / info.group_size < 4 || info.depth <= 32))
        return skip(
            "a grouped instruction of fewer than 4 groups or one scale block: the probe needs groups "
            "at two scales");
    const acc_call x = truncation_probe(*acc);
    const std::vector<float> got = run(*acc, x), want = model(*acc, x);
    if (same_bits(got[0], want[0]))
        return pass(
            "C = 0, +1 and -1 cancelling at the largest exponent, and terms of 2.75, 1.5 and -1.25 units "
            "of 2^-F below: " +
            bits_text(got[0]) +
            ", each term truncated toward zero at F = " + std::to_string(acc->info().fraction_bits));
    return fail(
        difference(x, got, want, "truncating each aligned term toward zero to F bits gives"), x.text(),
        "align every term to the largest exponent and truncate each toward zero to exactly F (declared "
        "fraction_bits) bits before adding: summing exactly and rounding the sum once, keeping more or "
        "fewer bits, or flooring negative terms gives other bits");
}

// ---------------------------------------------------------------- the output's rounding

namespace {

// One output: C = the output value `base`, plus one product `delta` (both
// exact), so D is base + delta rounded as declared (delta kept whole by the
// alignment: at most F bits below base's exponent).
struct rounding_case {
    const char* what;
    float base;
    long double delta;  // a value of at most 8 significant bits
};

std::vector<rounding_case> rounding_cases(const altgrad_accumulator_info& info) {
    const bool half = info.output == ALTGRAD_ACC_OUTPUT_FLOAT16;
    const int bits = half ? 10 : info.output == ALTGRAD_ACC_OUTPUT_E8M13 ? 13 : 23;
    const int f = static_cast<int>(info.fraction_bits);
    const float max = half ? 65504.0f : std::ldexp(2.0f - std::ldexp(1.0f, -bits), 127);
    const long double ulp1 = std::ldexp(1.0L, -bits);  // at 1
    std::vector<rounding_case> out;
    // Fractions of an ulp the alignment keeps whole (multiples of 2^-F).
    for (const long double fraction : {0.75L, 0.5L, 0.25L})
        if (const long double units = std::ldexp(fraction * ulp1, f); units == std::floor(units)) {
            out.push_back({"1 + a fraction of an ulp", 1.0f, fraction * ulp1});
            out.push_back(
                {"1 + 1 ulp + a fraction of an ulp", static_cast<float>(1.0L + ulp1), fraction * ulp1});
            out.push_back({"-1 - a fraction of an ulp", -1.0f, -fraction * ulp1});
        }
    // A carry into the next binade, where the sum has a bit more than the output.
    out.push_back({"1 + 3 ulps + 1 (a carry)", static_cast<float>(1.0L + 3 * ulp1), 1.0L});
    out.push_back({"-1 - 3 ulps - 1 (a carry)", static_cast<float>(-1.0L - 3 * ulp1), -1.0L});
    out.push_back({"the largest value + 1 ulp (overflow)", max, std::ldexp(1.0L, half ? 5 : 127 - bits)});
    out.push_back({"-the largest value - 1 ulp (overflow)", -max, -std::ldexp(1.0L, half ? 5 : 127 - bits)});
    out.push_back({"0 + 1.5 times the smallest subnormal", 0.0f, std::ldexp(1.5L, half ? -24 : -126 - bits)});
    out.push_back({"0 + 2.5 times the smallest subnormal", 0.0f, std::ldexp(2.5L, half ? -24 : -126 - bits)});
    return out;
}

}  // namespace

result check_accumulator_output(env& e) {
    accumulator_ptr acc;
    result why;
    if (!make_accumulator(e, acc, why)) return why;
    const altgrad_accumulator_info& info = acc->info();
    size_t checked = 0;
    for (const rounding_case& rc : rounding_cases(info)) {
        // delta = a * b with a, b float32 values (a grouped instruction: E2M1 values times UE8M0 scales).
        acc_call x = single(*acc, grouped(*acc) ? 0 : -126);
        int exponent = 0;
        const long double m = std::frexp(rc.delta, &exponent);  // delta = m 2^exponent, 0.5 <= |m| < 1
        x.c[0] = rc.base;
        if (grouped(*acc)) {
            if (x.scale_kind != ALTGRAD_ACC_SCALE_UE8M0_32 ||
                std::fabs(m * 4) != std::floor(std::fabs(m * 4)))
                continue;  // E2M1 values and UE8M0 scales hold it only as 4m (m a multiple of 1/4) times 2^e
            x.a[0] = static_cast<float>(m * 4);
            x.b[0] = 1.0f;
            // Every other group (all zero) sits at the lowest scales, so that its exponent is no term's
            // largest.
            std::fill(x.a_scales.begin(), x.a_scales.end(), std::ldexp(1.0f, -127));
            std::fill(x.b_scales.begin(), x.b_scales.end(), std::ldexp(1.0f, -127));
            x.a_scales[0] = std::ldexp(1.0f, std::max(exponent - 2, -127));
            x.b_scales[0] = std::ldexp(1.0f, exponent - 2 - std::max(exponent - 2, -127));
        } else {
            x.a[0] = static_cast<float>(std::ldexp(m, exponent / 2));
            x.b[0] = std::ldexp(1.0f, exponent - exponent / 2);
        }
        const float want = model_round(static_cast<long double>(rc.base) + rc.delta, info.output);
        const std::vector<float> got = run(*acc, x);
        ++checked;
        if (!same_bits(got[0], want))
            return fail(
                std::string(rc.what) + ": D is " + bits_text(got[0]) + ", the declared output " +
                    acc_output_names().name(info.output) + " gives " + bits_text(want),
                "c " + hex_float(rc.base) + ", one product " + hex_float(x.a[0]) + " x " + hex_float(x.b[0]),
                "float32 and E8M13 outputs truncate toward zero (subnormals at 2^-126, Inf beyond the "
                "range), FP16 rounds to nearest even (Inf beyond 65504)");
    }
    return pass(std::to_string(checked) +
                " sums between output values, past the largest and in the subnormals "
                "rounded as the declared output " +
                acc_output_names().name(info.output));
}

// ---------------------------------------------------------------- edge cases

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

struct edge_case {
    std::string what;
    acc_call call;
    bool closed = false;  // want is known in closed form; else the kit's model gives it
    float want = 0.0f;
};

float bits_float(uint32_t b) {
    float f;
    std::memcpy(&f, &b, sizeof f);
    return f;
}

// Cases every instruction shares: zeros, cancellation, NaN and Inf in C.
void common_cases(const accumulator_handle& acc, std::vector<edge_case>& out, int32_t min_exponent) {
    const float nan = bits_float(model_nan_bits(acc.info().output)), qnan = std::nanf("");
    acc_call x = single(acc, min_exponent);
    for (size_t l = 0; l < x.k; ++l) {
        x.a[l] = l % 2 ? -0.0f : 0.0f;
        x.b[l] = l % 3 ? 0.0f : -0.0f;
    }
    x.c[0] = -0.0f;
    out.push_back({"zeros of both signs and C = -0", x, true, 0.0f});
    acc_call c_nan = single(acc, min_exponent), c_inf = c_nan, c_minus_inf = c_nan;
    c_nan.c[0] = qnan;
    out.push_back({"C NaN", c_nan, true, nan});
    c_inf.c[0] = kInf;
    out.push_back({"C +Inf", c_inf, true, kInf});
    c_minus_inf.c[0] = -kInf;
    c_minus_inf.a[0] = c_minus_inf.b[0] = 1.0f;
    out.push_back({"C -Inf plus a finite product", c_minus_inf, true, -kInf});
}

// Cases of a non-grouped instruction (operands of any format).
void plain_cases(const accumulator_handle& acc, std::vector<edge_case>& out) {
    const float nan = bits_float(model_nan_bits(acc.info().output)), max = std::numeric_limits<float>::max();
    const size_t k = acc.info().depth;
    acc_call x = single(acc, -126);
    x.c[0] = 1.5f;
    x.a[0] = -1.5f;
    x.b[0] = 1.0f;
    out.push_back({"cancellation to zero: C 1.5, one product -1.5", x, true, 0.0f});
    x = single(acc, -126);
    x.a[1] = std::nanf("");
    x.b[1] = 1.0f;
    out.push_back({"a NaN operand", x, true, nan});
    x = single(acc, -126);
    x.a[0] = kInf;  // times b[0] = 0
    out.push_back({"Inf times 0", x, true, nan});
    x = single(acc, -126);
    x.a[0] = x.a[k - 1] = kInf;
    x.b[0] = 1.0f;
    x.b[k - 1] = -1.0f;
    out.push_back({"products +Inf and -Inf", x, true, nan});
    x = single(acc, -126);
    x.a[k - 1] = -kInf;
    x.b[k - 1] = 2.0f;
    x.a[0] = x.b[0] = 3.0f;
    x.c[0] = 1.0f;
    out.push_back(
        {"an Inf operand times 2, beside finite products (the last product, in the second half "
         "where there are two)",
         x, true, -kInf});
    if (acc.info().output != ALTGRAD_ACC_OUTPUT_FLOAT16) {
        x = single(acc, -126);
        x.c[0] = max;
        x.a[0] = x.b[0] = std::ldexp(1.0f, 100);
        out.push_back({"overflow: C the largest float32 plus 2^200", x, true, kInf});
        x = single(acc, -126);
        x.c[0] = std::ldexp(1.0f, -126);
        x.a[0] = std::ldexp(1.0f, 100);
        x.b[0] = std::ldexp(1.0f, 27);
        x.a[1] = std::ldexp(1.0f, -100);
        x.b[1] = std::ldexp(1.0f, -20);
        out.push_back({"a wide spread: 2^127 + 2^-120 + C 2^-126, the small terms truncated away", x, true,
                       std::ldexp(1.0f, 127)});
    }
    // E4M3 subnormals split at E4M3's smallest normal exponent -6, against the model.
    x = single(acc, -6);
    for (size_t l = 0; l < k; ++l) {
        x.a[l] = std::ldexp(static_cast<float>(1 + l % 7), -9);  // subnormal E4M3: m 2^-9, m < 8
        x.b[l] = l % 4 == 0 ? 448.0f : std::ldexp(static_cast<float>(1 + (l * 5) % 7), -9);
    }
    out.push_back({"E4M3 subnormals (split at the format's smallest normal exponent -6) beside 448", x});
}

// Cases of a grouped (block-scaled FP4) instruction.
void grouped_cases(const accumulator_handle& acc, std::vector<edge_case>& out) {
    const float nan = bits_float(model_nan_bits(acc.info().output));
    for (altgrad_acc_scale_kind kind : declared_scales(acc)) {
        const std::string name = acc_scale_kind_names().name(kind);
        acc_call x = single(acc, 0);
        with_scales(x, kind);
        x.a_scales.back() = std::nanf("");
        out.push_back({name + ": a NaN scale", x, true, nan});
        x = single(acc, 0);
        with_scales(x, kind);
        x.a[0] = x.b[0] = 6.0f;
        x.a[x.k - 1] = -6.0f;
        x.b[x.k - 1] = 6.0f;
        x.a_scales.front() = x.b_scales.front() =
            kind == ALTGRAD_ACC_SCALE_UE8M0_32 ? std::ldexp(1.0f, 127) : 448.0f;
        out.push_back({name + ": the largest scales", x});
        x.a_scales.front() = kind == ALTGRAD_ACC_SCALE_UE8M0_32 ? std::ldexp(1.0f, -127) : 0.0f;
        out.push_back({name + ": the smallest scale (UE4M3: zero)", x});
        if (kind == ALTGRAD_ACC_SCALE_UE4M3_16) {
            x.a_scales.front() = -448.0f;  // by magnitude: as 448
            out.push_back({name + ": a negative scale, taken by its magnitude", x});
        }
    }
}

std::vector<edge_case> edge_cases(const accumulator_handle& acc) {
    std::vector<edge_case> out;
    common_cases(acc, out, grouped(acc) ? 0 : -126);
    if (grouped(acc)) {
        grouped_cases(acc, out);
    } else {
        plain_cases(acc, out);
    }
    return out;
}

}  // namespace

result check_accumulator_specials(env& e) {
    accumulator_ptr acc;
    result why;
    if (!make_accumulator(e, acc, why)) return why;
    const std::vector<edge_case> cases = edge_cases(*acc);
    for (const edge_case& c : cases) {
        std::vector<float> want = model(*acc, c.call);
        if (c.closed) want[0] = c.want;
        const std::string diff = difference(c.call, run(*acc, c.call), want, "the definition gives");
        if (!diff.empty())
            return fail(
                c.what + ": " + diff, c.call.text(),
                "NaN anywhere (or Inf x 0, or +Inf and -Inf) gives the canonical NaN, an Inf gives that "
                "Inf, a zero result is +0, a finite sum beyond the range Inf; subnormal operands split at "
                "their format's smallest normal exponent");
    }
    return pass(std::to_string(cases.size()) +
                " edge cases (zeros of both signs, cancellation, NaN and Inf in C, "
                "the operands or the scales, overflow, wide spreads, subnormals) give the definition's bits");
}

}  // namespace altgrad::host::conformance
