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

// What a recipe's source says, in AltGrad's terms (docs/recipes.md has the citations).
struct recipe_table {
    // Formats: W and x in the forward product, and the output gradient dy (both backward products).
    std::string weight, activation, gradient;
    altgrad_rounding forward_rounding = ALTGRAD_ROUND_NEAREST_EVEN;
    altgrad_rounding backward_rounding = ALTGRAD_ROUND_STOCHASTIC;
    altgrad_overflow overflow = ALTGRAD_OVERFLOW_SATURATE;
    granularity_kind granularity = granularity_kind::tensor;
    // Per-tensor scaling (granularity tensor only).
    scaling_mode scaling = scaling_mode::none;
    int64_t amax_history_len = 0;
    amax_compute_kind amax_compute = amax_compute_kind::max;
    int64_t margin = 0;
    // Block scaling (granularity block only).
    int64_t block_size = 0;
    std::string scale_format;
    scale_rule_kind scale_rule = scale_rule_kind::mx_floor;
};

// The TE recipes here cast with round-to-nearest-even and clip to the format's range, the gradients
// too (TE docs, "FP8 Current Scaling" and "FP8 Delayed Scaling": the cast).
recipe_table te_casts(std::string weight, std::string activation, std::string gradient, granularity_kind g) {
    recipe_table t;
    t.weight = std::move(weight);
    t.activation = std::move(activation);
    t.gradient = std::move(gradient);
    t.forward_rounding = ALTGRAD_ROUND_NEAREST_EVEN;
    t.backward_rounding = ALTGRAD_ROUND_NEAREST_EVEN;
    t.overflow = ALTGRAD_OVERFLOW_SATURATE;
    t.granularity = g;
    return t;
}

const std::map<std::string, recipe_table>& sources() {
    static const std::map<std::string, recipe_table> table = [] {
        std::map<std::string, recipe_table> t;
        // TE DelayedScaling defaults: margin 0, fp8_format HYBRID (E4M3 for x and W, E5M2 for dy),
        // amax_history_len 1024, amax_compute_algo "max".
        recipe_table delayed = te_casts("e4m3", "e4m3", "e5m2", granularity_kind::tensor);
        delayed.scaling = scaling_mode::delayed;
        delayed.amax_history_len = 1024;
        delayed.amax_compute = amax_compute_kind::max;
        delayed.margin = 0;
        t["te_delayed"] = delayed;
        // TE Float8CurrentScaling: fp8_format HYBRID, the scale from the tensor's own amax
        // (amax_epsilon 0), no margin.
        recipe_table current = te_casts("e4m3", "e4m3", "e5m2", granularity_kind::tensor);
        current.scaling = scaling_mode::current;
        current.margin = 0;
        t["te_current"] = current;
        // TE MXFP8BlockScaling: fp8_format E4M3 for every tensor, 1x32 blocks, E8M0 scales,
        // amax / 448 rounded up to a power of two.
        recipe_table mxfp8 = te_casts("e4m3", "e4m3", "e4m3", granularity_kind::block);
        mxfp8.block_size = 32;
        mxfp8.scale_format = "ue8m0";
        mxfp8.scale_rule = scale_rule_kind::round_up;
        t["te_mxfp8"] = mxfp8;
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

// Every quantized layer, every role and every product, resolved as the trainer resolves them.
TEST(RecipeConfigs, EachRecipeResolvesToItsSourcesParameters) {
    for (const auto& [name, want] : sources()) {
        SCOPED_TRACE(name);
        const fs::path file = recipes_dir() / (name + ".toml");
        ASSERT_TRUE(fs::exists(file));
        const run_config c = load_config(file);
        const quantization_config& q = c.quantization;
        EXPECT_EQ(q.forward_rounding, want.forward_rounding);
        EXPECT_EQ(q.backward_rounding, want.backward_rounding);
        EXPECT_EQ(q.overflow, want.overflow);
        EXPECT_TRUE(q.rules.empty()) << "these recipes treat every linear layer alike";
        if (want.granularity == granularity_kind::tensor) {
            EXPECT_EQ(q.scaling, want.scaling);
            EXPECT_EQ(q.margin, want.margin);
            if (want.scaling == scaling_mode::delayed) {
                EXPECT_EQ(q.amax_history_len, want.amax_history_len);
                EXPECT_EQ(q.amax_compute, want.amax_compute);
            }
        }
        for (const std::string& layer : layer_names(c.model)) {
            SCOPED_TRACE(layer);
            const layer_formats f = formats_for(q, layer);
            EXPECT_EQ(f.weight, want.weight);
            EXPECT_EQ(f.activation, want.activation);
            EXPECT_EQ(f.gradient, want.gradient);
            for (const char* role : {"weight", "activation", "gradient"}) {
                SCOPED_TRACE(role);
                const block_scaling s = scaling_for(q, layer, role);
                EXPECT_EQ(s.granularity, want.granularity);
                if (want.granularity == granularity_kind::block) {
                    EXPECT_EQ(s.block_size, want.block_size);
                    EXPECT_EQ(s.scale_format, want.scale_format);
                    EXPECT_EQ(s.scale_rule, want.scale_rule);
                }
            }
            for (product_kind p :
                 {product_kind::forward, product_kind::input_gradient, product_kind::weight_gradient})
                EXPECT_FALSE(accumulator_for(q, layer, p).has_value())
                    << "float32 products: the recipes say nothing of the accumulator";
        }
    }
}

}  // namespace
}  // namespace altgrad::test
