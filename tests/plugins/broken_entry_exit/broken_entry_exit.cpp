// Test plugin: its entry function calls exit(0), which in the host process
// would end `list` early with success and nothing printed. Discovery must list
// it as broken instead.
#include <cstdlib>

#include <altgrad/altgrad.h>

extern "C" ALTGRAD_EXPORT const altgrad_entry* altgrad_plugin_entry(void) { std::exit(0); }
