// The per-product selection of the run config (host/src/config/run_config.hpp):
// [quantization.forward], [quantization.input_gradient] and
// [quantization.weight_gradient], a rule's forward = {...}, and the
// accumulator each may give (docs/config.md, docs/accumulation.md).
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "config/run_config.hpp"
#include "config/writer.hpp"
#include "config_errors.hpp"
#include "util/error.hpp"

namespace altgrad::test {
namespace {

using namespace host::config;

// The text's error, checked as expect_error does.
void expect_refused(const std::string& text, const std::string& key, const std::string& what,
                    const std::vector<std::string>& overrides = {}) {
    expect_error(error_of(text, overrides), key, what);
}

const char* const kModel = "[model]\nn_layer = 2\n";

// Every product of every layer of a config without product tables: no accumulator.
TEST(ConfigProducts, NoneByDefault) {
    const run_config c = parse_config(kModel, kFile);
    for (const std::string& layer : layer_names(c.model))
        for (product_kind p :
             {product_kind::forward, product_kind::input_gradient, product_kind::weight_gradient})
            EXPECT_FALSE(recipe_of(c.quantization, layer).product(p).accumulator) << layer;
    EXPECT_EQ(to_toml(c).find("accumulator"), std::string::npos);
}

const char* const kProducts = R"(
[quantization.forward]
accumulator = { format = "float", params = { exponent_bits = 8, mantissa_bits = 13 }, promote_every = 128 }

[quantization.weight_gradient]
accumulator = { format = "fp16", rounding = "nearest", mma_depth = 8 }

[[quantization.rules]]
pattern = "lm_head"
forward = { accumulator = "none" }

[[quantization.rules]]
pattern = "blocks.0.*"
weight_gradient = { accumulator = { format = "bf16" } }
input_gradient = { accumulator = { format = "e8m13_acc", promote_every = 64 } }
)";

// The section's table for every layer, the first matching rule's where it
// gives that product, "none" taking a layer out; keys left out are defaults.
TEST(ConfigProducts, RuleOverSectionPerProduct) {
    const run_config c = parse_config(std::string(kModel) + kProducts, kFile);
    const quantization_config& q = c.quantization;

    const auto fwd = recipe_of(q, "blocks.1.attn.qkv").product(product_kind::forward).accumulator;
    ASSERT_TRUE(fwd);
    EXPECT_EQ(fwd->format, "float");
    EXPECT_EQ(fwd->params, (host::given_params{{"exponent_bits", {"8", host::param_kind::integer}},
                                               {"mantissa_bits", {"13", host::param_kind::integer}}}));
    EXPECT_EQ(fwd->rounding, ALTGRAD_ROUND_TOWARD_ZERO);  // the default
    EXPECT_EQ(fwd->mma_depth, 32);                        // an FP8 WGMMA's K
    EXPECT_EQ(fwd->promote_every, 128);
    EXPECT_FALSE(recipe_of(q, "lm_head").product(product_kind::forward).accumulator);  // "none"
    // lm_head's rule says nothing of the weight gradient: the section's.
    const auto head_dw = recipe_of(q, "lm_head").product(product_kind::weight_gradient).accumulator;
    ASSERT_TRUE(head_dw);
    EXPECT_EQ(head_dw->format, "fp16");
    EXPECT_EQ(head_dw->rounding, ALTGRAD_ROUND_NEAREST_EVEN);
    EXPECT_EQ(head_dw->mma_depth, 8);
    EXPECT_EQ(head_dw->promote_every, 0);

    EXPECT_EQ(recipe_of(q, "blocks.0.mlp.fc").product(product_kind::weight_gradient).accumulator->format,
              "bf16");
    EXPECT_EQ(
        recipe_of(q, "blocks.0.mlp.fc").product(product_kind::input_gradient).accumulator->promote_every, 64);
    // Block 0's rule gives no forward accumulator: the section's.
    EXPECT_EQ(recipe_of(q, "blocks.0.mlp.fc").product(product_kind::forward).accumulator->format, "float");
    EXPECT_FALSE(recipe_of(q, "blocks.1.mlp.fc").product(product_kind::input_gradient).accumulator);
}

TEST(ConfigProducts, ResolvedConfigRoundTrips) {
    const run_config c = parse_config(std::string(kModel) + kProducts, kFile);
    const std::string text = to_toml(c);
    EXPECT_NE(
        text.find(
            "[quantization.forward]\naccumulator = { format = \"float\", params = { exponent_bits = 8, "
            "mantissa_bits = 13 }, rounding = \"toward-zero\", mma_depth = 32, promote_every = 128 }\n"),
        std::string::npos)
        << text;
    EXPECT_NE(text.find("pattern = \"lm_head\"\nforward = { accumulator = \"none\" }\n"), std::string::npos)
        << text;
    EXPECT_EQ(text.find("[quantization.input_gradient]"), std::string::npos) << text;
    const run_config again = parse_config(text, kFile);
    EXPECT_TRUE(again == c) << text;
    // A different accumulator is a different config.
    run_config other = c;
    other.quantization.products[0].accumulator->promote_every = 0;
    EXPECT_FALSE(other == c);
    other = c;
    other.quantization.rules[1].products[2].accumulator->format = "fp16";
    EXPECT_FALSE(other == c);
}

TEST(ConfigProducts, SetGivesAnAccumulatorOrNone) {
    const run_config c = parse_config(std::string(kModel) + kProducts, kFile,
                                      {"quantization.input_gradient.accumulator={ format = \"fp32\" }",
                                       "quantization.forward.accumulator=none"});
    EXPECT_EQ(recipe_of(c.quantization, "blocks.1.mlp.fc")
                  .product(product_kind::input_gradient)
                  .accumulator->format,
              "fp32");
    EXPECT_FALSE(recipe_of(c.quantization, "blocks.1.mlp.fc").product(product_kind::forward).accumulator);
    expect_refused(kModel, "quantization.forward",
                   "is a table; set one of its keys, e.g. --set quantization.forward.accumulator=",
                   {"quantization.forward=1"});
    expect_refused(kModel, "quantization.forward.accumulator", "expected an accumulator",
                   {"quantization.forward.accumulator=fp16"});
}

// A format plugin named only by an accumulator may have [quantization.params.NAME].
TEST(ConfigProducts, AnAccumulatorNamesAFormatForParams) {
    const run_config c = parse_config(std::string(kModel) +
                                          "[quantization.forward]\naccumulator = { format = \"float\" }\n"
                                          "[quantization.params.float]\nmantissa_bits = 13\n",
                                      kFile);
    EXPECT_EQ(c.quantization.params.at("float").at("mantissa_bits"),
              host::given_param("13", host::param_kind::integer));
}

// An accumulator plugin's instructions (docs/accumulation.md, "Instruction
// models"): `instruction` instead of `format`, with promote_every and params
// only; written back with those keys alone, and read back equal.
TEST(ConfigProducts, AnInstructionAccumulator) {
    const run_config c =
        parse_config(std::string(kModel) +
                         "[quantization.forward]\n"
                         "accumulator = { instruction = \"sm90_wgmma_fp8\", promote_every = 128 }\n"
                         "[[quantization.rules]]\nlast = 1\n"
                         "weight_gradient = { accumulator = { instruction = \"sm80_mma_fp16\" } }\n",
                     kFile);
    const auto fwd = recipe_of(c.quantization, "blocks.0.mlp.fc").product(product_kind::forward).accumulator;
    ASSERT_TRUE(fwd);
    EXPECT_EQ(fwd->instruction, "sm90_wgmma_fp8");
    EXPECT_EQ(fwd->format, "");
    EXPECT_EQ(fwd->promote_every, 128);
    EXPECT_TRUE(fwd->modelled());
    const auto head = recipe_of(c.quantization, "lm_head").product(product_kind::weight_gradient).accumulator;
    ASSERT_TRUE(head);
    EXPECT_EQ(head->instruction, "sm80_mma_fp16");
    const std::string text = to_toml(c);
    EXPECT_NE(text.find("accumulator = { instruction = \"sm90_wgmma_fp8\", promote_every = 128 }\n"),
              std::string::npos)
        << text;
    EXPECT_NE(
        text.find(
            "weight_gradient = { accumulator = { instruction = \"sm80_mma_fp16\", promote_every = 0 } }"),
        std::string::npos)
        << text;
    EXPECT_EQ(parse_config(text, kFile), c);
    run_config other = c;
    other.quantization.products[0].accumulator->instruction = "sm89_mma_fp8";
    EXPECT_NE(other, c);

    const std::string f = std::string(kModel) + "[quantization.forward]\n";
    expect_refused(f + "accumulator = { instruction = \"sm90_wgmma_fp8\", mma_depth = 32 }\n",
                   "quantization.forward.accumulator.mma_depth",
                   "decides its own depth, rounding and format");
    expect_refused(f + "accumulator = { instruction = \"sm90_wgmma_fp8\", rounding = \"nearest\" }\n",
                   "quantization.forward.accumulator.rounding", "decides its own depth");
    expect_refused(f + "accumulator = { instruction = \"sm90_wgmma_fp8\", format = \"fp16\" }\n",
                   "quantization.forward.accumulator.format", "or format = ... for the chunked model");
    expect_refused(f + "accumulator = { instruction = \"SM90\" }\n",
                   "quantization.forward.accumulator.instruction", "expected an accumulator plugin's name");
    expect_refused(f + "accumulator = { instruction = 90 }\n", "quantization.forward.accumulator.instruction",
                   "expected");
    expect_refused(f + "accumulator = { promote_every = 128 }\n", "quantization.forward.accumulator.format",
                   "or a GPU instruction's accumulator plugin");
}

TEST(ConfigProducts, MistakesNameTheKey) {
    const std::string fwd = std::string(kModel) + "[quantization.forward]\n";
    expect_refused(fwd + "accumulator = 3\n", "quantization.forward.accumulator",
                   "expected an accumulator ({ format = \"fp16\"");
    expect_refused(fwd + "accumulator = \"fp16\"\n", "quantization.forward.accumulator",
                   "or \"none\", got \"fp16\"");
    expect_refused(fwd + "accumulator = { rounding = \"nearest\" }\n",
                   "quantization.forward.accumulator.format", "missing");
    expect_refused(fwd + "accumulator = { format = \"fp16\", promote = 128 }\n",
                   "quantization.forward.accumulator.promote", "unknown key (a typo?)");
    expect_refused(fwd + "accumulator = { format = \"fp16\", rounding = \"stochastic\" }\n",
                   "quantization.forward.accumulator.rounding", "not modelled");
    expect_refused(fwd + "accumulator = { format = \"fp16\", rounding = \"up\" }\n",
                   "quantization.forward.accumulator.rounding", "expected one of");
    expect_refused(fwd + "accumulator = { format = \"fp16\", mma_depth = 0 }\n",
                   "quantization.forward.accumulator.mma_depth", "expected an integer 1..16777216, got 0");
    expect_refused(fwd + "accumulator = { format = \"fp16\", promote_every = -1 }\n",
                   "quantization.forward.accumulator.promote_every", "expected an integer 0..1000000000");
    expect_refused(fwd + "accumulator = { format = \"FP16\" }\n", "quantization.forward.accumulator.format",
                   "expected a format plugin name");
    expect_refused(fwd + "accumulator = { format = \"float\", params = 8 }\n",
                   "quantization.forward.accumulator.params", "expected a table of parameters");
    expect_refused(fwd + "accumulator = { format = \"float\", params = { bits = [1] } }\n",
                   "quantization.forward.accumulator.params.bits", "expected a string, number or boolean");
    expect_refused(fwd + "acumulator = \"none\"\n", "quantization.forward.acumulator",
                   "unknown key (a typo?)");
    expect_refused(std::string(kModel) + "[quantization.backward]\n", "quantization.backward", "unknown key");
    const std::string rule = std::string(kModel) + "[[quantization.rules]]\npattern = \"lm_head\"\n";
    expect_refused(rule + "forward = \"fp16\"\n", "quantization.rules[0].forward", "expected a table");
    expect_refused(rule + "forward = { format = \"fp16\" }\n", "quantization.rules[0].forward.format",
                   "unknown key (a typo?)");
    expect_refused(rule + "forward = { format = \"fp16\" }\n", "quantization.rules[0].forward.format",
                   "the forward product's operands are x and w");
    expect_refused(rule + "forward = { accumulator = { format = \"fp16\", mma_depth = 0 } }\n",
                   "quantization.rules[0].forward.accumulator.mma_depth", "expected an integer");
    expect_refused(rule + "backward = { accumulator = \"none\" }\n", "quantization.rules[0].backward",
                   "unknown key");
}

// A rule that gives only an accumulator sets something.
TEST(ConfigProducts, ARuleWithOnlyAnAccumulatorIsARule) {
    const run_config c = parse_config(std::string(kModel) +
                                          "[[quantization.rules]]\npattern = \"lm_head\"\n"
                                          "weight_gradient = { accumulator = { format = \"fp16\" } }\n",
                                      kFile);
    EXPECT_EQ(recipe_of(c.quantization, "lm_head").product(product_kind::weight_gradient).accumulator->format,
              "fp16");
    EXPECT_FALSE(
        recipe_of(c.quantization, "blocks.0.mlp.fc").product(product_kind::weight_gradient).accumulator);
}

// ---- Per-product operands (issue #30).

const char* const kOperands = R"(
[quantization]
weight_format = "e4m3"
activation_format = "e4m3"
gradient_format = "e5m2"
granularity = "block"
block_size = 32

[quantization.weight]
block_rows = 32

[quantization.forward]
x = { format = "bf16", granularity = "tensor" }

[quantization.weight_gradient]
x = { rounding = "stochastic", pre_scale = 0.75, source = "rowwise" }
dy = { block_size = 16 }

[[quantization.rules]]
pattern = "lm_head"
format = "bf16"
weight_gradient = { dy = { format = "e4m3" } }
)";

