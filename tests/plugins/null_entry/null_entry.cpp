// Test plugin: exports the entry symbol, whose function returns NULL. The host
// cannot load it, so the kit must fail it (not skip every check and pass).
#include <altgrad/altgrad.h>
#include <altgrad/sdk/export.hpp>

extern "C" ALTGRAD_EXPORT const altgrad_entry* altgrad_plugin_entry(void) { return nullptr; }
