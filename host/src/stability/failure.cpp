#include "stability/failure.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <vector>

#include "util/error.hpp"
#include "util/numbers.hpp"

namespace altgrad::host::stability {

const name_table<failure_mode>& failure_mode_names() {
    static const name_table<failure_mode> t{{failure_mode::none, "none"},
                                            {failure_mode::nan_loss, "nan_loss"},
                                            {failure_mode::bit_stall, "bit_stall"},
                                            {failure_mode::overflow, "overflow"},
                                            {failure_mode::early_stop, "early_stop"},
                                            {failure_mode::gradient_vanishing, "gradient_vanishing"},
                                            {failure_mode::unknown, "unknown"}};
    return t;
}

namespace {

std::string percent(double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * x);
    return buf;
}

}  // namespace

void failure_detector::track(streak& s, double value, double threshold, int64_t step) {
    if (std::isnan(value)) return;  // not measured this step: the streak neither grows nor breaks
    if (value > threshold) s.hit(step, value);
    else s.miss();
}

std::optional<verdict> failure_detector::observe(const step_evidence& e) {
    if (e.finite) nonfinite_.miss();
    else nonfinite_.hit(e.step, e.loss);
    if (!std::isnan(e.bit_stall_rate)) {
        // Stalled: the rate is high, the updates are really lost, and the loss stopped improving.
        const bool progress = !(std::isfinite(e.window_loss) && std::isfinite(previous_window_loss_)) ||
                              e.window_loss < previous_window_loss_ * (1.0 - c_.min_progress);
        if (e.updates_lost && e.bit_stall_rate > c_.bit_stall && !progress) bit_stall_.hit(e.step, e.bit_stall_rate);
        else bit_stall_.miss();
        previous_window_loss_ = e.window_loss;
    }
    track(overflow_, e.overflow_rate, c_.overflow, e.step);
    track(vanishing_, e.grad_sparsity, c_.vanishing, e.step);

    verdict v;
    v.decided_step = e.step;
    const int64_t tolerated = interventions_ ? c_.max_nonfinite_steps : 0;
    if (nonfinite_.length > tolerated) {
        v.mode = failure_mode::nan_loss;
        v.evidence_step = nonfinite_.first_step;
        v.evidence = "loss or gradient not finite from step " + std::to_string(nonfinite_.first_step) + ", " +
                     std::to_string(nonfinite_.length) + " step(s) in a row" +
                     (interventions_ ? " (" + std::to_string(tolerated) + " tolerated while interventions act)" : "");
        return v;
    }
    const auto decided = [&](const streak& s, failure_mode mode, const char* what, double threshold) {
        v.mode = mode;
        v.evidence_step = s.first_step;
        v.evidence = std::string(what) + " above " + percent(threshold) + " at " + std::to_string(s.length) +
                     " consecutive measurements from step " + std::to_string(s.first_step) + " (" +
                     percent(s.first_value) + " then, " + percent(s.last_value) + " now)";
        return v;
    };
    if (bit_stall_.length >= c_.patience)
        return decided(bit_stall_, failure_mode::bit_stall, "weight bit-stall rate (loss not improving)", c_.bit_stall);
    if (overflow_.length >= c_.patience) return decided(overflow_, failure_mode::overflow, "overflow rate", c_.overflow);
    if (vanishing_.length >= c_.patience)
        return decided(vanishing_, failure_mode::gradient_vanishing, "near-zero gradient fraction", c_.vanishing);
    return std::nullopt;
}

verdict failure_detector::stopped_early(int64_t steps_done, const std::string& why) const {
    verdict v;
    v.decided_step = steps_done;
    v.evidence_step = steps_done;
    const bool early = static_cast<double>(steps_done) < c_.early_stop * static_cast<double>(max_steps_);
    v.mode = early ? failure_mode::early_stop : failure_mode::unknown;
    v.evidence = "stopped at step " + std::to_string(steps_done) + " of " + std::to_string(max_steps_) +
                 (early ? " (before " + percent(c_.early_stop) + " of the run)" : "") + ": " + why;
    return v;
}

// Four streaks (length first_step first_value last_value), then the previous
// window loss; doubles as C99 hex floats, so they come back bit for bit.
run::detector_record failure_detector::state() const {
    const auto out = [](const streak& s) { return run::streak_record{s.length, s.first_step, s.first_value, s.last_value}; };
    return {out(nonfinite_), out(bit_stall_), out(overflow_), out(vanishing_), previous_window_loss_};
}

void failure_detector::restore(const run::detector_record& r) {
    const auto in = [](const run::streak_record& x, streak& s) {
        s.length = x.length;
        s.first_step = x.first_step;
        s.first_value = x.first_value;
        s.last_value = x.last_value;
    };
    in(r.nonfinite, nonfinite_);
    in(r.bit_stall, bit_stall_);
    in(r.overflow, overflow_);
    in(r.vanishing, vanishing_);
    previous_window_loss_ = r.previous_window_loss;
}

}  // namespace altgrad::host::stability
