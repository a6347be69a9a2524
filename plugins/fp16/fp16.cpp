// fp16: IEEE 754-2008 binary16.
#include <altgrad/sdk/exmy_plugin.hpp>

ALTGRAD_EXMY_FORMAT_PLUGIN("fp16", 1, 0, 0,
                           "IEEE 754 binary16: bias 15, max 65504",
                           5, 10, 15, altgrad::sdk::exmy_specials::ieee)
