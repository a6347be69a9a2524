#include "plugins/manifest.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include <toml++/toml.h>

#include <altgrad/sdk/names.hpp>

#include "util/error.hpp"
#include "util/file_text.hpp"
#include "util/toml_text.hpp"

namespace altgrad::host {
namespace fs = std::filesystem;

std::string version_string(const altgrad_version& v, bool with_patch) {
    std::string s = std::to_string(v.major) + "." + std::to_string(v.minor);
    if (with_patch) s += "." + std::to_string(v.patch);
    return s;
}

namespace {

// Errors name the file and the dotted key.
struct reader {
    fs::path file;

    [[noreturn]] void fail(const std::string& key, const std::string& what) const {
        throw error(file.string() + ": key '" + key + "': " + what);
    }

    const toml::node& require(const toml::table& t, const std::string& prefix, const char* key) const {
        const toml::node* n = t.get(key);
        if (n == nullptr) fail(prefix + key, "missing");
        return *n;
    }

    std::string string_of(const toml::node& n, const std::string& key) const {
        if (!n.is_string()) fail(key, "expected a string");
        return n.as_string()->get();
    }

    void check_plugin_name(const std::string& name, const std::string& key) const {
        if (!sdk::is_plugin_name(name))
            fail(key, "\"" + name + "\" is not a valid name (" + sdk::kPluginNamePattern + ", at most " +
                          std::to_string(sdk::kMaxPluginNameLength) + " characters)");
    }

    void reject_unknown(const toml::table& t, const std::string& prefix,
                        std::set<std::string> allowed) const {
        for (auto&& [k, v] : t)
            if (allowed.count(std::string(k.str())) == 0)
                fail(prefix + std::string(k.str()), "unknown key (a typo?)");
    }

    // "MAJOR.MINOR.PATCH" (parts = 3) or "MAJOR.MINOR" (parts = 2).
    altgrad_version version_of(const toml::node& n, const std::string& key, int parts) const {
        const std::string s = string_of(n, key);
        altgrad_version v{};
        uint32_t* fields[3] = {&v.major, &v.minor, &v.patch};
        std::istringstream in(s);
        for (int i = 0; i < parts; ++i) {
            std::string part;
            if (!std::getline(in, part, '.') || part.empty() || part.size() > 9 ||
                part.find_first_not_of("0123456789") != std::string::npos)
                fail(key, "expected a version like " + std::string(parts == 3 ? "\"1.2.3\"" : "\"1.0\"") +
                              ", got \"" + s + "\"");
            *fields[i] = static_cast<uint32_t>(std::stoul(part));
        }
        if (in.peek() != EOF)
            fail(key, "expected a version like " + std::string(parts == 3 ? "\"1.2.3\"" : "\"1.0\"") +
                          ", got \"" + s + "\"");
        return v;
    }

    double number_of(const toml::node& n, const std::string& key, altgrad_param_type type) const {
        if (type == ALTGRAD_PARAM_INT) {
            if (!n.is_integer()) fail(key, "expected an integer");
            return static_cast<double>(n.as_integer()->get());
        }
        if (n.is_integer()) return static_cast<double>(n.as_integer()->get());
        if (!n.is_floating_point()) fail(key, "expected a number");
        const double d = n.as_floating_point()->get();
        if (!std::isfinite(d)) fail(key, "expected a finite number");
        return d;
    }

