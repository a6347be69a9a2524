// A plugin's manifest.toml, parsed and checked, without loading the library.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <altgrad/altgrad.h>

#include "util/abi_names.hpp"  // kind_name, param_type_name

namespace altgrad::host {

// One declared parameter: type, default, optional range or choices.
struct param_decl {
    std::string key;
    altgrad_param_type type = ALTGRAD_PARAM_INT;
    bool default_bool = false;
    int64_t default_int = 0;
    double default_float = 0.0;
    std::string default_string;
    std::optional<double> min, max;    // int and float only
    std::vector<std::string> choices;  // string only; empty = any
    std::string description;
};

struct manifest {
    std::filesystem::path path;    // the manifest.toml file
    std::filesystem::path folder;  // its folder (canonical)
    altgrad_plugin_kind kind = ALTGRAD_KIND_FORMAT;
    std::string name;
    // Other names the plugin answers to (ml_dtypes' and PyTorch's names, e.g.
    // float8_e4m3fn for e4m3): `describe`, `quantize` and configs accept them;
    // output always shows `name`.
    std::vector<std::string> aliases;
    altgrad_version version{};
    altgrad_version abi_version{};
    std::filesystem::path library;  // canonical, checked to lie inside folder
    std::string description;
    std::vector<param_decl> params;  // in key order
};

// Parse and validate; throws host::error naming the file and key.
manifest read_manifest(const std::filesystem::path& path);
// The same from the file's text: `path` names it in errors, and the library is
// resolved in (and checked to lie inside) its folder.
manifest parse_manifest(const std::string& text, const std::filesystem::path& path);

std::string version_string(const altgrad_version& v, bool with_patch = true);

}  // namespace altgrad::host
