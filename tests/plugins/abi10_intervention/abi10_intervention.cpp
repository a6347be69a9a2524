// Test plugin: an intervention as a plugin built with the ABI 1.0 headers
// looks to a 1.1 host: its entry says 1.0 and its vtable's struct_size ends
// after observe, before save_state. The host must load it, treat it as saving
// no state, and say on resume that it starts afresh. It clips every step to
// 1.0 (a visible answer that needs no state).
#include <cstddef>

#include <altgrad/sdk/intervention_plugin.hpp>

namespace {

class abi10_intervention {
public:
    void observe(const altgrad_observation&, altgrad::sdk::action_sink& out) {
        out.clip(1.0, "clips every step");
    }
};

abi10_intervention make(const altgrad::sdk::param_view&) { return abi10_intervention(); }

using adapter = altgrad::sdk::intervention_adapter<abi10_intervention, &make>;
// The 1.0 layout: the 1.1 fields lie beyond struct_size (and are NULL here,
// but a host must not read them at all).
const altgrad_intervention_vtable kTable = {offsetof(altgrad_intervention_vtable, save_state),
                                            &adapter::create,
                                            &adapter::destroy,
                                            &adapter::observe,
                                            nullptr,
                                            nullptr};

}  // namespace

extern "C" ALTGRAD_EXPORT const altgrad_entry* altgrad_plugin_entry(void) {
    static const altgrad_descriptor descriptor = {
        sizeof(altgrad_descriptor),
        ALTGRAD_KIND_INTERVENTION,
        "abi10_intervention",
        {1, 0, 0},
        "Test plugin: an ABI 1.0 intervention (clips every step to 1.0)",
        nullptr,
        0};
    static const altgrad_entry entry = {
        sizeof(altgrad_entry), {1, 0, 0}, &descriptor, nullptr, &kTable, nullptr};
    return &entry;
}
