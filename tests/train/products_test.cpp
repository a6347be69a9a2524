// Each product of a quantized linear layer through its accumulator
// (train/quant_plan.hpp, docs/accumulation.md): the trainer's forward output
// and both gradients against the independent element-by-element model of
// tests/quant/accumulate_reference.hpp, on float32 operands laid out as the
// trainer lays them out (per tensor, and block-scaled with its columnwise
// copies). The one test TU here that includes LibTorch.
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "../quant/accumulate_reference.hpp"
#include "config/run_config.hpp"
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
        for (train::quant_site& s : plan.sites)
            s.spec.granularity = host::config::granularity_kind::block, s.spec.block_size = 16;
    auto& acc = plan.accumulators[0];
    acc[static_cast<size_t>(product_kind::forward)].model =
        accumulator(reg, "fp16", ALTGRAD_ROUND_TOWARD_ZERO, 8, 0);
    acc[static_cast<size_t>(product_kind::input_gradient)].model =
        accumulator(reg, "bf16", ALTGRAD_ROUND_NEAREST_EVEN, 4, 12);
    acc[static_cast<size_t>(product_kind::weight_gradient)].model =
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

// A product through a GPU instruction (sm90_wgmma_fp8: K = 32, each product
// aligned to the largest exponent and truncated to 13 fractional bits below
// it). x and W are E4M3 values: 1·1 + 2^-9·2^-6 = 1 + 2^-15, whose 2^-15
// lies below the 13 bits kept, so the instruction gives exactly 1 where
// float32 gives 1 + 2^-15; the input gradient's dy·W likewise. Per-tensor
// power-of-two scales (current scaling: 2^8 for an amax of 1 in E4M3, whose
// largest value is 448) are applied after the instruction, as a GPU's
// epilogue does, and change nothing.
void check_instruction(quant::scaling_mode scaling) {
    static host::registry reg(ALTGRAD_BUNDLED_PLUGIN_DIR);
    const std::shared_ptr<const host::format_handle> e4m3 = host::format_handle::create(reg.load("e4m3"));
    for (const bool through_instruction : {false, true}) {
        SCOPED_TRACE(through_instruction ? "sm90_wgmma_fp8" : "float32");
        train::quant_plan plan;
        const size_t first = plan.add_linear("blocks.0.mlp.fc");
        for (train::quant_site& s : plan.sites) {
            s.format = e4m3;
            s.spec.rounding = ALTGRAD_ROUND_NEAREST_EVEN;
            quant::scaling_config c;
            c.mode = scaling;
            s.scaling = quant::scaling_state(c, e4m3->info().max_finite);
        }
        if (through_instruction) {
            const auto sm90 =
                host::accumulator_handle::create(reg.load("sm90_wgmma_fp8", ALTGRAD_KIND_ACCUMULATOR));
            for (train::product_accumulator& a : plan.accumulators[0]) a.instruction = sm90;
        }
        const float tiny = std::ldexp(1.0f, -9),
                    small = std::ldexp(1.0f, -6);  // E4M3's least subnormal, normal
        const torch::Tensor x = torch::zeros({1, 32}).requires_grad_(true);
        const torch::Tensor w = torch::zeros({32, 32}).requires_grad_(true);
        torch::Tensor dy = torch::zeros({1, 32});
        {
            torch::NoGradGuard no_grad;
            x[0][0] = 1.0f, x[0][1] = tiny;
            w[0][0] = 1.0f, w[0][1] = small, w[1][0] = small;
            dy[0][0] = 1.0f, dy[0][1] = tiny;
        }
        const torch::Tensor y = train::quantized_linear(x, w, torch::Tensor(), plan, first);
        y.backward(dy);
        const float exact = 1.0f + std::ldexp(1.0f, -15);
        EXPECT_EQ(y[0][0].item<float>(), through_instruction ? 1.0f : exact);
        EXPECT_EQ(y[0][1].item<float>(), small);  // one product: exact either way
        EXPECT_EQ(x.grad()[0][0].item<float>(), through_instruction ? 1.0f : exact);
        EXPECT_EQ(x.grad()[0][1].item<float>(), small);
        EXPECT_EQ(w.grad()[1][1].item<float>(), tiny * tiny);  // dW = dyᵀ·x over one token: exact
    }
}

