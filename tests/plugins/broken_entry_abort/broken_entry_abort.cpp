// Test plugin: its entry function calls abort() (SIGABRT). Discovery must
// list it as broken, naming the signal, and go on.
#include <cstdlib>

#include <altgrad/altgrad.h>

extern "C" ALTGRAD_EXPORT const altgrad_entry* altgrad_plugin_entry(void) { std::abort(); }
