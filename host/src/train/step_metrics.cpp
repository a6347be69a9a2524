#include "train/step_metrics.hpp"

#include <algorithm>

#include "train/measure.hpp"

namespace altgrad::host::train {

const std::vector<step_metric_computation>& host_step_metrics() {
    static const std::vector<step_metric_computation> metrics = {
        {"loss", [](const step_inputs& in) { return in.loss; }},
        {"lr", [](const step_inputs& in) { return in.learning_rate; }},
        {"grad_norm", [](const step_inputs& in) { return in.grad_norm; }},
        {"tokens_per_s", [](const step_inputs& in) { return in.tokens / std::max(in.seconds, 1e-9); }},
        {"grad_sparsity",
         [](const step_inputs& in) { return grad_sparsity(in.parameters, in.config.failure.near_zero); }},
        {"overflow_rate", [](const step_inputs& in) { return worst_quantization_rates(in.plan).overflow; }},
        {"underflow_rate", [](const step_inputs& in) { return worst_quantization_rates(in.plan).underflow; }},
    };
    return metrics;
}

run::train_line compute_step_metrics(int64_t step, const std::vector<step_metric_computation>& metrics,
                                     const step_inputs& in) {
    run::train_line line{step, {}};
    const step_inputs with_line{in.loss,   in.grad_norm, in.learning_rate, in.seconds, in.tokens,
                                in.config, in.plan,      in.parameters,    line.values};
    for (const step_metric_computation& m : metrics) line.values.set(m.name, m.compute(with_line));
    return line;
}

}  // namespace altgrad::host::train
