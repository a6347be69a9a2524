// Test plugin: an intervention whose vtable sets save_state but not
// load_state. ABI 1.1 asks for both or neither, so the host must refuse to
// load it, naming the intervention table.
#include <altgrad/sdk/intervention_plugin.hpp>

namespace {

class state_half {
public:
    void observe(const altgrad_observation&, altgrad::sdk::action_sink&) {}
    void save_state(altgrad::sdk::state_writer& w) const { w.put_u32(1); }
    void load_state(altgrad::sdk::state_reader& r) { r.expect_layout(1); }
};

state_half make(const altgrad::sdk::param_view&) { return state_half(); }

using adapter = altgrad::sdk::intervention_adapter<state_half, &make>;
const altgrad_intervention_vtable kTable = {sizeof(altgrad_intervention_vtable),
                                            &adapter::create,
                                            &adapter::destroy,
                                            &adapter::observe,
                                            &adapter::save_state,
                                            nullptr};  // the bug: load_state missing

}  // namespace

ALTGRAD_SDK_ENTRY(ALTGRAD_KIND_INTERVENTION, "state_half", 1, 0, 0,
                  "Test plugin: save_state without load_state", nullptr, 0, nullptr, &kTable, nullptr)
