// reports/failure.md: what a collapsed run leaves for a post-mortem. The
// trainer gathers the evidence into a failure_context; this turns it into
// markdown: the exact step and reason, gradient sparsity, the weights whose
// quantized values did not move, the last measurements as a trend, the
// resolved config, and recommendations that follow from those numbers (each
// one cites the number it rests on; none is printed without its evidence).
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "config/run_config.hpp"
#include "run/records.hpp"
#include "stability/failure.hpp"

namespace altgrad::host::stability {

// The last diagnostic snapshots, as the run's history keeps them.
using run::diagnostic_mean;

struct failure_context {
    config::run_config config;
    verdict collapse;
    std::string checkpoint;                        // the checkpoint saved at the collapse (run-dir relative)
    double learning_rate = NAN;                    // at the collapse
    double median_abs_weight = NAN;                // over all quantized weights
    std::vector<run::train_line> trend;            // the last steps, oldest first
    std::vector<run::tensor_line> tensors;         // every quantized tensor, at its last use
    std::map<std::string, int> mantissa_bits;      // of each float or fixed-point format used (by name)
    std::vector<std::string> nonfinite_gradients;  // parameters whose gradient had NaN/Inf at the collapse
    std::vector<diagnostic_mean> diagnostics;      // the last diagnostic snapshots
    std::vector<std::string> events;               // interventions' actions so far, one line each
};

std::string failure_report_markdown(const failure_context& c);

}  // namespace altgrad::host::stability
