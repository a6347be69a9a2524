// Stochastic rounding through the bundled plugins: only the two neighbours,
// unbiased, reproducible from (seed, offset + i), independent of chunking and
// threading.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "test_common.hpp"

namespace {

using namespace agtest;

Mode stochastic(uint64_t seed, uint64_t offset, altgrad_overflow o = ALTGRAD_OVERFLOW_SATURATE) {
    Mode m;
    m.rounding = ALTGRAD_ROUND_STOCHASTIC;
    m.overflow = o;
    m.seed = seed;
    m.offset = offset;
    return m;
}

class PluginStochastic : public ::testing::TestWithParam<std::string> {};

// Every result is the neighbour toward zero or the one away from zero.
TEST_P(PluginStochastic, OnlyTheTwoNeighboursAreEverProduced) {
    const FormatModel& m = model(GetParam());
    const FormatPlugin& p = plugin(GetParam());
    std::vector<float> xs;
    for (float x : random_points(m, 60000, 4242))
        if (std::isfinite(x) && std::fabs(x) <= m.max) xs.push_back(x);
    for (uint64_t seed : {1ull, 2ull, 0xFFFFFFFFFFFFull}) {
        const QuantizeResult r = p.quantize(xs, stochastic(seed, seed * 1000));
        ASSERT_EQ(r.status, ALTGRAD_STATUS_OK);
        for (size_t i = 0; i < xs.size(); ++i) {
            const float lo =
                ref_quantize(m, xs[i], ALTGRAD_ROUND_STOCHASTIC, ALTGRAD_OVERFLOW_SATURATE, 0u).value;
            const float hi =
                ref_quantize(m, xs[i], ALTGRAD_ROUND_STOCHASTIC, ALTGRAD_OVERFLOW_SATURATE, 0xFFFFFFFFu)
                    .value;
            ASSERT_TRUE(same_float(r.out[i], lo) || same_float(r.out[i], hi))
                << GetParam() << " x=" << hexf(xs[i]) << " gave " << hexf(r.out[i]) << ", neighbours "
                << hexf(lo) << " and " << hexf(hi);
        }
    }
}

TEST_P(PluginStochastic, SameSeedAndOffsetReproduceAndOtherSeedsOrOffsetsDiffer) {
    const FormatModel& m = model(GetParam());
    const FormatPlugin& p = plugin(GetParam());
    // 1000 values halfway between two neighbours.
    const double a = m.sorted[m.sorted.size() / 2 + 3].value, b = m.sorted[m.sorted.size() / 2 + 4].value;
    const std::vector<float> xs(1000, static_cast<float>((a + b) / 2));
    const QuantizeResult r1 = p.quantize(xs, stochastic(77, 5000));
    const QuantizeResult r2 = p.quantize(xs, stochastic(77, 5000));
    const QuantizeResult other_seed = p.quantize(xs, stochastic(78, 5000));
    const QuantizeResult other_offset = p.quantize(xs, stochastic(77, 5001));
    ASSERT_EQ(r1.status, ALTGRAD_STATUS_OK);
    for (size_t i = 0; i < xs.size(); ++i) ASSERT_EQ(fbits(r1.out[i]), fbits(r2.out[i])) << i;
    size_t diff_seed = 0, diff_offset = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
        diff_seed += fbits(r1.out[i]) != fbits(other_seed.out[i]);
        diff_offset += fbits(r1.out[i]) != fbits(other_offset.out[i]);
    }
    EXPECT_GT(diff_seed, 100u);
    EXPECT_GT(diff_offset, 100u);
}

// Element i of a call with offset o is element 0 of a call with offset o + i.
TEST_P(PluginStochastic, OffsetNumbersTheElements) {
    const FormatModel& m = model(GetParam());
    const FormatPlugin& p = plugin(GetParam());
    const std::vector<float> xs = random_points(m, 64, 9);
    const QuantizeResult all = p.quantize(xs, stochastic(31, 1000));
    for (size_t i = 0; i < xs.size(); ++i) {
        const QuantizeResult one = p.quantize({xs[i]}, stochastic(31, 1000 + i));
        ASSERT_TRUE(same_float(one.out[0], all.out[i])) << "element " << i;
    }
}

