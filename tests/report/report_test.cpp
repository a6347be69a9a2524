// altgrad-host report on synthetic run directories written here to the
// contract of docs/training.md ("The run directory"): finished, collapsed,
// interrupted, resumed, truncated mid-line, missing files; the rows, the
// comparison, the hypothesis verdicts, the figures and the command line.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "report/plot.hpp"
#include "report/report.hpp"
#include "report/run_record.hpp"
#include "report/stats.hpp"
#include "report/tables.hpp"
#include "report_test_support.hpp"
#include "run/files.hpp"
#include "util/error.hpp"

namespace altgrad::host::report {
namespace {

using namespace test_support;

const std::string kHost = ALTGRAD_HOST_BINARY;

std::string config_toml(const std::string& name, const std::string& format, int64_t seed, int64_t max_steps) {
    return "name = \"" + name + "\"\n\n[training]\nmax_steps = " + std::to_string(max_steps) +
           "\nseed = " + std::to_string(seed) + "\nwarmup_steps = 0\n\n[quantization]\nweight_format = \"" +
           format + "\"\nactivation_format = \"" + format + "\"\ngradient_format = \"" + format + "\"\n";
}

std::string num(double x) {
    if (!std::isfinite(x)) return "null";
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", x);
    return buf;
}

// The metrics lines of docs/training.md.
std::string loss_line(int64_t step, double loss, double overflow = 0) {
    return "{\"step\": " + std::to_string(step) + ", \"loss\": " + num(loss) +
           ", \"lr\": 0.0006, \"grad_norm\": 1.5, \"tokens_per_s\": 9000, \"grad_sparsity\": 0.01, "
           "\"overflow_rate\": " +
           num(overflow) + ", \"underflow_rate\": 0.02}\n";
}
std::string val_line(int64_t step, double val) {
    return "{\"step\": " + std::to_string(step) + ", \"val_loss\": " + num(val) + "}\n";
}
std::string tensor_line(int64_t step, const std::string& tensor, const std::string& role,
                        const std::string& format, int64_t overflow, int64_t count,
                        const std::string& bit_stall = "") {
    return "{\"step\": " + std::to_string(step) + ", \"tensor\": \"" + tensor + "\", \"role\": \"" + role +
           "\", \"format\": \"" + format +
           "\", \"scale\": 1, \"amax\": 0.5, \"overflow\": " + std::to_string(overflow) +
           ", \"underflow\": 0, \"count\": " + std::to_string(count) +
           (bit_stall.empty() ? "" : ", \"bit_stall_rate\": " + bit_stall) + "}\n";
}
std::string stiffness_line(int64_t step, double mean) {
    return "{\"step\": " + std::to_string(step) +
           ", \"diagnostic\": \"stiffness\", \"tensor\": \"*\", \"role\": \"all\", \"values\": "
           "{\"stiffness_mean\": " +
           num(mean) + ", \"stiffness_max\": 1}}\n";
}
std::string switch_line(int64_t step, const std::string& tensor, const std::string& from,
                        const std::string& to) {
    return "{\"step\": " + std::to_string(step) +
           ", \"event\": \"switch_format\", \"plugin\": \"mantissa_shift\", \"reason\": \"3 non-finite "
           "steps\", "
           "\"tensor\": \"" +
           tensor + "\", \"from\": \"" + from + "\", \"to\": \"" + to + "\"}\n";
}

std::string summary_json(const std::string& name, const std::string& status, const std::string& mode,
                         const std::string& failure_step, int64_t steps_done, int64_t max_steps, int64_t seed,
                         double final_val, double best_val, const std::string& format,
                         const std::string& switches = "[]", const std::string& interventions = "{}") {
    return "{\"name\": \"" + name + "\", \"status\": \"" + status + "\", \"failure_mode\": \"" + mode +
           "\", \"failure_step\": " + failure_step +
           ", \"failure_evidence\": \"x\", \"steps_done\": " + std::to_string(steps_done) +
           ", \"max_steps\": " + std::to_string(max_steps) + ", \"seed\": " + std::to_string(seed) +
           ", \"final_train_loss\": 2.5, \"final_val_loss\": " + num(final_val) +
           ", \"best_val_loss\": " + num(best_val) +
           ", \"seconds\": 40.1, \"cpu_seconds\": 38.5, \"formats\": {\"weight\": \"" + format +
           "\", \"activation\": \"" + format + "\", \"gradient\": \"" + format +
           "\"}, \"switches\": " + switches + ", \"interventions\": " + interventions + "}\n";
}

// What the stiffness diagnostic declares (its headline, ABI 1.3), as a run's
// catalog.json records it.
altgrad::host::run::metric stiffness_headline() {
    altgrad::host::run::metric m;
    m.name = "stiffness_mean";
    m.record = altgrad::host::run::metric_record::diagnostic;
    m.source = "stiffness";
    m.series = "stiffness";
    m.title = "Stiffness (mean S = 2^(floor(log2|w|) - M))";
    m.label = "mean stiffness";
    m.summary = altgrad::host::run::tensor_summary::mean;
    m.summary_of = "stiffness_mean";
    m.log_scale = true;
    return m;
}

// The catalog.json of a run whose diagnostics declared `headlines`.
void write_catalog(const fs::path& run_dir, const std::vector<altgrad::host::run::metric>& headlines) {
    altgrad::host::run::metric_catalog c;
    for (const auto& m : headlines) c.add(m);
    altgrad::host::run::write_catalog(run_dir, c);
}

// A run that finished all its steps (its stiffness diagnostic declaring its headline).
fs::path finished_run(const fs::path& root, const std::string& dir, const std::string& name,
                      const std::string& format, int64_t seed, double final_val,
                      const std::string& extra_metrics = "") {
    const fs::path d = root / dir;
    write(d / "config.toml", config_toml(name, format, seed, 500));
    std::string m = val_line(0, 4.7);
    for (int64_t s = 1; s <= 500; s += 50) m += loss_line(s, 4.0 - s / 250.0);
    m += tensor_line(250, "blocks.0.mlp.fc.weight", "weight", format, 0, 1000, "0.25") +
         tensor_line(500, "blocks.0.mlp.fc.weight", "weight", format, 0, 1000, "0.125") +
         stiffness_line(250, 0.01) + stiffness_line(500, 0.008);
    m += val_line(250, final_val + 0.5) + loss_line(500, 2.5) + val_line(500, final_val) + extra_metrics;
    write(d / "metrics.jsonl", m);
    write(d / "summary.json",
          summary_json(name, "finished", "none", "null", 500, 500, seed, final_val, final_val, format));
    write_catalog(d, {stiffness_headline()});
    return d;
}

// An E7M0 run that collapsed at step 7 after the mantissa shift switched two tensors.
fs::path collapsed_run(const fs::path& root) {
    const fs::path d = root / "e7m0";
    write(d / "config.toml", config_toml("e7m0_uniform", "e7m0", 42, 500));
    std::string m = val_line(0, 4.9);
    for (int64_t s = 1; s <= 6; ++s) m += loss_line(s, 4.5);
    m += switch_line(3, "blocks.0.attn.qkv.weight", "e7m0", "e5m2") +
         switch_line(5, "blocks.1.attn.qkv.weight", "e7m0", "e5m2") + loss_line(7, NAN) +
         "{\"step\": 7, \"event\": \"nonfinite\", \"plugin\": \"host\", \"reason\": \"loss\"}\n"
         "{\"step\": 7, \"event\": \"collapse\", \"plugin\": \"host\", \"reason\": \"nan\", \"mode\": "
         "\"nan_loss\", "
         "\"evidence_step\": 7}\n";
    write(d / "metrics.jsonl", m);
    write(
        d / "summary.json",
        summary_json(
            "e7m0_uniform", "collapsed", "nan_loss", "7", 7, 500, 42, NAN, 4.1, "e7m0",
            "[{\"step\": 3, \"tensor\": \"blocks.0.attn.qkv.weight\", \"from\": \"e7m0\", \"to\": \"e5m2\", "
            "\"plugin\": \"mantissa_shift\"}, {\"step\": 5, \"tensor\": \"blocks.1.attn.qkv.weight\", "
            "\"from\": \"e7m0\", \"to\": \"e5m2\", \"plugin\": \"mantissa_shift\"}]",
            "{\"mantissa_shift\": {\"switch_format\": 2}}"));
    write(d / "reports" / "failure.md", "# failure\n");
    write(d / "checkpoints" / "step_0000007" / "state.toml", "step = 7\n");
    return d;
}

// Killed at step 30 of 500: no summary.json, a checkpoint at step 30.
fs::path interrupted_run(const fs::path& root) {
    const fs::path d = root / "e3m4-killed";
    write(d / "config.toml", config_toml("e3m4_uniform", "e3m4", 42, 500));
    std::string m = val_line(0, 4.7);
    for (int64_t s = 1; s <= 30; ++s) m += loss_line(s, 4.0 - s * 0.01);
    m += val_line(25, 3.9);
    write(d / "metrics.jsonl", m);
    write(d / "checkpoints" / "step_0000030" / "state.toml", "step = 30\n");
    write(d / "checkpoints" / "step_0000020" / "model.pt", "");  // incomplete: no state.toml
    write(d / "checkpoints" / ".tmp-step_0000040" / "state.toml", "step = 40\n");
    return d;
}

std::string row_of(const run_record& r) { return run_row(r, r.dir.parent_path() / "report"); }

bool has_problem(const run_record& r, const std::string& text) {
    for (const std::string& p : r.problems)
        if (p.find(text) != std::string::npos) return true;
    return false;
}

std::string problems_of(const run_record& r) {
    std::string s;
    for (const std::string& p : r.problems) s += p + "\n";
    return s;
}

// ---- One run's row -------------------------------------------------------------

TEST(ReportRow, FinishedRun) {
    scratch tmp;
    const run_record r = read_run(finished_run(tmp.path(), "e5m2-s1", "e5m2_short", "e5m2", 1, 2.55));
    EXPECT_EQ(r.status, "finished");
    EXPECT_TRUE(r.problems.empty()) << problems_of(r);
    EXPECT_EQ(row_of(r),
              "| `" + r.dir.generic_string() +
                  "` | e5m2_short | 1 | e5m2 | 500/500 | finished | 2.5500 | 2.5500 | none | none |");
}

TEST(ReportRow, CollapsedRunSaysTheModeTheStepTheSwitchesAndTheInterventions) {
    scratch tmp;
    const run_record r = read_run(collapsed_run(tmp.path()));
    EXPECT_EQ(r.status, "collapsed");
    EXPECT_TRUE(r.failed());
    EXPECT_TRUE(r.problems.empty()) << problems_of(r);
    const std::string row = row_of(r);
    EXPECT_CONTAINS(row,
                    "| e7m0_uniform | 42 | e7m0; switched e7m0→e5m2 on 2 tensors (steps 3–5) | 7/500 | "
                    "collapsed | nan | 4.1000 | nan_loss at step 7 ([report](../e7m0/reports/failure.md)) | "
                    "mantissa_shift switch_format ×2 |");
    EXPECT_EQ(r.first_nonfinite_step, 7);

    report_options o;
    o.out_dir = tmp.path() / "report";
    o.figures = false;
    write_report({r}, o);
    EXPECT_CONTAINS(read(o.out_dir / "report.md"), "Failure evidence (summary.json):\n\n- `" +
                                                       r.dir.generic_string() + "`: nan_loss at step 7: x\n");
}

TEST(ReportRow, InterruptedRunShowsStepsFromTheMetricsAndTheLastCheckpoint) {
    scratch tmp;
    const run_record r = read_run(interrupted_run(tmp.path()));
    EXPECT_FALSE(r.has_summary);
    EXPECT_EQ(r.last_checkpoint, 30);
    EXPECT_CONTAINS(row_of(r),
                    "| e3m4_uniform | 42 | e3m4 | 30/500 | interrupted | 3.9000 | 3.9000 | — | none |");
    EXPECT_TRUE(has_problem(r,
                            "no summary.json: interrupted or still running; steps from metrics.jsonl, last "
                            "checkpoint at step 30"))
        << problems_of(r);
    EXPECT_FALSE(r.decided());
}

TEST(ReportRow, ResumedRunKeepsTheLastLineOfARepeatedStep) {
    scratch tmp;
    const fs::path d = tmp.path() / "resumed";
    write(d / "config.toml", config_toml("e4m3_uniform", "e4m3", 3, 40));
    std::string m = val_line(0, 4.7);
    for (int64_t s = 1; s <= 25; ++s) m += loss_line(s, 3.0);
    m += val_line(20, 3.5);
    // Resumed from the checkpoint at step 20: steps 21.. and the step-20 evaluation again.
    m += val_line(20, 3.4);
    for (int64_t s = 21; s <= 40; ++s) m += loss_line(s, 2.0);
    m += val_line(40, 3.1) + switch_line(22, "lm_head.weight", "e4m3", "e5m2");
    write(d / "metrics.jsonl", m);
    write(d / "summary.json",
          summary_json("e4m3_uniform", "finished", "none", "null", 40, 40, 3, 3.1, 3.1, "e4m3"));
    const run_record r = read_run(d);
    EXPECT_EQ(r.repeated_steps, 5);  // steps 21..25
    EXPECT_TRUE(has_problem(r, "metrics.jsonl: 5 steps written twice (a resume); the later lines kept"))
        << problems_of(r);
    ASSERT_EQ(r.train_loss().size(), 40u);
    EXPECT_EQ(r.train_loss()[21].step, 22);
    EXPECT_EQ(r.train_loss()[21].value, 2.0);
    ASSERT_EQ(r.val_loss().size(), 3u);
    EXPECT_EQ(r.val_loss()[1].value, 3.4);
    // With a summary, the switches are summary.json's (none here), not the events'.
    EXPECT_TRUE(r.switches.empty());
    EXPECT_CONTAINS(row_of(r),
                    "| e4m3_uniform | 3 | e4m3 | 40/40 | finished | 3.1000 | 3.1000 | none | none |");

    // Without summary.json the same metrics give the row: last occurrences, the switch from the events.
    fs::remove(d / "summary.json");
    const run_record k = read_run(d);
    EXPECT_EQ(k.run_metric("final_val_loss"), 3.1);
    EXPECT_EQ(k.run_metric("best_val_loss"), 3.1);
    EXPECT_CONTAINS(row_of(k),
                    "| e4m3; switched e4m3→e5m2 on 1 tensor at step 22 | 40/40 | interrupted | 3.1000 | "
                    "3.1000 | — | mantissa_shift switch_format ×1 |");
}

TEST(ReportRow, TruncatedLinesAreSkippedAndSaid) {
    scratch tmp;
    const fs::path d = tmp.path() / "cut";
    write(d / "config.toml", config_toml("e5m2_short", "e5m2", 42, 500));
    // Killed mid-write at step 12, resumed (appending after the cut line), killed again mid-line.
    std::string m = val_line(0, 4.7);
    for (int64_t s = 1; s <= 11; ++s) m += loss_line(s, 3.0);
    m += "{\"step\": 12, \"loss\": 2.\n";  // line 13
    for (int64_t s = 12; s <= 15; ++s) m += loss_line(s, 2.9);
    m += "garbage\n";                                        // line 18
    m += "{\"step\": 16, \"tensor\": \"blocks.0.mlp.fc.we";  // line 19, no newline
    write(d / "metrics.jsonl", m);
    const run_record r = read_run(d);
    EXPECT_TRUE(has_problem(r, "metrics.jsonl: line 13 truncated (skipped)")) << problems_of(r);
    EXPECT_TRUE(has_problem(r,
                            "metrics.jsonl: line 18: not JSON, parse error at line 1, column 1: syntax error "
                            "while parsing value - invalid literal; last read: 'g' (skipped)"))
        << problems_of(r);
    EXPECT_TRUE(has_problem(r, "metrics.jsonl: line 19 truncated (skipped)")) << problems_of(r);
    EXPECT_EQ(r.steps_done, 15);
    EXPECT_CONTAINS(row_of(r), "| 15/500 | interrupted | 4.7000 | 4.7000 | — | none |");
}

TEST(ReportRow, MissingAndHalfWrittenFilesAreLinesNotCrashes) {
    scratch tmp;
    // Only a config.
    const fs::path a = tmp.path() / "only-config";
    write(a / "config.toml", config_toml("e1m6_uniform", "e1m6", 42, 500));
    const run_record ra = read_run(a);
    EXPECT_TRUE(has_problem(ra, "no metrics.jsonl")) << problems_of(ra);
    EXPECT_CONTAINS(row_of(ra), "| e1m6_uniform | 42 | e1m6 | ?/500 | interrupted | — | — | — | none |");

    // A half-written summary.json and a config that does not load.
    const fs::path b = tmp.path() / "half";
    write(b / "config.toml", "name = \"x\"\n[training]\nmax_steps = -5\n");
    write(b / "metrics.jsonl", loss_line(1, 3.0));
    write(b / "summary.json", "{\"name\": \"x\", \"status\": \"fini");
    const run_record rb = read_run(b);
    EXPECT_FALSE(rb.has_summary);
    EXPECT_EQ(rb.status, "interrupted");
    EXPECT_TRUE(has_problem(rb, "summary.json: half-written")) << problems_of(rb);
    EXPECT_TRUE(has_problem(rb, "config.toml: ")) << problems_of(rb);
    EXPECT_TRUE(has_problem(rb, "max_steps")) << problems_of(rb);
    EXPECT_EQ(rb.name, "x");  // read directly when the loader refuses the file

    // Only metrics: the name is the folder's.
    const fs::path c = tmp.path() / "bare-metrics";
    write(c / "metrics.jsonl", loss_line(1, 3.0) + loss_line(2, 2.9));
    const run_record rc = read_run(c);
    EXPECT_EQ(rc.name, "bare-metrics");
    EXPECT_TRUE(has_problem(rc, "no config.toml")) << problems_of(rc);
    EXPECT_CONTAINS(row_of(rc), "| bare-metrics | ? | ? | 2/? | interrupted |");

    // A collapse without its report.
    const fs::path e = collapsed_run(tmp.path());
    fs::remove_all(e / "reports");
    EXPECT_TRUE(has_problem(read_run(e), "no reports/failure.md"));
}

TEST(ReportRow, MixedFormatsShowTheRules) {
    scratch tmp;
    const fs::path d = tmp.path() / "postln";
    write(d / "config.toml",
          "name = \"e1m6_postln\"\n[quantization]\nweight_format = \"bf16\"\nactivation_format = \"bf16\"\n"
          "gradient_format = \"bf16\"\n[[quantization.rules]]\npattern = \"blocks.*.mlp.fc\"\nactivation = "
          "\"e1m6\"\n");
    write(d / "metrics.jsonl", "");
    const run_record r = read_run(d);
    EXPECT_EQ(r.formats, "bf16; blocks.*.mlp.fc: a e1m6");
    EXPECT_EQ(r.uniform_format, "");
}

// A product table's operand format is a format the run used (issue #45: the report read only the
// global keys and the rules, so a recipe that kept one operand in bf16 was called uniform).
TEST(ReportRow, ProductTablesFormatsAreTheRunsToo) {
    scratch tmp;
    const fs::path d = tmp.path() / "fwd_x_bf16";
    write(
        d / "config.toml",
        "name = \"fwd_x_bf16\"\n[quantization]\nweight_format = \"e4m3\"\nactivation_format = \"e4m3\"\n"
        "gradient_format = \"e4m3\"\n[quantization.forward]\nx = { format = \"bf16\" }\n"
        "[[quantization.rules]]\npattern = \"lm_head\"\nweight_gradient = { dy = { format = \"e5m2\" } }\n");
    write(d / "metrics.jsonl", "");
    const run_record r = read_run(d);
    EXPECT_EQ(r.formats, "e4m3; forward.x bf16; lm_head: weight_gradient.dy e5m2");
    EXPECT_EQ(r.uniform_format, "");
    // Without the tables every operand of every product is e4m3: uniform.
    write(d / "config.toml",
          "name = \"fwd_x_bf16\"\n[quantization]\nweight_format = \"e4m3\"\nactivation_format = \"e4m3\"\n"
          "gradient_format = \"e4m3\"\n");
    EXPECT_EQ(read_run(d).uniform_format, "e4m3");
}

// ---- Comparison and hypotheses ---------------------------------------------------

std::string diag_overflow(int64_t step, const std::string& role_tensor, const std::string& role,
                          const std::string& format, int64_t overflow) {
    return tensor_line(step, role_tensor, role, format, overflow, 1000);
}

TEST(ReportGroups, MeanAndSpreadAgainstTheBaseline) {
    scratch tmp;
    std::vector<run_record> runs = {
        read_run(finished_run(tmp.path(), "e5m2-s1", "e5m2_short", "e5m2", 1, 2.5)),
        read_run(finished_run(tmp.path(), "e5m2-s2", "e5m2_short", "e5m2", 2, 2.7)),
        read_run(finished_run(tmp.path(), "bf16", "bf16_baseline", "bf16", 42, 2.4)),
        read_run(interrupted_run(tmp.path())),
    };
    const std::vector<group_summary> groups = group_runs(runs);
    ASSERT_EQ(groups.size(), 3u);
    EXPECT_EQ(groups[0].name, "e5m2_short");
    EXPECT_NEAR(groups[0].val.mean, 2.6, 1e-12);
    EXPECT_NEAR(groups[0].val.sd, std::sqrt(0.02), 1e-12);
    EXPECT_TRUE(groups[1].baseline);
    EXPECT_EQ(groups[2].interrupted, 1u);
    // The formats differ between the groups, nothing else (the seed never counts).
    EXPECT_EQ(varying_settings(groups),
              (std::vector<std::string>{"quantization.activation_format", "quantization.gradient_format",
                                        "quantization.weight_format"}));

    report_options o;
    o.out_dir = tmp.path() / "report";
    o.figures = false;
    write_report(runs, o);
    const std::string md = read(o.out_dir / "report.md");
    EXPECT_CONTAINS(
        md, "4 runs of 3 configs: 3 finished, 0 collapsed, 0 stopped by an error or a crash, 1 interrupted");
    EXPECT_CONTAINS(md, "Baseline: `bf16_baseline` (1 run).");
    EXPECT_CONTAINS(md,
                    "| group | quantization.activation_format | quantization.gradient_format | "
                    "quantization.weight_format | formats | seeds | n |");
    // 95% CI of two runs: 2.6 ± t(0.975, 1) 0.1414/sqrt(2) = 2.6 ± 1.2706 (t from the published
    // table: 12.7062). One baseline run: no spread, no Welch test.
    EXPECT_CONTAINS(md,
                    "| e5m2_short | e5m2 | e5m2 | e5m2 | e5m2 | 1, 2 | 2 | 2.6000 | 0.1414 | "
                    "1.3294 – 3.8706 | +0.2000 (+8.3%) | — | — | — | 0/2 (0%) |  |");
    EXPECT_CONTAINS(
        md,
        "| bf16_baseline | bf16 | bf16 | bf16 | bf16 | 42 | 1 | 2.4000 | — | — | baseline | — | — | — | "
        "0/1 (0%) |  |");
    EXPECT_CONTAINS(md,
                    "| e3m4_uniform | e3m4 | e3m4 | e3m4 | e3m4 | 42 | 0 | — | — | — | — | — | — | — | — | "
                    "1 interrupted |");
    EXPECT_CONTAINS(md, "No figures: not asked for (--no-figures).");
    // Every run has its row, and the notes name the run.
    for (const run_record& r : runs) EXPECT_CONTAINS(md, row_of(r).substr(0, 20));
    EXPECT_CONTAINS(md, "- `" + runs[3].dir.generic_string() + "`: no summary.json");
}

// summary.json with the corpus references a host now records.
fs::path with_corpus(const fs::path& run, const std::string& corpus_json) {
    std::string s = read(run / "summary.json");
    s.replace(s.find("\"switches\""), 0, "\"corpus\": " + corpus_json + ", ");
    write(run / "summary.json", s);
    return run;
}

TEST(ReportCorpus, TheNgramReferencesOncePerCorpus) {
    scratch tmp;
    const std::string fortunes = "{\"unigram_entropy\": 3.31487, \"bigram\": 2.61254, \"trigram\": 2.14119}";
    std::vector<run_record> runs = {
        read_run(with_corpus(finished_run(tmp.path(), "a", "e5m2_short", "e5m2", 1, 2.5), fortunes)),
        read_run(with_corpus(finished_run(tmp.path(), "b", "e5m2_short", "e5m2", 2, 2.7), fortunes)),
        read_run(finished_run(tmp.path(), "c", "bf16_baseline", "bf16", 42, 2.4)),  // an older host: none
    };
    EXPECT_EQ(runs[0].corpus.trigram, 2.14119);
    EXPECT_TRUE(std::isnan(runs[2].corpus.bigram));
    report_options o;
    o.out_dir = tmp.path() / "report";
    o.figures = false;
    write_report(runs, o);
    EXPECT_CONTAINS(
        read(o.out_dir / "report.md"),
        "Reference, the corpus without a model (docs/data.md, \"Reference losses\"): unigram entropy "
        "3.3149, held-out bigram 2.6125, trigram 2.1412 nats/char.\n");
    // Two corpora: one line each with its number of runs.
    runs.push_back(read_run(with_corpus(finished_run(tmp.path(), "d", "e5m2_short", "e5m2", 3, 2.6),
                                        "{\"unigram_entropy\": 1, \"bigram\": 0.5, \"trigram\": null}")));
    write_report(runs, o);
    const std::string md = read(o.out_dir / "report.md");
    EXPECT_CONTAINS(md, "the runs used 2 different corpora or splits:\n\n");
    EXPECT_CONTAINS(md,
                    "- unigram entropy 3.3149, held-out bigram 2.6125, trigram 2.1412 nats/char (2 runs)\n");
    EXPECT_CONTAINS(md, "- unigram entropy 1.0000, held-out bigram 0.5000, trigram nan nats/char (1 run)\n");
}

// A config.toml with one more key in [training].
fs::path with_training_key(const fs::path& run, const std::string& key_line) {
    std::string c = read(run / "config.toml");
    c.replace(c.find("warmup_steps = 0\n"), 17, "warmup_steps = 0\n" + key_line + "\n");
    write(run / "config.toml", c);
    return run;
}

TEST(ReportGroups, RunsThatDifferInMoreThanTheSeedAreNeverAveraged) {
    scratch tmp;
    // One config name, two learning rates (the issue's "3.1173 ± 0.1742 (n=2)"), and the seeds of the
    // first under another name (as a sweep names its points): grouped by what they train, not by name.
    std::vector<run_record> runs = {
        read_run(with_training_key(finished_run(tmp.path(), "a", "lr_test", "e5m2", 1, 3.0),
                                   "learning_rate = 0.001")),
        read_run(with_training_key(finished_run(tmp.path(), "b", "lr_test", "e5m2", 1, 3.2),
                                   "learning_rate = 0.003")),
        read_run(with_training_key(finished_run(tmp.path(), "c", "lr_test-s2", "e5m2", 2, 3.1),
                                   "learning_rate = 0.001")),
        read_run(with_training_key(finished_run(tmp.path(), "d", "lr_test", "e5m2", 3, 2.9), "threads = 1")),
    };
    // A run without config.toml: grouped by its name alone, apart, and no column for what it cannot say.
    const fs::path unknown = finished_run(tmp.path(), "e", "lr_test", "e5m2", 4, 2.8);
    fs::remove(unknown / "config.toml");
    runs.push_back(read_run(unknown));
    const std::vector<group_summary> groups = group_runs(runs);
    ASSERT_EQ(groups.size(), 4u);
    EXPECT_TRUE(groups[3].settings.empty());
    EXPECT_EQ(groups[3].label, "lr_test (config unknown)");
    EXPECT_EQ(groups[0].name, "lr_test, lr_test-s2");
    EXPECT_EQ(groups[0].runs.size(), 2u);
    EXPECT_NEAR(groups[0].val.mean, 3.05, 1e-12);
    // Groups that share a name are labelled by what tells them apart (the rate, shortest decimal).
    EXPECT_EQ(groups[1].label, "lr_test [learning_rate=0.003]");
    EXPECT_EQ(groups[1].runs.size(), 1u);
    // training.threads does not change the experiment: the last run is apart by its (default) rate alone.
    EXPECT_EQ(groups[2].label, "lr_test [learning_rate=0.0006]");
    EXPECT_EQ(varying_settings(groups), std::vector<std::string>{"training.learning_rate"});
}

TEST(ReportGroups, ASweepsNamedPointIsItsGroupsLabel) {
    scratch tmp;
    // Run ids as a sweep writes them (sweep_file.cpp's run_name): "<config>-s<seed>" for the config as it
    // is, "<config>-<point name>-s<seed>" for a named [[point]], "<config>-<key>=<value>-s<seed>" for an
    // unnamed one. The ids come from summary.json: published runs keep no metrics.jsonl.
    auto run = [&](const std::string& id, int seed, const std::string& rate) {
        const fs::path d = with_training_key(
            finished_run(tmp.path(), id, "nvfp4", "e2m1", seed, 2.0 + seed / 8.0), "learning_rate = " + rate);
        fs::remove(d / "metrics.jsonl");
        std::string s = read(d / "summary.json");
        s.replace(s.find('{'), 1, "{\"run_id\": \"" + id + "\",");
        write(d / "summary.json", s);
        return read_run(d);
    };
    const std::vector<run_record> runs = {
        run("nvfp4-s1", 1, "0.001"),
        run("nvfp4-s2", 2, "0.001"),
        run("nvfp4-no_rht-s1", 1, "0.003"),
        run("nvfp4-no_rht-s2", 2, "0.003"),
        run("nvfp4-learning_rate=0.01-s1", 1, "0.01"),
        // Ids that disagree within a group, or that end in another seed, name nothing.
        run("nvfp4-fast-s1", 1, "0.02"),
        run("nvfp4-faster-s2", 2, "0.02"),
        run("nvfp4-slow-s9", 1, "0.0001"),
    };
    EXPECT_EQ(runs[2].run_id, "nvfp4-no_rht-s1");
    const std::vector<group_summary> groups = group_runs(runs);
    ASSERT_EQ(groups.size(), 5u);
    std::set<std::string> labels;
    for (const group_summary& g : groups) labels.insert(g.label);
    EXPECT_EQ(labels, (std::set<std::string>{"nvfp4 [learning_rate=0.001]", "nvfp4-no_rht",
                                             "nvfp4 [learning_rate=0.01]", "nvfp4 [learning_rate=0.02]",
                                             "nvfp4 [learning_rate=0.0001]"}));
    // The recipe beside its named ablations alone: its name says what it is.
    const std::vector<run_record> four(runs.begin(), runs.begin() + 4);
    const std::vector<group_summary> recipe_and_ablation = group_runs(four);
    ASSERT_EQ(recipe_and_ablation.size(), 2u);
    EXPECT_EQ(recipe_and_ablation[0].label, "nvfp4");
    EXPECT_EQ(recipe_and_ablation[1].label, "nvfp4-no_rht");
}

TEST(ReportGroups, EachGroupIsComparedWithTheBaselineThatSharesItsSettings) {
    scratch tmp;
    // BF16 and E5M2, each at two learning rates (as a study of scaling x master weights has a BF16 group
    // per condition): E5M2 at 0.01 is compared with BF16 at 0.01, not with the first BF16 group.
    auto at_rate = [&](const std::string& dir, const std::string& name, const std::string& format, int seed,
                       double loss, const std::string& rate) {
        return read_run(with_training_key(finished_run(tmp.path(), dir, name, format, seed, loss),
                                          "learning_rate = " + rate));
    };
    std::vector<run_record> runs = {
        at_rate("b-slow-1", "bf16_baseline", "bf16", 1, 2.4, "0.001"),
        at_rate("b-slow-2", "bf16_baseline", "bf16", 2, 2.5, "0.001"),
        at_rate("b-fast-1", "bf16_baseline", "bf16", 1, 3.0, "0.01"),
        at_rate("b-fast-2", "bf16_baseline", "bf16", 2, 3.2, "0.01"),
        at_rate("e-fast-1", "e5m2_short", "e5m2", 1, 3.3, "0.01"),
        at_rate("e-fast-2", "e5m2_short", "e5m2", 2, 3.5, "0.01"),
        at_rate("e-slow-1", "e5m2_short", "e5m2", 1, 2.5, "0.001"),
        at_rate("e-slow-2", "e5m2_short", "e5m2", 2, 2.6, "0.001"),
    };
    const std::vector<group_summary> groups = group_runs(runs);
    ASSERT_EQ(groups.size(), 4u);
    EXPECT_EQ(groups[0].label, "bf16_baseline [learning_rate=0.001]");
    EXPECT_EQ(groups[2].label, "e5m2_short [learning_rate=0.01]");
    EXPECT_TRUE(groups[0].baseline && groups[1].baseline);
    EXPECT_EQ(groups[2].compared_with, 1u);
    EXPECT_EQ(groups[3].compared_with, 0u);
    // {3.3, 3.5} against {3.0, 3.2}: +0.3; both sd 0.1414, se = sqrt(0.02/2 + 0.02/2) = 0.1414, t = 2.1213
    // with Welch's df = 0.02^2 / (2 * 0.01^2) = 2, where the two-sided p is 1 - t / sqrt(2 + t^2) = 0.168.
    EXPECT_NEAR(groups[2].vs_baseline.difference, 0.3, 1e-12);
    EXPECT_NEAR(groups[2].vs_baseline.p, 1 - 2.1213203435596424 / std::sqrt(2 + 4.5), 1e-9);
    EXPECT_NEAR(groups[3].vs_baseline.difference, 0.1, 1e-12);

    report_options o;
    o.out_dir = tmp.path() / "report";
    o.figures = false;
    write_report(runs, o);
    const std::string md = read(o.out_dir / "report.md");
    EXPECT_CONTAINS(md,
                    "Baselines: the 2 groups of `bf16_baseline` (`bf16_baseline [learning_rate=0.001]`, "
                    "`bf16_baseline [learning_rate=0.01]`)");
    EXPECT_CONTAINS(md, "| 95% CI | baseline | vs baseline |");
    // 0.3 / 3.1 = 9.68%.
    // Seeds 1 and 2 on both sides: 3.3 - 3.0 and 3.5 - 3.2, both +0.3, no spread: no paired p.
    EXPECT_CONTAINS(md,
                    "| bf16_baseline [learning_rate=0.01] | +0.3000 (+9.7%) | 0.168 | "
                    "+0.3000 (+0.3000 – +0.3000), n=2 | — | 0/2 (0%) |");
    EXPECT_CONTAINS(md, "| bf16_baseline [learning_rate=0.001] | +0.1000 (+4.1%) |");
    EXPECT_CONTAINS(md, "| 2 | 3.1000 | 0.1414 | 1.8294 – 4.3706 | — | baseline | — |");
    const std::string csv = read(o.out_dir / "runs.csv");
    EXPECT_CONTAINS(csv,
                    ",0.01,e5m2,e5m2,finished,none,,500,500,2.5,3.3,3.3,false,bf16_baseline "
                    "[learning_rate=0.01],40.1,38.5\n");
    EXPECT_CONTAINS(csv, ",0.01,bf16,bf16,finished,none,,500,500,2.5,3,3,true,,40.1,38.5\n");
}

// A diagnostic's value on one tensor ("*": all) at one step.
std::string diagnostic_value(int64_t step, const std::string& diagnostic, const std::string& tensor,
                             const std::string& value, double x) {
    return "{\"kind\": \"diagnostic\", \"step\": " + std::to_string(step) + ", \"diagnostic\": \"" +
           diagnostic + "\", \"tensor\": \"" + tensor + "\", \"role\": \"activation\", \"values\": {\"" +
           value + "\": " + num(x) + "}}\n";
}

altgrad::host::run::metric headline(const std::string& diagnostic, const std::string& value,
                                    altgrad::host::run::tensor_summary summary) {
    altgrad::host::run::metric m;
    m.name = m.summary_of = value;
    m.record = altgrad::host::run::metric_record::diagnostic;
    m.source = diagnostic;
    m.series = diagnostic + "." + value;
    m.title = diagnostic + " " + value + " of the test";
    m.label = value;
    m.summary = summary;
    return m;
}

// The report shows whatever the diagnostics that ran declared (catalog.json),
// each summarised over tensors by its own rule, and every value of a
// diagnostic that declared nothing (here: a run of a host before catalog.json).
TEST(ReportSeries, DeclaredHeadlinesAndUndeclaredDiagnosticsAreShown) {
    using altgrad::host::run::tensor_summary;
    scratch tmp;
    const std::string declared = diagnostic_value(250, "kurtosis", "a", "kurtosis", 3) +
                                 diagnostic_value(250, "kurtosis", "b", "kurtosis", 9) +
                                 diagnostic_value(250, "grid_alignment", "a", "mse", 0.01) +
                                 diagnostic_value(250, "grid_alignment", "b", "mse", 0.03) +
                                 diagnostic_value(500, "grid_alignment", "*", "mse", 0.5) +
                                 diagnostic_value(500, "grid_alignment", "b", "mse", 0.03);
    const fs::path a = finished_run(tmp.path(), "declared", "e5m2_short", "e5m2", 1, 2.5, declared);
    write_catalog(a, {stiffness_headline(), headline("kurtosis", "kurtosis", tensor_summary::max),
                      headline("grid_alignment", "mse", tensor_summary::mean)});
    const fs::path b = finished_run(tmp.path(), "old", "bf16_baseline", "bf16", 1, 2.4,
                                    diagnostic_value(250, "range", "a", "dynamic_range", 10) +
                                        diagnostic_value(250, "range", "b", "dynamic_range", 14));
    fs::remove(b / "catalog.json");
    const std::vector<run_record> runs = {read_run(a), read_run(b)};
    // kurtosis: max over tensors; mse: the mean, and the all-tensor value where written.
    EXPECT_EQ(runs[0].series_points("kurtosis.kurtosis"), (std::vector<point>{{250, 9}}));
    EXPECT_EQ(runs[0].series_points("grid_alignment.mse"), (std::vector<point>{{250, 0.02}, {500, 0.5}}));
    EXPECT_EQ(runs[0].series_points("stiffness"), (std::vector<point>{{250, 0.01}, {500, 0.008}}));
    // Undeclared: each value, the mean over tensors, named by plugin and value.
    EXPECT_EQ(runs[1].series_points("range.dynamic_range"), (std::vector<point>{{250, 12}}));
    EXPECT_EQ(runs[1].series_points("stiffness.stiffness_max"), (std::vector<point>{{250, 1}, {500, 1}}));
    EXPECT_TRUE(runs[1].series_points("stiffness").empty());

    report_options o;
    o.out_dir = tmp.path() / "report";
    o.figures = false;
    write_report(runs, o);
    const std::string steps = read(o.out_dir / "steps.csv");
    EXPECT_EQ(
        steps.substr(0, steps.find('\n')),
        "run,group,step,train_loss,val_loss,bit_stall,overflow,underflow,grad_sparsity,grid_alignment.mse,"
        "kurtosis.kurtosis,range.dynamic_range,stiffness,stiffness.stiffness_max,stiffness.stiffness_mean");
    EXPECT_CONTAINS(steps, a.generic_string() + ",e5m2_short,250,,3,0.25,,,,0.02,9,,0.01,,\n");
    EXPECT_CONTAINS(steps, b.generic_string() + ",bf16_baseline,250,,2.9,0.25,,,,,,12,,1,0.01\n");
}

TEST(ReportTables, OneRowPerRunAndOnePerRunPerStep) {
    scratch tmp;
    // A folder name a CSV must quote: a comma and a quote.
    std::vector<run_record> runs = {
        read_run(finished_run(tmp.path(), "e5m2,\"s1\"", "e5m2_short", "e5m2", 1, 2.5)),
        read_run(finished_run(tmp.path(), "bf16", "bf16_baseline", "bf16", 42, 2.4)),
        read_run(interrupted_run(tmp.path())),
    };
    report_options o;
    o.out_dir = tmp.path() / "report";
    o.figures = false;
    write_report(runs, o);
    EXPECT_CONTAINS(read(o.out_dir / "report.md"), "[`runs.csv`](runs.csv)");
    std::istringstream csv(read(o.out_dir / "runs.csv"));
    std::vector<std::string> lines;
    for (std::string line; std::getline(csv, line);) lines.push_back(line);
    ASSERT_EQ(lines.size(), 4u);
    EXPECT_EQ(lines[0],
              "run,run_id,group,config,seed,quantization.activation_format,quantization.gradient_format,"
              "quantization.weight_format,formats,uniform_format,status,failure_mode,failure_step,steps_done,"
              "max_steps,final_train_loss,final_val_loss,best_val_loss,baseline,baseline_group,seconds,cpu_"
              "seconds");
    const std::string quoted = "\"" + (tmp.path() / "e5m2,\"\"s1\"\"").generic_string() + "\"";
    EXPECT_EQ(lines[1], quoted +
                            ",,e5m2_short,e5m2_short,1,e5m2,e5m2,e5m2,e5m2,e5m2,finished,none,,500,500,2.5,2."
                            "5,2.5,false,bf16_baseline,40.1,38.5");
    EXPECT_EQ(
        lines[3],
        (tmp.path() / "e3m4-killed").generic_string() +
            ",,e3m4_uniform,e3m4_uniform,42,e3m4,e3m4,e3m4,e3m4,e3m4,interrupted,,,30,500,3.7,3.9,3.9,false,"
            "bf16_baseline,,");  // no summary.json: no times
    // steps.csv: the run's logged steps in order, each value in its column, the rest empty. The fixture's
    // loss at step s is 4 - s/250; bit stall 25% at 250, 12.5% at 500; overflow from the per-step lines.
    const std::string steps = read(o.out_dir / "steps.csv");
    EXPECT_EQ(steps.substr(0, steps.find('\n')),
              "run,group,step,train_loss,val_loss,bit_stall,overflow,underflow,grad_sparsity,stiffness");
    const std::string bf16 = (tmp.path() / "bf16").generic_string() + ",bf16_baseline,";
    EXPECT_CONTAINS(steps, bf16 + "0,,4.7,,,,,\n" + bf16 + "1,3.996,,,0,0.02,0.01,\n");
    EXPECT_CONTAINS(steps, bf16 + "250,,2.9,0.25,,,,0.01\n");
    EXPECT_CONTAINS(steps, bf16 + "500,2.5,2.4,0.125,0,0.02,0.01,0.008\n");
}

// t(0.975, df): the published 3-decimal table (NIST/SEMATECH e-Handbook of Statistical Methods, 1.3.6.7.2)
// and 15 digits from mpmath at 40 digits (findroot of betainc(df/2, 1/2, 0, df/(df+t^2))/2 = 0.025; scipy
// 1.10's t.ppf is off by up to 1e-9 here). The quantiles are computed, not looked up.
TEST(ReportStats, StudentTQuantilesMatchPublishedValues) {
    struct row {
        double df, nist, exact;
    };
    const std::vector<row> table = {
        {1, 12.706, 12.7062047361747},   {2, 4.303, 4.30265272974946},       {3, 3.182, 3.18244630528371},
        {4, 2.776, 2.77644510519779},    {5, 2.571, 2.57058183563632},       {10, 2.228, 2.22813885198627},
        {20, 2.086, 2.08596344726586},   {30, 2.042, 2.04227245630124},      {100, 1.984, 1.98397151852355},
        {1000, 1.962, 1.96233908082641}, {INFINITY, 1.960, 1.95996398454005}};
    for (const row& r : table) {
        const double t = student_t_quantile(0.975, r.df);
        EXPECT_NEAR(t, r.nist, 0.0005) << "df " << r.df;
        EXPECT_NEAR(t, r.exact, 2e-13 * r.exact) << "df " << r.df;
        EXPECT_NEAR(student_t_quantile(0.025, r.df), -r.exact, 2e-13 * r.exact) << "df " << r.df;
    }
    // Closed forms: df 1 is the Cauchy, t = tan(pi (p - 1/2)); df 2: t = (2p - 1) / sqrt(2 p (1 - p)).
    for (const double p : {0.6, 0.9, 0.995, 0.9999}) {
        EXPECT_NEAR(student_t_quantile(p, 1), std::tan(M_PI * (p - 0.5)), 1e-9 * std::tan(M_PI * (p - 0.5)));
        EXPECT_NEAR(student_t_quantile(p, 2), (2 * p - 1) / std::sqrt(2 * p * (1 - p)), 1e-10);
    }
}

TEST(ReportStats, MeanSdAndConfidenceInterval) {
    const sample_summary s = summarize({1, 2, 3});
    EXPECT_EQ(s.n, 3u);
    EXPECT_DOUBLE_EQ(s.mean, 2);
    EXPECT_DOUBLE_EQ(s.sd, 1);
    // 2 ± t(0.975, 2) / sqrt(3), t(0.975, 2) = 4.30265272975 (published).
    EXPECT_NEAR(s.ci_low, 2 - 4.30265272975 / std::sqrt(3.0), 1e-10);
    EXPECT_NEAR(s.ci_high, 2 + 4.30265272975 / std::sqrt(3.0), 1e-10);
    EXPECT_TRUE(std::isnan(summarize({5}).sd));
}

TEST(ReportStats, WelchTestByHand) {
    // a = {1, 3}, b = {4, 6}: variances 2 and 2, se = sqrt(2/2 + 2/2) = sqrt(2), t = -3/sqrt(2),
    // df = (1 + 1)^2 / (1/1 + 1/1) = 2; for df 2, P(|T| > t) = 1 - t/sqrt(2 + t^2) = 1 - 3/sqrt(13).
    welch_result w = welch_test({1, 3}, {4, 6});
    EXPECT_DOUBLE_EQ(w.difference, -3);
    EXPECT_NEAR(w.t, -3 / std::sqrt(2.0), 1e-14);
    EXPECT_NEAR(w.df, 2, 1e-12);
    EXPECT_NEAR(w.p, 1 - 3 / std::sqrt(13.0), 1e-13);
    // The 95% interval: -3 ± t(0.975, 2) sqrt(2), with t(0.975, 2) = 0.95 sqrt(2 / (1 - 0.95^2)) = 4.3027
    // (the closed-form quantile for df 2; the published table's 4.303).
    const double t2 = 0.95 * std::sqrt(2 / (1 - 0.95 * 0.95));
    EXPECT_NEAR(w.ci_low, -3 - t2 * std::sqrt(2.0), 1e-9);
    EXPECT_NEAR(w.ci_high, -3 + t2 * std::sqrt(2.0), 1e-9);
    // {1,2,3} vs {4,5,6}: t = -3/sqrt(2/3), df 4; for df 4, with sin^2 = t^2/(4 + t^2):
    // P(|T| > t) = 1 - sin (1 + cos^2 / 2).
    w = welch_test({1, 2, 3}, {4, 5, 6});
    EXPECT_NEAR(w.df, 4, 1e-12);
    const double sin2 = 13.5 / 17.5, sin = std::sqrt(sin2);
    EXPECT_NEAR(w.p, 1 - sin * (1 + (1 - sin2) / 2), 1e-13);
    // Unequal sizes and spreads (fractional df), against scipy 1.10's
    // ttest_ind(a, b, equal_var=False): statistic -1.9262462746037203, pvalue 0.14215549213464923.
    w = welch_test({2.54, 2.57, 2.55, 2.60}, {2.58, 2.61, 2.66});
    EXPECT_NEAR(w.t, -1.9262462746037203, 1e-12);
    EXPECT_NEAR(w.p, 0.14215549213464923, 1e-12);
    EXPECT_TRUE(std::isnan(welch_test({1}, {2, 3}).p));
    EXPECT_TRUE(std::isnan(welch_test({1}, {2, 3}).ci_low));
}

TEST(ReportStats, PairedTestByHand) {
    // d = {0.1, 0.2, 0.3}: mean 0.2, sd 0.1, se = 0.1/sqrt(3), t = 2 sqrt(3) = 3.4641 with 2 degrees of
    // freedom, where P(|T| > t) = 1 - t/sqrt(2 + t^2) = 1 - sqrt(12/14); the interval 0.2 ± 4.302653 se.
    paired_result r = paired_test({0.1, 0.2, 0.3});
    EXPECT_EQ(r.d.n, 3u);
    EXPECT_NEAR(r.d.mean, 0.2, 1e-15);
    EXPECT_NEAR(r.t, 2 * std::sqrt(3.0), 1e-12);
    EXPECT_NEAR(r.p, 1 - std::sqrt(12.0 / 14.0), 1e-12);
    EXPECT_NEAR(r.d.ci_low, 0.2 - 4.30265272974946 * 0.1 / std::sqrt(3.0), 1e-12);
    // d = {0.3, 0.4}: t = 0.35 / (0.0707107 / sqrt(2)) = 7 with 1 degree of freedom (Cauchy):
    // P(|T| > 7) = 1 - 2 atan(7) / pi.
    r = paired_test({0.3, 0.4});
    EXPECT_NEAR(r.t, 7, 1e-12);
    EXPECT_NEAR(r.p, 1 - 2 * std::atan(7.0) / M_PI, 1e-12);
    // One pair, or no spread: no test.
    EXPECT_TRUE(std::isnan(paired_test({0.5}).p));
    EXPECT_TRUE(std::isnan(paired_test({0.25, 0.25}).p));
    EXPECT_EQ(paired_test({}).d.n, 0u);
}

TEST(ReportStats, ClopperPearsonInterval) {
    // k = n: [(alpha/2)^(1/n), 1]; k = 0: [0, 1 - (alpha/2)^(1/n)] (closed forms).
    for (const size_t n : {1u, 3u, 10u, 36u}) {
        EXPECT_NEAR(clopper_pearson(n, n).low, std::pow(0.025, 1.0 / static_cast<double>(n)), 1e-13);
        EXPECT_EQ(clopper_pearson(n, n).high, 1);
        EXPECT_EQ(clopper_pearson(0, n).low, 0);
        EXPECT_NEAR(clopper_pearson(0, n).high, 1 - std::pow(0.025, 1.0 / static_cast<double>(n)), 1e-13);
    }
    // 2 of 5, against scipy 1.10: beta.ppf(0.025, 2, 4), beta.ppf(0.975, 3, 3).
    EXPECT_NEAR(clopper_pearson(2, 5).low, 0.052744950526316906, 1e-12);
    EXPECT_NEAR(clopper_pearson(2, 5).high, 0.8533672003653268, 1e-12);
}

TEST(ReportGroups, NoBaselineIsSaid) {
    scratch tmp;
    std::vector<run_record> runs = {read_run(finished_run(tmp.path(), "a", "e5m2_short", "e5m2", 1, 2.5))};
    report_options o;
    o.out_dir = tmp.path() / "report";
    o.figures = false;
    write_report(runs, o);
    EXPECT_CONTAINS(read(o.out_dir / "report.md"), "No BF16 baseline among these runs");
}

// The seeds' hypotheses, as the report reads them by default.
const std::vector<hypothesis>& seeds() {
    static const hypotheses h = load_hypotheses(ALTGRAD_SEED_HYPOTHESES);
    return h.items;
}

const hypothesis_verdict& verdict_of(const std::vector<hypothesis_verdict>& v, const std::string& format,
                                     const std::string& words, const std::string& group = "") {
    for (const hypothesis_verdict& h : v)
        if (h.format == format && h.hypothesis.find(words) != std::string::npos &&
            (group.empty() || h.group == group))
            return h;
    static const hypothesis_verdict none{};
    ADD_FAILURE() << "no hypothesis " << format << " / " << words << " / " << group;
    return none;
}

// `n` finished runs of `format` in one group (seeds 1..n) in root/dir-<seed>, the first `collapsed` of
// them collapsed by `mode` at step 10; `extra` are metrics lines for the first run.
std::vector<run_record> seeds_of(const fs::path& root, const std::string& dir, const std::string& format,
                                 int n, int collapsed = 0, const std::string& mode = "nan_loss",
                                 const std::string& extra = "") {
    std::vector<run_record> out;
    for (int s = 1; s <= n; ++s) {
        const fs::path d = finished_run(root, dir + "-" + std::to_string(s), format + "_uniform", format, s,
                                        3.0, s == 1 ? extra : "");
        if (s <= collapsed)
            write(d / "summary.json",
                  summary_json(format + "_uniform", "collapsed", mode, "10", 10, 500, s, NAN, 4.0, format));
        out.push_back(read_run(d));
    }
    return out;
}

std::vector<run_record> joined(std::vector<std::vector<run_record>> parts) {
    std::vector<run_record> out;
    for (auto& p : parts)
        for (auto& r : p) out.push_back(std::move(r));
    return out;
}

TEST(ReportHypotheses, AVerdictNeedsThreeRunsPerGroup) {
    scratch tmp;
    const auto v = judge_hypotheses(seeds_of(tmp.path(), "e7m0", "e7m0", 2, 2), seeds());
    const hypothesis_verdict& e7 = verdict_of(v, "E7M0", "more than 90%");
    EXPECT_EQ(e7.verdict, "not enough runs (n=2)");
    EXPECT_EQ(e7.observed, "2/2 (100.0%) runs failed: nan_loss at step 10, nan_loss at step 10");
    EXPECT_EQ(e7.group, "e7m0_uniform");
}

TEST(ReportHypotheses, RatesAreJudgedByTheirExactInterval) {
    scratch tmp;
    // 3 of 3 failed: the interval [0.025^(1/3), 1] = [29.2%, 100%] crosses "more than 90%".
    auto v = judge_hypotheses(seeds_of(tmp.path(), "all", "e7m0", 3, 3), seeds());
    EXPECT_EQ(verdict_of(v, "E7M0", "more than 90%").verdict, "inconclusive");
    EXPECT_CONTAINS(
        verdict_of(v, "E7M0", "more than 90%").observed,
        "3/3 (100.0%) runs failed: nan_loss at step 10, nan_loss at step 10, nan_loss at step 10; "
        "exact 95% interval of the rate 29.2%–100.0%");
    // 0 of 3: [0, 70.8%] lies below 90%.
    v = judge_hypotheses(seeds_of(tmp.path(), "none", "e7m0", 3, 0), seeds());
    EXPECT_EQ(verdict_of(v, "E7M0", "more than 90%").verdict, "contradicted");
    EXPECT_CONTAINS(verdict_of(v, "E7M0", "more than 90%").observed,
                    "0/3 (0%) runs failed; exact 95% interval of the rate 0%–70.8%");
    // ... and within "at most 90%".
    hypothesis at_most;
    at_most.format = "e7m0";
    at_most.claim = "fails in at most 90% of runs";
    at_most.at_most = 0.9;
    EXPECT_EQ(judge_hypotheses(seeds_of(tmp.path(), "none2", "e7m0", 3, 0), {at_most})[0].verdict,
              "supported");
    // 36 of 36: 0.025^(1/36) = 90.3% > 90%.
    v = judge_hypotheses(seeds_of(tmp.path(), "many", "e7m0", 36, 36), seeds());
    EXPECT_EQ(verdict_of(v, "E7M0", "more than 90%").verdict, "supported");
    EXPECT_CONTAINS(verdict_of(v, "E7M0", "more than 90%").observed, "interval of the rate 90.3%–100.0%");
    // 2 of 5 against 40-60%: [5.3%, 85.3%] crosses both bounds.
    v = judge_hypotheses(seeds_of(tmp.path(), "e0m7", "e0m7", 5, 2, "overflow"), seeds());
    EXPECT_EQ(verdict_of(v, "E0M7", "40–60%").verdict, "inconclusive");
    EXPECT_CONTAINS(verdict_of(v, "E0M7", "40–60%").observed, "interval of the rate 5.3%–85.3%");
    EXPECT_EQ(verdict_of(v, "E0M7", "unnormalised").verdict, "supported");
}

TEST(ReportHypotheses, JudgedPerGroupFromTheRuns) {
    scratch tmp;
    // E5M2 at two learning rates: two groups, judged apart; the second has an overflow collapse.
    std::vector<run_record> other_rate = seeds_of(tmp.path(), "e5m2-fast", "e5m2", 3, 1, "overflow");
    for (run_record& r : other_rate) r = read_run(with_training_key(r.dir, "learning_rate = 0.01"));
    std::vector<run_record> runs = joined({
        seeds_of(tmp.path(), "e5m2", "e5m2", 3),
        other_rate,
        seeds_of(tmp.path(), "e1m6", "e1m6", 3, 0, "",
                 diag_overflow(50, "blocks.2.mlp.proj.output_grad", "output_gradient", "e1m6", 200) +
                     diag_overflow(50, "blocks.0.mlp.fc.input", "activation", "e1m6", 900)),
        {read_run(interrupted_run(tmp.path()))},
    });
    const auto v = judge_hypotheses(runs, seeds());
    const hypothesis_verdict& e1 = verdict_of(v, "E1M6", "large gradients");
    EXPECT_EQ(e1.verdict, "supported");
    // The activation's 90% does not count for a hypothesis about gradients.
    EXPECT_CONTAINS(e1.observed, "largest output_gradient tensor overflow rate 20.0% (");
    EXPECT_CONTAINS(e1.observed, "blocks.2.mlp.proj.output_grad, step 50); overflow failures 0/3 (0%)");
    const hypothesis_verdict& e3 = verdict_of(v, "E3M4", "bit_stall");
    EXPECT_EQ(e3.verdict, "not tested by these runs");
    EXPECT_EQ(e3.observed, "1 run(s), none finished or collapsed (interrupted, errored or crashed)");
    EXPECT_EQ(verdict_of(v, "E0M7", "40–60%").verdict, "not tested by these runs");
    EXPECT_EQ(verdict_of(v, "E0M7", "40–60%").observed, "no run with E0M7 for every tensor");
    // 0 of 3 bit-stall failures: [0, 70.8%] crosses "at most half".
    const hypothesis_verdict& slow =
        verdict_of(v, "E5M2", "bit_stall", "e5m2_uniform [learning_rate=0.0006]");
    EXPECT_EQ(slow.verdict, "inconclusive");
    EXPECT_CONTAINS(slow.observed, "0/3 (0%) runs failed; largest bit-stall rate 25.0% (");
    // A failure of another mode contradicts "fail only by bit-stall".
    const hypothesis_verdict& fast = verdict_of(v, "E5M2", "bit_stall", "e5m2_uniform [learning_rate=0.01]");
    EXPECT_EQ(fast.verdict, "contradicted");
    EXPECT_CONTAINS(fast.observed, "1/3 (33.3%) runs failed: overflow at step 10");
}

// ---- Figures ------------------------------------------------------------------

// scripts/setup.sh installs gnuplot-nox: without it these fail, never skip.

// The k-th line's style: 8 colours, then the same colours dashed, dotted, ... (gnuplot dash types 1-5).
TEST(ReportFigures, LinesBeyondEightTakeTheColoursAgainWithAnotherDash) {
    EXPECT_EQ(std::make_pair(line_color(0), line_dash(0)), std::make_pair(1, 1));
    EXPECT_EQ(std::make_pair(line_color(7), line_dash(7)), std::make_pair(8, 1));
    EXPECT_EQ(std::make_pair(line_color(8), line_dash(8)), std::make_pair(1, 2));
    EXPECT_EQ(std::make_pair(line_color(16), line_dash(16)), std::make_pair(1, 3));  // the 17th layer
    EXPECT_EQ(std::make_pair(line_color(40), line_dash(40)), std::make_pair(1, 1));  // after 5 x 8 styles
}

// A study of 28 groups drew its key over the plot at 540 pixels: the figure grows with its key.
TEST(ReportFigures, AFigureOfManyGroupsGrowsWithItsKey) {
    EXPECT_EQ(figure_height(0), 540);
    EXPECT_EQ(figure_height(8), 540);
    EXPECT_EQ(figure_height(9), 560);   // 380 + 9 lines of 20 pixels
    EXPECT_EQ(figure_height(28), 940);  // the seeds study: 28 groups
    EXPECT_EQ(figure_height(1000), 2400);
}

// Beyond 8 groups the colours repeat: the 9th group is drawn in the 1st group's colour, dashed.
TEST(ReportFigures, GroupsBeyondEightColoursAreDashed) {
    ASSERT_TRUE(std::system("gnuplot --version > /dev/null 2>&1") == 0)
        << "no gnuplot (scripts/setup.sh installs it)";
    scratch tmp;
    std::vector<run_record> runs;
    for (int k = 1; k <= 9; ++k)
        runs.push_back(read_run(with_training_key(
            finished_run(tmp.path(), "lr" + std::to_string(k), "lr_test", "e5m2", 1, 2.0 + 0.1 * k),
            "learning_rate = 0.00" + std::to_string(k))));
    report_options o;
    o.out_dir = tmp.path() / "out";
    write_report(runs, o);
    const std::string gp = read(o.out_dir / "figures" / "val_loss-all.gp");
    EXPECT_CONTAINS(gp, "lw 2 lc 1 title 'lr_test [learning_rate=0.001]'");
    EXPECT_CONTAINS(gp, "lw 2 lc 8 title 'lr_test [learning_rate=0.008]'");
    EXPECT_CONTAINS(gp, "lw 2 lc 1 dt 2 title 'lr_test [learning_rate=0.009]'");
    EXPECT_CONTAINS(gp, " size 960,560 noenhanced\n");  // 9 key entries
}

TEST(ReportFigures, DrawnWithGnuplotAndLinkedRelatively) {
    ASSERT_TRUE(have_gnuplot()) << "no gnuplot on PATH (scripts/setup.sh installs gnuplot-nox)";
    scratch tmp;
    std::vector<run_record> runs = {
        read_run(finished_run(tmp.path(), "e5m2-s1", "e5m2_short", "e5m2", 1, 2.5)),
        read_run(finished_run(tmp.path(), "bf16", "bf16_baseline", "bf16", 42, 2.4)),
        read_run(collapsed_run(tmp.path())),
    };
    report_options o;
    o.out_dir = tmp.path() / "out";
    const report_output out = write_report(runs, o);
    EXPECT_EQ(out.figures_missing, "");
    const std::string md = read(out.markdown);
    // The two forest plots, loss per config (3), validation loss of all, the five diagnostic series,
    // and per layer amax and scale of the two runs with tensor lines (weights only).
    EXPECT_EQ(out.figures, 15u) << md;
    for (const char* stem :
         {"diff-forest", "relative-forest", "loss-e5m2_short", "loss-bf16_baseline", "loss-e7m0_uniform",
          "val_loss-all", "diag-bit_stall", "diag-overflow", "diag-underflow", "diag-grad_sparsity",
          "diag-stiffness", "amax-e5m2_short-weight", "scale-e5m2_short-weight", "amax-bf16_baseline-weight",
          "scale-bf16_baseline-weight"}) {
        const std::string image = std::string(stem) + ".png";
        EXPECT_CONTAINS(md, "](figures/" + image + ")");
        EXPECT_GT(fs::file_size(o.out_dir / "figures" / image), 1000u) << image;
        EXPECT_TRUE(fs::exists(o.out_dir / "figures" / (std::string(stem) + ".gp"))) << stem;
        EXPECT_FALSE(fs::exists(o.out_dir / "figures" / (std::string(stem) + ".log"))) << stem;
    }
    EXPECT_TRUE(fs::exists(o.out_dir / "figures" / "data" / "loss-e5m2_short-0.dat"));
    // PNG magic.
    EXPECT_EQ(read(o.out_dir / "figures" / "loss-e5m2_short.png").substr(1, 3), "PNG");
}

// A tensor line of a block-scaled tensor (docs/training.md): scale null, and its blocks.
std::string block_tensor_line(int64_t step, const std::string& tensor, const std::string& role, double amax,
                              int blocks, int saturated, int underflowed, double smallest, double largest) {
    return "{\"step\": " + std::to_string(step) + ", \"tensor\": \"" + tensor + "\", \"role\": \"" + role +
           "\", \"format\": \"e4m3\", \"scale\": null, \"amax\": " + num(amax) +
           ", \"overflow\": 0, \"underflow\": 0, \"count\": 3200, \"blocks\": {\"blocks\": " +
           std::to_string(blocks) + ", \"saturated\": " + std::to_string(saturated) +
           ", \"underflowed\": " + std::to_string(underflowed) +
           ", \"neutral\": 0, \"smallest_scale\": " + num(smallest) + ", \"largest_scale\": " + num(largest) +
           "}}\n";
}

// Per layer: amax (and a per-tensor run's scale) over time, a line per layer
// and a figure per role; for a block-scaled run, the block statistics summed
// over each role's tensors. Expected values from the lines written here.
TEST(ReportFigures, PerLayerAmaxScaleAndBlockStatistics) {
    ASSERT_TRUE(have_gnuplot()) << "no gnuplot on PATH (scripts/setup.sh installs gnuplot-nox)";
    scratch tmp;
    const fs::path mx = tmp.path() / "mx";
    write(mx / "config.toml", config_toml("mx", "e4m3", 1, 20));
    write(mx / "metrics.jsonl",
          loss_line(10, 3.0) +
              block_tensor_line(10, "blocks.0.mlp.fc.weight", "weight", 0.5, 100, 2, 5, 0.001, 0.01) +
              block_tensor_line(10, "blocks.1.mlp.fc.weight", "weight", 0.25, 100, 0, 5, 0.0005, 0.02) +
              block_tensor_line(10, "blocks.0.mlp.fc.input", "activation", 3.0, 50, 0, 10, 0.002, 0.05) +
              loss_line(20, 2.5) +
              block_tensor_line(20, "blocks.0.mlp.fc.weight", "weight", 0.75, 100, 4, 1, 0.004, 0.01) +
              block_tensor_line(20, "blocks.1.mlp.fc.weight", "weight", 0.125, 100, 0, 3, 0.002, 0.008) +
              block_tensor_line(20, "blocks.0.mlp.fc.input", "activation", 6.0, 50, 1, 0, 0.001, 0.1) +
              val_line(20, 2.6));
    const fs::path pt = tmp.path() / "pt";
    write(pt / "config.toml", config_toml("pt", "e5m2", 1, 20));
    std::string m = loss_line(10, 3.0) + loss_line(20, 2.5) + val_line(20, 2.7);
    for (int64_t step : {10, 20})
        m += "{\"step\": " + std::to_string(step) +
             ", \"tensor\": \"lm_head.output_grad\", \"role\": \"output_gradient\", \"format\": \"e5m2\", "
             "\"scale\": " +
             (step == 10 ? "1024" : "2048") + ", \"amax\": " + (step == 10 ? "0.01" : "0.005") +
             ", \"overflow\": 0, \"underflow\": 0, \"count\": 100}\n";
    // A parameter's gradient as [quantization.communication] sent it: a line named by its parameter.
    for (int64_t step : {10, 20})
        m += "{\"step\": " + std::to_string(step) +
             ", \"tensor\": \"blocks.0.mlp.fc.weight.communication\", \"role\": \"weight_gradient\", "
             "\"format\": \"e5m2\", \"scale\": 65536, \"amax\": " +
             (step == 10 ? "0.02" : "0.04") + ", \"overflow\": 0, \"underflow\": 3, \"count\": 100}\n";
    write(pt / "metrics.jsonl", m);
    std::vector<run_record> runs = {read_run(mx), read_run(pt)};
    report_options o;
    o.out_dir = tmp.path() / "out";
    const report_output out = write_report(runs, o);
    const std::string md = read(out.markdown);
    EXPECT_EQ(out.figures_missing, "") << md;
    const fs::path fig = o.out_dir / "figures";
    for (const char* stem :
         {"amax-mx-weight", "amax-mx-activation", "blocks-mx", "block_scales-mx", "amax-pt-output_gradient",
          "scale-pt-output_gradient", "amax-pt-weight_gradient"}) {
        EXPECT_CONTAINS(md, std::string("](figures/") + stem + ".png)");
        EXPECT_TRUE(fs::exists(fig / (std::string(stem) + ".png"))) << stem;
    }
    // Block-scaled tensors have no one scale: no scale figure for mx.
    EXPECT_FALSE(fs::exists(fig / "scale-mx-weight.png"));
    // A line per layer, titled with the layer.
    EXPECT_EQ(read(fig / "data" / "amax-mx-weight-0.dat"), "# step\tblocks.0.mlp.fc\n10\t0.5\n20\t0.75\n");
    EXPECT_EQ(read(fig / "data" / "amax-mx-weight-1.dat"), "# step\tblocks.1.mlp.fc\n10\t0.25\n20\t0.125\n");
    // Each layer its own colour (and beyond 8 layers its own dash: line_color, line_dash).
    EXPECT_CONTAINS(read(fig / "amax-mx-weight.gp"),
                    "using 1:2 with lines lw 1.2 lc 1 title 'blocks.0.mlp.fc'");
    EXPECT_CONTAINS(read(fig / "amax-mx-weight.gp"),
                    "using 1:2 with lines lw 1.2 lc 2 title 'blocks.1.mlp.fc'");
    EXPECT_EQ(read(fig / "data" / "scale-pt-output_gradient-0.dat"), "# step\tlm_head\n10\t1024\n20\t2048\n");
    EXPECT_EQ(read(fig / "data" / "amax-pt-weight_gradient-0.dat"),
              "# step\tblocks.0.mlp.fc.weight\n10\t0.02\n20\t0.04\n");
    EXPECT_CONTAINS(read(fig / "amax-pt-weight_gradient.gp"), "gradients as sent of pt");
    // Weights: saturated (2+0)/200 then (4+0)/200, underflowed (5+5)/200 then (1+3)/200;
    // the activation's own 0/50, 1/50 and 10/50, 0/50.
    EXPECT_EQ(read(fig / "data" / "blocks-mx-0.dat"), "# step\tweight saturated\n10\t0.01\n20\t0.02\n");
    EXPECT_EQ(read(fig / "data" / "blocks-mx-1.dat"), "# step\tweight underflowed\n10\t0.05\n20\t0.02\n");
    EXPECT_EQ(read(fig / "data" / "blocks-mx-2.dat"), "# step\tactivation saturated\n10\t0\n20\t0.02\n");
    EXPECT_EQ(read(fig / "data" / "blocks-mx-3.dat"), "# step\tactivation underflowed\n10\t0.2\n20\t0\n");
    // Largest and smallest over the weights: max(0.01, 0.02), max(0.01, 0.008); min(0.001, 0.0005),
    // min(0.004, 0.002).
    EXPECT_EQ(read(fig / "data" / "block_scales-mx-0.dat"), "# step\tweight largest\n10\t0.02\n20\t0.01\n");
    EXPECT_EQ(read(fig / "data" / "block_scales-mx-1.dat"),
              "# step\tweight smallest\n10\t0.0005\n20\t0.002\n");
    EXPECT_CONTAINS(read(fig / "block_scales-mx.gp"), "set logscale y 2");
}

// A run directory from someone else is data, never code: a run name that
// ends the script's comment line or a string with a newline, or ends a
// comment with a backslash, must not reach gnuplot as a command.
TEST(ReportFigures, EachGroupOneColourWithABandForItsSeeds) {
    ASSERT_TRUE(have_gnuplot()) << "no gnuplot on PATH (scripts/setup.sh installs gnuplot-nox)";
    scratch tmp;
    std::vector<run_record> runs = {
        read_run(finished_run(tmp.path(), "e5m2-s1", "e5m2_short", "e5m2", 1, 2.5)),
        read_run(finished_run(tmp.path(), "bf16", "bf16_baseline", "bf16", 42, 2.4)),
        read_run(finished_run(tmp.path(), "e5m2-s2", "e5m2_short", "e5m2", 2, 2.7)),
    };
    report_options o;
    o.out_dir = tmp.path() / "out";
    const report_output out = write_report(runs, o);
    EXPECT_EQ(out.figures_missing, "") << read(out.markdown);
    const std::string gp = read(o.out_dir / "figures" / "val_loss-all.gp");
    // The e5m2 group (colour 1): the mean of its seeds, titled, and their band; the baseline group colour 2,
    // one run: its curve, no band.
    EXPECT_CONTAINS(
        gp, "'data/val_loss-all-0.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc 1 title 'e5m2_short'");
    EXPECT_CONTAINS(
        gp,
        "'data/val_loss-all-1.dat' using 1:2:3 with filledcurves fs transparent solid 0.2 noborder "
        "lc 1 notitle");
    EXPECT_CONTAINS(
        gp,
        "'data/val_loss-all-2.dat' using 1:2 with linespoints pt 7 ps 0.6 lw 2 lc 2 title 'bf16_baseline'");
    EXPECT_EQ(gp.find("val_loss-all-3"), std::string::npos) << gp;
    EXPECT_CONTAINS(gp, " size 960,540 noenhanced\n");  // two key entries: the usual height
    // The fixture's validation loss is 4.7 at step 0, final_val + 0.5 at 250 and final_val at 500: the seeds
    // 2.5 and 2.7 give the means 4.7, 3.1, 2.6 and the band of their lowest and highest value.
    const fs::path data = o.out_dir / "figures" / "data";
    EXPECT_CONTAINS(read(data / "val_loss-all-0.dat"), "0\t4.7\n250\t3.1\n500\t2.6\n");
    EXPECT_CONTAINS(read(data / "val_loss-all-1.dat"), "0\t4.7\t4.7\n250\t3\t3.2\n500\t2.5\t2.7\n");
    // The group's own figure: its seeds' mean training loss (untitled), their mean validation loss with
    // its band, and the baseline's dashed in its colour: one key entry per group.
    const std::string loss = read(o.out_dir / "figures" / "loss-e5m2_short.gp");
    EXPECT_CONTAINS(loss, "'data/loss-e5m2_short-0.dat' using 1:2 with lines lw 1.2 lc 1 notitle");
    EXPECT_CONTAINS(loss, "lw 2 lc 1 title 'e5m2_short (2 seeds)'");
    EXPECT_CONTAINS(loss, "lc 2 dt 2 title 'bf16_baseline (baseline, 1 seed)'");
    // Training loss 4 - s/250 at s = 1, 51, ..., 451 and 2.5 at 500, the same for both seeds.
    EXPECT_CONTAINS(read(data / "loss-e5m2_short-0.dat"), "1\t3.996\n51\t3.796\n");
    EXPECT_FALSE(fs::exists(o.out_dir / "figures" / "loss_seeds-e5m2_short.png"));

    // Each seed's curves on request: every seed in the group's colour, the baseline's dashed.
    o.seed_curves = true;
    write_report(runs, o);
    const std::string seeds = read(o.out_dir / "figures" / "loss_seeds-e5m2_short.gp");
    EXPECT_CONTAINS(seeds, "lc 1 title 'e5m2-s1 train'");
    EXPECT_CONTAINS(seeds, "lc 1 title 'e5m2-s2 val'");
    EXPECT_CONTAINS(seeds, "lc 2 dt 2 title 'bf16 val (baseline)'");
    EXPECT_CONTAINS(read(o.out_dir / "report.md"), "](figures/loss_seeds-e5m2_short.png)");
}

TEST(ReportFigures, AHostileRunNameRunsNothing) {
    ASSERT_TRUE(have_gnuplot()) << "no gnuplot on PATH (scripts/setup.sh installs gnuplot-nox)";
    scratch tmp;
    const fs::path marker = tmp.path() / "pwned";
    // In summary.json (JSON escapes) and in config.toml (TOML escapes).
    const std::string json_name = "evil\\nsystem \\\"touch " + marker.string() + "-json\\\"\\n#";
    const std::string toml_name = "evil\\nsystem 'touch " + marker.string() + "-toml'\\n\\\\";
    const fs::path a = finished_run(tmp.path(), "a", "ok", "e5m2", 1, 2.5);
    write(a / "summary.json",
          summary_json(json_name, "finished", "none", "null", 500, 500, 1, 2.5, 2.5, "e5m2"));
    fs::remove(a / "config.toml");  // the name then comes from summary.json
    const fs::path b = finished_run(tmp.path(), "b", "ok2", "e4m3", 1, 2.5);
    write(b / "config.toml", config_toml(toml_name, "e4m3", 1, 500));
    fs::remove(b / "summary.json");  // the name then comes from config.toml
    std::vector<run_record> runs = {read_run(a), read_run(b)};
    ASSERT_NE(runs[0].name.find('\n'), std::string::npos)
        << "the test must plant a newline: " << runs[0].name;
    ASSERT_NE(runs[1].name.find('\n'), std::string::npos)
        << "the test must plant a newline: " << runs[1].name;
    report_options o;
    o.out_dir = tmp.path() / "out";
    const report_output out = write_report(runs, o);
    EXPECT_FALSE(fs::exists(marker.string() + "-json")) << "summary.json's name ran a command";
    EXPECT_FALSE(fs::exists(marker.string() + "-toml")) << "config.toml's name ran a command";
    EXPECT_EQ(out.figures_missing, "") << read(out.markdown);
    // Every line of every script is one of ours: a comment, a set or a plot (with its continuations).
    for (const auto& e : fs::directory_iterator(o.out_dir / "figures")) {
        if (e.path().extension() != ".gp") continue;
        std::istringstream gp(read(e.path()));
        std::string line;
        while (std::getline(gp, line)) {
            const bool ours = line.rfind("# ", 0) == 0 || line.rfind("set ", 0) == 0 ||
                              line.rfind("plot ", 0) == 0 || line.rfind("     '", 0) == 0 || line.empty();
            EXPECT_TRUE(ours) << e.path().filename() << ": " << line;
        }
    }
}

TEST(ReportFigures, MissingGnuplotStillGivesTheReportAndSaysSo) {
    scratch tmp;
    std::vector<run_record> runs = {read_run(finished_run(tmp.path(), "a", "e5m2_short", "e5m2", 1, 2.5))};
    report_options o;
    o.out_dir = tmp.path() / "out";
    o.gnuplot = (tmp.path() / "no-such-gnuplot").string();
    const report_output out = write_report(runs, o);
    EXPECT_EQ(out.figures, 0u);
    const std::string md = read(out.markdown);
    EXPECT_CONTAINS(
        md, "No figures: gnuplot not found ('" + o.gnuplot + "' could not be run; install gnuplot-nox).");
    EXPECT_CONTAINS(md, "| e5m2_short | 1 | e5m2 | 500/500 | finished |");
}

// A "gnuplot" that never returns is killed: the report still comes, and says so.
TEST(ReportFigures, AGnuplotThatHangsIsKilled) {
    scratch tmp;
    const fs::path fake = tmp.path() / "hanging-gnuplot";
    write(fake, "#!/bin/sh\nexec sleep 1000\n");
    fs::permissions(fake, fs::perms::owner_all);
    std::vector<run_record> runs = {read_run(finished_run(tmp.path(), "a", "e5m2_short", "e5m2", 1, 2.5))};
    report_options o;
    o.out_dir = tmp.path() / "out";
    o.gnuplot = fake.string();
    o.gnuplot_timeout = 0.5;
    const auto start = std::chrono::steady_clock::now();
    const report_output out = write_report(runs, o);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
    EXPECT_EQ(out.figures, 0u);
    EXPECT_CONTAINS(read(out.markdown), "'" + fake.string() + "' did not answer within 0.5 s (killed)");
}

// A "gnuplot" that answers the terminal probe but never finishes a figure: a
// wrapper whose own child (a background sleep: the real gnuplot, say) goes on
// after it, both deaf to SIGTERM, SIGINT and SIGHUP. It notes each script it
// is given in `calls` and its child's pid in `children`.
fs::path gnuplot_hanging_on_figures(const fs::path& dir) {
    const fs::path fake = dir / "hanging-on-figures";
    write(fake, "#!/bin/sh\n[ \"$1\" = -e ] && [ $# -eq 2 ] && exit 0\necho \"$3\" >> " +
                    (dir / "calls").string() + "\ntrap '' TERM INT HUP\nsleep 1000 &\necho $! >> " +
                    (dir / "children").string() + "\nwait\n");
    fs::permissions(fake, fs::perms::owner_all);
    return fake;
}

// Whether process `pid` still runs (a zombie waiting for its reaper does not).
bool running(const std::string& pid) {
    const std::string stat = read(fs::path("/proc") / pid / "stat");
    const size_t paren = stat.rfind(')');
    return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z' &&
           stat[paren + 2] != 'X';
}

// Each figure used to wait the whole limit (60 s by default) for such a
// gnuplot, one after the other: a report of 11 figures took 11 minutes, one
// of a study hours, and the wrapper's child was never stopped.
TEST(ReportFigures, AGnuplotThatHangsOnAFigureStopsTheFiguresAndLeavesNothingRunning) {
    scratch tmp;
    std::vector<run_record> runs = {read_run(finished_run(tmp.path(), "a", "e5m2_short", "e5m2", 1, 2.5))};
    report_options o;
    o.out_dir = tmp.path() / "out";
    o.gnuplot = gnuplot_hanging_on_figures(tmp.path()).string();
    o.gnuplot_timeout = 0.5;
    const report_output out = write_report(runs, o);
    EXPECT_EQ(out.figures, 0u);
    EXPECT_TRUE(out.gnuplot_timed_out);
    EXPECT_EQ(read(tmp.path() / "calls"), "loss-e5m2_short.gp\n");  // the first figure, and no other
    const std::string why = "gnuplot did not finish loss-e5m2_short.gp within 0.5 s (killed)";
    EXPECT_EQ(out.figures_missing.rfind(why + "; the ", 0), 0u) << out.figures_missing;
    const std::string md = read(out.markdown);
    EXPECT_CONTAINS(md, "- not drawn: loss-e5m2_short: " + why + "\n- not drawn: the ");
    EXPECT_CONTAINS(md, " figures after it (not tried once gnuplot had run past its time limit)\n");
    // The wrapper's child was killed with it.
    std::istringstream children(read(tmp.path() / "children"));
    std::string pid;
    size_t seen = 0;
    while (std::getline(children, pid)) {
        ++seen;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (running(pid) && std::chrono::steady_clock::now() < deadline) ::usleep(10000);
        EXPECT_FALSE(running(pid)) << "the gnuplot wrapper's child " << pid << " outlived the report";
        if (running(pid)) ::kill(std::stoi(pid), SIGKILL);
    }
    EXPECT_EQ(seen, 1u);
}

TEST(ReportFigures, AFailingGnuplotIsALineInTheReport) {
    scratch tmp;
    // A "gnuplot" that has terminals but fails every script.
    const fs::path fake = tmp.path() / "fake-gnuplot";
    write(fake, "#!/bin/sh\n[ \"$1\" = -e ] && [ $# -eq 2 ] && exit 0\necho 'bad script' >&2\nexit 1\n");
    fs::permissions(fake, fs::perms::owner_all);
    std::vector<run_record> runs = {read_run(finished_run(tmp.path(), "a", "e5m2_short", "e5m2", 1, 2.5))};
    report_options o;
    o.out_dir = tmp.path() / "out";
    o.gnuplot = fake.string();
    const report_output out = write_report(runs, o);
    EXPECT_EQ(out.figures, 0u);
    const std::string md = read(out.markdown);
    EXPECT_CONTAINS(md,
                    "- not drawn: loss-e5m2_short: gnuplot failed on loss-e5m2_short.gp (exit status 1; see "
                    "loss-e5m2_short.log)");
    EXPECT_EQ(read(o.out_dir / "figures" / "loss-e5m2_short.log"), "bad script\n");
}

// ---- The command line ----------------------------------------------------------

struct result {
    int exit_code = -1;
    std::string out;
};

result shell(const std::string& command) {
    result r;
    FILE* p = ::popen((command + " 2>&1").c_str(), "r");
    if (p == nullptr) return r;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    const int status = ::pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

result host(const std::string& args) { return shell(kHost + " " + args); }

TEST(ReportCli, WritesTheReportWithoutAPluginFolder) {
    scratch tmp;
    const fs::path a = finished_run(tmp.path(), "e5m2-s1", "e5m2_short", "e5m2", 1, 2.5);
    const fs::path b = collapsed_run(tmp.path());
    const fs::path out = tmp.path() / "rep";
    const result r =
        host("report " + a.string() + " " + b.string() + " -o " + out.string() + " --no-figures");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(r.out, "report: " + (out / "report.md").string() +
                         " (2 runs, 0 figures)\nfigures: not asked for (--no-figures)\n");
    const std::string md = read(out / "report.md");
    EXPECT_CONTAINS(md, "| `" + a.generic_string() + "` | e5m2_short | 1 | e5m2 | 500/500 | finished |");
    EXPECT_CONTAINS(md, "| `" + b.generic_string() + "` | e7m0_uniform | 42 |");
    EXPECT_CONTAINS(md, "nan_loss at step 7 ([report](../e7m0/reports/failure.md))");
}

TEST(ReportCli, MissingGnuplotIsAnErrorUnlessNoFiguresWereAskedFor) {
    scratch tmp;
    const fs::path a = finished_run(tmp.path(), "e5m2-s1", "e5m2_short", "e5m2", 1, 2.5);
    const fs::path out = tmp.path() / "rep";
    const std::string missing = (tmp.path() / "no-such-gnuplot").string();
    result r = host("report " + a.string() + " -o " + out.string() + " --gnuplot " + missing);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_CONTAINS(r.out, "altgrad-host: error: no figures: gnuplot not found ('" + missing +
                               "' could not be run; install gnuplot-nox); the report is written without them "
                               "(--no-figures asks for none)\n");
    EXPECT_TRUE(fs::exists(out / "report.md"));
    r = host("report " + a.string() + " -o " + out.string() + " --gnuplot " + missing + " --no-figures");
    EXPECT_EQ(r.exit_code, 0) << r.out;
}

TEST(ReportCli, AGnuplotThatHangsIsAnErrorNamingTheFigureAndTheLimit) {
    scratch tmp;
    const fs::path a = finished_run(tmp.path(), "e5m2-s1", "e5m2_short", "e5m2", 1, 2.5);
    const fs::path out = tmp.path() / "rep";
    const std::string fake = gnuplot_hanging_on_figures(tmp.path()).string();
    result r = host("report " + a.string() + " -o " + out.string() + " --gnuplot " + fake +
                    " --gnuplot-timeout 0.5");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_CONTAINS(r.out,
                    "altgrad-host: error: figures: gnuplot did not finish loss-e5m2_short.gp within 0.5 s "
                    "(killed); the ");
    EXPECT_CONTAINS(r.out, "the report is written without them (--gnuplot-timeout sets the limit)\n");
    EXPECT_TRUE(fs::exists(out / "report.md"));
    for (const char* bad : {"0", "-1", "inf", "nan", "soon"}) {
        r = host("report " + a.string() + " -o " + out.string() + " --gnuplot-timeout " + bad);
        EXPECT_EQ(r.exit_code, 2) << bad << "\n" << r.out;
        EXPECT_CONTAINS(r.out, "--gnuplot-timeout");
    }
    std::istringstream children(read(tmp.path() / "children"));
    for (std::string pid; std::getline(children, pid);)
        if (running(pid)) ::kill(std::stoi(pid), SIGKILL);
}

TEST(ReportCli, DefaultFolderIsReportInTheCurrentDirectory) {
    scratch tmp;
    finished_run(tmp.path(), "run", "e5m2_short", "e5m2", 1, 2.5);
    const result r = shell("cd " + tmp.path().string() + " && " + kHost + " report --no-figures run");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_CONTAINS(read(tmp.path() / "report" / "report.md"), "| `run` | e5m2_short |");
}

TEST(ReportCli, WrongArgumentsAreUsageErrorsNamingThePath) {
    scratch tmp;
    fs::create_directories(tmp.path() / "empty");
    write(tmp.path() / "file.txt", "x");
    const fs::path good = finished_run(tmp.path(), "good", "e5m2_short", "e5m2", 1, 2.5);
    const std::string out = " -o " + (tmp.path() / "rep").string();

    result r = host("report" + out);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.out, "altgrad-host: report: give one or more run directories (see altgrad-host --help)\n");

    r = host("report " + good.string() + " " + (tmp.path() / "nope").string() + out);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.out, "altgrad-host: report: " + (tmp.path() / "nope").string() +
                         ": no such run directory (see altgrad-host --help)\n");

