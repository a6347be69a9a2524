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
std::string failure_detector::serialize() const {
    std::ostringstream out;
    for (const streak* s : {&nonfinite_, &bit_stall_, &overflow_, &vanishing_})
        out << s->length << " " << s->first_step << " " << hex_float(s->first_value) << " " << hex_float(s->last_value)
            << " ";
    out << hex_float(previous_window_loss_);
    return out.str();
}

void failure_detector::deserialize(const std::string& text, const std::string& where) {
    std::istringstream in(text);
    std::string word;
    std::vector<std::string> words;
    while (in >> word) words.push_back(word);
    if (words.size() != 17) throw error(where + ": failure detector state \"" + text + "\" is malformed");
    size_t k = 0;
    const auto number = [&](bool integer) {
        const std::string& w = words[k++];
        char* end = nullptr;
        const double v = integer ? static_cast<double>(std::strtoll(w.c_str(), &end, 10)) : std::strtod(w.c_str(), &end);
        if (end == w.c_str() || *end != '\0')
            throw error(where + ": failure detector state: \"" + w + "\" is not a number");
        return v;
    };
    for (streak* s : {&nonfinite_, &bit_stall_, &overflow_, &vanishing_}) {
        s->length = static_cast<int64_t>(number(true));
        s->first_step = static_cast<int64_t>(number(true));
        s->first_value = number(false);
        s->last_value = number(false);
    }
    previous_window_loss_ = number(false);
}

}  // namespace altgrad::host::stability
