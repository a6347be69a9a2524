// Each tabulated bundled plugin's quantize, bit for bit against the
// brute-force reference quantizer (reference.hpp), with its overflow and
// underflow counts: every representable value, every midpoint and its float
// neighbours, values at and past max, the subnormal boundary, +-0, NaN, +-Inf
// and 200k random floats over the whole magnitude range; nearest-even,
// toward-zero and stochastic rounding under both overflow modes; unit,
// power-of-two and general scales.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "test_common.hpp"

namespace {

using namespace agtest;

class PluginVsReference : public ::testing::TestWithParam<std::string> {};

TEST_P(PluginVsReference, EdgePointsMatchInEveryMode) {
    const FormatModel& m = model(GetParam());
    const FormatPlugin& p = plugin(GetParam());
    const std::vector<float> xs = edge_points(m);
    for (const Mode& mode : all_modes()) EXPECT_TRUE(quantize_matches_reference(p, m, xs, mode));
}

TEST_P(PluginVsReference, RandomFloatsMatchInEveryMode) {
    const FormatModel& m = model(GetParam());
    const FormatPlugin& p = plugin(GetParam());
    const std::vector<float> xs = random_points(m, 200000, 0xC0FFEEull + GetParam().size());
    for (const Mode& mode : all_modes(1.0f, 0x1234567890ABCDEFull, 5))
        EXPECT_TRUE(quantize_matches_reference(p, m, xs, mode));
}

// ABI 1.4 random_bits: stochastic rounding with only the top b of the 32
// random bits matches the reference fed those bits (the rest cleared), at the
// edge points and random floats, per tensor and with a scale.
TEST_P(PluginVsReference, FewRandomBitsMatch) {
    const FormatModel& m = model(GetParam());
    const FormatPlugin& p = plugin(GetParam());
    std::vector<float> xs = edge_points(m);
    const std::vector<float> r = random_points(m, 20000, 0xB175ull);
    xs.insert(xs.end(), r.begin(), r.end());
    for (uint32_t b : {1u, 2u, 8u, 31u})
        for (float s : {1.0f, 0.375f})
            for (const Mode& base : all_modes(s, 0xABCull + b, 3))
                if (base.rounding == ALTGRAD_ROUND_STOCHASTIC) {
                    Mode mode = base;
                    mode.random_bits = b;
                    EXPECT_TRUE(quantize_matches_reference(p, m, xs, mode));
                }
}

// Scaled inputs: result = q(fl32(x * s)) / s. The inputs are the edge points
// divided by s (so the scaled values land on and around the ties) and random
// floats.
// For the 16-bit formats every 5th edge point (the unscaled tests take all).
std::vector<float> scaled_inputs(const FormatModel& m, float s) {
    static std::map<std::string, std::vector<float>> edges;
    auto it = edges.find(m.name);
    if (it == edges.end()) it = edges.emplace(m.name, edge_points(m)).first;
    const size_t stride = m.total_bits > 8 ? 5 : 1;
    std::vector<float> xs;
    for (size_t i = 0; i < it->second.size(); i += stride) xs.push_back(it->second[i] / s);
    const std::vector<float> r = random_points(m, 20000, 42);
    for (float x : r) xs.push_back(x / s);
    return xs;
}

TEST_P(PluginVsReference, PowerOfTwoScalesMatch) {
    const FormatModel& m = model(GetParam());
    const FormatPlugin& p = plugin(GetParam());
    for (float s : {std::ldexp(1.0f, -3), std::ldexp(1.0f, 7), std::ldexp(1.0f, -20), std::ldexp(1.0f, 24),
                    std::ldexp(1.0f, 126), std::ldexp(1.0f, -126)}) {
        const std::vector<float> xs = scaled_inputs(m, s);
        for (const Mode& mode : all_modes(s, 99, 0)) EXPECT_TRUE(quantize_matches_reference(p, m, xs, mode));
    }
}

TEST_P(PluginVsReference, GeneralScalesMatch) {
    const FormatModel& m = model(GetParam());
    const FormatPlugin& p = plugin(GetParam());
    for (float s : {0.3f, 3.7f, 1e-3f, 1234.5f, 0.75f}) {
        const std::vector<float> xs = scaled_inputs(m, s);
        for (const Mode& mode : all_modes(s, 7, 3)) EXPECT_TRUE(quantize_matches_reference(p, m, xs, mode));
    }
}

INSTANTIATE_TEST_SUITE_P(AllTabulatedPlugins, PluginVsReference,
                         ::testing::Values("e5m2", "e4m3", "e3m4", "e1m6", "e7m0", "e0m7", "bf16", "fp16",
                                           "fp4_e2m1", "fp6_e2m3", "fp6_e3m2", "ue8m0"),
                         PluginNameGen());

// ---------------------------------------------------------------------------
// A tiny (subnormal) power-of-two scale. The contract allows any finite
// scale > 0, and for s = 2^k the result q(fl32(x*s)) / s is exact; but 1/s
// is not a float once s <= 2^-128.
// ---------------------------------------------------------------------------
TEST(Scaling, SubnormalPowerOfTwoScaleGivesQOfXsOverS) {
    const FormatPlugin& p = plugin("e5m2");
    const float s = std::ldexp(1.0f, -130);
    Mode mode;
    mode.scale = s;
    // 2^116 * 2^-130 = 2^-14 (E5M2's min normal): exactly representable, so
    // the result is 2^116; 0 stays 0; 1.5 * 2^116 -> 1.5 * 2^-14 -> itself.
    const std::vector<float> xs = {std::ldexp(1.0f, 116), 0.0f, 1.5f * std::ldexp(1.0f, 116),
                                   -std::ldexp(1.0f, 120)};
    const QuantizeResult r = p.quantize(xs, mode);
    ASSERT_EQ(r.status, ALTGRAD_STATUS_OK) << r.message;
    EXPECT_TRUE(same_float(r.out[0], std::ldexp(1.0f, 116)))
        << "x = 2^116, s = 2^-130: got " << hexf(r.out[0]);
    EXPECT_TRUE(same_float(r.out[1], 0.0f)) << "x = 0, s = 2^-130: got " << hexf(r.out[1]);
    EXPECT_TRUE(same_float(r.out[2], 1.5f * std::ldexp(1.0f, 116)))
        << "x = 1.5 * 2^116, s = 2^-130: got " << hexf(r.out[2]);
    EXPECT_TRUE(same_float(r.out[3], -std::ldexp(1.0f, 120)))
        << "x = -2^120, s = 2^-130: got " << hexf(r.out[3]);
    EXPECT_TRUE(quantize_matches_reference(p, model("e5m2"), xs, mode));
}

TEST(Scaling, SmallestScaleWithAFloatReciprocalMatches) {
    // s = 2^-127: 1/s = 2^127 is still a float; every format agrees with the reference.
    for (const char* name : {"e5m2", "e4m3", "e0m7", "bf16"}) {
        const FormatModel& m = model(name);
        const std::vector<float> xs = scaled_inputs(m, std::ldexp(1.0f, -127));
        Mode mode;
        mode.scale = std::ldexp(1.0f, -127);
        EXPECT_TRUE(quantize_matches_reference(plugin(name), m, xs, mode));
    }
}

// ---------------------------------------------------------------------------
// fp32: the identity on everything but overflow and NaN.
// ---------------------------------------------------------------------------
TEST(FP32, QuantizeIsTheIdentityOnFiniteFloatsInEveryRoundingMode) {
    const FormatPlugin& p = plugin("fp32");
    std::vector<float> xs;
    std::mt19937 rng(5);
    for (int i = 0; i < 200000; ++i) {
        const float x = bfloat(static_cast<uint32_t>(rng()));
        if (std::isfinite(x)) xs.push_back(x);
    }
    for (float f :
         {0.0f, -0.0f, FLT_MAX, -FLT_MAX, FLT_MIN, -FLT_MIN, std::numeric_limits<float>::denorm_min(),
          -std::numeric_limits<float>::denorm_min(), 1.0f, -1.0f})
        xs.push_back(f);
    for (const Mode& mode : all_modes()) {
        const QuantizeResult r = p.quantize(xs, mode);
        ASSERT_EQ(r.status, ALTGRAD_STATUS_OK) << r.message;
        EXPECT_EQ(r.overflow, 0u) << describe(mode);
        EXPECT_EQ(r.underflow, 0u) << describe(mode);
        for (size_t i = 0; i < xs.size(); ++i)
            ASSERT_EQ(fbits(r.out[i]), fbits(xs[i])) << describe(mode) << " x=" << hexf(xs[i]);
    }
}

TEST(FP32, InfSaturatesToFltMaxOrStaysInfAndNanStaysNan) {
    const FormatPlugin& p = plugin("fp32");
    const float inf = std::numeric_limits<float>::infinity();
    const std::vector<float> xs = {inf, -inf, std::numeric_limits<float>::quiet_NaN()};
    for (const Mode& mode : all_modes()) {
        const QuantizeResult r = p.quantize(xs, mode);
        ASSERT_EQ(r.status, ALTGRAD_STATUS_OK);
        const bool sat = mode.overflow == ALTGRAD_OVERFLOW_SATURATE;
        EXPECT_EQ(r.out[0], sat ? FLT_MAX : inf) << describe(mode);
        EXPECT_EQ(r.out[1], sat ? -FLT_MAX : -inf) << describe(mode);
        EXPECT_TRUE(std::isnan(r.out[2])) << describe(mode);
        EXPECT_EQ(r.overflow, 2u) << describe(mode);
        EXPECT_EQ(r.underflow, 0u) << describe(mode);
    }
}

TEST(FP32, ScaledQuantizeIsFl32OfXsOverS) {
    const FormatPlugin& p = plugin("fp32");
    std::mt19937 rng(8);
    std::vector<float> xs;
    for (int i = 0; i < 50000; ++i) {
        const float x = bfloat(rng() & 0x3FFFFFFFu);  // finite, |x| < 2
        xs.push_back((rng() & 1) ? -x : x);
    }
    for (float s : {0.3f, 8.0f, 3.0e10f}) {
        Mode mode;
        mode.scale = s;
        const QuantizeResult r = p.quantize(xs, mode);
        ASSERT_EQ(r.status, ALTGRAD_STATUS_OK);
        for (size_t i = 0; i < xs.size(); ++i) {
            const float scaled = xs[i] * s;
            ASSERT_TRUE(same_float(r.out[i], scaled / s)) << "x=" << hexf(xs[i]) << " s=" << s;
        }
    }
}

}  // namespace
