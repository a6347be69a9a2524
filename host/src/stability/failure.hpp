// Failure detection: decides, step by step, whether a run has collapsed and
// how (the seeds' failure modes), and when its evidence first appeared.
//
// The trainer feeds every optimizer step's record (run::train_line: loss,
// grad_norm, grad_sparsity, overflow_rate, and at measurements the bit stall
// of all weights, "bit_stall"); the detector answers a verdict the first time
// a condition holds long enough:
//  - nan_loss: the loss or the gradient was not finite, at the first such step
//    when no intervention is enabled (nothing could act), else after
//    failure.max_nonfinite_steps consecutive ones;
//  - overflow / gradient_vanishing: the rate was above its threshold at
//    failure.patience consecutive steps;
//  - bit_stall: at failure.patience consecutive bit-stall measurements (every
//    diagnostic interval) the rate was above its threshold AND the mean
//    training loss of the interval improved by less than failure.min_progress
//    on the previous interval's (the mean of the finite losses since the
//    previous measurement), with the weights stored in their format
//    (quantization.shadow_weights = false). With FP32 master weights an update
//    too small to move q(w) is not lost: it accumulates in the master copy, so
//    a high rate there is reported but is no evidence (measured: a healthy
//    E5M2 run with master weights passes 50% late in its cosine schedule).
// When several hold at once the seeds' order decides: nan_loss, bit_stall,
// overflow, gradient_vanishing. A run that ends without a verdict is finished,
// or, stopped by an error, early_stop (before failure.early_stop of its steps)
// or unknown.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "config/run_config.hpp"
#include "run/records.hpp"
#include "util/name_table.hpp"

namespace altgrad::host::stability {

enum class failure_mode { none, nan_loss, bit_stall, overflow, early_stop, gradient_vanishing, unknown };

const name_table<failure_mode>&
failure_mode_names();  // none, nan_loss, bit_stall, ... (summary.json, reports)
inline const char* failure_mode_name(failure_mode m) { return failure_mode_names().name(m); }

struct verdict {
    failure_mode mode = failure_mode::none;
    int64_t evidence_step = -1;  // the first step of the evidence that decided
    int64_t decided_step = -1;   // the step at which it was decided
    std::string evidence;        // one line: the numbers that decided
};

class failure_detector {
public:
    // `weights_in_format`: no FP32 master copy (quantization.shadow_weights =
    // false), so an update the format cannot show is lost.
    failure_detector(const config::failure_config& c, bool interventions_enabled, bool weights_in_format,
                     int64_t max_steps)
        : c_(c),
          interventions_(interventions_enabled),
          updates_lost_(weights_in_format),
          max_steps_(max_steps) {}

    // A verdict when the run collapsed at this step, else nullopt. Rates are
    // fractions in [0, 1]; an absent or NaN one was not measured.
    std::optional<verdict> observe(const run::train_line& step);

    // Consecutive non-finite steps up to and including the last observed.
    uint32_t consecutive_nonfinite() const { return static_cast<uint32_t>(s_.nonfinite.length); }

    // The verdict for a run that stopped at `steps_done` on an error (not a collapse).
    verdict stopped_early(int64_t steps_done, const std::string& why) const;

    // The streaks, the loss window and the last window loss, for
    // checkpoints, so a resumed run decides as the uninterrupted one would.
    const run::detector_record& state() const { return s_; }
    void restore(const run::detector_record& r) { s_ = r; }

private:
    void track(run::streak_record& s, double value, double threshold, int64_t step);

    config::failure_config c_;
    bool interventions_;
    bool updates_lost_;
    int64_t max_steps_;
    run::detector_record s_;
};

}  // namespace altgrad::host::stability
