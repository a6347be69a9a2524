// The published training recipes that AltGrad expresses today, as configs in configs/recipes/
// (docs/recipes.md). Every file there loads, validates and round-trips, and each recipe's
// parameters are checked against a table written here by hand from its sources (TransformerEngine's
// transformer_engine/common/recipe/__init__.py and its recipe documentation), not read back from the
// configs: a config that drifts from its source fails here.
#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "config/run_config.hpp"
#include "config_errors.hpp"
#include "util/error.hpp"

namespace altgrad::test {
namespace {

namespace fs = std::filesystem;
using namespace host::config;

fs::path recipes_dir() { return fs::path(ALTGRAD_CONFIGS_DIR) / "recipes"; }

std::vector<fs::path> recipe_files() {
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(recipes_dir()))
        if (entry.is_regular_file() && entry.path().extension() == ".toml") files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    return files;
}

// How one operand of one product is quantized, in AltGrad's terms.
struct operand_want {
    std::string format;
    altgrad_rounding rounding = ALTGRAD_ROUND_NEAREST_EVEN;
    granularity_kind granularity = granularity_kind::tensor;
    // Block scaling (granularity block only).
    int64_t block_size = 0, block_rows = 1;
    std::string scale_format;
    scale_rule_kind scale_rule = scale_rule_kind::mx_floor;
    double pre_scale = 1.0;
};

// What a recipe's source says (docs/recipes.md has the citations).
struct recipe_table {
    altgrad_overflow overflow = ALTGRAD_OVERFLOW_SATURATE;
    // Per-tensor scaling (operands of granularity tensor).
    scaling_mode scaling = scaling_mode::none;
    int64_t amax_history_len = 0;
    amax_compute_kind amax_compute = amax_compute_kind::max;
    int64_t margin = 0;
    tensor_scale_kind tensor_scale = tensor_scale_kind::pow2;
    first_scale_kind first_scale = first_scale_kind::amax;  // delayed scaling's first scale
    // Every product's two operands, for every layer but the high-precision ones.
    std::map<std::pair<product_kind, operand_kind>, operand_want> operands;
    std::optional<accumulator_config> accumulator;        // every product of those layers; nullopt: float32
    std::map<product_kind, transform_config> transforms;  // of those layers; a product not here has none
    // Layers the recipe keeps in BF16: every operand BF16, one scale per tensor, float32 products.
    std::set<std::string> high_precision;
};

// The same settings for a tensor in both its products, by role: W and x
// round as the forward direction, dy as the backward one.
void set_roles(recipe_table& t, const operand_want& w, const operand_want& x, const operand_want& dy) {
    t.operands[{product_kind::forward, operand_kind::x}] = x;
    t.operands[{product_kind::forward, operand_kind::w}] = w;
    t.operands[{product_kind::input_gradient, operand_kind::dy}] = dy;
    t.operands[{product_kind::input_gradient, operand_kind::w}] = w;
    t.operands[{product_kind::weight_gradient, operand_kind::dy}] = dy;
    t.operands[{product_kind::weight_gradient, operand_kind::x}] = x;
}

// The TE recipes here cast with round-to-nearest-even and clip to the format's range, the gradients
// too (TE docs, "FP8 Current Scaling" and "FP8 Delayed Scaling": the cast).
operand_want te_cast(std::string format) {
    operand_want o;
    o.format = std::move(format);
    o.rounding = ALTGRAD_ROUND_NEAREST_EVEN;
    return o;
}

operand_want blocks(operand_want o, int64_t rows, int64_t cols, std::string scale_format,
                    scale_rule_kind rule) {
    o.granularity = granularity_kind::block;
    o.block_rows = rows;
    o.block_size = cols;
    o.scale_format = std::move(scale_format);
    o.scale_rule = rule;
    return o;
}

const std::map<std::string, recipe_table>& sources() {
    static const std::map<std::string, recipe_table> table = [] {
        std::map<std::string, recipe_table> t;
        // TE DelayedScaling defaults: margin 0, fp8_format HYBRID (E4M3 for x and W, E5M2 for dy),
        // amax_history_len 1024, amax_compute_algo "max".
        recipe_table delayed;
        set_roles(delayed, te_cast("e4m3"), te_cast("e4m3"), te_cast("e5m2"));
        delayed.scaling = scaling_mode::delayed;
        delayed.amax_history_len = 1024;
        delayed.amax_compute = amax_compute_kind::max;
        delayed.tensor_scale = tensor_scale_kind::fp32;  // (fp8_max / amax) / 2^margin in float32
        delayed.first_scale = first_scale_kind::one;     // TE's scale tensors start as ones
        t["te_delayed"] = delayed;
        // TE Float8CurrentScaling: fp8_format HYBRID, the scale from the tensor's own amax
        // (amax_epsilon 0), no margin.
        recipe_table current;
        set_roles(current, te_cast("e4m3"), te_cast("e4m3"), te_cast("e5m2"));
        current.scaling = scaling_mode::current;
        current.tensor_scale = tensor_scale_kind::fp32;
        t["te_current"] = current;
        // TE MXFP8BlockScaling: fp8_format E4M3 for every tensor, 1x32 blocks, E8M0 scales,
        // amax / 448 rounded up to a power of two.
        recipe_table mxfp8;
        const operand_want mx = blocks(te_cast("e4m3"), 1, 32, "ue8m0", scale_rule_kind::round_up);
        set_roles(mxfp8, mx, mx, mx);
        t["te_mxfp8"] = mxfp8;
        // DeepSeek-V3 (arXiv 2412.19437, 3.3) as TE's Float8BlockScaling: E4M3 everywhere; x and dy
        // in 1x128 blocks, W in 128x128 tiles; power-of-two scales rounded up (TE's default);
        // nearest-even casts; ~14-bit accumulation promoted every N_C = 128; the output head in BF16.
        recipe_table deepseek;
        const operand_want row128 = blocks(te_cast("e4m3"), 1, 128, "pow2", scale_rule_kind::round_up);
        set_roles(deepseek, blocks(te_cast("e4m3"), 128, 128, "pow2", scale_rule_kind::round_up), row128,
                  row128);
        // Hopper's FP8 wgmma (MMA-Sim: K = 32, E8M13 toward zero), promoted every N_C = 128.
        accumulator_config wgmma;
        wgmma.instruction = "sm90_wgmma_fp8";
        wgmma.promote_every = 128;
        deepseek.accumulator = wgmma;
        deepseek.high_precision = {"lm_head"};
        t["deepseek_v3"] = deepseek;
        // NVFP4 (arXiv 2509.25149; TE NVFP4BlockScaling): E2M1 with E4M3 scales per 16 under a float32
        // tensor scale (two levels); W in 16x16 tiles, x and dy 1x16; stochastic rounding for dy only;
        // a 16-point random Hadamard transform on the weight gradient's operands, one sign vector for
        // the run; about 15% of the linear layers in BF16, the last ones, and the head.
        recipe_table nvfp4;
        const operand_want fp4 = [] {
            operand_want o = blocks(te_cast("fp4_e2m1"), 1, 16, "e4m3", scale_rule_kind::two_level);
            return o;
        }();
        operand_want fp4_sr = fp4;
        fp4_sr.rounding = ALTGRAD_ROUND_STOCHASTIC;
        set_roles(nvfp4, blocks(te_cast("fp4_e2m1"), 16, 16, "e4m3", scale_rule_kind::two_level), fp4,
                  fp4_sr);
        nvfp4.transforms[product_kind::weight_gradient] = {"random_hadamard",
                                                           {{"d", {"16", host::param_kind::integer}},
                                                            {"signs", {"fixed", host::param_kind::string}},
                                                            {"sign_seed", {"1", host::param_kind::integer}}}};
        nvfp4.high_precision = {"blocks.3.mlp.fc", "blocks.3.mlp.proj", "lm_head"};
        t["nvfp4"] = nvfp4;
        // Tseng et al. (arXiv 2502.20586): the forward product in BF16; the backward products in MXFP4
        // (E2M1, E8M0 per 32, OCP's floor rule), stochastic rounding and a 3/4 pre-scale on each of
        // their operands, a random Hadamard transform of 64 on both (the paper code's HBS); the head in BF16.
        recipe_table tseng;
        operand_want bf16 = te_cast("bf16");
        operand_want mxfp4 = blocks(te_cast("fp4_e2m1"), 1, 32, "ue8m0", scale_rule_kind::mx_floor);
        mxfp4.rounding = ALTGRAD_ROUND_STOCHASTIC;
        mxfp4.pre_scale = 0.75;
        tseng.operands[{product_kind::forward, operand_kind::x}] = bf16;
        tseng.operands[{product_kind::forward, operand_kind::w}] = bf16;
        for (product_kind p : {product_kind::input_gradient, product_kind::weight_gradient}) {
            for (operand_kind o : operands_of(p)) tseng.operands[{p, o}] = mxfp4;
            tseng.transforms[p] = {"random_hadamard", {{"d", {"64", host::param_kind::integer}}}};
        }
        tseng.high_precision = {"lm_head"};
        t["tseng_mxfp4"] = tseng;
        return t;
    }();
    return table;
}

TEST(RecipeConfigs, TheFolderHoldsExactlyTheRecipesOfTheTable) {
    std::set<std::string> found;
    for (const fs::path& file : recipe_files()) found.insert(file.stem().string());
    std::set<std::string> expected;
    for (const auto& [name, table] : sources()) expected.insert(name);
    EXPECT_EQ(found, expected) << "a recipe config needs its row in sources() (and docs/recipes.md), "
                                  "taken from the recipe's source";
}

TEST(RecipeConfigs, EveryRecipeLoadsValidatesAndRoundTrips) {
    const std::vector<fs::path> files = recipe_files();
    EXPECT_GE(files.size(), 3u);
    for (const fs::path& file : files) {
        SCOPED_TRACE(file.string());
        if (!expect_config_file_loads(file)) continue;
        // The short run docs/recipes.md suggests: the warm-up shortens itself.
        EXPECT_EQ(load_config(file, {"training.max_steps=20"}).training.max_steps, 20);
    }
}

TEST(RecipeConfigs, EveryRecipeTrainsTheSeedWorkload) {
    for (const fs::path& file : recipe_files()) {
        SCOPED_TRACE(file.string());
        const run_config c = load_config(file);
        EXPECT_EQ(c.training.max_steps, 500);
        EXPECT_EQ(c.training.seed, 42);
        EXPECT_EQ(c.training.batch_size, 12);
        EXPECT_EQ(c.training.learning_rate, 6e-4);
        EXPECT_TRUE(c.quantization.shadow_weights);
        EXPECT_TRUE(c.quantization.enabled);
        const model_config default_model;  // the default model
        EXPECT_EQ(c.model.n_layer, default_model.n_layer);
        EXPECT_EQ(c.model.n_head, default_model.n_head);
        EXPECT_EQ(c.model.n_embd, default_model.n_embd);
        EXPECT_EQ(c.model.block_size, default_model.block_size);
    }
}

// Every quantized layer, every product and operand, resolved as the trainer resolves them.
TEST(RecipeConfigs, EachRecipeResolvesToItsSourcesParameters) {
    for (const auto& [name, want] : sources()) {
        SCOPED_TRACE(name);
        const fs::path file = recipes_dir() / (name + ".toml");
        ASSERT_TRUE(fs::exists(file));
        const run_config c = load_config(file);
        const quantization_config& q = c.quantization;
        EXPECT_EQ(q.overflow, want.overflow);
        // Per-tensor scaling keys matter where an operand has one scale per tensor.
        const bool per_tensor = std::any_of(want.operands.begin(), want.operands.end(), [](const auto& o) {
            return o.second.granularity == granularity_kind::tensor;
        });
        if (per_tensor) {
            EXPECT_EQ(q.scaling, want.scaling);
            EXPECT_EQ(q.margin, want.margin);
            EXPECT_EQ(q.tensor_scale, want.tensor_scale);
        }
        if (per_tensor && want.scaling == scaling_mode::delayed) {
            EXPECT_EQ(q.amax_history_len, want.amax_history_len);
            EXPECT_EQ(q.first_scale, want.first_scale);
            EXPECT_EQ(q.amax_compute, want.amax_compute);
        }
        const resolved_recipe recipe = resolve(c);  // the whole model: rules take layers by place too
        for (const std::string& layer : layer_names(c.model)) {
            SCOPED_TRACE(layer);
            const bool high = want.high_precision.count(layer) > 0;
            for (const auto& [use, o] : want.operands) {
                const auto [product, operand] = use;
                SCOPED_TRACE(std::string(product_names().name(product)) + "." +
                             operand_names().name(operand));
                const operand_spec s = recipe.at(layer).product(product).operand(operand);
                if (high) {
                    EXPECT_EQ(s.format, "bf16");
                    EXPECT_EQ(s.granularity, granularity_kind::tensor);
                    continue;
                }
                EXPECT_EQ(s.format, o.format);
                EXPECT_EQ(s.rounding, o.rounding);
                EXPECT_EQ(s.granularity, o.granularity);
                EXPECT_EQ(s.pre_scale, o.pre_scale);
                if (o.granularity == granularity_kind::block) {
                    EXPECT_EQ(s.block_size, o.block_size);
                    EXPECT_EQ(s.block_rows, o.block_rows);
                    EXPECT_EQ(s.scale_format, o.scale_format);
                    EXPECT_EQ(s.scale_rule, o.scale_rule);
                }
            }
            for (product_kind p :
                 {product_kind::forward, product_kind::input_gradient, product_kind::weight_gradient}) {
                const std::optional<accumulator_config> a = recipe.at(layer).product(p).accumulator;
                if (high || !want.accumulator) EXPECT_FALSE(a.has_value()) << "float32 products";
                else EXPECT_TRUE(a && *a == *want.accumulator);
                const std::optional<transform_config> t = recipe.at(layer).product(p).transform;
                const auto wt = want.transforms.find(p);
                if (high || wt == want.transforms.end()) EXPECT_FALSE(t.has_value()) << "no transform";
                else EXPECT_TRUE(t && *t == wt->second) << (t ? t->name : "none");
            }
        }
    }
}

}  // namespace
}  // namespace altgrad::test
