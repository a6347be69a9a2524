// The hand-off from a config to the kernels: a config's quantization
// resolved once for a model's linear layers. For every layer and each of its
// three products: the transform, the accumulator, and how each of the two
// operands is quantized, every key decided (docs/recipes.md, "How a recipe
// resolves"). The trainer, Python's altgrad.recipe and altgrad.torch, the
// report and the failure report read this and nothing else: resolve() is the
// one place that walks the global keys, the role tables, the product tables
// and the rules.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/run_config.hpp"
#include "config/schema.hpp"

namespace altgrad::host::config {

// One product of one layer: y = x·Wᵀ (forward), dx = dy·W (input_gradient),
// dW = dyᵀ·x (weight_gradient).
struct product_recipe {
    product_kind product = product_kind::forward;
    // The product's transform and accumulator, with the key that decided
    // each ("quantization.rules[2].forward.transform"), for errors.
    std::optional<transform_config> transform;
    std::string transform_key;
    std::optional<accumulator_config> accumulator;
    std::string accumulator_key;
    // Its operands A and B (operands_of(product) order), every key resolved.
    std::array<operand_spec, 2> operands;
    // Whether each operand is quantized for this product with settings of
    // its own: always for a tensor's first use; for a second use (W in
    // input_gradient, x and dy in weight_gradient) only when its settings
    // differ from the first use's (same_quantization), else the first use's
    // copy (or site) serves both products.
    std::array<bool, 2> own{true, true};

    const operand_spec& operand(operand_kind o) const;
    bool owns(operand_kind o) const;
};

struct layer_recipe {
    std::string layer;  // "blocks.0.attn.qkv", or a module name of the user's model
    std::array<product_recipe, kProducts> products;  // by product_kind

    const product_recipe& product(product_kind p) const { return products[static_cast<size_t>(p)]; }
    // An operand's first use (W and x in forward, dy in input_gradient) and second use.
    const operand_spec& first_use(operand_kind o) const;
    const operand_spec& second_use(operand_kind o) const;
    bool second_use_owns(operand_kind o) const;
    // Whether anything of the layer is quantized, transformed or accumulated.
    bool quantizes() const;
};

struct resolved_recipe {
    bool enabled = true;               // quantization.enabled: false resolves every operand to fp32
    std::vector<layer_recipe> layers;  // in the order given to resolve

    // The layer named `layer`; throws host::error when it was not resolved.
    const layer_recipe& at(std::string_view layer) const;
    // Every format an operand of a product uses (its first and second uses),
    // "fp32" included, sorted: what the report calls the run's formats.
    std::vector<std::string> operand_formats() const;
};

// The product of an operand's second use: W's is input_gradient, x's and dy's weight_gradient.
product_kind second_use_of(operand_kind o);

// `q` resolved for `layers` (names the rules' patterns match). Disabled
// quantization resolves every operand to "fp32", with no transform or
// accumulator. Needs a validated config (the reader's): it does not check keys.
resolved_recipe resolve(const quantization_config& q, const std::vector<std::string>& layers);

// How [quantization.communication] quantizes each parameter's gradient
// (config::communication_config), every key resolved: quantization's
// global keys, backward_rounding, then the gradients table's. Format "fp32"
// when it has none, or quantization is disabled.
operand_spec communication_spec(const quantization_config& q);

// Run `c`'s quantization resolved for its own model's layers (layer_names(c.model)).
resolved_recipe resolve(const run_config& c);

// The first rule of `c` that takes no layer of `layers`, or only layers an
// earlier rule already takes (a typo in a pattern, or the wrong order), as
// the problem at its selector's key; nullopt when every rule decides some
// layer. `layers_given`: the caller named the layers (Python's model), so the
// error lists them; else they are c.model's and the error summarizes them.
std::optional<config_problem> rule_problem(const run_config& c, const std::vector<std::string>& layers,
                                           bool layers_given);

}  // namespace altgrad::host::config
