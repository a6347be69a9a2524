// The OCP Microscaling (MX) v1.0 element formats, checked against the
// specification's own numbers (section 5.3.3, tables of FP4 E2M1, FP6 E2M3
// and FP6 E3M2; the same formats as ml_dtypes' float4_e2m1fn, float6_e2m3fn
// and float6_e3m2fn): every E2M1 code, each format's extremes, and by hand the
// places where format code goes wrong: ties, the max boundary, the smallest
// subnormal, NaN and Inf in formats that hold neither. The full grids, all
// modes and scales are compared with the reference in
// plugin_quantize_reference_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "test_common.hpp"

namespace {

using namespace agtest;

Mode mode(altgrad_rounding r, altgrad_overflow o = ALTGRAD_OVERFLOW_SATURATE) {
    Mode m;
    m.rounding = r;
    m.overflow = o;
    return m;
}

TEST(MxFormats, E2M1DecodesEveryCodeAsTheSpecificationLists) {
    // S.EE.M: 0, 0.5 (subnormal), 1, 1.5, 2, 3, 4, 6, then the negatives.
    const std::vector<float> want = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                     -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
    std::vector<uint32_t> codes;
    for (uint32_t c = 0; c < 16; ++c) codes.push_back(c);
    const DecodeResult got = plugin("fp4_e2m1").decode(codes);
    ASSERT_EQ(got.status, ALTGRAD_STATUS_OK);
    for (uint32_t c = 0; c < 16; ++c) EXPECT_TRUE(same_float(got.out[c], want[c])) << "code " << c;
}

struct Extremes {
    const char* name;
    uint32_t bits, exponent_bits, mantissa_bits;
    int bias;
    double max_normal, min_normal, max_subnormal, min_subnormal;
};

// The MX specification's table of the FP6 and FP4 element formats.
const Extremes kSpec[] = {
    {"fp4_e2m1", 4, 2, 1, 1, 6.0, 1.0, 0.5, 0.5},
    {"fp6_e2m3", 6, 2, 3, 1, 7.5, 1.0, 0.875, 0.125},
    {"fp6_e3m2", 6, 3, 2, 3, 28.0, 0.25, 0.1875, 0.0625},
};

TEST(MxFormats, InfoAndExtremesAreTheSpecifications) {
    for (const Extremes& e : kSpec) {
        const FormatPlugin& p = plugin(e.name);
        const altgrad_format_info& i = p.info();
        EXPECT_EQ(i.family, ALTGRAD_FAMILY_FLOAT) << e.name;
        EXPECT_EQ(i.total_bits, e.bits) << e.name;
        EXPECT_EQ(i.code_bytes, 1u) << e.name;
        EXPECT_EQ(i.exponent_bits, e.exponent_bits) << e.name;
        EXPECT_EQ(i.mantissa_bits, e.mantissa_bits) << e.name;
        EXPECT_EQ(i.bias, e.bias) << e.name;
        EXPECT_EQ(i.zero, ALTGRAD_ZERO_SIGNED) << e.name;
        EXPECT_EQ(i.has_inf, 0u) << e.name;
        EXPECT_EQ(i.nan_code_count, 0u) << e.name;
        EXPECT_EQ(i.max_finite, e.max_normal) << e.name;
        EXPECT_EQ(i.lowest_finite, -e.max_normal) << e.name;
        EXPECT_EQ(i.min_normal, e.min_normal) << e.name;
        EXPECT_EQ(i.min_subnormal, e.min_subnormal) << e.name;
        // The codes that hold them: all ones below the sign is max normal,
        // 1 the smallest subnormal, all mantissa ones with e = 0 the largest,
        // and e = 1, m = 0 the smallest normal.
        const uint32_t magnitude_ones = (1u << (e.bits - 1)) - 1u,
                       mantissa_ones = (1u << e.mantissa_bits) - 1u;
        const DecodeResult got = p.decode(
            {magnitude_ones, 1u, mantissa_ones, mantissa_ones + 1u, magnitude_ones | (1u << (e.bits - 1))});
        ASSERT_EQ(got.status, ALTGRAD_STATUS_OK) << e.name;
        EXPECT_EQ(got.out[0], e.max_normal) << e.name;
        EXPECT_EQ(got.out[1], e.min_subnormal) << e.name;
        EXPECT_EQ(got.out[2], e.max_subnormal) << e.name;
        EXPECT_EQ(got.out[3], e.min_normal) << e.name;
        EXPECT_EQ(got.out[4], -e.max_normal) << e.name;
    }
}

TEST(MxFormats, E2M1TiesGoToTheEvenCode) {
    const FormatPlugin& p = plugin("fp4_e2m1");
    const Mode nearest = mode(ALTGRAD_ROUND_NEAREST_EVEN);
    // Codes: 0.5 = 1, 1 = 2, 1.5 = 3, 2 = 4, 3 = 5, 4 = 6, 6 = 7.
    EXPECT_EQ(p.quantize_one(0.75f, nearest), 1.0f);  // 0.5 (1) | 1 (2)
    EXPECT_EQ(p.quantize_one(1.25f, nearest), 1.0f);  // 1 (2) | 1.5 (3)
    EXPECT_EQ(p.quantize_one(1.75f, nearest), 2.0f);  // 1.5 (3) | 2 (4)
    EXPECT_EQ(p.quantize_one(2.5f, nearest), 2.0f);   // 2 (4) | 3 (5)
    EXPECT_EQ(p.quantize_one(3.5f, nearest), 4.0f);   // 3 (5) | 4 (6)
    EXPECT_EQ(p.quantize_one(5.0f, nearest), 4.0f);   // 4 (6) | 6 (7)
    EXPECT_EQ(p.quantize_one(-5.0f, nearest), -4.0f);
    EXPECT_EQ(p.quantize_one(5.0001f, nearest), 6.0f);
    uint64_t overflow = 0, underflow = 0;
    // 0.25 is the tie between 0 (code 0) and 0.5 (code 1): zero, an underflow.
    EXPECT_EQ(p.quantize_one(0.25f, nearest, &overflow, &underflow), 0.0f);
    EXPECT_EQ(underflow, 1u);
    EXPECT_TRUE(std::signbit(p.quantize_one(-0.25f, nearest)));
    EXPECT_EQ(p.quantize_one(0.2501f, nearest), 0.5f);
}

TEST(MxFormats, TheMaxBoundarySaturatesInBothOverflowModes) {
    // Past max the grid continues with 2^(emax+1) (8, 8 and 32): the tie
    // halfway to it rounds up (max's code is odd), overflows, and, with no Inf
    // or NaN to go to, saturates in both modes.
    struct Case {
        const char* name;
        float max, tie, below_tie;
    };
    for (const Case& c : {Case{"fp4_e2m1", 6.0f, 7.0f, 6.99f}, Case{"fp6_e2m3", 7.5f, 7.75f, 7.74f},
                          Case{"fp6_e3m2", 28.0f, 30.0f, 29.9f}}) {
        const FormatPlugin& p = plugin(c.name);
        for (altgrad_overflow o : {ALTGRAD_OVERFLOW_SATURATE, ALTGRAD_OVERFLOW_NONFINITE}) {
            const Mode m = mode(ALTGRAD_ROUND_NEAREST_EVEN, o);
            uint64_t overflow = 9;
            EXPECT_EQ(p.quantize_one(c.below_tie, m, &overflow), c.max) << c.name;
            EXPECT_EQ(overflow, 0u) << c.name;
            EXPECT_EQ(p.quantize_one(c.tie, m, &overflow), c.max) << c.name;
            EXPECT_EQ(overflow, 1u) << c.name;
            EXPECT_EQ(p.quantize_one(-c.tie, m, &overflow), -c.max) << c.name;
            EXPECT_EQ(p.quantize_one(std::numeric_limits<float>::infinity(), m, &overflow), c.max) << c.name;
            EXPECT_EQ(overflow, 1u) << c.name;
            EXPECT_EQ(p.quantize_one(1e30f, mode(ALTGRAD_ROUND_TOWARD_ZERO, o), &overflow), c.max) << c.name;
            EXPECT_EQ(overflow, 1u) << c.name;
            // NaN stays visible in quantize, but no code holds it.
            EXPECT_TRUE(std::isnan(p.quantize_one(std::nanf(""), m))) << c.name;
            EXPECT_EQ(p.encode({std::nanf("")}, m).status, ALTGRAD_STATUS_NOT_REPRESENTABLE) << c.name;
        }
    }
}

TEST(MxFormats, SubnormalsRoundOnTheirOwnGrid) {
    const Mode nearest = mode(ALTGRAD_ROUND_NEAREST_EVEN);
    // E3M2: subnormals are k/16 (k = 1..3), normals from 0.25 in steps of 1/16 up to 0.5.
    const FormatPlugin& e3m2 = plugin("fp6_e3m2");
    uint64_t underflow = 0;
    EXPECT_EQ(e3m2.quantize_one(0.03125f, nearest, nullptr, &underflow), 0.0f);  // tie 0 | 1/16: even is 0
    EXPECT_EQ(underflow, 1u);
    EXPECT_EQ(e3m2.quantize_one(0.09375f, nearest), 0.125f);  // tie 1/16 (code 1) | 2/16 (code 2)
    EXPECT_EQ(e3m2.quantize_one(0.15625f, nearest), 0.125f);  // tie 2/16 (2) | 3/16 (3)
    EXPECT_EQ(e3m2.quantize_one(0.21875f, nearest), 0.25f);   // tie 3/16 (3) | 4/16 (4, the min normal)
    // E2M3: subnormals are k/8; toward zero truncates onto them.
    const FormatPlugin& e2m3 = plugin("fp6_e2m3");
    EXPECT_EQ(e2m3.quantize_one(0.3f, mode(ALTGRAD_ROUND_TOWARD_ZERO)), 0.25f);
    EXPECT_EQ(e2m3.quantize_one(0.0625f, nearest), 0.0f);   // tie 0 | 1/8
    EXPECT_EQ(e2m3.quantize_one(0.1875f, nearest), 0.25f);  // tie 1/8 (1) | 2/8 (2)
}

}  // namespace

