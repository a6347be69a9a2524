// e7m0: IEEE P3109 binary8p1 (K=8, P=1, bias 2^(K-P-1) = 64), signed, extended.
#include <altgrad/sdk/exmy_plugin.hpp>

ALTGRAD_EXMY_FORMAT_PLUGIN(7, 0, 64, altgrad::sdk::exmy_specials::p3109)