    param_decl param_of(const std::string& name, const toml::node& node) const {
        const std::string prefix = "parameters." + name + ".";
        if (!node.is_table()) fail("parameters." + name, "expected a table");
        const toml::table& t = *node.as_table();
        reject_unknown(t, prefix, {"type", "default", "min", "max", "choices", "description"});
        param_decl p;
        p.key = name;
        const std::string type = string_of(require(t, prefix, "type"), prefix + "type");
        const std::optional<altgrad_param_type> pt = param_type_names().value(type);
        if (!pt)
            fail(prefix + "type", "expected one of " + param_type_names().list() + ", got \"" + type + "\"");
        p.type = *pt;
        const std::string dkey = prefix + "default";
        const toml::node& d = require(t, prefix, "default");
        switch (p.type) {
            case ALTGRAD_PARAM_BOOL:
                if (!d.is_boolean()) fail(dkey, "expected a boolean");
                p.default_bool = d.as_boolean()->get();
                break;
            case ALTGRAD_PARAM_INT:
                if (!d.is_integer()) fail(dkey, "expected an integer");
                p.default_int = d.as_integer()->get();
                break;
            case ALTGRAD_PARAM_FLOAT: p.default_float = number_of(d, dkey, p.type); break;
            case ALTGRAD_PARAM_STRING: p.default_string = string_of(d, dkey); break;
        }
        const bool numeric = p.type == ALTGRAD_PARAM_INT || p.type == ALTGRAD_PARAM_FLOAT;
        for (const char* bound : {"min", "max"}) {
            if (const toml::node* b = t.get(bound)) {
                if (!numeric) fail(prefix + bound, "only int and float parameters have a range");
                (std::string(bound) == "min" ? p.min : p.max) = number_of(*b, prefix + bound, p.type);
            }
        }
        if (p.min && p.max && *p.min > *p.max) fail(prefix + "min", "is greater than max");
        if (numeric) {
            const double dv =
                p.type == ALTGRAD_PARAM_INT ? static_cast<double>(p.default_int) : p.default_float;
            if ((p.min && dv < *p.min) || (p.max && dv > *p.max)) fail(dkey, "is outside [min, max]");
        }
        if (const toml::node* c = t.get("choices")) {
            if (p.type != ALTGRAD_PARAM_STRING)
                fail(prefix + "choices", "only string parameters have choices");
            if (!c->is_array() || c->as_array()->empty())
                fail(prefix + "choices", "expected a non-empty array of strings");
            for (const toml::node& item : *c->as_array())
                p.choices.push_back(string_of(item, prefix + "choices"));
            bool found = false;
            for (const std::string& ch : p.choices) found = found || ch == p.default_string;
            if (!found) fail(dkey, "\"" + p.default_string + "\" is not one of the choices");
        }
        if (const toml::node* desc = t.get("description"))
            p.description = string_of(*desc, prefix + "description");
        return p;
    }
};

}  // namespace

manifest read_manifest(const fs::path& path) {
    std::error_code folder_check;
    // TOML++ would read a folder as an empty document ("missing [plugin] table").
    if (fs::is_directory(path, folder_check))
        throw error(path.string() + ": is a folder, expected a manifest file (TOML)");
    return parse_manifest(read_file_text(path, kManifestLimit, "a manifest"), path);
}

manifest parse_manifest(const std::string& text, const fs::path& path) {
    reader r{path};
    const toml::table doc = parse_toml_text(text, path.string());
    r.reject_unknown(doc, "", {"plugin", "parameters"});
    const toml::node* plugin_node = doc.get("plugin");
    if (plugin_node == nullptr) r.fail("plugin", "missing (the [plugin] table)");
    if (!plugin_node->is_table()) r.fail("plugin", "expected a table");
    const toml::table& p = *plugin_node->as_table();
    r.reject_unknown(p, "plugin.",
                     {"kind", "name", "aliases", "version", "abi_version", "library", "description"});

    manifest m;
    m.path = path;
    m.folder = fs::canonical(path.parent_path().empty() ? fs::path(".") : path.parent_path());

    const std::string kind = r.string_of(r.require(p, "plugin.", "kind"), "plugin.kind");
    const std::optional<altgrad_plugin_kind> k = plugin_kind_names().value(kind);
    if (!k)
        r.fail("plugin.kind", "unknown kind \"" + kind + "\" (expected " + plugin_kind_names().list() + ")");
    m.kind = *k;

    m.name = r.string_of(r.require(p, "plugin.", "name"), "plugin.name");
    r.check_plugin_name(m.name, "plugin.name");
    if (const toml::node* aliases = p.get("aliases")) {
        if (!aliases->is_array())
            r.fail("plugin.aliases", "expected an array of names, e.g. [\"float8_e4m3fn\"]");
        for (const toml::node& item : *aliases->as_array()) {
            const std::string alias = r.string_of(item, "plugin.aliases");
            r.check_plugin_name(alias, "plugin.aliases");
            if (alias == m.name || std::find(m.aliases.begin(), m.aliases.end(), alias) != m.aliases.end())
                r.fail("plugin.aliases", "\"" + alias + "\" is given twice (or is the plugin's own name)");
            m.aliases.push_back(alias);
        }
    }
    m.version = r.version_of(r.require(p, "plugin.", "version"), "plugin.version", 3);
    m.abi_version = r.version_of(r.require(p, "plugin.", "abi_version"), "plugin.abi_version", 2);
    if (m.kind == ALTGRAD_KIND_TRANSFORM && m.abi_version.major == 1 && m.abi_version.minor < 4)
        r.fail("plugin.abi_version",
               "a transform plugin needs ABI 1.4 or newer (transforms came in 1.4), got \"" +
                   version_string(m.abi_version, false) + "\"");
    if (m.kind == ALTGRAD_KIND_ACCUMULATOR && m.abi_version.major == 1 && m.abi_version.minor < 5)
        r.fail("plugin.abi_version",
               "an accumulator plugin needs ABI 1.5 or newer (accumulators came in 1.5), got \"" +
                   version_string(m.abi_version, false) + "\"");
    m.description = r.string_of(r.require(p, "plugin.", "description"), "plugin.description");

    const std::string lib = r.string_of(r.require(p, "plugin.", "library"), "plugin.library");
    const fs::path lib_path(lib);
    if (lib.empty() || lib_path.is_absolute())
        r.fail("plugin.library", "\"" + lib + "\" must be a path relative to the plugin's folder");
    std::error_code ec;
    const fs::path resolved = fs::weakly_canonical(m.folder / lib_path, ec);
    const std::string folder_prefix = m.folder.string() + "/";
    if (ec || resolved.string().compare(0, folder_prefix.size(), folder_prefix) != 0)
        r.fail("plugin.library", "\"" + lib + "\" resolves outside the plugin's folder " + m.folder.string());
    if (!fs::is_regular_file(resolved, ec))
        r.fail("plugin.library", "\"" + lib + "\" does not exist in " + m.folder.string());
    m.library = resolved;

    if (const toml::node* params = doc.get("parameters")) {
        if (!params->is_table()) r.fail("parameters", "expected a table of parameter tables");
        for (auto&& [k, v] : *params->as_table()) {
            const std::string key(k.str());
            if (!sdk::is_param_key(key))
                r.fail("parameters." + key, "is not a valid parameter name ([a-z][a-z0-9_]*)");
            m.params.push_back(r.param_of(key, v));
        }
    }
    return m;
}

}  // namespace altgrad::host
