// fp6_e2m3: OCP Microscaling Formats (MX) v1.0, FP6 element format E2M3.
#include <altgrad/sdk/exmy_plugin.hpp>

ALTGRAD_EXMY_FORMAT_PLUGIN(2, 3, 1, altgrad::sdk::exmy_specials::finite)
