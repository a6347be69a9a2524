// fp32: IEEE 754 binary32; quantize is the identity on finite values.
#include <altgrad/sdk/exmy_plugin.hpp>

ALTGRAD_EXMY_FORMAT_PLUGIN("fp32", 1, 0, 0,
                           "IEEE 754 binary32: the identity (the unquantized baseline)",
                           8, 23, 127, altgrad::sdk::exmy_specials::ieee)
