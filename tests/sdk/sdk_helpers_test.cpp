// The SDK's format helpers used directly, not through a plugin:
// codebook_format (4-bit tables: NF4, a P3109-like table with NaN and +-Inf,
// OCP MX E2M1 with signed zeros, E2M1 with a NaN code instead of -0),
// fixed_point_format (Q3.4) and exmy_format (construction errors; the OCP MX
// FP4 / FP6 formats, whose specials are `finite`).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <altgrad/sdk/codebook.hpp>
#include <altgrad/sdk/codebooks.hpp>
#include <altgrad/sdk/error.hpp>
#include <altgrad/sdk/exmy.hpp>
#include <altgrad/sdk/fixed_point.hpp>
#include <altgrad/sdk/format_plugin.hpp>
#include <altgrad/sdk/state.hpp>

#include "direct_calls.hpp"
#include "test_common.hpp"

namespace {

using namespace agtest;
namespace sdk = altgrad::sdk;

// ---------------------------------------------------------------------------
// Codebook tables.
// ---------------------------------------------------------------------------
// NF4 (QLoRA, Dettmers et al. 2023), codes in ascending order, one zero (code 7).
const std::vector<float> kNF4 = {-1.0f,
                                 -0.6961928009986877f,
                                 -0.5250730514526367f,
                                 -0.39491748809814453f,
                                 -0.28444138169288635f,
                                 -0.18477343022823334f,
                                 -0.09105003625154495f,
                                 0.0f,
                                 0.07958029955625534f,
                                 0.16093020141124725f,
                                 0.24611230194568634f,
                                 0.33791524171829224f,
                                 0.44070982933044434f,
                                 0.5626170039176941f,
                                 0.7229568362236023f,
                                 1.0f};

// A P3109-like sign-magnitude 4-bit table: one zero, NaN at 8, +-Inf at 7 / 15.
const std::vector<float> kP4 = {0.0f, 0.25f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  kInf,
                                kNaN, -0.25f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -kInf};

// OCP MX E2M1 as a codebook: +0 at 0 and -0 at 8, no NaN, no Inf.
const std::vector<float> kE2M1 = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                  -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

// E2M1 with the would-be -0 made a NaN code (no Inf).
std::vector<float> e2m1_with_nan() {
    std::vector<float> t = kE2M1;
    t[8] = kNaN;
    return t;
}

FormatModel codebook_model(const std::string& name, const std::vector<float>& table) {
    FormatModel m;
    m.name = name;
    m.total_bits = 4;
    for (float v : table) m.by_code.push_back(v);
    m.beyond = Beyond::codebook;
    m.finalize();
    m.signed_zero = m.pos_zero_code >= 0 && m.neg_zero_code >= 0;
    return m;
}

TEST(Codebook, ConstructorRejectsAWrongTableSize) {
    expect_invalid_argument([] { sdk::codebook_format(4, std::vector<float>(15, 0.0f)); },
                            "15 values for 4 bits");
    expect_invalid_argument([] { sdk::codebook_format(4, std::vector<float>(kNF4.begin(), kNF4.end() - 1)); },
                            "NF4 minus one");
    std::vector<float> seventeen = kNF4;
    seventeen.push_back(2.0f);
    expect_invalid_argument([&] { sdk::codebook_format(4, seventeen); }, "17 values for 4 bits");
    expect_invalid_argument([] { sdk::codebook_format(0, {}); }, "0 bits");
    expect_invalid_argument([] { sdk::codebook_format(17, std::vector<float>(1u << 17, 0.0f)); }, "17 bits");
}

TEST(Codebook, ConstructorRejectsDuplicateNonZeroValues) {
    std::vector<float> t = kNF4;
    t[12] = t[11];
    expect_invalid_argument([&] { sdk::codebook_format(4, t); }, "two codes of 0.3379");
    std::vector<float> neg = kE2M1;
    neg[15] = -4.0f;
    expect_invalid_argument([&] { sdk::codebook_format(4, neg); }, "two codes of -4");
    expect_invalid_argument([] { sdk::codebook_format(4, std::vector<float>(16, kNaN)); },
                            "no finite values");
}

TEST(Codebook, ConstructorAcceptsPlusAndMinusZero) {
    EXPECT_NO_THROW(sdk::codebook_format(4, kE2M1));
    EXPECT_NO_THROW(sdk::codebook_format(4, kP4));  // several non-finite codes are fine
}

TEST(Codebook, InfoDescribesTheTable) {
    const sdk::codebook_format nf4(4, kNF4);
    const altgrad_format_info i = nf4.info();
    EXPECT_EQ(i.family, ALTGRAD_FAMILY_CODEBOOK);
    EXPECT_EQ(i.total_bits, 4u);
    EXPECT_EQ(i.code_bytes, 1u);
    EXPECT_EQ(i.is_signed, 1u);
    EXPECT_EQ(i.zero, ALTGRAD_ZERO_UNSIGNED);
    EXPECT_EQ(i.has_inf, 0u);
    EXPECT_EQ(i.nan_code_count, 0u);
    EXPECT_EQ(i.max_finite, 1.0);
    EXPECT_EQ(i.lowest_finite, -1.0);
    EXPECT_EQ(i.min_normal, static_cast<double>(0.07958029955625534f));
    EXPECT_EQ(i.min_subnormal, 0.0);

    const altgrad_format_info p = sdk::codebook_format(4, kP4).info();
    EXPECT_EQ(p.has_inf, 1u);
    EXPECT_EQ(p.nan_code_count, 1u);
    EXPECT_EQ(p.canonical_nan_code, 8u);
    EXPECT_EQ(p.max_finite, 3.0);
    EXPECT_EQ(p.lowest_finite, -3.0);
    EXPECT_EQ(p.min_normal, 0.25);
    EXPECT_EQ(p.zero, ALTGRAD_ZERO_UNSIGNED);

    EXPECT_EQ(sdk::codebook_format(4, kE2M1).info().zero, ALTGRAD_ZERO_SIGNED);
}

TEST(Codebook, NF4MatchesTheReferenceInEveryMode) {
    expect_matches_everywhere(sdk::codebook_format(4, kNF4), codebook_model("nf4", kNF4));
}

TEST(Codebook, TableWithNanAndInfMatchesTheReferenceInEveryMode) {
    expect_matches_everywhere(sdk::codebook_format(4, kP4), codebook_model("p4", kP4));
}

TEST(Codebook, SignedZeroTableMatchesTheReferenceInEveryMode) {
    expect_matches_everywhere(sdk::codebook_format(4, kE2M1), codebook_model("e2m1-codebook", kE2M1));
}

TEST(Codebook, TableWithNanButNoInfMatchesTheReferenceInEveryMode) {
    expect_matches_everywhere(sdk::codebook_format(4, e2m1_with_nan()),
                              codebook_model("e2m1-nan", e2m1_with_nan()));
}

TEST(Codebook, TiesGoToTheEvenCodeNotTheEvenValue) {
    const sdk::codebook_format p(4, kP4);
    // value(code): 0.25(1) 0.5(2) 1(3) 1.5(4) 2(5) 3(6); -0.25(9) -0.5(10) ... -3(14).
    EXPECT_EQ(run(p, 0.125f).code, 0u);
    EXPECT_EQ(run(p, 0.375f).code, 2u);
    EXPECT_EQ(run(p, 0.75f).code, 2u);
    EXPECT_EQ(run(p, 1.25f).code, 4u);
    EXPECT_EQ(run(p, 1.75f).code, 4u);
    EXPECT_EQ(run(p, 2.5f).code, 6u);  // up to 3: code 6 is even, code 5 (2.0) is odd
    EXPECT_EQ(run(p, 2.5f).value, 3.0f);
    EXPECT_EQ(run(p, -0.375f).code, 10u);
    EXPECT_EQ(run(p, -0.75f).code, 10u);
    EXPECT_EQ(run(p, -2.5f).code, 14u);
    // Just off the ties, the nearer value.
    EXPECT_EQ(run(p, std::nextafter(2.5f, 0.0f)).code, 5u);
    EXPECT_EQ(run(p, std::nextafter(0.75f, 1.0f)).code, 3u);
}

// Int8 symmetric quantization's grid: k / 127 for k = -127..127 (two's-
// complement codes), -128 (0x80) unused and so NaN.
TEST(GeneratedCodebooks, SymmetricInt8IsKOver127) {
    const sdk::codebook_format f = sdk::symmetric_int_codebook(8);
    EXPECT_EQ(f.decode(0), 0.0f);
    EXPECT_EQ(f.decode(1), 1.0f / 127.0f);
    EXPECT_EQ(f.decode(127), 1.0f);
    EXPECT_TRUE(std::isnan(f.decode(0x80)));
    EXPECT_EQ(f.decode(0x81), -1.0f);
    EXPECT_EQ(f.decode(0xFF), -1.0f / 127.0f);
    const altgrad_format_info i = f.info();
    EXPECT_EQ(i.zero, ALTGRAD_ZERO_UNSIGNED);
    EXPECT_EQ(i.is_signed, 1u);
    EXPECT_EQ(i.max_finite, 1.0);
    EXPECT_EQ(i.lowest_finite, -1.0);
    EXPECT_EQ(i.nan_code_count, 1u);
    EXPECT_EQ(i.canonical_nan_code, 0x80u);
    // Half of 1/127 is the tie between codes 0 and 1: the even code, zero.
    const float step = 1.0f / 127.0f;
    EXPECT_EQ(run(f, step / 2).code, 0u);
    EXPECT_EQ(run(f, step / 2).underflow, 1u);
    EXPECT_EQ(run(f, std::nextafter(step / 2, 1.0f)).code, 1u);
    EXPECT_EQ(run(f, 2.0f).value, 1.0f);
    EXPECT_EQ(run(f, 2.0f).overflow, 1u);
    EXPECT_EQ(run(f, -2.0f).code, 0x81u);
    // Four bits: k / 7.
    const sdk::codebook_format f4 = sdk::symmetric_int_codebook(4);
    EXPECT_EQ(f4.decode(3), 3.0f / 7.0f);
    EXPECT_EQ(f4.decode(9), -1.0f);
    EXPECT_THROW(sdk::symmetric_int_codebook(1), sdk::plugin_error);
}

TEST(GeneratedCodebooks, PowersOfTwoWithoutZero) {
    const sdk::codebook_format f = sdk::power_of_two_codebook(4, 7, false);  // 2^-7 .. 2^8
    EXPECT_EQ(f.decode(0), 0.0078125f);
    EXPECT_EQ(f.decode(15), 256.0f);
    const altgrad_format_info i = f.info();
    EXPECT_EQ(i.zero, ALTGRAD_ZERO_NONE);
    EXPECT_EQ(i.is_signed, 0u);
    EXPECT_EQ(i.nan_code_count, 0u);
    EXPECT_EQ(run(f, 0.0f).value, 0.0078125f);  // nothing below the smallest value
    EXPECT_EQ(run(f, 0.0f).overflow, 1u);
    EXPECT_EQ(run(f, 12.0f).value, 8.0f);   // 12 = 1.5 * 8, the tie between 8 (code 10, even) and 16 (11)
    EXPECT_EQ(run(f, 24.0f).value, 32.0f);  // the tie between 16 (11) and 32 (12, even)
    EXPECT_THROW(sdk::power_of_two_codebook(8, 127, false), sdk::plugin_error);  // 2^128 is not a float
}

TEST(Codebook, NearestAndTowardZeroOnNF4) {
    const sdk::codebook_format f(4, kNF4);
    EXPECT_EQ(run(f, 0.2f).code, 9u);  // 0.2 is nearer 0.1609 than 0.2461
    EXPECT_EQ(run(f, 0.21f).code, 10u);
    EXPECT_EQ(run(f, 0.9f).code, 15u);
    EXPECT_EQ(run(f, 0.9f, RTZ).code, 14u);
    EXPECT_EQ(run(f, -0.9f, RTZ).code, 1u);  // toward zero: -0.6962
    EXPECT_EQ(run(f, -0.05f, RTZ).code, 7u);
    EXPECT_EQ(run(f, -0.05f, RTZ).underflow, 1u);
    EXPECT_EQ(run(f, 0.07958029955625534f).code, 8u);
}

TEST(Codebook, AnythingPastTheExtremesOverflows) {
    const sdk::codebook_format p(4, kP4);
    // A codebook has no notional value past max: 3.1 is an overflow even
    // though it is nearer 3 than any other value.
    CodeResult r = run(p, 3.1f, RNE, SAT);
    EXPECT_EQ(r.value, 3.0f);
    EXPECT_EQ(r.overflow, 1u);
    r = run(p, 3.1f, RNE, NONFINITE);
    EXPECT_EQ(r.value, kInf);
    EXPECT_EQ(r.code, 7u);
    EXPECT_EQ(r.overflow, 1u);
    r = run(p, -3.1f, RNE, NONFINITE);
    EXPECT_EQ(r.code, 15u);
    r = run(p, 3.1f, RTZ, NONFINITE);  // toward zero keeps a finite input finite
    EXPECT_EQ(r.value, 3.0f);
    EXPECT_EQ(r.overflow, 1u);
    r = run(p, kInf, RTZ, NONFINITE);
    EXPECT_EQ(r.code, 7u);
    r = run(p, -kInf, RNE, SAT);
    EXPECT_EQ(r.value, -3.0f);
    EXPECT_EQ(r.overflow, 1u);
    r = run(p, 3.0f, RNE, NONFINITE);
    EXPECT_EQ(r.value, 3.0f);
    EXPECT_EQ(r.overflow, 0u);

    // No Inf but a NaN code: the non-finite mode gives NaN.
    const sdk::codebook_format n(4, e2m1_with_nan());
    r = run(n, 6.5f, RNE, NONFINITE);
    EXPECT_TRUE(std::isnan(r.value));
    EXPECT_EQ(r.code, 8u);
    EXPECT_EQ(r.overflow, 1u);
    EXPECT_EQ(run(n, 6.5f, RNE, SAT).value, 6.0f);

    // Neither: saturates in both modes.
    const sdk::codebook_format nf4(4, kNF4);
    r = run(nf4, 1.5f, RNE, NONFINITE);
    EXPECT_EQ(r.value, 1.0f);
    EXPECT_EQ(r.code, 15u);
    EXPECT_EQ(r.overflow, 1u);
    r = run(nf4, -kInf, RNE, NONFINITE);
    EXPECT_EQ(r.value, -1.0f);
    EXPECT_EQ(r.code, 0u);
    EXPECT_EQ(r.overflow, 1u);
}

TEST(Codebook, UnderflowAndNegativeZero) {
    const sdk::codebook_format e(4, kE2M1);
    CodeResult r = run(e, -0.2f);
    EXPECT_TRUE(same_float(r.value, -0.0f));
    EXPECT_EQ(r.code, 8u);
    EXPECT_EQ(r.underflow, 1u);
    r = run(e, -0.0f);
    EXPECT_TRUE(same_float(r.value, -0.0f));
    EXPECT_EQ(r.code, 8u);
    EXPECT_EQ(r.underflow, 0u);
    r = run(e, 0.0f);
    EXPECT_TRUE(same_float(r.value, 0.0f));
    EXPECT_EQ(r.code, 0u);
    r = run(e, 0.25f);  // tie between 0 (code 0) and 0.5 (code 1)
    EXPECT_TRUE(same_float(r.value, 0.0f));
    EXPECT_EQ(r.underflow, 1u);
    r = run(e, -0.25f);
    EXPECT_TRUE(same_float(r.value, -0.0f));
    EXPECT_EQ(r.code, 8u);

    const sdk::codebook_format p(4, kP4);  // one zero
    r = run(p, -0.1f);
    EXPECT_TRUE(same_float(r.value, 0.0f));
    EXPECT_EQ(r.code, 0u);
    EXPECT_EQ(r.underflow, 1u);
    r = run(p, -0.0f);
    EXPECT_TRUE(same_float(r.value, 0.0f));
    EXPECT_EQ(r.underflow, 0u);
}

TEST(Codebook, NanQuantizesToNanAndEncodesToTheNanCodeOrIsUnrepresentable) {
    const sdk::codebook_format p(4, kP4);
    CodeResult r = run(p, kNaN);
    EXPECT_TRUE(std::isnan(r.value));
    EXPECT_EQ(r.code, 8u);
    EXPECT_FALSE(r.unrepresentable);
    EXPECT_EQ(r.overflow + r.underflow, 0u);

    const sdk::codebook_format nf4(4, kNF4);
    r = run(nf4, kNaN);
    EXPECT_TRUE(std::isnan(r.value));
    EXPECT_TRUE(r.unrepresentable);
}

TEST(Codebook, NanCodeDecodesToAQuietNanEvenIfTheTableHoldsASignallingOne) {
    // format.h: "NaN codes decode to a quiet NaN".
    std::vector<float> t = kP4;
    t[8] = std::numeric_limits<float>::signaling_NaN();
    const sdk::codebook_format p(4, t);
    const float d = p.decode(8);
    ASSERT_TRUE(std::isnan(d));
    EXPECT_TRUE(fbits(d) & 0x00400000u) << "decode(8) = 0x" << std::hex << fbits(d) << " is a signalling NaN";
}

TEST(Codebook, StochasticRoundingIsUnbiasedAndUsesOnlyTheNeighbours) {
    const sdk::codebook_format f(4, kNF4);
    const double t = 0.24611230194568634f, a = 0.33791524171829224f;  // codes 10 and 11
    for (double frac : {1.0 / 8, 1.0 / 3, 0.5, 0.9}) {
        const float x = static_cast<float>(t + frac * (a - t));
        const double fx = (static_cast<double>(x) - t) / (a - t);
        const double prob = std::floor(std::ldexp(fx, 32)) / 4294967296.0;
        const size_t N = 100000;
        double sum = 0;
        sdk::element_counts c;
        for (size_t i = 0; i < N; ++i) {
            const float y = direct_quantize(f, x, RSR, SAT, ref_random_bits(99, 5000 + i), c);
            ASSERT_TRUE(y == static_cast<float>(t) || y == static_cast<float>(a)) << hexf(y);
            sum += y;
        }
        const double bound = 5 * std::sqrt(prob * (1 - prob) / N) * (a - t) + std::ldexp(a - t, -31);
        EXPECT_LE(std::fabs(sum / N - x), bound) << "fraction " << frac;
    }
}

// ---------------------------------------------------------------------------
// Fixed point: Q3.4 (8 bits, 4 fraction bits: [-8, 127/16] in steps of 1/16).
// ---------------------------------------------------------------------------
FormatModel q3_4_model() {
    FormatModel m;
    m.name = "q3.4";
    for (uint32_t c = 0; c < 256; ++c)
        m.by_code.push_back(static_cast<int8_t>(static_cast<uint8_t>(c)) / 16.0);
    m.signed_zero = false;
    m.above_max = 8.0;
    m.below_lowest = -8.0 - 1.0 / 16;
    m.finalize();
    return m;
}

TEST(FixedPoint, Q3_4InfoDescribesTheFormat) {
    const altgrad_format_info i = sdk::fixed_point_format({8, 4}).info();
    EXPECT_EQ(i.family, ALTGRAD_FAMILY_FIXED_POINT);
    EXPECT_EQ(i.total_bits, 8u);
    EXPECT_EQ(i.code_bytes, 1u);
    EXPECT_EQ(i.mantissa_bits, 4u);
    EXPECT_EQ(i.max_finite, 127.0 / 16);
    EXPECT_EQ(i.lowest_finite, -8.0);
    EXPECT_EQ(i.min_normal, 1.0 / 16);
    EXPECT_EQ(i.min_subnormal, 0.0);
    EXPECT_EQ(i.zero, ALTGRAD_ZERO_UNSIGNED);
    EXPECT_EQ(i.has_inf, 0u);
    EXPECT_EQ(i.nan_code_count, 0u);
    EXPECT_EQ(sdk::fixed_point_format({12, 3}).info().code_bytes, 2u);
}

TEST(FixedPoint, Q3_4DecodesTwosComplementCodes) {
    const sdk::fixed_point_format f({8, 4});
    for (uint32_t c = 0; c < 256; ++c)
        ASSERT_EQ(f.decode(c), static_cast<int8_t>(static_cast<uint8_t>(c)) / 16.0f) << "code " << c;
}

TEST(FixedPoint, Q3_4MatchesTheReferenceInEveryMode) {
    expect_matches_everywhere(sdk::fixed_point_format({8, 4}), q3_4_model());
}

TEST(FixedPoint, Q3_4EdgeCases) {
    const sdk::fixed_point_format f({8, 4});
    EXPECT_EQ(run(f, -8.0f).code, 0x80u);
    EXPECT_EQ(run(f, -1.0f / 16).code, 0xFFu);
    CodeResult r = run(f, 7.96875f, RNE, NONFINITE);  // tie between 127/16 (odd) and 8: overflow, saturate
    EXPECT_EQ(r.value, 127.0f / 16);
    EXPECT_EQ(r.overflow, 1u);
    r = run(f, -8.03125f, RNE, NONFINITE);  // tie between -8 (even) and -8 - 1/16
    EXPECT_EQ(r.value, -8.0f);
    EXPECT_EQ(r.overflow, 0u);
    r = run(f, kInf, RNE, NONFINITE);
    EXPECT_EQ(r.value, 127.0f / 16);
    EXPECT_EQ(r.overflow, 1u);
    r = run(f, kNaN);
    EXPECT_TRUE(std::isnan(r.value));
    EXPECT_TRUE(r.unrepresentable);
    r = run(f, -0.01f);
    EXPECT_TRUE(same_float(r.value, 0.0f));
    EXPECT_EQ(r.underflow, 1u);
}

// Other shapes: integers, more fraction bits than total bits, a tiny step,
// two bits, 16 bits.
FormatModel fixed_point_model(int B, int F) {
    FormatModel m;
    m.name = "fixed" + std::to_string(B) + "." + std::to_string(F);
    m.total_bits = static_cast<unsigned>(B);
    for (uint32_t c = 0; c < (1u << B); ++c) {
        const int64_t k =
            c >= (1u << (B - 1)) ? static_cast<int64_t>(c) - (int64_t{1} << B) : static_cast<int64_t>(c);
        m.by_code.push_back(std::ldexp(static_cast<double>(k), -F));
    }
    m.signed_zero = false;
    m.above_max = std::ldexp(static_cast<double>(int64_t{1} << (B - 1)), -F);
    m.below_lowest = std::ldexp(-static_cast<double>((int64_t{1} << (B - 1)) + 1), -F);
    m.finalize();
    return m;
}

TEST(FixedPoint, OtherShapesMatchTheReferenceInEveryMode) {
    const int shapes[][2] = {{8, 7}, {12, 0}, {16, 20}, {8, 100}, {2, 0}, {6, 3}, {10, 120}};
    for (const auto& sh : shapes) {
        SCOPED_TRACE("total_bits " + std::to_string(sh[0]) + ", fraction_bits " + std::to_string(sh[1]));
        expect_matches_everywhere(sdk::fixed_point_format({sh[0], sh[1]}), fixed_point_model(sh[0], sh[1]),
                                  sh[0] > 8 ? 3 : 1);
    }
}

// Symmetric: k = -2^(B-1) left out, its code NaN, the grid going on below
// -(2^(B-1) - 1) by one step (to where -2^(B-1) would be).
FormatModel symmetric_fixed_point_model(int B, int F) {
    FormatModel m = fixed_point_model(B, F);
    m.name += "-symmetric";
    m.by_code[size_t{1} << (B - 1)] = std::numeric_limits<double>::quiet_NaN();
    m.finalize();
    m.below_lowest = -m.above_max;
    return m;
}

TEST(FixedPoint, SymmetricShapesMatchTheReferenceInEveryMode) {
    const int shapes[][2] = {{8, 0}, {4, 0}, {2, 0}, {8, 6}, {16, 3}, {5, 40}};
    for (const auto& sh : shapes) {
        SCOPED_TRACE("symmetric, total_bits " + std::to_string(sh[0]) + ", fraction_bits " +
                     std::to_string(sh[1]));
        expect_matches_everywhere(sdk::fixed_point_format({sh[0], sh[1], true}),
                                  symmetric_fixed_point_model(sh[0], sh[1]), sh[0] > 8 ? 3 : 1);
    }
}

// Symmetric INT4: -7..7, code 8 (0b1000) NaN; -7.5 is the tie between -7
// (code 9, odd) and the notional -8 (overflow): saturate gives -7, non-finite
// NaN, which is also what encode writes for NaN.
TEST(FixedPoint, SymmetricInt4EdgeCases) {
    const sdk::fixed_point_format f({4, 0, true});
    const altgrad_format_info i = f.info();
    EXPECT_EQ(i.max_finite, 7.0);
    EXPECT_EQ(i.lowest_finite, -7.0);
    EXPECT_EQ(i.nan_code_count, 1u);
    EXPECT_EQ(i.canonical_nan_code, 8u);
    EXPECT_TRUE(std::isnan(f.decode(8)));
    EXPECT_EQ(f.decode(9), -7.0f);
    EXPECT_EQ(f.decode(7), 7.0f);
    CodeResult r = run(f, -7.5f);
    EXPECT_EQ(r.value, -7.0f);
    EXPECT_EQ(r.code, 9u);
    EXPECT_EQ(r.overflow, 1u);
    r = run(f, -7.5f, RNE, NONFINITE);
    EXPECT_TRUE(std::isnan(r.value));
    EXPECT_EQ(r.code, 8u);
    EXPECT_FALSE(r.unrepresentable);
    r = run(f, -7.9f, RTZ, NONFINITE);  // toward zero: -7, in range
    EXPECT_EQ(r.value, -7.0f);
    EXPECT_EQ(r.overflow, 0u);
    r = run(f, -8.5f, RTZ, NONFINITE);  // a finite input stays finite under toward-zero
    EXPECT_EQ(r.value, -7.0f);
    EXPECT_EQ(r.overflow, 1u);
    r = run(f, -kInf, RTZ, NONFINITE);
    EXPECT_TRUE(std::isnan(r.value));
    r = run(f, kNaN);
    EXPECT_TRUE(std::isnan(r.value));
    EXPECT_EQ(r.code, 8u);
    EXPECT_FALSE(r.unrepresentable);
    EXPECT_EQ(run(f, 6.5f).value, 6.0f);  // tie: 6 is even
    EXPECT_EQ(run(f, -6.5f).value, -6.0f);
}

TEST(FixedPoint, ConstructorRejectsOutOfRangeWidths) {
    expect_invalid_argument([] { sdk::fixed_point_format({1, 0}); }, "total_bits 1");
    expect_invalid_argument([] { sdk::fixed_point_format({25, 4}); }, "total_bits 25");
    expect_invalid_argument([] { sdk::fixed_point_format({8, -1}); }, "fraction_bits -1");
    expect_invalid_argument([] { sdk::fixed_point_format({8, 121}); }, "fraction_bits 121");
}

// ---------------------------------------------------------------------------
// ExMy.
// ---------------------------------------------------------------------------
// The bundled ExMy formats built from their specs, their element kernels
// called directly (so the scalar quantize_bits is checked whatever the CPU;
// the plugins on an AVX2 machine run the vector loop).
TEST(ExMy, BundledSpecsMatchTheReferenceThroughTheElementKernels) {
    using S = sdk::exmy_specials;
    struct Case {
        const char* name;
        sdk::exmy_spec spec;
    };
    const Case cases[] = {{"e5m2", {5, 2, 15, S::ieee}},  {"e4m3", {4, 3, 7, S::finite_nan}},
                          {"e3m4", {3, 4, 3, S::ieee}},   {"e1m6", {1, 6, 1, S::p3109}},
                          {"e7m0", {7, 0, 64, S::p3109}}, {"fp16", {5, 10, 15, S::ieee}},
                          {"bf16", {8, 7, 127, S::ieee}}};
    for (const Case& c : cases) {
        SCOPED_TRACE(c.name);
        expect_matches_everywhere(sdk::exmy_format(c.spec), model(c.name),
                                  model(c.name).total_bits > 8 ? 7 : 1);
    }
}

TEST(ExMy, ConstructorRejectsBadSpecs) {
    using S = sdk::exmy_specials;
    expect_invalid_argument([] { sdk::exmy_format({0, 3, 7, S::finite}); }, "exponent_bits 0");
    expect_invalid_argument([] { sdk::exmy_format({9, 3, 7, S::ieee}); }, "exponent_bits 9");
    expect_invalid_argument([] { sdk::exmy_format({4, 24, 7, S::ieee}); }, "mantissa_bits 24");
    expect_invalid_argument([] { sdk::exmy_format({4, -1, 7, S::finite}); }, "mantissa_bits -1");
    expect_invalid_argument([] { sdk::exmy_format({5, 0, 15, S::ieee}); }, "ieee with mantissa 0");
    expect_invalid_argument([] { sdk::exmy_format({8, 7, 200, S::ieee}); }, "min normal below float32's");
    expect_invalid_argument([] { sdk::exmy_format({8, 7, 126, S::ieee}); }, "max above FLT_MAX");
    EXPECT_NO_THROW(sdk::exmy_format({8, 23, 127, S::ieee}));
    EXPECT_NO_THROW(sdk::exmy_format({7, 0, 64, S::p3109}));
}

// OCP Microscaling Formats (MX) v1.0, FP4 E2M1: bias 1, no Inf or NaN;
// magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6; max 6, min normal 1, min subnormal 0.5.
const double kE2M1Magnitudes[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};

FormatModel e2m1_model() {
    FormatModel m;
    m.name = "exmy-e2m1";
    m.total_bits = 4;
    for (uint32_t c = 0; c < 16; ++c)
        m.by_code.push_back((c & 8u) ? -kE2M1Magnitudes[c & 7u] : kE2M1Magnitudes[c & 7u]);
    m.above_max = 8.0;
    m.below_lowest = -8.0;
    m.finalize();
    return m;
}

TEST(ExMy, E2M1FiniteMatchesTheOcpMxValues) {
    const sdk::exmy_format f({2, 1, 1, sdk::exmy_specials::finite});
    for (uint32_t c = 0; c < 16; ++c) {
        const float want = static_cast<float>((c & 8u) ? -kE2M1Magnitudes[c & 7u] : kE2M1Magnitudes[c & 7u]);
        EXPECT_TRUE(same_float(f.decode(c), want)) << "code " << c << ": " << hexf(f.decode(c));
    }
    const altgrad_format_info i = f.info();
    EXPECT_EQ(i.total_bits, 4u);
    EXPECT_EQ(i.code_bytes, 1u);
    EXPECT_EQ(i.max_finite, 6.0);
    EXPECT_EQ(i.lowest_finite, -6.0);
    EXPECT_EQ(i.min_normal, 1.0);
    EXPECT_EQ(i.min_subnormal, 0.5);
    EXPECT_EQ(i.has_inf, 0u);
    EXPECT_EQ(i.nan_code_count, 0u);
    EXPECT_EQ(i.zero, ALTGRAD_ZERO_SIGNED);
}

TEST(ExMy, E2M1FiniteMatchesTheReferenceInEveryMode) {
    expect_matches_everywhere(sdk::exmy_format({2, 1, 1, sdk::exmy_specials::finite}), e2m1_model());
}

TEST(ExMy, E2M1FiniteSaturatesInBothModesAndHasNoNan) {
    const sdk::exmy_format f({2, 1, 1, sdk::exmy_specials::finite});
    EXPECT_EQ(run(f, 5.0f).value, 4.0f);          // tie: 4 is code 6 (even)
    CodeResult r = run(f, 7.0f, RNE, NONFINITE);  // tie between 6 (code 7, odd) and 8: overflow
    EXPECT_EQ(r.value, 6.0f);
    EXPECT_EQ(r.code, 7u);
    EXPECT_EQ(r.overflow, 1u);
    r = run(f, std::nextafter(7.0f, 0.0f), RNE, NONFINITE);
    EXPECT_EQ(r.value, 6.0f);
    EXPECT_EQ(r.overflow, 0u);
    r = run(f, -kInf, RNE, NONFINITE);
    EXPECT_EQ(r.value, -6.0f);
    EXPECT_EQ(r.code, 15u);
    EXPECT_EQ(r.overflow, 1u);
    r = run(f, kNaN, RNE, NONFINITE);
    EXPECT_TRUE(std::isnan(r.value));
    EXPECT_TRUE(r.unrepresentable);
    r = run(f, -0.2f);
    EXPECT_TRUE(same_float(r.value, -0.0f));
    EXPECT_EQ(r.code, 8u);
}

TEST(ExMy, Fp6FormatsMatchTheOcpMxFactsAndTheReference) {
    const sdk::exmy_format e2m3({2, 3, 1, sdk::exmy_specials::finite});
    const sdk::exmy_format e3m2({3, 2, 3, sdk::exmy_specials::finite});
    EXPECT_EQ(e2m3.info().max_finite, 7.5);
    EXPECT_EQ(e2m3.info().min_normal, 1.0);
    EXPECT_EQ(e2m3.info().min_subnormal, 0.125);
    EXPECT_EQ(e2m3.info().total_bits, 6u);
    EXPECT_EQ(e3m2.info().max_finite, 28.0);
    EXPECT_EQ(e3m2.info().min_normal, 0.25);
    EXPECT_EQ(e3m2.info().min_subnormal, 0.0625);
    const FormatModel m23 = finite_sign_magnitude_model("e2m3", 2, 3, 1);
    const FormatModel m32 = finite_sign_magnitude_model("e3m2", 3, 2, 3);
    EXPECT_EQ(m23.max, 7.5);
    EXPECT_EQ(m32.max, 28.0);
    for (uint32_t c = 0; c < 64; ++c) {
        EXPECT_TRUE(same_float(e2m3.decode(c), static_cast<float>(m23.by_code[c]))) << "e2m3 code " << c;
        EXPECT_TRUE(same_float(e3m2.decode(c), static_cast<float>(m32.by_code[c]))) << "e3m2 code " << c;
    }
    expect_matches_everywhere(e2m3, m23);
    expect_matches_everywhere(e3m2, m32);
}

TEST(ExMy, IeeeStyleE4M3WithInfMatchesTheReference) {
    // Not a bundled format: E4M3 with IEEE specials has max 240.
    FormatModel m;
    m.name = "e4m3-ieee";
    for (uint32_t c = 0; c < 256; ++c) m.by_code.push_back(ieee_style_value(c, 4, 3, 7));
    m.above_max = 256;
    m.below_lowest = -256;
    m.finalize();
    EXPECT_EQ(m.max, 240.0);
    const sdk::exmy_format f({4, 3, 7, sdk::exmy_specials::ieee});
    EXPECT_EQ(f.info().max_finite, 240.0);
    expect_matches_everywhere(f, m);
}

// ---------------------------------------------------------------------------
// The adapter (format_plugin.hpp) around a 4-bit codebook, in process: codes
// with bits above total_bits are refused, and NaN into a table without a NaN
// code is NOT_REPRESENTABLE naming the element.
// ---------------------------------------------------------------------------
sdk::codebook_format make_nf4(const sdk::param_view&) { return sdk::codebook_format(4, kNF4); }
using NF4Adapter = sdk::format_adapter<sdk::codebook_format, &make_nf4>;

struct AdapterInstance {
    const altgrad_format_vtable* vt = NF4Adapter::vtable();
    altgrad_format* f = nullptr;
    AdapterInstance() {
        altgrad_param_list params{sizeof(altgrad_param_list), nullptr, 0};
        altgrad_error err = blank_error();
        EXPECT_EQ(vt->create(&params, &f, &err), ALTGRAD_STATUS_OK) << err.message;
    }
    ~AdapterInstance() { vt->destroy(f); }
};

TEST(Adapter, DecodeRejectsCodesWithBitsAboveTotalBits) {
    AdapterInstance a;
    uint8_t codes[3] = {3, 15, 16};
    float out[3] = {0, 0, 0};
    altgrad_decode_args d = decode_args(codes, out, 3, 1.0f);
    altgrad_error err = blank_error();
    EXPECT_EQ(a.vt->decode(a.f, &d, &err), ALTGRAD_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(err.message).find("16"), std::string::npos) << err.message;
    d.count = 2;
    ASSERT_EQ(a.vt->decode(a.f, &d, &err), ALTGRAD_STATUS_OK);
    EXPECT_EQ(out[0], kNF4[3]);
    EXPECT_EQ(out[1], 1.0f);
}

TEST(Adapter, CodebookWithoutNanEncodesNanAsNotRepresentable) {
    AdapterInstance a;
    float in[5] = {0.1f, -0.3f, 0.5f, kNaN, 0.0f};
    uint8_t codes[5] = {};
    altgrad_encode_args e = encode_args(in, codes, 5, Mode{});
    altgrad_error err = blank_error();
    EXPECT_EQ(a.vt->encode(a.f, &e, &err), ALTGRAD_STATUS_NOT_REPRESENTABLE);
    EXPECT_NE(std::string(err.message).find("3"), std::string::npos) << err.message;
    float out[5] = {};
    altgrad_quantize_args q = quantize_args(in, out, 5, Mode{});
    ASSERT_EQ(a.vt->quantize(a.f, &q, &err), ALTGRAD_STATUS_OK);
    EXPECT_TRUE(std::isnan(out[3]));
    EXPECT_EQ(out[2], kNF4[12]);  // 0.5 is below the midpoint 0.50166 of 0.4407 and 0.5626
}

// ---- saved state (state.hpp) ----------------------------------------------

// The byte layout is fixed (little-endian, IEEE bits for doubles), so the
// expected bytes are written out by hand: 1.0 is 0x3FF0000000000000.
TEST(StateWriter, WritesFixedWidthLittleEndian) {
    sdk::state_writer w;
    w.put_u32(0x01020304u);
    w.put_bool(true);
    w.put_f64(1.0);
    w.put_string("ab");
    w.put_i64(-2);
    const std::string expected = std::string("\x04\x03\x02\x01", 4) + std::string("\x01", 1) +
                                 std::string("\x00\x00\x00\x00\x00\x00\xf0\x3f", 8) +
                                 std::string("\x02\x00\x00\x00\x00\x00\x00\x00", 8) + "ab" +
                                 std::string("\xfe\xff\xff\xff\xff\xff\xff\xff", 8);
    EXPECT_EQ(w.bytes(), expected);
}

TEST(StateReader, ReadsBackWhatWasWrittenBitForBit) {
    sdk::state_writer w;
    w.put_u32(7);
    w.put_u64(0xfedcba9876543210ull);
    w.put_i64(std::numeric_limits<int64_t>::min());
    w.put_bool(false);
    w.put_f64(-0.0);
    w.put_f64(std::numeric_limits<double>::quiet_NaN());
    w.put_f64(std::numeric_limits<double>::denorm_min());
    w.put_string(std::string("x\0y", 3));
    sdk::state_reader r(w.bytes().data(), w.bytes().size());
    r.expect_layout(7);
    EXPECT_EQ(r.get_u64(), 0xfedcba9876543210ull);
    EXPECT_EQ(r.get_i64(), std::numeric_limits<int64_t>::min());
    EXPECT_FALSE(r.get_bool());
    const double zero = r.get_f64();
    EXPECT_EQ(zero, 0.0);
    EXPECT_TRUE(std::signbit(zero));
    EXPECT_TRUE(std::isnan(r.get_f64()));
    EXPECT_EQ(r.get_f64(), std::numeric_limits<double>::denorm_min());
    EXPECT_EQ(r.get_string(), std::string("x\0y", 3));
    EXPECT_EQ(r.remaining(), 0u);
    EXPECT_NO_THROW(r.finish());
}

// Each bad state is INVALID_ARGUMENT with a message saying what was wrong.
TEST(StateReader, RefusesBadBytesSayingWhat) {
    const auto refusal = [](const std::string& bytes, auto read) {
        sdk::state_reader r(bytes.data(), bytes.size());
        try {
            read(r);
            return std::string("accepted");
        } catch (const sdk::plugin_error& e) {
            EXPECT_EQ(e.status(), ALTGRAD_STATUS_INVALID_ARGUMENT);
            return std::string(e.what());
        }
    };
    EXPECT_EQ(refusal(std::string("\x01\x00\x00", 3), [](sdk::state_reader& r) { r.get_u32("count"); }),
              "saved state: count runs past the end (3 bytes)");
    EXPECT_EQ(refusal(std::string("\x02", 1), [](sdk::state_reader& r) { r.get_bool("active"); }),
              "saved state: active is 2, not 0 or 1");
    EXPECT_EQ(refusal(std::string("\x05\x00\x00\x00\x00\x00\x00\x00"
                                  "abc",
                                  11),
                      [](sdk::state_reader& r) { r.get_string("name"); }),
              "saved state: name of 5 bytes runs past the end");
    EXPECT_EQ(refusal(std::string("\x03\x00\x00\x00", 4), [](sdk::state_reader& r) { r.expect_layout(1); }),
              "saved state: layout version 3, this plugin reads 1");
    EXPECT_EQ(refusal(std::string("\x01\x00", 2),
                      [](sdk::state_reader& r) {
                          r.get_bool();
                          r.finish();
                      }),
              "saved state: 1 byte(s) left unread");
}

}  // namespace
