// Test plugin: a diagnostic that measures nothing but writes one element past
// its value buffer (an off-by-one a hand-written loop makes). The kit's guard
// page after the buffer must turn it into a crash naming the call.
#include <altgrad/sdk/diagnostic_plugin.hpp>

namespace {

class nothing {
public:
    uint32_t interests() const { return 1u << ALTGRAD_TENSOR_WEIGHT; }
    size_t max_values_per_tensor() const { return 1; }
    void measure(uint64_t, const altgrad_tensor_view*, size_t, altgrad::sdk::value_sink&) {}
};

nothing make(const altgrad::sdk::param_view&) { return nothing(); }
using adapter = altgrad::sdk::diagnostic_adapter<nothing, &make>;

altgrad_status measure(altgrad_diagnostic*, uint64_t, const altgrad_tensor_view*, size_t,
                       altgrad_value_buffer* values, altgrad_error*) {
    values->items[values->capacity].value = 1.0;
    values->count = 0;
    return ALTGRAD_STATUS_OK;
}

const altgrad_diagnostic_vtable kTable = {
    sizeof(altgrad_diagnostic_vtable), &adapter::create, &adapter::destroy, &adapter::interests,
    &adapter::max_values_per_tensor,   &measure};

}  // namespace

ALTGRAD_SDK_ENTRY(ALTGRAD_KIND_DIAGNOSTIC, "broken_value_overrun", 1, 0, 0,
                  "Test plugin: a diagnostic writing one value past its buffer", nullptr, 0, nullptr, nullptr,
                  &kTable)
