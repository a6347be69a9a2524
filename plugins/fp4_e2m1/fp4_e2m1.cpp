// fp4_e2m1: OCP Microscaling Formats (MX) v1.0, FP4 element format E2M1.
#include <altgrad/sdk/exmy_plugin.hpp>

ALTGRAD_EXMY_FORMAT_PLUGIN("fp4_e2m1", 1, 0, 0,
                           "OCP MX FP4 E2M1: bias 1, subnormal 0.5, no Inf or NaN, max 6",
                           2, 1, 1, altgrad::sdk::exmy_specials::finite)
