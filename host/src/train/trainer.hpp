// `altgrad-host run`: train the GPT of model.hpp on a config, every quantized
// tensor going through the format plugins, into a run directory (its files:
// run/records.hpp; the loop: train/training_run.hpp).
// No LibTorch types here, so the CLI does not pull LibTorch's headers in.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "run/records.hpp"

namespace altgrad::host::train {

// A step metric a caller adds to the host's own (a test, a program that
// embeds the trainer): its description (record train) and how it follows from
// the step's other metrics. It is written, read back, listed and drawn like
// the host's (run/catalog.hpp).
struct added_step_metric {
    run::metric description;
    std::function<double(const run::metric_values& step)> compute;
};

struct run_request {
    std::filesystem::path config;        // CONFIG.toml (ignored with resume: the run's config.toml is used)
    std::vector<std::string> overrides;  // --set KEY=VALUE
    std::filesystem::path plugins;       // --plugins DIR
    std::filesystem::path out;           // --out RUN_DIR (empty: <output.dir>/<name>)
    std::filesystem::path resume;        // --resume RUN_DIR (empty: a new run)
    bool fallback = false;               // --fallback: resume from the newest intact checkpoint
    bool live_progress = false;          // a terminal: one updating line; else plain lines
    std::vector<added_step_metric> added_metrics;
};

// How a run ended: its summary.json, and where it is.
struct run_result {
    std::filesystem::path run_dir;
    run::summary_record summary;
};

run_result run_training(const run_request& request, std::ostream& log);

}  // namespace altgrad::host::train
