// Test plugin: abi11_format's source rebuilt against today's headers, as a
// third-party author who changes nothing would: its entry reports the current
// ABI (ALTGRAD_ABI_VERSION_INIT) while its calls still see the 1.1 structs
// only (abi11_calls.hpp) and its info declares no capabilities. The host must
// not take the version for block scales or random bits: it splits
// block-scaled calls per block and refuses random_bits 1..31.
#include "../abi11_calls.hpp"

extern "C" ALTGRAD_EXPORT const altgrad_entry* altgrad_plugin_entry(void) {
    static const altgrad_descriptor descriptor = {
        sizeof(altgrad_descriptor),
        ALTGRAD_KIND_FORMAT,
        "rebuilt_abi11_format",
        {1, 0, 0},
        "Test plugin: an ABI 1.1 E4M3 rebuilt against current headers",
        nullptr,
        0};
    static const altgrad_entry entry = {
        sizeof(altgrad_entry), ALTGRAD_ABI_VERSION_INIT, &descriptor, abi11::table(), nullptr, nullptr};
    return &entry;
}
