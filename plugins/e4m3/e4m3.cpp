// e4m3: OCP OFP8 rev 1.0, E4M3 (ml_dtypes float8_e4m3fn).
#include <altgrad/sdk/exmy_plugin.hpp>

ALTGRAD_EXMY_FORMAT_PLUGIN(4, 3, 7, altgrad::sdk::exmy_specials::finite_nan)
