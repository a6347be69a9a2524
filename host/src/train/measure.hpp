// The measurements the stability machinery runs on, taken from the model's
// tensors: per step (gradient sparsity, the worst overflow and underflow
// rates, non-finite gradients) and per diagnostic interval (bit stall, and the
// diagnostic plugins fed views of weights, gradients, activations, output
// gradients and attention probabilities). The trainer calls these by name.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "plugins/format_handle.hpp"
#include "stability/plugin_set.hpp"
#include "train/model.hpp"

namespace altgrad::host::train {

// The parameter tensor behind a weight site (and, through .grad(), its gradient).
using weight_lookup = std::function<torch::Tensor(const quant_site&)>;

// Fraction of all parameter-gradient elements with |g| <= near_zero (a
// parameter without a gradient counts as all zeros; NaN compares false).
double grad_sparsity(const std::vector<torch::Tensor>& params, double near_zero);

// The largest overflow and underflow rates of any quantized tensor at its last use.
struct worst_rates {
    double overflow = 0, underflow = 0;
};
worst_rates worst_quantization_rates(const quant_plan& plan);

// Names of the parameters whose gradient holds a NaN or an Inf.
std::vector<std::string> nonfinite_gradients(const std::map<std::string, torch::Tensor>& params);

// Bit stall: the fraction of a weight's elements whose quantized value
// q(w) (its format, nearest-even, at the weight's current scale) is the same
// as that of the master weights at the previous measurement, NaN compared
// unequal. With FP32 master weights it counts weights that moved too little to
// reach another code; with weights stored in their format, updates lost.
class bit_stall_meter {
public:
    // Sets every weight site's bit_stall_rate against the previous snapshot
    // and returns the rate over all of them by element (NaN at the first
    // measurement, when there is no snapshot yet).
    double measure(quant_plan& plan, const weight_lookup& weight_of) const;
    // Take the current master weights as the next measurement's reference.
    void advance(const quant_plan& plan, const weight_lookup& weight_of);
    // The snapshot of site `k` (undefined before the first advance).
    torch::Tensor previous(size_t k) const;

    // For checkpoints: one tensor per site (undefined for non-weights), and back.
    const std::vector<torch::Tensor>& snapshots() const { return snapshots_; }
    void restore(std::vector<torch::Tensor> s) { snapshots_ = std::move(s); }

private:
    std::vector<torch::Tensor> snapshots_;  // by site index
};

// What one diagnostic plugin said about one tensor (or "*": all of them).
struct diagnostic_record {
    std::string diagnostic, tensor, role;
    std::vector<std::pair<std::string, double>> values;
};

// Hand every diagnostic the views it declared interest in and collect its
// values. `fp32` stands as the format of tensors that are not quantized
// (attention probabilities, layers kept in fp32). Captured tensors are
// released afterwards.
std::vector<diagnostic_record> run_diagnostics(stability::diagnostic_set& diagnostics, quant_plan& plan,
                                               const weight_lookup& weight_of, const bit_stall_meter& stall,
                                               const format_handle& fp32, uint64_t step);

// Forget what a capturing step kept.
void release_captures(quant_plan& plan);

}  // namespace altgrad::host::train
