// Per-tensor scaling (host/src/quant/scaling.hpp) against scales worked out by
// hand: the largest power of two 2^k <= format_max / (amax * 2^margin), with
// E4M3's max 448 (OCP FP8) as the format's range.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "quant/scaling.hpp"

namespace altgrad::host::quant {
namespace {

constexpr double kE4m3Max = 448;

scaling_config delayed(int history_len = 16, amax_compute compute = amax_compute::max, int margin = 0) {
    scaling_config c;
    c.mode = scaling_mode::delayed;
    c.history_len = history_len;
    c.compute = compute;
    c.margin = margin;
    return c;
}

TEST(Scaling, TheScaleIsTheLargestPowerOfTwoThatFits) {
    scaling_state s(delayed(), kE4m3Max);
    EXPECT_EQ(s.scale_for(3.0), 128.0f);  // 448/3 = 149.3: 2^7
    scaling_state exact(delayed(), kE4m3Max);
    EXPECT_EQ(exact.scale_for(3.5), 128.0f);  // 448/3.5 = 128 exactly: 2^7 itself fits
    scaling_state big(delayed(), kE4m3Max);
    EXPECT_EQ(big.scale_for(1000.0), 0.25f);  // 0.448: 2^-2
    scaling_state margin(delayed(16, amax_compute::max, 1), kE4m3Max);
    EXPECT_EQ(margin.scale_for(3.0), 64.0f);  // 448/6 = 74.7: 2^6
}

TEST(Scaling, DelayedScalingUsesTheHistoryNotTheTensor) {
    scaling_state s(delayed(2), kE4m3Max);
    EXPECT_EQ(s.scale_for(3.0), 128.0f);  // empty history: the tensor's own amax
    s.record(3.0);
    s.record(10.0);
    EXPECT_EQ(s.scale_for(0.001), 32.0f);  // max of {3, 10}: 44.8 -> 2^5, whatever this tensor holds
    s.record(3.0);                         // history_len 2: {10, 3}
    EXPECT_EQ(s.scale_for(0.001), 32.0f);
    s.record(3.0);  // {3, 3}: the 10 has left the window
    EXPECT_EQ(s.scale_for(0.001), 128.0f);
    scaling_state recent(delayed(16, amax_compute::most_recent), kE4m3Max);
    recent.record(10.0);
    recent.record(3.0);
    EXPECT_EQ(recent.scale_for(0.001), 128.0f);
}

// What lets the trainer take a tensor's amax in its quantize pass (quant_plan.cpp): the scale must
// not depend on it. Delayed scaling needs it only while its history is empty; after a non-finite
// amax (not recorded) it still does.
TEST(Scaling, WhichScalingsNeedTheTensorsOwnAmax) {
    scaling_state d(delayed(), kE4m3Max);
    EXPECT_TRUE(d.needs_current_amax());
    d.record(std::nan(""));
    EXPECT_TRUE(d.needs_current_amax());
    d.record(3.0);
    EXPECT_FALSE(d.needs_current_amax());
    EXPECT_EQ(d.scale_for(0.0), 128.0f);  // the history's 3, not the 0 given
    d.reset(kE4m3Max);
    EXPECT_TRUE(d.needs_current_amax());
    scaling_config current, none;
    current.mode = scaling_mode::current;
    none.mode = scaling_mode::none;
    scaling_state c(current, kE4m3Max), n(none, kE4m3Max);
    c.record(3.0);
    EXPECT_TRUE(c.needs_current_amax());
    EXPECT_FALSE(n.needs_current_amax());
}

TEST(Scaling, CurrentAndNone) {
    scaling_config current;
    current.mode = scaling_mode::current;
    scaling_state c(current, kE4m3Max);
    c.record(10.0);  // current scaling keeps no history
    EXPECT_TRUE(c.amax_history().empty());
    EXPECT_EQ(c.scale_for(3.0), 128.0f);
    scaling_config none;
    none.mode = scaling_mode::none;
    scaling_state n(none, kE4m3Max);
    EXPECT_EQ(n.scale_for(3.0), 1.0f);
}

TEST(Scaling, ZeroOrNonFiniteAmaxKeepsThePreviousScale) {
    scaling_state s(delayed(), kE4m3Max);
    EXPECT_EQ(s.scale_for(3.0), 128.0f);
    EXPECT_EQ(s.scale_for(0.0), 128.0f);
    EXPECT_EQ(s.scale_for(NAN), 128.0f);
    EXPECT_EQ(s.scale_for(INFINITY), 128.0f);
    s.record(0.0);
    s.record(NAN);
    EXPECT_TRUE(s.amax_history().empty());
}

TEST(Scaling, TheScaleStaysANormalFloat) {
    scaling_state tiny(delayed(), kE4m3Max);
    EXPECT_EQ(tiny.scale_for(1e-300), std::ldexp(1.0f, 127));
    scaling_state huge(delayed(), kE4m3Max);
    EXPECT_EQ(huge.scale_for(1e300), std::ldexp(1.0f, -126));
}

TEST(Scaling, ResetAndRestore) {
    scaling_state s(delayed(), kE4m3Max);
    s.record(10.0);
    EXPECT_EQ(s.scale_for(1.0), 32.0f);
    EXPECT_EQ(s.scale(), 32.0f);
    ASSERT_EQ(s.amax_history().size(), 1u);
    scaling_state fresh(delayed(), kE4m3Max);
    fresh.restore(s.scale(), {s.amax_history().begin(), s.amax_history().end()});
    EXPECT_EQ(fresh.scale(), 32.0f);
    EXPECT_EQ(fresh.scale_for(0.001), 32.0f);  // the restored history decides
    s.reset(57344);  // switched to E5M2: the old history says nothing about the new range
    EXPECT_TRUE(s.amax_history().empty());
    EXPECT_EQ(s.scale(), 1.0f);
    EXPECT_EQ(s.scale_for(3.0), 16384.0f);  // 57344/3 = 19114.7: 2^14
}

// first_scale one (TransformerEngine's DelayedScaling): scale 1 until the
// history has an amax, which the first use records; then the history decides.
TEST(Scaling, DelayedFirstScaleOneIsTransformerEnginesStart) {
    scaling_config c = delayed();
    c.first = first_scale_kind::one;
    scaling_state s(c, kE4m3Max);
    EXPECT_FALSE(s.needs_current_amax()) << "scale 1 is known before the tensor";
    EXPECT_EQ(s.scale_for(3.0), 1.0f);
    s.record(3.0);
    EXPECT_EQ(s.scale_for(100.0), 128.0f);  // 448 / 3 = 149.3: 2^7, from the history
    s.reset(57344);
    EXPECT_EQ(s.scale_for(3.0), 1.0f) << "a format switch starts again from 1";
    c.first = first_scale_kind::amax;
    scaling_state own(c, kE4m3Max);
    EXPECT_EQ(own.scale_for(3.0), 128.0f) << "the default: the first use's own amax";
    c.mode = scaling_mode::current;
    c.first = first_scale_kind::one;
    scaling_state current(c, kE4m3Max);
    EXPECT_EQ(current.scale_for(3.0), 128.0f) << "current scaling has no history to wait for";
}

// tensor_scale fp32 (TransformerEngine's default): the float32 quotient
// fl(448 / amax), times 2^-margin; beyond float32's range, its largest value.
TEST(Scaling, Float32ScalesAreTheQuotient) {
    scaling_config c = delayed();
    c.values = tensor_scale_kind::fp32;
    scaling_state s(c, kE4m3Max);
    EXPECT_EQ(s.scale_for(3.0), 448.0f / 3.0f);  // 149.333..., rounded once in float32
    EXPECT_NE(448.0f / 3.0f, 128.0f);
    scaling_state exact(c, kE4m3Max);
    EXPECT_EQ(exact.scale_for(3.5), 128.0f);
    c.margin = 2;
    scaling_state margin(c, kE4m3Max);
    EXPECT_EQ(margin.scale_for(3.0), (448.0f / 3.0f) / 4.0f);
    c.margin = 0;
    scaling_state tiny(c, kE4m3Max);
    EXPECT_EQ(tiny.scale_for(1e-40), std::numeric_limits<float>::max());  // 448 / 1e-40 overflows float32
    c.mode = scaling_mode::current;
    scaling_state current(c, 57344.0);
    EXPECT_EQ(current.scale_for(0.1), 57344.0f / 0.1f);  // amax as float32: fl(0.1)
}

}  // namespace
}  // namespace altgrad::host::quant
