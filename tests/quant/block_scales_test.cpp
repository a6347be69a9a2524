// Block scales (host/src/quant/block_scales.hpp): each rule on blocks whose
// expected scales are worked out by hand from the rule's definition (OCP MX
// v1.0 section 6.3; cuDNN/TransformerEngine's round-up; NVIDIA's NVFP4 two
// levels), with the element formats' maxima from their standards:
// E4M3 448 (emax 8), E2M1 6 (emax 2), E0M7 127/128 (emax -1).
#include "quant/block_scales.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "quant/vocabulary.hpp"
#include "util/error.hpp"

namespace altgrad::host::quant {
namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

// The positive values of OCP FP8 E4M3 (bias 7, no Inf, S.1111.111 NaN),
// written from the standard's definition, not from any plugin.
std::vector<float> e4m3_values() {
    std::vector<float> v;
    for (int m = 1; m < 8; ++m) v.push_back(std::ldexp(m / 8.0f, -6));  // subnormals
    for (int e = 1; e <= 15; ++e)
        for (int m = 0; m < 8; ++m)
            if (!(e == 15 && m == 7)) v.push_back(std::ldexp(1.0f + m / 8.0f, e - 7));
    return v;
}

// Scales of single blocks with amax a, one call.
std::vector<float> scales_of(std::vector<float> amax, const block_recipe& r, double tensor_amax = 0,
                             block_scale_stats* stats = nullptr) {
    const block_scale_stats s = scales_from_amaxes(amax.data(), amax.size(), r, tensor_amax);
    if (stats) *stats = s;
    return amax;
}

TEST(BlockScales, AmaxPerBlockWithAShortLastBlockAndNaN) {
    const std::vector<float> x{1, -3, 2, 5, kNaN, 1, -7};
    std::vector<float> amax(3, -1);
    block_amaxes(x.data(), x.size(), 3, amax.data());
    EXPECT_EQ(amax[0], 3.0f);
    EXPECT_TRUE(std::isnan(amax[1]));  // a NaN anywhere in the block, even before a larger value
    EXPECT_EQ(amax[2], 7.0f);          // the short last block
    const std::vector<float> y{kNaN, 9, 0, 0, -kInf, 1};
    block_amaxes(y.data(), y.size(), 2, amax.data());
    EXPECT_TRUE(std::isnan(amax[0]));
    EXPECT_EQ(amax[1], 0.0f);
    EXPECT_EQ(amax[2], kInf);
}

// Blocks of 32 take their own loop: two full blocks and a short one (70 elements), the largest
// magnitude placed at each block's first, last and a middle element, a NaN in the second.
TEST(BlockScales, AmaxOfBlocksOf32WithAShortLastBlock) {
    for (const size_t at : {size_t{0}, size_t{17}, size_t{31}}) {
        SCOPED_TRACE(at);
        std::vector<float> x(70);
        for (size_t i = 0; i < x.size(); ++i) x[i] = (i % 2 ? -1.0f : 1.0f) * static_cast<float>(i % 7);
        x[at] = -100.0f;         // block 0: amax 100
        x[32 + at] = kNaN;       // block 1: NaN
        x[64 + at % 6] = 1e-3f;  // block 2 (6 elements): one made small
        std::vector<float> amax(3, -1);
        block_amaxes(x.data(), x.size(), 32, amax.data());
        EXPECT_EQ(amax[0], 100.0f);
        EXPECT_TRUE(std::isnan(amax[1]));
        // Block 2 holds i = 64..69, |x| = i % 7 = 1..6, one of them replaced by 0.001: 6 unless it was i
        // = 69.
        EXPECT_EQ(amax[2], at % 6 == 5 ? 5.0f : 6.0f);
    }
    const std::vector<float> y(32, -kInf);
    float a = 0;
    block_amaxes(y.data(), y.size(), 32, &a);
    EXPECT_EQ(a, kInf);
}

// Blocks of 32 go 16 at a time through a transposing reduction where the CPU has AVX-512: 53
// whole blocks (three groups of 16 and five left over) and a short one. Block b's largest
// magnitude sits at element (7 b) mod 32, negative in odd blocks; block 5 holds a NaN after it,
// block 20 an Inf, block 33 only zeros of both signs, block 47 a float32 subnormal as its largest.
// Expected: std::fabs of that element, NaN for block 5, written from the definition.
TEST(BlockScales, AmaxOfManyBlocksOf32MatchesTheDefinition) {
    const size_t blocks = 53, n = blocks * 32 + 7;
    std::vector<float> x(n);
    for (size_t i = 0; i < n; ++i)
        x[i] = std::ldexp(static_cast<float>(i % 13 + 1), -8) * (i % 3 ? 1.0f : -1.0f);
    std::vector<float> expected(blocks + 1);
    for (size_t b = 0; b <= blocks; ++b) {
        const size_t at = std::min(n - 1, b * 32 + (7 * b) % 32);
        x[at] = (b % 2 ? -1.0f : 1.0f) * (1.5f + static_cast<float>(b));
        expected[b] = 1.5f + static_cast<float>(b);
    }
    x[5 * 32 + 30] = kNaN;
    x[20 * 32 + 1] = -kInf;
    expected[20] = kInf;
    for (size_t i = 33 * 32; i < 34 * 32; ++i) x[i] = i % 2 ? -0.0f : 0.0f;
    expected[33] = 0.0f;
    for (size_t i = 47 * 32; i < 48 * 32; ++i)
        x[i] = std::ldexp(static_cast<float>(i % 5), -140);  // subnormals
    expected[47] = std::ldexp(4.0f, -140);
    std::vector<float> amax(blocks + 1, -1.0f);
    block_amaxes(x.data(), n, 32, amax.data());
    for (size_t b = 0; b <= blocks; ++b) {
        if (b == 5) {
            EXPECT_TRUE(std::isnan(amax[b]));
            continue;
        }
        EXPECT_EQ(amax[b], expected[b]) << "block " << b;
        EXPECT_FALSE(std::signbit(amax[b])) << "block " << b;
    }
}

TEST(BlockScales, PowerOfTwoGridRoundsEachWay) {
    const scale_grid g = scale_grid::power_of_two();
    EXPECT_EQ(g.up(3), 4.0f);
    EXPECT_EQ(g.down(3), 2.0f);
    EXPECT_EQ(g.up(4), 4.0f);
    EXPECT_EQ(g.down(4), 4.0f);
    EXPECT_EQ(g.nearest(3), 4.0f);  // the midpoint: a tie goes up
    EXPECT_EQ(g.nearest(2.99), 2.0f);
    EXPECT_EQ(g.smallest(), std::ldexp(1.0f, -126));
    EXPECT_EQ(g.largest(), std::ldexp(1.0f, 126));
    EXPECT_EQ(g.up(1e300), std::ldexp(1.0f, 126));  // clamped
}

TEST(BlockScales, Fp32GridRoundsToNeighbouringFloats) {
    const scale_grid g = scale_grid::fp32();
    const double third = 1.0 / 3.0;
    const float up = g.up(third), down = g.down(third);
    EXPECT_GE(static_cast<double>(up), third);
    EXPECT_LE(static_cast<double>(down), third);
    EXPECT_EQ(std::nextafter(down, 1.0f), up);  // adjacent floats around 1/3
    EXPECT_EQ(g.up(0.5), 0.5f);
}

TEST(BlockScales, ValueGridIgnoresZeroNegativesAndNaN) {
    const scale_grid g = scale_grid::of_values("odd", {0.0f, -1.0f, kNaN, kInf, 3.0f, 0.25f, 3.0f, 12.0f});
    EXPECT_EQ(g.smallest(), 0.25f);
    EXPECT_EQ(g.largest(), 12.0f);
    EXPECT_EQ(g.up(0.3), 3.0f);
    EXPECT_EQ(g.down(11.9), 3.0f);
    EXPECT_EQ(g.nearest(7.5), 12.0f);  // |7.5 - 3| = 4.5 = |12 - 7.5|: a tie goes up
    EXPECT_THROW(scale_grid::of_values("none", {0.0f, -2.0f, kNaN}), error);
}

// up/down/nearest of a value grid against a scan of every value, at the values themselves, the
// doubles and floats right beside them, midpoints (nearest's ties) and random points across and
// beyond the grid: E4M3's grid, a dense grid with many values to a bucket (every float with 10
// mantissa bits over two binades), and a sparse one with values far apart and in subnormals.
TEST(BlockScales, ValueGridRoundsAsAScanOfItsValuesDoes) {
    std::vector<float> dense;
    for (int i = 0; i < 1 << 11; ++i) dense.push_back(std::ldexp(1.0f + (i & 0x3FF) / 1024.0f, i >> 10));
    const std::vector<float> sparse = {
        std::ldexp(1.0f, -140), 3e-41f, 1e-20f, 0.75f, 1.0f, 1.0625f, 1e20f, 3e38f};
    std::mt19937_64 random(7);
    for (const std::vector<float>& values : {e4m3_values(), dense, sparse}) {
        const scale_grid g = scale_grid::of_values("grid", values);
        std::vector<double> points;
        for (size_t i = 0; i < values.size(); ++i) {
            const double v = values[i];
            points.insert(points.end(), {v, std::nextafter(v, 0.0), std::nextafter(v, 1e300),
                                         std::nextafter(values[i], 0.0f), std::nextafter(values[i], kInf)});
            if (i + 1 < values.size()) points.push_back((v + values[i + 1]) / 2);
        }
        for (int i = 0; i < 20000; ++i)
            points.push_back(std::ldexp(std::uniform_real_distribution<double>(1, 2)(random),
                                        std::uniform_int_distribution<int>(-150, 130)(random)));
        for (const double x : points) {
            float below = g.smallest(), above = g.largest();  // the scan: clamped into the grid
            for (const float v : values) {
                if (v <= x) below = std::max(below, v);
                if (v >= x) above = std::min(above, v);
            }
            if (x >= g.largest()) below = g.largest();
            if (x <= g.smallest()) above = g.smallest();
            ASSERT_EQ(g.down(x), below) << "down(" << x << ")";
            ASSERT_EQ(g.up(x), above) << "up(" << x << ")";
            ASSERT_EQ(g.nearest(x), x - below < above - x ? below : above) << "nearest(" << x << ")";
        }
    }
}

TEST(BlockScales, MxFloorAroundAPowerOfTwo) {
    const scale_grid g = scale_grid::power_of_two();
    block_recipe r{scale_rule::mx_floor, &g, 448.0};  // E4M3 elements, emax 8
    // amax 255.9: floor(log2) = 7, X = 2^(7-8) = 1/2, s = 2 (so 511.8 saturates: the rule may clip).
    // amax 256 and 257: floor(log2) = 8, X = 1, s = 1.
    const std::vector<float> s = scales_of({255.9f, 256.0f, 257.0f, 448.0f, 0.75f}, r);
    EXPECT_EQ(s[0], 2.0f);
    EXPECT_EQ(s[1], 1.0f);
    EXPECT_EQ(s[2], 1.0f);
    EXPECT_EQ(s[3], 1.0f);
    EXPECT_EQ(s[4], 512.0f);                          // floor(log2 0.75) = -1: X = 2^-9
    block_recipe fp4{scale_rule::mx_floor, &g, 6.0};  // E2M1, emax 2
    const std::vector<float> t = scales_of({3.99f, 4.0f}, fp4);
    EXPECT_EQ(t[0], 2.0f);  // X = 2^(1-2)
    EXPECT_EQ(t[1], 1.0f);  // X = 2^(2-2)
}

TEST(BlockScales, MxFloorClampsToUe8m0sRangeAndCountsIt) {
    // E8M0: 2^-127 .. 2^127.
    std::vector<float> e8m0;
    for (int e = -127; e <= 127; ++e) e8m0.push_back(std::ldexp(1.0f, e));
    const scale_grid g = scale_grid::of_values("ue8m0", e8m0);
    block_recipe r{scale_rule::mx_floor, &g, 127.0 / 128.0};  // E0M7 elements: emax -1
    block_scale_stats st;
    // 3e38: floor(log2) = 127, X = 2^(127+1) = 2^128: above E8M0's 2^127, saturated.
    const std::vector<float> s = scales_of({3e38f, 1.0f, 0.0f, kInf, kNaN}, r, 0, &st);
    EXPECT_EQ(s[0], std::ldexp(1.0f, -127));
    EXPECT_EQ(s[1], 0.5f);  // floor(log2 1) = 0: X = 2^1
    EXPECT_EQ(s[2], 1.0f);  // a block of zeros: neutral
    EXPECT_EQ(s[3], 1.0f);  // an Inf inside: neutral, the element format's overflow mode decides
    EXPECT_EQ(s[4], 1.0f);
    EXPECT_EQ(st.blocks, 5u);
    EXPECT_EQ(st.saturated, 1u);
    EXPECT_EQ(st.underflowed, 0u);
    EXPECT_EQ(st.neutral, 3u);
    EXPECT_EQ(st.smallest_scale, 2.0);
    EXPECT_EQ(st.largest_scale, std::ldexp(1.0, 127));
    // 1e-40 under E4M3 elements: floor(log2) = -133, X = 2^-141: under 2^-127, underflowed.
    block_recipe e4m3{scale_rule::mx_floor, &g, 448.0};
    const std::vector<float> u = scales_of({1e-40f}, e4m3, 0, &st);
    EXPECT_EQ(u[0], std::ldexp(1.0f, 127));
    EXPECT_EQ(st.underflowed, 1u);
}

// E8M0's grid (every power of two 2^-127 .. 2^127) under mx_floor takes the
// exponent-arithmetic path; over amaxes across the whole float range
// (subnormal, normal, the largest finite, and either side of every power of
// two) each scale must be 2^-clamp(e - emax, -127, 127) with e = floor(log2 a)
// from frexp, the counts and the scale range as the rule defines them.
TEST(BlockScales, MxFloorOnE8m0MatchesTheRuleAcrossTheFloatRange) {
    std::vector<float> e8m0;
    for (int e = -127; e <= 127; ++e) e8m0.push_back(std::ldexp(1.0f, e));
    const scale_grid g = scale_grid::of_values("ue8m0", e8m0);
    ASSERT_TRUE(g.powers_of_two());
    std::vector<float> amax{std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max(),
                            std::nextafter(std::numeric_limits<float>::min(), 0.0f)};
    for (int e = -149; e <= 127; ++e) {
        const float p = std::ldexp(1.0f, e);
        amax.insert(amax.end(), {p, std::nextafter(p, 0.0f), std::nextafter(p, kInf), p * 1.75f});
    }
    for (const double element_max : {448.0, 6.0, 57344.0, 127.0 / 128.0}) {
        SCOPED_TRACE(element_max);
        int emax = 0;
        std::frexp(element_max, &emax);
        emax -= 1;  // floor(log2 M)
        block_scale_stats st;
        const std::vector<float> s = scales_of(amax, {scale_rule::mx_floor, &g, element_max}, 0, &st);
        uint64_t saturated = 0, underflowed = 0, neutral = 0;
        int smallest = 1000, largest = -1000;
        for (size_t i = 0; i < amax.size(); ++i) {
            if (!(amax[i] > 0) || std::isinf(amax[i])) {
                EXPECT_EQ(s[i], 1.0f) << amax[i];
                ++neutral;
                continue;
            }
            int e = 0;
            std::frexp(amax[i], &e);
            int k = e - 1 - emax;
            if (k > 127) k = 127, ++saturated;
            if (k < -127) k = -127, ++underflowed;
            smallest = std::min(smallest, k);
            largest = std::max(largest, k);
            EXPECT_EQ(s[i], std::ldexp(1.0f, -k)) << amax[i];
        }
        EXPECT_EQ(st.blocks, amax.size());
        EXPECT_EQ(st.saturated, saturated);
        EXPECT_EQ(st.underflowed, underflowed);
        EXPECT_EQ(st.neutral, neutral);
        EXPECT_EQ(st.smallest_scale, std::ldexp(1.0, smallest));
        EXPECT_EQ(st.largest_scale, std::ldexp(1.0, largest));
    }
}

// Powers of two with a gap are not E8M0's grid: rounding must keep to the listed values.
TEST(BlockScales, PowersOfTwoWithAGapStayAValueGrid) {
    const scale_grid g = scale_grid::of_values("gappy", {1.0f, 2.0f, 8.0f});
    EXPECT_FALSE(g.powers_of_two());
    EXPECT_EQ(g.down(5), 2.0f);
    EXPECT_EQ(g.up(3), 8.0f);
    block_recipe r{scale_rule::mx_floor, &g, 1.0};  // emax 0: X = 2^floor(log2 a), down to the grid
    EXPECT_EQ(scales_of({5.0f}, r)[0], 0.5f);       // X = 4 -> 2
}

TEST(BlockScales, RoundUpNeverClips) {
    const scale_grid g = scale_grid::power_of_two();
    block_recipe r{scale_rule::round_up, &g, 448.0};
    // 448 / 448 = 1: s = 1. 448.5 / 448 just above 1: X = 2, s = 1/2. 224 / 448 = 1/2: s = 2.
    // 223.9 / 448 just below 1/2: X = 1/2, s = 2.
    const std::vector<float> s = scales_of({448.0f, 448.5f, 224.0f, 223.9f}, r);
    EXPECT_EQ(s[0], 1.0f);
    EXPECT_EQ(s[1], 0.5f);
    EXPECT_EQ(s[2], 2.0f);
    EXPECT_EQ(s[3], 2.0f);
    // float32 scales: X = a / 6, rounded up; s keeps fl(a * s) <= 6 however 1/X rounds.
    const scale_grid f = scale_grid::fp32();
    block_recipe fp4{scale_rule::round_up, &f, 6.0};
    const std::vector<float> amax{3.0f, 1.0f, 0.1f, 5.0f, 7.0f};
    const std::vector<float> t = scales_of(amax, fp4);
    EXPECT_EQ(t[0], 2.0f);  // X = 1/2 exactly
    for (size_t i = 0; i < amax.size(); ++i) {
        EXPECT_LE(amax[i] * t[i], 6.0f) << amax[i];
        EXPECT_GT(amax[i] * std::nextafter(t[i], 1e30f), 5.999f)
            << amax[i];  // and the largest such s, to float rounding
    }
}

// The rule issue #45 added as CONTRIBUTING.md says (its table entry, its code, this test):
// X = a / M to the nearest scale value, ties up.
TEST(BlockScales, NearestTakesAOverMToTheNearestScale) {
    const scale_grid g = scale_grid::power_of_two();
    block_recipe fp4{scale_rule::nearest, &g, 6.0};  // E2M1 elements, M = 6
    // a / M = 1.4: between 1 and 2, below the midpoint 1.5: X = 1 (so a = 8.4 clips to 6).
    // a / M = 1.5 exactly (a = 9): the tie goes up, X = 2. 1.6: X = 2. 0.7: X = 1/2 (0.75 the midpoint).
    // 0.76: X = 1. 3: X = 2 (the midpoint of 2 and 4 is 3: a tie, up to 4).
    block_scale_stats stats;
    const std::vector<float> s = scales_of({8.4f, 9.0f, 9.6f, 4.2f, 4.56f, 17.9f, 18.0f}, fp4, 0, &stats);
    EXPECT_EQ(s, (std::vector<float>{1.0f, 0.5f, 0.5f, 2.0f, 1.0f, 0.5f, 0.25f}));
    EXPECT_EQ(stats.saturated, 0u);
    // On E4M3's values (NVFP4's scale format) the nearest E4M3 value: a / M = 0.53 lies between
    // 0.5 and 0.5625 (midpoint 0.53125): X = 0.5, s = 2; 0.54 rounds to 0.5625.
    const scale_grid e4m3 = scale_grid::of_values("e4m3", e4m3_values());
    block_recipe on_e4m3{scale_rule::nearest, &e4m3, 6.0};
    const std::vector<float> t = scales_of({0.53f * 6, 0.54f * 6}, on_e4m3);
    EXPECT_EQ(t[0], 2.0f);
    EXPECT_EQ(t[1], 1.0f / 0.5625f);
    // The table says what the rule is, for the config, the CLI and Python.
    EXPECT_EQ(std::string(info_of(scale_rule::nearest).name), "nearest");
    EXPECT_TRUE(info_of(scale_rule::nearest).may_clip);
    EXPECT_FALSE(info_of(scale_rule::nearest).needs_tensor_amax);
}

// Every rule of the enum has one table entry, named once.
TEST(BlockScales, EveryScaleRuleHasItsTableEntry) {
    std::vector<std::string> names;
    for (const scale_rule r :
         {scale_rule::mx_floor, scale_rule::round_up, scale_rule::two_level, scale_rule::nearest}) {
        EXPECT_EQ(info_of(r).rule, r);
        names.push_back(info_of(r).name);
        EXPECT_EQ(scale_rule_names().value(names.back()), r);
    }
    EXPECT_EQ(scale_rules().size(), names.size());
    EXPECT_EQ(scale_rule_choices(), "mx_floor | round_up | two_level | nearest");
}

TEST(BlockScales, Nvfp4TwoLevels) {
    const scale_grid g = scale_grid::of_values("e4m3", e4m3_values());
    ASSERT_EQ(g.largest(), 448.0f);
    ASSERT_EQ(g.smallest(), std::ldexp(1.0f, -9));
    block_recipe r{scale_rule::two_level, &g, 6.0};  // E2M1 elements under E4M3 block scales
    // TransformerEngine's float32 steps (core_nvfp4.cuh): g = fl(2688 / A); X_b = e4m3(a * fl(g *
    // fl(1/6))); s = fl(1 / fl(X_b * fl(1/g))). The values below are those steps in NumPy float32.
    // Tensor amax 12: g = 224; g * fl(1/6) = 37.333336.
    //  a = 12: a * 37.333336 = 448.00003, which rounds to E4M3's 448 (not saturated: below 448 + 16);
    //          s = 1 / fl(448 * fl(1/224)) = 0.5: 12 -> 6 exactly.
    //  a = 1:  37.333336, nearest E4M3 (32..64 in steps of 4) is 36; s = 1 / fl(36 * fl(1/224)) =
    //          6.2222219, one ulp below 224 / 36 (the order matters).
    //  a = 3:  112.00001 -> 112, s = 2.
    //  a = 1e-6: X_b = 3.7e-5, below E4M3's 2^-9: underflowed, X_b = 2^-9, s = 114687.99 (not 224 * 512).
    block_scale_stats st;
    const std::vector<float> s = scales_of({12.0f, 1.0f, 3.0f, 1e-6f, 0.0f}, r, 12.0, &st);
    EXPECT_EQ(s[0], 0.5f);
    EXPECT_EQ(s[1], 6.222221851348877f);
    EXPECT_NE(s[1], 224.0f / 36.0f);
    EXPECT_EQ(s[2], 2.0f);
    EXPECT_EQ(s[3], 114687.9921875f);
    EXPECT_EQ(s[4], 1.0f);
    EXPECT_EQ(st.underflowed, 1u);
    EXPECT_EQ(st.saturated, 0u);
    EXPECT_EQ(st.neutral, 1u);
    // The decode scales' range, 1/s of the blocks that are not neutral: 1/0.5 and 1/114687.99.
    EXPECT_EQ(st.largest_scale, 2.0);
    EXPECT_EQ(st.smallest_scale, 1.0 / 114687.9921875);
    // A block amax beyond the tensor's (only as a given amax): X_b = 746.7, past 448 + 16: saturated.
    block_scale_stats over;
    EXPECT_EQ(scales_of({20.0f}, r, 12.0, &over)[0], 0.5f);
    EXPECT_EQ(over.saturated, 1u);
    // No tensor amax (0 or NaN): g = 1, X_b = a / 6 to E4M3.
    const std::vector<float> u = scales_of({12.0f}, r, kNaN);
    EXPECT_EQ(u[0], 0.5f);  // X_b = 2
}

// The fused passes: pieces cover [0, n) once, in order, at most kFusedPiece long (whole blocks
// for the block one), and each piece's amax is taken before its call, so writing the piece in
// place (here: zeroing it) changes nothing. The largest magnitude sits in the last, short
// piece, negative; then a NaN in the first piece must win.
TEST(BlockScales, QuantizeTakingAmaxSeesEveryPieceBeforeItsCall) {
    const size_t n = 2 * kFusedPiece + 1000;
    std::vector<float> x(n, 0.5f);
    x[n - 3] = -40.0f;
    std::vector<std::pair<size_t, size_t>> pieces;
    const float amax = quantize_taking_amax(x.data(), n, [&](size_t first, size_t count) {
        pieces.emplace_back(first, count);
        std::fill(x.begin() + static_cast<std::ptrdiff_t>(first),
                  x.begin() + static_cast<std::ptrdiff_t>(first + count), 0.0f);
    });
    EXPECT_EQ(amax, 40.0f);
    const std::vector<std::pair<size_t, size_t>> expected{
        {0, kFusedPiece}, {kFusedPiece, kFusedPiece}, {2 * kFusedPiece, 1000}};
    EXPECT_EQ(pieces, expected);
    std::vector<float> y(n, 1.0f);
    y[5] = kNaN;
    y[n - 1] = kInf;
    EXPECT_TRUE(std::isnan(quantize_taking_amax(y.data(), n, [](size_t, size_t) {})));
    EXPECT_EQ(
        quantize_taking_amax(y.data(), 0, [](size_t, size_t) { ADD_FAILURE() << "a call for nothing"; }),
        0.0f);
}

// Blocks of 32 over 1.5 pieces plus a short block. Block b holds 0.75 * 2^(b mod 9 - 4) (its amax,
// placed at element b mod 32), except block 3 (a NaN) and block 4 (zeros). OCP MX's rule for E4M3
// (emax 8) on a power-of-two grid: X = 2^(floor(log2 a) - 8) = 2^(b mod 9 - 5 - 8), s = 1/X.
TEST(BlockScales, QuantizeWithBlockScalesDerivesEachPiecesScalesBeforeItsCall) {
    const scale_grid g = scale_grid::power_of_two();
    const block_recipe r{scale_rule::mx_floor, &g, 448.0};
    const size_t n = kFusedPiece + kFusedPiece / 2 + 7, blocks = (n + 31) / 32;
    std::vector<float> x(n, 0.0f);
    for (size_t b = 0; b < blocks; ++b) {
        const size_t at = std::min(n - 1, b * 32 + b % 32);
        if (b == 4) continue;
        x[at] = b == 3 ? kNaN : -0.75f * std::ldexp(1.0f, static_cast<int>(b % 9) - 4);
    }
    std::vector<float> scales(blocks, -1.0f);
    std::vector<size_t> firsts;
    size_t covered = 0;
    const block_scale_stats st = quantize_with_block_scales(
        x.data(), n, 32, r, scales.data(), [&](size_t first, size_t count, const float* s) {
            EXPECT_EQ(first, covered);
            EXPECT_EQ(s, scales.data() + first / 32);  // this piece's scales, already derived
            EXPECT_EQ(*s, first / 32 == 3 || first / 32 == 4
                              ? 1.0f
                              : std::ldexp(1.0f, 13 - static_cast<int>(first / 32 % 9)));
            EXPECT_TRUE(first + count == n || count % 32 == 0) << count;
            EXPECT_LE(count, kFusedPiece);
            firsts.push_back(first);
            covered += count;
        });
    EXPECT_EQ(covered, n);
    EXPECT_EQ(firsts.size(), 2u);
    for (size_t b = 0; b < blocks; ++b) {
        const float expected = b == 3 || b == 4 ? 1.0f : std::ldexp(1.0f, 13 - static_cast<int>(b % 9));
        ASSERT_EQ(scales[b], expected) << "block " << b;
    }
    EXPECT_EQ(st.blocks, blocks);
    EXPECT_EQ(st.neutral, 2u);  // the NaN block and the zero block
    EXPECT_TRUE(std::isnan(st.amax));
    EXPECT_EQ(st.smallest_scale, std::ldexp(1.0, -13));  // b mod 9 == 0
    EXPECT_EQ(st.largest_scale, std::ldexp(1.0, -5));    // b mod 9 == 8
    x[3 * 32 + 3] = 1.0f;                                // without the NaN: the largest amax, 0.75 * 2^4
    EXPECT_EQ(
        quantize_with_block_scales(x.data(), n, 32, r, scales.data(), [](size_t, size_t, const float*) {})
            .amax,
        12.0);
}

}  // namespace
}  // namespace altgrad::host::quant
