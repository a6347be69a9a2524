// What one GPU thread does (element_groups.hpp), run on the host: for every
// bundled format, the groups of a call, done in reverse order, give what the
// plugin's host path gives through the C ABI (values, counts, codes, the
// first NaN a format cannot encode, decoded values). The offsets and counts
// put calls' edges at every position inside a Philox block, which is where
// the kernels' indexing could go wrong. The kernels themselves (tests/cuda)
// need a GPU; this is the part of them the CPU can check.
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
                std::vector<float> got(count, -1.0f);
                sdk::element_counts c;
                sdk::detail::dispatch_modes(m.rounding, m.overflow, [&](auto r, auto o) {
                    constexpr altgrad_rounding R = decltype(r)::value;
                    constexpr altgrad_overflow O = decltype(o)::value;
                    for (uint64_t g = sdk::group_count(offset, count); g-- > 0;)
                        sdk::quantize_group<std::decay_t<decltype(k)>, R, O>(
                            k, xs.data(), got.data(), count, sdk::scale_source{scale}, m.seed, offset,
                            sdk::random_bits_mask(m.random_bits), g, c);
                });
                for (size_t i = 0; i < count; ++i)
                    ASSERT_TRUE(same_float(want.out[i], got[i]))
                        << where << ": element " << i << " x=" << hexf(xs[i]) << " host " << hexf(want.out[i])
                        << " group " << hexf(got[i]);
                EXPECT_EQ(c.overflow, want.overflow) << where;
                EXPECT_EQ(c.underflow, want.underflow) << where;

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
