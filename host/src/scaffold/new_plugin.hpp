// `altgrad-host new-plugin`: a small out-of-tree plugin project that builds
// against the installed SDK (find_package(AltGrad)) and passes the
// conformance kit as written, for a plugin author to change from there.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <altgrad/altgrad.h>

namespace altgrad::host::scaffold {

// Writes <dir>/<name>/ (CMakeLists.txt, manifest.toml, <name>.cpp,
// README.md) and returns the files written. Throws host::error when `name`
// is not a valid plugin name or <dir>/<name> exists and is not empty.
std::vector<std::filesystem::path> write_plugin_project(const std::string& name, altgrad_plugin_kind kind,
                                                        const std::filesystem::path& dir);

}  // namespace altgrad::host::scaffold
