// The adapter's fast paths (format_plugin.hpp: the normal-range and finite
// kernels of exmy.hpp, fixed_point.hpp's uniform-grid kernel and
// power_of_two_format's exponent rounding, codebooks.hpp) run only on chunks
// whose inputs all lie in their range. The reference tests put NaN, Inf or
// out-of-range points into most chunks; here every input is in range, so
// every chunk takes a fast path, and the results must still be the
// reference's bit for bit, counts included. Once more under the FPU's
// round-upward mode, where the finite kernels (whose subnormal-range rounding
// is the FPU's round-to-nearest add) must leave the work to the general one.
#include <gtest/gtest.h>

#include <cfenv>
#include <cmath>
#include <string>
#include <vector>

#include "test_common.hpp"

namespace {

using namespace agtest;

// What the fast paths take: e0m7 any |x| < 2 (2^(8-7): larger magnitudes
// saturate the same way in the general kernel), ue8m0 anything but the
// floats in [2^-127, 2^-126) (float32 subnormals between its two smallest
// values), an ExMy format every finite float.
bool in_fast_range(const std::string& name, float x) {
    if (name == "e0m7") return std::fabs(x) < 2.0f;
    if (name == "ue8m0") return !(x >= std::ldexp(1.0f, -127) && x < std::ldexp(1.0f, -126));
    return std::isfinite(x);
}

std::vector<float> fast_range_inputs(const FormatModel& m) {
    std::vector<float> xs;
    for (float x : edge_points(m))
        if (in_fast_range(m.name, x)) xs.push_back(x);
    for (float x : random_points(m, 60000, 0xFA57ull + m.name.size()))
        if (in_fast_range(m.name, x)) xs.push_back(x);
    return xs;
}

class FastPath : public ::testing::TestWithParam<std::string> {};

TEST_P(FastPath, InRangeChunksMatchTheReference) {
    const FormatModel& m = model(GetParam());
    const FormatPlugin& p = plugin(GetParam());
    const std::vector<float> xs = fast_range_inputs(m);
    ASSERT_GT(xs.size(), 4096u);  // several 512-element chunks
    for (const Mode& mode : all_modes()) EXPECT_TRUE(quantize_matches_reference(p, m, xs, mode));
}

TEST_P(FastPath, RoundUpwardFpuModeStillMatchesTheReference) {
    const FormatModel& m = model(GetParam());
    const FormatPlugin& p = plugin(GetParam());
    const std::vector<float> xs = fast_range_inputs(m);
    for (const Mode& mode : all_modes()) {
        ASSERT_EQ(std::fesetround(FE_UPWARD), 0);
        const QuantizeResult got = p.quantize(xs, mode);
        ASSERT_EQ(std::fesetround(FE_TONEAREST), 0);  // the reference computes in the default mode
        ASSERT_EQ(got.status, ALTGRAD_STATUS_OK) << got.message;
        const Expected want = reference_quantize(m, xs, mode);
        size_t bad = 0;
        for (size_t i = 0; i < xs.size(); ++i)
            if (!want.ref[i].ambiguous && !same_float(want.out[i], got.out[i]) && bad++ < 5)
                ADD_FAILURE() << GetParam() << " " << describe(mode) << ": x=" << hexf(xs[i]) << " expected "
                              << hexf(want.out[i]) << " got " << hexf(got.out[i]);
        EXPECT_EQ(bad, 0u) << describe(mode);
        EXPECT_EQ(got.overflow, want.overflow) << describe(mode);
        EXPECT_EQ(got.underflow, want.underflow) << describe(mode);
    }
}

INSTANTIATE_TEST_SUITE_P(AllTabulatedPlugins, FastPath,
                         ::testing::Values("e5m2", "e4m3", "e3m4", "e1m6", "e7m0", "e0m7", "bf16", "fp16",
                                           "fp4_e2m1", "fp6_e2m3", "fp6_e3m2", "ue8m0"),
                         PluginNameGen());

}  // namespace
