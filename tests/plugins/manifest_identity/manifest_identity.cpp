// Test plugin: an E4M3 whose name, version and description come only from its
// manifest (the short form of the macro), a manifest written to be hard to
// turn into C: a literal-string name with a comment after it, a version with
// a leading zero (010 is ten), and a description with escaped quotes, a
// backslash, a tab, \u and \U escapes, raw UTF-8, "??=" (a C trigraph), "#"
// and the characters CMake treats specially. The host's tests compare what the
// library reports with the manifest as the host's TOML parser reads it.
#include <altgrad/sdk/exmy_plugin.hpp>

ALTGRAD_EXMY_FORMAT_PLUGIN(4, 3, 7, altgrad::sdk::exmy_specials::finite_nan)
