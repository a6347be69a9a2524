#include "report/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "report/layer_figures.hpp"
#include "report/loss_figures.hpp"
#include "report/markdown.hpp"
#include "report/plot.hpp"
#include "report/stats.hpp"
#include "report/summary.hpp"
#include "report/tables.hpp"
#include "run/files.hpp"
#include "util/abi_names.hpp"
#include "util/error.hpp"

namespace altgrad::host::report {

namespace {

std::string loss_text(const std::optional<double>& x) {
    if (!x) return "—";
    if (!std::isfinite(*x)) return "nan";
    return fixed(*x);
}

std::string percent(double x) {
    if (x == 0) return "0%";
    char buf[64];
    if (x >= 0.01) std::snprintf(buf, sizeof buf, "%.1f%%", 100 * x);
    else std::snprintf(buf, sizeof buf, "%.2g%%", 100 * x);
    return buf;
}

std::string ratio(size_t a, size_t b) {
    return std::to_string(a) + "/" + std::to_string(b) + " (" +
           percent(b ? static_cast<double>(a) / static_cast<double>(b) : 0) + ")";
}

std::string label(const run_record& r) {
    std::string s = r.dir.generic_string();
    while (s.size() > 1 && s.back() == '/') s.pop_back();
    return s;
}

// Short names for figures and verdicts: the folder's name, with as many parent
// folders as it takes to tell the runs apart.
std::map<const run_record*, std::string> short_labels(const std::vector<run_record>& runs) {
    std::map<const run_record*, std::string> out;
    for (int depth = 1; depth <= 64; ++depth) {
        std::map<std::string, int> seen;
        for (const run_record& r : runs) {
            std::vector<std::string> parts;
            for (const fs::path& p : r.dir)
                if (!p.empty() && p != "/" && p != ".") parts.push_back(p.string());
            std::string name;
            for (size_t i = parts.size() > static_cast<size_t>(depth) ? parts.size() - depth : 0;
                 i < parts.size(); ++i)
                name += (name.empty() ? "" : "/") + parts[i];
            out[&r] = name.empty() ? label(r) : name;
            ++seen[out[&r]];
        }
        if (std::all_of(seen.begin(), seen.end(), [](const auto& kv) { return kv.second == 1; })) return out;
    }
    for (const run_record& r : runs) out[&r] = label(r);
    return out;
}

std::string link_to(const fs::path& target, const fs::path& out_dir) {
    std::error_code ec;
    const fs::path rel = fs::relative(fs::absolute(target, ec), fs::absolute(out_dir, ec), ec);
    return (ec || rel.empty() ? fs::absolute(target, ec) : rel).generic_string();
}

std::string upper(std::string s) {
    for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
}

// "e7m0→e5m2 on 24 tensors (steps 3–5)" per pair of formats.
std::string switches_text(const run_record& r) {
    struct agg {
        std::set<std::string> tensors;
        int64_t first = INT64_MAX, last = INT64_MIN;
    };
    std::map<std::pair<std::string, std::string>, agg> by_pair;
    for (const format_switch& s : r.switches) {
        agg& a = by_pair[{s.from, s.to}];
        a.tensors.insert(s.tensor);
        a.first = std::min(a.first, s.step);
        a.last = std::max(a.last, s.step);
    }
    std::string out;
    for (const auto& [pair, a] : by_pair) {
        out +=
            std::string(out.empty() ? "" : "; ") + pair.first + "→" + pair.second + " on " +
            std::to_string(a.tensors.size()) + (a.tensors.size() == 1 ? " tensor" : " tensors") +
            (a.first == a.last ? " at step " + std::to_string(a.first)
                               : " (steps " + std::to_string(a.first) + "–" + std::to_string(a.last) + ")");
    }
    return out;
}

std::string interventions_text(const run_record& r) {
    std::string out;
    for (const auto& [plugin, events] : r.interventions)
        for (const auto& [event, count] : events)
            out += std::string(out.empty() ? "" : ", ") + plugin + " " + event + " ×" + std::to_string(count);
    return out.empty() ? "none" : out;
}

std::string failure_text(const run_record& r, const fs::path& out_dir) {
    std::string out;
    if (r.has_summary) {
        out = r.failure_mode.empty() ? "?" : r.failure_mode;
        if (r.failure_step) out += " at step " + std::to_string(*r.failure_step);
    } else {
        out = r.first_nonfinite_step ? "loss non-finite at step " + std::to_string(*r.first_nonfinite_step)
                                     : "—";
    }
    if (!r.failure_report.empty()) out += " ([report](" + link_to(r.failure_report, out_dir) + "))";
    return out;
}

std::string opt_int(const std::optional<int64_t>& x) { return x ? std::to_string(*x) : "?"; }

// "2/3 failed (66.7%): nan_loss at step 7, bit_stall at step 40"
std::string failures_of(const std::vector<const run_record*>& sel, size_t& decided, size_t& failed) {
    decided = failed = 0;
    std::string modes;
    size_t listed = 0, rescued = 0;
    for (const run_record* r : sel) {
        if (!r->decided()) continue;
        ++decided;
        rescued += !r->failed() && !r->switches.empty();
        if (!r->failed()) continue;
        ++failed;
        if (++listed <= 6)
            modes += std::string(modes.empty() ? "" : ", ") +
                     (r->failure_mode.empty() ? "?" : r->failure_mode) +
                     (r->failure_step ? " at step " + std::to_string(*r->failure_step) : "");
    }
    if (listed > 6) modes += ", …";
    std::string out = ratio(failed, decided) + " runs failed";
    if (!modes.empty()) out += ": " + modes;
    // A run an intervention kept going by switching formats did not fail, but the format alone might have.
    if (rescued > 0)
        out += "; " + std::to_string(rescued) + " of those that did not fail switched formats during the run";
    const size_t undecided = sel.size() - decided;
    if (undecided > 0)
        out += "; " + std::to_string(undecided) + " interrupted, errored or crashed, not counted";
    return out;
}

std::string not_tested_text(const std::vector<const run_record*>& sel, const std::string& format) {
    if (sel.empty()) return "no run with " + upper(format) + " for every tensor";
    return std::to_string(sel.size()) +
           " run(s), none finished or collapsed (interrupted, errored or crashed)";
}

std::string not_enough(size_t n) { return "not enough runs (n=" + std::to_string(n) + ")"; }

// "; 95% interval 29.2%–100%" of k of n, and where it lies against [lower, upper]
// (lower exclusive unless lower_inclusive): inside, outside, or across a bound.
std::string rate_verdict(size_t k, size_t n, double lower, bool lower_inclusive, double upper,
                         std::string& observed) {
    const rate_interval ci = clopper_pearson(k, n);
    observed += "; exact 95% interval of the rate " + percent(ci.low) + "–" + percent(ci.high);
    const bool above_lower = lower_inclusive ? ci.low >= lower : ci.low > lower;
    const bool below_lower = lower_inclusive ? ci.high < lower : ci.high <= lower;
    if (above_lower && ci.high <= upper) return "supported";
    if (below_lower || ci.low > upper) return "contradicted";
    return "inconclusive";
}

hypothesis_verdict judge_failure_rate(const std::vector<const run_record*>& sel, const hypothesis& h) {
    hypothesis_verdict v{upper(h.format), h.claim, "", "", ""};
    size_t decided = 0, failed = 0;
    v.observed = failures_of(sel, decided, failed);
    if (decided == 0) {
        v.observed = not_tested_text(sel, h.format);
        v.verdict = "not tested by these runs";
        return v;
    }
    v.verdict = decided < kRunsForVerdict
                    ? not_enough(decided)
                    : rate_verdict(failed, decided, h.lower, h.lower_inclusive, h.at_most, v.observed);
    return v;
}

hypothesis_verdict judge_overflow(const std::vector<const run_record*>& sel, const hypothesis& h,
                                  const std::map<const run_record*, std::string>& names) {
    hypothesis_verdict v{upper(h.format), h.claim, "", "", ""};
    peak top;
    size_t decided = 0, overflow_failures = 0;
    for (const run_record* r : sel) {
        for (const altgrad_tensor_role role : h.roles) {
            std::vector<std::string> keys = {role_name(role)};
            // Run directories written before the output gradient had its own
            // name call it "gradient" (the only gradient the trainer quantizes).
            if (role == ALTGRAD_TENSOR_OUTPUT_GRADIENT) keys.push_back("gradient");
            for (const std::string& key : keys) {
                const auto it = r->max_overflow.find(key);
                if (it != r->max_overflow.end() && it->second.measured())
                    top.offer(it->second.rate, names.at(r) + ": " + it->second.tensor, it->second.step);
            }
        }
        if (r->decided()) {
            ++decided;
            overflow_failures += r->failed() && r->failure_mode == "overflow";
        }
    }
    if (!top.measured() && decided == 0) {
        v.observed = not_tested_text(sel, h.format) + (sel.empty() ? "" : "; no overflow measured");
        v.verdict = "not tested by these runs";
        return v;
    }
    const std::string what = h.roles.size() == 1 ? std::string(role_name(h.roles[0])) + " tensor" : "tensor";
    v.observed = top.measured() ? "largest " + what + " overflow rate " + percent(top.rate) + " (" +
                                      top.tensor + ", step " + std::to_string(top.step) + ")"
                                : "no " + what + " overflow measured";
    v.observed += "; overflow failures " + ratio(overflow_failures, decided);
    if (decided < kRunsForVerdict) v.verdict = not_enough(decided);
    else v.verdict = overflow_failures > 0 || top.rate > h.rate ? "supported" : "contradicted";
    return v;
}

hypothesis_verdict judge_failure_mode(const std::vector<const run_record*>& sel, const hypothesis& h,
                                      const std::map<const run_record*, std::string>& names) {
    hypothesis_verdict v{upper(h.format), h.claim, "", "", ""};
    size_t decided = 0, failed = 0, of_mode = 0;
    v.observed = failures_of(sel, decided, failed);
    if (decided == 0) {
        v.observed = not_tested_text(sel, h.format);
        v.verdict = "not tested by these runs";
        return v;
    }
    peak stall;
    for (const run_record* r : sel) {
        if (r->failed() && r->failure_mode == h.mode) ++of_mode;
        if (r->max_bit_stall.measured())
            stall.offer(r->max_bit_stall.rate, names.at(r) + ": " + r->max_bit_stall.tensor,
                        r->max_bit_stall.step);
    }
    if (h.mode == "bit_stall" && stall.measured())
        v.observed += "; largest bit-stall rate " + percent(stall.rate) + " (" + stall.tensor + ", step " +
                      std::to_string(stall.step) + ")";
    if (decided < kRunsForVerdict) v.verdict = not_enough(decided);
    else if (failed != of_mode) v.verdict = "contradicted";  // a failure of another mode
    else v.verdict = rate_verdict(of_mode, decided, 0, true, h.at_most, v.observed);
    return v;
}

std::string sanitize(const std::string& s) {
    std::string out;
    for (const char c : s)
        out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.') ? c : '_';
    return out.empty() ? "run" : out;
}

}  // namespace

std::vector<hypothesis_verdict> judge_hypotheses(const std::vector<run_record>& runs,
                                                 const std::vector<hypothesis>& items) {
    const std::vector<group_summary> groups = group_runs(runs);
    const auto names = short_labels(runs);
    std::vector<hypothesis_verdict> out;
    for (const hypothesis& h : items) {
        bool judged = false;
        for (const group_summary& g : groups) {
            const bool of_format = std::all_of(g.runs.begin(), g.runs.end(), [&](const run_record* r) {
                return r->uniform_format == h.format;
            });
            if (!of_format) continue;
            hypothesis_verdict v;
            switch (h.test) {
                case hypothesis::test_kind::failure_rate: v = judge_failure_rate(g.runs, h); break;
                case hypothesis::test_kind::overflow: v = judge_overflow(g.runs, h, names); break;
                case hypothesis::test_kind::failure_mode: v = judge_failure_mode(g.runs, h, names); break;
            }
            v.group = g.label;
            out.push_back(std::move(v));
            judged = true;
        }
        if (!judged)
            out.push_back(
                {upper(h.format), h.claim, not_tested_text({}, h.format), "not tested by these runs", ""});
    }
    return out;
}

std::string run_table_header() {
    return "| run | config | seed | formats | steps | status | final val loss | best val loss | failure | "
           "interventions |\n|---|---|---|---|---|---|---|---|---|---|";
}

std::string run_row(const run_record& r, const fs::path& out_dir) {
    std::string formats = r.formats.empty() ? "?" : r.formats;
    const std::string sw = switches_text(r);
    if (!sw.empty()) formats += "; switched " + sw;
    const std::string steps = opt_int(r.steps_done) + "/" + opt_int(r.max_steps);
    std::ostringstream o;
    o << "| `" << cell(label(r)) << "` | " << cell(r.name) << " | " << opt_int(r.seed) << " | "
      << cell(formats) << " | " << steps << " | " << cell(r.status) << " | "
      << loss_text(r.run_metric("final_val_loss")) << " | " << loss_text(r.run_metric("best_val_loss"))
      << " | " << cell(failure_text(r, out_dir)) << " | " << cell(interventions_text(r)) << " |";
    return o.str();
}

namespace {

// ---- The report's sections, in the order they appear ------------------------------

void write_overview(std::ostream& md, const std::vector<run_record>& runs, size_t configs) {
    size_t finished = 0, collapsed = 0, errored = 0, interrupted = 0;
    for (const run_record& r : runs) {
        finished += r.status == "finished";
        collapsed += r.status == "collapsed";
        interrupted += r.status == "interrupted";
        errored += r.status != "finished" && r.status != "collapsed" && r.status != "interrupted";
    }
    md << "# AltGrad run report\n\n"
       << runs.size() << (runs.size() == 1 ? " run" : " runs") << " of " << configs
       << (configs == 1 ? " config" : " configs") << ": " << finished << " finished, " << collapsed
       << " collapsed, " << errored << " stopped by an error or a crash, " << interrupted
       << " interrupted. Made by `altgrad-host report`; docs/report.md explains each part.\n\n";
}

// The runs table, then the classifier's one-line evidence (too long for a
// cell) and what could not be read in the run directories.
void write_runs(std::ostream& md, const std::vector<run_record>& runs, const fs::path& out_dir) {
    md << "## Runs\n\n" << run_table_header() << "\n";
    for (const run_record& r : runs) md << run_row(r, out_dir) << "\n";
    bool any_evidence = false;
    for (const run_record& r : runs) {
        if (r.failure_evidence.empty() || r.failure_mode == "none") continue;
        if (!any_evidence) md << "\nFailure evidence (summary.json):\n\n";
        any_evidence = true;
        md << "- `" << label(r) << "`: " << r.failure_mode
           << (r.failure_step ? " at step " + std::to_string(*r.failure_step) : "") << ": "
           << r.failure_evidence << "\n";
    }
    bool any_problem = false;
    for (const run_record& r : runs) any_problem = any_problem || !r.problems.empty();
    if (any_problem) {
        md << "\nWhat is missing or damaged in the run directories (read around it):\n\n";
        for (const run_record& r : runs)
            for (const std::string& p : r.problems) md << "- `" << label(r) << "`: " << p << "\n";
    }
}

// The baseline a group is compared with; nullptr when there is none.
const group_summary* baseline_of(const std::vector<group_summary>& groups, const group_summary& g) {
    return g.compared_with == kNoGroup ? nullptr : &groups[g.compared_with];
}

// The baseline groups, in order.
std::vector<const group_summary*> baselines(const std::vector<group_summary>& groups) {
    std::vector<const group_summary*> out;
    for (const group_summary& g : groups)
        if (g.baseline) out.push_back(&g);
    return out;
}

// A group's row of the comparison table; `varying` are its setting columns.
// `with_baseline`: a column naming the baseline it is compared with (when there are several).
std::string group_row(const group_summary& g, const group_summary* baseline,
                      const std::vector<std::string>& varying, bool with_baseline) {
    std::set<int64_t> seeds;
    for (const run_record* r : g.runs)
        if (r->seed) seeds.insert(*r->seed);
    std::string seed_text;
    for (int64_t s : seeds) seed_text += (seed_text.empty() ? "" : ", ") + std::to_string(s);
    const sample_summary& v = g.val;
    std::string mean = "—", sd = "—", ci = "—", vs = g.baseline ? "baseline" : "—", p = "—", paired = "—",
                paired_p = "—";
    if (v.n > 0) {
        mean = fixed(v.mean);
        if (v.n > 1) sd = fixed(v.sd), ci = fixed(v.ci_low) + " – " + fixed(v.ci_high);
        if (!g.baseline && baseline != nullptr && baseline->val.n > 0) {
            const double d = g.vs_baseline.difference;
            vs = signed_fixed(d) + " (" + signed_fixed(100 * d / baseline->val.mean, 1) + "%)";
            p = p_value_text(g.vs_baseline.p);
        }
    }
    const sample_summary& pd = g.vs_baseline_paired.d;
    if (!g.baseline && baseline != nullptr && pd.n > 0) {
        paired = signed_fixed(pd.mean) +
                 (pd.n > 1 ? " (" + signed_fixed(pd.ci_low) + " – " + signed_fixed(pd.ci_high) + ")" : "") +
                 ", n=" + std::to_string(pd.n);
        paired_p = p_value_text(g.vs_baseline_paired.p);
    }
    const std::string rate = g.decided ? ratio(g.failed, g.decided) : "—";
    const size_t other = g.runs.size() - g.decided - g.interrupted;
    std::string not_counted;
    if (g.interrupted) not_counted = std::to_string(g.interrupted) + " interrupted";
    if (other)
        not_counted += (not_counted.empty() ? "" : ", ") + std::to_string(other) + " errored or crashed";
    std::ostringstream o;
    o << "| " << cell(g.label) << " |";
    for (const std::string& key : varying) {
        const auto it = g.settings.find(key);
        o << " " << cell(g.settings.empty() ? "?" : it == g.settings.end() ? "(none)" : it->second) << " |";
    }
    o << " " << cell(g.formats.empty() ? "?" : g.formats) << " | " << (seed_text.empty() ? "?" : seed_text)
      << " | " << v.n << " | " << mean << " | " << sd << " | " << ci << " | ";
    if (with_baseline) o << cell(g.baseline || baseline == nullptr ? "—" : baseline->label) << " | ";
    o << vs << " | " << p << " | " << paired << " | " << paired_p << " | " << rate << " | " << not_counted
      << " |";
    return o.str();
}

// What the corpus alone predicts, once per distinct corpus among the runs
// (summary.json's "corpus"): the bar a model's validation loss should clear.
void write_corpus_reference(std::ostream& md, const std::vector<run_record>& runs) {
    std::map<std::string, size_t> lines;  // reference text -> runs with it
    for (const run_record& r : runs) {
        const run::corpus_record& c = r.corpus;
        if (std::isnan(c.bigram) && std::isnan(c.trigram)) continue;
        ++lines["unigram entropy " + fixed(c.unigram_entropy) + ", held-out bigram " + fixed(c.bigram) +
                ", trigram " + fixed(c.trigram) + " nats/char"];
    }
    if (lines.empty()) return;
    md << "\nReference, the corpus without a model (docs/data.md, \"Reference losses\"): ";
    if (lines.size() == 1) {
        md << lines.begin()->first << ".\n";
        return;
    }
    md << "the runs used " << lines.size() << " different corpora or splits:\n\n";
    for (const auto& [text, n] : lines)
        md << "- " << text << " (" << n << (n == 1 ? " run" : " runs") << ")\n";
}

void write_comparison(std::ostream& md, const std::vector<group_summary>& groups,
                      const std::string& baseline) {
    md << "\n## Formats compared across seeds\n\n"
       << "Runs are grouped by their resolved configuration without the seed (the name, `training.threads` "
          "and "
          "`output.*` do not count either): runs that differ in anything else are never averaged together. ";
    const std::vector<const group_summary*> bases = baselines(groups);
    if (bases.size() == 1) {
        md << "Baseline: `" << bases[0]->label << "` (" << bases[0]->runs.size()
           << (bases[0]->runs.size() == 1 ? " run" : " runs") << "). ";
    } else if (bases.size() > 1) {
        md << "Baselines: the " << bases.size() << " groups of `" << bases[0]->name << "` (";
        for (size_t i = 0; i < bases.size(); ++i) md << (i ? ", `" : "`") << bases[i]->label << "`";
        md << "); each other group is compared with the one whose settings agree with its own on the most "
              "keys "
              "(column `baseline`), e.g. the same scaling and master weights. ";
    } else if (baseline == kDefaultBaseline) {
        md << "No BF16 baseline among these runs (a config named bf16_baseline, or one with BF16 for every "
              "tensor): "
              "no differences shown. ";
    } else {
        md << "No run of the baseline config `" << baseline << "` among these runs: no differences shown. ";
    }
    md << "Final validation loss over the finished runs of each group: n, mean, sample standard deviation, "
          "the "
          "95% confidence interval of the mean (Student t), the difference from the baseline's mean and its "
          "two-sided Welch t-test p-value; then, over the seeds the group shares with its baseline, the mean "
          "of the run-by-run differences with its 95% interval and the paired t-test's p-value (runs of one "
          "seed start from the same weights and see the same batches, so the seed's own effect cancels); "
          "failure rate over the runs that finished or collapsed.\n\n";
    const std::vector<std::string> varying = varying_settings(groups);
    const bool with_baseline = bases.size() > 1;
    std::string header = "| group |", rule = "|---|";
    for (const std::string& key : varying) header += " " + cell(key) + " |", rule += "---|";
    md << header << " formats | seeds | n | mean final val loss | sd | 95% CI |"
       << (with_baseline ? " baseline |" : "")
       << " vs baseline | p (Welch) | paired vs baseline (95% CI) | p (paired) | failure rate | not counted "
          "|\n"
       << rule << "---|---|---|---|---|---|" << (with_baseline ? "---|" : "") << "---|---|---|---|---|---|\n";
    for (const group_summary& g : groups)
        md << group_row(g, baseline_of(groups, g), varying, with_baseline) << "\n";
    bool any_unknown = false;
    for (const group_summary& g : groups) any_unknown = any_unknown || g.settings.empty();
    if (any_unknown)
        md << "\n`?`: config.toml missing or refused by this host's loader; those runs are grouped by name "
              "alone.\n";
}

void write_hypotheses(std::ostream& md, const std::vector<run_record>& runs, const hypotheses& judged) {
    md << "\n## Failure modes: hypothesised and observed\n\n";
    if (judged.items.empty()) {
        md << "No hypotheses to judge (give a hypotheses file with --hypotheses; docs/report.md).\n";
    } else {
        std::error_code ec;  // the file as the reader would type it: relative to here when below it
        const fs::path here = fs::current_path(ec);
        const fs::path relative = ec ? fs::path() : judged.file.lexically_relative(here);
        const bool below = !relative.empty() && *relative.begin() != "..";
        const fs::path shown = below ? relative : judged.file;
        md << "Hypotheses of " << judged.source << " (`" << shown.generic_string()
           << "`), each judged per group from these runs alone (a group counts for a format when its runs "
              "use that "
              "format for every quantized tensor at the start; a run counts for a failure rate when it "
              "finished or "
              "collapsed). A verdict needs at least "
           << kRunsForVerdict
           << " such runs in the group; a rate is "
              "judged by its exact 95% (Clopper-Pearson) interval: supported when the interval lies within "
              "the "
              "hypothesis' bounds, contradicted when outside them, inconclusive when it crosses one.\n\n"
           << "| format | group | hypothesis | observed | verdict |\n|---|---|---|---|---|\n";
    }
    for (const hypothesis_verdict& h : judge_hypotheses(runs, judged.items))
        md << "| " << h.format << " | " << cell(h.group.empty() ? "—" : h.group) << " | "
           << cell(h.hypothesis) << " | " << cell(h.observed) << " | **" << h.verdict << "** |\n";
}

// ---- Figures ------------------------------------------------------------------------

// Figure file names, each used once.
class figure_stems {
public:
    std::string unique(const std::string& s) {
        std::string stem = sanitize(s);
        for (int k = 2; !taken_.insert(stem).second; ++k) stem = sanitize(s) + "-" + std::to_string(k);
        return stem;
    }

private:
    std::set<std::string> taken_;
};

// One series per run of each group in the group's colour, titled once per
// group, and the band of the group's spread where it has several runs.
void add_group_series(figure& f, const std::vector<group_summary>& groups, const std::string& name) {
    for (size_t k = 0; k < groups.size(); ++k) {
        const group_summary& g = groups[k];
        const int color = line_color(k);
        bool titled = false;
        for (const run_record* r : g.runs) {
            const std::vector<point>& pts = r->series_points(name);
            if (pts.empty()) continue;
            const bool sparse = pts.size() < 60;  // a few points: show each one
            f.lines.push_back({titled ? "" : g.label, pts, sparse, line_dash(k), color, {}});
            titled = true;
        }
        std::vector<band_point> band = seed_range(g.runs, name);
        // The band is in the group's colour, which the key names once already.
        if (!band.empty()) f.lines.push_back({"", {}, false, 0, color, std::move(band)});
    }
}

// One figure per series of the runs' catalogs that has one (series_of_runs:
// the host's, then the diagnostics' headlines), a colour per group; the host's
// series no run measured are returned, to be named in the report.
std::vector<std::string> add_series_figures(std::vector<figure>& figures, figure_stems& stems,
                                            const std::vector<group_summary>& groups,
                                            const std::vector<run_record>& runs) {
    std::vector<std::string> no_data;
    for (const run::metric& m : series_of_runs(runs)) {
        if (!m.figure()) continue;
        figure f;
        f.stem = stems.unique("diag-" + m.series);
        f.title = m.title;
        f.ylabel = m.label;
        f.log_y = m.log_scale;
        add_group_series(f, groups, m.series);
        if (!f.lines.empty()) figures.push_back(f);
        else no_data.push_back(m.series);
    }
    return no_data;
}

// The report's figures, drawn in the order they appear by one gnuplot (unless not asked for); once
// gnuplot runs past its time limit on one, the figures after it are not tried: each would most likely
// wait as long, and a study's report would take hours.
class figure_drawing {
public:
    figure_drawing(const report_options& options, report_output& result) : result_(result) {
        if (!options.figures) {
            result_.figures_missing = "not asked for (--no-figures)";
            return;
        }
        plot_.emplace(options.out_dir / "figures", options.gnuplot, options.gnuplot_timeout);
        if (!plot_->unavailable().empty()) {
            result_.figures_missing = plot_->unavailable();
            result_.gnuplot_unavailable = true;
            plot_.reset();
        }
    }

