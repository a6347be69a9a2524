// Each product of a quantized linear layer through its accumulator
// (train/quant_plan.hpp, docs/accumulation.md): the trainer's forward output
// and both gradients against the independent element-by-element model of
// tests/quant/accumulate_reference.hpp, on float32 operands laid out as the
// trainer lays them out (per tensor, and block-scaled with its columnwise
// copies). The one test TU here that includes LibTorch.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "../quant/accumulate_reference.hpp"
#include "plugins/format_handle.hpp"
#include "plugins/registry.hpp"
#include "quant/accumulate.hpp"
#include "train/quant_plan.hpp"

namespace altgrad::test {
namespace {

namespace host = altgrad::host;
namespace train = altgrad::host::train;
namespace quant = altgrad::host::quant;
using host::config::product_kind;

const reference_format kFp16{10, -14, 65504.0, true};
const reference_format kBf16{7, -126, 0x1.fep127, true};

std::vector<float> values(const torch::Tensor& t) {
    const torch::Tensor c = t.detach().contiguous();
    return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

// Bit for bit; names the first difference.
void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want,
                      const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t x = 0; x < got.size(); ++x) {
        uint32_t g = 0, w = 0;
        std::memcpy(&g, &got[x], 4);
        std::memcpy(&w, &want[x], 4);
        ASSERT_EQ(g, w) << what << " element " << x << ": " << got[x] << " vs " << want[x];
    }
}

std::shared_ptr<const quant::accumulator> accumulator(host::registry& reg, const std::string& format,
                                                      altgrad_rounding r, size_t depth, size_t promote) {
    return std::make_shared<quant::accumulator>(host::format_handle::create(reg.load(format)),
                                                quant::accumulator_spec{r, depth, promote});
}

// One linear layer (x [2, 5, 40], W [24, 40]), float32 sites (so the operands
// reach the products as they are), each product through another accumulator:
// a product wired to the wrong operands or layout gives other bits.
void check_products(bool block_scaled) {
    static host::registry reg(ALTGRAD_BUNDLED_PLUGIN_DIR);
    train::quant_plan plan;
    const size_t first = plan.add_linear("blocks.0.mlp.fc");
    // Block-scaled sites quantize the backward operands again as columnwise copies (.t() views).
    if (block_scaled)
        for (train::quant_site& s : plan.sites) s.block_size = 16;
    auto& acc = plan.accumulators[0];
    acc[static_cast<size_t>(product_kind::forward)] =
        accumulator(reg, "fp16", ALTGRAD_ROUND_TOWARD_ZERO, 8, 0);
    acc[static_cast<size_t>(product_kind::input_gradient)] =
        accumulator(reg, "bf16", ALTGRAD_ROUND_NEAREST_EVEN, 4, 12);
    acc[static_cast<size_t>(product_kind::weight_gradient)] =
        accumulator(reg, "fp16", ALTGRAD_ROUND_NEAREST_EVEN, 3, 0);
    plan.gemm_threads = 2;

    torch::manual_seed(5);
    const torch::Tensor x = torch::randn({2, 5, 40}).requires_grad_(true);
    const torch::Tensor w = torch::randn({24, 40}).requires_grad_(true);
    const torch::Tensor b = torch::randn({24}).requires_grad_(true);
    const torch::Tensor dy = torch::randn({2, 5, 24});
    const torch::Tensor y = train::quantized_linear(x, w, b, plan, first);
    y.backward(dy);

    const std::vector<float> xs = values(x), ws = values(w), bs = values(b), dys = values(dy);
    const std::vector<float> wt = values(w.t()), dyt = values(dy.reshape({10, 24}).t());
    // y = x·Wᵀ + b: M, K, N = 10, 40, 24.
    std::vector<float> want_y = reference_gemm(xs, wt, 10, 40, 24, kFp16, false, 8, 0);
    for (size_t i = 0; i < 10; ++i)
        for (size_t j = 0; j < 24; ++j) want_y[i * 24 + j] += bs[j];
    expect_same_bits(values(y), want_y, "y");
    EXPECT_EQ(y.sizes(), (std::vector<int64_t>{2, 5, 24}));
    // dx = dy·W: M, K, N = 10, 24, 40.
    expect_same_bits(values(x.grad()), reference_gemm(dys, ws, 10, 24, 40, kBf16, true, 4, 12), "dx");
    // dW = dyᵀ·x: M, K, N = 24, 10, 40.
    expect_same_bits(values(w.grad()), reference_gemm(dyt, xs, 24, 10, 40, kFp16, true, 3, 0), "dW");
}

TEST(TrainProducts, EachProductIsItsAccumulatorsModel) { check_products(false); }
TEST(TrainProducts, EachProductIsItsAccumulatorsModelWithColumnwiseCopies) { check_products(true); }

// No accumulator: LibTorch's float32 products, as before accumulators existed.
TEST(TrainProducts, WithoutAnAccumulatorTheProductIsLibTorchs) {
    train::quant_plan plan;
    const size_t first = plan.add_linear("lm_head");
    torch::manual_seed(6);
    const torch::Tensor x = torch::randn({3, 7, 32}).requires_grad_(true);
    const torch::Tensor w = torch::randn({16, 32}).requires_grad_(true);
    const torch::Tensor dy = torch::randn({3, 7, 16});
    const torch::Tensor y = train::quantized_linear(x, w, torch::Tensor(), plan, first);
    y.backward(dy);
    expect_same_bits(values(y), values(torch::matmul(x, w.t())), "y");
    expect_same_bits(values(x.grad()), values(torch::matmul(dy, w)), "dx");
    expect_same_bits(values(w.grad()), values(torch::matmul(dy.reshape({-1, 16}).t(), x.reshape({-1, 32}))),
                     "dW");
}

}  // namespace
}  // namespace altgrad::test
