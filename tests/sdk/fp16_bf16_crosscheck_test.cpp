// fp16 and bf16 against conversions that do not come from AltGrad: GCC's
// _Float16 (IEEE binary16, round to nearest even, in libgcc's soft-fp or
// F16C: either way independent of this SDK) and the well-known bit formula
// for float32 -> bfloat16 with round to nearest even,
//   bf16 = (u + 0x7FFF + ((u >> 16) & 1)) >> 16   (u the float32 bits, not NaN).
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <random>
#include <vector>

#include "test_common.hpp"

namespace {

using namespace agtest;

// Every 1024th float32 bit pattern (4M values covering every exponent and
// sign), plus 1M uniformly random patterns.
std::vector<float> sampled_floats() {
    std::vector<float> xs;
    xs.reserve((1u << 22) + (1u << 20));
    for (uint64_t u = 0; u < (1ull << 32); u += 1024)
        xs.push_back(bfloat(static_cast<uint32_t>(u + 17u * ((u >> 10) & 63u))));
    std::mt19937 rng(2718);
    for (int i = 0; i < (1 << 20); ++i) xs.push_back(bfloat(static_cast<uint32_t>(rng())));
    return xs;
}

#if defined(__FLT16_MAX__)
TEST(FP16, MatchesGccFloat16ConversionOnMillionsOfFloats) {
    const FormatPlugin& p = plugin("fp16");
    const std::vector<float> xs = sampled_floats();
    std::vector<float> want(xs.size());
    uint64_t want_overflow = 0, want_underflow = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
        const volatile float x = xs[i];
        const _Float16 h = static_cast<_Float16>(x);
        want[i] = static_cast<float>(h);
        want_overflow += std::isinf(want[i]);
        want_underflow += std::isfinite(xs[i]) && xs[i] != 0.0f && want[i] == 0.0f;
    }
    Mode nonfinite;
    nonfinite.overflow = ALTGRAD_OVERFLOW_NONFINITE;
    const QuantizeResult r = p.quantize(xs, nonfinite);
    ASSERT_EQ(r.status, ALTGRAD_STATUS_OK);
    size_t bad = 0;
    for (size_t i = 0; i < xs.size(); ++i)
        if (!same_float(r.out[i], want[i]) && ++bad <= 10)
            ADD_FAILURE() << "x=" << hexf(xs[i]) << ": _Float16 gives " << hexf(want[i]) << ", plugin "
                          << hexf(r.out[i]);
    EXPECT_EQ(bad, 0u);
    EXPECT_EQ(r.overflow, want_overflow);
    EXPECT_EQ(r.underflow, want_underflow);

    // Saturating: the same, with +-Inf replaced by +-65504.
    const QuantizeResult s = p.quantize(xs, Mode{});
    ASSERT_EQ(s.status, ALTGRAD_STATUS_OK);
    bad = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
        const float w = std::isinf(want[i]) ? std::copysign(65504.0f, want[i]) : want[i];
        if (!same_float(s.out[i], w) && ++bad <= 10)
            ADD_FAILURE() << "saturate x=" << hexf(xs[i]) << ": expected " << hexf(w) << ", plugin "
                          << hexf(s.out[i]);
    }
    EXPECT_EQ(bad, 0u);
    EXPECT_EQ(s.overflow, want_overflow);

    // encode writes the _Float16 bit pattern (NaN: some NaN pattern).
    const EncodeResult e = p.encode(xs, nonfinite);
    ASSERT_EQ(e.status, ALTGRAD_STATUS_OK);
    bad = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
        const _Float16 h = static_cast<_Float16>(xs[i]);
        uint16_t hb;
        std::memcpy(&hb, &h, 2);
        const bool ok = std::isnan(xs[i]) ? ((e.codes[i] & 0x7C00u) == 0x7C00u && (e.codes[i] & 0x3FFu) != 0)
                                          : e.codes[i] == hb;
        if (!ok && ++bad <= 10)
            ADD_FAILURE() << "encode x=" << hexf(xs[i]) << ": _Float16 bits 0x" << std::hex << hb
                          << ", plugin 0x" << e.codes[i];
    }
    EXPECT_EQ(bad, 0u);
}
#else
TEST(FP16, MatchesGccFloat16ConversionOnMillionsOfFloats) { GTEST_SKIP() << "_Float16 is not available"; }
#endif

TEST(BF16, MatchesTheRoundToNearestEvenBitFormulaOnMillionsOfFloats) {
    const FormatPlugin& p = plugin("bf16");
    const std::vector<float> xs = sampled_floats();
    Mode nonfinite;
    nonfinite.overflow = ALTGRAD_OVERFLOW_NONFINITE;
    const QuantizeResult r = p.quantize(xs, nonfinite);
    ASSERT_EQ(r.status, ALTGRAD_STATUS_OK);
    const EncodeResult e = p.encode(xs, nonfinite);
    ASSERT_EQ(e.status, ALTGRAD_STATUS_OK);
    size_t bad = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
        const uint32_t u = fbits(xs[i]);
        if (std::isnan(xs[i])) {
            if (!std::isnan(r.out[i]) && ++bad <= 10) ADD_FAILURE() << "NaN did not stay NaN";
            continue;
        }
        const uint32_t hi = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
        const float want = bfloat(hi << 16);
        if ((!same_float(r.out[i], want) || e.codes[i] != hi) && ++bad <= 10)
            ADD_FAILURE() << "x=" << hexf(xs[i]) << ": expected " << hexf(want) << ", plugin "
                          << hexf(r.out[i]) << " code 0x" << std::hex << e.codes[i];
    }
    EXPECT_EQ(bad, 0u);
}

TEST(BF16, TowardZeroIsTruncationOfTheLow16Bits) {
    const FormatPlugin& p = plugin("bf16");
    std::vector<float> xs;
    for (float x : sampled_floats())
        if (std::isfinite(x)) xs.push_back(x);
    Mode rtz;
    rtz.rounding = ALTGRAD_ROUND_TOWARD_ZERO;
    rtz.overflow = ALTGRAD_OVERFLOW_NONFINITE;
    const QuantizeResult r = p.quantize(xs, rtz);
    ASSERT_EQ(r.status, ALTGRAD_STATUS_OK);
    EXPECT_EQ(r.overflow, 0u);
    for (size_t i = 0; i < xs.size(); ++i)
        ASSERT_EQ(fbits(r.out[i]), fbits(xs[i]) & 0xFFFF0000u) << "x=" << hexf(xs[i]);
}

}  // namespace
