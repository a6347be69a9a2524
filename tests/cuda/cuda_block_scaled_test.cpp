// Block-scaled quantize with the scales derived on the GPU (the SDK's
// quantize_with_block_scales and tensor_amax, cuda_kernels.cuh, through
// device_recipes) against the host's block-scaled quantize
// (quant::quantize_blocked through the bundled plugins): every value, block
// scale, count and stat, for MXFP8 by both rules and NVFP4, every mode, calls
// that start and end inside Philox and scale blocks, unaligned and in-place
// buffers, and calls long enough that each thread strides many times. Needs
// a GPU; the CPU runs the same per-thread code in block_groups_test.cpp.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <altgrad/sdk/error.hpp>

#include "block_reference.hpp"
#include "device_memory.hpp"
#include "device_recipes.hpp"

namespace {

namespace sdk = altgrad::sdk;
using block_reference::recipe_spec;
using block_reference::result;

using cuda_test::device_buffer;

// The host loads a plugin by probing it in a forked child first (sandbox/isolate.cpp); a child of
// a process that has started CUDA cannot use it. So every plugin the host's reference needs is
// loaded before the first test starts CUDA here.
class LoadPluginsBeforeCuda : public ::testing::Environment {
public:
    void SetUp() override {
        for (const recipe_spec& s : block_reference::published()) {
            block_reference::bundled(s.element);
            block_reference::grid_of(s.scale_format);
        }
    }
};
::testing::Environment* const kLoadPluginsBeforeCuda =
    ::testing::AddGlobalTestEnvironment(new LoadPluginsBeforeCuda);

device_recipes::recipe recipe_named(const std::string& name) {
    for (auto r : {device_recipes::recipe::mxfp8_floor, device_recipes::recipe::mxfp8_round_up,
                   device_recipes::recipe::nvfp4})
        if (name == device_recipes::name_of(r)) return r;
    throw std::runtime_error("no device recipe " + name);
}

// Where the call's buffers lie: apart and 16-byte aligned, the input one float past alignment
// (the kernel's element-by-element path), or one buffer for both.
enum class layout { aligned, unaligned_input, in_place };

// x through the recipe on the GPU, synchronously; the tally read back into a result.
result on_device(const recipe_spec& spec, const std::vector<float>& x, const sdk::conversion_mode& m,
                 layout where = layout::aligned, bool amax_given = false) {
    const size_t n = x.size(), at = where == layout::unaligned_input ? 1 : 0;
    std::vector<float> shifted(at, 0.0f);
    shifted.insert(shifted.end(), x.begin(), x.end());
    uint32_t tensor_amax = 0;  // given: the largest |x| as bits, as the amax pass takes it
    if (amax_given)
        for (float v : x) tensor_amax = std::max(tensor_amax, sdk::float_bits(v) & 0x7FFFFFFFu);
    device_buffer<float> in(shifted), out(n), scales(sdk::block_count(n, spec.block_size));
    device_buffer<sdk::block_tally> tally(std::vector<sdk::block_tally>{sdk::block_tally{}});
    device_buffer<uint32_t> amax(std::vector<uint32_t>{tensor_amax});
    sdk::block_scaled_args a;
    a.input = in.get() + at;
    a.output = where == layout::in_place ? in.get() : out.get();
    a.count = n;
    a.rounding = m.rounding;
    a.overflow = m.overflow;
    a.seed = m.seed;
    a.offset = m.offset;
    a.random_bits = m.random_bits;
    a.scales = scales.get();
    a.tensor_amax_bits = amax.get();
    a.tally = tally.get();
    device_recipes::enqueue(recipe_named(spec.name), a, amax_given);
    if (cudaDeviceSynchronize() != cudaSuccess) throw std::runtime_error("the kernel failed");
    result r;
    r.out = where == layout::in_place ? in.download() : out.download();
    r.scales = scales.download();
    const sdk::block_tally t = tally.download()[0];
    r.overflow = t.counts[sdk::block_tally::kOverflow];
    r.underflow = t.counts[sdk::block_tally::kUnderflow];
    r.stats = block_reference::stats_of(t, r.scales.size());
    return r;
}

using CudaDevice = cuda_test::CudaTest;

const recipe_spec& spec_named(const std::string& name) {
    for (const recipe_spec& s : block_reference::published())
        if (s.name == name) return s;
    throw std::runtime_error("no recipe " + name);
}

class CudaBlockScaled : public CudaDevice, public ::testing::WithParamInterface<std::string> {
protected:
    const recipe_spec& spec() const { return spec_named(GetParam()); }
};

TEST_P(CudaBlockScaled, MatchesTheHost) {
    const std::pair<uint64_t, size_t> calls[] = {{0, 300007}, {3, 100003}, {4099, 5001}, {6, 37}};
    for (const bool wide : {true, false}) {
        const std::vector<float> all = block_reference::sample_inputs(300007, 11, wide);
        for (const auto& [offset, count] : calls) {
            const std::vector<float> x(all.begin(), all.begin() + static_cast<long>(count));
            for (const sdk::conversion_mode& m : block_reference::modes_at(offset)) {
                const result want = block_reference::on_host(spec(), x, m);
                EXPECT_TRUE(block_reference::same_result(x, want, on_device(spec(), x, m)))
                    << block_reference::describe(m) << " count " << count << (wide ? " wide" : " narrow");
            }
        }
    }
}

TEST_P(CudaBlockScaled, UnalignedAndInPlaceBuffers) {
    const std::vector<float> x = block_reference::sample_inputs(65541, 12);
    for (const sdk::conversion_mode& m : block_reference::modes_at(5)) {
        const result want = block_reference::on_host(spec(), x, m);
        EXPECT_TRUE(block_reference::same_result(x, want, on_device(spec(), x, m, layout::unaligned_input)))
            << block_reference::describe(m) << " unaligned";
        EXPECT_TRUE(block_reference::same_result(x, want, on_device(spec(), x, m, layout::in_place)))
            << block_reference::describe(m) << " in place";
    }
}

// 2^23 + 5 elements: every thread of the grid strides many times.
TEST_P(CudaBlockScaled, LongCalls) {
    const std::vector<float> x = block_reference::sample_inputs((size_t{1} << 23) + 5, 13, false);
    for (const altgrad_rounding r : {ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_ROUND_STOCHASTIC}) {
        sdk::conversion_mode m;
        m.rounding = r;
        m.seed = 42;
        const result want = block_reference::on_host(spec(), x, m);
        EXPECT_TRUE(block_reference::same_result(x, want, on_device(spec(), x, m)))
            << block_reference::describe(m);
    }
}

INSTANTIATE_TEST_SUITE_P(Published, CudaBlockScaled,
                         ::testing::Values("mxfp8_floor", "mxfp8_round_up", "nvfp4"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// NVFP4 with the tensor's amax already on the device (taken by an earlier pass): the same bits.
using CudaNvfp4 = CudaDevice;
TEST_F(CudaNvfp4, GivenTensorAmax) {
    const recipe_spec& nvfp4 = spec_named("nvfp4");
    const std::vector<float> x = block_reference::sample_inputs(100000, 14, false);
    sdk::conversion_mode m;
    m.rounding = ALTGRAD_ROUND_STOCHASTIC;
    const result want = block_reference::on_host(nvfp4, x, m);
    EXPECT_TRUE(block_reference::same_result(x, want, on_device(nvfp4, x, m, layout::aligned, true)));
}

// Arguments the device path cannot take are refused, naming what is wrong.
using CudaBlockScaledArguments = CudaDevice;
TEST_F(CudaBlockScaledArguments, AreRefused) {
    device_buffer<float> x(64);
    device_buffer<sdk::block_tally> tally(1);
    sdk::block_scaled_args a;
    a.input = x.get();
    a.output = x.get();
    a.count = 64;
    a.tally = tally.get();
    try {
        device_recipes::enqueue(device_recipes::recipe::nvfp4, a, false);  // no tensor amax word
        ADD_FAILURE() << "nvfp4 without tensor_amax_bits was accepted";
    } catch (const sdk::plugin_error& e) {
        EXPECT_NE(std::string(e.what()).find("tensor_amax_bits"), std::string::npos) << e.what();
    }
    float host[4] = {1, 2, 3, 4};
    a.input = host;
    a.output = host;
    a.count = 4;
    try {
        device_recipes::enqueue(device_recipes::recipe::mxfp8_floor, a, false);
        ADD_FAILURE() << "host memory was accepted";
    } catch (const sdk::plugin_error& e) {
        EXPECT_NE(std::string(e.what()).find("not CUDA device memory"), std::string::npos) << e.what();
    }
}

}  // namespace