// Written by hand from the levels: quantization's keys and the role tables,
// then the product tables, then the first matching rule.
TEST(ConfigOperands, EachLevelOverTheOneBefore) {
    const run_config c = parse_config(std::string(kModel) + kOperands, kFile);
    const quantization_config& q = c.quantization;
    const std::string layer = "blocks.1.attn.qkv";
    // forward.x: the product table's format and granularity over the role's.
    operand_spec s = recipe_of(q, layer).product(product_kind::forward).operand(operand_kind::x);
    EXPECT_EQ(s.format, "bf16");
    EXPECT_EQ(s.granularity, granularity_kind::tensor);
    EXPECT_EQ(s.rounding, ALTGRAD_ROUND_NEAREST_EVEN);
    EXPECT_EQ(s.key, "quantization.forward.x");
    // weight_gradient.x: the role's format and blocks, its own rounding, pre-scale and source.
    s = recipe_of(q, layer).product(product_kind::weight_gradient).operand(operand_kind::x);
    EXPECT_EQ(s.format, "e4m3");
    EXPECT_EQ(s.granularity, granularity_kind::block);
    EXPECT_EQ(s.block_size, 32);
    EXPECT_EQ(s.block_rows, 1);
    EXPECT_EQ(s.rounding, ALTGRAD_ROUND_STOCHASTIC);
    EXPECT_EQ(s.pre_scale, 0.75);
    EXPECT_EQ(s.source, copy_source::rowwise);
    // W: 32x32 tiles from the role table, in both its products; the rounding of the forward direction.
    for (product_kind p : {product_kind::forward, product_kind::input_gradient}) {
        s = recipe_of(q, layer).product(p).operand(operand_kind::w);
        EXPECT_EQ(s.block_rows, 32);
        EXPECT_EQ(s.block_size, 32);
        EXPECT_EQ(s.format, "e4m3");
        EXPECT_EQ(s.key, "quantization.weight");  // the role table that gave the tiles
    }
    // dy: the backward rounding (stochastic by default); blocks of 16 in the weight gradient only.
    s = recipe_of(q, layer).product(product_kind::input_gradient).operand(operand_kind::dy);
    EXPECT_EQ(s.block_size, 32);
    EXPECT_EQ(s.key, "quantization.gradient_format");  // no table sets it: its format's key
    s = recipe_of(q, layer).product(product_kind::weight_gradient).operand(operand_kind::dy);
    EXPECT_EQ(s.block_size, 16);
    EXPECT_EQ(s.rounding, ALTGRAD_ROUND_STOCHASTIC);
    EXPECT_EQ(s.format, "e5m2");
    // The rule's format beats the product tables; its own operand table beats its format.
    EXPECT_EQ(recipe_of(q, "lm_head").product(product_kind::forward).operand(operand_kind::x).format, "bf16");
    EXPECT_EQ(recipe_of(q, "lm_head").product(product_kind::input_gradient).operand(operand_kind::dy).format,
              "bf16");
    s = recipe_of(q, "lm_head").product(product_kind::weight_gradient).operand(operand_kind::dy);
    EXPECT_EQ(s.format, "e4m3");
    EXPECT_EQ(s.block_size, 16);  // the product table's, which the rule leaves
    EXPECT_EQ(s.key, "quantization.rules[0].weight_gradient.dy");
}