    r = host("report " + (tmp.path() / "empty").string() + out);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.out,
              "altgrad-host: report: " + (tmp.path() / "empty").string() +
                  ": not a run directory (no config.toml, metrics.jsonl or summary.json) (see altgrad-host "
                  "--help)\n");

    r = host("report " + (tmp.path() / "file.txt").string() + out);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_CONTAINS(r.out, "file.txt: not a folder (expected a run directory)");
    EXPECT_FALSE(fs::exists(tmp.path() / "rep"));  // nothing written on an error

    r = host("report --bogus " + good.string());
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_CONTAINS(r.out, "report: unrecognised option '--bogus'");

    r = host("report --help");
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_CONTAINS(
        r.out, "usage: altgrad-host report RUN_DIR... [-o OUT_DIR] [--baseline CONFIG] [--hypotheses FILE]");
}

// --baseline: another config is the reference (e.g. MXFP8 E4M3 for the block-scaled seed formats).
TEST(ReportCli, BaselineNamesTheConfigEveryGroupIsComparedWith) {
    scratch tmp;
    const fs::path e4 = finished_run(tmp.path(), "e4m3", "mxfp8_e4m3", "e4m3", 1, 2.0);
    const fs::path e3 = finished_run(tmp.path(), "e3m4", "e3m4_mx", "e3m4", 1, 2.1);
    const fs::path bf = finished_run(tmp.path(), "bf16", "bf16_baseline", "bf16", 1, 1.9);
    const std::string runs = e4.string() + " " + e3.string() + " " + bf.string();
    const fs::path out = tmp.path() / "rep";
    result r = host("report " + runs + " -o " + out.string() + " --no-figures --baseline mxfp8_e4m3");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const std::string md = read(out / "report.md");
    EXPECT_CONTAINS(md, "Baseline: `mxfp8_e4m3` (1 run).");
    // 2.1 - 2.0 = +0.1 of 2.0: +5.0%; BF16 is one group among the others here: -0.1, -5.0%.
    EXPECT_CONTAINS(md, "| e3m4_mx | e3m4 | e3m4 | e3m4 | e3m4 | 1 | 1 | 2.1000 | — | — | +0.1000 (+5.0%) |");
    EXPECT_CONTAINS(
        md, "| bf16_baseline | bf16 | bf16 | bf16 | bf16 | 1 | 1 | 1.9000 | — | — | -0.1000 (-5.0%) |");
    EXPECT_CONTAINS(md, "| mxfp8_e4m3 | e4m3 | e4m3 | e4m3 | e4m3 | 1 | 1 | 2.0000 | — | — | baseline |");
    // A config no run has is a usage error naming the configs there are; nothing is written.
    r = host("report " + runs + " -o " + (tmp.path() / "rep2").string() +
             " --no-figures --baseline mxfp8_e5m2");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_CONTAINS(
        r.out,
        "report: --baseline mxfp8_e5m2: no run of that config among the runs given (their configs: "
        "'mxfp8_e4m3', 'e3m4_mx', 'bf16_baseline')");
    EXPECT_FALSE(fs::exists(tmp.path() / "rep2"));
}

