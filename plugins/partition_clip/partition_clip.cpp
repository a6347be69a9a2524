// partition_clip: partition-relative gradient clipping (research notes, STAB-05).
//
// A format with a narrow range overflows at gradient norms E5M2 handles, so
// the clip norm is scaled by the range of the format in use:
//
//   threshold = base x format_max / e5m2_max        (e5m2_max = 57344)
//
// e.g. E3M4 (max 15.5) with base 1 clips at 15.5 / 57344 = 2.70e-4.
//
// Decisions:
//   - Which tensors: only gradient tensors (roles ALTGRAD_TENSOR_GRADIENT and
//     ALTGRAD_TENSOR_OUTPUT_GRADIENT: the trainer quantizes layers' output
//     gradients, from which the parameter gradients are computed),
//     both to trigger and for the range. Clipping the global gradient norm
//     acts on parameter gradients; overflow in weights or activations is not
//     something it can fix.
//   - Which format_max: the smallest finite, positive format_max among this
//     step's gradient tensors (the narrowest partition sets the clip, so no
//     gradient partition is clipped above what its format can hold). It is
//     recomputed each step, so a later format switch moves the threshold.
//   - Activation: clipping switches on the first step a gradient tensor's
//     overflow_rate is strictly greater than overflow_threshold, and then
//     STAYS ON for the instance's lifetime. Clipping suppresses the very
//     overflow that triggered it; "on while above" would turn it off exactly
//     when it works and oscillate (clip, no overflow, unclip, overflow, ...).
//     The notes ask for "activate on overflow detection (not always-on)",
//     which this satisfies: nothing happens until overflow is seen.
//   - "On" is saved in checkpoints, so a resumed run keeps clipping.
//   - It clips in the activation step itself (that step's gradient overflowed).
//   - NaN rates (not measured) never trigger; NaN/Inf loss or grad_norm are
//     irrelevant here. A step with no gradient tensor with a valid
//     format_max answers no action even when active (no range to scale by).
#include <altgrad/sdk/intervention_plugin.hpp>

#include <cmath>
#include <string>

namespace {

using altgrad::sdk::action_sink;
using altgrad::sdk::param_view;

class partition_clip {
public:
    partition_clip(double base, double overflow_threshold, double e5m2_max)
        : base_(base), threshold_(overflow_threshold), e5m2_max_(e5m2_max) {}

    void observe(const altgrad_observation& o, action_sink& out) {
        // The worst measured overflow and the narrowest range among gradients.
        const altgrad_tensor_observation* worst = nullptr;
        const altgrad_tensor_observation* narrowest = nullptr;
        for (size_t i = 0; i < o.tensor_count; ++i) {
            const altgrad_tensor_observation& t = altgrad::sdk::observed_tensor(o, i);
            if (t.role != ALTGRAD_TENSOR_GRADIENT && t.role != ALTGRAD_TENSOR_OUTPUT_GRADIENT) continue;
            if (!std::isnan(t.overflow_rate) && (worst == nullptr || t.overflow_rate > worst->overflow_rate))
                worst = &t;
            if (std::isfinite(t.format_max) && t.format_max > 0.0 &&
                (narrowest == nullptr || t.format_max < narrowest->format_max))
                narrowest = &t;
        }
        const bool activates = !active_ && worst != nullptr && worst->overflow_rate > threshold_;
        if ((active_ || activates) && narrowest != nullptr) {
            const double value = base_ * narrowest->format_max / e5m2_max_;
            const auto num = &action_sink::number_text;
            std::string why;
            if (activates)
                why = "gradient overflow rate " + num("%.4g", worst->overflow_rate * 100.0) + "% on '" +
                      action_sink::fit(worst->name, 60) + "' > threshold " + num("%.4g", threshold_ * 100.0) +
                      "%: clipping on";
            else
                why = "clipping on since step " + std::to_string(activated_step_) +
                      " (gradient overflow rate " + num("%.4g", activated_rate_ * 100.0) + "% > threshold " +
                      num("%.4g", threshold_ * 100.0) + "%)";
            why += "; clip norm " + num("%.6g", base_) + " x " + action_sink::fit(narrowest->format, 24) +
                   " max " + num("%.6g", narrowest->format_max) + " / " + num("%.6g", e5m2_max_) + " = " +
                   num("%.6g", value);
            out.clip(value, action_sink::fit(why));
        }
        if (activates) {  // only after the action was written
            active_ = true;
            activated_step_ = o.step;
            activated_rate_ = worst->overflow_rate;
        }
    }

    // Saved state: whether clipping is on, and since when (for the reason text).
    void save_state(altgrad::sdk::state_writer& w) const {
        w.put_u32(1);  // layout version
        w.put_bool(active_);
        w.put_u64(activated_step_);
        w.put_f64(activated_rate_);
    }
    void load_state(altgrad::sdk::state_reader& r) {
        r.expect_layout(1);
        const bool active = r.get_bool("active");
        const uint64_t step = r.get_u64("activation step");
        const double rate = r.get_f64("activation overflow rate");
        active_ = active, activated_step_ = step, activated_rate_ = rate;
    }

private:
    double base_, threshold_, e5m2_max_;
    bool active_ = false;
    uint64_t activated_step_ = 0;
    double activated_rate_ = 0.0;
};

partition_clip make(const param_view& p) {
    const double base = p.get_float("base");
    const double overflow_threshold = p.get_float("overflow_threshold");
    const double e5m2_max = p.get_float("e5m2_max");
    if (!(base > 0.0))
        throw altgrad::sdk::plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT, "parameter 'base' must be > 0");
    if (!(e5m2_max > 0.0))
        throw altgrad::sdk::plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT, "parameter 'e5m2_max' must be > 0");
    if (!(overflow_threshold >= 0.0 && overflow_threshold <= 1.0))
        throw altgrad::sdk::plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT,
                                         "parameter 'overflow_threshold' must be in [0, 1]");
    return partition_clip(base, overflow_threshold, e5m2_max);
}

const altgrad_param_spec kParams[] = {
    {sizeof(altgrad_param_spec), "base", ALTGRAD_PARAM_FLOAT,
     "clip norm for a format with E5M2's range (> 0)"},
    {sizeof(altgrad_param_spec), "e5m2_max", ALTGRAD_PARAM_FLOAT, "reference range (E5M2 max finite)"},
    {sizeof(altgrad_param_spec), "overflow_threshold", ALTGRAD_PARAM_FLOAT,
     "gradient overflow rate that switches clipping on"},
};

}  // namespace

ALTGRAD_INTERVENTION_PLUGIN_WITH_PARAMS(make, kParams, sizeof kParams / sizeof kParams[0])
