// e5m2: OCP 8-bit Floating Point Specification (OFP8) rev 1.0, E5M2.
#include <altgrad/sdk/exmy_plugin.hpp>

ALTGRAD_EXMY_FORMAT_PLUGIN(5, 2, 15, altgrad::sdk::exmy_specials::ieee)