// A folder where a run's file belongs is an error naming it (a metrics.jsonl
// folder used to be shown as a run with no curves); nothing is written.
TEST(ReportCli, AFolderInPlaceOfARunFileIsAnErrorNamingIt) {
    for (const char* file : {"config.toml", "metrics.jsonl", "summary.json"}) {
        SCOPED_TRACE(file);
        scratch tmp;
        const fs::path run = finished_run(tmp.path(), "run", "e5m2_short", "e5m2", 1, 2.5);
        fs::remove(run / file);
        fs::create_directories(run / file / "x");
        const result r = host("report " + run.string() + " --no-figures -o " + (tmp.path() / "rep").string());
        EXPECT_EQ(r.exit_code, 1);
        EXPECT_EQ(r.out,
                  "altgrad-host: error: " + (run / file).string() + ": is a folder, expected a file\n");
        EXPECT_FALSE(fs::exists(tmp.path() / "rep"));
    }
}

// The printed summary line is output too: lost, it is an error (exit 1).
TEST(ReportCli, AnUnwritableStandardOutputIsAnError) {
    scratch tmp;
    const fs::path run = finished_run(tmp.path(), "run", "e5m2_short", "e5m2", 1, 2.5);
    const result r = shell("{ " + kHost + " report " + run.string() + " --no-figures -o " +
                           (tmp.path() / "rep").string() + " 2>&1 >/dev/full; }");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.out, "altgrad-host: error: standard output: write failed: No space left on device\n");
}

