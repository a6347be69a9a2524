// bf16: bfloat16: the top 16 bits of binary32, rounded.
#include <altgrad/sdk/exmy_plugin.hpp>

ALTGRAD_EXMY_FORMAT_PLUGIN(8, 7, 127, altgrad::sdk::exmy_specials::ieee)
