// precision_schedule: switch chosen tensors to another format from a chosen
// step on (issue #30: the NVFP4 recipe's BF16 final phase, arXiv 2509.25149).
//
// The first step in the new format is S = at_step when at_step > 0, else
// S = ceil(at_fraction * max_steps) (the run's length, ABI 1.4's
// observation field). Steps count from 0 and a SWITCH_FORMAT action takes
// effect from the step after the one observed, so the plugin asks for the
// switch when it observes step S - 1: steps S .. max_steps - 1 run in `to`.
// It asks exactly once (at that step; stateless, so a resumed run past S
// asks nothing, its checkpoint holding the switched formats), one action
// for the pattern `tensors`: the host switches every tensor whose name
// matches and records the switch with this plugin's reason. S = 0 (a
// fraction of 0, or no run length known, as in the conformance kit) never
// switches: the run's first step is its config's. A tensor's second use
// without settings of its own follows its first use (docs/config.md).
#include <altgrad/sdk/intervention_plugin.hpp>
#include <altgrad/sdk/names.hpp>

#include <cmath>
#include <cstdint>
#include <string>

namespace {

using altgrad::sdk::action_sink;
using altgrad::sdk::param_view;
using altgrad::sdk::plugin_error;

class precision_schedule {
public:
    precision_schedule(std::string to, std::string tensors, int64_t at_step, double at_fraction)
        : to_(std::move(to)), tensors_(std::move(tensors)), at_step_(at_step), at_fraction_(at_fraction) {}

    void observe(const altgrad_observation& o, action_sink& out) const {
        const uint64_t first = first_step(altgrad::sdk::observed_max_steps(o));
        if (first == 0 || o.step + 1 != first) return;
        const std::string when =
            at_step_ > 0 ? "at_step " + std::to_string(at_step_)
                         : "at_fraction " + action_sink::number_text("%.6g", at_fraction_) + " of " +
                               std::to_string(altgrad::sdk::observed_max_steps(o)) + " steps";
        out.switch_format(tensors_, to_,
                          action_sink::fit("schedule: '" + action_sink::fit(tensors_, 80) + "' in " + to_ +
                                           " from step " + std::to_string(first) + " (" + when + ")"));
    }

private:
    // S, the first step in the new format; 0: never.
    uint64_t first_step(uint64_t max_steps) const {
        if (at_step_ > 0) return static_cast<uint64_t>(at_step_);
        return static_cast<uint64_t>(std::ceil(at_fraction_ * static_cast<double>(max_steps)));
    }
    std::string to_, tensors_;
    int64_t at_step_;
    double at_fraction_;
};

precision_schedule make(const param_view& p) {
    const std::string to = p.get_string("to"), tensors = p.get_string("tensors");
    if (!altgrad::sdk::is_plugin_name(to))
        throw plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT, "parameter 'to' (\"" + action_sink::fit(to, 80) +
                                                                "\"): expected a format plugin name (" +
                                                                altgrad::sdk::kPluginNamePattern + ")");
    if (tensors.empty() || tensors.size() >= ALTGRAD_ACTION_TEXT_CAPACITY)
        throw plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT,
                           "parameter 'tensors': expected a tensor name or pattern of 1.." +
                               std::to_string(ALTGRAD_ACTION_TEXT_CAPACITY - 1) + " characters");
    const int64_t at_step = p.get_int("at_step");
    const double at_fraction = p.get_float("at_fraction");
    if (at_step < 0) throw plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT, "parameter 'at_step' must be >= 0");
    if (!(at_fraction >= 0.0 && at_fraction <= 1.0))
        throw plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT, "parameter 'at_fraction' must be in [0, 1]");
    return precision_schedule(to, tensors, at_step, at_fraction);
}

const altgrad_param_spec kParams[] = {
    {sizeof(altgrad_param_spec), "to", ALTGRAD_PARAM_STRING, "the format to switch to"},
    {sizeof(altgrad_param_spec), "tensors", ALTGRAD_PARAM_STRING, "which tensors: a name or pattern"},
    {sizeof(altgrad_param_spec), "at_step", ALTGRAD_PARAM_INT,
     "the first step in the new format; 0: at_fraction"},
    {sizeof(altgrad_param_spec), "at_fraction", ALTGRAD_PARAM_FLOAT,
     "the first step as a fraction of the run (with at_step 0)"},
};

}  // namespace

ALTGRAD_INTERVENTION_PLUGIN_WITH_PARAMS(make, kParams, sizeof kParams / sizeof kParams[0])