TEST(ReportCli, AReportFolderThatCannotBeMadeIsAnError) {
    scratch tmp;
    const fs::path good = finished_run(tmp.path(), "good", "e5m2_short", "e5m2", 1, 2.5);
    write(tmp.path() / "blocker", "x");
    const result r =
        host("report " + good.string() + " --no-figures -o " + (tmp.path() / "blocker" / "rep").string());
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_CONTAINS(r.out, "altgrad-host: error: " + (tmp.path() / "blocker" / "rep").string() +
                               ": cannot create the report folder");
}

TEST(ReportHypotheses, ACustomFileIsJudgedAndShown) {
    scratch tmp;
    // Two E5M2 runs: one finished, one collapsed by overflow at step 90.
    const fs::path bad = finished_run(tmp.path(), "e5m2-bad", "e5m2_short", "e5m2", 3, 3.0);
    write(bad / "summary.json",
          summary_json("e5m2_short", "collapsed", "overflow", "90", 90, 500, 3, NAN, 3.9, "e5m2"));
    std::vector<run_record> runs = {
        read_run(finished_run(tmp.path(), "e5m2-ok", "e5m2_short", "e5m2", 1, 2.5)), read_run(bad)};
    const fs::path file = tmp.path() / "mine.toml";
    write(file,
          "source = \"my study\"\n"
          "[[hypothesis]]\nformat = \"e5m2\"\nclaim = \"fails in half the runs\"\ntest = \"failure_rate\"\n"
          "at_least = 0.5\nat_most = 0.5\n"
          "[[hypothesis]]\nformat = \"e5m2\"\nclaim = \"fails only by nan_loss\"\ntest = \"failure_mode\"\n"
          "mode = \"nan_loss\"\n");
    const hypotheses h = load_hypotheses(file);
    ASSERT_EQ(h.items.size(), 2u);
    const auto v = judge_hypotheses(runs, h.items);
    // Two runs decide nothing, however they came out.
    EXPECT_EQ(verdict_of(v, "E5M2", "half the runs").verdict, "not enough runs (n=2)");
    EXPECT_EQ(verdict_of(v, "E5M2", "only by nan_loss").verdict, "not enough runs (n=2)");

    const result r = host("report --no-figures -o " + (tmp.path() / "rep").string() + " --hypotheses " +
                          file.string() + " " + runs[0].dir.string() + " " + runs[1].dir.string());
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const std::string md = read(tmp.path() / "rep" / "report.md");
    EXPECT_CONTAINS(md, "Hypotheses of my study (`" + file.generic_string() + "`)");
    EXPECT_CONTAINS(
        md,
        "| E5M2 | e5m2_short | fails in half the runs | 1/2 (50.0%) runs failed: overflow at step 90 | "
        "**not enough runs (n=2)** |");
    EXPECT_EQ(md.find("more than 90%"), std::string::npos) << "the seeds' hypotheses are not added";
}

