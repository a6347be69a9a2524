// e3m4: ml_dtypes float8_e3m4: IEEE 754 conventions with 3 exponent and 4 mantissa bits.
#include <altgrad/sdk/exmy_plugin.hpp>

ALTGRAD_EXMY_FORMAT_PLUGIN("e3m4", 1, 0, 0,
                           "E3M4 as ml_dtypes float8_e3m4: IEEE-style, bias 3, +-Inf, NaN, max 15.5",
                           3, 4, 3, altgrad::sdk::exmy_specials::ieee)
