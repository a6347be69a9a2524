// `altgrad-host run`: train the GPT of model.hpp on a config, every quantized
// tensor going through the format plugins, into a run directory (its files:
// run/records.hpp; the loop: train/training_run.hpp).
// No LibTorch types here, so the CLI does not pull LibTorch's headers in.
#pragma once

#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

namespace altgrad::host::train {

struct run_request {
    std::filesystem::path config;       // CONFIG.toml (ignored with resume: the run's config.toml is used)
    std::vector<std::string> overrides; // --set KEY=VALUE
    std::filesystem::path plugins;      // --plugins DIR
    std::filesystem::path out;          // --out RUN_DIR (empty: <output.dir>/<name>)
    std::filesystem::path resume;       // --resume RUN_DIR (empty: a new run)
    bool fallback = false;              // --fallback: resume from the newest intact checkpoint
    bool live_progress = false;         // a terminal: one updating line; else plain lines
};

struct run_summary {
    std::filesystem::path run_dir;
    int64_t steps_done = 0;
    int64_t max_steps = 0;
    double final_train_loss = 0;
    double final_val_loss = 0;
    double best_val_loss = 0;
    double seconds = 0;
    std::string stop_reason;  // "finished" or why it stopped early
};

run_summary run_training(const run_request& request, std::ostream& log);

}  // namespace altgrad::host::train
