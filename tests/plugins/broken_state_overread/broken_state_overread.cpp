// Test plugin: an intervention that saves its state correctly but whose
// load_state reads one byte past the state it is given (as a reader that
// trusts a length inside the bytes might). The kit hands load_state a guarded
// buffer, so state.resume must come out crashed, naming the call.
#include <altgrad/sdk/intervention_plugin.hpp>

namespace {

class counting {
public:
    void observe(const altgrad_observation&, altgrad::sdk::action_sink&) { ++steps_; }
    void save_state(altgrad::sdk::state_writer& w) const {
        w.put_u32(1);
        w.put_u64(steps_);
    }
    void load_state(altgrad::sdk::state_reader& r) {
        r.expect_layout(1);
        steps_ = r.get_u64("steps");
    }

private:
    uint64_t steps_ = 0;
};

counting make(const altgrad::sdk::param_view&) { return counting(); }
using adapter = altgrad::sdk::intervention_adapter<counting, &make>;

altgrad_status load_state_overread(altgrad_intervention* p, const void* data, size_t size, altgrad_error* e) {
    volatile unsigned char past = size > 0 ? static_cast<const unsigned char*>(data)[size] : 0;  // the bug
    (void)past;
    return adapter::load_state(p, data, size, e);
}

const altgrad_intervention_vtable* table() {
    static altgrad_intervention_vtable t = *adapter::vtable();
    t.load_state = &load_state_overread;
    return &t;
}

}  // namespace

ALTGRAD_SDK_ENTRY(ALTGRAD_KIND_INTERVENTION, "broken_state_overread", 1, 0, 0,
                  "Test plugin: an intervention whose load_state reads one byte past its state", nullptr, 0,
                  nullptr, table(), nullptr)
