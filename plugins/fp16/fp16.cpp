// fp16: IEEE 754-2008 binary16.
#include <altgrad/sdk/exmy_plugin.hpp>

ALTGRAD_EXMY_FORMAT_PLUGIN(5, 10, 15, altgrad::sdk::exmy_specials::ieee)