// One call equals the same array quantized in pieces of 1, 3, 511, 513, ...
// elements with matching offsets.
TEST_P(PluginStochastic, ChunkingDoesNotChangeTheResult) {
    const FormatModel& m = model(GetParam());
    const FormatPlugin& p = plugin(GetParam());
    const std::vector<float> xs = random_points(m, 7000, 10);
    const uint64_t base = 123456789;
    for (altgrad_overflow o : {ALTGRAD_OVERFLOW_SATURATE, ALTGRAD_OVERFLOW_NONFINITE}) {
        const QuantizeResult whole = p.quantize(xs, stochastic(5, base, o));
        ASSERT_EQ(whole.status, ALTGRAD_STATUS_OK);
        std::vector<float> pieces(xs.size());
        uint64_t overflow = 0, underflow = 0;
        const size_t sizes[] = {1, 3, 511, 513};
        size_t at = 0;
        for (size_t k = 0; at < xs.size(); ++k) {
            const size_t n = std::min(sizes[k % 4], xs.size() - at);
            altgrad_quantize_args a =
                quantize_args(xs.data() + at, pieces.data() + at, n, stochastic(5, base + at, o));
            ASSERT_EQ(p.quantize_raw(&a), ALTGRAD_STATUS_OK);
            overflow += a.overflow_count;
            underflow += a.underflow_count;
            at += n;
        }
        for (size_t i = 0; i < xs.size(); ++i)
            ASSERT_TRUE(same_float(whole.out[i], pieces[i])) << "element " << i;
        EXPECT_EQ(overflow, whole.overflow);
        EXPECT_EQ(underflow, whole.underflow);
        // And the codes of encode, chunked the same way.
        const EncodeResult ewhole = p.encode(xs, stochastic(5, base, o));
        at = 0;
        for (size_t k = 0; at < xs.size(); ++k) {
            const size_t n = std::min(sizes[(k + 1) % 4], xs.size() - at);
            const std::vector<float> part(xs.begin() + static_cast<long>(at),
                                          xs.begin() + static_cast<long>(at + n));
            const EncodeResult e = p.encode(part, stochastic(5, base + at, o));
            for (size_t i = 0; i < n; ++i)
                ASSERT_EQ(e.codes[i], ewhole.codes[at + i]) << "element " << at + i;
            at += n;
        }
    }
}

// Four threads quantizing disjoint slices (with matching offsets) of one
// array, at the same time on the shared instance, give the one-call result.
TEST_P(PluginStochastic, FourThreadsOnDisjointSlicesMatchOneCall) {
    const FormatModel& m = model(GetParam());
    const FormatPlugin& p = plugin(GetParam());
    const std::vector<float> xs = random_points(m, 200003, 11);
    const uint64_t base = 999;
    const QuantizeResult whole = p.quantize(xs, stochastic(8, base));
    ASSERT_EQ(whole.status, ALTGRAD_STATUS_OK);
    std::vector<float> out(xs.size());
    const size_t cuts[] = {0, 50001, 100002, 150007, xs.size()};
    std::vector<altgrad_status> status(4, ALTGRAD_STATUS_INTERNAL);
    std::vector<uint64_t> overflow(4), underflow(4);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            for (int rep = 0; rep < 3; ++rep) {
                altgrad_quantize_args a = quantize_args(xs.data() + cuts[t], out.data() + cuts[t],
                                                        cuts[t + 1] - cuts[t], stochastic(8, base + cuts[t]));
                status[t] = p.quantize_raw(&a);
                overflow[t] = a.overflow_count;
                underflow[t] = a.underflow_count;
            }
        });
    for (std::thread& th : threads) th.join();
    uint64_t ov = 0, un = 0;
    for (int t = 0; t < 4; ++t) {
        EXPECT_EQ(status[t], ALTGRAD_STATUS_OK);
        ov += overflow[t];
        un += underflow[t];
    }
    for (size_t i = 0; i < xs.size(); ++i) ASSERT_TRUE(same_float(whole.out[i], out[i])) << "element " << i;
    EXPECT_EQ(ov, whole.overflow);
    EXPECT_EQ(un, whole.underflow);
}

