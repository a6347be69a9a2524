#include "plugins/registry.hpp"

#include <algorithm>
#include <map>

#include "util/error.hpp"

namespace altgrad::host {
namespace fs = std::filesystem;

std::string plugin_record::name() const {
    return info ? info->name : manifest_path.parent_path().filename().string();
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
            records_[i].error = records_[i].manifest_path.string() + ": key 'plugin.name': duplicate plugin name '" +
                                name + "' (also in " + others + ")";
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

std::shared_ptr<const loaded_plugin> registry::load(const std::string& name) {
    for (plugin_record& r : records_) {
        if (r.name() != name) continue;
        try_load(r);
        if (r.status == plugin_status::broken) throw error("plugin '" + name + "' is broken: " + r.error);
        return r.loaded;
    }
    std::string known;
    for (const plugin_record& r : records_) known += (known.empty() ? "" : ", ") + r.name();
    throw error("no plugin named '" + name + "' in " + dir_.string() + " (found: " +
                (known.empty() ? "none" : known) + ")");
}

void registry::probe_all() {
    for (plugin_record& r : records_) probe(r);
}

void registry::load_all() {
    for (plugin_record& r : records_) try_load(r);
}

}  // namespace altgrad::host
