// Planted bug: the running total of gradient overflow that decides when to
// clip lives in a static global, shared by every instance, instead of in the
// instance. create resets it, so one instance at a time (and two fresh
// instances one after the other) behave; two live instances disturb each
// other, which the kit's instances.separate must catch.
#include <altgrad/sdk/intervention_plugin.hpp>

#include <cmath>
#include <string>

namespace {

double g_total_overflow = 0.0;  // the bug: should be a member

class broken_shared_state {
public:
    broken_shared_state() { g_total_overflow = 0.0; }

    void observe(const altgrad_observation& o, altgrad::sdk::action_sink& out) {
        for (size_t i = 0; i < o.tensor_count; ++i) {
            const altgrad_tensor_observation& t = altgrad::sdk::observed_tensor(o, i);
            if (t.role == ALTGRAD_TENSOR_GRADIENT && std::isfinite(t.overflow_rate))
                g_total_overflow += t.overflow_rate;
        }
        if (g_total_overflow > 0.05)
            out.clip(1.0, "total gradient overflow " + std::to_string(g_total_overflow) + " > 0.05");
    }
};

broken_shared_state make(const altgrad::sdk::param_view&) { return broken_shared_state(); }

}  // namespace

ALTGRAD_INTERVENTION_PLUGIN(
    "broken_shared_state", 1, 0, 0,
    "Test plugin: an intervention whose state is a static global that all instances share", make)
