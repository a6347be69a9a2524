// fp32: IEEE 754 binary32; quantize is the identity on finite values.
#include <altgrad/sdk/exmy_plugin.hpp>

ALTGRAD_EXMY_FORMAT_PLUGIN(8, 23, 127, altgrad::sdk::exmy_specials::ieee)
