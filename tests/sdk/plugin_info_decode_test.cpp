// Each bundled plugin, loaded through the C ABI: its descriptor, its
// get_info against the published facts of the format, and decode of every
// code against an independent value table.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "test_common.hpp"

namespace {

using namespace agtest;

struct PublishedInfo {
    const char* name;
    altgrad_format_family family;
    uint32_t total_bits, code_bytes, exponent_bits, mantissa_bits;
    int32_t bias;
    altgrad_zero_kind zero;
    uint32_t has_subnormals, has_inf, nan_code_count;
    double max_finite, lowest_finite, min_normal, min_subnormal;
};

// OCP OFP8 rev 1.0 (E5M2, E4M3FN), ml_dtypes float8_e3m4, IEEE P3109
// binary8p7 / binary8p1 (signed extended), IEEE 754 binary16 / binary32 and
// bfloat16. NaN counts: IEEE style has 2 * (2^M - 1) NaN codes; E4M3FN two
// (S.1111.111); P3109 one (0x80).
const PublishedInfo kPublished[] = {
    {"e5m2", ALTGRAD_FAMILY_FLOAT, 8, 1, 5, 2, 15, ALTGRAD_ZERO_SIGNED, 1, 1, 6, 57344.0, -57344.0,
     std::ldexp(1.0, -14), std::ldexp(1.0, -16)},
    {"e4m3", ALTGRAD_FAMILY_FLOAT, 8, 1, 4, 3, 7, ALTGRAD_ZERO_SIGNED, 1, 0, 2, 448.0, -448.0,
     std::ldexp(1.0, -6), std::ldexp(1.0, -9)},
    {"e3m4", ALTGRAD_FAMILY_FLOAT, 8, 1, 3, 4, 3, ALTGRAD_ZERO_SIGNED, 1, 1, 30, 15.5, -15.5, 0.25,
     std::ldexp(1.0, -6)},
    {"e1m6", ALTGRAD_FAMILY_FLOAT, 8, 1, 1, 6, 1, ALTGRAD_ZERO_UNSIGNED, 1, 1, 1, 126.0 / 64, -126.0 / 64,
     1.0, 1.0 / 64},
    {"e7m0", ALTGRAD_FAMILY_FLOAT, 8, 1, 7, 0, 64, ALTGRAD_ZERO_UNSIGNED, 0, 1, 1, std::ldexp(1.0, 62),
     -std::ldexp(1.0, 62), std::ldexp(1.0, -63), 0.0},
    {"e0m7", ALTGRAD_FAMILY_FIXED_POINT, 8, 1, 0, 7, 0, ALTGRAD_ZERO_UNSIGNED, 0, 0, 0, 127.0 / 128, -1.0,
     1.0 / 128, 0.0},
    {"bf16", ALTGRAD_FAMILY_FLOAT, 16, 2, 8, 7, 127, ALTGRAD_ZERO_SIGNED, 1, 1, 254,
     (2.0 - std::ldexp(1.0, -7)) * std::ldexp(1.0, 127), -(2.0 - std::ldexp(1.0, -7)) * std::ldexp(1.0, 127),
     std::ldexp(1.0, -126), std::ldexp(1.0, -133)},
    {"fp16", ALTGRAD_FAMILY_FLOAT, 16, 2, 5, 10, 15, ALTGRAD_ZERO_SIGNED, 1, 1, 2046, 65504.0, -65504.0,
     std::ldexp(1.0, -14), std::ldexp(1.0, -24)},
    {"fp32", ALTGRAD_FAMILY_FLOAT, 32, 4, 8, 23, 127, ALTGRAD_ZERO_SIGNED, 1, 1, 2u * ((1u << 23) - 1u),
     static_cast<double>(FLT_MAX), -static_cast<double>(FLT_MAX), std::ldexp(1.0, -126),
     std::ldexp(1.0, -149)},
};

const PublishedInfo& published(const std::string& name) {
    for (const PublishedInfo& p : kPublished)
        if (name == p.name) return p;
    throw std::logic_error("no published info for " + name);
}

class PluginInfo : public ::testing::TestWithParam<std::string> {};

TEST_P(PluginInfo, LoadsThroughTheCAbiWithMatchingDescriptor) {
    const FormatPlugin& p = plugin(GetParam());
    const altgrad_entry* e = p.entry();
    EXPECT_GE(e->struct_size, sizeof(altgrad_entry));
    EXPECT_EQ(e->abi_version.major, ALTGRAD_ABI_VERSION_MAJOR);
    ASSERT_NE(e->descriptor, nullptr);
    EXPECT_STREQ(e->descriptor->name, GetParam().c_str());
    EXPECT_EQ(e->descriptor->kind, ALTGRAD_KIND_FORMAT);
    EXPECT_NE(e->format, nullptr);
    EXPECT_EQ(e->intervention, nullptr);
    EXPECT_EQ(e->diagnostic, nullptr);
    EXPECT_EQ(e->descriptor->param_count, 0u);
}

TEST_P(PluginInfo, GetInfoMatchesPublishedFacts) {
    const PublishedInfo& want = published(GetParam());
    const altgrad_format_info& i = plugin(GetParam()).info();
    EXPECT_EQ(i.struct_size, sizeof(altgrad_format_info));
    EXPECT_EQ(i.family, want.family);
    EXPECT_EQ(i.total_bits, want.total_bits);
    EXPECT_EQ(i.code_bytes, want.code_bytes);
    EXPECT_EQ(i.exponent_bits, want.exponent_bits);
    EXPECT_EQ(i.mantissa_bits, want.mantissa_bits);
    EXPECT_EQ(i.bias, want.bias);
    EXPECT_EQ(i.is_signed, 1u);
    EXPECT_EQ(i.zero, want.zero);
    EXPECT_EQ(i.has_subnormals, want.has_subnormals);
    EXPECT_EQ(i.has_inf, want.has_inf);
    EXPECT_EQ(i.nan_code_count, want.nan_code_count);
    EXPECT_EQ(i.max_finite, want.max_finite);
    EXPECT_EQ(i.lowest_finite, want.lowest_finite);
    EXPECT_EQ(i.min_normal, want.min_normal);
    EXPECT_EQ(i.min_subnormal, want.min_subnormal);
    const uint32_t all_modes = (1u << ALTGRAD_ROUND_NEAREST_EVEN) | (1u << ALTGRAD_ROUND_STOCHASTIC) |
                               (1u << ALTGRAD_ROUND_TOWARD_ZERO);
    EXPECT_EQ(i.rounding_modes & all_modes, all_modes);
    EXPECT_TRUE(i.memory_kinds & (1u << ALTGRAD_MEMORY_HOST));
}

TEST_P(PluginInfo, CanonicalNanCodeDecodesToNan) {
    const FormatPlugin& p = plugin(GetParam());
    if (p.info().nan_code_count == 0) {
        // Only E0M7 (two's-complement Q0.7) has no NaN: every code is a number.
        EXPECT_EQ(std::string(GetParam()), "e0m7");
        return;
    }
    const DecodeResult d = p.decode({p.info().canonical_nan_code});
    ASSERT_EQ(d.status, ALTGRAD_STATUS_OK) << d.message;
    EXPECT_TRUE(std::isnan(d.out[0]));
}

TEST_P(PluginInfo, GetInfoWritesOnlyFieldsInsideACallersSmallerStruct) {
    const FormatPlugin& p = plugin(GetParam());
    // A v1.0 caller that only knows the fields up to total_bits.
    altgrad_format_info i;
    std::memset(&i, 0xCD, sizeof i);
    i.struct_size = offsetof(altgrad_format_info, total_bits) + sizeof(uint32_t);
    altgrad_error err = blank_error();
    ASSERT_EQ(p.vtable()->get_info(p.instance(), &i, &err), ALTGRAD_STATUS_OK) << err.message;
    EXPECT_EQ(i.total_bits, published(GetParam()).total_bits);
    unsigned char tail[sizeof(uint32_t)];
    std::memcpy(tail, &i.code_bytes, sizeof tail);
    for (unsigned char b : tail) EXPECT_EQ(b, 0xCD) << "wrote past the caller's struct_size";
}

INSTANTIATE_TEST_SUITE_P(AllPlugins, PluginInfo, ::testing::ValuesIn(bundled_plugin_names()),
                         PluginNameGen());

// ---------------------------------------------------------------------------
// Decode of every code.
// ---------------------------------------------------------------------------
class PluginDecode : public ::testing::TestWithParam<std::string> {};

TEST_P(PluginDecode, EveryCodeDecodesToTheIndependentTableValue) {
    const FormatModel& m = model(GetParam());
    const FormatPlugin& p = plugin(GetParam());
    std::vector<uint32_t> codes(m.by_code.size());
    for (uint32_t c = 0; c < codes.size(); ++c) codes[c] = c;
    const DecodeResult d = p.decode(codes);
    ASSERT_EQ(d.status, ALTGRAD_STATUS_OK) << d.message;
    size_t bad = 0;
    for (uint32_t c = 0; c < codes.size(); ++c) {
        const float want = static_cast<float>(m.by_code[c]);
        if (!same_float(want, d.out[c])) {
            if (++bad <= 10)
                ADD_FAILURE() << GetParam() << " code 0x" << std::hex << c << ": expected " << hexf(want)
                              << " got " << hexf(d.out[c]);
        }
        if (std::isnan(d.out[c])) {
            EXPECT_TRUE(fbits(d.out[c]) & 0x00400000u) << "code " << c << " decodes to a signalling NaN";
        }
    }
    EXPECT_EQ(bad, 0u);
    // The table's own NaN count agrees with get_info.
    EXPECT_EQ(p.info().nan_code_count, m.nan_codes);
    EXPECT_EQ(p.info().max_finite, m.max);
    EXPECT_EQ(p.info().lowest_finite, m.lowest);
}

TEST_P(PluginDecode, DecodeDividesByTheScale) {
    const FormatModel& m = model(GetParam());
    const FormatPlugin& p = plugin(GetParam());
    std::vector<uint32_t> codes(m.by_code.size());
    for (uint32_t c = 0; c < codes.size(); ++c) codes[c] = c;
    for (float s : {4.0f, 0.0625f, 0.3f, 1000.5f}) {
        const DecodeResult d = p.decode(codes, s);
        ASSERT_EQ(d.status, ALTGRAD_STATUS_OK) << d.message;
        for (uint32_t c = 0; c < codes.size(); ++c)
            ASSERT_TRUE(same_float(static_cast<float>(m.by_code[c]) / s, d.out[c]))
                << GetParam() << " code " << c << " scale " << s << ": got " << hexf(d.out[c]);
    }
}

INSTANTIATE_TEST_SUITE_P(AllTabulatedPlugins, PluginDecode,
                         ::testing::Values("e5m2", "e4m3", "e3m4", "e1m6", "e7m0", "e0m7", "bf16", "fp16"),
                         PluginNameGen());

TEST(FP32, DecodeIsTheBitPatternForSampledCodes) {
    const FormatPlugin& p = plugin("fp32");
    std::mt19937 rng(99);
    std::vector<uint32_t> codes = {0u,          0x80000000u, 1u,          0x80000001u, 0x007FFFFFu,
                                   0x00800000u, 0x7F7FFFFFu, 0xFF7FFFFFu, 0x7F800000u, 0xFF800000u,
                                   0x7F800001u, 0x7FC00000u, 0xFFFFFFFFu};
    for (int i = 0; i < 200000; ++i) codes.push_back(static_cast<uint32_t>(rng()));
    const DecodeResult d = p.decode(codes);
    ASSERT_EQ(d.status, ALTGRAD_STATUS_OK) << d.message;
    for (size_t i = 0; i < codes.size(); ++i) {
        const float want = bfloat(codes[i]);
        if (std::isnan(want)) {
            ASSERT_TRUE(std::isnan(d.out[i])) << std::hex << codes[i];
            EXPECT_TRUE(fbits(d.out[i]) & 0x00400000u)
                << "code 0x" << std::hex << codes[i] << " decodes to a signalling NaN";
        } else {
            ASSERT_EQ(fbits(d.out[i]), codes[i]);
        }
    }
}

}  // namespace
