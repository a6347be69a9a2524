#include "report/summary.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>

#include "report/markdown.hpp"
#include "report/tables.hpp"
#include "util/numbers.hpp"

namespace altgrad::host::report {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// "0/3", "2/3: bit_stall ×2", "3/3: nan_loss, overflow ×2"; "—" when no run finished or collapsed; then
// "; 1 not counted" for the interrupted, errored and crashed runs.
std::string failures_text(const group_summary& g) {
    std::string out = "—";
    if (g.decided > 0) {
        std::map<std::string, size_t> modes;
        for (const run_record* r : g.runs)
            if (r->failed()) ++modes[r->failure_mode.empty() ? "?" : r->failure_mode];
        out = std::to_string(g.failed) + "/" + std::to_string(g.decided);
        std::string listed;
        for (const auto& [mode, n] : modes)
            listed += (listed.empty() ? "" : ", ") + mode + (n > 1 ? " ×" + std::to_string(n) : "");
        if (!listed.empty()) out += ": " + listed;
    }
    const size_t not_counted = g.runs.size() - g.decided;
    if (not_counted > 0) out += "; " + std::to_string(not_counted) + " not counted";
    return out;
}

// The row of one group against its baseline (nullptr: none).
summary_row row_of(const group_summary& g, const group_summary* baseline) {
    summary_row r{&g,   baseline, comparison::none, g.vs_baseline_paired.d.n, kNaN, kNaN, kNaN, kNaN, kNaN,
                  kNaN, kNaN,     failures_text(g)};
    if (g.baseline) {
        r.method = comparison::baseline;
        r.baseline = nullptr;
        r.pairs = 0;
        return r;
    }
    if (baseline == nullptr || g.val.n == 0 || baseline->val.n == 0) return r;
    const paired_result& paired = g.vs_baseline_paired;
    const welch_result& welch = g.vs_baseline;
    if (paired.d.n >= 2) {
        r.method = comparison::paired;
        r.difference = paired.d.mean, r.ci_low = paired.d.ci_low, r.ci_high = paired.d.ci_high;
        r.p = paired.p;
    } else if (std::isfinite(welch.ci_low)) {
        r.method = comparison::welch;
        r.difference = welch.difference, r.ci_low = welch.ci_low, r.ci_high = welch.ci_high, r.p = welch.p;
    } else {
        r.method = comparison::means;
        r.difference = g.val.mean - baseline->val.mean;
    }
    const double scale = 100 / baseline->val.mean;
    r.relative = r.difference * scale, r.relative_low = r.ci_low * scale, r.relative_high = r.ci_high * scale;
    return r;
}

std::string mean_with_interval(const sample_summary& v) {
    if (v.n == 0) return "—";
    if (v.n == 1) return fixed(v.mean);
    return fixed(v.mean) + " (" + fixed(v.ci_low) + " – " + fixed(v.ci_high) + ")";
}

// "+0.0110 (+0.0095 – +0.0125)"; `digits` decimals, `unit` after each number ("%" or "").
std::string difference_text(double d, double low, double high, int digits, const std::string& unit) {
    if (std::isnan(d)) return "—";
    std::string out = signed_fixed(d, digits) + unit;
    if (!std::isnan(low))
        out += " (" + signed_fixed(low, digits) + unit + " – " + signed_fixed(high, digits) + unit + ")";
    return out;
}

std::string test_text(const summary_row& r) {
    switch (r.method) {
        case comparison::paired: return "paired, " + std::to_string(r.pairs) + " seeds";
        case comparison::welch: return "Welch";
        case comparison::means: return "means (too few runs)";
        default: return "—";
    }
}

bool several_baselines(const std::vector<summary_row>& rows) {
    return std::count_if(rows.begin(), rows.end(),
                         [](const summary_row& r) { return r.method == comparison::baseline; }) > 1;
}

// A number for summary.csv: the shortest decimal that reads back the same; empty where there is none.
std::string csv_number(double x) { return std::isfinite(x) ? shortest_decimal(x) : ""; }

}  // namespace

const char* comparison_name(comparison c) {
    switch (c) {
        case comparison::baseline: return "baseline";
        case comparison::paired: return "paired";
        case comparison::welch: return "welch";
        case comparison::means: return "means";
        case comparison::none: break;
    }
    return "none";
}

std::vector<summary_row> summary_rows(const std::vector<group_summary>& groups) {
    std::vector<summary_row> bases, compared, rest;
    for (const group_summary& g : groups) {
        const group_summary* baseline = g.compared_with == kNoGroup ? nullptr : &groups[g.compared_with];
        summary_row r = row_of(g, baseline);
        (r.method == comparison::baseline ? bases : std::isnan(r.difference) ? rest : compared).push_back(r);
    }
    std::stable_sort(compared.begin(), compared.end(),
                     [](const summary_row& a, const summary_row& b) { return a.difference < b.difference; });
    bases.insert(bases.end(), compared.begin(), compared.end());
    bases.insert(bases.end(), rest.begin(), rest.end());
    return bases;
}

std::string summary_table(const std::vector<summary_row>& rows) {
    const bool with_baseline = several_baselines(rows);
    std::ostringstream md;
    md << "| group |" << (with_baseline ? " baseline |" : "")
       << " n | final val loss (95% CI) | difference from baseline (95% CI) | test | p | relative error "
          "(95% CI) | failed |\n|---|"
       << (with_baseline ? "---|" : "") << "---|---|---|---|---|---|---|\n";
    for (const summary_row& r : rows) {
        const group_summary& g = *r.group;
        md << "| " << cell(g.label) << " | ";
        if (with_baseline) md << (r.baseline == nullptr ? "—" : cell(r.baseline->label)) << " | ";
        md << g.val.n << " | " << mean_with_interval(g.val) << " | ";
        if (r.method == comparison::baseline) md << "baseline | | | | ";
        else
            md << difference_text(r.difference, r.ci_low, r.ci_high, 4, "") << " | " << test_text(r) << " | "
               << p_value_text(r.p) << " | "
               << difference_text(r.relative, r.relative_low, r.relative_high, 2, "%") << " | ";
        md << cell(r.failures) << " |\n";
    }
    return md.str();
}

std::string summary_csv(const std::vector<summary_row>& rows) {
    std::string out =
        "group,baseline_group,n,mean_final_val_loss,ci_low,ci_high,comparison,pairs,difference,"
        "difference_ci_low,difference_ci_high,p,relative_error_percent,relative_error_ci_low,"
        "relative_error_ci_high,failed,decided,not_counted\n";
    for (const summary_row& r : rows) {
        const group_summary& g = *r.group;
        const std::vector<std::string> fields = {g.label,
                                                 r.baseline == nullptr ? "" : r.baseline->label,
                                                 std::to_string(g.val.n),
                                                 csv_number(g.val.mean),
                                                 csv_number(g.val.ci_low),
                                                 csv_number(g.val.ci_high),
                                                 comparison_name(r.method),
                                                 std::to_string(r.pairs),
                                                 csv_number(r.difference),
                                                 csv_number(r.ci_low),
                                                 csv_number(r.ci_high),
                                                 csv_number(r.p),
                                                 csv_number(r.relative),
                                                 csv_number(r.relative_low),
                                                 csv_number(r.relative_high),
                                                 std::to_string(g.failed),
                                                 std::to_string(g.decided),
                                                 std::to_string(g.runs.size() - g.decided)};
        for (size_t i = 0; i < fields.size(); ++i) out += (i ? "," : "") + csv_field(fields[i]);
        out += "\n";
    }
    return out;
}

}  // namespace altgrad::host::report
