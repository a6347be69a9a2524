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

namespace {

void hit(run::streak_record& s, int64_t step, double v) {
    if (s.length++ == 0) s.first_step = step, s.first_value = v;
    s.last_value = v;
}

}  // namespace

void failure_detector::track(run::streak_record& s, double value, double threshold, int64_t step) {
    if (std::isnan(value)) return;  // not measured this step: the streak neither grows nor breaks
    if (value > threshold) hit(s, step, value);
    else s.length = 0;
}

std::optional<verdict> failure_detector::observe(const run::train_line& e) {
    const double loss = e.values.get("loss");
    const bool finite = std::isfinite(loss) && std::isfinite(e.values.get("grad_norm"));
    if (finite) s_.nonfinite.length = 0;
    else hit(s_.nonfinite, e.step, loss);
    if (std::isfinite(loss)) s_.window_loss_sum += loss, ++s_.window_loss_n;
    if (const std::optional<double> stall = e.values.find("bit_stall")) {  // a measurement
        // The mean training loss since the previous measurement.
        const double window =
            s_.window_loss_n ? s_.window_loss_sum / static_cast<double>(s_.window_loss_n) : NAN;
        s_.window_loss_sum = 0, s_.window_loss_n = 0;
        if (!std::isnan(*stall)) {
            // Stalled: the rate is high, the updates are really lost, and the loss stopped improving.
            const bool progress = !(std::isfinite(window) && std::isfinite(s_.previous_window_loss)) ||
                                  window < s_.previous_window_loss * (1.0 - c_.min_progress);
            if (updates_lost_ && *stall > c_.bit_stall && !progress) hit(s_.bit_stall, e.step, *stall);
            else s_.bit_stall.length = 0;
            s_.previous_window_loss = window;
        }
    }
    track(s_.overflow, e.values.get("overflow_rate"), c_.overflow, e.step);
    track(s_.vanishing, e.values.get("grad_sparsity"), c_.vanishing, e.step);

    verdict v;
    v.decided_step = e.step;
    const int64_t tolerated = interventions_ ? c_.max_nonfinite_steps : 0;
    if (s_.nonfinite.length > tolerated) {
        v.mode = failure_mode::nan_loss;
        v.evidence_step = s_.nonfinite.first_step;
        v.evidence =
            "loss or gradient not finite from step " + std::to_string(s_.nonfinite.first_step) + ", " +
            std::to_string(s_.nonfinite.length) + " step(s) in a row" +
            (interventions_ ? " (" + std::to_string(tolerated) + " tolerated while interventions act)" : "");
        return v;
    }
    const auto decided = [&](const run::streak_record& s, failure_mode mode, const char* what,
                             double threshold) {
        v.mode = mode;
        v.evidence_step = s.first_step;
        v.evidence = std::string(what) + " above " + percent(threshold) + " at " + std::to_string(s.length) +
                     " consecutive measurements from step " + std::to_string(s.first_step) + " (" +
                     percent(s.first_value) + " then, " + percent(s.last_value) + " now)";
        return v;
    };
    if (s_.bit_stall.length >= c_.patience)
        return decided(s_.bit_stall, failure_mode::bit_stall, "weight bit-stall rate (loss not improving)",
                       c_.bit_stall);
    if (s_.overflow.length >= c_.patience)
        return decided(s_.overflow, failure_mode::overflow, "overflow rate", c_.overflow);
    if (s_.vanishing.length >= c_.patience)
        return decided(s_.vanishing, failure_mode::gradient_vanishing, "near-zero gradient fraction",
                       c_.vanishing);
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

}  // namespace altgrad::host::stability
