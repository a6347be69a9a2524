// How the host's step metrics are computed: one entry per metric, by the
// name run/catalog.cpp describes it under (the description says what it is,
// its unit and how the report shows it; this says how to measure it). The
// trainer computes them in this order after each update, into the step's
// train line.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "config/run_config.hpp"
#include "run/records.hpp"
#include "train/quant_plan.hpp"

namespace altgrad::host::train {

// What a step metric is computed from.
struct step_inputs {
    double loss = NAN, grad_norm = NAN;  // of the forward and backward pass
    double learning_rate = NAN;
    double seconds = NAN;  // the step's wall-clock time
    double tokens = NAN;   // the tokens the step trained on, every rank's micro-batches
    const config::run_config& config;
    const quant_plan& plan;                        // each quantized tensor at its last use
    const std::vector<torch::Tensor>& parameters;  // after the update (gradients clipped)
    const run::metric_values& so_far;              // the metrics computed before this one
};

struct step_metric_computation {
    std::string name;  // the metric's name in the catalog
    std::function<double(const step_inputs&)> compute;
};

// The host's step metrics (catalog record "train"), in catalog order.
const std::vector<step_metric_computation>& host_step_metrics();

// The step's train line: every computation of `metrics`, in order.
run::train_line compute_step_metrics(int64_t step, const std::vector<step_metric_computation>& metrics,
                                     const step_inputs& in);

}  // namespace altgrad::host::train
