// The bundled format plugins on CUDA buffers, through the C ABI as the host
// calls them. Results are checked against the independent reference of
// tests/sdk (reference.hpp) where it models the format, else against the
// plugin's own host path (fp32; and encode/decode, whose host path tests/sdk
// checks against the reference). Needs a GPU: see tests/cuda/CMakeLists.txt.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "device_memory.hpp"
#include "test_common.hpp"

using namespace agtest;

namespace {

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call << ": " << cudaGetErrorString(call)

using cuda_test::CudaTest;
using cuda_test::device_buffer;

// quantize on the GPU, synchronous form (device_counts NULL). The input and
// output start in_shift and out_shift floats past a 256-byte boundary: a
// shift that is not a multiple of 4 puts the groups' lane 0 off 16 bytes
// (the kernel's element-by-element path), as does an offset that is not.
QuantizeResult gpu_quantize(const FormatPlugin& p, const std::vector<float>& xs, const Mode& m,
                            size_t in_shift = 0, size_t out_shift = 0) {
    std::vector<float> shifted(in_shift, 0.0f);
    shifted.insert(shifted.end(), xs.begin(), xs.end());
    device_buffer<float> in(shifted), out(xs.size() + out_shift);
    altgrad_quantize_args a = quantize_args(in.get() + in_shift, out.get() + out_shift, xs.size(), m);
    a.memory = ALTGRAD_MEMORY_CUDA;
    QuantizeResult r;
    r.status = p.quantize_raw(&a, &r.message);
    const std::vector<float> all = out.download();
    r.out.assign(all.begin() + static_cast<long>(out_shift), all.end());
    r.overflow = a.overflow_count;
    r.underflow = a.underflow_count;
    return r;
}

::testing::AssertionResult same_results(const std::vector<float>& xs, const std::vector<float>& want,
                                        const std::vector<float>& got) {
    size_t bad = 0;
    std::ostringstream msg;
    for (size_t i = 0; i < xs.size(); ++i)
        if (!same_float(want[i], got[i])) {
            if (bad < 10)
                msg << "\n  x=" << hexf(xs[i]) << " expected " << hexf(want[i]) << " got " << hexf(got[i]);
            ++bad;
        }
    if (bad == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << bad << " of " << xs.size() << " values differ" << msg.str();
}

// How many of the codes in `raw` (width bytes each, native endian) differ from `want`.
size_t codes_differing(const std::vector<uint8_t>& raw, uint32_t width, const std::vector<uint32_t>& want) {
    size_t bad = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        uint32_t code = 0;
        std::memcpy(&code, raw.data() + i * width, width);
        bad += code != want[i];
    }
    return bad;
}

std::vector<float> inputs_for(const std::string& name) {
    if (name == "fp32") {
        FormatModel bf = model("bf16");
        std::vector<float> xs = random_points(bf, 1 << 18, 11);
        for (float f : edge_points(bf)) xs.push_back(f);
        return xs;
    }
    const FormatModel& m = model(name);
    std::vector<float> xs = edge_points(m);
    const std::vector<float> r = random_points(m, 1 << 18, 7);
    xs.insert(xs.end(), r.begin(), r.end());
    return xs;
}

const std::vector<std::string> kFormats = {"e5m2", "e4m3", "e3m4", "e1m6",     "e7m0",     "e0m7",
                                           "bf16", "fp16", "fp32", "fp4_e2m1", "fp6_e2m3", "fp6_e3m2"};

class CudaFormat : public CudaTest, public ::testing::WithParamInterface<std::string> {
protected:
    const FormatPlugin& p() const { return plugin(GetParam()); }
};

TEST_P(CudaFormat, AdvertisesCudaMemory) {
    EXPECT_TRUE(p().info().memory_kinds & (1u << ALTGRAD_MEMORY_CUDA));
    EXPECT_TRUE(p().info().memory_kinds & (1u << ALTGRAD_MEMORY_HOST));
}

// Every mode, three kinds of scale (unit, power of two, general), an offset
// that is not a multiple of four (so Philox blocks straddle the call's
// start): the GPU gives the reference's values and counts.
TEST_P(CudaFormat, QuantizeMatchesTheReference) {
    const std::vector<float> xs = inputs_for(GetParam());
    for (float scale : {1.0f, 0.25f, 0.7f})
        for (const Mode& mode : all_modes(scale, 0xC0FFEEull, 4099)) {
            const QuantizeResult got = gpu_quantize(p(), xs, mode);
            ASSERT_EQ(got.status, ALTGRAD_STATUS_OK) << describe(mode) << ": " << got.message;
            if (GetParam() == "fp32") {
                const QuantizeResult host = p().quantize(xs, mode);
                EXPECT_TRUE(same_results(xs, host.out, got.out)) << describe(mode);
                EXPECT_EQ(got.overflow, host.overflow) << describe(mode);
                EXPECT_EQ(got.underflow, host.underflow) << describe(mode);
                continue;
            }
            const Expected want = reference_quantize(model(GetParam()), xs, mode);
            EXPECT_TRUE(same_results(xs, want.out, got.out)) << describe(mode);
            EXPECT_EQ(got.overflow, want.overflow) << describe(mode);
            EXPECT_EQ(got.underflow, want.underflow) << describe(mode);
        }
}

// Stochastic rounding: three calls over consecutive pieces (at offsets that
// are not multiples of four) equal one call over the whole array.
TEST_P(CudaFormat, StochasticRoundingDoesNotDependOnChunking) {
    const std::vector<float> xs = inputs_for(GetParam());
    Mode m;
    m.rounding = ALTGRAD_ROUND_STOCHASTIC;
    m.seed = 99;
    m.offset = 5;
    const QuantizeResult whole = gpu_quantize(p(), xs, m);
    ASSERT_EQ(whole.status, ALTGRAD_STATUS_OK) << whole.message;
    const size_t cut1 = 1001, cut2 = xs.size() / 2 + 3;
    std::vector<float> pieces;
    uint64_t overflow = 0, underflow = 0;
    for (auto [from, to] : {std::pair<size_t, size_t>{0, cut1}, {cut1, cut2}, {cut2, xs.size()}}) {
        Mode piece = m;
        piece.offset = m.offset + from;
        const QuantizeResult r =
            gpu_quantize(p(), std::vector<float>(xs.begin() + from, xs.begin() + to), piece);
        ASSERT_EQ(r.status, ALTGRAD_STATUS_OK) << r.message;
        pieces.insert(pieces.end(), r.out.begin(), r.out.end());
        overflow += r.overflow;
        underflow += r.underflow;
    }
    EXPECT_TRUE(same_results(xs, whole.out, pieces));
    EXPECT_EQ(overflow, whole.overflow);
    EXPECT_EQ(underflow, whole.underflow);
}

// With device_counts the call is asynchronous and adds its tallies to what
// the device memory holds; in place equals out of place.
TEST_P(CudaFormat, DeviceCountsAccumulateAndInPlaceWorks) {
    const std::vector<float> xs = inputs_for(GetParam());
    Mode m;
    m.overflow = ALTGRAD_OVERFLOW_NONFINITE;
    m.scale = 0.5f;
    const QuantizeResult host = p().quantize(xs, m);
    ASSERT_EQ(host.status, ALTGRAD_STATUS_OK);
    device_buffer<float> data(xs);
    device_buffer<uint64_t> counts(std::vector<uint64_t>{5, 7});
    altgrad_quantize_args a = quantize_args(data.get(), data.get(), xs.size(), m);
    a.memory = ALTGRAD_MEMORY_CUDA;
    a.device_counts = counts.get();
    std::string message;
    ASSERT_EQ(p().quantize_raw(&a, &message), ALTGRAD_STATUS_OK) << message;
    CUDA_OK(cudaDeviceSynchronize());
    EXPECT_TRUE(same_results(xs, host.out, data.download()));
    const std::vector<uint64_t> c = counts.download();
    EXPECT_EQ(c[0], 5 + host.overflow);
    EXPECT_EQ(c[1], 7 + host.underflow);
}

// Encode and decode on the GPU equal the host path, code for code.
TEST_P(CudaFormat, EncodeAndDecodeMatchTheHost) {
    std::vector<float> xs = inputs_for(GetParam());
    if (p().info().nan_code_count == 0)  // NaN cannot be encoded there; see the next test
        xs.erase(std::remove_if(xs.begin(), xs.end(), [](float x) { return std::isnan(x); }), xs.end());
    const uint32_t width = p().info().code_bytes;
    for (const Mode& mode : all_modes(0.25f, 3, 6)) {
        const EncodeResult host = p().encode(xs, mode);
        ASSERT_EQ(host.status, ALTGRAD_STATUS_OK) << host.message;
        device_buffer<float> in(xs);
        device_buffer<uint8_t> codes(xs.size() * width);
        altgrad_encode_args e = encode_args(in.get(), codes.get(), xs.size(), mode);
        e.memory = ALTGRAD_MEMORY_CUDA;
        std::string message;
        ASSERT_EQ(p().encode_raw(&e, &message), ALTGRAD_STATUS_OK) << describe(mode) << ": " << message;
        EXPECT_EQ(codes_differing(codes.download(), width, host.codes), 0u) << describe(mode);
        EXPECT_EQ(e.overflow_count, host.overflow) << describe(mode);
        EXPECT_EQ(e.underflow_count, host.underflow) << describe(mode);

        device_buffer<float> out(xs.size());
        altgrad_decode_args d = decode_args(codes.get(), out.get(), xs.size(), mode.scale);
        d.memory = ALTGRAD_MEMORY_CUDA;
        ASSERT_EQ(p().decode_raw(&d, &message), ALTGRAD_STATUS_OK) << message;
        const DecodeResult want = p().decode(host.codes, mode.scale);
        EXPECT_TRUE(same_results(xs, want.out, out.download())) << describe(mode);
    }
}

// Block scales (ABI 1.2) in device memory: quantize, encode and decode on
// the GPU equal the host path with the same scales, blocks with a short last
// one, scales powers of two and general values.
TEST_P(CudaFormat, BlockScaledCallsMatchTheHost) {
    std::vector<float> xs = inputs_for(GetParam());
    if (p().info().nan_code_count == 0)
        xs.erase(std::remove_if(xs.begin(), xs.end(), [](float x) { return std::isnan(x); }), xs.end());
    xs.resize(xs.size() / 32 * 32 + 7);
    // Blocks of 32 from an offset off a multiple of 4 (element by element) and on one (quads),
    // of 8 (a shift), 12 (a division) and 3 (lanes straddle blocks: element by element).
    const std::pair<uint64_t, size_t> cases[] = {{3, 32}, {0, 32}, {4, 8}, {8, 12}, {0, 3}};
    for (const auto& [offset, block] : cases) {
        std::vector<float> scales;
        for (size_t b = 0; b < (xs.size() + block - 1) / block; ++b)
            scales.push_back(b % 3 == 2 ? 0.37f * static_cast<float>(b + 1)
                                        : std::ldexp(1.0f, static_cast<int>(b % 41) - 20));
        device_buffer<float> device_scales(scales);
        for (Mode mode : all_modes(1.0f, 0xB10Cull, offset)) {
            mode.block_scales = scales.data();
            mode.block_size = block;
            const QuantizeResult host = p().quantize(xs, mode);
            ASSERT_EQ(host.status, ALTGRAD_STATUS_OK) << host.message;
            const EncodeResult host_codes = p().encode(xs, mode);
            ASSERT_EQ(host_codes.status, ALTGRAD_STATUS_OK) << host_codes.message;
            mode.block_scales = device_scales.get();
            const QuantizeResult got = gpu_quantize(p(), xs, mode);
            ASSERT_EQ(got.status, ALTGRAD_STATUS_OK) << describe(mode) << ": " << got.message;
            EXPECT_TRUE(same_results(xs, host.out, got.out)) << describe(mode);
            EXPECT_EQ(got.overflow, host.overflow) << describe(mode);
            EXPECT_EQ(got.underflow, host.underflow) << describe(mode);
            const uint32_t width = p().info().code_bytes;
            device_buffer<float> in(xs);
            device_buffer<uint8_t> codes(xs.size() * width);
            altgrad_encode_args e = encode_args(in.get(), codes.get(), xs.size(), mode);
            e.memory = ALTGRAD_MEMORY_CUDA;
            std::string message;
            ASSERT_EQ(p().encode_raw(&e, &message), ALTGRAD_STATUS_OK) << message;
            EXPECT_EQ(codes_differing(codes.download(), width, host_codes.codes), 0u) << describe(mode);
            device_buffer<float> out(xs.size());
            altgrad_decode_args d = decode_args(codes.get(), out.get(), xs.size(), 1.0f, ALTGRAD_MEMORY_CUDA,
                                                0, device_scales.get(), block);
            ASSERT_EQ(p().decode_raw(&d, &message), ALTGRAD_STATUS_OK) << message;
            const DecodeResult want = p().decode(host_codes.codes, 1.0f, scales.data(), block);
            EXPECT_TRUE(same_results(xs, want.out, out.download())) << describe(mode);
        }
    }
}

// Host memory passed as CUDA memory is the caller's error, said so.
TEST_P(CudaFormat, HostPointersAreInvalidArgument) {
    float in[4] = {1, 2, 3, 4}, out[4] = {0, 0, 0, 0};
    altgrad_quantize_args a = quantize_args(in, out, 4, Mode{});
    a.memory = ALTGRAD_MEMORY_CUDA;
    std::string message;
    EXPECT_EQ(p().quantize_raw(&a, &message), ALTGRAD_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(message.find("not CUDA device memory"), std::string::npos) << message;
    EXPECT_EQ(out[0], 0.0f);
}

INSTANTIATE_TEST_SUITE_P(Bundled, CudaFormat, ::testing::ValuesIn(kFormats), PluginNameGen());

// E0M7 has no NaN code: encoding NaN on the GPU fails as on the host, naming
// the first such element.
using CudaFormatE0m7 = CudaTest;
TEST_F(CudaFormatE0m7, EncodingNanNamesTheFirstElement) {
    const FormatPlugin& p = plugin("e0m7");
    std::vector<float> xs(1000, 0.5f);
    xs[617] = std::nanf("");
    xs[900] = std::nanf("");
    device_buffer<float> in(xs);
    device_buffer<uint8_t> codes(xs.size());
    altgrad_encode_args e = encode_args(in.get(), codes.get(), xs.size(), Mode{});
    e.memory = ALTGRAD_MEMORY_CUDA;
    std::string message;
    EXPECT_EQ(p.encode_raw(&e, &message), ALTGRAD_STATUS_NOT_REPRESENTABLE);
    EXPECT_NE(message.find("element 617"), std::string::npos) << message;
}

}  // namespace
