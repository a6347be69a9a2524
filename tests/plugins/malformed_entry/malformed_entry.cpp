// Test plugin: an entry of the right ABI version with no descriptor and no
// table. The host refuses it; the kit must fail it.
#include <altgrad/altgrad.h>
#include <altgrad/sdk/export.hpp>

extern "C" ALTGRAD_EXPORT const altgrad_entry* altgrad_plugin_entry(void) {
    static const altgrad_entry entry = {
        sizeof(altgrad_entry), ALTGRAD_ABI_VERSION_INIT, nullptr, nullptr, nullptr, nullptr};
    return &entry;
}
