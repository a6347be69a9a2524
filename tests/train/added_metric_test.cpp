// Adding a host metric takes its computation and one description entry
// (CONTRIBUTING.md, "Adding a metric"): a step metric added that way, through
// the trainer's own path for its step metrics, is written to metrics.jsonl,
// described in catalog.json, drawn and tabled by the report (steps.csv) and
// read back by Python's read_run. A tiny run, in this process.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include "report/report.hpp"
#include "report/run_record.hpp"
#include "run/files.hpp"
#include "train/trainer.hpp"

namespace {

namespace fs = std::filesystem;
using namespace altgrad::host;

std::string read(const fs::path& file) {
    std::ifstream in(file);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// The metric a contributor would add: what it is (the catalog entry) and how
// it follows from the step's other metrics (its computation).
train::added_step_metric loss_per_grad_norm() {
    run::metric m;
    m.name = "loss_per_grad_norm";
    m.unit = "nats/token";
    m.title = "Loss per unit of gradient norm (a metric added by a test)";
    m.series = "loss_per_grad_norm";
    m.label = "loss / gradient norm";
    return {m, [](const run::metric_values& step) { return step.get("loss") / step.get("grad_norm"); }};
}

TEST(AddedMetric, ReachesTheMetricsTheCatalogTheReportAndPython) {
    const fs::path dir = fs::temp_directory_path() / ("altgrad-added-metric-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    {
        std::ofstream corpus(dir / "corpus.txt");
        for (int i = 0; i < 60; ++i) corpus << "the quick brown fox jumps over the lazy dog " << i << ".\n";
        std::ofstream(dir / "tiny.toml")
            << "name = \"tiny\"\n[model]\nn_layer = 1\nn_head = 2\nn_embd = 16\n"
            << "block_size = 16\n[data]\npath = \"" << (dir / "corpus.txt").string()
            << "\"\n[training]\nmax_steps = 6\nbatch_size = 4\nwarmup_steps = 2\n"
            << "eval_interval = 3\neval_batches = 1\nlog_interval = 3\nthreads = 1\n"
            << "[quantization]\nweight_format = \"e5m2\"\ndiagnostic_interval = 3\n";
    }
    train::run_request req;
    req.config = dir / "tiny.toml";
    req.plugins = ALTGRAD_BUNDLED_PLUGIN_DIR;
    req.out = dir / "run";
    req.added_metrics = {loss_per_grad_norm()};
    std::ostringstream log;
    const train::run_result result = train::run_training(req, log);
    ASSERT_EQ(result.summary.status, "finished") << log.str();

    // metrics.jsonl: every train line has it, after the host's own, equal to its definition.
    std::ifstream metrics(dir / "run" / "metrics.jsonl");
    int train_lines = 0;
    for (std::string line; std::getline(metrics, line);) {
        const nlohmann::ordered_json j = nlohmann::ordered_json::parse(line);
        if (j["kind"] != "train") continue;
        ++train_lines;
        ASSERT_TRUE(j.contains("loss_per_grad_norm")) << line;
        EXPECT_EQ(j["loss_per_grad_norm"].get<double>(),
                  j["loss"].get<double>() / j["grad_norm"].get<double>());
        EXPECT_EQ(std::prev(j.end()).key(), "loss_per_grad_norm") << line;
    }
    EXPECT_EQ(train_lines, 6);

    // catalog.json describes it, and read_run draws its series from it.
    const run::metric_catalog catalog = run::read_catalog(run::catalog_file(dir / "run"));
    ASSERT_NE(catalog.series("loss_per_grad_norm"), nullptr);
    EXPECT_EQ(catalog.series("loss_per_grad_norm")->title, loss_per_grad_norm().description.title);
    const report::run_record r = report::read_run(dir / "run");
    EXPECT_EQ(r.series_points("loss_per_grad_norm").size(), 6u);

    // The report: a figure of its own and a steps.csv column.
    report::report_options options;
    options.out_dir = dir / "report";
    options.figures = false;  // the figure list is what matters here, not gnuplot
    report::write_report({r}, options);
    const std::string steps = read(dir / "report" / "steps.csv");
    EXPECT_NE(steps.substr(0, steps.find('\n')).find(",grad_sparsity,loss_per_grad_norm"), std::string::npos)
        << steps.substr(0, steps.find('\n'));
    options.figures = true;
    const report::report_output out = report::write_report({r}, options);
    if (!out.gnuplot_unavailable)
        EXPECT_NE(read(out.markdown).find("![Loss per unit of gradient norm (a metric added by a test)]"),
                  std::string::npos);

    // Python: read_run's catalog and steps hold it.
    const std::string python =
        std::string("PYTHONPATH=") + ALTGRAD_PYTHON_DIR +
        " /usr/bin/python3 -c '"
        "import altgrad, sys; r = altgrad.read_run(sys.argv[1]); "
        "assert \"loss_per_grad_norm\" in set(r.catalog.name), r.catalog; "
        "t = r[\"train\"].set_index(\"step\"); s = r.steps.set_index(\"step\").loc[t.index]; "
        "assert (s.loss_per_grad_norm == t.loss_per_grad_norm).all(); "
        "assert (t.loss_per_grad_norm == t.loss / t.grad_norm).all(); print(\"ok\")' " +
        (dir / "run").string() + " 2>&1";
    FILE* p = ::popen(python.c_str(), "r");
    char buf[4096];
    std::string said;
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) said.append(buf, n);
    EXPECT_EQ(::pclose(p), 0) << said;
    EXPECT_EQ(said, "ok\n");
    fs::remove_all(dir);
}

}  // namespace