namespace {

// OCP MX v1.0 E8M0 (section 5.4.1, "E8M0 scale"): 2^(e-127) for e = 0..254,
// 0xFF NaN; no sign, no zero, no Inf (ml_dtypes float8_e8m0fnu).
TEST(MxFormats, Ue8m0IsEveryPowerOfTwoFrom2ToTheMinus127To2ToThe127) {
    const FormatPlugin& p = plugin("ue8m0");
    std::vector<uint32_t> codes;
    for (uint32_t c = 0; c < 256; ++c) codes.push_back(c);
    const DecodeResult got = p.decode(codes);
    ASSERT_EQ(got.status, ALTGRAD_STATUS_OK);
    for (uint32_t e = 0; e < 255; ++e)
        EXPECT_EQ(got.out[e], std::ldexp(1.0f, static_cast<int>(e) - 127)) << e;
    EXPECT_TRUE(std::isnan(got.out[255]));
    EXPECT_EQ(got.out[127], 1.0f);
    const altgrad_format_info& i = p.info();
    EXPECT_EQ(i.total_bits, 8u);
    EXPECT_EQ(i.is_signed, 0u);
    EXPECT_EQ(i.zero, ALTGRAD_ZERO_NONE);
    EXPECT_EQ(i.has_inf, 0u);
    EXPECT_EQ(i.nan_code_count, 1u);
    EXPECT_EQ(i.canonical_nan_code, 0xFFu);
    EXPECT_EQ(i.max_finite, std::ldexp(1.0, 127));
    EXPECT_EQ(i.lowest_finite, std::ldexp(1.0, -127));
    EXPECT_EQ(i.min_normal, std::ldexp(1.0, -127));
}

TEST(MxFormats, Ue8m0RoundsByValueAndHasNothingBelowItsSmallestValue) {
    const FormatPlugin& p = plugin("ue8m0");
    const Mode nearest = mode(ALTGRAD_ROUND_NEAREST_EVEN);
    // 3 = 1.5 * 2 is the tie between 2 (code 128, even) and 4 (code 129);
    // 6 the tie between 4 (129) and 8 (130, even).
    EXPECT_EQ(p.quantize_one(3.0f, nearest), 2.0f);
    EXPECT_EQ(p.quantize_one(6.0f, nearest), 8.0f);
    EXPECT_EQ(p.quantize_one(5.9f, nearest), 4.0f);
    EXPECT_EQ(p.quantize_one(7.0f, mode(ALTGRAD_ROUND_TOWARD_ZERO)), 4.0f);
    EXPECT_EQ(p.quantize_one(0.75f, nearest), 0.5f);  // tie 0.5 (126, even) | 1 (127)
    // Zero and negatives lie below the smallest value, 2^-127: overflows that
    // saturate to it, or become NaN (the format has NaN, no Inf).
    for (float x : {0.0f, -0.0f, -1.0f, std::ldexp(1.0f, -140)}) {
        uint64_t overflow = 0;
        EXPECT_EQ(p.quantize_one(x, nearest, &overflow), std::ldexp(1.0f, -127)) << x;
        EXPECT_EQ(overflow, 1u) << x;
        EXPECT_TRUE(
            std::isnan(p.quantize_one(x, mode(ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_OVERFLOW_NONFINITE))))
            << x;
    }
    uint64_t overflow = 0;
    EXPECT_EQ(p.quantize_one(std::numeric_limits<float>::max(), nearest, &overflow), std::ldexp(1.0f, 127));
    EXPECT_EQ(overflow, 1u);
    const EncodeResult nan = p.encode({std::nanf(""), 1.0f});
    ASSERT_EQ(nan.status, ALTGRAD_STATUS_OK);
    EXPECT_EQ(nan.codes, (std::vector<uint32_t>{0xFFu, 127u}));
}

}  // namespace
