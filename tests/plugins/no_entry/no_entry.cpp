// Test plugin: defines a misspelled entry function and no altgrad_plugin_entry,
// so the library exports no entry symbol at all.
#include <altgrad/altgrad.h>

extern "C" const altgrad_entry* altgrad_plugin_entry_misspelled(void) { return nullptr; }
