// The H200's own matrix products (tests/data/mma/README.md): random E4M3
// operands multiplied by cuBLASLt through torch._scaled_mm, with fast
// accumulation (the FP8 wgmma instructions chained along K, C = the previous
// D from +0, never promoted) and without (the same, the chain's D added into
// a float32 total, nearest even, every 128 elements and restarted at +0), and
// BF16 operands by torch.mm with float32 output (the BF16 wgmma chained).
// sm90_wgmma_fp8 and sm90_wgmma_fp16, loaded through the C ABI and chained
// the same way, must give every output's bits. ALTGRAD_MMA_CAPTURE_DIR names
// another folder of such files (the whole capture: make_subset.py --rows
// 256); the counts per case are printed either way.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "accumulator_host.hpp"

namespace {

using acctest::Accumulator;
using acctest::bfloat;
using acctest::fbits;

#ifndef ALTGRAD_MMA_DATA_DIR
#error "ALTGRAD_MMA_DATA_DIR must name tests/data/mma"
#endif

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

// An E4M3 (OCP FP8 E4M3FN) code's value; the capture holds no NaN code.
float e4m3(uint32_t c) { return acctest::minifloat(c, 4, 3, 7); }

capture read_capture(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    const std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)),
                                           std::istreambuf_iterator<char>());
    if (bytes.size() < 28 || std::string(bytes.begin(), bytes.begin() + 8) != "AGMMA001")
        throw std::runtime_error(path + ": not an AGMMA001 file");
    capture c;
    const uint32_t kind = read_u32(bytes, 8);
    c.bf16 = kind == 2;
    c.m = read_u32(bytes, 12);
    c.n = read_u32(bytes, 16);
    c.k = read_u32(bytes, 20);
    const size_t variants = read_u32(bytes, 24), width = c.bf16 ? 2 : 1;
    size_t at = 28;
    for (std::vector<float>* operand : {&c.a, &c.b})
        for (size_t x = 0; x < (operand == &c.a ? c.m : c.n) * c.k; ++x, at += width)
            operand->push_back(c.bf16
                                   ? bfloat((uint32_t{bytes.at(at)} | uint32_t{bytes.at(at + 1)} << 8) << 16)
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

// Columns [k0, k0 + width) of a row-major rows x k matrix.
std::vector<float> columns(const std::vector<float>& x, size_t rows, size_t k, size_t k0, size_t width) {
    std::vector<float> out;
    for (size_t r = 0; r < rows; ++r)
        out.insert(out.end(), x.begin() + r * k + k0, x.begin() + r * k + k0 + width);
    return out;
}

// The product as the kernel runs it: instructions of `depth` along K, C the
// previous D from +0; with promote > 0 the chain's D added into a float32
// total (nearest even) every `promote` elements and at the end, then restarted.
std::vector<uint32_t> chained(const Accumulator& acc, const capture& c, size_t promote) {
    const size_t depth = acc.info().depth;
    acctest::call call;
    call.m = c.m;
    call.n = c.n;
    call.a_min_exponent = call.b_min_exponent = c.bf16 ? -126 : -6;
    call.c.assign(c.m * c.n, 0.0f);
    std::vector<float> total(c.m * c.n, 0.0f);
    for (size_t k0 = 0; k0 < c.k; k0 += depth) {
        call.k = std::min(depth, c.k - k0);
        call.a = columns(c.a, c.m, c.k, k0, call.k);
        call.b = columns(c.b, c.n, c.k, k0, call.k);
        call.c = acc.dot_add(call);
        const bool last = k0 + call.k == c.k;
        if (promote != 0 && ((k0 + call.k) % promote == 0 || last)) {
            for (size_t x = 0; x < total.size(); ++x) total[x] += call.c[x];
            std::fill(call.c.begin(), call.c.end(), 0.0f);
        }
    }
    const std::vector<float>& result = promote != 0 ? total : call.c;
    std::vector<uint32_t> bits;
    for (float x : result) bits.push_back(fbits(x));
    return bits;
}

size_t differing(const std::vector<uint32_t>& got, const std::vector<uint32_t>& want) {
    size_t n = 0;
    for (size_t x = 0; x < got.size(); ++x) n += got[x] != want[x];
    return n;
}

TEST(H200Capture, ChainedHopperInstructionsGiveEveryOutputsBits) {
    const char* override_dir = std::getenv("ALTGRAD_MMA_CAPTURE_DIR");
    const std::string dir = override_dir != nullptr ? override_dir : ALTGRAD_MMA_DATA_DIR;
    const Accumulator fp8("sm90_wgmma_fp8", {agtest::Param::text("accumulator", "float32")});
    const Accumulator bf16("sm90_wgmma_fp16", {agtest::Param::text("accumulator", "float32")});
    const char* cases[] = {"e4m3_k32_normal",  "e4m3_k32_spread",  "e4m3_k32_codes",   "e4m3_k64_normal",
                           "e4m3_k128_normal", "e4m3_k128_spread", "e4m3_k512_normal", "e4m3_k4096_normal",
                           "bf16_k16_spread",  "bf16_k256_spread"};
    size_t outputs = 0;
    for (const char* name : cases) {
        SCOPED_TRACE(name);
        const capture c = read_capture(dir + "/" + name + ".bin");
        ASSERT_EQ(c.outputs.size(), c.bf16 ? 1u : 2u);
        const Accumulator& acc = c.bf16 ? bf16 : fp8;
        // default: promoted every 128 (FP8) or plain (BF16); fast: never promoted.
        const size_t d = differing(chained(acc, c, c.bf16 ? 0 : 128), c.outputs[0]);
        EXPECT_EQ(d, 0u);
        std::printf("%-18s %zu x %zu, K %zu: default %zu of %zu outputs differ", name, c.m, c.n, c.k, d,
                    c.m * c.n);
        outputs += c.m * c.n;
        if (!c.bf16) {
            const size_t f = differing(chained(acc, c, 0), c.outputs[1]);
            EXPECT_EQ(f, 0u);
            std::printf(", fast %zu", f);
            outputs += c.m * c.n;
        }
        std::printf("\n");
    }
    std::printf("%zu outputs compared (%s)\n", outputs, dir.c_str());
}

}  // namespace
