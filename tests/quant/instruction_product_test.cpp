// quant::instruction_product (instruction_product.hpp): a product through an
// accumulator plugin's instructions, as the GPU kernels run it.
//
// The truth is the H200's own matrix products (tests/data/mma/README.md):
// random E4M3 operands multiplied by cuBLASLt through torch._scaled_mm, with
// fast accumulation (the FP8 wgmma instructions chained along K, never
// promoted) and without (promoted into float32 every 128 elements), and BF16
// operands by torch.mm with float32 output (the BF16 wgmma chained).
// sm90_wgmma_fp8 and sm90_wgmma_fp16 through instruction_product must give
// every output's bits. ALTGRAD_MMA_CAPTURE_DIR names another folder of such
// files (the whole capture: make_subset.py --rows 256); the counts per case
// are printed either way. Block scales are checked on sums exact in any
// accumulator, the errors by their messages.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "plugins/registry.hpp"
#include "quant/instruction_product.hpp"
#include "util/error.hpp"

namespace {

using altgrad::host::accumulator_handle;
using altgrad::host::format_handle;
using altgrad::host::registry;
namespace quant = altgrad::host::quant;

#ifndef ALTGRAD_MMA_DATA_DIR
#error "ALTGRAD_MMA_DATA_DIR must name tests/data/mma"
#endif

registry& bundled() {
    static registry r(ALTGRAD_BUNDLED_PLUGIN_DIR);
    return r;
}

std::shared_ptr<accumulator_handle> accumulator(const std::string& name) {
    return accumulator_handle::create(bundled().load(name), {{"accumulator", "float32"}});
}

std::shared_ptr<format_handle> format(const std::string& name) {
    return format_handle::create(bundled().load(name));
}

uint32_t fbits(float x) {
    uint32_t b = 0;
    std::memcpy(&b, &x, sizeof b);
    return b;
}

// One case of the capture: a [m, k] and b [n, k] as float32 values of their
// codes, the outputs of each variant (default, then fast if captured).
struct capture {
    bool bf16 = false;
    size_t m = 0, n = 0, k = 0;
    std::vector<float> a, b;
    std::vector<std::vector<uint32_t>> outputs;
};

uint32_t read_u32(const std::vector<unsigned char>& bytes, size_t at) {
    return uint32_t{bytes.at(at)} | uint32_t{bytes.at(at + 1)} << 8 | uint32_t{bytes.at(at + 2)} << 16 |
           uint32_t{bytes.at(at + 3)} << 24;
}

// An OCP FP8 E4M3FN code's value (1 sign, 4 exponent bits of bias 7, 3
// mantissa bits, subnormals at exponent field 0); the capture holds no NaN code.
float e4m3(uint32_t c) {
    const uint32_t m = c & 7u, e = (c >> 3) & 15u;
    const double v = e == 0 ? std::ldexp(m, -9) : std::ldexp(m + 8.0, static_cast<int>(e) - 10);
    return static_cast<float>((c & 0x80u) ? -v : v);
}

// A BF16 code's value: the top half of a float32.
float bf16(uint32_t c) {
    const uint32_t b = c << 16;
    float x = 0;
    std::memcpy(&x, &b, sizeof x);
    return x;
}

capture read_capture(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    const std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)),
                                           std::istreambuf_iterator<char>());
    if (bytes.size() < 28 || std::string(bytes.begin(), bytes.begin() + 8) != "AGMMA001")
        throw std::runtime_error(path + ": not an AGMMA001 file");
    capture c;
    c.bf16 = read_u32(bytes, 8) == 2;
    c.m = read_u32(bytes, 12);
    c.n = read_u32(bytes, 16);
    c.k = read_u32(bytes, 20);
    const size_t variants = read_u32(bytes, 24), width = c.bf16 ? 2 : 1;
    size_t at = 28;
    for (std::vector<float>* operand : {&c.a, &c.b})
        for (size_t x = 0; x < (operand == &c.a ? c.m : c.n) * c.k; ++x, at += width)
            operand->push_back(c.bf16 ? bf16(uint32_t{bytes.at(at)} | uint32_t{bytes.at(at + 1)} << 8)
                                      : e4m3(bytes.at(at)));
    for (size_t v = 0; v < variants; ++v) {
        std::vector<uint32_t> out;
        for (size_t x = 0; x < c.m * c.n; ++x, at += 4) out.push_back(read_u32(bytes, at));
        c.outputs.push_back(out);
    }
    if (at != bytes.size())
        throw std::runtime_error(path + ": " + std::to_string(bytes.size() - at) + " bytes left over");
    return c;
}

capture read_case(const std::string& name) {
    const char* override_dir = std::getenv("ALTGRAD_MMA_CAPTURE_DIR");
    return read_capture(std::string(override_dir != nullptr ? override_dir : ALTGRAD_MMA_DATA_DIR) + "/" +
                        name + ".bin");
}