TEST(TrainProducts, AnInstructionTruncatesBelowItsFractionBits) {
    check_instruction(quant::scaling_mode::none);
}
TEST(TrainProducts, AnInstructionTakesPerTensorScalesAfterIt) {
    check_instruction(quant::scaling_mode::current);
}

// ---- Per-product operands (issue #30): tiles, a second use's own settings, pre-scaling.

// E2M1 (OCP MX FP4: 0, 0.5, 1, 1.5, 2, 3, 4, 6) nearest, ties to the even
// code (codes in that order: 0, 1.0, 2, 4 are even), saturating at 6.
float e2m1_nearest(float v) {
    static const float grid[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    const float a = std::fabs(v);
    int best = 7;
    for (int c = 0; c < 7; ++c) {
        const float mid = (grid[c] + grid[c + 1]) / 2;
        if (a < mid || (a == mid && c % 2 == 0)) {
            best = c;
            break;
        }
    }
    return std::copysign(grid[best], v);
}

// The decode scale round_up gives in powers of two: the smallest 2^e >= amax / 6.
double pow2_up(double quotient) {
    int e = 0;
    const double m = std::frexp(quotient, &e);  // quotient = m 2^e, m in [0.5, 1)
    return m == 0.5 ? std::ldexp(1.0, e - 1) : std::ldexp(1.0, e);
}

// t [rows, cols] quantized to E2M1 in tiles of tr x tc (tr = 1: blocks along
// rows), decode scale pow2_up(amax / 6), elements q(v * s * c) / (s * c).
torch::Tensor e2m1_tiles(const torch::Tensor& t, int64_t tr, int64_t tc, float c = 1.0f) {
    const torch::Tensor in = t.contiguous();
    torch::Tensor out = torch::empty_like(in);
    const int64_t rows = in.size(0), cols = in.size(1);
    const float* x = in.data_ptr<float>();
    float* y = out.data_ptr<float>();
    for (int64_t r0 = 0; r0 < rows; r0 += tr)
        for (int64_t c0 = 0; c0 < cols; c0 += tc) {
            double amax = 0;
            for (int64_t r = r0; r < r0 + tr; ++r)
                for (int64_t k = c0; k < c0 + tc; ++k)
                    amax = std::max(amax, std::fabs(double(x[r * cols + k])));
            const float s = static_cast<float>(1.0 / pow2_up(amax / 6.0)) * c;
            for (int64_t r = r0; r < r0 + tr; ++r)
                for (int64_t k = c0; k < c0 + tc; ++k)
                    y[r * cols + k] = e2m1_nearest(x[r * cols + k] * s) / s;
        }
    return out;
}

host::registry& bundled() {
    static host::registry reg(ALTGRAD_BUNDLED_PLUGIN_DIR);
    return reg;
}

// One linear layer's plan with its sites assigned from a config's [quantization] text.
struct configured_layer {
    train::quant_plan plan;
    host::config::run_config config;
    train::format_library formats{bundled(), "test.toml: quantization"};
    size_t first = 0;
    explicit configured_layer(const std::string& quantization) {
        first = plan.add_linear("blocks.0.mlp.fc");
        config = host::config::parse_config("[quantization]\n" + quantization, "test.toml");
        train::assign_formats(plan, config, formats);
    }
};

// W in 16x16 tiles: one quantized weight serves the forward and the
// input-gradient products (no second copy), each tile scaled by its own amax.
TEST(TrainOperands, TiledWeightIsOneCopyForBothProducts) {
    configured_layer l(
        "weight_format = \"fp4_e2m1\"\nactivation_format = \"fp32\"\ngradient_format = \"fp32\"\n"
        "[quantization.weight]\ngranularity = \"block\"\nblock_size = 16\nblock_rows = 16\n"
        "scale_format = \"pow2\"\nscale_rule = \"round_up\"\n");
    ASSERT_EQ(l.plan.sites.size(), 3u);  // no site of its own for W's second use
    torch::manual_seed(8);
    const torch::Tensor x = torch::randn({2, 8, 48}).requires_grad_(true);
    // Rows of very different magnitudes: a 1x16 or 16x1 block would get another scale.
    const torch::Tensor w =
        (torch::randn({32, 48}) * torch::linspace(0.01, 4.0, 32).unsqueeze(1)).requires_grad_(true);
    const torch::Tensor dy = torch::randn({2, 8, 32});
    const torch::Tensor y = train::quantized_linear(x, w, torch::Tensor(), l.plan, l.first);
    y.backward(dy);
    const torch::Tensor qw = e2m1_tiles(w.detach(), 16, 16);
    expect_same_bits(values(y), values(torch::matmul(x.detach(), qw.t())), "y");
    expect_same_bits(values(x.grad()), values(torch::matmul(dy, qw)), "dx");
    expect_same_bits(values(w.grad()),
                     values(torch::matmul(dy.reshape({-1, 32}).t(), x.detach().reshape({-1, 48}))), "dW");
    EXPECT_EQ(l.plan.sites[l.first].block_stats.blocks, 2u * 3u);  // 32 x 48 in 16 x 16 tiles
    // 1x16 blocks instead (TE's 1D recipe) quantize W twice, along in and along out: dx differs.
    configured_layer rows(
        "weight_format = \"fp4_e2m1\"\nactivation_format = \"fp32\"\ngradient_format = \"fp32\"\n"
        "[quantization.weight]\ngranularity = \"block\"\nblock_size = 16\n"
        "scale_format = \"pow2\"\nscale_rule = \"round_up\"\n");
    const torch::Tensor x2 = x.detach().clone().requires_grad_(true);
    train::quantized_linear(x2, w.detach(), torch::Tensor(), rows.plan, rows.first).backward(dy);
    expect_same_bits(values(x2.grad()), values(torch::matmul(dy, e2m1_tiles(w.detach().t(), 1, 16).t())),
                     "dx with 1x16 blocks");
}

// Tseng et al.'s shape: the forward product unquantized, W's input-gradient
// copy in MXFP4-like blocks along out with a 3/4 pre-scale: a site of its own.
TEST(TrainOperands, SecondUseWithItsOwnSettingsAndPreScale) {
    configured_layer l(
        "weight_format = \"fp32\"\nactivation_format = \"fp32\"\ngradient_format = \"fp32\"\n"
        "[quantization.input_gradient]\nw = { format = \"fp4_e2m1\", granularity = \"block\", block_size = "
        "8, "
        "scale_format = \"pow2\", scale_rule = \"round_up\", pre_scale = 0.75 }\n");
    ASSERT_EQ(l.plan.sites.size(), 4u);
    const train::quant_site& own = l.plan.sites[3];
    EXPECT_EQ(own.name(), "blocks.0.mlp.fc.weight@input_gradient");
    EXPECT_FALSE(l.plan.sites[l.first].format);  // the forward copy stays float32
    ASSERT_TRUE(l.plan.second_uses[0][0].own.has_value());
    torch::manual_seed(9);
    const torch::Tensor x = torch::randn({2, 4, 24}).requires_grad_(true);
    const torch::Tensor w = torch::randn({16, 24}).requires_grad_(true);
    const torch::Tensor dy = torch::randn({2, 4, 16});
    const torch::Tensor y = train::quantized_linear(x, w, torch::Tensor(), l.plan, l.first);
    y.backward(dy);
    expect_same_bits(values(y), values(torch::matmul(x.detach(), w.detach().t())), "y");
    // W along out (its columns), blocks of 8, pre-scaled by 3/4.
    const torch::Tensor qw_cols = e2m1_tiles(w.detach().t(), 1, 8, 0.75f).t();
    expect_same_bits(values(x.grad()), values(torch::matmul(dy, qw_cols)), "dx");
    EXPECT_EQ(own.count, 16u * 24u);
    EXPECT_EQ(own.block_stats.blocks, 24u * 2u);
}

// A tile that does not divide its tensor is an error naming the key.
TEST(TrainOperands, TilesThatDoNotDivideAreRefused) {
    configured_layer l(
        "weight_format = \"fp4_e2m1\"\nactivation_format = \"fp32\"\ngradient_format = \"fp32\"\n"
        "[quantization.forward]\nw = { granularity = \"block\", block_size = 16, block_rows = 16 }\n");
    const torch::Tensor x = torch::randn({1, 4, 40});
    const torch::Tensor w = torch::randn({32, 40});
    try {
        train::quantized_linear(x, w, torch::Tensor(), l.plan, l.first);
        FAIL() << "no error";
    } catch (const std::exception& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("key 'quantization.forward.w.block_rows': tiles of 16x16 do not divide"),
                  std::string::npos)
            << what;
    }
}

