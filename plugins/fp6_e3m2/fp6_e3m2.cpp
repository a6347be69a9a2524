// fp6_e3m2: OCP Microscaling Formats (MX) v1.0, FP6 element format E3M2.
#include <altgrad/sdk/exmy_plugin.hpp>

ALTGRAD_EXMY_FORMAT_PLUGIN(3, 2, 3, altgrad::sdk::exmy_specials::finite)
