// The adapter's quantize loop is compiled three times (format_plugin.hpp:
// baseline, AVX2, AVX-512) and the plugins run the widest one the CPU has, so
// the plugin tests exercise one build only. Here every build this CPU can run
// quantizes the same data as the baseline loop (which has no fast paths:
// every element takes the format's quantize_bits), bit for bit with the same
// counts, in every rounding and overflow mode: ExMy formats with much of the
// data below their min normal (the finite fast path), fixed point (e0m7) and
// E8M0 (power_of_two_format), ties and both signs included.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <altgrad/sdk/codebooks.hpp>
#include <altgrad/sdk/exmy.hpp>
#include <altgrad/sdk/fixed_point.hpp>
#include <altgrad/sdk/format_plugin.hpp>

namespace {

namespace sdk = altgrad::sdk;
namespace detail = altgrad::sdk::detail;

// Magnitudes 2^lo .. 2^hi, log-uniform, random signs unless positive; every
// 16th moved onto a midpoint of a 2^-12 grid (ties for the fine formats).
std::vector<float> inputs(float lo, float hi, bool positive, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> exponent(lo, hi);
    std::vector<float> xs(50000);
    for (float& x : xs) {
        x = std::exp2(exponent(rng));
        if ((rng() & 15) == 0) x = std::ldexp(std::round(std::ldexp(x, 12)) + 0.5f, -12);
        if (!positive && (rng() & 1)) x = -x;
    }
    return xs;
}

template <class F, altgrad_rounding R, altgrad_overflow O>
void expect_isa_loops_agree(const char* name, const F& f, const std::vector<float>& xs) {
    using Loop = void (*)(const F&, const float*, float*, size_t, float, uint64_t, uint64_t, uint32_t,
                          sdk::element_counts&);
    const size_t n = xs.size();
    std::vector<float> want(n);
    sdk::element_counts want_counts;
    detail::quantize_baseline<F, R, O, detail::scaling::unit>(f, xs.data(), want.data(), n, 1.0f, 7, 99, ~0u,
                                                              want_counts);
    std::vector<Loop> loops;
    const detail::vector_isa isa = detail::cpu_vector_isa();
    if (isa != detail::vector_isa::baseline)
        loops.push_back(&detail::quantize_avx2<F, R, O, detail::scaling::unit>);
    if (isa == detail::vector_isa::avx512)
        loops.push_back(&detail::quantize_avx512<F, R, O, detail::scaling::unit>);
    for (Loop loop : loops) {
        std::vector<float> got(n);
        sdk::element_counts counts;
        loop(f, xs.data(), got.data(), n, 1.0f, 7, 99, ~0u, counts);
        size_t bad = 0;
        for (size_t i = 0; i < n; ++i)
            if (std::memcmp(&got[i], &want[i], sizeof(float)) != 0 && bad++ < 3)
                ADD_FAILURE() << name << " rounding " << R << " overflow " << O << ": x=" << xs[i]
                              << " baseline " << want[i] << " vector " << got[i];
        EXPECT_EQ(bad, 0u) << name;
        EXPECT_EQ(counts.overflow, want_counts.overflow) << name << " rounding " << R << " overflow " << O;
        EXPECT_EQ(counts.underflow, want_counts.underflow) << name << " rounding " << R << " overflow " << O;
    }
}

template <class F>
void expect_all_modes_agree(const char* name, const F& f, const std::vector<float>& xs) {
    expect_isa_loops_agree<F, ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_OVERFLOW_SATURATE>(name, f, xs);
    expect_isa_loops_agree<F, ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_OVERFLOW_NONFINITE>(name, f, xs);
    expect_isa_loops_agree<F, ALTGRAD_ROUND_STOCHASTIC, ALTGRAD_OVERFLOW_SATURATE>(name, f, xs);
    expect_isa_loops_agree<F, ALTGRAD_ROUND_STOCHASTIC, ALTGRAD_OVERFLOW_NONFINITE>(name, f, xs);
    expect_isa_loops_agree<F, ALTGRAD_ROUND_TOWARD_ZERO, ALTGRAD_OVERFLOW_SATURATE>(name, f, xs);
    expect_isa_loops_agree<F, ALTGRAD_ROUND_TOWARD_ZERO, ALTGRAD_OVERFLOW_NONFINITE>(name, f, xs);
}

TEST(IsaLoops, ExMyWithSubnormalRangeDataAgreeWithTheBaseline) {
    expect_all_modes_agree("e3m4", sdk::exmy_format({3, 4, 3, sdk::exmy_specials::ieee}),
                           inputs(-12, 4, false, 1));
    expect_all_modes_agree("e1m6", sdk::exmy_format({1, 6, 1, sdk::exmy_specials::p3109}),
                           inputs(-10, 1.5f, false, 2));
    expect_all_modes_agree("fp4_e2m1", sdk::exmy_format({2, 1, 1, sdk::exmy_specials::finite}),
                           inputs(-4, 3, false, 3));
}

TEST(IsaLoops, FixedPointAgreesWithTheBaseline) {
    expect_all_modes_agree("e0m7", sdk::fixed_point_format({8, 7}), inputs(-10, 0.9f, false, 4));
}

TEST(IsaLoops, PowerOfTwoFormatAgreesWithTheBaseline) {
    const sdk::power_of_two_format ue8m0 = sdk::power_of_two_codebook(8, 127, true);
    expect_all_modes_agree("ue8m0 positive", ue8m0, inputs(-126, 127, true, 5));
    expect_all_modes_agree("ue8m0 both signs", ue8m0, inputs(-126, 127, false, 6));
}

}  // namespace