// A transform on the weight-gradient product: both operands (dy's and x's
// copies along the tokens) through the same transform before the product,
// which is then the product of the transformed operands, and close to the
// untransformed one; the other products untouched.
TEST(TrainOperands, WeightGradientTransformActsOnBothOperandsAlongTheTokens) {
    configured_layer l(
        "weight_format = \"fp32\"\nactivation_format = \"fp32\"\ngradient_format = \"fp32\"\n"
        "[quantization.weight_gradient]\ntransform = { name = \"random_hadamard\", params = { d = 16, "
        "signs = \"fixed\", sign_seed = 3 } }\n");
    torch::manual_seed(10);
    const torch::Tensor x = torch::randn({2, 8, 24}).requires_grad_(true);
    const torch::Tensor w = torch::randn({32, 24}).requires_grad_(true);
    const torch::Tensor dy = torch::randn({2, 8, 32});
    const torch::Tensor y = train::quantized_linear(x, w, torch::Tensor(), l.plan, l.first);
    y.backward(dy);
    expect_same_bits(values(y), values(torch::matmul(x.detach(), w.detach().t())), "y");
    expect_same_bits(values(x.grad()), values(torch::matmul(dy, w.detach())), "dx");
    // The same plugin, fixed signs (so no seed matters), applied here along the tokens.
    const auto t = host::transform_handle::create(bundled().load("random_hadamard"),
                                                  {{"d", "16"}, {"signs", "fixed"}, {"sign_seed", "3"}});
    auto along_rows = [&](const torch::Tensor& a) {
        const torch::Tensor in = a.contiguous();
        torch::Tensor out = torch::empty_like(in);
        t->apply(in.data_ptr<float>(), out.data_ptr<float>(), static_cast<size_t>(in.size(0)),
                 static_cast<size_t>(in.size(1)), 12345, false);
        return out;
    };
    const torch::Tensor dy_t = along_rows(dy.reshape({16, 32}).t()),
                        x_t = along_rows(x.detach().reshape({16, 24}).t());
    expect_same_bits(values(w.grad()), values(torch::matmul(dy_t, x_t.t())), "dW");
    const torch::Tensor exact = torch::matmul(dy.reshape({16, 32}).t().to(torch::kFloat64),
                                              x.detach().reshape({16, 24}).to(torch::kFloat64));
    EXPECT_LT((w.grad().to(torch::kFloat64) - exact).abs().max().item<double>(), 1e-4);
}

