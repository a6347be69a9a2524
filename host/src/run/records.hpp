// The run directory's contents as typed records: everything `altgrad-host run`
// writes into a run directory and everything `--resume`, `report` and any
// later consumer read back from it. The records are plain data; run/files.hpp
// writes and reads them (JSON through nlohmann-json), one writer and one
// reader each. No LibTorch, no trainer types: this room is a leaf, and the
// trainer, the stability code and the report all come to it.
//
// A run directory (docs/training.md, "The run directory"):
//   config.toml             the fully resolved config (config/run_config.hpp writes it)
//   metrics.jsonl           one metrics_line per line, each with its kind and the run's id
//   summary.json            summary_record, written when the run ends (or fails)
//   checkpoints/step_N/     model.pt, optimizer.pt, rng.pt, bit_stall.pt (LibTorch archives),
//                           interventions/NAME.state (plugin-owned bytes), and state.json
//                           (checkpoint_state), written last: its presence marks a complete checkpoint
//   reports/failure.md      the failure report of a collapsed run
#pragma once

#include <cmath>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "run/catalog.hpp"

namespace altgrad::host::run {

// ---- metrics.jsonl ----------------------------------------------------------------
// Every line is a JSON object whose first keys are "kind", "run_id" and "step"
// (steps done when it was written). Non-finite numbers are written as null.

// kind "train": one optimizer step, its metrics by the catalog's names
// (run/catalog.hpp, record train), written in the catalog's order. The
// trainer's step record also carries the step metrics stored elsewhere
// (bit_stall, at measurements: the tensor lines hold it), which the writer
// leaves out: the failure detector and the run's history read them here.
struct train_line {
    int64_t step = 0;
    metric_values values;
};

// kind "val": one evaluation on the validation split (val_loss).
struct val_line {
    int64_t step = 0;
    metric_values values;
};

// kind "tensor": one quantized tensor at its last use (a tensor quantized
// twice, along two dimensions, sums both copies' counts and block
// statistics): the catalog's tensor metrics (scale, amax, overflow, underflow,
// count; bit_stall_rate for weights at measurements; blocks.* for
// block-scaled tensors). What the trainer measures, the metrics line writes,
// the interventions observe (stability/plugin_set.hpp), the failure report
// lists and the report reads back.
struct tensor_line {
    int64_t step = 0;
    std::string tensor, role, format;  // "blocks.0.mlp.fc.weight", "weight", "e4m3"
    metric_values values;
    // overflow / count and underflow / count; NaN when nothing was counted.
    double overflow_rate() const;
    double underflow_rate() const;
    double bit_stall_rate() const { return values.get("bit_stall_rate"); }  // NaN: not measured
};

// kind "diagnostic": what one diagnostic plugin said about one tensor ("*": all).
struct diagnostic_line {
    int64_t step = 0;
    std::string diagnostic, tensor, role;
    std::vector<std::pair<std::string, double>> values;  // in the plugin's order
};

// kind "event": something happened: "clip_grad_norm" (value), "skip_step",
// "switch_format" (tensor, from, to), "nonfinite" (plugin "host"), "collapse"
// (plugin "host"; mode, evidence_step).
struct event_line {
    int64_t step = 0;
    std::string event, plugin, reason;
    std::optional<double> value;
    std::string tensor, from, to;  // switch_format
    std::string mode;              // collapse
    std::optional<int64_t> evidence_step;
};

using metrics_line = std::variant<train_line, val_line, tensor_line, diagnostic_line, event_line>;

// "train", "val", "tensor", "diagnostic", "event".
const char* kind_name(const metrics_line& line);
int64_t step_of(const metrics_line& line);

// ---- the run's history (summary.json, the failure report, checkpoints) -------------------

// One tensor moved from one format to another by an intervention.
struct format_switch {
    int64_t step = 0;
    std::string plugin, tensor, from, to;
};

// One diagnostic value averaged over the tensors it was measured on, at one step.
struct diagnostic_mean {
    int64_t step = 0;
    std::string name;  // "stiffness.stiffness_mean"
    double value = NAN;
};

// What summary.json and the failure report need of the run so far; kept in
// checkpoints, so a resumed run reports the whole run.
struct run_history {
    std::vector<format_switch> switches;
    std::map<std::string, std::map<std::string, int64_t>> interventions;  // plugin -> action kind -> count
    std::vector<std::string> events;                                      // one line each, for the report
    std::deque<train_line> trend;                                         // the last steps
    std::deque<diagnostic_mean> diagnostics;                              // the last snapshots
    // Evaluations so far: the summary's final and best validation loss cover
    // the whole run, across resumes.
    double last_val_loss = NAN, best_val_loss = NAN;
    // Wall-clock and CPU seconds the run had taken when this checkpoint was
    // written, its earlier processes' included, so that a resumed run's
    // summary gives the whole run's time (the work redone after a crash is
    // counted once). NaN: unknown (a checkpoint of a host before these).
    double elapsed_seconds = 0, elapsed_cpu_seconds = 0;
};

// ---- summary.json -------------------------------------------------------------------

struct formats_record {
    std::string weight, activation, gradient;
};

// How a run's training process died (status "crashed"): of a signal, in a
// plugin call or outside any.
struct crash_record {
    int signal = 0;            // e.g. 11
    std::string signal_name;   // e.g. "SIGSEGV"
    std::string plugin, call;  // empty: no plugin call was running
    int64_t steps_done = 0;    // steps finished before the crash
};

// What the corpus alone predicts (data/ngram.hpp), beside the run's losses:
// the train split's unigram entropy and the held-out bigram and trigram
// cross-entropies on the validation split, nats per token. NaN: not recorded
// (a summary of a host before them, or of a crashed run).
struct corpus_record {
    double unigram_entropy = NAN, bigram = NAN, trigram = NAN;
};

struct summary_record {
    std::string run_id, name;
    std::string status;        // "finished", "collapsed", "error", "crashed", "interrupted" (SIGINT/SIGTERM)
    std::string failure_mode;  // "none", "nan_loss", ... (stability/failure.hpp)
    std::optional<int64_t> failure_step;
    std::string failure_evidence;
    int64_t steps_done = 0, max_steps = 0, seed = 0;
    // The catalog's run metrics (record summary): final_train_loss,
    // final_val_loss, best_val_loss (NaN: not finite, or none), seconds and
    // cpu_seconds (across resumes: run_history::elapsed_seconds; NaN where
    // unknown, e.g. a crash summary's CPU time).
    metric_values values;
    formats_record formats;  // the global formats at the start
    // The model's trainable parameters (a tied weight once): "model": {"parameters": N}, what study 5's
    // scaling law takes as N. nullopt: unknown (a host before it, or a crash summary).
    std::optional<int64_t> parameters;
    corpus_record corpus;
    std::vector<format_switch> switches;
    std::map<std::string, std::map<std::string, int64_t>> interventions;
    std::optional<crash_record> crash;  // status "crashed" only
};

// ---- checkpoints/step_N/state.json ----------------------------------------------------
// Everything of a checkpoint that is not a tensor. Numbers are exact: finite
// doubles round-trip through JSON's decimal form, and non-finite ones are
// written as the strings "nan", "inf", "-inf".

// Delayed scaling of one tensor (quant/scaling.hpp).
struct scaling_record {
    float scale = 1.0f;
    std::vector<double> amax_history;  // oldest first
};

// One quantization site: its current format (interventions switch them), its
// scaling and its last measured bit-stall rate.
struct site_record {
    std::string name, format;
    double bit_stall_rate = NAN;
    scaling_record scaling;
};

// The failure detector's streaks (stability/failure.hpp).
struct streak_record {
    int64_t length = 0, first_step = -1;
    double first_value = 0, last_value = 0;
};
struct detector_record {
    streak_record nonfinite, bit_stall, overflow, vanishing;
    double previous_window_loss = NAN;
    // Finite training losses since the last measurement: the window whose
    // mean the bit-stall test compares with the previous one.
    double window_loss_sum = 0;
    int64_t window_loss_n = 0;
};

// One file of a checkpoint folder (every one but state.json), as written:
// resume verifies each before it reads any, so a damaged byte is refused
// rather than resumed silently wrong.
struct file_record {
    std::string path;  // relative to the checkpoint folder, '/'-separated
    uint64_t bytes = 0;
    uint32_t crc32 = 0;  // CRC-32 (IEEE 802.3, as zlib computes it) of the contents
};

struct checkpoint_state {
    // state.json's layout; a newer one is refused. 3: the file records its own
    // CRC-32 (state_crc32); 2: the trend's rows hold every value of their train
    // line (1: five of them, the bit stall as bit_stall_rate). 1 and 2 are read.
    static constexpr int kVersion = 3;
    // As read: whether state.json's own CRC-32 was there and matched (layout 3;
    // the older layouts have none, and their contents cannot be checked).
    bool self_checked = false;
    std::string run_id;
    int64_t step = 0;  // steps done; must equal the folder's step_N
    detector_record detector;
    std::vector<site_record> sites;  // in the model's site order
    run_history history;
    std::vector<file_record> files;  // every other file of the folder
};

}  // namespace altgrad::host::run
