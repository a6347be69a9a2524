#include "plugins/registry.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>

#include "util/edit_distance.hpp"
#include "util/error.hpp"

namespace altgrad::host {
namespace fs = std::filesystem;

std::string plugin_record::name() const {
    return info ? info->name : manifest_path.parent_path().filename().string();
}

namespace {
std::string with_article(const std::string& noun) {
    return (noun.find_first_of("aeiou") == 0 ? "an " : "a ") + noun;
}
}  // namespace

std::optional<plugin_folder_choice> default_plugin_folder(const char* env_value, const fs::path& host_exe,
                                                          const fs::path& installed_subdir) {
    if (env_value != nullptr && *env_value != '\0') return plugin_folder_choice{env_value, "ALTGRAD_PLUGINS"};
    if (host_exe.empty()) return std::nullopt;
    const fs::path dir = host_exe.parent_path();
    std::error_code ec;
    if (fs::is_directory(dir / "plugins", ec))
        return plugin_folder_choice{dir / "plugins", "the build's (beside the host)"};
    const fs::path installed = (dir / ".." / installed_subdir).lexically_normal();
    if (fs::is_directory(installed, ec)) return plugin_folder_choice{installed, "the installation's"};
    return std::nullopt;
}

std::optional<plugin_folder_choice> default_plugin_folder() {
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    return default_plugin_folder(std::getenv("ALTGRAD_PLUGINS"), ec ? fs::path() : exe,
                                 ALTGRAD_INSTALLED_PLUGIN_SUBDIR);
}

std::vector<fs::path> find_manifests(const fs::path& dir) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) throw error("--plugins " + dir.string() + ": not a folder");
    std::vector<fs::path> manifests;
    for (const fs::directory_entry& sub : fs::directory_iterator(dir, ec)) {
        const fs::path m = sub.path() / "manifest.toml";
        if (sub.is_directory(ec) && fs::exists(m, ec)) manifests.push_back(m);
    }
    if (ec) throw error("--plugins " + dir.string() + ": " + ec.message());
    std::sort(manifests.begin(), manifests.end());
    return manifests;
}

registry::registry(const fs::path& dir, double probe_seconds) : dir_(dir), probe_seconds_(probe_seconds) {
    const std::vector<fs::path> manifests = find_manifests(dir);

    std::map<std::string, std::vector<size_t>> by_name;
    for (const fs::path& m : manifests) {
        plugin_record r;
        r.manifest_path = m;
        try {
            r.info = read_manifest(m);
            by_name[r.info->name].push_back(records_.size());
        } catch (const std::exception& e) {
            r.status = plugin_status::broken;
            r.error = e.what();
        }
        records_.push_back(std::move(r));
    }
    // Two plugins with one name: neither is used, since picking one silently
    // could change an experiment's results.
    for (const auto& [name, indices] : by_name) {
        if (indices.size() < 2) continue;
        for (size_t i : indices) {
            std::string others;
            for (size_t j : indices)
                if (j != i) others += (others.empty() ? "" : ", ") + records_[j].manifest_path.string();
            records_[i].status = plugin_status::broken;
            records_[i].error = records_[i].manifest_path.string() +
                                ": key 'plugin.name': duplicate plugin name '" + name + "' (also in " +
                                others + ")";
        }
    }
}

void registry::probe(plugin_record& r) {
    if (r.status != plugin_status::not_loaded) return;
    const std::optional<std::string> why = probe_plugin(*r.info, probe_seconds_);
    r.status = why ? plugin_status::broken : plugin_status::ok;
    if (why) r.error = *why;
}

void registry::try_load(plugin_record& r) {
    probe(r);
    if (r.status != plugin_status::ok || r.loaded) return;
    try {
        r.loaded = load_plugin(*r.info);
    } catch (const std::exception& e) {
        r.status = plugin_status::broken;
        r.error = e.what();
    }
}

plugin_record& registry::find(const std::string& name, std::optional<altgrad_plugin_kind> kind) {
    plugin_record* found = nullptr;
    for (plugin_record& r : records_)
        if (r.name() == name) found = &r;
    // A plugin's own name wins over another's alias.
    for (plugin_record& r : records_) {
        if (found != nullptr && found->name() == name) break;
        if (!r.info ||
            std::find(r.info->aliases.begin(), r.info->aliases.end(), name) == r.info->aliases.end())
            continue;
        if (found != nullptr)
            throw error("'" + name + "' is an alias of two plugins, '" + found->name() + "' and '" +
                        r.name() + "': use either's own name");
        found = &r;
    }
    const std::string wanted = kind ? std::string(kind_name(*kind)) + " plugin" : "plugin";
    if (found != nullptr) {
        if (kind && found->info && found->info->kind != *kind)
            throw error("'" + name + "' is " + with_article(kind_name(found->info->kind)) + " plugin, not " +
                        with_article(wanted));
        return *found;
    }
    // Not found: a "did you mean" for a near miss, and the names of the wanted kind.
    std::string known, hint;
    size_t best = std::max<size_t>(3, name.size() / 3);  // a suggestion only for a near miss
    for (const plugin_record& r : records_) {
        if (kind && (!r.info || r.info->kind != *kind)) continue;
        known += (known.empty() ? "" : ", ") + r.name();
        std::vector<std::string> names{r.name()};
        if (r.info) names.insert(names.end(), r.info->aliases.begin(), r.info->aliases.end());
        for (const std::string& candidate : names)
            if (const size_t d = edit_distance(name, candidate); d < best) best = d, hint = candidate;
    }
    throw error("no " + wanted + " named '" + name + "' in " + dir_.string() +
                (hint.empty() ? "" : "; did you mean '" + hint + "'?") + " (" + wanted +
                "s there: " + (known.empty() ? "none" : known) + ")");
}

std::shared_ptr<const loaded_plugin> registry::load(const std::string& name,
                                                    std::optional<altgrad_plugin_kind> kind) {
    plugin_record& r = find(name, kind);
    try_load(r);
    if (r.status == plugin_status::broken) throw error("plugin '" + r.name() + "' is broken: " + r.error);
    return r.loaded;
}

std::string registry::name_of(const std::string& name, std::optional<altgrad_plugin_kind> kind) {
    return find(name, kind).name();
}

std::optional<altgrad_plugin_kind> registry::kind_of(const std::string& name) {
    const plugin_record& r = find(name, std::nullopt);
    if (!r.info) return std::nullopt;
    return r.info->kind;
}

const plugin_record& registry::probed(const std::string& name) {
    plugin_record& r = find(name, std::nullopt);
    if (r.info) probe(r);
    return r;
}

void registry::probe_all() {
    for (plugin_record& r : records_) probe(r);
}

void registry::load_all() {
    for (plugin_record& r : records_) try_load(r);
}

}  // namespace altgrad::host