// Without product tables each operand is its role's, in both its products.
TEST(ConfigOperands, WithoutTablesBothUsesAreTheRoles) {
    const run_config c =
        parse_config(std::string(kModel) + "[quantization]\ngranularity = \"block\"\n", kFile);
    for (const layer_recipe& r : resolve(c).layers)
        for (operand_kind o : {operand_kind::x, operand_kind::w, operand_kind::dy}) {
            EXPECT_FALSE(r.second_use_owns(o)) << r.layer << " " << operand_names().name(o);
            EXPECT_EQ(r.second_use(o).block_size, r.first_use(o).block_size);
            EXPECT_EQ(r.second_use(o).format, r.first_use(o).format);
        }
}

TEST(ConfigOperands, ResolvedConfigRoundTripsAndSetGivesAnOperand) {
    const run_config c = parse_config(std::string(kModel) + kOperands, kFile);
    const std::string text = to_toml(c);
    EXPECT_NE(text.find("x = { rounding = \"stochastic\", pre_scale = 0.75, source = \"rowwise\" }\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("weight_gradient = { dy = { format = \"e4m3\" } }\n"), std::string::npos) << text;
    EXPECT_NE(text.find("block_rows = 32\n"), std::string::npos) << text;
    EXPECT_TRUE(parse_config(text, kFile) == c) << text;
    run_config other = c;
    other.quantization.products[2].operands[static_cast<size_t>(operand_kind::x)].pre_scale = 0.5;
    EXPECT_FALSE(other == c);
    const run_config set =
        parse_config(std::string(kModel), kFile,
                     {"quantization.input_gradient.w={ format = \"fp4_e2m1\", block_rows = 1 }"});
    EXPECT_EQ(recipe_of(set.quantization, "lm_head")
                  .product(product_kind::input_gradient)
                  .operand(operand_kind::w)
                  .format,
              "fp4_e2m1");
}

TEST(ConfigOperands, MistakesNameTheKey) {
    const std::string m = kModel;
    expect_refused(m + "[quantization.forward]\ndy = { format = \"bf16\" }\n", "quantization.forward.dy",
                   "the forward product's operands are x and w");
    expect_refused(m + "[quantization.forward]\nx = \"bf16\"\n", "quantization.forward.x",
                   "expected a table");
    expect_refused(m + "[quantization.forward]\nx = {}\n", "quantization.forward.x", "sets nothing");
    expect_refused(m + "[quantization.forward]\nx = { fromat = \"bf16\" }\n", "quantization.forward.x.fromat",
                   "unknown key (a typo?)");
    expect_refused(m + "[quantization.forward]\nx = { source = \"rowwise\" }\n",
                   "quantization.forward.x.source", "only an operand's second use has a source");
    expect_refused(m + "[quantization.weight_gradient]\nx = { source = \"columns\" }\n",
                   "quantization.weight_gradient.x.source", "expected one of unquantized, rowwise");
    expect_refused(m + "[quantization.weight_gradient]\nx = { pre_scale = 0 }\n",
                   "quantization.weight_gradient.x.pre_scale", "expected a number in (0, 1000000]");
    expect_refused(m + "[quantization.weight_gradient]\nx = { block_size = 0 }\n",
                   "quantization.weight_gradient.x.block_size", "expected an integer 1..");
    expect_refused(m + "[quantization.forward]\nw = { granularity = \"row\", block_rows = 16 }\n",
                   "quantization.forward.w.block_rows", "needs granularity = \"block\"");
    expect_refused(m + "[quantization.weight]\ngranularity = \"tensor\"\nblock_rows = 2\n",
                   "quantization.weight.block_rows", "needs granularity");
    expect_refused(m + "[quantization]\nblock_rows = 16\n", "quantization.block_rows", "needs granularity");
    expect_refused(
        m + "[[quantization.rules]]\npattern = \"lm_head\"\ninput_gradient = { x = { format = \"bf16\" } }\n",
        "quantization.rules[0].input_gradient.x", "the input_gradient product's operands are dy and w");
}

// ---- Per-product transforms (issue #30).

TEST(ConfigTransforms, ProductTablesAndRules) {
    const run_config c =
        parse_config(std::string(kModel) +
                         "[quantization.weight_gradient]\ntransform = { name = \"random_hadamard\", "
                         "params = { d = 16, sign_seed = 7 } }\n"
                         "[quantization.input_gradient]\ntransform = \"hadamard\"\n"
                         "[[quantization.rules]]\npattern = \"lm_head\"\n"
                         "weight_gradient = { transform = \"none\" }\n",
                     kFile);
    const quantization_config& q = c.quantization;
    const product_recipe fc_dw = recipe_of(q, "blocks.0.mlp.fc").product(product_kind::weight_gradient);
    const auto& t = fc_dw.transform;
    ASSERT_TRUE(t);
    EXPECT_EQ(t->name, "random_hadamard");
    EXPECT_EQ(t->params.at("d"), host::given_param("16", host::param_kind::integer));
    EXPECT_EQ(t->params.at("sign_seed"), host::given_param("7", host::param_kind::integer));
    EXPECT_EQ(fc_dw.transform_key, "quantization.weight_gradient.transform");
    EXPECT_EQ(recipe_of(q, "lm_head").product(product_kind::input_gradient).transform->name, "hadamard");
    const product_recipe head_dw = recipe_of(q, "lm_head").product(product_kind::weight_gradient);
    EXPECT_FALSE(head_dw.transform);
    EXPECT_EQ(head_dw.transform_key, "quantization.rules[0].weight_gradient.transform");
    EXPECT_FALSE(recipe_of(q, "blocks.0.mlp.fc").product(product_kind::forward).transform);
    const std::string text = to_toml(c);
    EXPECT_NE(text.find("transform = { name = \"random_hadamard\", params = { d = 16, sign_seed = 7 } }\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("weight_gradient = { transform = \"none\" }"), std::string::npos) << text;
    EXPECT_TRUE(parse_config(text, kFile) == c) << text;
    const run_config set = parse_config(kModel, kFile, {"quantization.forward.transform=hadamard"});
    EXPECT_EQ(recipe_of(set.quantization, "lm_head").product(product_kind::forward).transform->name,
              "hadamard");
}

TEST(ConfigTransforms, MistakesNameTheKey) {
    const std::string m = std::string(kModel) + "[quantization.forward]\n";
    expect_refused(m + "transform = 16\n", "quantization.forward.transform",
                   "expected a transform plugin's name");
    expect_refused(m + "transform = \"Hadamard\"\n", "quantization.forward.transform", "got \"Hadamard\"");
    expect_refused(m + "transform = { d = 16 }\n", "quantization.forward.transform.d", "unknown key");
    expect_refused(m + "transform = { params = { d = 16 } }\n", "quantization.forward.transform.name",
                   "missing");
    expect_refused(m + "transform = { name = \"hadamard\", params = { d = [16] } }\n",
                   "quantization.forward.transform.params.d", "expected a string, number or boolean");
    expect_refused(std::string(kModel) +
                       "[quantization.weight_gradient]\ntransform = \"hadamard\"\n"
                       "x = { source = \"rowwise\" }\n",
                   "quantization.weight_gradient.x.source",
                   "\"rowwise\" with a transform on the weight_gradient");
}

// ---- Quantized communication (issue #47): [quantization.communication].

TEST(ConfigCommunication, OffByDefault) {
    const run_config c = parse_config(kModel, kFile);
    EXPECT_FALSE(c.quantization.communication.quantizes());
    EXPECT_EQ(communication_spec(c.quantization).format, "fp32");
    EXPECT_EQ(to_toml(c).find("[quantization.communication]"), std::string::npos);
}

// The gradients' keys resolve from quantization's global keys, their rounding
// from backward_rounding (a gradient's), the table's keys over both.
TEST(ConfigCommunication, GradientsResolveFromTheGlobalKeys) {
    const run_config c =
        parse_config(std::string(kModel) +
                         "[quantization]\nbackward_rounding = \"nearest\"\nscale_format = \"ue8m0\"\n"
                         "[quantization.communication]\ngradients = { format = \"e4m3\", granularity = "
                         "\"block\", block_size = 16, scaling = \"current\" }\n",
                     kFile);
    const communication_config& cc = c.quantization.communication;
    EXPECT_TRUE(cc.quantizes());
    ASSERT_TRUE(cc.scaling);
    EXPECT_EQ(*cc.scaling, scaling_mode::current);
    const operand_spec s = communication_spec(c.quantization);
    EXPECT_EQ(s.format, "e4m3");
    EXPECT_EQ(s.rounding, ALTGRAD_ROUND_NEAREST_EVEN);
    EXPECT_EQ(s.granularity, granularity_kind::block);
    EXPECT_EQ(s.block_size, 16);
    EXPECT_EQ(s.block_rows, 1);
    EXPECT_EQ(s.scale_format, "ue8m0");
    EXPECT_EQ(s.key, "quantization.communication.gradients");
    // Stochastic by default, as quantization.backward_rounding is.
    const run_config d = parse_config(std::string(kModel), kFile,
                                      {"quantization.communication.gradients={ format = \"e5m2\" }"});
    EXPECT_EQ(communication_spec(d.quantization).rounding, ALTGRAD_ROUND_STOCHASTIC);
    EXPECT_EQ(communication_spec(d.quantization).granularity, granularity_kind::tensor);
    EXPECT_FALSE(d.quantization.communication.scaling);
    // Quantization disabled sends gradients as computed.
    const run_config off = parse_config(std::string(kModel) + "[quantization]\nenabled = false\n", kFile,
                                        {"quantization.communication.gradients={ format = \"e5m2\" }"});
    EXPECT_EQ(communication_spec(off.quantization).format, "fp32");
}

TEST(ConfigCommunication, RoundTripsAndCompares) {
    const run_config c = parse_config(std::string(kModel) +
                                          "[quantization.communication]\ngradients = { format = \"e5m2\", "
                                          "rounding = \"nearest\", scaling = \"none\" }\n",
                                      kFile);
    const std::string text = to_toml(c);
    EXPECT_NE(text.find("[quantization.communication]\ngradients = { format = \"e5m2\", rounding = "
                        "\"nearest\", scaling = \"none\" }\n"),
              std::string::npos)
        << text;
    EXPECT_TRUE(parse_config(text, kFile) == c) << text;
    run_config other = c;
    other.quantization.communication.scaling = scaling_mode::delayed;
    EXPECT_FALSE(other == c);
    other = c;
    other.quantization.communication.gradients.format = "e4m3";
    EXPECT_FALSE(other == c);
}

TEST(ConfigCommunication, MistakesNameTheKey) {
    const std::string m = std::string(kModel) + "[quantization.communication]\n";
    const std::string g = "quantization.communication.gradients";
    expect_refused(m + "gradients = \"e5m2\"\n", g, "expected a table of the gradients' keys");
    expect_refused(m + "gradients = { rounding = \"nearest\" }\n", g + ".format", "missing");
    expect_refused(m + "gradients = { format = \"e5m2\", fromat = 1 }\n", g + ".fromat",
                   "unknown key (a typo?)");
    expect_refused(m + "gradients = { format = \"e5m2\", scaling = \"later\" }\n", g + ".scaling",
                   "expected one of");
    expect_refused(m + "gradients = { format = \"e5m2\", source = \"rowwise\" }\n", g + ".source",
                   "gradients are quantized once");
    expect_refused(m + "gradients = { format = \"e5m2\", granularity = \"block\", block_rows = 16 }\n",
                   g + ".block_rows", "expected 1");
    expect_refused(m + "weights = { format = \"e5m2\" }\n", "quantization.communication.weights",
                   "unknown key (a typo?)");
    expect_refused(std::string(kModel) + "[quantization]\ncommunication = 1\n", "quantization.communication",
                   "expected a table");
}

}  // namespace
}  // namespace altgrad::test