// Element numbers past 2^34 put the counter's high word to use.
TEST_P(PluginStochastic, LargeOffsetsMatchTheReferenceGenerator) {
    const FormatModel& m = model(GetParam());
    const FormatPlugin& p = plugin(GetParam());
    const std::vector<float> xs = random_points(m, 4000, 12);
    for (uint64_t offset : {(1ull << 34) - 1001, (1ull << 40) + 3, 0x7FFFFFFFFFFF0000ull})
        EXPECT_TRUE(quantize_matches_reference(p, m, xs, stochastic(0xABCDEF0123456789ull, offset)));
}

INSTANTIATE_TEST_SUITE_P(AllTabulatedPlugins, PluginStochastic,
                         ::testing::Values("e5m2", "e4m3", "e3m4", "e1m6", "e7m0", "e0m7", "bf16", "fp16"),
                         PluginNameGen());

// Far below the smallest positive value (the format's grid step 2^25 times
// larger than x's binade), the fraction is floor(f * 2^32) = 255 and x must
// round up with probability 255 / 2^32 only. 2^20 draws, bit for bit. (bf16
// has no such range: its smallest subnormal is below float32's normals.)
TEST(Stochastic, FarBelowTheSmallestValueRoundsUpAlmostNever) {
    for (const char* name : {"e5m2", "e4m3", "e3m4", "e1m6", "e7m0", "e0m7", "fp16"}) {
        const FormatModel& m = model(name);
        const float x = static_cast<float>((2.0 - std::ldexp(1.0, -23)) * std::ldexp(m.min_positive(), -25));
        ASSERT_TRUE(std::isnormal(x)) << name;
        const std::vector<float> xs(1u << 20, x);
        EXPECT_TRUE(quantize_matches_reference(plugin(name), m, xs, stochastic(0xD15EA5Eull, 1u << 30)));
    }
}

// ---------------------------------------------------------------------------
// Unbiasedness. Between neighbours t (toward zero) and a (away), x rounds to a
// with probability p = floor(f * 2^32) / 2^32, f = (|x| - |t|) / (|a| - |t|);
// so E[q(x)] differs from x by at most 2^-32 |a - t|. The mean of N draws has
// standard deviation sqrt(p (1 - p) / N) |a - t|; the test allows 5 of them.
// ---------------------------------------------------------------------------
struct Interval {
    const char* format;
    double t, a;  // neighbours: toward zero, away from zero
};

const Interval kIntervals[] = {
    {"e4m3", 1.0, 1.125},
    {"e4m3", 3.0 / 512, 4.0 / 512},  // subnormals
    {"e4m3", -416.0, -448.0},
    {"e5m2", 0.0, 1.0 / 65536},  // zero and the min subnormal
    {"e5m2", 40960.0, 49152.0},
    {"e3m4", -15.0, -15.5},
    {"e1m6", 1.0, 65.0 / 64},
    {"e7m0", 8.0, 16.0},
    {"e7m0", std::ldexp(1.0, -63), std::ldexp(1.0, -62)},
    {"e0m7", 3.0 / 128, 4.0 / 128},
    {"e0m7", -0.5, -0.5 - 1.0 / 128},
    {"bf16", 1.0, 1.0 + 1.0 / 128},
    {"fp16", 1.0, 1.0 + 1.0 / 1024},
    {"fp16", -std::ldexp(1.0, -24), -std::ldexp(1.0, -23)},
};