// The bias gradient under a transform on the input-gradient product: the sum
// of dy over the tokens in the layer's own basis (the transformed copy is
// transformed back), not of the transformed dy, which mixes the features.
TEST(TrainOperands, BiasGradientUnderAnInputGradientTransformIsInTheLayersBasis) {
    configured_layer l(
        "weight_format = \"fp32\"\nactivation_format = \"fp32\"\ngradient_format = \"fp32\"\n"
        "[quantization.input_gradient]\ntransform = { name = \"random_hadamard\", params = { d = 16 } }\n");
    torch::manual_seed(12);
    const torch::Tensor x = torch::randn({2, 8, 24});
    const torch::Tensor w = torch::randn({32, 24});
    const torch::Tensor b = torch::randn({32}).requires_grad_(true);
    const torch::Tensor dy = torch::randn({2, 8, 32});
    l.plan.step = 3;
    train::quantized_linear(x, w, b, l.plan, l.first).backward(dy);
    const torch::Tensor exact = dy.to(torch::kFloat64).reshape({16, 32}).sum(0);
    EXPECT_LT((b.grad().to(torch::kFloat64) - exact).abs().max().item<double>(), 1e-5);
}

// Signs from (seed, layer, step): both operands of the product get the same
// ones, so the product is preserved; another step draws other signs.
TEST(TrainOperands, PerCallSignsAreSharedByBothOperands) {
    configured_layer l(
        "weight_format = \"fp32\"\nactivation_format = \"fp32\"\ngradient_format = \"fp32\"\n"
        "[quantization.forward]\ntransform = { name = \"random_hadamard\", params = { d = 16 } }\n");
    torch::manual_seed(11);
    const torch::Tensor x = torch::randn({4, 32});
    const torch::Tensor w = torch::randn({8, 32});
    const torch::Tensor exact = torch::matmul(x.to(torch::kFloat64), w.t().to(torch::kFloat64));
    l.plan.step = 1;
    const torch::Tensor y1 = train::quantized_linear(x, w, torch::Tensor(), l.plan, l.first);
    l.plan.step = 2;
    const torch::Tensor y2 = train::quantized_linear(x, w, torch::Tensor(), l.plan, l.first);
    EXPECT_LT((y1.to(torch::kFloat64) - exact).abs().max().item<double>(), 1e-4);
    EXPECT_LT((y2.to(torch::kFloat64) - exact).abs().max().item<double>(), 1e-4);
    EXPECT_FALSE(torch::equal(y1, y2)) << "the signs (so the rounding) change with the step";
    l.plan.step = 1;
    expect_same_bits(values(train::quantized_linear(x, w, torch::Tensor(), l.plan, l.first)), values(y1),
                     "the same step again");
}

