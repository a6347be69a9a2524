// e1m6: IEEE P3109 binary8p7 (K=8, P=7, bias 2^(K-P-1) = 1), signed, extended.
#include <altgrad/sdk/exmy_plugin.hpp>

ALTGRAD_EXMY_FORMAT_PLUGIN(1, 6, 1, altgrad::sdk::exmy_specials::p3109)
