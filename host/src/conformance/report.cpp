#include "conformance/report.hpp"

#include <cstdio>
#include <map>

#include "util/json_output.hpp"

namespace altgrad::host::conformance {

namespace {

// " with k=v k=v" for the parameters the instances were created with.
std::string params_text(const options& o) {
    std::string s;
    for (const auto& [key, value] : o.params) s += (s.empty() ? " with " : " ") + key + "=" + value.text;
    return s;
}

}  // namespace

bool any_failure(const std::vector<plugin_report>& reports) {
    for (const plugin_report& r : reports)
        for (const result& x : r.results)
            if (is_failure(x.status)) return true;
    return false;
}

void print_text(std::ostream& out, const std::vector<plugin_report>& reports, const options& o, bool brief) {
    out << "conformance seed " << o.seed << " (replay with --seed " << o.seed << ")\n";
    std::map<outcome, size_t> totals;
    for (const plugin_report& r : reports) {
        const std::string name = r.target.info ? r.target.info->name : r.target.label;
        std::map<outcome, size_t> mine;
        for (const result& x : r.results) ++mine[x.status];
        out << (brief ? "" : "\n") << name << " (" << r.target.manifest_path.parent_path().string() << ")"
            << params_text(o);
        if (brief)
            out << ": " << mine[outcome::passed] << " passed, " << mine[outcome::skipped] << " skipped";
        out << "\n";
        for (const result& x : r.results) {
            ++totals[x.status];
            if (brief && (x.status == outcome::passed || x.status == outcome::skipped)) continue;
            char head[96];
            std::snprintf(head, sizeof head, "  %-10s %-30s", outcome_name(x.status), x.check.c_str());
            out << head << x.reason << "\n";
            if (x.status != outcome::passed && x.status != outcome::skipped) {
                if (!x.input.empty()) out << std::string(44, ' ') << "input: " << x.input << "\n";
                if (!x.hint.empty()) out << std::string(44, ' ') << "hint:  " << x.hint << "\n";
            }
        }
    }
    out << "\n";
    const char* sep = "";
    for (outcome k : {outcome::passed, outcome::failed, outcome::warning, outcome::skipped, outcome::crashed,
                      outcome::timed_out}) {
        out << sep << totals[k] << " " << outcome_name(k);
        sep = ", ";
    }
    out << "\n";
}

void print_json(std::ostream& out, const std::vector<plugin_report>& reports, const options& o) {
    ordered_json plugins = ordered_json::array();
    for (const plugin_report& r : reports) {
        ordered_json results = ordered_json::array();
        for (const result& x : r.results)
            results.push_back(ordered_json{{"check", x.check},
                                           {"status", outcome_name(x.status)},
                                           {"reason", x.reason},
                                           {"input", x.input},
                                           {"hint", x.hint},
                                           {"seconds", x.seconds}});
        ordered_json params = ordered_json::object();
        for (const auto& [key, value] : o.params) params[key] = value.text;
        plugins.push_back(ordered_json{{"plugin", r.target.info ? r.target.info->name : r.target.label},
                                       {"manifest", r.target.manifest_path.string()},
                                       {"params", params},
                                       {"results", results}});
    }
    out << json_output({{"seed", o.seed}, {"plugins", plugins}, {"failed", any_failure(reports)}});
}

}  // namespace altgrad::host::conformance
