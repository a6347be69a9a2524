// ABI 1.4 random_bits: stochastic rounding with only the top b of each
// element's 32 random bits, R' = R & ~(2^(32-b) - 1), rounds away from zero
// when floor(f * 2^32) + R' >= 2^32, so at the rate floor(f * 2^b) / 2^b.
// The expected outcomes come from the reference generator (reference.hpp)
// and that rule, element by element; 0 and 32 are today's 32 bits exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <altgrad/sdk/philox.hpp>
#include <altgrad/sdk/rounding.hpp>

#include "test_common.hpp"

namespace {

using namespace agtest;
namespace sdk = altgrad::sdk;

TEST(RandomBits, TheMaskKeepsTheTopBits) {
    EXPECT_EQ(sdk::random_bits_mask(0), 0xFFFFFFFFu);
    EXPECT_EQ(sdk::random_bits_mask(32), 0xFFFFFFFFu);
    EXPECT_EQ(sdk::random_bits_mask(1), 0x80000000u);
    EXPECT_EQ(sdk::random_bits_mask(2), 0xC0000000u);
    EXPECT_EQ(sdk::random_bits_mask(8), 0xFF000000u);
    EXPECT_EQ(sdk::random_bits_mask(31), 0xFFFFFFFEu);
    std::vector<uint32_t> masked(37);
    sdk::fill_random_bits(7, 3, masked.size(), 0xFF000000u, masked.data());
    for (size_t i = 0; i < masked.size(); ++i)
        EXPECT_EQ(masked[i], ref_random_bits(7, 3 + i) & 0xFF000000u) << i;
}

Mode stochastic(uint32_t b, uint64_t seed, uint64_t offset) {
    Mode m;
    m.rounding = ALTGRAD_ROUND_STOCHASTIC;
    m.seed = seed;
    m.offset = offset;
    m.random_bits = b;
    return m;
}

// E4M3 between 1 and 1.125 (step 1/8), x = 1 + 0.3 / 8: with 2 random bits
// only the four values of R' matter, and floor(0.3 * 2^32) + R' reaches 2^32
// for R' = 3 * 2^30 alone. So element i rounds up exactly when the top two
// bits of its random word are 11: a quarter of the time, not 0.3.
TEST(RandomBits, TwoBitsRoundUpExactlyWhenTheTopTwoBitsAreSet) {
    const FormatPlugin& p = plugin("e4m3");
    const float x = 1.0375f;
    const size_t n = 4096;
    const QuantizeResult r = p.quantize(std::vector<float>(n, x), stochastic(2, 0xD1CEull, 11));
    ASSERT_EQ(r.status, ALTGRAD_STATUS_OK) << r.message;
    size_t up = 0;
    for (size_t i = 0; i < n; ++i) {
        const bool top_two_set = (ref_random_bits(0xD1CEull, 11 + i) >> 30) == 3u;
        ASSERT_EQ(r.out[i], top_two_set ? 1.125f : 1.0f) << "element " << i;
        up += top_two_set;
    }
    EXPECT_NEAR(static_cast<double>(up) / n, 0.25, 5 * std::sqrt(0.25 * 0.75 / n));
}

// Every b from 1 to 31 and fractions across the step: element i rounds up
// exactly when floor(f * 2^32) + (R_i with its low 32 - b bits cleared)
// reaches 2^32, f taken exactly from the float x.
TEST(RandomBits, EveryWidthFollowsStochasticAOfTheTopBits) {
    const FormatPlugin& p = plugin("e5m2");  // step 1/4 between 1 and 1.25
    const size_t n = 1000;
    for (uint32_t b = 1; b <= 31; ++b)
        for (double frac : {0.1, 0.3, 0.5, 0.7, 0.999}) {
            const float x = static_cast<float>(1.0 + frac / 4);
            const uint64_t floor_f32 =
                static_cast<uint64_t>(std::ldexp((static_cast<double>(x) - 1.0) * 4, 32));
            const QuantizeResult r = p.quantize(std::vector<float>(n, x), stochastic(b, 40 + b, 0));
            ASSERT_EQ(r.status, ALTGRAD_STATUS_OK) << r.message;
            for (size_t i = 0; i < n; ++i) {
                const uint64_t kept = ref_random_bits(40 + b, i) >> (32 - b) << (32 - b);
                const bool up = floor_f32 + kept >= (uint64_t{1} << 32);
                ASSERT_EQ(r.out[i], up ? 1.25f : 1.0f) << "b " << b << " f " << frac << " element " << i;
            }
        }
}

// 0 and 32 are the 32 bits of ABI 1.3, bit for bit: the same as a call whose
// struct ends before random_bits (an older host's).
TEST(RandomBits, ZeroAndThirtyTwoAreTheOldStructsBits) {
    for (const char* name : {"e4m3", "e0m7", "fp4_e2m1", "bf16"}) {
        const FormatPlugin& p = plugin(name);
        std::vector<float> xs;
        for (int i = 0; i < 3000; ++i)
            xs.push_back(std::ldexp((static_cast<float>(i % 977) - 488.0f) * 0.0137f, i % 11 - 9));
        std::vector<float> old(xs.size());
        altgrad_quantize_args a = quantize_args(xs.data(), old.data(), xs.size(), stochastic(5, 77, 9));
        a.struct_size = offsetof(altgrad_quantize_args, random_bits);  // 5 lies beyond: not read
        ASSERT_EQ(p.quantize_raw(&a), ALTGRAD_STATUS_OK) << name;
        for (uint32_t b : {0u, 32u}) {
            const QuantizeResult r = p.quantize(xs, stochastic(b, 77, 9));
            ASSERT_EQ(r.status, ALTGRAD_STATUS_OK) << name;
            for (size_t i = 0; i < xs.size(); ++i)
                ASSERT_TRUE(same_float(r.out[i], old[i])) << name << " b " << b << " element " << i;
        }
        // And 5 bits differ from 32 somewhere (the inputs leave rounding a choice).
        const QuantizeResult five = p.quantize(xs, stochastic(5, 77, 9));
        size_t differ = 0;
        for (size_t i = 0; i < xs.size(); ++i) differ += !same_float(five.out[i], old[i]);
        EXPECT_GT(differ, 0u) << name;
    }
}

TEST(RandomBits, MoreThanThirtyTwoIsAnInvalidArgument) {
    const FormatPlugin& p = plugin("e4m3");
    for (altgrad_rounding r : {ALTGRAD_ROUND_STOCHASTIC, ALTGRAD_ROUND_NEAREST_EVEN}) {
        Mode m = stochastic(33, 1, 0);
        m.rounding = r;
        EXPECT_EQ(p.quantize({1.0f}, m).status, ALTGRAD_STATUS_INVALID_ARGUMENT);
        EXPECT_EQ(p.encode({1.0f}, m).status, ALTGRAD_STATUS_INVALID_ARGUMENT);
    }
}

// Encode takes random_bits as quantize does, and so does a block-scaled call
// (one call per block with the same bits).
TEST(RandomBits, EncodeAndBlockScaledCallsUseTheSameBits) {
    const FormatPlugin& p = plugin("e3m4");
    std::vector<float> xs;
    for (int i = 0; i < 700; ++i) xs.push_back(std::ldexp(static_cast<float>(i * 37 % 1001) - 500.0f, -6));
    const Mode m = stochastic(3, 5, 21);
    const QuantizeResult q = p.quantize(xs, m);
    const EncodeResult codes = p.encode(xs, m);
    ASSERT_EQ(codes.status, ALTGRAD_STATUS_OK) << codes.message;
    const DecodeResult back = p.decode(codes.codes);
    for (size_t i = 0; i < xs.size(); ++i) ASSERT_TRUE(same_float(back.out[i], q.out[i])) << i;
    std::vector<float> scales;
    for (size_t b = 0; b < (xs.size() + 31) / 32; ++b) scales.push_back(b % 2 ? 0.5f : 3.0f);
    Mode blocked = m;
    blocked.block_scales = scales.data();
    blocked.block_size = 32;
    const QuantizeResult whole = p.quantize(xs, blocked);
    for (size_t first = 0; first < xs.size(); first += 32) {
        Mode one = m;
        one.scale = scales[first / 32];
        one.offset = m.offset + first;
        const size_t count = std::min<size_t>(32, xs.size() - first);
        const QuantizeResult part =
            p.quantize(std::vector<float>(xs.begin() + first, xs.begin() + first + count), one);
        for (size_t k = 0; k < count; ++k)
            ASSERT_TRUE(same_float(whole.out[first + k], part.out[k])) << first + k;
    }
}

}  // namespace