// The capture's product through instruction_product, as bits.
std::vector<uint32_t> product(const accumulator_handle& acc, const capture& c, size_t promote,
                              unsigned threads = 1) {
    quant::instruction_operands p;
    p.a = c.a.data();
    p.b = c.b.data();
    p.m = c.m;
    p.n = c.n;
    p.k = c.k;
    // The operands' smallest normal exponents, from the format plugins as the CLI and Python take them.
    p.a_min_exponent = p.b_min_exponent = quant::min_exponent(*format(c.bf16 ? "bf16" : "e4m3"));
    std::vector<float> out(c.m * c.n);
    quant::instruction_product(acc, p, promote, out.data(), threads);
    std::vector<uint32_t> bits;
    for (float x : out) bits.push_back(fbits(x));
    return bits;
}

size_t differing(const std::vector<uint32_t>& got, const std::vector<uint32_t>& want) {
    size_t n = 0;
    for (size_t x = 0; x < got.size(); ++x) n += got[x] != want[x];
    return n;
}

TEST(H200Capture, ChainedHopperInstructionsGiveEveryOutputsBits) {
    const auto fp8 = accumulator("sm90_wgmma_fp8"), wide = accumulator("sm90_wgmma_fp16");
    const char* cases[] = {"e4m3_k32_normal",  "e4m3_k32_spread",  "e4m3_k32_codes",   "e4m3_k64_normal",
                           "e4m3_k128_normal", "e4m3_k128_spread", "e4m3_k512_normal", "e4m3_k4096_normal",
                           "bf16_k16_spread",  "bf16_k256_spread"};
    size_t outputs = 0;
    for (const char* name : cases) {
        SCOPED_TRACE(name);
        const capture c = read_case(name);
        ASSERT_EQ(c.outputs.size(), c.bf16 ? 1u : 2u);
        const accumulator_handle& acc = c.bf16 ? *wide : *fp8;
        // default: promoted every 128 (FP8) or plain (BF16); fast: never promoted.
        const size_t d = differing(product(acc, c, c.bf16 ? 0 : 128), c.outputs[0]);
        EXPECT_EQ(d, 0u);
        std::printf("%-18s %zu x %zu, K %zu: default %zu of %zu outputs differ", name, c.m, c.n, c.k, d,
                    c.m * c.n);
        outputs += c.m * c.n;
        if (!c.bf16) {
            const size_t f = differing(product(acc, c, 0), c.outputs[1]);
            EXPECT_EQ(f, 0u);
            std::printf(", fast %zu", f);
            outputs += c.m * c.n;
        }
        std::printf("\n");
    }
    std::printf("%zu outputs compared\n", outputs);
}

TEST(InstructionProduct, ThreadsDoNotChangeTheResult) {
    const auto fp8 = accumulator("sm90_wgmma_fp8");
    const capture c = read_case("e4m3_k512_normal");
    for (unsigned threads : {2u, 3u, 7u, 0u}) {
        SCOPED_TRACE(threads);
        EXPECT_EQ(differing(product(*fp8, c, 128, threads), c.outputs[0]), 0u);
        EXPECT_EQ(differing(product(*fp8, c, 0, threads), c.outputs[1]), 0u);
    }
}

// Two rows of a and one of b, K = 64 (two instructions of 32, one UE8M0 block each), all ones:
// (i, 0) = 32 * sa[i][0] * sb[0] + 32 * sa[i][1] * sb[1], exact in any accumulator.
TEST(InstructionProduct, BlockScalesGoWithTheirInstruction) {
    const auto mx = accumulator_handle::create(bundled().load("sm100_tcgen05_mxf8f6f4"));
    const std::vector<float> a(2 * 64, 1.0f), b(64, 1.0f);
    const std::vector<float> sa = {2.0f, 4.0f, 0.25f, 8.0f}, sb = {1.0f, 0.5f};
    quant::instruction_operands p;
    p.a = a.data();
    p.b = b.data();
    p.m = 2;
    p.n = 1;
    p.k = 64;
    p.a_min_exponent = p.b_min_exponent = -6;
    p.scale_kind = ALTGRAD_ACC_SCALE_UE8M0_32;
    p.a_scales = sa.data();
    p.b_scales = sb.data();
    for (size_t promote : {0u, 32u}) {
        std::vector<float> c(2);
        quant::instruction_product(*mx, p, promote, c.data(), 2);
        EXPECT_EQ(c[0], 32 * 2.0f + 32 * 4.0f * 0.5f);
        EXPECT_EQ(c[1], 32 * 0.25f + 32 * 8.0f * 0.5f);
    }
    p.a_scales = nullptr;
    std::vector<float> c(2);
    EXPECT_THROW(quant::instruction_product(*mx, p, 0, c.data()), altgrad::host::error);
}

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const altgrad::host::error& e) {
        return e.what();
    }
    return "(no error)";
}