    // Draws `figures`, each drawn linked in `md`; returns a line per figure not drawn.
    template <class Figure>
    std::vector<std::string> draw(std::ostream& md, const std::vector<Figure>& figures) {
        std::vector<std::string> failures;
        if (!plot_) return failures;
        for (size_t i = 0; i < figures.size(); ++i) {
            if (result_.gnuplot_timed_out) {
                const std::string rest = std::to_string(figures.size() - i);
                failures.push_back(
                    i > 0 ? "the " + rest +
                                " figures after it (not tried once gnuplot had run past its time limit)"
                          : "the " + rest +
                                " figures of this section (not tried once gnuplot had run past its "
                                "time limit on " +
                                timed_out_stem_ + ")");
                not_tried_ += figures.size() - i;
                break;
            }
            std::string image, why;
            if (plot_->draw(figures[i], image, why)) {
                ++result_.figures;
                md << "![" << figures[i].title << "](figures/" << image << ")\n\n";
                continue;
            }
            failures.push_back(figures[i].stem + ": " + why);
            ++failed_;
            if (plot_->timed_out())
                result_.gnuplot_timed_out = true, timed_out_why_ = why, timed_out_stem_ = figures[i].stem;
        }
        return failures;
    }

    // Says in the result why figures are missing, once every figure had its turn.
    void finish() {
        if (result_.gnuplot_timed_out)
            result_.figures_missing =
                timed_out_why_ + "; the " + std::to_string(not_tried_) + " figures after it were not tried";
        else if (failed_ > 0) result_.figures_missing = std::to_string(failed_) + " figure(s) failed";
    }

private:
    report_output& result_;
    std::optional<plotter> plot_;  // none: no figures asked for, or gnuplot cannot draw
    std::string timed_out_why_, timed_out_stem_;
    size_t failed_ = 0, not_tried_ = 0;
};

void write_figures(std::ostream& md, const std::vector<run_record>& runs,
                   const std::vector<group_summary>& groups, const report_options& options,
                   figure_drawing& drawing, const report_output& result) {
    md << "\n## Figures\n\n";
    if (options.figures && options.summary_figures_only) {
        if (result.gnuplot_unavailable) md << "No figures: " << result.figures_missing << ".\n";
        else md << "None but the summary's forest plots (--summary-figures-only).\n";
        return;
    }
    const auto names = short_labels(runs);
    figure_stems stems;
    std::vector<figure> figures = loss_figures(groups, names, options.seed_curves);
    for (figure& f : figures) f.stem = stems.unique(f.stem);
    const std::vector<std::string> no_data = add_series_figures(figures, stems, groups, runs);
    for (const group_summary& g : groups)  // per layer: the first run of each group (layer_figures.hpp)
        for (figure f : g.runs.empty() ? std::vector<figure>{} : layer_figures(*g.runs.front(), g.label)) {
            f.stem = stems.unique(f.stem);
            figures.push_back(std::move(f));
        }

    const std::vector<std::string> failures = drawing.draw(md, figures);
    if (!options.figures) md << "No figures: not asked for (--no-figures).\n";
    else if (result.figures == 0 && failures.empty()) md << "No figures: " << result.figures_missing << ".\n";
    for (const std::string& f : failures) md << "- not drawn: " << f << "\n";
    if (!no_data.empty()) {
        md << (failures.empty() ? "" : "\n") << "No data in these runs for:";
        for (size_t i = 0; i < no_data.size(); ++i) md << (i ? ", " : " ") << no_data[i];
        md << " (measured at every quantization.diagnostic_interval).\n";
    }
    if (result.figures > 0)
        md << "\nEach figure's data (`figures/data/*.dat`) and gnuplot script (`figures/*.gp`) are kept "
              "beside it.\n";
}

// The answer first: a row per group against its baseline (summary.hpp) and the forest plots of the
// differences.
void write_summary(std::ostream& md, const std::vector<group_summary>& groups, figure_drawing& drawing,
                   const report_options& options) {
    const std::vector<summary_row> rows = summary_rows(groups);
    md << "## Summary\n\n"
       << "Final validation loss of each group (runs equal but for the seed) over its finished runs: n, the "
          "mean and its 95% interval; its difference from its baseline";
    if (std::none_of(rows.begin(), rows.end(),
                     [](const summary_row& r) { return r.method == comparison::baseline; }))
        md << " (none here: "
           << (options.baseline == kDefaultBaseline
                   ? "no BF16 baseline among these runs"
                   : "no run of the baseline config `" + options.baseline + "`")
           << ")";
    md << ", paired by seed over the seeds the two share where they share two or more, else Welch's, with "
          "its 95% interval and two-sided p; the relative error, 100 x the difference / the baseline's mean; "
          "the runs that failed of those that finished or collapsed. Baselines first, then by the "
          "difference. As data: [`summary.csv`](summary.csv); each group in detail under \"Formats compared "
          "across seeds\", each run under \"Runs\" at the end.\n\n"
       << summary_table(rows);
    const std::vector<figure_script> forests = forest_figures(rows);
    if (forests.empty() || !options.figures) return;
    md << "\n";
    for (const std::string& f : drawing.draw(md, forests)) md << "- not drawn: " << f << "\n";
}

}  // namespace

report_output write_report(const std::vector<run_record>& runs, const report_options& options) {
    report_output result;
    std::error_code ec;
    fs::create_directories(options.out_dir, ec);
    if (ec)
        throw error(options.out_dir.string() + ": cannot create the report folder (" + ec.message() + ")");
    result.markdown = options.out_dir / "report.md";

    const std::vector<group_summary> groups = group_runs(runs, options.baseline);
    std::ostringstream md;
    figure_drawing drawing(options, result);
    write_overview(md, runs, groups.size());
    write_summary(md, groups, drawing, options);
    write_comparison(md, groups, options.baseline);
    write_corpus_reference(md, runs);
    write_hypotheses(md, runs, options.judged);
    write_figures(md, runs, groups, options, drawing, result);
    drawing.finish();
    md << "\n## Tables\n\n[`summary.csv`](summary.csv): one row per group, as in the summary; "
          "[`runs.csv`](runs.csv): one row per run; [`steps.csv`](steps.csv): one row per run per logged "
          "step "
          "(docs/report.md, \"Tables\", has a pandas example).\n\n";
    write_runs(md, runs, options.out_dir);
    run::write_file_atomically(options.out_dir / "summary.csv", summary_csv(summary_rows(groups)));
    run::write_file_atomically(options.out_dir / "runs.csv", runs_csv(runs, groups));
    run::write_file_atomically(options.out_dir / "steps.csv", steps_csv(runs, groups));

    std::ofstream out(result.markdown, std::ios::binary | std::ios::trunc);
    out << md.str();
    out.flush();
    if (!out) throw error(result.markdown.string() + ": cannot write");
    return result;
}

}  // namespace altgrad::host::report
