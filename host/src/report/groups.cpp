// Runs grouped into experiments (report.hpp's group_runs and
// varying_settings): runs whose resolved configurations are equal but for the
// seed, labelled, the baselines marked, and each group compared with its
// baseline (Welch, and paired by seed).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "report/report.hpp"
#include "report/stats.hpp"

namespace altgrad::host::report {

namespace {

// A group's final validation loss by seed: its finished runs with a finite loss and a known seed.
std::map<int64_t, double> final_val_by_seed(const group_summary& g) {
    std::map<int64_t, double> out;
    for (const run_record* r : g.runs) {
        const std::optional<double> final_val = r->run_metric("final_val_loss");
        if (r->status == "finished" && r->seed && final_val && std::isfinite(*final_val))
            out.emplace(*r->seed, *final_val);
    }
    return out;
}

// a's loss - b's loss for every seed both have, in seed order.
std::vector<double> paired_differences(const group_summary& a, const group_summary& b) {
    const std::map<int64_t, double> by_seed = final_val_by_seed(b);
    std::vector<double> d;
    for (const auto& [seed, loss] : final_val_by_seed(a)) {
        const auto it = by_seed.find(seed);
        if (it != by_seed.end()) d.push_back(loss - it->second);
    }
    return d;
}

// The settings on which two groups agree (keys with equal values in both).
size_t agreeing_settings(const group_summary& a, const group_summary& b) {
    size_t n = 0;
    for (const auto& [key, value] : a.settings) {
        const auto it = b.settings.find(key);
        n += it != b.settings.end() && it->second == value;
    }
    return n;
}

// The name a sweep's [[point]] gave a group's runs: their common run id without its "-s<seed>", where
// that is "<config name>-<point name>" (a sweep spells an unnamed point's overrides, each with '=').
// Empty where the runs' ids differ, are unknown, or are not of that form.
std::string point_name_of(const group_summary& g) {
    std::string common;
    for (const run_record* r : g.runs) {
        const std::string suffix = r->seed ? "-s" + std::to_string(*r->seed) : "";
        const std::string& id = r->run_id;
        if (suffix.empty() || id.size() <= suffix.size() ||
            id.compare(id.size() - suffix.size(), suffix.size(), suffix) != 0)
            return "";
        const std::string stem = id.substr(0, id.size() - suffix.size());
        if (!common.empty() && stem != common) return "";
        common = stem;
    }
    const std::string prefix = g.name + "-";
    if (common.size() <= prefix.size() || common.compare(0, prefix.size(), prefix) != 0 ||
        common.find('=') != std::string::npos)
        return "";
    return common;
}

// Labels that say what a group is: the sweep point's name where a sweep named it ("nvfp4-no_rht"); else
// the config name alone where no other group without a point name has that name ("nvfp4" beside its
// named ablations); else the name and the settings in which those groups differ, e.g. "e3m4_uniform
// [scaling=none, shadow_weights=true]" (a key by its last part unless two differing keys share it). A
// group whose config could not be read is "name (config unknown)"; a label still taken gets " (2)", ...
void label_groups(std::vector<group_summary>& groups) {
    std::vector<std::string> points;
    std::map<std::string, std::vector<group_summary*>> by_name;  // the groups no point names
    for (group_summary& g : groups) {
        points.push_back(point_name_of(g));
        if (points.back().empty()) by_name[g.name].push_back(&g);
    }
    std::set<std::string> taken;
    for (size_t i = 0; i < groups.size(); ++i) {
        group_summary& g = groups[i];
        const std::vector<group_summary*>& same = by_name[g.name];
        std::string label = g.name;
        if (!points[i].empty()) {
            label = points[i];
        } else if (g.settings.empty() && same.size() > 1) {
            label += " (config unknown)";
        } else if (same.size() > 1) {
            std::vector<group_summary> known;
            for (const group_summary* o : same)
                if (!o->settings.empty()) known.push_back(*o);
            const std::vector<std::string> differ = varying_settings(known);
            std::map<std::string, int> last_parts;
            auto last_part = [](const std::string& key) { return key.substr(key.rfind('.') + 1); };
            for (const std::string& key : differ) ++last_parts[last_part(key)];
            std::string what;
            for (const std::string& key : differ) {
                const auto it = g.settings.find(key);
                what += (what.empty() ? "" : ", ") +
                        (last_parts[last_part(key)] == 1 ? last_part(key) : key) + "=" +
                        (it == g.settings.end() ? "(none)" : it->second);
            }
            if (!what.empty()) label += " [" + what + "]";
        }
        std::string unique = label;
        for (int k = 2; !taken.insert(unique).second; ++k) unique = label + " (" + std::to_string(k) + ")";
        g.label = unique;
    }
}

}  // namespace

std::vector<group_summary> group_runs(const std::vector<run_record>& runs, const std::string& baseline) {
    std::vector<group_summary> groups;
    auto same_experiment = [](const group_summary& g, const run_record& r) {
        if (g.settings.empty() || r.settings.empty())  // unknown config: by name
            return g.settings.empty() && r.settings.empty() && g.runs.front()->name == r.name;
        return g.settings == r.settings;
    };
    for (const run_record& r : runs) {
        auto it = std::find_if(groups.begin(), groups.end(),
                               [&](const group_summary& g) { return same_experiment(g, r); });
        if (it == groups.end()) {
            groups.push_back({});
            it = groups.end() - 1;
            it->name = r.name;
            it->formats = r.formats;
            it->settings = r.settings;
        } else if (std::none_of(it->runs.begin(), it->runs.end(),
                                [&](const run_record* o) { return o->name == r.name; })) {
            it->name += ", " + r.name;
        }
        group_summary& g = *it;
        g.runs.push_back(&r);
        g.finished += r.status == "finished";
        g.decided += r.decided();
        g.failed += r.failed();
        g.interrupted += r.status == "interrupted";
        const std::optional<double> final_val = r.run_metric("final_val_loss");
        if (r.status == "finished" && final_val && std::isfinite(*final_val))
            g.final_val.push_back(*final_val);
    }
    label_groups(groups);
    for (group_summary& g : groups) g.val = summarize(g.final_val);
    // The baselines: the groups of the config named `baseline` (bf16_baseline by default, and then, when
    // there is none, the groups whose every run is BF16 throughout). Each other group is compared with the
    // baseline whose settings agree with its own on the most keys (the first on a tie), so that a study of
    // scaling x master weights compares each format with BF16 under the same scaling and master weights.
    auto all_bf16 = [](const group_summary& g) {
        return std::all_of(g.runs.begin(), g.runs.end(),
                           [](const run_record* r) { return r->uniform_format == "bf16"; });
    };
    for (group_summary& g : groups)
        g.baseline = std::any_of(g.runs.begin(), g.runs.end(),
                                 [&](const run_record* r) { return r->name == baseline; });
    if (baseline == kDefaultBaseline &&
        std::none_of(groups.begin(), groups.end(), [](const group_summary& g) { return g.baseline; }))
        for (group_summary& g : groups) g.baseline = all_bf16(g);
    for (size_t k = 0; k < groups.size(); ++k) {
        group_summary& g = groups[k];
        if (g.baseline) {
            g.compared_with = k;
            continue;
        }
        size_t best_agree = 0;
        for (size_t b = 0; b < groups.size(); ++b) {
            if (!groups[b].baseline) continue;
            const size_t agree = agreeing_settings(g, groups[b]);
            if (g.compared_with == kNoGroup || agree > best_agree) g.compared_with = b, best_agree = agree;
        }
        if (g.compared_with == kNoGroup) continue;
        g.vs_baseline = welch_test(g.final_val, groups[g.compared_with].final_val);
        g.vs_baseline_paired = paired_test(paired_differences(g, groups[g.compared_with]));
    }
    return groups;
}

std::string baseline_missing(const std::vector<run_record>& runs, const std::string& baseline) {
    if (std::any_of(runs.begin(), runs.end(), [&](const run_record& r) { return r.name == baseline; }))
        return "";
    std::string names;
    for (const run_record& r : runs)
        if (names.find("'" + r.name + "'") == std::string::npos)
            names += (names.empty() ? "'" : ", '") + r.name + "'";
    return "no run of that config among the runs given (their configs: " + names + ")";
}

std::vector<std::string> varying_settings(const std::vector<group_summary>& groups) {
    std::set<std::string> keys;
    for (const group_summary& g : groups)
        for (const auto& kv : g.settings) keys.insert(kv.first);
    std::vector<std::string> out;
    for (const std::string& key : keys) {
        std::set<std::string> values;
        for (const group_summary& g : groups) {
            if (g.settings.empty()) continue;  // config unknown: it says nothing about what varies
            const auto v = g.settings.find(key);
            values.insert(v == g.settings.end() ? "\x01?" : v->second);
        }
        if (values.size() > 1) out.push_back(key);
    }
    return out;
}

}  // namespace altgrad::host::report
