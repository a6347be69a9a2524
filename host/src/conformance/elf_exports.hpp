// The symbols a shared library exports: the defined, global or weak,
// default-visibility entries of its ELF dynamic symbol table.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace altgrad::host::conformance {

// Throws host::error when the file is not a readable 64-bit ELF object.
std::vector<std::string> exported_symbols(const std::filesystem::path& library);

}  // namespace altgrad::host::conformance
