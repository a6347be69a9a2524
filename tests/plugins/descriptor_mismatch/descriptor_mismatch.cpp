// Test plugin: the descriptor's name and version disagree with the manifest.
#include <altgrad/sdk/exmy_plugin.hpp>

ALTGRAD_EXMY_FORMAT_PLUGIN("not_the_manifest_name", 2, 0, 0, "descriptor disagrees with its manifest", 5, 2,
                           15, altgrad::sdk::exmy_specials::ieee)
