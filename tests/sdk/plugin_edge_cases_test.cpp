// Named edge cases of each bundled format, with the expected values worked
// out by hand from the format definitions and the rules of format.h (round
// first, then decide overflow; ties to the even code).
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <string>

#include "test_common.hpp"

namespace {

using namespace agtest;

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Q {
    float value;
    uint64_t overflow;
    uint64_t underflow;
};

Q q(const char* name, float x, altgrad_rounding r = ALTGRAD_ROUND_NEAREST_EVEN,
    altgrad_overflow o = ALTGRAD_OVERFLOW_SATURATE) {
    Mode m;
    m.rounding = r;
    m.overflow = o;
    Q out{};
    out.value = plugin(name).quantize_one(x, m, &out.overflow, &out.underflow);
    return out;
}

constexpr altgrad_rounding RNE = ALTGRAD_ROUND_NEAREST_EVEN;
constexpr altgrad_rounding RTZ = ALTGRAD_ROUND_TOWARD_ZERO;
constexpr altgrad_overflow SAT = ALTGRAD_OVERFLOW_SATURATE;
constexpr altgrad_overflow NONFINITE = ALTGRAD_OVERFLOW_NONFINITE;

float up(float x) { return std::nextafter(x, kInf); }
float down(float x) { return std::nextafter(x, -kInf); }
float p2(int e) { return std::ldexp(1.0f, e); }

#define EXPECT_Q(call, want_value, want_overflow, want_underflow)                          \
    do {                                                                                   \
        const Q got_ = (call);                                                             \
        EXPECT_TRUE(same_float(got_.value, (want_value)))                                  \
            << #call << ": got " << hexf(got_.value) << ", expected " << hexf(want_value); \
        EXPECT_EQ(got_.overflow, (want_overflow)) << #call << ": overflow_count";          \
        EXPECT_EQ(got_.underflow, (want_underflow)) << #call << ": underflow_count";       \
    } while (0)

// ---------------------------------------------------------------- E5M2
TEST(E5M2, TieAboveMaxOverflowsBecauseMaxCodeIsOdd) {
    // max 57344 = 0x7B (odd); the tie with 65536 is 61440 and goes to the even side.
    EXPECT_Q(q("e5m2", 61440.0f, RNE, SAT), 57344.0f, 1u, 0u);
    EXPECT_Q(q("e5m2", 61440.0f, RNE, NONFINITE), kInf, 1u, 0u);
    EXPECT_Q(q("e5m2", -61440.0f, RNE, NONFINITE), -kInf, 1u, 0u);
}

TEST(E5M2, JustBelowTheTieAboveMaxRoundsToMax) {
    EXPECT_Q(q("e5m2", down(61440.0f), RNE, NONFINITE), 57344.0f, 0u, 0u);
    EXPECT_Q(q("e5m2", -down(61440.0f), RNE, NONFINITE), -57344.0f, 0u, 0u);
}

TEST(E5M2, TowardZeroNeverTurnsAFiniteInputIntoInf) {
    EXPECT_Q(q("e5m2", 1.0e6f, RTZ, NONFINITE), 57344.0f, 1u, 0u);
    EXPECT_Q(q("e5m2", FLT_MAX, RTZ, NONFINITE), 57344.0f, 1u, 0u);
    EXPECT_Q(q("e5m2", down(65536.0f), RTZ, NONFINITE), 57344.0f, 0u, 0u);
    EXPECT_Q(q("e5m2", kInf, RTZ, NONFINITE), kInf, 1u, 0u);
    EXPECT_Q(q("e5m2", -kInf, RTZ, SAT), -57344.0f, 1u, 0u);
}

TEST(E5M2, SubnormalBoundary) {
    // min subnormal 2^-16 (code 0x01, odd): 2^-17 ties to zero, 3*2^-17 to 2^-15 (code 0x02).
    EXPECT_Q(q("e5m2", p2(-17)), 0.0f, 0u, 1u);
    EXPECT_Q(q("e5m2", -p2(-17)), -0.0f, 0u, 1u);
    EXPECT_Q(q("e5m2", up(p2(-17))), p2(-16), 0u, 0u);
    EXPECT_Q(q("e5m2", 3 * p2(-17)), p2(-15), 0u, 0u);
    EXPECT_Q(q("e5m2", p2(-14)), p2(-14), 0u, 0u);
    EXPECT_Q(q("e5m2", down(p2(-14))), p2(-14), 0u, 0u);
    EXPECT_Q(q("e5m2", down(p2(-14)), RTZ), 0.75f * p2(-14), 0u, 0u);
}

TEST(E5M2, NanAndSignedZeros) {
    EXPECT_TRUE(std::isnan(q("e5m2", kNaN).value));
    EXPECT_Q(q("e5m2", kNaN), kNaN, 0u, 0u);
    EXPECT_Q(q("e5m2", -0.0f), -0.0f, 0u, 0u);
    EXPECT_Q(q("e5m2", 0.0f), 0.0f, 0u, 0u);
}

// ---------------------------------------------------------------- E4M3
TEST(E4M3, TieAboveMaxRoundsDownToMax) {
    // max 448 = S.1111.110 (even); 464 is halfway to the would-be 480.
    EXPECT_Q(q("e4m3", 464.0f, RNE, SAT), 448.0f, 0u, 0u);
    EXPECT_Q(q("e4m3", 464.0f, RNE, NONFINITE), 448.0f, 0u, 0u);
    EXPECT_Q(q("e4m3", -464.0f, RNE, NONFINITE), -448.0f, 0u, 0u);
}

TEST(E4M3, JustAboveTheTieAboveMaxOverflowsToNanOrMax) {
    EXPECT_Q(q("e4m3", up(464.0f), RNE, SAT), 448.0f, 1u, 0u);
    EXPECT_Q(q("e4m3", up(464.0f), RNE, NONFINITE), kNaN, 1u, 0u);
    EXPECT_Q(q("e4m3", 480.0f, RNE, NONFINITE), kNaN, 1u, 0u);
    EXPECT_Q(q("e4m3", -480.0f, RNE, SAT), -448.0f, 1u, 0u);
}

TEST(E4M3, InfSaturatesOrBecomesNanBecauseThereIsNoInf) {
    EXPECT_Q(q("e4m3", kInf, RNE, SAT), 448.0f, 1u, 0u);
    EXPECT_Q(q("e4m3", -kInf, RNE, SAT), -448.0f, 1u, 0u);
    EXPECT_Q(q("e4m3", kInf, RNE, NONFINITE), kNaN, 1u, 0u);
    EXPECT_Q(q("e4m3", -kInf, RTZ, NONFINITE), kNaN, 1u, 0u);
    EXPECT_Q(q("e4m3", 1000.0f, RTZ, NONFINITE), 448.0f, 1u, 0u);
    EXPECT_Q(q("e4m3", 479.0f, RTZ, NONFINITE), 448.0f, 0u, 0u);
}

TEST(E4M3, SubnormalsAndNegativeZero) {
    EXPECT_Q(q("e4m3", p2(-9)), p2(-9), 0u, 0u);
    EXPECT_Q(q("e4m3", p2(-10)), 0.0f, 0u, 1u);
    EXPECT_Q(q("e4m3", -p2(-11)), -0.0f, 0u, 1u);
    EXPECT_Q(q("e4m3", 3 * p2(-10)), 2 * p2(-9), 0u, 0u);
    EXPECT_Q(q("e4m3", 5 * p2(-10)), 2 * p2(-9), 0u, 0u);
    EXPECT_Q(q("e4m3", 7 * p2(-10)), 4 * p2(-9), 0u, 0u);
    EXPECT_Q(q("e4m3", 15 * p2(-10)), p2(-6), 0u, 0u);  // 7.5 * 2^-9 ties up to the min normal (code 8)
}

// ---------------------------------------------------------------- E3M4
TEST(E3M4, TieAboveMaxOverflowsBecauseMaxCodeIsOdd) {
    EXPECT_Q(q("e3m4", 15.75f, RNE, SAT), 15.5f, 1u, 0u);
    EXPECT_Q(q("e3m4", 15.75f, RNE, NONFINITE), kInf, 1u, 0u);
    EXPECT_Q(q("e3m4", down(15.75f), RNE, NONFINITE), 15.5f, 0u, 0u);
    EXPECT_Q(q("e3m4", 15.9f, RTZ, NONFINITE), 15.5f, 0u, 0u);
    EXPECT_Q(q("e3m4", 16.0f, RTZ, NONFINITE), 15.5f, 1u, 0u);
}

TEST(E3M4, SubnormalBoundary) {
    EXPECT_Q(q("e3m4", p2(-6)), p2(-6), 0u, 0u);
    EXPECT_Q(q("e3m4", p2(-7)), 0.0f, 0u, 1u);
    EXPECT_Q(q("e3m4", up(p2(-7))), p2(-6), 0u, 0u);
    EXPECT_Q(q("e3m4", 0.25f), 0.25f, 0u, 0u);
    EXPECT_Q(q("e3m4", down(0.25f)), 0.25f, 0u, 0u);
    EXPECT_Q(q("e3m4", 31 * p2(-7)), 0.25f, 0u, 0u);  // 15.5 * 2^-6: tie between 15 and 16 * 2^-6
}

// ---------------------------------------------------------------- E1M6
TEST(E1M6, TieAboveMaxRoundsDownToMax) {
    // max 126/64 = 0x7E (even); the grid's next value would be 127/64 (the
    // Inf code 0x7F), so the tie just above max is 126.5/64 = 253/128.
    EXPECT_Q(q("e1m6", 253.0f / 128, RNE, NONFINITE), 126.0f / 64, 0u, 0u);
    EXPECT_Q(q("e1m6", -253.0f / 128, RNE, NONFINITE), -126.0f / 64, 0u, 0u);
    EXPECT_Q(q("e1m6", up(253.0f / 128), RNE, NONFINITE), kInf, 1u, 0u);
    EXPECT_Q(q("e1m6", up(253.0f / 128), RNE, SAT), 126.0f / 64, 1u, 0u);
    EXPECT_Q(q("e1m6", -up(253.0f / 128), RNE, NONFINITE), -kInf, 1u, 0u);
    EXPECT_Q(q("e1m6", 127.0f / 64, RNE, NONFINITE), kInf, 1u, 0u);
    EXPECT_Q(q("e1m6", down(127.0f / 64), RTZ, NONFINITE), 126.0f / 64, 0u, 0u);
    EXPECT_Q(q("e1m6", 127.0f / 64, RTZ, NONFINITE), 126.0f / 64, 1u, 0u);
}

TEST(E1M6, UniformGridTiesGoToEvenK) {
    EXPECT_Q(q("e1m6", 1.0f / 128), 0.0f, 0u, 1u);       // between 0 and 1/64
    EXPECT_Q(q("e1m6", 3.0f / 128), 2.0f / 64, 0u, 0u);  // between 1/64 and 2/64
    EXPECT_Q(q("e1m6", 129.0f / 128), 1.0f, 0u, 0u);     // between 64/64 and 65/64
    EXPECT_Q(q("e1m6", 131.0f / 128), 66.0f / 64, 0u, 0u);
}

TEST(E1M6, OneZeroOnly) {
    EXPECT_Q(q("e1m6", -1.0f / 256), 0.0f, 0u, 1u);  // +0, not -0
    EXPECT_Q(q("e1m6", -0.0f), 0.0f, 0u, 0u);
    EXPECT_Q(q("e1m6", -1.0f / 256, RTZ), 0.0f, 0u, 1u);
}

// ---------------------------------------------------------------- E7M0
TEST(E7M0, TiesBetweenPowersOfTwoGoToTheEvenCode) {
    // 2^k has code k + 64: 1 = 64 (even), 2 = 65, 4 = 66, 0.5 = 63.
    EXPECT_Q(q("e7m0", 1.5f), 1.0f, 0u, 0u);
    EXPECT_Q(q("e7m0", 3.0f), 4.0f, 0u, 0u);
    EXPECT_Q(q("e7m0", 0.75f), 1.0f, 0u, 0u);
    EXPECT_Q(q("e7m0", 6.0f), 4.0f, 0u, 0u);
    EXPECT_Q(q("e7m0", -6.0f), -4.0f, 0u, 0u);
}

TEST(E7M0, NearestIsByValueNotByLogarithm) {
    // 1.42 is above the geometric mean sqrt(2) of 1 and 2 but below the midpoint 1.5.
    EXPECT_Q(q("e7m0", 1.42f), 1.0f, 0u, 0u);
    EXPECT_Q(q("e7m0", up(1.5f)), 2.0f, 0u, 0u);
    EXPECT_Q(q("e7m0", 1.99f, RTZ), 1.0f, 0u, 0u);
}

TEST(E7M0, TieAboveMaxRoundsDownToMax) {
    // max 2^62 = code 126 (even); 1.5 * 2^62 is halfway to the would-be 2^63.
    EXPECT_Q(q("e7m0", 1.5f * p2(62), RNE, NONFINITE), p2(62), 0u, 0u);
    EXPECT_Q(q("e7m0", up(1.5f * p2(62)), RNE, NONFINITE), kInf, 1u, 0u);
    EXPECT_Q(q("e7m0", up(1.5f * p2(62)), RNE, SAT), p2(62), 1u, 0u);
    EXPECT_Q(q("e7m0", down(p2(63)), RTZ, NONFINITE), p2(62), 0u, 0u);
    EXPECT_Q(q("e7m0", p2(63), RTZ, NONFINITE), p2(62), 1u, 0u);
}

TEST(E7M0, SmallestValueAndUnderflow) {
    EXPECT_Q(q("e7m0", p2(-63)), p2(-63), 0u, 0u);
    EXPECT_Q(q("e7m0", p2(-64)), 0.0f, 0u, 1u);  // tie: zero's code 0 is even
    EXPECT_Q(q("e7m0", up(p2(-64))), p2(-63), 0u, 0u);
    EXPECT_Q(q("e7m0", 1.5f * p2(-63)), p2(-62), 0u, 0u);  // code 1 odd, code 2 even
    EXPECT_Q(q("e7m0", -p2(-70)), 0.0f, 0u, 1u);           // one zero: +0
    EXPECT_Q(q("e7m0", down(p2(-62)), RTZ), p2(-63), 0u, 0u);
}

// ---------------------------------------------------------------- E0M7
TEST(E0M7, TieAboveMaxOverflowsAndSaturatesInBothModes) {
    // 127/128 = code 0x7F (odd): 127.5/128 goes to 128/128, past the range.
    EXPECT_Q(q("e0m7", 127.5f / 128, RNE, SAT), 127.0f / 128, 1u, 0u);
    EXPECT_Q(q("e0m7", 127.5f / 128, RNE, NONFINITE), 127.0f / 128, 1u, 0u);
    EXPECT_Q(q("e0m7", down(127.5f / 128), RNE, NONFINITE), 127.0f / 128, 0u, 0u);
}

TEST(E0M7, TieBelowMinusOneRoundsToMinusOne) {
    // -1 = code 0x80 (even): -128.5/128 stays at -1.
    EXPECT_Q(q("e0m7", -128.5f / 128, RNE, NONFINITE), -1.0f, 0u, 0u);
    EXPECT_Q(q("e0m7", down(-128.5f / 128), RNE, NONFINITE), -1.0f, 1u, 0u);
    EXPECT_Q(q("e0m7", -1.0f), -1.0f, 0u, 0u);
    EXPECT_Q(q("e0m7", -129.0f / 128, RTZ, NONFINITE), -1.0f, 1u, 0u);
    EXPECT_Q(q("e0m7", down(-128.0f / 128), RTZ, NONFINITE), -1.0f, 0u, 0u);
}

TEST(E0M7, OneAndInfSaturateInBothModes) {
    EXPECT_Q(q("e0m7", 1.0f, RNE, NONFINITE), 127.0f / 128, 1u, 0u);
    EXPECT_Q(q("e0m7", kInf, RNE, NONFINITE), 127.0f / 128, 1u, 0u);
    EXPECT_Q(q("e0m7", -kInf, RNE, NONFINITE), -1.0f, 1u, 0u);
    EXPECT_Q(q("e0m7", kInf, RTZ, SAT), 127.0f / 128, 1u, 0u);
    EXPECT_Q(q("e0m7", 1.0e30f, RTZ, NONFINITE), 127.0f / 128, 1u, 0u);
    EXPECT_Q(q("e0m7", down(1.0f), RTZ, NONFINITE), 127.0f / 128, 0u, 0u);
}

TEST(E0M7, NanQuantizesToNanAndOneZeroOnly) {
    EXPECT_Q(q("e0m7", kNaN, RNE, NONFINITE), kNaN, 0u, 0u);
    EXPECT_Q(q("e0m7", -1.0f / 512), 0.0f, 0u, 1u);
    EXPECT_Q(q("e0m7", -0.0f), 0.0f, 0u, 0u);
}

TEST(E0M7, TiesGoToTheEvenCode) {
    EXPECT_Q(q("e0m7", 0.5f / 128), 0.0f, 0u, 1u);
    EXPECT_Q(q("e0m7", 1.5f / 128), 2.0f / 128, 0u, 0u);
    EXPECT_Q(q("e0m7", 2.5f / 128), 2.0f / 128, 0u, 0u);
    EXPECT_Q(q("e0m7", -1.5f / 128), -2.0f / 128, 0u, 0u);
    EXPECT_Q(q("e0m7", -2.5f / 128), -2.0f / 128, 0u, 0u);
    EXPECT_Q(q("e0m7", -127.9f / 128, RTZ), -127.0f / 128, 0u, 0u);
}

// ---------------------------------------------------------------- FP16
TEST(FP16, TieAboveMaxOverflowsToInf) {
    EXPECT_Q(q("fp16", 65520.0f, RNE, NONFINITE), kInf, 1u, 0u);
    EXPECT_Q(q("fp16", 65520.0f, RNE, SAT), 65504.0f, 1u, 0u);
    EXPECT_Q(q("fp16", down(65520.0f), RNE, NONFINITE), 65504.0f, 0u, 0u);
    EXPECT_Q(q("fp16", 1.0e9f, RTZ, NONFINITE), 65504.0f, 1u, 0u);
}

TEST(FP16, SubnormalBoundary) {
    EXPECT_Q(q("fp16", p2(-24)), p2(-24), 0u, 0u);
    EXPECT_Q(q("fp16", p2(-25)), 0.0f, 0u, 1u);
    EXPECT_Q(q("fp16", -p2(-25)), -0.0f, 0u, 1u);
    EXPECT_Q(q("fp16", up(p2(-25))), p2(-24), 0u, 0u);
    EXPECT_Q(q("fp16", 3 * p2(-25)), p2(-23), 0u, 0u);
    EXPECT_Q(q("fp16", std::numeric_limits<float>::denorm_min()), 0.0f, 0u, 1u);
}

// ---------------------------------------------------------------- BF16
TEST(BF16, TieAboveMaxOverflows) {
    const float max = (2.0f - p2(-7)) * p2(127);
    const float tie = (2.0f - p2(-8)) * p2(127);
    EXPECT_Q(q("bf16", tie, RNE, NONFINITE), kInf, 1u, 0u);
    EXPECT_Q(q("bf16", tie, RNE, SAT), max, 1u, 0u);
    EXPECT_Q(q("bf16", down(tie), RNE, NONFINITE), max, 0u, 0u);
    EXPECT_Q(q("bf16", FLT_MAX, RTZ, NONFINITE), max, 0u, 0u);  // FLT_MAX truncates to max
    EXPECT_Q(q("bf16", FLT_MAX, RNE, NONFINITE), kInf, 1u, 0u);
}

TEST(BF16, TiesGoToTheEvenCode) {
    EXPECT_Q(q("bf16", 1.0f + p2(-8)), 1.0f, 0u, 0u);
    EXPECT_Q(q("bf16", 1.0f + 3 * p2(-8)), 1.0f + p2(-6), 0u, 0u);
    EXPECT_Q(q("bf16", p2(-134)), 0.0f, 0u, 1u);  // half the min subnormal 2^-133
    EXPECT_Q(q("bf16", 3 * p2(-134)), p2(-132), 0u, 0u);
}

}  // namespace