// A plugin parameter written as a string where the manifest says integer is
// refused when the plan is built, naming the key and the parameter.
TEST(TrainOperands, AStringForAnIntegerParameterIsRefused) {
    try {
        configured_layer l(
            "[quantization.forward]\ntransform = { name = \"hadamard\", params = { d = \"16\" } }\n");
        FAIL() << "no error";
    } catch (const std::exception& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("quantization.forward.transform"), std::string::npos) << what;
        EXPECT_NE(what.find("parameter 'd' = \"16\": expected an integer, got a string"), std::string::npos)
            << what;
    }
}

// A transform whose d does not divide the reduction dimension is an error naming the key.
TEST(TrainOperands, ATransformThatDoesNotDivideIsRefused) {
    configured_layer l("[quantization.forward]\ntransform = { name = \"hadamard\", params = { d = 32 } }\n");
    try {
        train::quantized_linear(torch::randn({4, 48}), torch::randn({8, 48}), torch::Tensor(), l.plan,
                                l.first);
        FAIL() << "no error";
    } catch (const std::exception& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("quantization.forward.transform"), std::string::npos) << what;
        EXPECT_NE(what.find("does not divide"), std::string::npos) << what;
    }
}

// DeepSeek-V3's blocks through sm90_wgmma_fp8 (1x128 E4M3 blocks, power-of-two
// scales, promoted every 128): each block's products go through the
// instructions as E4M3 values, and the scales multiply each promoted sum.
// K = 256, two blocks. Block 0: x = (1, 2^-8), w = (1, 2^-8), scale 2^8
// (round_up: 2^ceil(log2(1 / 448)) decodes), format values 256 and 1, whose
// product 1 lies below the 13 fractional bits kept under 256 * 256: the
// block sums to 2^16, times 2^-8 * 2^-8 = 1. Block 1: x = 2^-20 (its own
// scale 2^28: the value 256), w = 1 (256): 2^16 * 2^-28 * 2^-8 = 2^-20. So
// y = 1 + 2^-20, where float32 gives 1 + 2^-16 + 2^-20.
TEST(TrainProducts, DeepSeekBlocksScaleEachPromotedSum) {
    configured_layer l(
        "weight_format = \"e4m3\"\nactivation_format = \"e4m3\"\ngradient_format = \"e4m3\"\n"
        "forward_rounding = \"nearest\"\nbackward_rounding = \"nearest\"\nscaling = \"none\"\n"
        "granularity = \"block\"\nblock_size = 128\nscale_format = \"pow2\"\nscale_rule = \"round_up\"\n"
        "[quantization.forward]\naccumulator = { instruction = \"sm90_wgmma_fp8\", promote_every = 128 }\n");
    const torch::Tensor x = torch::zeros({1, 256}).requires_grad_(true);
    const torch::Tensor w = torch::zeros({1, 256}).requires_grad_(true);
    {
        torch::NoGradGuard no_grad;
        x[0][0] = 1.0f, x[0][1] = std::ldexp(1.0f, -8), x[0][128] = std::ldexp(1.0f, -20);
        w[0][0] = 1.0f, w[0][1] = std::ldexp(1.0f, -8), w[0][128] = 1.0f;
    }
    const torch::Tensor y = train::quantized_linear(x, w, torch::Tensor(), l.plan, l.first);
    EXPECT_EQ(y[0][0].item<float>(), 1.0f + std::ldexp(1.0f, -20));
    y.sum().backward();  // the backward products (no accumulator) run on the same copies
    EXPECT_EQ(x.grad()[0][128].item<float>(), 1.0f);
}

