// Quantize output before and after the speed work of issue #16, bit for bit.
//
// Every bundled format plugin quantizes one large array (300 007 elements,
// not a multiple of the 4-element Philox block or of the adapter's
// 512-element chunk, at a stochastic offset past 2^32 that is not a multiple
// of 4) in every rounding and overflow mode, with unit, power-of-two and
// general per-tensor scales and with block scales (blocks of 32, MX-style
// powers of two, and blocks of 7 with arbitrary scales). A 64-bit FNV-1a
// digest of the output bits and the overflow and underflow counts is compared
// with the digest the plugins built at commit 77ba397 (before #16) gave for
// the same call: the table below was recorded by building this file with
// ALTGRAD_TEST_PLUGIN_DIR naming those plugins (a failing case prints its
// line). So any change in rounding, counts, block scaling or in the
// stochastic-rounding stream keyed by (seed, offset + i) fails here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "plugin_host.hpp"

namespace {

using agtest::FormatPlugin;
using agtest::Mode;

constexpr size_t kCount = 300007;
constexpr uint64_t kSeed = 0x5EEDF00Dull, kOffset = (uint64_t{1} << 32) + 4099;

uint64_t splitmix64(uint64_t& s) {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Values across the format's range and a little beyond on both ends (so
// every case sees subnormals, flushes and overflows), both signs, with a
// zero, -0, +-Inf and NaN every 997 elements.
std::vector<float> inputs(const altgrad_format_info& info) {
    const double top = info.max_finite * 4.0;
    const double bottom = (info.min_subnormal > 0 ? info.min_subnormal : info.min_normal) / 8.0;
    const double span = std::log2(top) - std::log2(bottom);
    std::vector<float> xs(kCount);
    uint64_t state = 12345;
    const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN};
    for (size_t i = 0; i < kCount; ++i) {
        const uint64_t r = splitmix64(state);
        if (i % 997 == 0) {
            xs[i] = specials[(i / 997) % 5];
            continue;
        }
        const double e = std::log2(bottom) + span * static_cast<double>(r >> 11) / 9007199254740992.0;
        const double v = std::exp2(e);
        xs[i] = static_cast<float>(r & 1 ? -v : v);
    }
    return xs;
}

uint64_t fnv1a(uint64_t h, uint64_t word) {
    for (int b = 0; b < 8; ++b) {
        h ^= (word >> (8 * b)) & 0xFF;
        h *= 0x100000001B3ull;
    }
    return h;
}

// The recorded digests: "plugin/rounding/overflow/scaling" -> digest.
const std::map<std::string, uint64_t>& recorded() {
    static const std::map<std::string, uint64_t> table = {
#include "plugin_quantize_digests.inc"
    };
    return table;
}

const std::vector<std::string> kPlugins = {"e5m2", "e4m3", "e3m4",     "e1m6",     "e7m0",     "e0m7", "bf16",
                                           "fp16", "fp32", "fp4_e2m1", "fp6_e2m3", "fp6_e3m2", "ue8m0"};

class QuantizeDigest : public ::testing::TestWithParam<std::string> {};

TEST_P(QuantizeDigest, EveryModeAndScalingGivesTheBitsOfBefore) {
    const FormatPlugin p(GetParam());
    const std::vector<float> xs = inputs(p.info());
    // Block scales: MX-style powers of two per 32 (from 2^-3 to 2^3) and
    // arbitrary positive scales per 7 (some powers of two, most not).
    std::vector<float> pow2_blocks((kCount + 31) / 32), odd_blocks((kCount + 6) / 7);
    for (size_t b = 0; b < pow2_blocks.size(); ++b)
        pow2_blocks[b] = std::ldexp(1.0f, static_cast<int>(b % 7) - 3);
    for (size_t b = 0; b < odd_blocks.size(); ++b)
        odd_blocks[b] = b % 5 == 0 ? 0.5f : 0.3f + 0.17f * static_cast<float>(b % 11);
    struct scaling_case {
        const char* name;
        float scale;
        const std::vector<float>* blocks;
        size_t block_size;
    };
    const scaling_case scalings[] = {{"unit", 1.0f, nullptr, 0},
                                     {"pow2", 0.25f, nullptr, 0},
                                     {"general", 0.7f, nullptr, 0},
                                     {"block32", 1.0f, &pow2_blocks, 32},
                                     {"block7", 1.0f, &odd_blocks, 7}};
    const std::pair<altgrad_rounding, const char*> roundings[] = {
        {ALTGRAD_ROUND_NEAREST_EVEN, "nearest_even"},
        {ALTGRAD_ROUND_STOCHASTIC, "stochastic"},
        {ALTGRAD_ROUND_TOWARD_ZERO, "toward_zero"}};
    const std::pair<altgrad_overflow, const char*> overflows[] = {{ALTGRAD_OVERFLOW_SATURATE, "saturate"},
                                                                  {ALTGRAD_OVERFLOW_NONFINITE, "nonfinite"}};
    std::map<uint64_t, std::string> seen;
    for (const auto& [rounding, rname] : roundings)
        for (const auto& [overflow, oname] : overflows)
            for (const scaling_case& sc : scalings) {
                Mode m;
                m.rounding = rounding;
                m.overflow = overflow;
                m.scale = sc.scale;
                m.seed = kSeed;
                m.offset = kOffset;
                if (sc.blocks != nullptr) {
                    m.block_scales = sc.blocks->data();
                    m.block_size = sc.block_size;
                }
                const agtest::QuantizeResult r = p.quantize(xs, m);
                ASSERT_EQ(r.status, ALTGRAD_STATUS_OK) << r.message;
                uint64_t h = 0xCBF29CE484222325ull;
                for (float y : r.out) {
                    uint32_t bits;
                    std::memcpy(&bits, &y, sizeof bits);
                    h = fnv1a(h, bits);
                }
                h = fnv1a(fnv1a(h, r.overflow), r.underflow);
                const std::string key = GetParam() + "/" + rname + "/" + oname + "/" + sc.name;
                seen.emplace(h, key);
                const auto it = recorded().find(key);
                char line[160];
                std::snprintf(line, sizeof line, "{\"%s\", 0x%016llxull},", key.c_str(),
                              static_cast<unsigned long long>(h));
                if (it == recorded().end()) ADD_FAILURE() << "no recorded digest; this build gives\n" << line;
                else EXPECT_EQ(it->second, h) << "output differs from before #16; this build gives\n" << line;
            }
    // The digest tells the cases apart (else it would pin nothing): at least
    // the three rounding modes differ for every format.
    EXPECT_GE(seen.size(), 3u);
}

INSTANTIATE_TEST_SUITE_P(AllBundledFormats, QuantizeDigest, ::testing::ValuesIn(kPlugins));

}  // namespace
