// Test plugin: a correct E4M3 built without altgrad_add_plugin's version
// script, exporting a second function besides the entry. The kit's
// load.exports must warn, naming altgrad_broken_exports_extra.
#include "../broken_common.hpp"

BROKEN_E4M3_PLUGIN("broken_exports", broken::e4m3,
                   "Test plugin: E4M3 built without the version script, exporting an extra symbol")

extern "C" ALTGRAD_EXPORT int altgrad_broken_exports_extra(void) { return 42; }