// MXFP8 through Blackwell's block-scaled instruction (sm100_tcgen05_mxf8f6f4:
// K = 32, one UE8M0 scale pair, 25 fractional bits, float32 toward zero):
// x = w = (1, 2^-12, 2^-12, 2^-12), one block scaled by 2^8 (values 256 and
// 2^-4), the scales inside the instruction: 1 + 3 * 2^-24 exactly, whose
// float32 toward zero is 1 + 2^-23.
TEST(TrainProducts, MxBlocksGoIntoABlockScaledInstruction) {
    configured_layer l(
        "weight_format = \"e4m3\"\nactivation_format = \"e4m3\"\ngradient_format = \"e4m3\"\n"
        "forward_rounding = \"nearest\"\nbackward_rounding = \"nearest\"\n"
        "granularity = \"block\"\nblock_size = 32\nscale_format = \"ue8m0\"\nscale_rule = \"round_up\"\n"
        "[quantization.forward]\naccumulator = { instruction = \"sm100_tcgen05_mxf8f6f4\" }\n");
    const torch::Tensor x = torch::zeros({1, 32});
    const torch::Tensor w = torch::zeros({1, 32});
    for (int64_t i = 0; i < 4; ++i) {
        x[0][i] = i == 0 ? 1.0f : std::ldexp(1.0f, -12);
        w[0][i] = i == 0 ? 1.0f : std::ldexp(1.0f, -12);
    }
    const torch::Tensor y = train::quantized_linear(x, w, torch::Tensor(), l.plan, l.first);
    EXPECT_EQ(y[0][0].item<float>(), 1.0f + std::ldexp(1.0f, -23));
}

}  // namespace
}  // namespace altgrad::test
