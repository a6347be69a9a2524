// exmy_format beyond the bundled shapes: ml_dtypes' fnuz convention, formats
// without a sign bit and formats without subnormals (exmy_spec's specials,
// has_sign and subnormals), their element kernels called directly against
// float_variant_model (reference.hpp), written from the definitions, and
// values worked out by hand or published by ml_dtypes.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <altgrad/sdk/exmy.hpp>

#include "direct_calls.hpp"

namespace {

using namespace agtest;
using S = sdk::exmy_specials;

struct Variant {
    const char* name;
    sdk::exmy_spec spec;
    const char* specials;  // float_variant_model's name of spec.specials
};

FormatModel model_of(const Variant& v) {
    return float_variant_model(v.name, v.spec.exponent_bits, v.spec.mantissa_bits, v.spec.bias, v.specials,
                               v.spec.subnormals, v.spec.has_sign);
}

// Every shape the new fields allow, a few of each; the 16-bit ones with every
// 7th edge point (they have many).
const Variant kVariants[] = {
    {"e4m3fnuz", {4, 3, 8, S::fnuz}, "fnuz"},
    {"e5m2fnuz", {5, 2, 16, S::fnuz}, "fnuz"},
    {"e3m2fnuz-nosub", {3, 2, 4, S::fnuz, false}, "fnuz"},
    {"ue4m4-ieee", {4, 4, 7, S::ieee, true, false}, "ieee"},
    {"ue4m4-fn", {4, 4, 7, S::finite_nan, true, false}, "fn"},
    {"ue4m4-none", {4, 4, 7, S::finite, true, false}, "none"},
    {"ue4m4-p3109", {4, 4, 8, S::p3109, true, false}, "p3109"},
    {"ue5m0-p3109", {5, 0, 16, S::p3109, true, false}, "p3109"},
    {"ue3m0-none", {3, 0, 3, S::finite, true, false}, "none"},
    {"e4m3fn-nosub", {4, 3, 7, S::finite_nan, false}, "fn"},
    {"e5m2-nosub", {5, 2, 15, S::ieee, false}, "ieee"},
    {"e2m1-nosub", {2, 1, 1, S::finite, false}, "none"},
    {"e1m6-p3109-nosub", {1, 6, 1, S::p3109, false}, "p3109"},
    {"e7m0-nosub", {7, 0, 64, S::p3109, false}, "p3109"},
    {"ue3m2-fn-nosub", {3, 2, 3, S::finite_nan, false, false}, "fn"},
    {"ue2m3-none-nosub", {2, 3, 0, S::finite, false, false}, "none"},
    {"e6m1-fn", {6, 1, 31, S::finite_nan}, "fn"},
    {"e7m7-nosub", {7, 7, 63, S::ieee, false}, "ieee"},
    {"ue5m10-ieee", {5, 10, 15, S::ieee, true, false}, "ieee"},
};

TEST(ExMyVariants, MatchTheReferenceThroughTheElementKernels) {
    for (const Variant& v : kVariants) {
        SCOPED_TRACE(v.name);
        const FormatModel m = model_of(v);
        const sdk::exmy_format f(v.spec);
        ASSERT_EQ(f.total_bits(), m.total_bits);
        for (uint32_t c = 0; c < (1u << m.total_bits); ++c)
            ASSERT_TRUE(same_float(f.decode(c), static_cast<float>(m.by_code[c])))
                << "code " << c << ": " << hexf(f.decode(c)) << ", the definition gives " << m.by_code[c];
        const altgrad_format_info i = f.info();
        EXPECT_EQ(i.max_finite, m.max);
        EXPECT_EQ(i.lowest_finite, m.lowest);
        EXPECT_EQ(i.min_subnormal > 0 ? i.min_subnormal : i.min_normal, m.min_positive());
        EXPECT_EQ(i.nan_code_count, m.nan_codes);
        EXPECT_EQ(i.is_signed, v.spec.has_sign ? 1u : 0u);
        EXPECT_EQ(i.has_inf != 0, m.has_inf);
        EXPECT_EQ(i.zero, m.signed_zero ? ALTGRAD_ZERO_SIGNED : ALTGRAD_ZERO_UNSIGNED);
        if (m.has_nan) EXPECT_TRUE(std::isnan(m.by_code[i.canonical_nan_code]));
        EXPECT_EQ(f.branchless_applies(),
                  v.spec.has_sign && (v.spec.subnormals || v.spec.mantissa_bits == 0));
        expect_matches_everywhere(f, m, m.total_bits > 8 ? 7 : 1);
    }
}

// ml_dtypes' float8_e4m3fnuz and float8_e5m2fnuz (finfo): bias 8 and 16 (one
// more than OCP's E4M3 and E5M2), max 240 and 57344, smallest normal 2^-7
// and 2^-15, smallest subnormal 2^-10 and 2^-17, NaN 0x80, no Inf, one zero.
TEST(ExMyVariants, FnuzIsMlDtypesFnuz) {
    const sdk::exmy_format e4m3({4, 3, 8, S::fnuz}), e5m2({5, 2, 16, S::fnuz});
    EXPECT_EQ(e4m3.info().max_finite, 240.0);
    EXPECT_EQ(e4m3.info().min_normal, std::ldexp(1.0, -7));
    EXPECT_EQ(e4m3.info().min_subnormal, std::ldexp(1.0, -10));
    EXPECT_EQ(e5m2.info().max_finite, 57344.0);
    EXPECT_EQ(e5m2.info().min_normal, std::ldexp(1.0, -15));
    EXPECT_EQ(e5m2.info().min_subnormal, std::ldexp(1.0, -17));
    for (const sdk::exmy_format* f : {&e4m3, &e5m2}) {
        EXPECT_TRUE(std::isnan(f->decode(0x80)));
        EXPECT_EQ(f->info().canonical_nan_code, 0x80u);
        EXPECT_EQ(f->info().nan_code_count, 1u);
        EXPECT_EQ(f->info().has_inf, 0u);
        EXPECT_EQ(f->info().zero, ALTGRAD_ZERO_UNSIGNED);
        EXPECT_TRUE(same_float(run(*f, -1e-30f).value, 0.0f));  // one zero: +0
        EXPECT_EQ(run(*f, kNaN).code, 0x80u);
        const CodeResult over = run(*f, 1e30f, RNE, NONFINITE);  // no Inf: NaN
        EXPECT_TRUE(std::isnan(over.value));
        EXPECT_EQ(over.overflow, 1u);
    }
    EXPECT_EQ(run(e4m3, 240.0f).code, 0x7Fu);  // max at the all-ones magnitude
    EXPECT_EQ(run(e4m3, -240.0f).code, 0xFFu);
}

// Unsigned E4M4, bias 7: the top exponent 15 holds Inf and NaN (ieee), so max
// is 2^(14-7) * (1 + 15/16) = 248; with NaN at all ones only (fn) it is
// 2^8 * (1 + 14/16) = 480; with no specials (none) 2^8 * (1 + 15/16) = 496.
TEST(ExMyVariants, UnsignedE4M4HasNoSignBitAndItsMaxima) {
    const sdk::exmy_format ieee({4, 4, 7, S::ieee, true, false}), fn({4, 4, 7, S::finite_nan, true, false}),
        none({4, 4, 7, S::finite, true, false});
    EXPECT_EQ(ieee.info().max_finite, 248.0);
    EXPECT_EQ(fn.info().max_finite, 480.0);
    EXPECT_EQ(none.info().max_finite, 496.0);
    for (const sdk::exmy_format* f : {&ieee, &fn, &none}) {
        EXPECT_EQ(f->info().total_bits, 8u);
        EXPECT_EQ(f->info().lowest_finite, 0.0);
        EXPECT_EQ(f->info().is_signed, 0u);
    }
    EXPECT_EQ(ieee.decode(0xF0), INFINITY);
    EXPECT_TRUE(std::isnan(ieee.decode(0xF8)));
    EXPECT_EQ(ieee.info().nan_code_count, 15u);
    EXPECT_EQ(ieee.decode(0xEF), 248.0f);
    // A negative input rounds as its magnitude would: to 0 (an underflow, not
    // an overflow) up to half the smallest value 2^-10, else it lies below 0.
    CodeResult r = run(ieee, -std::ldexp(1.0f, -11));  // the tie with 0: code 0 is even
    EXPECT_TRUE(same_float(r.value, 0.0f));
    EXPECT_EQ(r.overflow, 0u);
    EXPECT_EQ(r.underflow, 1u);
    r = run(ieee, -std::ldexp(1.5f, -11));
    EXPECT_TRUE(same_float(r.value, 0.0f));
    EXPECT_EQ(r.overflow, 1u);
    EXPECT_EQ(r.underflow, 1u);  // a zero result of a non-zero input
    r = run(ieee, -3.0f, RNE, NONFINITE);
    EXPECT_TRUE(std::isnan(r.value));  // no -Inf: NaN
    EXPECT_EQ(r.overflow, 1u);
    r = run(none, -3.0f, RNE, NONFINITE);  // neither: saturate to the lowest value, 0
    EXPECT_TRUE(same_float(r.value, 0.0f));
    EXPECT_EQ(r.code, 0u);
    r = run(ieee, -kInf);
    EXPECT_TRUE(same_float(r.value, 0.0f));
    EXPECT_EQ(r.underflow, 0u);  // not a finite input
}

// Without subnormals, E4M3 (fn, bias 7) keeps 2^-7 * (1 + m/8) in exponent
// field 0 for m = 1..7; code 0 is zero, so the smallest positive value is
// v = 2^-7 * 9/8 = 9/1024, and below it lies the gap (0, v).
TEST(ExMyVariants, WithoutSubnormalsTheGapRoundsBetweenZeroAndTheSmallestValue) {
    const sdk::exmy_format f({4, 3, 7, S::finite_nan, false});
    const float v = 9.0f / 1024;
    EXPECT_EQ(f.decode(0x01), v);
    EXPECT_EQ(f.decode(0x07), std::ldexp(15.0f / 8, -7));
    EXPECT_EQ(f.decode(0x08), std::ldexp(1.0f, -6));
    EXPECT_EQ(f.info().min_normal, static_cast<double>(v));
    EXPECT_EQ(f.info().min_subnormal, 0.0);
    EXPECT_EQ(f.info().has_subnormals, 0u);
    EXPECT_EQ(run(f, v / 2).value, 0.0f);  // the tie: code 0 is even
    EXPECT_EQ(run(f, std::nextafter(v / 2, 1.0f)).value, v);
    EXPECT_EQ(run(f, std::ldexp(1.0f, -7)).value, v);  // 2^-7 is not representable: nearer v
    EXPECT_EQ(run(f, std::nextafter(v, 0.0f), RTZ).value, 0.0f);
    EXPECT_EQ(run(f, std::nextafter(v, 0.0f), RTZ).underflow, 1u);
    EXPECT_EQ(run(f, -std::nextafter(v / 2, 1.0f)).value, -v);
    // Stochastic: v/3 = 3/1024 is a third of the gap, floor(2^32 / 3) =
    // 1431655765, so it goes to v exactly when R >= 2^32 - 1431655765.
    EXPECT_EQ(run(f, v / 3, RSR, SAT, 2863311531u).value, v);
    EXPECT_EQ(run(f, v / 3, RSR, SAT, 2863311530u).value, 0.0f);
    EXPECT_EQ(run(f, v / 3, RSR, SAT, 0xFFFFFFFFu).value, v);
    EXPECT_EQ(run(f, v / 3, RSR, SAT, 0u).value, 0.0f);
}

TEST(ExMyVariants, ConstructorRejectsWhatCannotBe) {
    expect_invalid_argument([] { sdk::exmy_format({4, 3, 8, S::fnuz, true, false}); }, "fnuz without a sign");
    try {
        sdk::exmy_format({4, 3, 8, S::fnuz, true, false});
    } catch (const sdk::plugin_error& e) {
        EXPECT_EQ(std::string(e.what()),
                  "exmy: fnuz puts NaN at the negative zero, which a format without a sign bit has not");
    }
    // Without subnormals field 0's binade 2^-127 lies below float32's normals;
    // with bias 126, 2^(254 - 126) is beyond FLT_MAX: no E8M7 without them.
    expect_invalid_argument(
        [] {
            sdk::exmy_format({8, 7, 127, S::ieee, false});
        },
        "bias 127 without subnormals");
    expect_invalid_argument([] { sdk::exmy_format({8, 7, 126, S::ieee, false}); }, "max above FLT_MAX");
    EXPECT_NO_THROW(sdk::exmy_format({7, 7, 63, S::ieee, false}));
    // E1 with IEEE specials: field 1 is Inf and NaN, so nothing is normal.
    expect_invalid_argument([] { sdk::exmy_format({1, 3, 0, S::ieee}); }, "E1M3 ieee");
    expect_invalid_argument([] { sdk::exmy_format({1, 0, 0, S::finite_nan}); }, "E1M0 fn: 0 and NaN");
    expect_invalid_argument([] { sdk::exmy_format({1, 0, 0, S::p3109}); }, "E1M0 p3109: 0, NaN, +-Inf");
    EXPECT_NO_THROW(sdk::exmy_format({1, 0, 0, S::finite}));  // 0, +-2
    EXPECT_NO_THROW(sdk::exmy_format({8, 7, 127, S::ieee}));  // bfloat16
}

}  // namespace
