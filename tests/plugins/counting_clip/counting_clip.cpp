// Test plugin: an intervention whose answer depends on everything it has
// observed, and which saves that in checkpoints (ABI 1.1). Every step it clips
// the gradient norm to 0.05 x (1 + the number of steps it has seen before this
// one), so a resumed run repeats the uninterrupted one only if the count comes
// back from the checkpoint. Its reasons echo part of each observation.
#include <altgrad/sdk/intervention_plugin.hpp>

#include <cstdio>
#include <string>

namespace {

class counting_clip {
public:
    void observe(const altgrad_observation& o, altgrad::sdk::action_sink& out) {
        // The reason also echoes what the host observed (the first weight's
        // bit-stall rate, NaN unless measured after the previous step, and
        // the non-finite run), so the run's metrics show whether a resumed
        // host observes what the uninterrupted one did.
        char stall[64] = "no weight";
        for (size_t i = 0; i < o.tensor_count; ++i) {
            const altgrad_tensor_observation& t = altgrad::sdk::observed_tensor(o, i);
            if (t.role == ALTGRAD_TENSOR_WEIGHT) {
                std::snprintf(stall, sizeof stall, "%a", t.bit_stall_rate);
                break;
            }
        }
        out.clip(0.05 * static_cast<double>(1 + seen_),
                 "seen " + std::to_string(seen_) + " steps before this one; weight stall " + stall +
                     "; non-finite run " + std::to_string(o.consecutive_nonfinite_steps));
        ++seen_;
    }
    void save_state(altgrad::sdk::state_writer& w) const {
        w.put_u32(1);
        w.put_u64(seen_);
    }
    void load_state(altgrad::sdk::state_reader& r) {
        r.expect_layout(1);
        seen_ = r.get_u64("steps seen");
    }

private:
    uint64_t seen_ = 0;
};

counting_clip make(const altgrad::sdk::param_view&) { return counting_clip(); }

}  // namespace

ALTGRAD_INTERVENTION_PLUGIN(
    "counting_clip", 1, 0, 0,
    "Test plugin: clips to 0.05 x (1 + steps seen before), its count saved in checkpoints", make)
