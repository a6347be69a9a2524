// The plugins of one --plugins folder: every manifest read at start-up,
// libraries loaded only when asked for. A broken plugin (bad manifest,
// failed load, failed check, duplicate name) is recorded with its reason and
// never stops the others from working. Every library is first probed in a
// child process (plugins/probe.hpp): one that crashes, hangs or exits while
// loading is a broken record and never enters this process.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "plugins/loader.hpp"
#include "plugins/manifest.hpp"
#include "plugins/probe.hpp"

namespace altgrad::host {

enum class plugin_status { not_loaded, ok, broken };

struct plugin_record {
    std::filesystem::path manifest_path;
    std::optional<manifest> info;  // set when the manifest is valid
    // ok: the library passed its probe (`loaded` is set once it is loaded
    // into this process too).
    plugin_status status = plugin_status::not_loaded;
    std::string error;                            // why it is broken
    std::shared_ptr<const loaded_plugin> loaded;  // set once loaded

    // The manifest's name, or the folder's name when the manifest is unreadable.
    std::string name() const;
};

// The plugin folder used when --plugins is not given, and where it came from.
struct plugin_folder_choice {
    std::filesystem::path dir;
    std::string source;  // "ALTGRAD_PLUGINS", "the build's (beside the host)", "the installation's"
};

// The default plugin folder: $ALTGRAD_PLUGINS when set and not empty, else
// the plugins of the build or installation `host_exe` belongs to
// (<dir of host>/plugins in a build tree, <dir of host>/../<installed_subdir>
// once installed), when that folder exists; nullopt otherwise.
std::optional<plugin_folder_choice> default_plugin_folder(const char* env_value,
                                                          const std::filesystem::path& host_exe,
                                                          const std::filesystem::path& installed_subdir);
// The same for this process: getenv("ALTGRAD_PLUGINS") and /proc/self/exe.
std::optional<plugin_folder_choice> default_plugin_folder();

// Every <dir>/<sub>/manifest.toml, sorted. Throws when dir is not a folder.
std::vector<std::filesystem::path> find_manifests(const std::filesystem::path& dir);

class registry {
public:
    // Read every <dir>/<sub>/manifest.toml. Throws when dir is not a folder.
    // Each library's probe may take `probe_seconds`.
    explicit registry(const std::filesystem::path& dir, double probe_seconds = kDefaultProbeSeconds);

    const std::filesystem::path& folder() const { return dir_; }
    const std::vector<plugin_record>& records() const { return records_; }

    // The loaded plugin called `name` (its manifest's name, or else one of its
    // aliases), probing and loading it now if needed. With `kind`, it must be
    // of that kind. Throws host::error for an unknown name (with a "did you
    // mean" for a near miss and the names of that kind), an alias two plugins
    // declare, a plugin of another kind, or a broken plugin (with its reason).
    std::shared_ptr<const loaded_plugin> load(const std::string& name,
                                              std::optional<altgrad_plugin_kind> kind = std::nullopt);

    // The manifest name of the plugin called `name` (its own, or one of its
    // aliases); reads manifests only. Throws host::error as load() does for an
    // unknown or ambiguous name, or one of another kind than `kind`.
    std::string name_of(const std::string& name, std::optional<altgrad_plugin_kind> kind = std::nullopt);

    // The kind the manifest of the plugin called `name` declares (nullopt when
    // the manifest is unreadable); reads manifests only. Throws host::error as
    // name_of() does for an unknown or ambiguous name.
    std::optional<altgrad_plugin_kind> kind_of(const std::string& name);

    // The record of the plugin called `name` (or one of its aliases), probed
    // in a child process, nothing loaded here. Throws host::error as load()
    // does for an unknown or ambiguous name; a broken plugin is a record.
    const plugin_record& probed(const std::string& name);

    // Probe every plugin with a valid manifest (each in a child process);
    // failures become broken records. Loads nothing into this process.
    void probe_all();

    // Probe, then load into this process, every plugin with a valid manifest;
    // failures become broken records.
    void load_all();

private:
    plugin_record& find(const std::string& name, std::optional<altgrad_plugin_kind> kind);
    void probe(plugin_record& r);
    void try_load(plugin_record& r);

    std::filesystem::path dir_;
    double probe_seconds_;
    std::vector<plugin_record> records_;
};

}  // namespace altgrad::host