TEST(ReportHypotheses, TheDefaultIsTheSeedsFile) {
    scratch tmp;
    finished_run(tmp.path(), "run", "e5m2_short", "e5m2", 1, 2.5);
    const result r =
        host("report --no-figures -o " + (tmp.path() / "rep").string() + " " + (tmp.path() / "run").string());
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const std::string md = read(tmp.path() / "rep" / "report.md");
    EXPECT_CONTAINS(md, "Hypotheses of the seeds (the research notes AltGrad grew from");
    for (const hypothesis& h : seeds()) EXPECT_CONTAINS(md, h.claim);
}

TEST(ReportHypotheses, ABrokenFileIsAOneLineErrorNamingFileAndKey) {
    auto error_of = [](const std::string& text) {
        try {
            parse_hypotheses(text, "h.toml");
            return std::string();
        } catch (const altgrad::host::error& e) {
            return std::string(e.what());
        }
    };
    const std::string one = "source = \"s\"\n[[hypothesis]]\nformat = \"e5m2\"\nclaim = \"c\"\n";
    EXPECT_EQ(error_of("source = \"s\"\n"),
              "h.toml: key 'hypothesis': missing (one [[hypothesis]] table per hypothesis)");
    EXPECT_EQ(error_of(one + "test = \"rate\"\n"),
              "h.toml: key 'hypothesis[0].test': expected one of failure_rate, overflow, failure_mode, got "
              "\"rate\"");
    EXPECT_EQ(error_of(one + "test = \"overflow\"\nroles = [\"gradient\"]\nrate = 0.1\n"),
              "h.toml: key 'hypothesis[0].roles': expected roles of quantized tensors (weight, activation, "
              "output_gradient), got \"gradient\"");
    EXPECT_EQ(error_of(one + "test = \"failure_rate\"\nmore_than = 1.5\n"),
              "h.toml: key 'hypothesis[0].more_than': expected a number in [0, 1]");
    EXPECT_EQ(
        error_of(one + "test = \"failure_mode\"\nmode = \"stall\"\n"),
        "h.toml: key 'hypothesis[0].mode': expected one of none, nan_loss, bit_stall, overflow, early_stop, "
        "gradient_vanishing, unknown, got \"stall\"");
    EXPECT_EQ(error_of(one + "test = \"failure_rate\"\nrate = 0.1\n"),
              "h.toml: key 'hypothesis[0].rate': unknown key here (expected format, claim, test, more_than, "
              "at_least, "
              "at_most)");
    EXPECT_EQ(error_of("source = \"s\"\n[[hypothesis]]\nformat = \"e5m2\"\ntest = \"overflow\"\n"),
              "h.toml: key 'hypothesis[0].claim': missing");
    EXPECT_EQ(error_of("[[hypothesis]]\nformat = \"e5m2\"\nclaim = \"c\"\ntest = \"overflow\"\n"),
              "h.toml: key 'source': missing");
    EXPECT_EQ(error_of("source = \"s\"\n[[hypothesis]\n").rfind("h.toml:2: not valid TOML: ", 0), 0u);

    // From the command line: exit 1, the one line, and no report written.
    scratch tmp;
    const fs::path run = finished_run(tmp.path(), "run", "e5m2_short", "e5m2", 1, 2.5);
    write(tmp.path() / "bad.toml", one + "test = \"rate\"\n");
    result r = host("report --no-figures -o " + (tmp.path() / "rep").string() + " --hypotheses " +
                    (tmp.path() / "bad.toml").string() + " " + run.string());
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.out,
              "altgrad-host: error: " + (tmp.path() / "bad.toml").string() +
                  ": key 'hypothesis[0].test': expected one of failure_rate, overflow, failure_mode, got "
                  "\"rate\"\n");
    EXPECT_FALSE(fs::exists(tmp.path() / "rep"));
    r = host("report --no-figures --hypotheses " + (tmp.path() / "none.toml").string() + " " + run.string());
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_CONTAINS(r.out, "none.toml: no such hypotheses file");
}

}  // namespace
}  // namespace altgrad::host::report
