// The plugin conformance kit: named checks, each run in a child process with
// a time limit, that tell a plugin author precisely what their plugin gets
// wrong. `altgrad-host conformance` is a thin front end; tests call this.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "plugins/manifest.hpp"
#include "plugins/params.hpp"
#include "sandbox/result.hpp"
#include "util/glob.hpp"

namespace altgrad::host::conformance {

// A check's outcome is the sandbox's: each check runs there (sandbox/isolate.hpp).
using sandbox::is_failure;
using sandbox::outcome;
using sandbox::outcome_name;
using sandbox::outcome_names;
using sandbox::result;

// What to check: a plugin folder's manifest and the library it names.
struct plugin_target {
    std::string label;  // as given: a name or a path
    std::filesystem::path manifest_path;
    std::optional<manifest> info;  // set when the manifest is valid
    std::string manifest_error;    // why it is not
};

// A plugin by name from a plugins folder, or by the path of its library (or
// folder), whose folder must hold its manifest.toml.
plugin_target target_by_name(const std::filesystem::path& plugins_dir, const std::string& name);
plugin_target target_by_path(const std::filesystem::path& path);
// Every plugin folder under plugins_dir, sorted.
std::vector<plugin_target> all_targets(const std::filesystem::path& plugins_dir);

struct options {
    std::string only;             // glob over check names ('*' and '?'); empty: all
    uint64_t seed = 0;            // drives every randomised check
    double timeout_seconds = 30;  // per check
    // A format plugin's parameters (key -> text, as --param gives them): every
    // instance the checks create of it has them; empty: the manifest's defaults.
    host::given_params params;
};

struct plugin_report {
    plugin_target target;
    std::vector<result> results;
};

struct check_info {
    const char* name;
    const char* description;
    const char* kinds;  // the plugin kinds it runs for, e.g. "intervention, diagnostic"
};

// Every check the kit knows, each once: the format checks in run order (the
// load.* checks among them run for every kind), the checks every kind runs
// last (memory.leak), then those for intervention and diagnostic plugins
// (their descriptions begin with the kinds); --list-checks prints this.
std::vector<check_info> all_checks();

// The checks run for a plugin of `kind`, in run order.
std::vector<check_info> check_list(altgrad_plugin_kind kind);

plugin_report check_plugin(const plugin_target& target, const options& o);

}  // namespace altgrad::host::conformance
