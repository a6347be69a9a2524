// Block scaling (ABI 1.2, abi/format.h): a call with block_scales is, by the
// ABI's definition, the concatenation of one call per block with that block's
// scale and offset + (its first index). Every bundled format is checked
// against exactly that, in every mode, with blocks that divide the call and
// blocks that leave a short last one; one E4M3 call worked by hand; and the
// arguments the ABI refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "test_common.hpp"

namespace {

using namespace agtest;

const char* const kFormats[] = {"e5m2", "e4m3", "e3m4",     "e1m6",     "e7m0",     "e0m7", "bf16",
                                "fp16", "fp32", "fp4_e2m1", "fp6_e2m3", "fp6_e3m2", "ue8m0"};

// Inputs over a wide range (some beyond each format's max after scaling,
// some below its smallest subnormal), NaN and Inf.
std::vector<float> inputs(size_t n) {
    std::vector<float> xs;
    for (size_t i = 0; i < n; ++i) {
        const uint64_t h = (i + 7) * 0x9E3779B97F4A7C15ull;
        const float x =
            std::ldexp(static_cast<float>(h % 8192) / 4096.0f - 1.0f, static_cast<int>(h >> 58) - 32);
        xs.push_back(i % 97 == 5 ? std::nanf("") : i % 89 == 3 ? -std::numeric_limits<float>::infinity() : x);
    }
    return xs;
}

// Scales as a block-scaling host makes them: powers of two over a wide range
// (MX), and general values (amax / max). powers_only: an MX host's, from
// 2^-126 to 2^126 (whose reciprocals are normal floats: the SDK multiplies by
// them) with one 2^127 at block 20 (whose reciprocal is not: it divides), so
// that the first 512 elements of blocks of 32 take the reciprocal path and
// the next 512 the division.
std::vector<float> block_scales(size_t blocks, bool powers_only) {
    std::vector<float> s;
    for (size_t b = 0; b < blocks; ++b) {
        const int i = static_cast<int>(b);
        if (powers_only)
            s.push_back(std::ldexp(1.0f, b == 20 ? 127 : b % 2 ? -126 + 3 * (i % 84) : 126 - 3 * (i % 84)));
        else s.push_back(b % 3 == 2 ? 0.37f * static_cast<float>(b + 1) : std::ldexp(1.0f, i % 41 - 20));
    }
    return s;
}

TEST(BlockScales, EachBlockIsACallOfItsOwnInEveryFormatAndMode) {
    const size_t count = 1001;
    const std::vector<float> xs = inputs(count);
    for (const char* name : kFormats) {
        const FormatPlugin& p = plugin(name);
        for (const auto& [block_size, powers_only] : std::vector<std::pair<size_t, bool>>{
                 {1, false}, {32, false}, {32, true}, {100, false}, {100, true}, {5000, false}}) {
            const std::vector<float> scales =
                block_scales((count + block_size - 1) / block_size, powers_only);
            for (Mode m : all_modes(1.0f, 0xB10Cull, 13)) {
                const std::string where = std::string(name) + " " + describe(m) + " block " +
                                          std::to_string(block_size) +
                                          (powers_only ? " (powers of two)" : "");
                // The definition: one scalar call per block.
                std::vector<float> want_out;
                std::vector<uint32_t> want_codes;
                uint64_t want_overflow = 0, want_underflow = 0, want_code_overflow = 0;
                std::vector<float> encodable = xs;
                if (p.info().nan_code_count == 0)
                    std::replace_if(
                        encodable.begin(), encodable.end(), [](float x) { return std::isnan(x); }, 1.0f);
                for (size_t b0 = 0; b0 < count; b0 += block_size) {
                    const size_t n = std::min(block_size, count - b0);
                    Mode one = m;
                    one.scale = scales[b0 / block_size];
                    one.offset = m.offset + b0;
                    const QuantizeResult q = p.quantize({xs.begin() + b0, xs.begin() + b0 + n}, one);
                    ASSERT_EQ(q.status, ALTGRAD_STATUS_OK) << where << ": " << q.message;
                    want_out.insert(want_out.end(), q.out.begin(), q.out.end());
                    want_overflow += q.overflow;
                    want_underflow += q.underflow;
                    const EncodeResult e =
                        p.encode({encodable.begin() + b0, encodable.begin() + b0 + n}, one);
                    ASSERT_EQ(e.status, ALTGRAD_STATUS_OK) << where << ": " << e.message;
                    want_codes.insert(want_codes.end(), e.codes.begin(), e.codes.end());
                    want_code_overflow += e.overflow;
                }
                // One block-scaled call.
                m.scale = 1e-30f;  // ignored when block scales are given
                m.block_scales = scales.data();
                m.block_size = block_size;
                const QuantizeResult got = p.quantize(xs, m);
                ASSERT_EQ(got.status, ALTGRAD_STATUS_OK) << where << ": " << got.message;
                for (size_t i = 0; i < count; ++i)
                    ASSERT_TRUE(same_float(got.out[i], want_out[i]))
                        << where << ": element " << i << " x=" << hexf(xs[i]) << " got " << hexf(got.out[i])
                        << " want " << hexf(want_out[i]);
                EXPECT_EQ(got.overflow, want_overflow) << where;
                EXPECT_EQ(got.underflow, want_underflow) << where;
                const EncodeResult codes = p.encode(encodable, m);
                ASSERT_EQ(codes.status, ALTGRAD_STATUS_OK) << where << ": " << codes.message;
                EXPECT_EQ(codes.codes, want_codes) << where;
                EXPECT_EQ(codes.overflow, want_code_overflow) << where;
                // Decoding with the same block scales: value(code) / s of each block.
                const DecodeResult back = p.decode(codes.codes, 1e-30f, scales.data(), block_size);
                ASSERT_EQ(back.status, ALTGRAD_STATUS_OK) << where << ": " << back.message;
                for (size_t b0 = 0; b0 < count; b0 += block_size) {
                    const size_t n = std::min(block_size, count - b0);
                    const DecodeResult one = p.decode(
                        {codes.codes.begin() + b0, codes.codes.begin() + b0 + n}, scales[b0 / block_size]);
                    for (size_t j = 0; j < n; ++j)
                        ASSERT_TRUE(same_float(back.out[b0 + j], one.out[j]))
                            << where << ": decode element " << b0 + j;
                }
            }
        }
    }
}

// E4M3 (max 448, nearest-even, saturating), blocks of two, scales 1/2 and 128:
//   1000 * 1/2 = 500, beyond 448 (it rounds to 512): saturates, 448 * 2 = 896
//   3 * 1/2 = 1.5, exact: 3
//   0.3 * 128 = 38.4 (float 0.3 * 128 is exact), grid step 4 in [32, 64): 40, / 128 = 0.3125
//   -0.001 * 128 = -0.128, grid step 1/64 in [1/8, 1/4): -0.125, / 128 = -2^-10
TEST(BlockScales, AnE4M3CallWorkedByHand) {
    const std::vector<float> xs = {1000.0f, 3.0f, 0.3f, -0.001f};
    const std::vector<float> scales = {0.5f, 128.0f};
    Mode m;
    m.block_scales = scales.data();
    m.block_size = 2;
    const QuantizeResult got = plugin("e4m3").quantize(xs, m);
    ASSERT_EQ(got.status, ALTGRAD_STATUS_OK) << got.message;
    EXPECT_EQ(got.out, (std::vector<float>{896.0f, 3.0f, 0.3125f, -0.0009765625f}));
    EXPECT_EQ(got.overflow, 1u);
    EXPECT_EQ(got.underflow, 0u);
}

TEST(BlockScales, BadBlockArgumentsAreRefusedNamingTheBlock) {
    const FormatPlugin& p = plugin("e4m3");
    const std::vector<float> xs(10, 1.0f);
    for (float bad : {0.0f, -1.0f, std::nanf(""), std::numeric_limits<float>::infinity(), -0.0f}) {
        std::vector<float> scales = {1.0f, 2.0f, 4.0f};
        scales[2] = bad;  // the short last block (elements 8 and 9)
        Mode m;
        m.block_scales = scales.data();
        m.block_size = 4;
        const QuantizeResult q = p.quantize(xs, m);
        EXPECT_EQ(q.status, ALTGRAD_STATUS_INVALID_ARGUMENT) << bad;
        EXPECT_NE(q.message.find("block scale 2"), std::string::npos) << q.message;
        EXPECT_EQ(p.encode(xs, m).status, ALTGRAD_STATUS_INVALID_ARGUMENT) << bad;
        EXPECT_EQ(p.decode(std::vector<uint32_t>(10, 0x38u), 1.0f, scales.data(), 4).status,
                  ALTGRAD_STATUS_INVALID_ARGUMENT)
            << bad;
    }
    const std::vector<float> scales = {1.0f};
    Mode zero_size;
    zero_size.block_scales = scales.data();
    zero_size.block_size = 0;
    const QuantizeResult q = p.quantize(xs, zero_size);
    EXPECT_EQ(q.status, ALTGRAD_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(q.message.find("block_size"), std::string::npos) << q.message;
    // Nothing to scale: an empty call with block scales is fine.
    zero_size.block_size = 32;
    EXPECT_EQ(p.quantize({}, zero_size).status, ALTGRAD_STATUS_OK);
}

// A host built against ABI 1.0/1.1 passes the shorter struct: whatever lies
// beyond it is not read, and `scale` applies to every element.
TEST(BlockScales, AnOlderHostsStructUsesTheScalarScale) {
    const FormatPlugin& p = plugin("e4m3");
    const std::vector<float> xs = {1.0f, 2.0f, 3.0f};
    std::vector<float> out(3);
    const float garbage_scales[] = {0.0f};
    Mode m;
    m.scale = 2.0f;
    m.block_scales = garbage_scales;  // beyond the old struct's end: must not be read
    m.block_size = 1;
    altgrad_quantize_args a = quantize_args(xs.data(), out.data(), xs.size(), m);
    a.struct_size = offsetof(altgrad_quantize_args, block_scales);
    ASSERT_EQ(p.quantize_raw(&a), ALTGRAD_STATUS_OK);
    EXPECT_EQ(out, xs);  // 2, 4 and 6 are E4M3 values: q(x * 2) / 2 = x
}

}  // namespace
