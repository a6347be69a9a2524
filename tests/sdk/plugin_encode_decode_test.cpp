// encode / decode of the bundled plugins, and the argument checks every
// conversion call makes.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstddef>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "test_common.hpp"

namespace {

using namespace agtest;

std::vector<float> without_nans(std::vector<float> xs) {
    std::vector<float> out;
    for (float x : xs)
        if (!std::isnan(x)) out.push_back(x);
    return out;
}

class PluginEncode : public ::testing::TestWithParam<std::string> {};

// Codes equal the reference's codes (any NaN code for NaN), decode(encode(x))
// equals quantize(x), and the counts of encode equal those of quantize.
TEST_P(PluginEncode, EncodeGivesTheReferenceCodeAndDecodeOfItEqualsQuantize) {
    const FormatModel& m = model(GetParam());
    const FormatPlugin& p = plugin(GetParam());
    std::vector<float> xs = edge_points(m);
    const std::vector<float> r = random_points(m, 50000, 31337);
    xs.insert(xs.end(), r.begin(), r.end());
    if (!m.has_nan) xs = without_nans(xs);
    std::vector<Mode> modes = all_modes(1.0f, 2024, 11);
    for (Mode mm : all_modes(0.3f, 2025, 0)) modes.push_back(mm);
    for (Mode mm : all_modes(64.0f, 2026, 1)) modes.push_back(mm);
    for (const Mode& mode : modes) {
        const EncodeResult e = p.encode(xs, mode);
        ASSERT_EQ(e.status, ALTGRAD_STATUS_OK) << describe(mode) << ": " << e.message;
        const QuantizeResult q = p.quantize(xs, mode);
        ASSERT_EQ(q.status, ALTGRAD_STATUS_OK) << q.message;
        EXPECT_EQ(e.overflow, q.overflow) << describe(mode);
        EXPECT_EQ(e.underflow, q.underflow) << describe(mode);
        const DecodeResult d = p.decode(e.codes, mode.scale);
        ASSERT_EQ(d.status, ALTGRAD_STATUS_OK) << d.message;
        const Expected want = reference_quantize(m, xs, mode);
        size_t bad = 0;
        for (size_t i = 0; i < xs.size(); ++i) {
            if (want.ref[i].ambiguous) continue;
            const uint32_t c = e.codes[i];
            const bool code_ok = want.ref[i].code < 0 ? std::isnan(m.by_code.at(c))
                                                      : c == static_cast<uint32_t>(want.ref[i].code);
            const bool roundtrip_ok = same_float(d.out[i], q.out[i]);
            if (!code_ok || !roundtrip_ok) {
                if (++bad <= 10)
                    ADD_FAILURE() << GetParam() << " " << describe(mode) << " x=" << hexf(xs[i])
                                  << ": code 0x" << std::hex << c << " (expected 0x" << want.ref[i].code
                                  << std::dec << "), decoded " << hexf(d.out[i]) << ", quantize "
                                  << hexf(q.out[i]);
            }
        }
        EXPECT_EQ(bad, 0u) << describe(mode);
    }
}

TEST_P(PluginEncode, EveryCodeEncodesBackToItself) {
    const FormatModel& m = model(GetParam());
    const FormatPlugin& p = plugin(GetParam());
    std::vector<uint32_t> codes(m.by_code.size());
    for (uint32_t c = 0; c < codes.size(); ++c) codes[c] = c;
    const DecodeResult d = p.decode(codes);
    ASSERT_EQ(d.status, ALTGRAD_STATUS_OK);
    for (altgrad_rounding r :
         {ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_ROUND_TOWARD_ZERO, ALTGRAD_ROUND_STOCHASTIC}) {
        Mode mode;
        mode.rounding = r;
        mode.overflow = ALTGRAD_OVERFLOW_NONFINITE;  // so Inf codes stay Inf
        const EncodeResult e = p.encode(d.out, mode);
        ASSERT_EQ(e.status, ALTGRAD_STATUS_OK) << e.message;
        EXPECT_EQ(e.overflow, m.has_inf ? 2u : 0u) << rounding_name(r);  // the two Infs
        EXPECT_EQ(e.underflow, 0u);
        for (uint32_t c = 0; c < codes.size(); ++c) {
            if (std::isnan(m.by_code[c])) {
                ASSERT_EQ(e.codes[c], p.info().canonical_nan_code) << "NaN code 0x" << std::hex << c;
                ASSERT_TRUE(std::isnan(m.by_code[e.codes[c]]));
            } else {
                ASSERT_EQ(e.codes[c], c)
                    << GetParam() << " " << rounding_name(r) << ": code 0x" << std::hex << c << " (value "
                    << hexf(d.out[c]) << ") encodes to 0x" << e.codes[c];
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(AllTabulatedPlugins, PluginEncode,
                         ::testing::Values("e5m2", "e4m3", "e3m4", "e1m6", "e7m0", "e0m7", "bf16", "fp16"),
                         PluginNameGen());

TEST(FP32, EncodeIsTheBitPatternAndNanEncodesToTheCanonicalNan) {
    const FormatPlugin& p = plugin("fp32");
    std::vector<float> xs;
    std::mt19937 rng(3);
    for (int i = 0; i < 100000; ++i) xs.push_back(bfloat(static_cast<uint32_t>(rng())));
    const EncodeResult e = p.encode(xs, Mode{});
    ASSERT_EQ(e.status, ALTGRAD_STATUS_OK);
    for (size_t i = 0; i < xs.size(); ++i) {
        if (std::isnan(xs[i])) {
            ASSERT_EQ(e.codes[i], p.info().canonical_nan_code);
            ASSERT_TRUE(std::isnan(bfloat(e.codes[i])));
        } else if (std::isinf(xs[i])) {
            ASSERT_EQ(bfloat(e.codes[i]), xs[i] > 0 ? FLT_MAX : -FLT_MAX);  // saturate
        } else {
            ASSERT_EQ(e.codes[i], fbits(xs[i]));
        }
    }
}

// ---------------------------------------------------------------------------
// E0M7 has no NaN code.
// ---------------------------------------------------------------------------
TEST(E0M7, EncodeOfNanIsNotRepresentableAndNamesTheElement) {
    const FormatPlugin& p = plugin("e0m7");
    std::vector<float> xs(50, 0.25f);
    xs[37] = std::numeric_limits<float>::quiet_NaN();
    xs[41] = std::numeric_limits<float>::quiet_NaN();
    for (altgrad_overflow o : {ALTGRAD_OVERFLOW_SATURATE, ALTGRAD_OVERFLOW_NONFINITE}) {
        Mode mode;
        mode.overflow = o;
        const EncodeResult e = p.encode(xs, mode);
        EXPECT_EQ(e.status, ALTGRAD_STATUS_NOT_REPRESENTABLE);
        EXPECT_NE(e.message.find("37"), std::string::npos) << "message: " << e.message;
    }
    // quantize keeps NaN visible instead.
    const QuantizeResult q = p.quantize(xs, Mode{});
    ASSERT_EQ(q.status, ALTGRAD_STATUS_OK);
    EXPECT_TRUE(std::isnan(q.out[37]));
    EXPECT_EQ(q.out[0], 0.25f);
}

TEST(E0M7, EncodeWritesTwosComplementCodes) {
    const FormatPlugin& p = plugin("e0m7");
    const EncodeResult e = p.encode({0.0f, 1.0f / 128, -1.0f / 128, 127.0f / 128, -1.0f, 5.0f, -5.0f, -0.0f});
    ASSERT_EQ(e.status, ALTGRAD_STATUS_OK);
    EXPECT_EQ(e.codes, (std::vector<uint32_t>{0x00, 0x01, 0xFF, 0x7F, 0x80, 0x7F, 0x80, 0x00}));
    EXPECT_EQ(e.overflow, 2u);
}

TEST(E4M3, EncodeOfNanAndOfOverflowUnderNonfiniteIsANanCode) {
    const FormatPlugin& p = plugin("e4m3");
    Mode mode;
    mode.overflow = ALTGRAD_OVERFLOW_NONFINITE;
    const EncodeResult e = p.encode(
        {std::numeric_limits<float>::quiet_NaN(), 1000.0f, -std::numeric_limits<float>::infinity()}, mode);
    ASSERT_EQ(e.status, ALTGRAD_STATUS_OK);
    for (uint32_t c : e.codes) EXPECT_EQ(c & 0x7Fu, 0x7Fu) << "code 0x" << std::hex << c;
}

TEST(E1M6, SpecialCodesOfP3109) {
    const FormatPlugin& p = plugin("e1m6");
    Mode mode;
    mode.overflow = ALTGRAD_OVERFLOW_NONFINITE;
    const float inf = std::numeric_limits<float>::infinity();
    const EncodeResult e =
        p.encode({std::numeric_limits<float>::quiet_NaN(), inf, -inf, -0.0f, -1e-9f, 1.0f}, mode);
    ASSERT_EQ(e.status, ALTGRAD_STATUS_OK);
    EXPECT_EQ(e.codes, (std::vector<uint32_t>{0x80, 0x7F, 0xFF, 0x00, 0x00, 0x40}));
}

TEST(E7M0, SpecialCodesOfP3109) {
    const FormatPlugin& p = plugin("e7m0");
    Mode mode;
    mode.overflow = ALTGRAD_OVERFLOW_NONFINITE;
    const float inf = std::numeric_limits<float>::infinity();
    const EncodeResult e = p.encode({std::numeric_limits<float>::quiet_NaN(), inf, -inf, -0.0f, 1.0f, 0.5f,
                                     std::ldexp(1.0f, 62), -std::ldexp(1.0f, -63)},
                                    mode);
    ASSERT_EQ(e.status, ALTGRAD_STATUS_OK);
    EXPECT_EQ(e.codes, (std::vector<uint32_t>{0x80, 0x7F, 0xFF, 0x00, 0x40, 0x3F, 0x7E, 0x81}));
}

// ---------------------------------------------------------------------------
// Argument checks, for every plugin.
// ---------------------------------------------------------------------------
class PluginArguments : public ::testing::TestWithParam<std::string> {};

TEST_P(PluginArguments, BadScalesAreInvalidArguments) {
    const FormatPlugin& p = plugin(GetParam());
    const std::vector<float> xs = {1.0f, 2.0f};
    for (float s : {0.0f, -0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(),
                    std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()}) {
        Mode mode;
        mode.scale = s;
        const QuantizeResult q = p.quantize(xs, mode);
        EXPECT_EQ(q.status, ALTGRAD_STATUS_INVALID_ARGUMENT) << "quantize, scale " << s;
        EXPECT_FALSE(q.message.empty());
        EXPECT_EQ(p.encode(xs, mode).status, ALTGRAD_STATUS_INVALID_ARGUMENT) << "encode, scale " << s;
        EXPECT_EQ(p.decode({0u, 1u}, s).status, ALTGRAD_STATUS_INVALID_ARGUMENT) << "decode, scale " << s;
    }
}

TEST_P(PluginArguments, NullBuffersWithACountAreInvalidArguments) {
    const FormatPlugin& p = plugin(GetParam());
    float buf[4] = {1, 2, 3, 4};
    uint32_t codes[4] = {0, 0, 0, 0};
    altgrad_quantize_args q1 = quantize_args(nullptr, buf, 4, Mode{});
    altgrad_quantize_args q2 = quantize_args(buf, nullptr, 4, Mode{});
    EXPECT_EQ(p.quantize_raw(&q1), ALTGRAD_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(p.quantize_raw(&q2), ALTGRAD_STATUS_INVALID_ARGUMENT);
    altgrad_encode_args e1 = encode_args(nullptr, codes, 4, Mode{});
    altgrad_encode_args e2 = encode_args(buf, nullptr, 4, Mode{});
    EXPECT_EQ(p.encode_raw(&e1), ALTGRAD_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(p.encode_raw(&e2), ALTGRAD_STATUS_INVALID_ARGUMENT);
    altgrad_decode_args d1 = decode_args(nullptr, buf, 4, 1.0f);
    altgrad_decode_args d2 = decode_args(codes, nullptr, 4, 1.0f);
    EXPECT_EQ(p.decode_raw(&d1), ALTGRAD_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(p.decode_raw(&d2), ALTGRAD_STATUS_INVALID_ARGUMENT);
    // A NULL args struct.
    EXPECT_EQ(p.quantize_raw(nullptr), ALTGRAD_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(p.encode_raw(nullptr), ALTGRAD_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(p.decode_raw(nullptr), ALTGRAD_STATUS_INVALID_ARGUMENT);
}

TEST_P(PluginArguments, ZeroCountWithNullBuffersIsOk) {
    const FormatPlugin& p = plugin(GetParam());
    altgrad_quantize_args q = quantize_args(nullptr, nullptr, 0, Mode{});
    q.overflow_count = 99;
    EXPECT_EQ(p.quantize_raw(&q), ALTGRAD_STATUS_OK);
    EXPECT_EQ(q.overflow_count, 0u);
    altgrad_encode_args e = encode_args(nullptr, nullptr, 0, Mode{});
    EXPECT_EQ(p.encode_raw(&e), ALTGRAD_STATUS_OK);
    altgrad_decode_args d = decode_args(nullptr, nullptr, 0, 1.0f);
    EXPECT_EQ(p.decode_raw(&d), ALTGRAD_STATUS_OK);
}

TEST_P(PluginArguments, UnknownRoundingOrOverflowEnumIsInvalidArgument) {
    const FormatPlugin& p = plugin(GetParam());
    float in[2] = {1.0f, 2.0f}, out[2] = {0, 0};
    uint32_t codes[2] = {0, 0};
    for (int r : {3, 7, -1, 1000}) {
        altgrad_quantize_args q = quantize_args(in, out, 2, Mode{});
        set_raw_enum(q.rounding, r);
        std::string msg;
        EXPECT_EQ(p.quantize_raw(&q, &msg), ALTGRAD_STATUS_INVALID_ARGUMENT) << "rounding " << r;
        EXPECT_FALSE(msg.empty());
        altgrad_encode_args e = encode_args(in, codes, 2, Mode{});
        set_raw_enum(e.rounding, r);
        EXPECT_EQ(p.encode_raw(&e), ALTGRAD_STATUS_INVALID_ARGUMENT) << "rounding " << r;
    }
    for (int o : {2, 9, -1}) {
        altgrad_quantize_args q = quantize_args(in, out, 2, Mode{});
        set_raw_enum(q.overflow, o);
        EXPECT_EQ(p.quantize_raw(&q), ALTGRAD_STATUS_INVALID_ARGUMENT) << "overflow " << o;
        altgrad_encode_args e = encode_args(in, codes, 2, Mode{});
        set_raw_enum(e.overflow, o);
        EXPECT_EQ(p.encode_raw(&e), ALTGRAD_STATUS_INVALID_ARGUMENT) << "overflow " << o;
    }
}

TEST_P(PluginArguments, PartiallyOverlappingBuffersAreInvalidButInPlaceIsFine) {
    const FormatPlugin& p = plugin(GetParam());
    std::vector<float> buf = {0.3f, 0.7f, 1.1f, -2.5f, 3.3f, 0.01f, 100.0f, -0.2f, 0.5f, 0.9f};
    const std::vector<float> original = buf;
    for (long shift : {1L, -1L, 4L, -4L}) {
        float* in = buf.data() + (shift > 0 ? 0 : -shift);
        float* out = in + shift;
        altgrad_quantize_args a = quantize_args(in, out, 6, Mode{});
        std::string msg;
        EXPECT_EQ(p.quantize_raw(&a, &msg), ALTGRAD_STATUS_INVALID_ARGUMENT) << "output = input + " << shift;
        EXPECT_FALSE(msg.empty());
    }
    EXPECT_EQ(buf, original) << "a refused call wrote into the buffer";
    // Adjacent (touching, not overlapping) buffers are fine.
    altgrad_quantize_args adj = quantize_args(buf.data(), buf.data() + 5, 5, Mode{});
    EXPECT_EQ(p.quantize_raw(&adj), ALTGRAD_STATUS_OK);
    // In place gives what an out-of-place call gives.
    std::vector<float> inplace = original;
    const QuantizeResult want = p.quantize(original, Mode{});
    altgrad_quantize_args ip = quantize_args(inplace.data(), inplace.data(), inplace.size(), Mode{});
    ASSERT_EQ(p.quantize_raw(&ip), ALTGRAD_STATUS_OK);
    for (size_t i = 0; i < inplace.size(); ++i) EXPECT_TRUE(same_float(inplace[i], want.out[i]));
}

// Host buffers passed as CUDA memory. A host-only build (the default) has no
// CUDA implementation: UNSUPPORTED. A build with ALTGRAD_CUDA advertises CUDA
// and refuses the host pointers: INVALID_ARGUMENT where a GPU is present,
// UNSUPPORTED where none is (see tests/cuda/ for the GPU itself). Either way
// nothing is written.
TEST_P(PluginArguments, HostBuffersPassedAsCudaMemoryAreRefused) {
    const FormatPlugin& p = plugin(GetParam());
    const bool cuda_build = ALTGRAD_TEST_PLUGINS_CUDA;
    EXPECT_EQ((p.info().memory_kinds & (1u << ALTGRAD_MEMORY_CUDA)) != 0, cuda_build);
    auto refused = [&](altgrad_status status) {
        if (!cuda_build) return status == ALTGRAD_STATUS_UNSUPPORTED;
        return status == ALTGRAD_STATUS_INVALID_ARGUMENT || status == ALTGRAD_STATUS_UNSUPPORTED;
    };
    float in[2] = {1, 2}, out[2] = {0, 0};
    uint32_t codes[2] = {0, 0};
    altgrad_quantize_args q = quantize_args(in, out, 2, Mode{});
    q.memory = ALTGRAD_MEMORY_CUDA;
    std::string msg;
    const altgrad_status qs = p.quantize_raw(&q, &msg);
    EXPECT_TRUE(refused(qs)) << "status " << qs << ": " << msg;
    EXPECT_FALSE(msg.empty());
    altgrad_encode_args e = encode_args(in, codes, 2, Mode{});
    e.memory = ALTGRAD_MEMORY_CUDA;
    EXPECT_TRUE(refused(p.encode_raw(&e)));
    altgrad_decode_args d = decode_args(codes, out, 2, 1.0f);
    d.memory = ALTGRAD_MEMORY_CUDA;
    EXPECT_TRUE(refused(p.decode_raw(&d)));
    EXPECT_EQ(out[0], 0.0f);
    EXPECT_EQ(out[1], 0.0f);
    EXPECT_EQ(codes[0], 0u);
    EXPECT_EQ(codes[1], 0u);
}

TEST_P(PluginArguments, ArgsStructSmallerThanV1IsInvalidArgument) {
    const FormatPlugin& p = plugin(GetParam());
    float in[2] = {1, 2}, out[2] = {0, 0};
    altgrad_quantize_args q = quantize_args(in, out, 2, Mode{});
    q.struct_size = offsetof(altgrad_quantize_args, overflow_count);
    EXPECT_EQ(p.quantize_raw(&q), ALTGRAD_STATUS_INVALID_ARGUMENT);
}

INSTANTIATE_TEST_SUITE_P(AllPlugins, PluginArguments, ::testing::ValuesIn(bundled_plugin_names()),
                         PluginNameGen());

// An altgrad_memory_kind value the ABI does not define is a broken contract
// (status.h: INVALID_ARGUMENT), not a valid request the plugin declines.
// All plugins share the SDK adapter, so one plugin stands for all.
TEST(Arguments, UnknownMemoryKindIsInvalidArgumentInQuantizeEncodeAndDecode) {
    const FormatPlugin& p = plugin("e5m2");
    float in[2] = {1, 2}, out[2] = {0, 0};
    uint32_t codes[2] = {0, 0};
    const int bogus = 7;
    altgrad_quantize_args q = quantize_args(in, out, 2, Mode{});
    set_raw_enum(q.memory, bogus);
    EXPECT_EQ(p.quantize_raw(&q), ALTGRAD_STATUS_INVALID_ARGUMENT) << "quantize";
    altgrad_encode_args e = encode_args(in, codes, 2, Mode{});
    set_raw_enum(e.memory, bogus);
    EXPECT_EQ(p.encode_raw(&e), ALTGRAD_STATUS_INVALID_ARGUMENT) << "encode";
    altgrad_decode_args d = decode_args(codes, out, 2, 1.0f);
    set_raw_enum(d.memory, bogus);
    EXPECT_EQ(p.decode_raw(&d), ALTGRAD_STATUS_INVALID_ARGUMENT) << "decode";
}

}  // namespace
