#include "sweep/sweep_file.hpp"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <toml++/toml.h>

#include "config/run_config.hpp"
#include "util/edit_distance.hpp"
#include "util/error.hpp"
#include "util/file_text.hpp"
#include "util/numbers.hpp"
#include "util/toml_text.hpp"

namespace altgrad::host::sweep {

namespace {

const char* const kThreadsKey = "training.threads";
const size_t kMaxPoints = 10000;  // runs are minutes each: more is a mistake
const size_t kMaxGridKeys = 64;

// "SWEEP: key 'K': ..." as host::error.
[[noreturn]] void key_error(const fs::path& file, const std::string& key, const std::string& what) {
    throw error(file.string() + ": key '" + key + "': " + what);
}

// What a wrong value was, for an error: a string quoted, a scalar as TOML, else its kind.
std::string node_text(const toml::node* n) {
    if (!n) return "nothing";
    if (const auto* s = n->as_string()) return "\"" + s->get() + "\"";
    if (const auto* i = n->as_integer()) return std::to_string(i->get());
    if (const auto* f = n->as_floating_point()) return shortest_decimal(f->get());
    if (const auto* b = n->as_boolean()) return b->get() ? "true" : "false";
    return n->is_table() ? "a table" : n->is_array() ? "an array" : "a date or time";
}

// A TOML scalar as the text `--set` takes: strings as they are (the config
// reads any value of a string key as a string), numbers and booleans in TOML.
std::optional<std::string> set_text(const toml::node& n) {
    if (const auto* s = n.as_string()) return s->get();
    if (const auto* i = n.as_integer()) return std::to_string(i->get());
    if (const auto* b = n.as_boolean()) return b->get() ? "true" : "false";
    if (const auto* f = n.as_floating_point()) {
        std::string t = shortest_decimal(f->get());
        // A whole float stays a float in TOML ("1" would read as an integer).
        if (t.find_first_not_of("-0123456789") == std::string::npos) t += ".0";
        return t;
    }
    return std::nullopt;
}

// A "KEY=VALUE" override, checked for its shape (the config checks the rest).
std::string checked_assignment(const fs::path& file, const std::string& key, size_t i, const toml::node& n) {
    const auto* s = n.as_string();
    const std::string where = "value " + std::to_string(i + 1);
    if (!s) key_error(file, key, where + ": expected a string \"KEY=VALUE\"");
    const std::string& t = s->get();
    const size_t eq = t.find('=');
    if (eq == std::string::npos || eq == 0)
        key_error(file, key, where + " \"" + t + "\": expected KEY=VALUE, e.g. \"training.max_steps=50\"");
    return t;
}

std::vector<std::string> assignment_list(const fs::path& file, const std::string& key, const toml::node& n) {
    const auto* a = n.as_array();
    if (!a) key_error(file, key, "expected an array of \"KEY=VALUE\" strings");
    std::vector<std::string> out;
    for (size_t i = 0; i < a->size(); ++i) out.push_back(checked_assignment(file, key, i, *a->get(i)));
    return out;
}

void refuse_unknown(const fs::path& file, const std::string& prefix, const std::string& key,
                    const std::vector<std::string>& known) {
    if (std::find(known.begin(), known.end(), key) != known.end()) return;
    std::string hint;
    size_t best = 3;  // a suggestion only for a near miss
    for (const std::string& k : known)
        if (const size_t d = edit_distance(key, k); d < best)
            best = d, hint = "; did you mean '" + prefix + k + "'?";
    key_error(file, prefix + key, "unknown key (a typo?)" + hint);
}

std::string key_of(const std::string& assignment) { return assignment.substr(0, assignment.find('=')); }
std::string value_of(const std::string& assignment) { return assignment.substr(assignment.find('=') + 1); }

std::string last_component(const std::string& key) {
    const size_t dot = key.rfind('.');
    return dot == std::string::npos ? key : key.substr(dot + 1);
}

// The sweep's name: required, letters, digits, '_', '.', '-'.
std::string read_name(const toml::table& root, const fs::path& file) {
    const auto* name = root.get_as<std::string>("name");
    if (!root.contains("name"))
        key_error(file, "name", "missing (the sweep's name; its runs go to runs/<name>)");
    const auto valid_name = [](const std::string& n) {
        return !n.empty() && n != "." && n != ".." &&
               n.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") ==
                   std::string::npos;
    };
    if (!name || !valid_name(name->get()))
        key_error(file, "name",
                  "expected a string of letters, digits, '_', '.', '-', got " + node_text(root.get("name")));
    return name->get();
}

// The base configs, relative to the sweep file's folder: at least one, each
// a path or { path = "...", set = ["KEY=VALUE", ...] } (its own overrides).
void read_configs(const toml::table& root, const fs::path& file, sweep_spec& spec) {
    const auto* configs = root.get_as<toml::array>("configs");
    if (!root.contains("configs")) key_error(file, "configs", "missing (the base run configs, at least one)");
    if (!configs || configs->empty())
        key_error(file, "configs", "expected a non-empty array of config file paths");
    for (size_t i = 0; i < configs->size(); ++i) {
        const std::string where = "configs[" + std::to_string(i + 1) + "]";
        const toml::node* path = configs->get(i);
        std::vector<std::string> own;
        if (const toml::table* t = path->as_table()) {
            for (const auto& [k, v] : *t)
                refuse_unknown(file, where + ".", std::string(k.str()), {"path", "set"});
            path = t->get("path");
            if (!path) key_error(file, where + ".path", "missing (the config file)");
            if (const toml::node* set = t->get("set")) own = assignment_list(file, where + ".set", *set);
        }
        const auto* p = path->as_string();
        if (!p || p->get().empty())
            key_error(file, "configs",
                      "value " + std::to_string(i + 1) +
                          ": expected a config file path (a string), or { path = \"...\", set = [...] }");
        spec.configs.push_back((file.parent_path() / p->get()).lexically_normal());
        spec.config_sets.push_back(std::move(own));
    }
}

// The seeds, when given: a non-empty array of integers >= 0.
std::vector<int64_t> read_seeds(const toml::node& seeds, const fs::path& file) {
    std::vector<int64_t> out;
    const auto* a = seeds.as_array();
    if (!a || a->empty()) key_error(file, "seeds", "expected a non-empty array of integers");
    for (size_t i = 0; i < a->size(); ++i) {
        const auto* s = a->get(i)->as_integer();
        if (!s || s->get() < 0)
            key_error(file, "seeds",
                      "value " + std::to_string(i + 1) + ": expected an integer 0.." +
                          std::to_string(INT64_MAX) + ", got " + node_text(a->get(i)));
        out.push_back(s->get());
    }
    return out;
}

// [grid]: each key with its values as --set texts, the keys in the file's order.
std::vector<std::pair<std::string, std::vector<std::string>>> read_grid(const toml::node& grid,
                                                                        const fs::path& file) {
    std::vector<std::pair<std::string, std::vector<std::string>>> out;
    const auto* t = grid.as_table();
    if (!t) key_error(file, "grid", "expected a table of KEY = [values]");
    // toml++ keeps keys sorted: the file's order is their position.
    std::vector<std::pair<toml::source_position, std::string>> keys;
    for (const auto& [k, v] : *t) keys.emplace_back(k.source().begin, std::string(k.str()));
    std::sort(keys.begin(), keys.end(), [](const auto& a, const auto& b) {
        return a.first.line != b.first.line ? a.first.line < b.first.line : a.first.column < b.first.column;
    });
    for (const auto& [pos, k] : keys) {
        const std::string where = "grid.\"" + k + "\"";
        const auto* values = t->get(k)->as_array();
        if (!values || values->empty())
            key_error(file, where,
                      "expected a non-empty array of values (strings, integers, floats, booleans)");
        std::vector<std::string> texts;
        for (size_t i = 0; i < values->size(); ++i) {
            const std::optional<std::string> v = set_text(*values->get(i));
            if (!v)
                key_error(file, where,
                          "value " + std::to_string(i + 1) +
                              ": expected a string, integer, float or boolean, got " +
                              node_text(values->get(i)));
            texts.push_back(*v);
        }
        out.emplace_back(k, texts);
    }
    return out;
}

// nodes and ntasks_per_node of `t`, where given, over `layout`; `where`
// prefixes the keys in errors ("" or "point[2].").
void read_layout(const toml::table& t, const fs::path& file, const std::string& where, rank_layout& layout) {
    for (auto [key, member] :
         {std::pair{"nodes", &rank_layout::nodes}, {"ntasks_per_node", &rank_layout::ntasks_per_node}}) {
        const toml::node* n = t.get(key);
        if (n == nullptr) continue;
        const auto* i = n->as_integer();
        if (i == nullptr || i->get() < 1 || i->get() > 1024)
            key_error(file, where + key, "expected an integer 1..1024, got " + node_text(n));
        layout.*member = i->get();
    }
}

// [[point]] tables: each one's set = ["KEY=VALUE", ...], optional name and
// rank layout, into spec.
void read_points(const toml::node& points, const fs::path& file, sweep_spec& spec) {
    const auto* a = points.as_array();
    if (!a || !a->is_array_of_tables())
        key_error(file, "point", "expected [[point]] tables, each with set = [...]");
    for (size_t i = 0; i < a->size(); ++i) {
        const toml::table& p = *a->get(i)->as_table();
        const std::string where = "point[" + std::to_string(i + 1) + "]";
        for (const auto& [k, v] : p)
            refuse_unknown(file, where + ".", std::string(k.str()),
                           {"set", "name", "nodes", "ntasks_per_node"});
        rank_layout layout = spec.layout;
        read_layout(p, file, where + ".", layout);
        spec.point_layouts.push_back(layout);
        const toml::node* set = p.get("set");
        if (!set) key_error(file, where + ".set", "missing (the point's overrides, \"KEY=VALUE\" each)");
        spec.points.push_back(assignment_list(file, where + ".set", *set));
        std::string name;
        if (const toml::node* n = p.get("name")) {
            const auto* s = n->as_string();
            if (!s || s->get().empty() ||
                s->get().find_first_not_of(
                    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.=+-") !=
                    std::string::npos)
                key_error(
                    file, where + ".name",
                    "expected a string of letters, digits, '_', '.', '=', '+', '-', got " + node_text(n));
            name = s->get();
        }
        spec.point_names.push_back(name);
    }
}

}  // namespace

sweep_spec parse_sweep(const std::string& text, const fs::path& file) {
    const toml::table root = parse_toml_text(text, file.string());
    sweep_spec spec;
    spec.file = file;
    for (const auto& [k, v] : root)
        refuse_unknown(file, "", std::string(k.str()),
                       {"name", "configs", "seeds", "set", "grid", "point", "nodes", "ntasks_per_node"});
    spec.name = read_name(root, file);
    read_layout(root, file, "", spec.layout);
    read_configs(root, file, spec);
    if (const toml::node* seeds = root.get("seeds")) spec.seeds = read_seeds(*seeds, file);
    if (const toml::node* set = root.get("set")) spec.set = assignment_list(file, "set", *set);
    if (const toml::node* grid = root.get("grid")) spec.grid = read_grid(*grid, file);
    if (const toml::node* points = root.get("point")) read_points(*points, file, spec);
    return spec;
}

sweep_spec load_sweep(const fs::path& file) {
    std::error_code ec;
    if (!fs::is_regular_file(file, ec))
        throw error(file.string() +
                    (fs::exists(file, ec) ? ": not a file (expected a sweep file)" : ": no such sweep file"));
    return parse_sweep(read_file_text(file, kConfigLimit, "a sweep file"), file);
}

std::vector<point> expand_points(const sweep_spec& spec) {
    // A grid multiplies: a few keys too many would be billions of runs (and memory) before anything ran.
    if (spec.grid.size() > kMaxGridKeys)
        key_error(spec.file, "grid",
                  std::to_string(spec.grid.size()) + " keys: at most " + std::to_string(kMaxGridKeys));
    size_t combinations = spec.grid.empty() ? 0 : 1;
    for (const auto& [key, values] : spec.grid) {
        combinations *= values.size();
        if (combinations > kMaxPoints)
            key_error(spec.file, "grid",
                      "more than " + std::to_string(kMaxPoints) +
                          " combinations: split the sweep, or list the points wanted with [[point]]");
    }
    std::vector<point> points;
    if (!spec.grid.empty()) {
        // An odometer over the grid's values, the last key turning fastest.
        std::vector<size_t> at(spec.grid.size(), 0);
        for (;;) {
            point p;
            for (size_t k = 0; k < spec.grid.size(); ++k)
                p.push_back(spec.grid[k].first + "=" + spec.grid[k].second[at[k]]);
            points.push_back(std::move(p));
            size_t k = spec.grid.size();
            while (k > 0 && ++at[k - 1] == spec.grid[k - 1].second.size()) at[--k] = 0;
            if (k == 0) break;
        }
    }
    points.insert(points.end(), spec.points.begin(), spec.points.end());
    if (points.empty()) points.emplace_back();
    return points;
}

std::string describe_point(const std::vector<point>& points, size_t index) {
    std::string overrides;
    for (const std::string& o : points[index]) overrides += (overrides.empty() ? "" : ", ") + o;
    return "point " + std::to_string(index + 1) + " (" + (overrides.empty() ? "no overrides" : overrides) +
           ")";
}

std::string run_name(const std::string& config_name, const point& overrides,
                     const std::vector<std::string>& all_keys, int64_t seed, const std::string& point_name) {
    std::map<std::string, std::set<std::string>> keys_by_last;
    for (const std::string& k : all_keys) keys_by_last[last_component(k)].insert(k);
    std::string name = config_name;
    if (!point_name.empty()) name += "-" + point_name;
    for (const std::string& o : point_name.empty() ? overrides : point{}) {
        const std::string key = key_of(o);
        const std::string last = last_component(key);
        name += "-" + (keys_by_last[last].size() > 1 ? key : last) + "=" + value_of(o);
    }
    name += "-s" + std::to_string(seed);
    for (char& c : name)
        if (!std::isalnum(static_cast<unsigned char>(c)) && std::string("_.=+-").find(c) == std::string::npos)
            c = '_';
    return name;
}

std::vector<sweep_run> plan_runs(const sweep_spec& spec) {
    const std::vector<point> points = expand_points(spec);
    std::vector<std::string> all_keys;
    bool sets_threads = false;
    for (const point& p : points)
        for (const std::string& o : p) {
            all_keys.push_back(key_of(o));
            sets_threads = sets_threads || key_of(o) == kThreadsKey;
        }
    for (const std::string& o : spec.set) sets_threads = sets_threads || key_of(o) == kThreadsKey;
    for (const std::vector<std::string>& own : spec.config_sets)
        for (const std::string& o : own) sets_threads = sets_threads || key_of(o) == kThreadsKey;

    std::vector<sweep_run> runs;
    std::map<std::string, size_t> by_name;
    for (size_t c = 0; c < spec.configs.size(); ++c) {
        const fs::path& config = spec.configs[c];
        if (!fs::is_regular_file(config))
            key_error(spec.file, "configs", config.string() + ": no such config file");
        // The base config: its name and seed (its own errors name it).
        const config::run_config base = config::load_config(config);
        const std::vector<int64_t> seeds =
            spec.seeds.empty() ? std::vector<int64_t>{base.training.seed} : spec.seeds;
        for (size_t p = 0; p < points.size(); ++p)
            for (const int64_t seed : seeds) {
                sweep_run r;
                r.index = runs.size();
                r.config = config;
                r.config_name = base.name;
                r.point = p;
                r.seed = seed;
                // The explicit points come after the grid's.
                const bool explicit_point = p + spec.points.size() >= points.size();
                const size_t named = p + spec.points.size() - points.size();
                r.name = run_name(base.name, points[p], all_keys, seed,
                                  explicit_point && named < spec.point_names.size() ? spec.point_names[named]
                                                                                    : std::string());
                r.layout = explicit_point && named < spec.point_layouts.size() ? spec.point_layouts[named]
                                                                               : spec.layout;
                // The sweep's default thread count first: anything the sweep sets wins.
                if (!sets_threads) r.overrides.push_back(std::string(kThreadsKey) + "=1");
                r.overrides.insert(r.overrides.end(), spec.set.begin(), spec.set.end());
                r.overrides.insert(r.overrides.end(), spec.config_sets[c].begin(), spec.config_sets[c].end());
                r.overrides.insert(r.overrides.end(), points[p].begin(), points[p].end());
                r.overrides.push_back("training.seed=" + std::to_string(seed));
                const std::string where = spec.file.string() + ": " + describe_point(points, p) + ", seed " +
                                          std::to_string(seed) + ": ";
                try {
                    config::load_config(config, r.overrides);
                } catch (const error& e) {
                    throw error(where + first_line(e.what()));
                }
                if (const auto it = by_name.find(r.name); it != by_name.end()) {
                    const sweep_run& other = runs[it->second];
                    throw error(spec.file.string() + ": two runs are named " + r.name + ": " +
                                other.config.string() + " " + describe_point(points, other.point) + " seed " +
                                std::to_string(other.seed) + ", and " + config.string() + " " +
                                describe_point(points, p) + " seed " + std::to_string(seed) +
                                " (give the configs different names, or the points different values)");
                }
                by_name[r.name] = r.index;
                runs.push_back(std::move(r));
            }
    }
    return runs;
}

}  // namespace altgrad::host::sweep