TEST(InstructionProduct, PromoteEveryMustBeAMultipleOfTheDepth) {
    const auto fp8 = accumulator("sm90_wgmma_fp8");
    const std::vector<float> a(64, 1.0f);
    quant::instruction_operands p;
    p.a = p.b = a.data();
    p.m = p.n = 1;
    p.k = 64;
    std::vector<float> c(1);
    EXPECT_EQ(
        error_of([&] { quant::instruction_product(*fp8, p, 48, c.data()); }),
        "promote_every 48: not a multiple of sm90_wgmma_fp8's instruction depth 32 (0: never promoted)");
    quant::instruction_product(*fp8, p, 64, c.data());
    EXPECT_EQ(c[0], 64.0f);
}

// Promotion scales (DeepSeek-V3's blocks): each promoted D times its
// interval's a and b scales. Ones over K = 64, promoted every 32: each D is
// 32, so the total is 32 * (2 * 8) + 32 * (4 * 0.5) = 576. Given for one
// operand only, or without promotion, they are refused.
TEST(InstructionProduct, PromotionScalesMultiplyEachPromotedSum) {
    const auto fp8 = accumulator("sm90_wgmma_fp8");
    const std::vector<float> ones(64, 1.0f), a_scales{2.0f, 4.0f}, b_scales{8.0f, 0.5f};
    quant::instruction_operands p;
    p.a = p.b = ones.data();
    p.m = p.n = 1;
    p.k = 64;
    p.a_promotion_scales = a_scales.data();
    p.b_promotion_scales = b_scales.data();
    std::vector<float> c(1);
    quant::instruction_product(*fp8, p, 32, c.data());
    EXPECT_EQ(c[0], 576.0f);
    EXPECT_EQ(error_of([&] { quant::instruction_product(*fp8, p, 0, c.data()); }),
              "promotion scales: for both operands, and with promote_every > 0");
    p.b_promotion_scales = nullptr;
    EXPECT_EQ(error_of([&] { quant::instruction_product(*fp8, p, 32, c.data()); }),
              "promotion scales: for both operands, and with promote_every > 0");
}

TEST(InstructionProduct, TheFormatsGiveTheMinimumExponentsAndRefuseOtherValues) {
    // OCP FP8: E4M3's smallest normal is 2^-6, E5M2's 2^-14; BF16's is float32's, 2^-126.
    EXPECT_EQ(quant::min_exponent(*format("e4m3")), -6);
    EXPECT_EQ(quant::min_exponent(*format("e5m2")), -14);
    EXPECT_EQ(quant::min_exponent(*format("bf16")), -126);
    // 448 and 2^-9 are E4M3 values, float32 0.3 (between 0.28125 and 0.3125; named by its exact
    // double) and 480 (past its max) are not.
    const std::vector<float> x = {448.0f, -0x1p-9f, 0.0f, 0.3f, 480.0f, 1.0f};
    EXPECT_EQ(error_of([&] { quant::check_values(*format("e4m3"), x.data(), 2, 3, "a"); }),
              "a[1, 0] = 0.30000001192092896 is not a value of e4m3");
    EXPECT_EQ(error_of([&] { quant::check_values(*format("e4m3"), x.data() + 4, 1, 2, "b"); }),
              "b[0, 0] = 480 is not a value of e4m3");
    EXPECT_EQ(error_of([&] { quant::check_values(*format("e4m3"), x.data(), 1, 3, "a"); }), "(no error)");
}

// The scale kinds by their definitions (abi/accumulator.h): UE8M0 a power of two (2^-127 .. 2^127) or
// NaN; UE4M3 an E4M3 value by magnitude: 3 bits of mantissa, 2^-9 steps below 2^-6, at most 448.
TEST(InstructionProduct, ScalesAreCheckedByTheirKind) {
    const auto check = [](altgrad_acc_scale_kind kind, std::vector<float> x) {
        return error_of([&] { quant::check_scales(kind, x.data(), 1, x.size(), "s"); });
    };
    EXPECT_EQ(check(ALTGRAD_ACC_SCALE_UE8M0_32, {0.5f, 0x1p-127f, 0x1p127f, NAN}), "(no error)");
    EXPECT_EQ(check(ALTGRAD_ACC_SCALE_UE8M0_32, {1.0f, 3.0f}), "s[0, 1] = 3 is not a ue8m0_32 scale");
    EXPECT_EQ(check(ALTGRAD_ACC_SCALE_UE8M0_32, {-2.0f}), "s[0, 0] = -2 is not a ue8m0_32 scale");
    EXPECT_EQ(check(ALTGRAD_ACC_SCALE_UE4M3_16, {-448.0f, 3.0f, 0x1p-9f, 0.0f, 30.0f}), "(no error)");
    EXPECT_EQ(check(ALTGRAD_ACC_SCALE_UE4M3_16, {17.0f}), "s[0, 0] = 17 is not a ue4m3_16 scale");
    EXPECT_EQ(check(ALTGRAD_ACC_SCALE_UE4M3_16, {480.0f}), "s[0, 0] = 480 is not a ue4m3_16 scale");
}

}  // namespace
