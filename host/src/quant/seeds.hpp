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

// The step key of micro-batch m of a step (training.grad_accum; in a
// distributed run, every rank's share of the step, numbered across ranks):
// the step itself for micro-batch 0, so a step of one micro-batch keeps its
// bits, and m * 2^40 further on for the others (steps stay below 2^40).
// Activations and gradients differ per micro-batch and take it; a weight's
// copy and a product's transform are the same for every micro-batch of a
// step, as TransformerEngine casts a weight once per step, and take the step.
constexpr uint64_t micro_batch_key(uint64_t step, uint64_t micro_batch) { return step + (micro_batch << 40); }

// The stream of dropout's generator, reseeded from (run seed, micro-batch
// key, this stream) before each micro-batch when a step has more than one.
constexpr uint64_t dropout_stream = uint64_t{1} << 63;

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

// The stochastic-rounding stream of parameter `index`'s gradient as
// [quantization.communication] sends it (the trainer's parameters in the
// model's order; keyed by the micro-batch, as every gradient is): from 2^61,
// apart from every operand's and transform's stream.
constexpr uint64_t communication_stream(size_t index) { return (uint64_t{1} << 61) + uint64_t{index}; }

}  // namespace altgrad::host::quant
