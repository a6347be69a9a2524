// Test plugin: a correct accumulator (Hopper's FP8 instruction) whose entry
// claims ABI 1.4, before accumulators existed (a 1.4 entry has no
// accumulator field). The host must refuse it rather than read the field.
#include <altgrad/sdk/accumulator_plugin.hpp>

namespace {

altgrad::sdk::instruction_model make(const altgrad::sdk::param_view&) {
    altgrad::sdk::instruction i;
    i.depth = 32;
    i.fraction_bits = 13;
    i.output = ALTGRAD_ACC_OUTPUT_E8M13;
    return altgrad::sdk::instruction_model(i);
}

}  // namespace

extern "C" ALTGRAD_EXPORT const altgrad_entry* altgrad_plugin_entry(void) {
    static const altgrad_descriptor descriptor = {sizeof(altgrad_descriptor),
                                                  ALTGRAD_KIND_ACCUMULATOR,
                                                  "abi14_accumulator",
                                                  {1, 0, 0},
                                                  "claims ABI 1.4",
                                                  nullptr,
                                                  0};
    static const altgrad_entry entry = {
        sizeof(altgrad_entry),
        {1, 4, 0},
        &descriptor,
        nullptr,
        nullptr,
        nullptr,
        nullptr,
        altgrad::sdk::accumulator_adapter<altgrad::sdk::instruction_model, &make>::vtable()};
    return &entry;
}
