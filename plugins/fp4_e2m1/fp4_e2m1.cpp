// fp4_e2m1: OCP Microscaling Formats (MX) v1.0, FP4 element format E2M1.
#include <altgrad/sdk/exmy_plugin.hpp>

ALTGRAD_EXMY_FORMAT_PLUGIN(2, 1, 1, altgrad::sdk::exmy_specials::finite)
