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
#include <limits>
#include <random>
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

// Runs of chunks (512 elements) as the adapter meets them: after a chunk that
// took the finite path, the next one takes it without the flags pass and is
// redone when an input was beyond that path's range (a NaN, an Inf, or 4 x max,
// beyond e0m7's bound of 2) or ends the run when all its inputs were in the
// normal range. Chunks: 0 spread (reaching below the format's normal range),
// 1 spread, 2 spread + NaN last, 3 spread, 4 spread + 4 max first, 5 spread,
// 6-8 normal, 9 normal with zeros and one value below the normal range,
// 10 spread, 11 spread + -Inf inside, and 12 a short spread one. Out of place,
// in place (where the run must not start: the inputs would be gone), and
// block-scaled with scales of 1 and with scales that vary (the block loop),
// all equal the reference.
TEST_P(FastPath, RunsOfChunksMatchTheReferenceInPlaceOrNot) {
    const FormatModel& m = model(GetParam());
    const FormatPlugin& p = plugin(GetParam());
    std::mt19937_64 rng(0xC4u);
    const double lo = std::log2(m.min_positive() / 4), hi = std::log2(m.max / 2);
    auto spread = [&] {
        const double e = lo + (hi - lo) * std::uniform_real_distribution<double>(0, 1)(rng);
        return static_cast<float>(std::exp2(e) * (rng() & 1 ? -1 : 1));
    };
    auto normal = [&] {  // 0.6 max .. 0.9 max: the top binade or two, normal in every format here
        return static_cast<float>(m.max * std::uniform_real_distribution<double>(0.6, 0.9)(rng) *
                                  (rng() & 1 ? -1 : 1));
    };
    const char kinds[] = "ssssssnnnnsss";
    std::vector<float> xs;
    for (size_t c = 0; c < sizeof kinds - 1; ++c)
        for (size_t j = 0; j < (c + 1 == sizeof kinds - 1 ? 300u : 512u); ++j)
            xs.push_back(kinds[c] == 's' ? spread() : normal());
    xs[3 * 512 - 1] = std::nanf("");
    xs[4 * 512] = static_cast<float>(4 * m.max);
    // Chunk 9: normal values, zeros of both signs, and one value below the normal range (the
    // smallest positive one times 0.3: an underflow), which a zero must not hide from the flags.
    for (size_t j = 0; j < 512; j += 7) xs[9 * 512 + j] = j % 2 ? -0.0f : 0.0f;
    xs[9 * 512 + 300] = static_cast<float>(0.3 * m.min_positive());
    xs[11 * 512 + 77] = -std::numeric_limits<float>::infinity();
    for (const Mode& mode : all_modes()) {
        EXPECT_TRUE(quantize_matches_reference(p, m, xs, mode));
        const QuantizeResult apart = p.quantize(xs, mode);
        std::vector<float> in_place = xs;
        altgrad_quantize_args a = quantize_args(in_place.data(), in_place.data(), in_place.size(), mode);
        ASSERT_EQ(p.quantize_raw(&a), ALTGRAD_STATUS_OK) << describe(mode);
        for (size_t i = 0; i < xs.size(); ++i)
            ASSERT_TRUE(same_float(in_place[i], apart.out[i]))
                << describe(mode) << " in place, element " << i;
        EXPECT_EQ(a.overflow_count, apart.overflow);
        EXPECT_EQ(a.underflow_count, apart.underflow);
        const std::vector<float> ones((xs.size() + 31) / 32, 1.0f);
        Mode blocks = mode;
        blocks.block_scales = ones.data();
        blocks.block_size = 32;
        EXPECT_TRUE(quantize_matches_reference(p, m, xs, blocks)) << "block-scaled";
        // Scales that change block to block (0.5, 1, 2), with one 3 (not a power of two) in chunk 8,
        // in blocks of 32 and of 48 (which straddle chunks): the block loop's vector path takes
        // chunk 7 (after a normal chunk) and gives chunks 8 (the 3) and 9 (the underflow) back.
        for (const size_t block_size : {size_t{32}, size_t{48}}) {
            std::vector<float> varied((xs.size() + block_size - 1) / block_size);
            for (size_t b = 0; b < varied.size(); ++b)
                varied[b] = std::ldexp(1.0f, static_cast<int>(b % 3) - 1);
            varied[8 * 512 / block_size + 3] = 3.0f;
            blocks.block_scales = varied.data();
            blocks.block_size = block_size;
            EXPECT_TRUE(quantize_matches_reference(p, m, xs, blocks))
                << "block-scaled, varied, " << block_size;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(AllTabulatedPlugins, FastPath,
                         ::testing::Values("e5m2", "e4m3", "e3m4", "e1m6", "e7m0", "e0m7", "bf16", "fp16",
                                           "fp4_e2m1", "fp6_e2m3", "fp6_e3m2", "ue8m0"),
                         PluginNameGen());

}  // namespace
