// Test plugin: an E4M3 as the ABI 1.1 headers built it. Its entry says 1.1
// and its calls see the 1.1 structs only (abi11_calls.hpp), so given block
// scales it would use `scale` for every element. The host must split a
// block-scaled call into one call per block for it.
#include "../abi11_calls.hpp"

extern "C" ALTGRAD_EXPORT const altgrad_entry* altgrad_plugin_entry(void) {
    static const altgrad_descriptor descriptor = {sizeof(altgrad_descriptor),
                                                  ALTGRAD_KIND_FORMAT,
                                                  "abi11_format",
                                                  {1, 0, 0},
                                                  "Test plugin: an ABI 1.1 E4M3 (no block scales)",
                                                  nullptr,
                                                  0};
    static const altgrad_entry entry = {sizeof(altgrad_entry), {1, 1, 0}, &descriptor,
                                        abi11::table(),        nullptr,   nullptr};
    return &entry;
}
