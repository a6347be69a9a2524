// One training run, as named phases (nanoGPT's loop, with the format plugins
// in it). run() is the loop; each phase is one member:
//   set up        the constructor: config, data, plugins, model, optimizer,
//                 run directory (new, or resumed from its latest checkpoint)
//   step          forward_backward: one batch through the quantized model, as
//                 training.grad_accum micro-batches (micro_batch), their
//                 gradients summed and their statistics kept once (step_totals)
//   intervene     ask_interventions: what the stability plugins want (clip,
//                 skip, switch formats); apply_switches after the update
//   update        update: the optimizer step, unless skipped or non-finite
//   measure       measure: the step's metrics (train/step_metrics.hpp), and
//                 bit stall and the diagnostic plugins at the diagnostic interval
//   evaluate      evaluate: validation loss, scaling frozen
//   checkpoint    checkpoint: train/checkpoint.hpp
//   finish        finish: summary.json, the closing lines of the log
// The run directory's files are written through run/files.hpp only.
// A distributed run (train/distributed.hpp) runs this loop on every rank,
// each with its share of every step's micro-batches; the ranks agree on
// every value the loop decides by, and rank 0 alone writes the run directory.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "config/run_config.hpp"
#include "data/dataset.hpp"
#include "plugins/registry.hpp"
#include "run/files.hpp"
#include "run/records.hpp"
#include "stability/failure.hpp"
#include "stability/plugin_set.hpp"
#include "train/checkpoint.hpp"
#include "train/distributed.hpp"
#include "train/measure.hpp"
#include "train/model.hpp"
#include "train/quant_plan.hpp"
#include "train/step_metrics.hpp"
#include "train/step_totals.hpp"
#include "train/trainer.hpp"

namespace altgrad::host::train {

// Where a run of config `c` trains: the CPU, or GPU local_rank (mod the GPUs
// LibTorch sees) with training.device = "cuda"; an error naming the key and
// the plugin when this process has no usable GPU or a plugin or accumulator
// of `plan` runs on the CPU only.
torch::Device training_device(const config::run_config& c, const quant_plan& plan, int local_rank);

class training_run {
public:
    // Set up: everything is checked before the run directory is made.
    training_run(const run_request& request, std::ostream& log);
    // The loop; returns when the run finished or collapsed (throws host::error
    // when a plugin or the disk fails, after writing summary.json).
    run_result run();

private:
    // What one step produced.
    struct step_result {
        double loss = NAN, grad_norm = NAN;
        bool finite = true;  // loss and gradient norm both finite
    };
    // The interventions' answers folded into what this step does.
    struct step_actions {
        double clip = INFINITY;  // the smallest max norm asked for
        bool skip = false;
        std::vector<stability::plugin_action> switches;  // applied after the update
    };

    step_result forward_backward();
    double micro_batch(int64_t m, int64_t micro_batches, bool capture, step_totals& totals);
    void quantize_gradients();
    step_actions ask_interventions(const step_result& r);
    void update(const step_result& r, const step_actions& todo);
    run::train_line measure(const step_result& r, double step_seconds);
    void apply_switches(const step_actions& todo);
    void report_progress(const run::train_line& step);
    void collapse(const stability::verdict& v);
    void evaluate();
    void checkpoint();
    // The run's wall and CPU time so far, its earlier processes' included, into history_.
    void update_elapsed();
    run_result finish(const std::string& status, const stability::verdict& v);

    void open_run_directory();
    void build_model_and_optimizer();
    // The model's trainable parameters, a tied weight once (params_ holds it once).
    int64_t parameter_count() const;
    double learning_rate_at(int64_t step) const;
    bool is_diagnostic_step(int64_t steps_done) const;
    void event(run::event_line e);
    void write_metrics(const run::metrics_line& line);  // rank 0's writer; the others' is none

    std::ostream null_log_{nullptr};  // the log of ranks other than 0
    rank_place place_;                // from the launcher's environment
    std::ostream& log_;
    // The metrics this run writes (catalog.json) and how its step metrics are computed.
    run::metric_catalog catalog_;
    std::vector<step_metric_computation> step_metrics_;
    bool live_progress_;
    std::chrono::steady_clock::time_point start_time_;
    // The run's wall and CPU time before this process: 0 for a new run, the
    // resumed checkpoint's elapsed times otherwise (NaN: unknown).
    double seconds_before_ = 0, cpu_seconds_before_ = 0;
    config::run_config c_;
    rank_group ranks_;
    std::filesystem::path run_dir_;
    bool resuming_;
    bool fallback_;  // --fallback: resume from the newest intact checkpoint
    std::string run_id_;
    data::dataset data_;
    registry plugins_;
    format_library formats_;
    stability::intervention_set interventions_;
    stability::diagnostic_set diagnostics_;
    std::shared_ptr<const format_handle> fp32_;  // the format diagnostics see for float32 tensors
    stability::failure_detector detector_;

    quant_plan plan_;
    GPT model_{nullptr};
    std::unique_ptr<torch::optim::AdamW> optimizer_;
    torch::Device device_{torch::kCPU};
    std::map<std::string, torch::Tensor> params_;  // by name
    std::vector<torch::Tensor> parameters_;
    // [quantization.communication]: each parameter's site (plan_.sites, in
    // parameters_' order; empty: gradients are sent as computed), and the
    // step's sum of its quantized micro-batch gradients so far.
    std::vector<size_t> communication_;
    std::vector<torch::Tensor> sent_;
    weight_lookup weight_of_;
    bit_stall_meter stall_;
    std::optional<run::metrics_writer> metrics_;

    // The loop's state (checkpointed, with the history).
    int64_t step_ = 0;          // steps done
    double lr_ = NAN;           // this step's learning rate
    bool stall_fresh_ = false;  // bit stall was measured at the end of the previous step
    run::run_history history_;
    std::string stop_reason_ = "finished";
    int64_t first_step_ = 0;  // where this process started (for the ETA)
    std::chrono::steady_clock::time_point loop_start_;
    std::vector<int64_t> xb_, yb_;  // the batch, token ids

    checkpointed checkpointed_parts();
};

}  // namespace altgrad::host::train
