// What one GPU thread does (element_groups.hpp), run on the host: for every
// bundled format, the groups of a call, done in reverse order as the quantize
// kernel does them (whole groups as quads where the kernel would, the others
// element by element), give what the plugin's host path gives through the C
// ABI (values, counts, codes, the first NaN a format cannot encode, decoded
// values), with one scale and with block scales. The offsets and counts put
// calls' edges at every position inside a Philox block, which is where the
// kernels' indexing could go wrong. The kernels themselves (tests/cuda) need
// a GPU; this is the part of them the CPU can check.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <altgrad/sdk/element_groups.hpp>
#include <altgrad/sdk/exmy.hpp>
#include <altgrad/sdk/fixed_point.hpp>
#include <altgrad/sdk/format_plugin.hpp>

#include "test_common.hpp"

namespace {

using namespace agtest;
namespace sdk = altgrad::sdk;

// The calls' (offset, count): empty, single elements at each lane, runs that
// start and end mid-block, and a long one.
const std::pair<uint64_t, size_t> kCalls[] = {{0, 0}, {0, 1}, {1, 1}, {2, 3},    {3, 1},     {3, 2},
                                              {4, 4}, {5, 7}, {6, 9}, {7, 1000}, {4099, 777}};

std::vector<float> inputs(size_t n, const altgrad_format_info& info) {
    const float top = static_cast<float>(info.max_finite);
    std::vector<float> xs;
    for (size_t i = 0; i < n; ++i) {
        const uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull;
        switch (i % 8) {
            case 0:
                xs.push_back(bfloat(static_cast<uint32_t>(h >> 32)));
                break;  // any bits: NaN, Inf, subnormal
            case 1: xs.push_back(top * (1.0f + static_cast<float>(h % 1000) / 4000.0f)); break;  // near max
            case 2:
                xs.push_back(-static_cast<float>(info.min_normal) * static_cast<float>(h % 97) / 64.0f);
                break;
            default:
                xs.push_back(std::ldexp(static_cast<float>(h % 4096) - 2048.0f, -static_cast<int>(h % 13)));
                break;
        }
    }
    return xs;
}

// One scale per call, or block scales of blocks of block_size.
struct KernelResult {
    std::vector<float> out;
    sdk::element_counts counts;
};

// The groups of a call of xs (mode m's rounding, overflow, seed, offset and
// random bits; scales s) as the quantize kernel takes them, in reverse
// order: a whole group as one quad when `quads` (the kernel's choice where
// the buffers are aligned and the group's lanes share a scale), any other
// element by element.
template <class K>
KernelResult like_the_kernel(const K& k, const std::vector<float>& xs, const sdk::scale_source& s, bool quads,
                             const Mode& m) {
    KernelResult r{std::vector<float>(xs.size(), -1.0f), {}};
    const size_t n = xs.size();
    const uint32_t shift = s.per_block() ? sdk::block_shift_of(s.block_size) : sdk::kNoShift;
    const uint32_t mask = sdk::random_bits_mask(m.random_bits);
    sdk::detail::dispatch_modes(m.rounding, m.overflow, [&](auto rounding, auto overflow) {
        constexpr altgrad_rounding R = decltype(rounding)::value;
        constexpr altgrad_overflow O = decltype(overflow)::value;
        for (uint64_t g = sdk::group_count(m.offset, n); g-- > 0;) {
            if (quads && sdk::group_is_whole(g, m.offset, n)) {
                const size_t first = sdk::group_first_element(g, m.offset);
                sdk::quad x;
                std::memcpy(x.v, xs.data() + first, sizeof x.v);
                const sdk::quad y =
                    sdk::quantize_whole_group<K, R, O>(k, x, s, shift, m.seed, m.offset, mask, g, r.counts);
                std::memcpy(r.out.data() + first, y.v, sizeof y.v);
            } else {
                sdk::quantize_group<K, R, O>(k, xs.data(), r.out.data(), n, s, m.seed, m.offset, mask, g,
                                             r.counts);
            }
        }
    });
    return r;
}

::testing::AssertionResult same_values(const std::vector<float>& xs, const std::vector<float>& want,
                                       const std::vector<float>& got) {
    for (size_t i = 0; i < xs.size(); ++i)
        if (!same_float(want[i], got[i]))
            return ::testing::AssertionFailure() << "element " << i << " x=" << hexf(xs[i]) << " host "
                                                 << hexf(want[i]) << " kernel " << hexf(got[i]);
    return ::testing::AssertionSuccess();
}

// One bundled format: its plugin (the host path, through the ABI) and the
// same format built here from its published definition (the kernel side).
template <class F>
void check_groups(const std::string& name, const F& format) {
    const FormatPlugin& p = plugin(name);
    const auto& k = format.kernel();
    const uint64_t limit = uint64_t{1} << format.total_bits();
    for (float scale : {1.0f, 0.25f, 0.7f})
        for (const Mode& base : all_modes(scale, 0xFEEDull, 0))
            for (const auto& [offset, count] : kCalls) {
                Mode m = base;
                m.offset = offset;
                m.random_bits = offset % 2 == 1 ? 3u : 0u;  // odd offsets: the top 3 random bits only
                const std::vector<float> xs = inputs(count, p.info());
                const std::string where = name + " " + describe(m) + " offset " + std::to_string(offset) +
                                          " count " + std::to_string(count);
                const QuantizeResult want = p.quantize(xs, m);
                ASSERT_EQ(want.status, ALTGRAD_STATUS_OK) << where;
                for (const bool quads : {false, true}) {
                    const KernelResult got = like_the_kernel(k, xs, sdk::scale_source{scale}, quads, m);
                    EXPECT_TRUE(same_values(xs, want.out, got.out)) << where << (quads ? " (quads)" : "");
                    EXPECT_EQ(got.counts.overflow, want.overflow) << where;
                    EXPECT_EQ(got.counts.underflow, want.underflow) << where;
                }

                // Encode (without NaN where the format has no NaN code) and decode.
                std::vector<float> ys = xs;
                if (p.info().nan_code_count == 0)
                    for (float& y : ys)
                        if (std::isnan(y)) y = 0.5f;
                const EncodeResult codes = p.encode(ys, m);
                ASSERT_EQ(codes.status, ALTGRAD_STATUS_OK) << where << ": " << codes.message;
                std::vector<uint32_t> got_codes(count, 0xDEADBEEFu);
                sdk::element_counts ce;
                uint64_t first_bad = sdk::kNoElement;
                sdk::detail::dispatch_modes(m.rounding, m.overflow, [&](auto r, auto o) {
                    constexpr altgrad_rounding R = decltype(r)::value;
                    constexpr altgrad_overflow O = decltype(o)::value;
                    for (uint64_t g = sdk::group_count(offset, count); g-- > 0;)
                        first_bad = std::min(
                            first_bad, sdk::encode_group<std::decay_t<decltype(k)>, R, O, uint32_t>(
                                           k, ys.data(), got_codes.data(), count, sdk::scale_source{scale},
                                           m.seed, offset, sdk::random_bits_mask(m.random_bits), g, ce));
                });
                EXPECT_EQ(got_codes, codes.codes) << where;
                EXPECT_EQ(first_bad, sdk::kNoElement) << where;
                EXPECT_EQ(ce.overflow, codes.overflow) << where;
                EXPECT_EQ(ce.underflow, codes.underflow) << where;
                const DecodeResult values = p.decode(codes.codes, scale);
                ASSERT_EQ(values.status, ALTGRAD_STATUS_OK) << where;
                for (size_t i = 0; i < count; ++i) {
                    bool bad = true;
                    const float v =
                        sdk::decode_element(k, codes.codes.data(), i, sdk::scale_source{scale}, limit, bad);
                    EXPECT_FALSE(bad) << where;
                    ASSERT_TRUE(same_float(values.out[i], v)) << where << ": code " << codes.codes[i];
                }
            }
}

TEST(ElementGroups, ExMyFormatsMatchTheirPlugins) {
    using sdk::exmy_specials;
    const std::pair<const char*, sdk::exmy_spec> formats[] = {
        {"e5m2", {5, 2, 15, exmy_specials::ieee}},  {"e4m3", {4, 3, 7, exmy_specials::finite_nan}},
        {"e3m4", {3, 4, 3, exmy_specials::ieee}},   {"e1m6", {1, 6, 1, exmy_specials::p3109}},
        {"e7m0", {7, 0, 64, exmy_specials::p3109}}, {"bf16", {8, 7, 127, exmy_specials::ieee}},
        {"fp16", {5, 10, 15, exmy_specials::ieee}}, {"fp32", {8, 23, 127, exmy_specials::ieee}}};
    for (const auto& [name, spec] : formats) check_groups(name, sdk::exmy_format(spec));
}

// Block scales (ABI 1.2): blocks of 4, 8 (a shift), 12 (a division), 32 and
// 3 (no quad: lanes would straddle blocks), calls that start on and off a
// multiple of 4, scales that are powers of two (multiplied back by their
// inverse), 2^-127 (a subnormal with a float inverse), 2^-128 (one without)
// and general values (divided): the kernel's ways give the plugin's results.
template <class F>
void check_block_scaled_groups(const std::string& name, const F& format) {
    const FormatPlugin& p = plugin(name);
    const std::vector<float> xs = inputs(1000, p.info());
    const float specials[] = {std::ldexp(1.0f, -127), std::ldexp(1.0f, -128), std::ldexp(1.0f, 127), 0.75f};
    for (const size_t block : {size_t{4}, size_t{8}, size_t{12}, size_t{32}, size_t{3}}) {
        std::vector<float> scales;
        for (size_t b = 0; b < sdk::block_count(xs.size(), block); ++b)
            scales.push_back(b % 3 == 0   ? std::ldexp(1.0f, static_cast<int>(b % 41) - 20)
                             : b % 3 == 1 ? 0.37f * static_cast<float>(b + 1)
                                          : specials[b / 3 % 4]);
        for (const uint64_t offset : {uint64_t{0}, uint64_t{4}, uint64_t{1}, uint64_t{4099}})
            for (Mode m : all_modes(1.0f, 0xB10Cull, offset)) {
                m.block_scales = scales.data();
                m.block_size = block;
                const QuantizeResult want = p.quantize(xs, m);
                ASSERT_EQ(want.status, ALTGRAD_STATUS_OK) << want.message;
                const std::string where = name + " " + describe(m) + " block " + std::to_string(block) +
                                          " offset " + std::to_string(offset);
                // The kernel takes quads only where no group straddles two blocks.
                const bool quads = block % 4 == 0 && offset % 4 == 0;
                const KernelResult got = like_the_kernel(
                    format.kernel(), xs, sdk::scale_source{1.0f, scales.data(), block}, quads, m);
                EXPECT_TRUE(same_values(xs, want.out, got.out)) << where;
                EXPECT_EQ(got.counts.overflow, want.overflow) << where;
                EXPECT_EQ(got.counts.underflow, want.underflow) << where;
            }
    }
}

TEST(ElementGroups, BlockScaledCallsMatchTheirPlugins) {
    using sdk::exmy_specials;
    const std::pair<const char*, sdk::exmy_spec> formats[] = {{"e4m3", {4, 3, 7, exmy_specials::finite_nan}},
                                                              {"e5m2", {5, 2, 15, exmy_specials::ieee}},
                                                              {"e1m6", {1, 6, 1, exmy_specials::p3109}},
                                                              {"bf16", {8, 7, 127, exmy_specials::ieee}},
                                                              {"fp4_e2m1", {2, 1, 1, exmy_specials::finite}}};
    for (const auto& [name, spec] : formats) check_block_scaled_groups(name, sdk::exmy_format(spec));
    check_block_scaled_groups("e0m7", sdk::fixed_point_format({8, 7}));
}

// Which scales are returned by a multiply: the powers of two whose reciprocal
// is a float, with that reciprocal.
TEST(ElementGroups, ScalesWithAnExactInverse) {
    const std::pair<float, float> exact[] = {{1.0f, 1.0f},
                                             {0.25f, 4.0f},
                                             {std::ldexp(1.0f, 127), std::ldexp(1.0f, -127)},
                                             {std::ldexp(1.0f, -126), std::ldexp(1.0f, 126)},
                                             {std::ldexp(1.0f, -127), std::ldexp(1.0f, 127)}};
    for (const auto& [s, inverse] : exact) {
        const sdk::group_scale g = sdk::group_scale_of(s);
        EXPECT_TRUE(g.exact_inverse) << hexf(s);
        EXPECT_EQ(sdk::float_bits(g.inverse), sdk::float_bits(inverse)) << hexf(s);
    }
    for (const float s : {0.7f, 3.0f, std::ldexp(1.0f, -128), std::ldexp(1.0f, -149), -2.0f})
        EXPECT_FALSE(sdk::group_scale_of(s).exact_inverse) << hexf(s);
}

// The random words of four consecutive indices from any first one, across
// the Philox block boundary when first is not a multiple of 4.
TEST(ElementGroups, RandomWordsOfAnyFourIndices) {
    const uint64_t seed = 0x0DDBA11ull;
    for (const uint64_t first :
         {uint64_t{0}, uint64_t{4097}, uint64_t{4098}, uint64_t{4099}, (uint64_t{1} << 34) + 3})
        for (const uint32_t mask : {~0u, sdk::random_bits_mask(5)}) {
            const auto r = sdk::random_quad<ALTGRAD_ROUND_STOCHASTIC>(seed, first, mask);
            for (unsigned lane = 0; lane < 4; ++lane)
                EXPECT_EQ(r.word[lane], ref_random_bits(seed, first + lane) & mask)
                    << first << " lane " << lane;
        }
    const auto none = sdk::random_quad<ALTGRAD_ROUND_NEAREST_EVEN>(seed, 5, ~0u);
    EXPECT_EQ(none.word[0] | none.word[1] | none.word[2] | none.word[3], 0u);
}

TEST(ElementGroups, FixedPointMatchesItsPlugin) { check_groups("e0m7", sdk::fixed_point_format({8, 7})); }

// E0M7 has no NaN code: the group reports the first NaN of its lanes, in
// call-relative numbering, and the smallest over all groups is the first.
TEST(ElementGroups, EncodeReportsTheFirstNanTheFormatCannotHold) {
    const sdk::fixed_point_format f({8, 7});
    std::vector<float> xs(23, 0.25f);
    xs[13] = std::nanf("");
    xs[19] = std::nanf("");
    std::vector<uint8_t> codes(xs.size());
    const uint64_t offset = 6;  // element 13 is global 19: lane 3 of its block
    sdk::element_counts c;
    uint64_t first = sdk::kNoElement;
    for (uint64_t g = 0; g < sdk::group_count(offset, xs.size()); ++g)
        first = std::min(
            first, sdk::encode_group<sdk::fixed_point_format, ALTGRAD_ROUND_NEAREST_EVEN,
                                     ALTGRAD_OVERFLOW_SATURATE, uint8_t>(
                       f, xs.data(), codes.data(), xs.size(), sdk::scale_source{}, 0, offset, ~0u, g, c));
    EXPECT_EQ(first, 13u);
    EXPECT_EQ(codes[0], 32u);  // 0.25 * 128
}

// The group arithmetic itself: 23 elements from global index 6 touch the
// blocks of indices 4..7, ..., 28..31: seven groups, the first starting at 4.
TEST(ElementGroups, GroupsCoverTheCallsBlocks) {
    EXPECT_EQ(sdk::group_count(6, 23), 7u);
    EXPECT_EQ(sdk::group_count(0, 0), 0u);
    EXPECT_EQ(sdk::group_count(3, 1), 1u);
    EXPECT_EQ(sdk::group_count(3, 2), 2u);
    EXPECT_EQ(sdk::group_count(4, 4), 1u);
    EXPECT_EQ(sdk::group_of<ALTGRAD_ROUND_NEAREST_EVEN>(0, 6, 0).base, 4u);
    EXPECT_EQ(sdk::group_of<ALTGRAD_ROUND_NEAREST_EVEN>(6, 6, 0).base, 28u);
    // Stochastic: the group's words are the host generator's for its indices.
    const auto e = sdk::group_of<ALTGRAD_ROUND_STOCHASTIC>(2, 6, 0xABCDEF0123ull);
    for (unsigned lane = 0; lane < 4; ++lane)
        EXPECT_EQ(e.random.word[lane], ref_random_bits(0xABCDEF0123ull, 12 + lane)) << "lane " << lane;
}

}  // namespace
