// Planted bug: clipping switches on for good at the first gradient overflow
// rate above 1%, but save_state writes only the step count, not that it is
// on; a resumed instance stops clipping, which the kit's state.resume must
// catch.
#include <altgrad/sdk/intervention_plugin.hpp>

#include <cmath>

namespace {

class broken_forgetful_state {
public:
    void observe(const altgrad_observation& o, altgrad::sdk::action_sink& out) {
        for (size_t i = 0; i < o.tensor_count; ++i) {
            const altgrad_tensor_observation& t = altgrad::sdk::observed_tensor(o, i);
            if (t.role == ALTGRAD_TENSOR_GRADIENT && t.overflow_rate > 0.01) on_ = true;
        }
        if (on_) out.clip(1.0, "gradient overflow seen: clipping on");
        ++steps_;
    }
    void save_state(altgrad::sdk::state_writer& w) const {
        w.put_u32(1);
        w.put_u64(steps_);  // the bug: on_ is not saved
    }
    void load_state(altgrad::sdk::state_reader& r) {
        r.expect_layout(1);
        steps_ = r.get_u64("steps");
    }

private:
    bool on_ = false;
    uint64_t steps_ = 0;
};

broken_forgetful_state make(const altgrad::sdk::param_view&) { return broken_forgetful_state(); }

}  // namespace

ALTGRAD_INTERVENTION_PLUGIN(
    "broken_forgetful_state", 1, 0, 0,
    "Test plugin: an intervention whose saved state leaves out whether clipping is on", make)
