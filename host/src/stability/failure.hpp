// Failure detection: decides, step by step, whether a run has collapsed and
// how (the seeds' failure modes), and when its evidence first appeared.
//
// The trainer feeds one step_evidence per optimizer step; the detector answers
// a verdict the first time a condition holds long enough:
//  - nan_loss: the loss or the gradient was not finite, at the first such step
//    when no intervention is enabled (nothing could act), else after
//    failure.max_nonfinite_steps consecutive ones;
//  - overflow / gradient_vanishing: the rate was above its threshold at
//    failure.patience consecutive steps;
//  - bit_stall: at failure.patience consecutive bit-stall measurements (every
//    diagnostic interval) the rate was above its threshold AND the mean
//    training loss of the interval improved by less than failure.min_progress
//    on the previous interval's, with the weights stored in their format
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

const name_table<failure_mode>& failure_mode_names();  // none, nan_loss, bit_stall, ... (summary.json, reports)
inline const char* failure_mode_name(failure_mode m) { return failure_mode_names().name(m); }

// What one optimizer step showed. Rates are fractions in [0, 1]; NaN: not measured.
struct step_evidence {
    int64_t step = 0;             // steps done, this one included (as in metrics.jsonl)
    double loss = 0;
    bool finite = true;           // loss and gradient norm both finite
    double grad_sparsity = NAN;   // near-zero parameter-gradient elements
    double overflow_rate = NAN;   // worst quantized tensor this step
    double bit_stall_rate = NAN;  // all weights, by element; NaN except at measurements
    double window_loss = NAN;     // at measurements: mean finite training loss since the previous one
    bool updates_lost = false;    // weights stored in their format (no master copy)
};

struct verdict {
    failure_mode mode = failure_mode::none;
    int64_t evidence_step = -1;  // the first step of the evidence that decided
    int64_t decided_step = -1;   // the step at which it was decided
    std::string evidence;        // one line: the numbers that decided
};

class failure_detector {
public:
    failure_detector(const config::failure_config& c, bool interventions_enabled, int64_t max_steps)
        : c_(c), interventions_(interventions_enabled), max_steps_(max_steps) {}

    // A verdict when the run collapsed at this step, else nullopt.
    std::optional<verdict> observe(const step_evidence& e);

    // Consecutive non-finite steps up to and including the last observed.
    uint32_t consecutive_nonfinite() const { return nonfinite_.length; }

    // The verdict for a run that stopped at `steps_done` on an error (not a collapse).
    verdict stopped_early(int64_t steps_done, const std::string& why) const;

    // The streaks and the last window loss, for checkpoints, so a resumed
    // run decides as the uninterrupted one would.
    run::detector_record state() const;
    void restore(const run::detector_record& r);

private:
    struct streak {
        int64_t length = 0, first_step = -1;
        double first_value = 0, last_value = 0;
        void hit(int64_t step, double v) {
            if (length++ == 0) first_step = step, first_value = v;
            last_value = v;
        }
        void miss() { length = 0; }
    };
    void track(streak& s, double value, double threshold, int64_t step);

    config::failure_config c_;
    bool interventions_;
    int64_t max_steps_;
    streak nonfinite_, bit_stall_, overflow_, vanishing_;
    double previous_window_loss_ = NAN;
};

}  // namespace altgrad::host::stability
