// Test plugin: a correct E5M2 whose entry claims ABI 1.99, a minor newer than
// the host's. The host must refuse it, naming both versions.
#include <altgrad/sdk/exmy.hpp>
#include <altgrad/sdk/format_plugin.hpp>

namespace {
altgrad::sdk::exmy_format make(const altgrad::sdk::param_view&) {
    return altgrad::sdk::exmy_format({5, 2, 15, altgrad::sdk::exmy_specials::ieee});
}
}  // namespace

extern "C" ALTGRAD_EXPORT const altgrad_entry* altgrad_plugin_entry(void) {
    static const altgrad_descriptor descriptor = {sizeof(altgrad_descriptor),
                                                  ALTGRAD_KIND_FORMAT,
                                                  "abi_future",
                                                  {1, 0, 0},
                                                  "claims ABI 1.99",
                                                  nullptr,
                                                  0};
    static const altgrad_entry entry = {
        sizeof(altgrad_entry),
        {1, 99, 0},
        &descriptor,
        altgrad::sdk::format_adapter<altgrad::sdk::exmy_format, &make>::vtable(),
        nullptr,
        nullptr};
    return &entry;
}
