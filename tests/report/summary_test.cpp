// The summary a study report opens with (host/src/report/summary.hpp): the
// table, summary.csv and the forest plots, on synthetic runs written as a
// published study keeps them (config.toml and summary.json, no metrics). The
// expected numbers are worked out by hand below, from the closed forms of
// Student's t for 1, 2 and 4 degrees of freedom, not from the code under test.

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "report/report.hpp"
#include "report/run_record.hpp"
#include "report/summary.hpp"
#include "report_test_support.hpp"

namespace altgrad::host::report {
namespace {

using namespace test_support;

// A run as the published study keeps it: config.toml and summary.json. `final_val` NaN: collapsed.
fs::path study_run(const fs::path& root, const std::string& name, const std::string& format, int seed,
                   double final_val, const std::string& failure_mode = "none") {
    const fs::path d = root / (name + "-s" + std::to_string(seed));
    write(d / "config.toml",
          "name = \"" + name + "\"\n\n[training]\nmax_steps = 500\nseed = " + std::to_string(seed) +
              "\n\n[quantization]\nweight_format = \"" + format + "\"\nactivation_format = \"" + format +
              "\"\ngradient_format = \"" + format + "\"\n");
    const bool collapsed = std::isnan(final_val);
    char loss[40];
    std::snprintf(loss, sizeof loss, "%.17g", final_val);
    const std::string val = collapsed ? "null" : loss;
    write(d / "summary.json",
          "{\"name\": \"" + name + "\", \"status\": \"" + (collapsed ? "collapsed" : "finished") +
              "\", \"failure_mode\": \"" + failure_mode +
              "\", \"failure_evidence\": \"\", \"failure_step\": " + (collapsed ? "7" : "null") +
              ", \"steps_done\": " + (collapsed ? "7" : "500") +
              ", \"max_steps\": 500, \"seed\": " + std::to_string(seed) +
              ", \"final_train_loss\": 2.5, \"final_val_loss\": " + val + ", \"best_val_loss\": " + val +
              ", \"seconds\": 40.1" + ", \"formats\": {\"weight\": \"" + format + "\", \"activation\": \"" +
              format + "\", \"gradient\": \"" + format + "\"}, \"switches\": [], \"interventions\": {}}\n");
    return d;
}

// Five groups against a BF16 baseline of seeds 1, 2, 3 (2.00, 2.10, 2.05):
//   e5m2_short    seeds 1-3, every seed shared: paired
//   e4m3_uniform  seeds 4-6, no seed shared: Welch
//   e3m4_uniform  one run, seed 7: the difference of the means alone
//   e7m0_uniform  seed 1 collapsed (nan_loss), seeds 2 and 3 finished: paired over the two
//   e0m7_uniform  both runs collapsed (overflow): no loss to compare
std::vector<run_record> study(const fs::path& root) {
    std::vector<fs::path> dirs = {
        study_run(root, "e7m0_uniform", "e7m0", 1, NAN, "nan_loss"),
        study_run(root, "e7m0_uniform", "e7m0", 2, 2.30),
        study_run(root, "e7m0_uniform", "e7m0", 3, 2.35),
        study_run(root, "e0m7_uniform", "e0m7", 1, NAN, "overflow"),
        study_run(root, "e0m7_uniform", "e0m7", 2, NAN, "overflow"),
        study_run(root, "bf16_baseline", "bf16", 1, 2.00),
        study_run(root, "bf16_baseline", "bf16", 2, 2.10),
        study_run(root, "bf16_baseline", "bf16", 3, 2.05),
        study_run(root, "e4m3_uniform", "e4m3", 4, 2.20),
        study_run(root, "e4m3_uniform", "e4m3", 5, 2.30),
        study_run(root, "e4m3_uniform", "e4m3", 6, 2.25),
        study_run(root, "e5m2_short", "e5m2", 1, 2.03),
        study_run(root, "e5m2_short", "e5m2", 2, 2.12),
        study_run(root, "e5m2_short", "e5m2", 3, 2.10),
        study_run(root, "e3m4_uniform", "e3m4", 7, 2.15),
    };
    std::vector<run_record> runs;
    for (const fs::path& d : dirs) runs.push_back(read_run(d));
    return runs;
}

// t(0.975, df) for 1, 2 and 4 degrees of freedom: 12.7062, 4.3027, 2.7764 in the published tables
// (NIST/SEMATECH e-Handbook 1.3.6.7.2), here from their closed forms: tan(pi (0.975 - 1/2)) for 1;
// for 2, t = 2 (p - 1/2) sqrt(2 / (1 - (2p - 1)^2)).
const double kT1 = std::tan(M_PI * 0.475);
const double kT2 = 0.95 * std::sqrt(2 / (1 - 0.95 * 0.95));
const double kT4 = 2.7764451051977987;  // mpmath, 40 digits (no elementary closed form)

// Two-sided p-values of t from the closed-form CDFs: df 1: 1 - (2/pi) atan|t|; df 2: 1 - |t| / sqrt(2 +
// t^2); df 4: 1 - x (3 - x^2) / 2 with x = |t| / sqrt(4 + t^2).
double p1(double t) { return 1 - 2 / M_PI * std::atan(std::fabs(t)); }
double p2(double t) { return 1 - std::fabs(t) / std::sqrt(2 + t * t); }
double p4(double t) {
    const double x = std::fabs(t) / std::sqrt(4 + t * t);
    return 1 - x * (3 - x * x) / 2;
}

TEST(ReportSummary, RowsAgainstTheBaselineByHand) {
    scratch tmp;
    const std::vector<run_record> runs = study(tmp.path());
    const std::vector<group_summary> groups = group_runs(runs);
    const std::vector<summary_row> rows = summary_rows(groups);
    ASSERT_EQ(rows.size(), 6u);
    // The baseline first, then by the difference, then the group without one.
    std::vector<std::string> order;
    for (const summary_row& r : rows) order.push_back(r.group->label);
    EXPECT_EQ(order, (std::vector<std::string>{"bf16_baseline", "e5m2_short", "e3m4_uniform", "e4m3_uniform",
                                               "e7m0_uniform", "e0m7_uniform"}));
    const double baseline = (2.00 + 2.10 + 2.05) / 3;  // 2.05
    EXPECT_EQ(rows[0].method, comparison::baseline);

    // e5m2: per-seed differences 0.03, 0.02, 0.05: mean 1/30, sd = sqrt(((1/300)^2 + (4/300)^2 + (5/300)^2)
    // / 2) = sqrt(42/2) / 300, t = mean / (sd / sqrt 3) with 2 degrees of freedom.
    const summary_row& e5m2 = rows[1];
    const double sd5 = std::sqrt(21.0) / 300, se5 = sd5 / std::sqrt(3.0);
    EXPECT_EQ(e5m2.method, comparison::paired);
    EXPECT_EQ(e5m2.pairs, 3u);
    EXPECT_NEAR(e5m2.difference, 1.0 / 30, 1e-12);
    EXPECT_NEAR(e5m2.ci_low, 1.0 / 30 - kT2 * se5, 1e-9);
    EXPECT_NEAR(e5m2.ci_high, 1.0 / 30 + kT2 * se5, 1e-9);
    EXPECT_NEAR(e5m2.p, p2((1.0 / 30) / se5), 1e-9);
    EXPECT_NEAR(e5m2.relative, 100.0 / 30 / baseline, 1e-9);  // 1.626%
    EXPECT_NEAR(e5m2.relative_high, 100 * (1.0 / 30 + kT2 * se5) / baseline, 1e-9);

    // e3m4: one run, 2.15 - 2.05, no interval.
    EXPECT_EQ(rows[2].method, comparison::means);
    EXPECT_NEAR(rows[2].difference, 0.10, 1e-12);
    EXPECT_NEAR(rows[2].relative, 100 * 0.10 / 2.05, 1e-9);
    EXPECT_TRUE(std::isnan(rows[2].ci_low) && std::isnan(rows[2].p));

    // e4m3: no seed shared: Welch. Both sds 0.05, se = sqrt(2 x 0.0025 / 3), df = 4 (equal variances and
    // sizes: 2(n - 1)); the difference 2.25 - 2.05 = 0.2.
    const summary_row& e4m3 = rows[3];
    const double se4 = std::sqrt(2 * 0.0025 / 3);
    EXPECT_EQ(e4m3.method, comparison::welch);
    EXPECT_EQ(e4m3.pairs, 0u);
    EXPECT_NEAR(e4m3.difference, 0.2, 1e-12);
    EXPECT_NEAR(e4m3.ci_low, 0.2 - kT4 * se4, 1e-9);  // 0.08665
    EXPECT_NEAR(e4m3.ci_high, 0.2 + kT4 * se4, 1e-9);
    EXPECT_NEAR(e4m3.p, p4(0.2 / se4), 1e-9);  // 0.00805

    // e7m0: seed 1 collapsed; seeds 2 and 3 give 0.20 and 0.30: mean 0.25, sd 0.1 / sqrt 2, se 0.05, t 5 on
    // 1 degree of freedom.
    const summary_row& e7m0 = rows[4];
    EXPECT_EQ(e7m0.method, comparison::paired);
    EXPECT_EQ(e7m0.pairs, 2u);
    EXPECT_NEAR(e7m0.difference, 0.25, 1e-12);
    EXPECT_NEAR(e7m0.ci_low, 0.25 - kT1 * 0.05, 1e-9);
    EXPECT_NEAR(e7m0.p, p1(5), 1e-9);  // 0.1257
    EXPECT_EQ(e7m0.failures, "1/3: nan_loss");

    // e0m7: nothing finished.
    EXPECT_EQ(rows[5].method, comparison::none);
    EXPECT_TRUE(std::isnan(rows[5].difference));
    EXPECT_EQ(rows[5].failures, "2/2: overflow ×2");
}

// A CSV line's fields (none of these is quoted).
std::vector<std::string> fields(const std::string& line) {
    std::vector<std::string> out(1);
    for (const char c : line) {
        if (c == ',') out.emplace_back();
        else out.back() += c;
    }
    return out;
}

TEST(ReportSummary, TheReportOpensWithTheTableAndWritesSummaryCsv) {
    scratch tmp;
    const std::vector<run_record> runs = study(tmp.path());
    report_options o;
    o.out_dir = tmp.path() / "report";
    o.figures = false;
    write_report(runs, o);
    const std::string md = read(o.out_dir / "report.md");
    // The summary comes first, the runs table last.
    const size_t summary = md.find("## Summary"), compared = md.find("## Formats compared across seeds"),
                 runs_table = md.find("## Runs");
    ASSERT_NE(summary, std::string::npos);
    EXPECT_LT(summary, compared);
    EXPECT_LT(compared, runs_table);
    EXPECT_EQ(md.find("## Figures") < runs_table, true);
    // By hand (above): e5m2's group mean 6.25 / 3 = 2.0833 with sd 0.04726, 95% CI 2.0833 ± 4.3027 x
    // 0.04726 / sqrt 3 = 1.9659 – 2.2007; the difference 0.0333 ± 4.3027 x 0.008819 = -0.0046 – +0.0713;
    // p 0.063; relative 1.63% (-0.22% – +3.48%).
    EXPECT_CONTAINS(
        md,
        "| group | n | final val loss (95% CI) | difference from baseline (95% CI) | test | p | "
        "relative error (95% CI) | failed |\n|---|---|---|---|---|---|---|---|\n"
        "| bf16_baseline | 3 | 2.0500 (1.9258 – 2.1742) | baseline | | | | 0/3 |\n"
        "| e5m2_short | 3 | 2.0833 (1.9659 – 2.2007) | +0.0333 (-0.0046 – +0.0713) | paired, 3 seeds "
        "| 0.063 | +1.63% (-0.22% – +3.48%) | 0/3 |\n"
        "| e3m4_uniform | 1 | 2.1500 | +0.1000 | means (too few runs) | — | +4.88% | 0/1 |\n"
        "| e4m3_uniform | 3 | 2.2500 (2.1258 – 2.3742) | +0.2000 (+0.0867 – +0.3133) | Welch | 0.008 "
        "| +9.76% (+4.23% – +15.29%) | 0/3 |\n");
    // e7m0: 2.325 ± 12.706 x 0.035355 / sqrt 2; the difference 0.25 ± 12.706 x 0.05; 0.25 / 2.05 = 12.20%.
    EXPECT_CONTAINS(md,
                    "| e7m0_uniform | 2 | 2.3250 (2.0073 – 2.6427) | +0.2500 (-0.3853 – +0.8853) | paired, 2 "
                    "seeds | 0.126 | +12.20% (-18.80% – +43.19%) | 1/3: nan_loss |\n"
                    "| e0m7_uniform | 0 | — | — | — | — | — | 2/2: overflow ×2 |\n");

    const std::string csv = read(o.out_dir / "summary.csv");
    std::istringstream lines(csv);
    std::vector<std::string> rows;
    for (std::string line; std::getline(lines, line);) rows.push_back(line);
    ASSERT_EQ(rows.size(), 7u) << csv;
    EXPECT_EQ(rows[0],
              "group,baseline_group,n,mean_final_val_loss,ci_low,ci_high,comparison,pairs,difference,"
              "difference_ci_low,difference_ci_high,p,relative_error_percent,relative_error_ci_low,"
              "relative_error_ci_high,failed,decided,not_counted");
    EXPECT_EQ(rows[1].substr(0, rows[1].find(",1.92")), "bf16_baseline,,3,2.05");
    EXPECT_EQ(rows[1].substr(rows[1].find(",baseline,")), ",baseline,0,,,,,,,,0,3,0");
    // The numbers as exact decimals: e3m4's 2.15 - 2.05 and 100 x 0.1 / 2.05 = 4.878%.
    const std::vector<std::string> e3m4 = fields(rows[3]);
    ASSERT_EQ(e3m4.size(), 18u);
    EXPECT_EQ(std::vector<std::string>(e3m4.begin(), e3m4.begin() + 8),
              (std::vector<std::string>{"e3m4_uniform", "bf16_baseline", "1", "2.15", "", "", "means", "0"}));
    EXPECT_NEAR(std::stod(e3m4[8]), 0.1, 1e-15);
    EXPECT_NEAR(std::stod(e3m4[12]), 100 * 0.1 / 2.05, 1e-12);
    EXPECT_EQ(e3m4[9] + e3m4[10] + e3m4[11] + e3m4[13] + e3m4[14], "");
    EXPECT_EQ(rows[6], "e0m7_uniform,bf16_baseline,0,,,,none,0,,,,,,,,2,2,0");
    EXPECT_EQ(rows[5].substr(0, 31), "e7m0_uniform,bf16_baseline,2,2.");
    EXPECT_CONTAINS(rows[5], ",paired,2,0.25");
    EXPECT_CONTAINS(rows[5], ",1,3,0");
}

TEST(ReportSummary, TheForestPlotsARowPerGroupAndTheFailedMarked) {
    scratch tmp;
    const std::vector<run_record> runs = study(tmp.path());
    const std::vector<group_summary> groups = group_runs(runs);
    const std::vector<figure_script> forests = forest_figures(summary_rows(groups));
    ASSERT_EQ(forests.size(), 2u);
    EXPECT_EQ(forests[0].stem, "diff-forest");
    EXPECT_EQ(forests[1].stem, "relative-forest");
    // Top to bottom in the summary's order, the baseline left out (it is the zero line).
    EXPECT_CONTAINS(forests[0].body,
                    "set ytics ('e5m2_short' 1, 'e3m4_uniform' 2, 'e4m3_uniform' 3, 'e7m0_uniform (1/3 "
                    "failed)' 4, 'e0m7_uniform (2/2 failed)' 5)");
    EXPECT_CONTAINS(forests[0].body, "set arrow from first 0, graph 0 to first 0, graph 1 nohead");
    // A file per kind of row: behind every row its baseline's seeds' spread, ± their sd (0.05: the deviations
    // are -0.05, +0.05, 0); paired (rows 1 and 4), Welch (row 3), means alone (row 2), failed (row 5).
    ASSERT_EQ(forests[0].data.size(), 5u);
    EXPECT_EQ(forests[0].data[0].first, "diff-forest-0.dat");
    EXPECT_EQ(forests[0].data[0].second,
              "# row\tlow\thigh\n1\t-0.05\t0.05\n2\t-0.05\t0.05\n3\t-0.05\t0.05\n4\t-0.05\t0.05\n"
              "5\t-0.05\t0.05\n");
    EXPECT_CONTAINS(forests[0].body, "title 'the baseline''s seeds: ± 1 sd'");
    EXPECT_CONTAINS(forests[0].data[1].second, "\n1\t0.0333333333\t");
    EXPECT_CONTAINS(forests[0].data[1].second, "\n4\t0.25\t-0.385310237\t0.885310237\n");
    EXPECT_CONTAINS(forests[0].data[2].second, "\n3\t0.2\t0.0866521032\t0.313347897\n");
    EXPECT_CONTAINS(forests[0].data[3].second, "\n2\t0.1\n");
    EXPECT_EQ(forests[0].data[4].second, "# row\tvalue\tlow\thigh\n5\t0\n");
    EXPECT_CONTAINS(forests[0].body, "title 'every run failed (no loss to compare)'");
    // Relative: 100 x 0.2 / 2.05 = 9.756%, the spread 100 x 0.05 / 2.05 = 2.439%.
    EXPECT_CONTAINS(forests[1].data[2].second, "\n3\t9.75609756\t4.22693186\t15.2852633\n");
    EXPECT_CONTAINS(forests[1].data[0].second, "\n1\t-2.43902439\t2.43902439\n");

    // Drawn into the report, right under the table.
    ASSERT_EQ(std::system("gnuplot --version > /dev/null 2>&1"), 0) << "no gnuplot (scripts/setup.sh)";
    report_options o;
    o.out_dir = tmp.path() / "report";
    const report_output out = write_report(runs, o);
    const std::string md = read(out.markdown);
    EXPECT_CONTAINS(md,
                    "| 2/2: overflow ×2 |\n\n![Final validation loss minus the baseline's (95% intervals)]"
                    "(figures/diff-forest.png)\n\n![Relative error: (group - baseline) / baseline (95% "
                    "intervals)](figures/relative-forest.png)\n");
    for (const char* image : {"diff-forest.png", "relative-forest.png"}) {
        EXPECT_GT(fs::file_size(o.out_dir / "figures" / image), 1000u) << image;
        EXPECT_EQ(read(o.out_dir / "figures" / image).substr(1, 3), "PNG");
    }
}

// Labels with settings take two lines: the name (and failures) above the settings, so the plot keeps its
// width.
TEST(ReportSummary, AForestLabelWithSettingsTakesTwoLines) {
    scratch tmp;
    std::vector<run_record> runs;
    for (const char* rate : {"0.001", "0.003"})
        for (int seed : {1, 2}) {
            const fs::path run =
                study_run(tmp.path() / rate, "e5m2_short", "e5m2", seed, seed == 1 ? 2.1 : 2.2);
            std::string config = read(run / "config.toml");
            config.replace(config.find("max_steps"), 0, "learning_rate = " + std::string(rate) + "\n");
            write(run / "config.toml", config);
            runs.push_back(read_run(run));
        }
    for (int seed : {1, 2})
        runs.push_back(read_run(study_run(tmp.path(), "bf16_baseline", "bf16", seed, 2.0)));
    const std::vector<group_summary> groups = group_runs(runs);
    ASSERT_EQ(groups[0].label, "e5m2_short [learning_rate=0.001]");
    const std::vector<figure_script> forests = forest_figures(summary_rows(groups));
    ASSERT_EQ(forests.size(), 2u);
    EXPECT_CONTAINS(forests[0].body,
                    "set ytics ('e5m2_short' . \"\\n\" . '[learning_rate=0.001]' 1, 'e5m2_short' . \"\\n\" . "
                    "'[learning_rate=0.003]' 2) nomirror\n");
    EXPECT_EQ(forests[0].width, 960);
}

// A second report over runs another one draws already: the forest plots alone.
TEST(ReportSummary, OnlyTheSummarysFiguresOnRequest) {
    ASSERT_EQ(std::system("gnuplot --version > /dev/null 2>&1"), 0) << "no gnuplot (scripts/setup.sh)";
    scratch tmp;
    std::vector<run_record> runs = study(tmp.path());
    report_options o;
    o.out_dir = tmp.path() / "report";
    o.summary_figures_only = true;
    const report_output out = write_report(runs, o);
    EXPECT_EQ(out.figures, 2u);
    EXPECT_EQ(out.figures_missing, "");
    EXPECT_CONTAINS(read(out.markdown),
                    "## Figures\n\nNone but the summary's forest plots (--summary-figures-only).\n");
    EXPECT_TRUE(fs::exists(o.out_dir / "figures" / "relative-forest.png"));
    EXPECT_FALSE(fs::exists(o.out_dir / "figures" / "val_loss-all.gp"));
}

// The forest plots are the first figures: a gnuplot that hangs on the first is killed, and none after it
// is tried, in the summary or in the Figures section.
TEST(ReportSummary, AGnuplotThatHangsOnTheForestStopsEveryFigureAfterIt) {
    scratch tmp;
    const fs::path fake = tmp.path() / "hanging-gnuplot";
    write(fake, "#!/bin/sh\n[ \"$1\" = -e ] && [ $# -eq 2 ] && exit 0\necho \"$3\" >> " +
                    (tmp.path() / "calls").string() + "\nexec sleep 1000\n");
    fs::permissions(fake, fs::perms::owner_all);
    std::vector<run_record> runs = study(tmp.path());
    report_options o;
    o.out_dir = tmp.path() / "report";
    o.gnuplot = fake.string();
    o.gnuplot_timeout = 0.5;
    const report_output out = write_report(runs, o);
    EXPECT_EQ(out.figures, 0u);
    EXPECT_TRUE(out.gnuplot_timed_out);
    EXPECT_EQ(read(tmp.path() / "calls"), "diff-forest.gp\n");
    const std::string why = "gnuplot did not finish diff-forest.gp within 0.5 s (killed)";
    // Not tried: relative-forest, then the Figures section's 6 loss figures (a group each) and val_loss-all.
    EXPECT_EQ(out.figures_missing, why + "; the 8 figures after it were not tried");
    const std::string md = read(out.markdown);
    EXPECT_CONTAINS(md, "- not drawn: diff-forest: " + why +
                            "\n- not drawn: the 1 figures after it (not tried once gnuplot had run past its "
                            "time limit)\n");
    EXPECT_CONTAINS(
        md,
        "## Figures\n\n- not drawn: the 7 figures of this section (not tried once gnuplot had run "
        "past its time limit on diff-forest)\n");
}

TEST(ReportSummary, NoBaselineNoForest) {
    scratch tmp;
    std::vector<run_record> runs = {read_run(study_run(tmp.path(), "e5m2_short", "e5m2", 1, 2.5)),
                                    read_run(study_run(tmp.path(), "e5m2_short", "e5m2", 2, 2.7))};
    const std::vector<summary_row> rows = summary_rows(group_runs(runs));
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows[0].method, comparison::none);
    EXPECT_TRUE(forest_figures(rows).empty());
    report_options o;
    o.out_dir = tmp.path() / "report";
    o.figures = false;
    write_report(runs, o);
    const std::string md = read(o.out_dir / "report.md");
    EXPECT_CONTAINS(md, "its difference from its baseline (none here: no BF16 baseline among these runs)");
    EXPECT_CONTAINS(md, "| e5m2_short | 2 | 2.6000 (1.3294 – 3.8706) | — | — | — | — | 0/2 |\n");
}

}  // namespace
}  // namespace altgrad::host::report