TEST(Stochastic, MeanOfManyDrawsIsWithinFiveSigmaOfX) {
    const size_t N = 100000;
    uint64_t offset = 0;
    for (const Interval& iv : kIntervals) {
        const FormatPlugin& p = plugin(iv.format);
        for (double frac : {1.0 / 8, 1.0 / 3, 1.0 / 2, 0.9}) {
            const float x = static_cast<float>(iv.t + frac * (iv.a - iv.t));
            const double f =
                (std::fabs(static_cast<double>(x)) - std::fabs(iv.t)) / (std::fabs(iv.a) - std::fabs(iv.t));
            ASSERT_GT(f, 0.0);
            ASSERT_LT(f, 1.0);
            const double prob = std::floor(std::ldexp(f, 32)) / 4294967296.0;
            offset += 1000003;  // fresh element numbers for every case
            const QuantizeResult r = p.quantize(std::vector<float>(N, x), stochastic(0x5EEDull, offset));
            ASSERT_EQ(r.status, ALTGRAD_STATUS_OK);
            double sum = 0;
            size_t aways = 0;
            for (float y : r.out) {
                ASSERT_TRUE(y == static_cast<float>(iv.t) || y == static_cast<float>(iv.a))
                    << iv.format << " x=" << hexf(x) << " gave " << hexf(y);
                sum += y;
                aways += y == static_cast<float>(iv.a);
            }
            const double mean = sum / N;
            const double step = std::fabs(iv.a - iv.t);
            const double bound =
                5 * std::sqrt(prob * (1 - prob) / N) * step + std::ldexp(step, -32) + 1e-12 * std::fabs(x);
            EXPECT_LE(std::fabs(mean - x), bound)
                << iv.format << " between " << iv.t << " and " << iv.a << " at fraction " << frac
                << ": x=" << hexf(x) << ", mean of " << N << " draws " << mean << " (" << aways
                << " rounded away)";
        }
    }
}

// The away-count is exactly the number of elements whose random word R
// satisfies floor(f * 2^32) + R >= 2^32 (P3109 StochasticA).
TEST(Stochastic, AwayCountEqualsStochasticACountOfTheRandomWords) {
    const FormatPlugin& p = plugin("e4m3");
    const float x = 1.0f + 0.125f * 0.3f;  // 30% of the way from 1 to 1.125 (rounded to float)
    const uint64_t frac32 =
        static_cast<uint64_t>(std::floor(std::ldexp((static_cast<double>(x) - 1.0) / 0.125, 32)));
    const size_t N = 20000;
    const QuantizeResult r = p.quantize(std::vector<float>(N, x), stochastic(42, 7));
    ASSERT_EQ(r.status, ALTGRAD_STATUS_OK);
    size_t want = 0, got = 0;
    for (size_t i = 0; i < N; ++i) {
        want += frac32 + ref_random_bits(42, 7 + i) >= (1ull << 32);
        got += r.out[i] == 1.125f;
    }
    EXPECT_EQ(got, want);
}

TEST(Stochastic, OverflowPastMaxFollowsTheOverflowMode) {
    // E4M3: 456 is a quarter of the way from 448 to the would-be 480; the
    // draws that round up overflow (to NaN, or to 448 when saturating).
    const FormatPlugin& p = plugin("e4m3");
    const size_t N = 20000;
    for (altgrad_overflow o : {ALTGRAD_OVERFLOW_SATURATE, ALTGRAD_OVERFLOW_NONFINITE}) {
        const QuantizeResult r = p.quantize(std::vector<float>(N, 456.0f), stochastic(3, 0, o));
        ASSERT_EQ(r.status, ALTGRAD_STATUS_OK);
        size_t ups = 0;
        for (size_t i = 0; i < N; ++i)
            ups += ref_random_bits(3, i) >= (3ull << 30);  // floor(0.25 * 2^32) + R >= 2^32
        EXPECT_EQ(r.overflow, ups);
        size_t nans = 0;
        for (float y : r.out) {
            nans += std::isnan(y);
            if (!std::isnan(y)) {
                EXPECT_EQ(y, 448.0f);
            }
        }
        EXPECT_EQ(nans, o == ALTGRAD_OVERFLOW_NONFINITE ? ups : 0u);
    }
}

}  // namespace
