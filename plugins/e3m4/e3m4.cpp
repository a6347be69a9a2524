// e3m4: ml_dtypes float8_e3m4: IEEE 754 conventions with 3 exponent and 4 mantissa bits.
#include <altgrad/sdk/exmy_plugin.hpp>

ALTGRAD_EXMY_FORMAT_PLUGIN(3, 4, 3, altgrad::sdk::exmy_specials::ieee)
