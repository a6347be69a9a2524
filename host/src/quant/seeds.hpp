// The seeds of a quantized linear layer's random bits: each quantization's
// stochastic rounding and each product's random transform. One derivation
// for the trainer (train/quant_plan.cpp) and Python's QuantLinear
// (altgrad.seed_of), so both draw the same bits for the same (run seed, step,
// layer): docs/recipes.md, "Random bits".
#pragma once

#include <cstddef>
#include <cstdint>

#include "util/splitmix.hpp"

namespace altgrad::host::quant {

// The seed of one use of a random stream in one step: a hash of (run seed,
// step, stream). The step is the trainer's optimizer step (Python: the
// layer's forward calls, counted from 0).
constexpr uint64_t seed_of(uint64_t run_seed, uint64_t step, uint64_t stream) {
    return splitmix64(run_seed ^ splitmix64(step ^ splitmix64(stream)));
}

// A layer's operand roles, in its streams' order.
enum class operand_role : uint64_t { weight = 0, activation = 1, output_gradient = 2 };

// The stochastic-rounding stream of an operand of linear layer `layer` (of
// `layers`, in the model's order): 3 * layer + role for its first copy, and
// 3 * layers further on for its second (the copy along the other product's
// reduction dimension, by the first use's settings or its own).
constexpr uint64_t operand_stream(size_t layer, operand_role role, size_t layers, bool second_copy) {
    return (second_copy ? 3 * uint64_t{layers} : 0) + 3 * uint64_t{layer} + static_cast<uint64_t>(role);
}

// The stream of a product's transform (both its operands take its seed):
// from 2^62, apart from every operand's stream; product in
// config::product_kind order (forward, input_gradient, weight_gradient).
constexpr uint64_t transform_stream(size_t layer, size_t product) {
    return (uint64_t{1} << 62) + 3 * uint64_t{layer} + uint64_t{product};
}

}  // namespace altgrad::host::quant
