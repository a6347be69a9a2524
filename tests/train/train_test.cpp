// altgrad-host run, end to end: the run directory, determinism, resume after
// a kill, a third-party format in training, and the errors a user can cause.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <boost/crc.hpp>
#include <nlohmann/json.hpp>

#include "run/files.hpp"

extern char** environ;

namespace {

namespace fs = std::filesystem;

const std::string kHost = ALTGRAD_HOST_BINARY;
const std::string kPlugins = ALTGRAD_BUNDLED_PLUGIN_DIR;

struct run_result {
    int exit_code = -1;
    std::string out;
};

// `shell_prefix`: commands before the host's, in the same shell (ulimit, trap).
run_result run(const std::string& args, const std::string& plugins = kPlugins,
               const std::string& shell_prefix = "") {
    const std::string cmd = shell_prefix + kHost + " --plugins " + plugins + " " + args + " 2>&1 < /dev/null";
    run_result r;
    FILE* p = ::popen(cmd.c_str(), "r");
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    const int status = ::pclose(p);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

class scratch {
public:
    scratch() {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        path = fs::temp_directory_path() /
               ("altgrad-train-" + std::string(info->name()) + "-" + std::to_string(::getpid()));
        fs::remove_all(path);
        fs::create_directories(path);
        // A small corpus: enough text for a 16-token block in both splits.
        std::ofstream corpus(path / "corpus.txt");
        for (int i = 0; i < 60; ++i)
            corpus << "the quick brown fox jumps over the lazy dog " << i
                   << ". pack my box with five dozen jugs.\n";
    }
    ~scratch() { fs::remove_all(path); }
    fs::path path;

    // A plugin folder with the test plugin "param_format" (an ExMy shaped by
    // parameters; its defaults make E4M3, ABI 1.0) beside the bundled e5m2.
    fs::path plugins_with_param_format() const {
        const fs::path plugins = path / "plugins";
        fs::create_directories(plugins);
        fs::copy(fs::path(ALTGRAD_TEST_PLUGIN_DIR) / "param_format", plugins / "param_format");
        fs::copy(fs::path(kPlugins) / "e5m2", plugins / "e5m2");
        return plugins;
    }

    // A tiny config: one layer, 16 wide, 16-token blocks, single-threaded.
    // quantization: extra [quantization] keys; tail: appended at the end.
    fs::path config(const std::string& name, const std::string& quantization = "",
                    const std::string& tail = "") const {
        const fs::path p = path / (name + ".toml");
        std::ofstream(p)
            << "[model]\nn_layer = 1\nn_head = 2\nn_embd = 16\nblock_size = 16\n"
            << "[data]\npath = \"" << (path / "corpus.txt").string() << "\"\n"
            << "[training]\nmax_steps = 12\nbatch_size = 4\nwarmup_steps = 2\neval_interval = 4\n"
            << "eval_batches = 2\nlog_interval = 4\nthreads = 1\nseed = 7\n"
            << "[quantization]\ndiagnostic_interval = 4\n"
            << quantization << "[output]\ncheckpoint_interval = 4\n"
            << tail;
        return p;
    }
};

// A JSON value as text with ", " and ": " between members (the host writes
// metrics lines compactly); the assertions below search that form.
std::string spaced(const nlohmann::ordered_json& j) {
    if (j.is_object()) {
        std::string s = "{";
        for (auto it = j.begin(); it != j.end(); ++it)
            s += (it == j.begin() ? "" : ", ") + nlohmann::ordered_json(it.key()).dump() + ": " +
                 spaced(it.value());
        return s + "}";
    }
    if (j.is_array()) {
        std::string s = "[";
        for (size_t k = 0; k < j.size(); ++k) s += (k ? ", " : "") + spaced(j[k]);
        return s + "]";
    }
    return j.dump();
}

// The lines of a file; metrics.jsonl's each re-spaced by spaced().
std::vector<std::string> lines_of(const fs::path& file) {
    std::ifstream in(file);
    std::vector<std::string> lines;
    std::string line;
    while (std::getline(in, line))
        lines.push_back(file.extension() == ".jsonl" ? spaced(nlohmann::ordered_json::parse(line)) : line);
    return lines;
}

// The metrics without the wall-clock field, which differs run to run, and
// the run id (each run directory's own name).
std::vector<std::string> comparable_metrics(const fs::path& run_dir) {
    std::vector<std::string> out;
    for (std::string line : lines_of(run_dir / "metrics.jsonl")) {
        const size_t id = line.find("\"run_id\": ");
        if (id != std::string::npos) line.erase(id, line.find(", ", id) + 2 - id);
        const size_t t = line.find(", \"tokens_per_s\"");
        if (t != std::string::npos) line = line.substr(0, t) + "}";
        out.push_back(line);
    }
    return out;
}

// A checkpoint's state.json changed by `edit`, its own CRC-32 made to match as
// docs/training.md defines it (of the document without "state_crc32", written
// compactly in the file's key order): an edit meant, not damage.
void rewrite_state(const fs::path& file, const std::function<void(nlohmann::ordered_json&)>& edit) {
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(std::ifstream(file));
    edit(j);
    j.erase("state_crc32");
    const std::string text = j.dump();
    boost::crc_32_type crc;
    crc.process_bytes(text.data(), text.size());
    j["state_crc32"] = crc.checksum();
    std::ofstream(file) << j.dump(1);
}

// The report shows, for every run, whatever its diagnostics declared: a run
// with kurtosis and grid_alignment enabled gets their headline values
// (declared by the plugins, recorded in catalog.json) as steps.csv columns
// with a value at each diagnostic step, and as figures titled as declared.
TEST(Run, TheReportShowsTheHeadlinesOfTheDiagnosticsThatRan) {
    scratch s;
    const fs::path out = s.path / "run";
    const run_result r = run("run " + s.config("tiny").string() + " --out " + out.string() +
                             " --set diagnostics.plugins=kurtosis,grid_alignment");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const nlohmann::json catalog = nlohmann::json::parse(std::ifstream(out / "catalog.json"));
    std::map<std::string, std::string> title_of;  // series -> title, of the diagnostics' headlines
    for (const auto& m : catalog["metrics"])
        if (m["source"] == "kurtosis" || m["source"] == "grid_alignment") title_of[m["series"]] = m["title"];
    ASSERT_EQ(title_of.count("kurtosis.kurtosis"), 1u) << catalog.dump(1);
    ASSERT_EQ(title_of.count("grid_alignment.mse"), 1u) << catalog.dump(1);

    const fs::path report = s.path / "report";
    const run_result rep = run("report " + out.string() + " -o " + report.string());
    ASSERT_EQ(rep.exit_code, 0) << rep.out;
    std::ifstream steps(report / "steps.csv");
    std::string header, line;
    std::getline(steps, header);
    const auto column = [&](const std::string& name) {
        std::istringstream h(header);
        int k = 0;
        for (std::string cell; std::getline(h, cell, ','); ++k)
            if (cell == name) return k;
        return -1;
    };
    const int kurtosis = column("kurtosis.kurtosis"), mse = column("grid_alignment.mse");
    ASSERT_GE(kurtosis, 0) << header;
    ASSERT_GE(mse, 0) << header;
    int measured = 0;  // rows of diagnostic steps (4, 8, 12) with both values
    while (std::getline(steps, line)) {
        std::vector<std::string> cells;
        std::istringstream l(line);
        for (std::string cell; std::getline(l, cell, ',');) cells.push_back(cell);
        cells.resize(std::max(kurtosis, mse) + 1);  // a line's trailing empty cells
        if (!cells[kurtosis].empty() && !cells[mse].empty()) {
            ++measured;
            EXPECT_GT(std::stod(cells[kurtosis]), 0.0) << line;  // m4/m2^2 >= 1 for any non-constant data
            EXPECT_GE(std::stod(cells[mse]), 0.0) << line;
        }
    }
    EXPECT_EQ(measured, 3) << header;
    std::ifstream md(report / "report.md");
    const std::string text((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
    for (const auto& [series, title] : title_of)
        EXPECT_NE(text.find("![" + title + "](figures/diag-" + series + ".png)"), std::string::npos)
            << series << "\n"
            << text;
}

// On a terminal (a pty from script(1)) the log and the live progress line go
// to standard error, with the validation losses among them; standard output,
// redirected to a file, holds only the run directory; and a finished run has
// no reports/ folder (only a collapse writes one).
TEST(Run, ProgressGoesToStandardErrorAndStandardOutputIsTheRunDirectory) {
    scratch s;
    const fs::path out = s.path / "run", stdout_file = s.path / "stdout.txt";
    const std::string inner = kHost + " --plugins " + kPlugins + " run " + s.config("tiny").string() +
                              " --out " + out.string() + " > " + stdout_file.string();
    FILE* p = ::popen(("script -qec '" + inner + "' /dev/null < /dev/null").c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string terminal;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) terminal.append(buf, n);
    ASSERT_EQ(::pclose(p), 0) << terminal;
    EXPECT_NE(terminal.find("step 12/12 | loss "), std::string::npos) << "the live line: " << terminal;
    EXPECT_NE(terminal.find("step 4: val loss "), std::string::npos)
        << "validation on a terminal: " << terminal;
    EXPECT_NE(terminal.find("done: finished, 12/12 steps"), std::string::npos) << terminal;
    std::ifstream in(stdout_file);
    const std::string stdout_text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(stdout_text, out.string() + "\n");
    const ::altgrad::host::run::summary_record summary =
        ::altgrad::host::run::read_summary(out / "summary.json");
    // CPU time: positive, and at most what every core could give in the run's wall time.
    EXPECT_GT(summary.values.get("cpu_seconds"), 0.0);
    EXPECT_LE(summary.values.get("cpu_seconds"),
              summary.values.get("seconds") * std::max(1u, std::thread::hardware_concurrency()) + 1.0);
    EXPECT_FALSE(fs::exists(out / "reports")) << "a finished run has nothing to report";
    // The model's parameters, counted by hand for this GPT (n_layer L = 1, n_embd d = 16, context
    // T = 16, the corpus's V characters): token embedding V d (the head is tied to it), positions
    // T d, per block two LayerNorms 4d, qkv 3d^2 + 3d, proj d^2 + d, MLP 8d^2 + 5d, a final LayerNorm 2d.
    std::ifstream corpus(s.path / "corpus.txt", std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(corpus)), std::istreambuf_iterator<char>());
    const int64_t v = static_cast<int64_t>(std::set<char>(text.begin(), text.end()).size()), d = 16;
    EXPECT_EQ(summary.parameters, std::optional<int64_t>(v * d + 16 * d + (12 * d * d + 13 * d) + 2 * d));
}

TEST(Run, WritesTheRunDirectory) {
    scratch s;
    const fs::path out = s.path / "run";
    const run_result r = run("run " + s.config("tiny").string() + " --out " + out.string());
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("done: finished, 12/12 steps"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("run directory " + out.string()), std::string::npos) << r.out;
    // The resolved config repeats the run: every section, defaults filled in.
    const std::string config = [&] {
        std::ifstream in(out / "config.toml");
        std::stringstream ss;
        ss << in.rdbuf();
        return ss.str();
    }();
    for (const char* key : {"max_steps = 12", "n_embd = 16", "weight_format = \"e5m2\"",
                            "backward_rounding = "
                            "\"stochastic\"",
                            "checkpoint_interval = 4", "learning_rate = "})
        EXPECT_NE(config.find(key), std::string::npos) << key << "\n" << config;
    const std::vector<std::string> m = lines_of(out / "metrics.jsonl");
    int steps = 0, evals = 0, stats = 0;
    for (const std::string& line : m) {
        if (line.find("\"loss\"") != std::string::npos) {
            ++steps;
            for (const char* f : {"\"step\"", "\"lr\"", "\"grad_norm\"", "\"tokens_per_s\""})
                EXPECT_NE(line.find(f), std::string::npos) << f << " in " << line;
        }
        if (line.find("\"val_loss\"") != std::string::npos) ++evals;
        if (line.find("\"tensor\"") != std::string::npos) {
            ++stats;
            for (const char* f :
                 {"\"scale\"", "\"amax\"", "\"overflow\"", "\"underflow\"", "\"format\": \"e5m2\""})
                EXPECT_NE(line.find(f), std::string::npos) << f << " in " << line;
        }
    }
    EXPECT_EQ(steps, 12);
    EXPECT_EQ(evals, 4);  // steps 0, 4, 8, 12
    // 5 quantized layers (qkv, proj, fc, proj, lm_head) x 3 tensors, at steps 4, 8, 12.
    EXPECT_EQ(stats, 5 * 3 * 3);
    EXPECT_TRUE(fs::exists(out / "checkpoints" / "step_0000012" / "state.json"));
    // Every line carries its kind and the run's id (the run directory's name).
    for (const std::string& line : m) EXPECT_EQ(line.rfind("{\"kind\": ", 0), 0u) << line;
    EXPECT_EQ(::altgrad::host::run::read_metrics(out / "metrics.jsonl").run_id, "run");
    EXPECT_TRUE(fs::exists(out / "checkpoints" / "step_0000008" / "model.pt"));
    EXPECT_FALSE(fs::exists(out / "checkpoints" / "step_0000004")) << "keep_checkpoints = 2";
    EXPECT_FALSE(fs::exists(out / "reports")) << "only a collapse writes reports/";
}

TEST(Run, SameConfigAndSeedGiveTheSameLossesBitForBit) {
    scratch s;
    const fs::path cfg = s.config("tiny");
    ASSERT_EQ(run("run " + cfg.string() + " --out " + (s.path / "a").string()).exit_code, 0);
    ASSERT_EQ(run("run " + cfg.string() + " --out " + (s.path / "b").string()).exit_code, 0);
    EXPECT_EQ(comparable_metrics(s.path / "a"), comparable_metrics(s.path / "b"));
    // A different seed trains differently.
    ASSERT_EQ(
        run("run " + cfg.string() + " --set training.seed=8 --out " + (s.path / "c").string()).exit_code, 0);
    EXPECT_NE(comparable_metrics(s.path / "a"), comparable_metrics(s.path / "c"));
}

TEST(Run, ResumeAfterAKillEqualsAnUninterruptedRun) {
    scratch s;
    const fs::path cfg = s.config("long");
    const std::string common =
        " --set training.max_steps=200 --set training.eval_interval=20 --set "
        "output.checkpoint_interval=10";
    ASSERT_EQ(run("run " + cfg.string() + common + " --out " + (s.path / "whole").string()).exit_code, 0);

    // Start the same run, kill -9 it once a checkpoint past step 20 exists.
    const fs::path killed = s.path / "killed";
    std::vector<std::string> argv_s = {kHost,
                                       "--plugins",
                                       kPlugins,
                                       "run",
                                       cfg.string(),
                                       "--set",
                                       "training.max_steps=200",
                                       "--set",
                                       "training.eval_interval=20",
                                       "--set",
                                       "output.checkpoint_interval=10",
                                       "--out",
                                       killed.string()};
    std::vector<char*> argv;
    for (std::string& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    pid_t pid = 0;
    ASSERT_EQ(posix_spawn(&pid, kHost.c_str(), &actions, nullptr, argv.data(), environ), 0);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (!fs::exists(killed / "checkpoints" / "step_0000030") &&
           std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    posix_spawn_file_actions_destroy(&actions);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the run finished before it could be killed; make it longer";

    const run_result r = run("run --resume " + killed.string());
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("resumed " + killed.string() + " at step "), std::string::npos) << r.out;
    EXPECT_EQ(comparable_metrics(s.path / "whole"), comparable_metrics(killed));
}

// counting_clip (a test plugin) clips every step to 0.05 x (1 + steps it saw
// before), and saves that count in checkpoints: a run resumed from its step-4
// checkpoint must repeat the uninterrupted run's metrics, clip events included.
TEST(Run, ResumeRestoresAnInterventionsSavedState) {
    scratch s;
    const fs::path plugins = s.path / "plugins";
    fs::create_directories(plugins);
    fs::copy(fs::path(ALTGRAD_TEST_PLUGIN_DIR) / "counting_clip", plugins / "counting_clip");
    fs::copy(fs::path(kPlugins) / "e5m2", plugins / "e5m2");
    const fs::path cfg =
        s.config("counting", "", "keep_checkpoints = 5\n[stability]\ninterventions = [\"counting_clip\"]\n");
    const fs::path whole = s.path / "whole", resumed = s.path / "resumed";
    const run_result w = run("run " + cfg.string() + " --out " + whole.string(), plugins.string());
    ASSERT_EQ(w.exit_code, 0) << w.out;
    ASSERT_TRUE(fs::exists(whole / "checkpoints" / "step_0000004" / "interventions" / "counting_clip.state"));

    // The same run as if it had stopped after its step-4 checkpoint.
    fs::copy(whole, resumed, fs::copy_options::recursive);
    fs::remove_all(resumed / "checkpoints" / "step_0000008");
    fs::remove_all(resumed / "checkpoints" / "step_0000012");
    const run_result r = run("run --resume " + resumed.string(), plugins.string());
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("at step 4"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("starts afresh"), std::string::npos) << r.out;
    int clips = 0;
    bool fifth = false;
    for (const std::string& line : lines_of(resumed / "metrics.jsonl")) {
        if (line.find("\"clip_grad_norm\"") == std::string::npos) continue;
        ++clips;
        // The first step after the resume: the plugin has seen steps 0..3, and
        // bit stall was measured at step 4 (diagnostic_interval 4), so the
        // host's observation carries a rate, not NaN.
        if (line.find("\"step\": 5,") != std::string::npos)
            fifth = line.find("seen 4 steps before this one") != std::string::npos &&
                    line.find("weight stall nan") == std::string::npos;
    }
    EXPECT_EQ(clips, 12);
    EXPECT_TRUE(fifth);
    EXPECT_EQ(comparable_metrics(whole), comparable_metrics(resumed));
    // summary.json counts the whole run's actions, those before the resume too.
    const ::altgrad::host::run::summary_record summary =
        ::altgrad::host::run::read_summary(resumed / "summary.json");
    EXPECT_EQ(summary.interventions.at("counting_clip").at("clip_grad_norm"), 12);
}

// training.threads bounds the BLAS that LibTorch's matrix products call too
// (OpenBLAS, whose own pool would otherwise take every core): asked for two
// BLAS threads through the environment, a run of threads = 1 reports one and
// keeps to one core; threads = 2 gives two.
TEST(Run, TrainingThreadsBoundTheBlasThreads) {
    namespace run_files = ::altgrad::host::run;
    scratch s;
    // The configs' default model, whose matrix products OpenBLAS would split.
    const fs::path cfg = s.config("blas", "", "");
    const std::string model =
        " --set model.n_layer=4 --set model.n_head=4 --set model.n_embd=128"
        " --set model.block_size=64 --set training.batch_size=12 --set training.max_steps=20";
    const run_result one = run("run " + cfg.string() + model + " --out " + (s.path / "one").string(),
                               kPlugins, "OPENBLAS_NUM_THREADS=2 ");
    ASSERT_EQ(one.exit_code, 0) << one.out;
    EXPECT_NE(one.out.find("cpu threads 1 (BLAS 1)"), std::string::npos) << one.out;
    const run_files::summary_record summary = run_files::read_summary(s.path / "one" / "summary.json");
    // One busy thread: CPU time within wall time (an OpenBLAS worker spinning
    // beside it made this about 1.9).
    EXPECT_LE(summary.values.get("cpu_seconds"), 1.3 * summary.values.get("seconds") + 0.2)
        << summary.values.get("cpu_seconds") << " s CPU in " << summary.values.get("seconds") << " s";

    const run_result two =
        run("run " + cfg.string() + " --set training.threads=2 --out " + (s.path / "two").string());
    ASSERT_EQ(two.exit_code, 0) << two.out;
    EXPECT_NE(two.out.find("cpu threads 2 (BLAS 2)"), std::string::npos) << two.out;
}

// A resumed run's summary gives the whole run's time: each checkpoint carries
// the wall and CPU seconds the run had taken (history.elapsed_seconds,
// elapsed_cpu_seconds in state.json) and the resumed process adds its own.
TEST(Run, AResumedRunsSummaryCountsTheTimeBeforeTheResume) {
    namespace run_files = ::altgrad::host::run;
    scratch s;
    const fs::path cfg = s.config("timed", "", "keep_checkpoints = 5\n");
    const fs::path whole = s.path / "whole";
    ASSERT_EQ(run("run " + cfg.string() + " --out " + whole.string()).exit_code, 0);
    const fs::path step4 = fs::path("checkpoints") / "step_0000004" / "state.json";
    const nlohmann::ordered_json state = nlohmann::ordered_json::parse(std::ifstream(whole / step4));
    const run_files::summary_record w = run_files::read_summary(whole / "summary.json");
    // Step 4's checkpoint was written a third of the way through.
    EXPECT_GT(state["history"]["elapsed_seconds"].get<double>(), 0.0);
    EXPECT_LT(state["history"]["elapsed_seconds"].get<double>(), w.values.get("seconds"));
    EXPECT_GT(state["history"]["elapsed_cpu_seconds"].get<double>(), 0.0);
    EXPECT_LE(state["history"]["elapsed_cpu_seconds"].get<double>(), w.values.get("cpu_seconds"));

    // The run as if it had stopped after its step-4 checkpoint, written once
    // 1000 s (500 s of CPU) had gone by in earlier processes.
    const auto stopped_after_step4 = [&](const fs::path& dir, const nlohmann::ordered_json& history) {
        fs::copy(whole, dir, fs::copy_options::recursive);
        fs::remove_all(dir / "checkpoints" / "step_0000008");
        fs::remove_all(dir / "checkpoints" / "step_0000012");
        rewrite_state(dir / step4, [&](nlohmann::ordered_json& j) { j["history"] = history; });
    };
    nlohmann::ordered_json history = state["history"];
    history["elapsed_seconds"] = 1000.0;
    history["elapsed_cpu_seconds"] = 500.0;
    const fs::path resumed = s.path / "resumed";
    stopped_after_step4(resumed, history);
    const auto start = std::chrono::steady_clock::now();
    const run_result r = run("run --resume " + resumed.string());
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const run_files::summary_record summary = run_files::read_summary(resumed / "summary.json");
    EXPECT_GE(summary.values.get("seconds"), 1000.0);
    EXPECT_LE(summary.values.get("seconds"), 1000.0 + took);
    EXPECT_GE(summary.values.get("cpu_seconds"), 500.0);
    EXPECT_LE(summary.values.get("cpu_seconds"),
              500.0 + took * std::max(1u, std::thread::hardware_concurrency()));

    // A checkpoint of a host before these fields: the time before the resume
    // is unknown, and the summary says so (null) rather than undercount.
    history.erase("elapsed_seconds");
    history.erase("elapsed_cpu_seconds");
    const fs::path old = s.path / "old";
    stopped_after_step4(old, history);
    ASSERT_EQ(run("run --resume " + old.string()).exit_code, 0);
    const run_files::summary_record unknown = run_files::read_summary(old / "summary.json");
    EXPECT_TRUE(std::isnan(unknown.values.get("seconds")));
    EXPECT_TRUE(std::isnan(unknown.values.get("cpu_seconds")));

    // A negative time is damage, refused naming the file and key.
    history["elapsed_seconds"] = -1.0;
    const fs::path damaged = s.path / "damaged";
    stopped_after_step4(damaged, history);
    const run_result d = run("run --resume " + damaged.string());
    EXPECT_NE(d.exit_code, 0);
    EXPECT_NE(d.out.find("elapsed_seconds"), std::string::npos) << d.out;
    EXPECT_NE(d.out.find("state.json"), std::string::npos) << d.out;
}

// An intervention plugin without save_state (here one built as ABI 1.0
// headers build it) starts afresh on resume, and the log says so.
TEST(Run, ResumeSaysWhichInterventionsStartAfresh) {
    scratch s;
    const fs::path plugins = s.path / "plugins";
    fs::create_directories(plugins);
    fs::copy(fs::path(ALTGRAD_TEST_PLUGIN_DIR) / "abi10_intervention", plugins / "abi10_intervention");
    fs::copy(fs::path(kPlugins) / "e5m2", plugins / "e5m2");
    const fs::path cfg = s.config(
        "abi10", "", "keep_checkpoints = 5\n[stability]\ninterventions = [\"abi10_intervention\"]\n");
    const fs::path run_dir = s.path / "run";
    ASSERT_EQ(run("run " + cfg.string() + " --out " + run_dir.string(), plugins.string()).exit_code, 0);
    EXPECT_FALSE(fs::exists(run_dir / "checkpoints" / "step_0000004" / "interventions"));
    fs::remove_all(run_dir / "checkpoints" / "step_0000008");
    fs::remove_all(run_dir / "checkpoints" / "step_0000012");
    const run_result r = run("run --resume " + run_dir.string(), plugins.string());
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(
        r.out.find("intervention abi10_intervention: the plugin saves no state (ABI 1.0 or stateless); it "
                   "starts afresh"),
        std::string::npos)
        << r.out;
}

TEST(Run, AThirdPartyFormatTrainsWithNoHostChange) {
    scratch s;
    const fs::path plugins = s.plugins_with_param_format();
    const fs::path cfg =
        s.config("third", "weight_format = \"param_format\"\nactivation_format = \"param_format\"\n");
    const std::string cmd = kHost + " --plugins " + plugins.string() + " run " + cfg.string() + " --out " +
                            (s.path / "run").string() + " 2>&1";
    FILE* p = ::popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    ASSERT_EQ(::pclose(p), 0) << out;
    int weight_stats = 0;
    for (const std::string& line : lines_of(s.path / "run" / "metrics.jsonl"))
        if (line.find("\"role\": \"weight\", \"format\": \"param_format\"") != std::string::npos)
            ++weight_stats;
    EXPECT_GT(weight_stats, 0);
}

TEST(Run, RulesKeepLayersOutOfTheFormat) {
    scratch s;
    const fs::path cfg =
        s.config("rules", "",
                 "[[quantization.rules]]\npattern = \"lm_head\"\nformat = \"bf16\"\n"
                 "[[quantization.rules]]\npattern = \"blocks.*.attn.*\"\nformat = \"fp32\"\n");
    ASSERT_EQ(run("run " + cfg.string() + " --out " + (s.path / "run").string()).exit_code, 0);
    bool head_bf16 = false, qkv_fp32_absent = true, fc_e5m2 = false;
    for (const std::string& line : lines_of(s.path / "run" / "metrics.jsonl")) {
        if (line.find("\"lm_head.weight\"") != std::string::npos &&
            line.find("\"bf16\"") != std::string::npos)
            head_bf16 = true;
        if (line.find("\"blocks.0.attn.qkv.") != std::string::npos) qkv_fp32_absent = false;
        if (line.find("\"blocks.0.mlp.fc.input\"") != std::string::npos &&
            line.find("\"e5m2\"") != std::string::npos)
            fc_e5m2 = true;
    }
    EXPECT_TRUE(head_bf16);
    EXPECT_TRUE(qkv_fp32_absent) << "fp32 layers are not quantized, so they have no statistics";
    EXPECT_TRUE(fc_e5m2);
}

// An alias is its plugin's name: "float32" (the fp32 plugin's alias) is "fp32",
// float32 itself, everywhere a format is named, so the two configs train bit
// for bit alike, write the same resolved config.toml, and the summary says fp32.
TEST(Run, Float32IsFp32) {
    scratch s;
    const auto config = [&](const std::string& file, const std::string& f) {
        return s.config(file,
                        "weight_format = \"" + f + "\"\nactivation_format = \"" + f +
                            "\"\ngradient_format = \"" + f + "\"\nscale_format = \"" + f + "\"\n",
                        "[diagnostics]\nplugins = [\"range\"]\n[[quantization.rules]]\npattern = "
                        "\"lm_head\"\nformat = \"" +
                            f + "\"\n");
    };
    const std::string common =
        " --set name=same --set training.max_steps=2 --set training.warmup_steps=1"
        " --set quantization.diagnostic_interval=1 --out ";
    ASSERT_EQ(run("run " + config("a", "fp32").string() + common + (s.path / "a").string()).exit_code, 0);
    ASSERT_EQ(run("run " + config("b", "float32").string() + common + (s.path / "b").string()).exit_code, 0);
    EXPECT_EQ(comparable_metrics(s.path / "a"), comparable_metrics(s.path / "b"));
    EXPECT_EQ(lines_of(s.path / "a" / "config.toml"), lines_of(s.path / "b" / "config.toml"));
    const auto formats = nlohmann::json::parse(std::ifstream(s.path / "b" / "summary.json"))["formats"];
    EXPECT_EQ(formats,
              nlohmann::json::parse(R"({"weight": "fp32", "activation": "fp32", "gradient": "fp32"})"));
    // float32 is not quantized: no tensor statistics, as for fp32 layers (above).
    for (const std::string& line : lines_of(s.path / "b" / "metrics.jsonl"))
        EXPECT_EQ(line.find("\"kind\": \"tensor\""), std::string::npos) << line;
}

// The model names its quantized layers as the config's rules see them: the
// weights it reports at a diagnostic step are exactly the documented layers
// (docs/config.md), in model order, SwiGLU's gate included.
TEST(Run, TheModelsLayersAreTheDocumentedOnes) {
    scratch s;
    const fs::path cfg = s.config("layers", "", "");
    ASSERT_EQ(run("run " + cfg.string() + " --out " + (s.path / "run").string() +
                  " --set model.n_layer=2 --set model.activation=swiglu --set training.max_steps=4")
                  .exit_code,
              0);
    std::vector<std::string> weights;
    for (const std::string& line : lines_of(s.path / "run" / "metrics.jsonl")) {
        const bool weight_at_4 = line.find("\"step\": 4, \"tensor\": ") != std::string::npos &&
                                 line.find("\"role\": \"weight\"") != std::string::npos;
        if (!weight_at_4) continue;
        const size_t at = line.find("\"tensor\": \"") + 11;
        weights.push_back(line.substr(at, line.find('"', at) - at));
    }
    std::vector<std::string> expected;
    for (const char* block : {"blocks.0.", "blocks.1."})
        for (const char* layer : {"attn.qkv", "attn.proj", "mlp.fc", "mlp.gate", "mlp.proj"})
            expected.push_back(std::string(block) + layer + ".weight");
    expected.push_back("lm_head.weight");
    EXPECT_EQ(weights, expected);
}

TEST(Run, ShadowWeightsOffChangesTraining) {
    scratch s;
    const fs::path cfg = s.config("shadow");
    ASSERT_EQ(run("run " + cfg.string() + " --out " + (s.path / "on").string()).exit_code, 0);
    const run_result off = run("run " + cfg.string() + " --set quantization.shadow_weights=false --out " +
                               (s.path / "off").string());
    ASSERT_EQ(off.exit_code, 0) << off.out;
    EXPECT_NE(comparable_metrics(s.path / "on"), comparable_metrics(s.path / "off"));
}

// quantization.sr_bits reaches every stochastic rounding of the run (the
// output gradients here): 8 random bits train differently from 32, while an
// explicit 32 is the default bit for bit; the resolved config says which.
TEST(Run, SrBitsChangesStochasticRoundingAnd32IsTheDefault) {
    scratch s;
    const fs::path cfg = s.config("sr_bits");
    const std::string shorter = " --set training.max_steps=4";
    ASSERT_EQ(run("run " + cfg.string() + shorter + " --out " + (s.path / "default").string()).exit_code, 0);
    const run_result all = run("run " + cfg.string() + shorter + " --set quantization.sr_bits=32 --out " +
                               (s.path / "32").string());
    ASSERT_EQ(all.exit_code, 0) << all.out;
    const run_result eight = run("run " + cfg.string() + shorter + " --set quantization.sr_bits=8 --out " +
                                 (s.path / "8").string());
    ASSERT_EQ(eight.exit_code, 0) << eight.out;
    EXPECT_EQ(comparable_metrics(s.path / "default"), comparable_metrics(s.path / "32"));
    EXPECT_NE(comparable_metrics(s.path / "default"), comparable_metrics(s.path / "8"));
    std::ifstream in(s.path / "8" / "config.toml");
    const std::string resolved((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NE(resolved.find("\nsr_bits = 8\n"), std::string::npos) << resolved;
}

// ---- Block scaling ------------------------------------------------------------

// The losses of a finished run's train lines, in order.
std::vector<double> losses_of(const fs::path& run_dir) {
    std::vector<double> out;
    std::ifstream in(run_dir / "metrics.jsonl");
    std::string line;
    while (std::getline(in, line)) {
        const auto j = nlohmann::json::parse(line);
        if (j.value("kind", "") == "train") out.push_back(j["loss"].get<double>());
    }
    return out;
}

// Every block-scaling config of configs/ trains a few steps of a tiny model,
// and its tensors report their blocks.
TEST(BlockScaling, EveryBlockScaledConfigTrainsAFewSteps) {
    scratch s;
    const std::string tiny =
        " --set model.n_layer=1 --set model.n_head=2 --set model.n_embd=32 --set model.block_size=16"
        " --set data.path=" +
        (s.path / "corpus.txt").string() +
        " --set training.max_steps=3 --set training.warmup_steps=1 --set training.batch_size=4"
        " --set training.eval_interval=3 --set training.eval_batches=1 --set training.log_interval=1"
        " --set quantization.diagnostic_interval=3";
    for (const char* name : {"mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp4_e2m1", "nvfp4", "e3m4_mx",
                             "e1m6_mx", "e0m7_mx", "e7m0_mx"}) {
        const fs::path out = s.path / name;
        const run_result r =
            run("run " + std::string(ALTGRAD_CONFIG_DIR) + "/" + name + ".toml --out " + out.string() + tiny);
        // Exit 3 is a collapse, a result and no error: e7m0_mx's elements are powers of two, so
        // under the MX floor rule every element in [1.5, 2) x 2^emax of its block rounds above
        // E7M0's max and overflows (about 15% here, past the 10% threshold).
        ASSERT_TRUE(r.exit_code == 0 || (r.exit_code == 3 && std::string(name) == "e7m0_mx"))
            << name << ": " << r.out;
        const std::vector<double> losses = losses_of(out);
        ASSERT_EQ(losses.size(), 3u) << name;
        for (double l : losses) EXPECT_TRUE(std::isfinite(l)) << name;
        int block_lines = 0;
        std::ifstream in(out / "metrics.jsonl");
        std::string line;
        while (std::getline(in, line)) {
            const auto j = nlohmann::json::parse(line);
            if (j.value("kind", "") != "tensor") continue;
            ASSERT_TRUE(j.contains("blocks")) << name << ": " << line;
            const auto& b = j["blocks"];
            // Weights [out, 32]: blocks of 32 (16 for nvfp4) along each row, quantized twice
            // (rows for the forward pass, columns for the input gradient).
            EXPECT_GT(b["blocks"].get<uint64_t>(), 0u) << line;
            EXPECT_LE(b["saturated"].get<uint64_t>() + b["underflowed"].get<uint64_t>() +
                          b["neutral"].get<uint64_t>(),
                      b["blocks"].get<uint64_t>())
                << line;
            EXPECT_TRUE(j["scale"].is_null()) << "a block-scaled tensor has no one scale: " << line;
            ++block_lines;
        }
        EXPECT_GT(block_lines, 0) << name;
    }
}

// A block-scaled run's diagnostics see each block's scale (ABI 1.2 views).
// Under the round_up rule a block's scale keeps fl(amax * s) <= max, so no
// element overflows (docs/config.md: "Never" clips): range's overflow_rate is
// exactly 0 for every tensor (measured at scale 1, as before ABI 1.2 views,
// about a third of the activations here lie beyond E0M7's max). And E0M7's grid (step 1/128, max 127/128) at
// a block's scale leaves zero only the elements below about amax/256 of their block of 8: few of the output
// gradients, which at scale 1 (|dy| mostly below 1/256 in this model) would nearly all underflow.
TEST(BlockScaling, RangeDiagnosticMeasuresAtTheBlockScales) {
    scratch s;
    const fs::path cfg =
        s.config("range_blocks",
                 "weight_format = \"e0m7\"\nactivation_format = \"e0m7\"\ngradient_format = \"e0m7\"\n"
                 "granularity = \"block\"\nblock_size = 8\nscale_rule = \"round_up\"\n",
                 "[diagnostics]\nplugins = [\"range\"]\n");
    const fs::path out = s.path / "run";
    const run_result r = run("run " + cfg.string() + " --out " + out.string());
    ASSERT_EQ(r.exit_code, 0) << r.out;
    std::map<std::string, int> lines_by_role;
    std::ifstream in(out / "metrics.jsonl");
    std::string line;
    while (std::getline(in, line)) {
        const auto j = nlohmann::json::parse(line);
        if (j.value("kind", "") != "diagnostic" || j.value("diagnostic", "") != "range") continue;
        const auto& v = j["values"];
        const std::string role = j["role"];
        ++lines_by_role[role];
        EXPECT_EQ(v["overflow_rate"].get<double>(), 0.0) << line;
        if (role == "output_gradient") EXPECT_LT(v["underflow_rate"].get<double>(), 0.5) << line;
    }
    EXPECT_GT(lines_by_role["weight"], 0);
    EXPECT_GT(lines_by_role["activation"], 0);
    EXPECT_GT(lines_by_role["output_gradient"], 0);
    EXPECT_GT(lines_by_role["weight_gradient"], 0);
}

// Row granularity is one block per row: the same run as blocks longer than
// any row. And E8M0 scales (the ue8m0 plugin's values) are the powers of two
// of "pow2" wherever neither clamps: the same run again.
TEST(BlockScaling, RowIsOneBlockPerRowAndUe8m0IsPowersOfTwo) {
    scratch s;
    const std::string q =
        "weight_format = \"e4m3\"\nactivation_format = \"e4m3\"\ngradient_format = \"e5m2\"\n";
    const fs::path row = s.config("row", q + "granularity = \"row\"\n");
    const fs::path long_blocks =
        s.config("long_blocks", q + "granularity = \"block\"\nblock_size = 1048576\n");
    const fs::path pow2 =
        s.config("pow2", q + "granularity = \"block\"\nblock_size = 8\nscale_format = \"pow2\"\n");
    const fs::path e8m0 =
        s.config("e8m0", q + "granularity = \"block\"\nblock_size = 8\nscale_format = \"ue8m0\"\n");
    const fs::path tensor = s.config("tensor", q);
    for (const fs::path& c : {row, long_blocks, pow2, e8m0, tensor})
        ASSERT_EQ(run("run " + c.string() + " --out " + (s.path / c.stem()).string()).exit_code, 0) << c;
    EXPECT_EQ(comparable_metrics(s.path / "row"), comparable_metrics(s.path / "long_blocks"));
    EXPECT_EQ(comparable_metrics(s.path / "pow2"), comparable_metrics(s.path / "e8m0"));
    EXPECT_NE(losses_of(s.path / "pow2"), losses_of(s.path / "row")) << "blocks of 8 change training";
    EXPECT_NE(losses_of(s.path / "tensor"), losses_of(s.path / "row")) << "per-row scales change training";
}

// [quantization.params.NAME] shapes a format plugin in training: the test
// plugin param_format (an ABI 1.0 plugin, which the host calls once per block)
// made E5M2 by its parameters trains exactly as the bundled e5m2 (ABI 1.2,
// which reads the block scales itself), per tensor and with blocks of 8.
TEST(BlockScaling, FormatParametersMakeANewFormatInTraining) {
    scratch s;
    const fs::path plugins = s.plugins_with_param_format();
    const std::string params =
        "[quantization.params.param_format]\nexponent_bits = 5\nmantissa_bits = 2\nbias = 15\nspecials = "
        "\"ieee\"\n";
    for (const std::string blocks : {"", "granularity = \"block\"\nblock_size = 8\n"}) {
        const fs::path bundled = s.config("bundled", blocks);
        const fs::path shaped =
            s.config("shaped", blocks +
                                   "weight_format = \"param_format\"\nactivation_format = \"param_format\"\n"
                                   "gradient_format = \"param_format\"\n" +
                                   params);
        fs::remove_all(s.path / "bundled_run");
        fs::remove_all(s.path / "shaped_run");
        ASSERT_EQ(
            run("run " + bundled.string() + " --out " + (s.path / "bundled_run").string(), plugins.string())
                .exit_code,
            0);
        const run_result r =
            run("run " + shaped.string() + " --out " + (s.path / "shaped_run").string(), plugins.string());
        ASSERT_EQ(r.exit_code, 0) << r.out;
        const std::vector<double> a = losses_of(s.path / "bundled_run"), b = losses_of(s.path / "shaped_run");
        ASSERT_EQ(a.size(), 12u);
        EXPECT_EQ(a, b) << (blocks.empty() ? "per tensor" : "blocks of 8");
    }
    // Without the parameters param_format is E4M3: another run.
    const fs::path plain = s.config("plain",
                                    "weight_format = \"param_format\"\nactivation_format = \"param_format\"\n"
                                    "gradient_format = \"param_format\"\n");
    ASSERT_EQ(run("run " + plain.string() + " --out " + (s.path / "plain_run").string(), plugins.string())
                  .exit_code,
              0);
    EXPECT_NE(losses_of(s.path / "plain_run"), losses_of(s.path / "shaped_run"));
    // A parameter the plugin does not have is refused naming it.
    const fs::path bad = s.config(
        "bad", "weight_format = \"param_format\"\n[quantization.params.param_format]\nmantisa_bits = 2\n");
    const run_result r =
        run("run " + bad.string() + " --out " + (s.path / "bad_run").string(), plugins.string());
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.out.find("mantisa_bits"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("param_format"), std::string::npos) << r.out;
}

TEST(RunErrors, NameTheFileAndKey) {
    scratch s;
    const fs::path cfg = s.config("err");
    struct bad {
        std::string args, expect;
        int code;
    };
    const std::vector<bad> cases = {
        {"run " + cfg.string() + " --set data.path=/nonexistent/corpus", "data.path", 1},
        {"run " + cfg.string() + " --set model.block_size=4096", "block_size + 1", 1},
        {"run " + cfg.string() + " --set quantization.weight_format=e9m9",
         "key 'quantization.weight_format': no format plugin named 'e9m9'", 1},
        {"run " + cfg.string() + " --set training.device=cuda", "training.device", 1},
        {"run " + cfg.string() + " --set training.max_stesp=3", "training.max_stesp", 1},
        {"run " + cfg.string() + " --set model.vocab_size=10", "vocabulary", 1},
        {"run " + (s.path / "missing.toml").string(), "missing.toml", 1},
        {"run --resume " + s.path.string(), "not a run directory", 1},
        {"run", "give a CONFIG.toml", 2},
    };
    for (const bad& b : cases) {
        const run_result r = run(b.args);
        EXPECT_EQ(r.exit_code, b.code) << b.args << "\n" << r.out;
        EXPECT_NE(r.out.find(b.expect), std::string::npos) << b.args << "\n" << r.out;
        EXPECT_EQ(r.out.find("terminate called"), std::string::npos) << r.out;
    }
    // An existing, non-empty --out is refused, not overwritten.
    ASSERT_EQ(run("run " + cfg.string() + " --out " + (s.path / "r").string()).exit_code, 0);
    const run_result again = run("run " + cfg.string() + " --out " + (s.path / "r").string());
    EXPECT_EQ(again.exit_code, 1);
    EXPECT_NE(again.out.find("exists and is not empty"), std::string::npos) << again.out;
}

}  // namespace

// ---------------------------------------------------------------- stability

std::string file_text(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// The number after `"key": ` in a JSON line (NaN when absent or null).
double number_in(const std::string& line, const std::string& key) {
    const size_t at = line.find("\"" + key + "\": ");
    if (at == std::string::npos) return NAN;
    const char* p = line.c_str() + at + key.size() + 4;
    if (std::strncmp(p, "null", 4) == 0) return NAN;
    return std::strtod(p, nullptr);
}

bool has(const std::string& line, const std::string& text) { return line.find(text) != std::string::npos; }

// The seeds' E7M0 experiment with the weights stored in E7M0 (no FP32 master
// copy): 150 steps, bit stall measured every 25.
const std::string kE7m0Stored = std::string(ALTGRAD_CONFIG_DIR) +
                                "/e7m0_uniform.toml"
                                " --set quantization.shadow_weights=false --set training.max_steps=150"
                                " --set quantization.diagnostic_interval=25 --set training.eval_interval=50"
                                " --set output.checkpoint_interval=50";

TEST(Stability, E7m0StoredInItsFormatCollapsesAtTheFirstStalledStep) {
    scratch s;
    const fs::path out = s.path / "e7m0";
    const run_result r = run("run " + kE7m0Stored + " --out " + out.string());
    ASSERT_EQ(r.exit_code, 3) << r.out;
    const std::string summary = file_text(out / "summary.json");
    EXPECT_TRUE(has(summary, "\"status\": \"collapsed\"")) << summary;
    EXPECT_TRUE(has(summary, "\"failure_mode\": \"bit_stall\"")) << summary;

    // From metrics.jsonl alone, the rule of docs/training.md: at each measurement the
    // element-weighted bit stall of the weights, and the mean loss since the last one;
    // stalled = rate > 50% and the loss improved by less than 1% on the previous window.
    std::map<int64_t, std::pair<double, double>> stall;  // step -> (stalled elements, elements)
    std::map<int64_t, double> window_loss;
    double loss_sum = 0;
    int loss_n = 0;
    int64_t collapse_event_step = -1;
    for (const std::string& line : lines_of(out / "metrics.jsonl")) {
        const int64_t step = static_cast<int64_t>(number_in(line, "step"));
        if (has(line, "\"loss\"")) loss_sum += number_in(line, "loss"), ++loss_n;
        if (has(line, "\"role\": \"weight\"") && has(line, "\"bit_stall_rate\"")) {
            const double rate = number_in(line, "bit_stall_rate"), count = number_in(line, "count");
            stall[step].first += rate * count;
            stall[step].second += count;
            if (!window_loss.count(step)) window_loss[step] = loss_sum / loss_n, loss_sum = 0, loss_n = 0;
        }
        if (has(line, "\"event\": \"collapse\"")) collapse_event_step = step;
    }
    ASSERT_GE(stall.size(), 3u);
    int64_t first_stalled = -1, streak = 0;
    double previous_loss = NAN;
    for (const auto& [step, se] : stall) {
        const bool stalled = se.first / se.second > 0.5 && std::isfinite(previous_loss) &&
                             !(window_loss[step] < previous_loss * 0.99);
        previous_loss = window_loss[step];
        if (!stalled) {
            streak = 0;
            continue;
        }
        if (streak++ == 0) first_stalled = step;
        if (streak == 3) break;
    }
    ASSERT_EQ(streak, 3) << "no three stalled measurements in a row in metrics.jsonl";
    EXPECT_EQ(collapse_event_step, stall.rbegin()->first);

    const std::string report = file_text(out / "reports" / "failure.md");
    EXPECT_TRUE(has(report, "| failure mode | **bit_stall** |")) << report;
    EXPECT_TRUE(has(report, "| collapse step (first evidence) | " + std::to_string(first_stalled) + " |"))
        << report;
    EXPECT_TRUE(has(report, "quantization.shadow_weights = true"))
        << report;  // the evidence-led recommendation
    EXPECT_TRUE(has(report, "## Config (resolved)")) << report;
    // A checkpoint of the collapse step, for the post-mortem.
    char ckpt[32];
    std::snprintf(ckpt, sizeof ckpt, "step_%07lld", static_cast<long long>(collapse_event_step));
    EXPECT_TRUE(fs::exists(out / "checkpoints" / ckpt / "state.json")) << ckpt;
}

TEST(Stability, MantissaShiftMovesE7m0ToE5m2AndTheRunFinishes) {
    scratch s;
    const fs::path out = s.path / "e7m0-shift";
    const run_result r =
        run("run " + kE7m0Stored + " --set stability.interventions=mantissa_shift --out " + out.string());
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_TRUE(has(r.out, "mantissa_shift switched blocks.0.attn.qkv.weight e7m0 -> e5m2")) << r.out;
    EXPECT_TRUE(has(r.out, "done: finished, 150/150 steps")) << r.out;
    const std::string summary = file_text(out / "summary.json");
    EXPECT_TRUE(has(summary, "\"status\": \"finished\"")) << summary;
    const auto switches_made = ::altgrad::host::run::read_summary(out / "summary.json").switches;
    ASSERT_FALSE(switches_made.empty()) << summary;
    EXPECT_EQ(switches_made[0].from, "e7m0");
    EXPECT_EQ(switches_made[0].to, "e5m2");
    EXPECT_EQ(switches_made[0].plugin, "mantissa_shift");
    // Every switch is an event with the plugin's reason; afterwards the weights train in E5M2.
    int switches = 0;
    int64_t switch_step = -1;
    bool e5m2_weights_after = false;
    for (const std::string& line : lines_of(out / "metrics.jsonl")) {
        if (has(line, "\"event\": \"switch_format\"")) {
            ++switches;
            switch_step = static_cast<int64_t>(number_in(line, "step"));
            EXPECT_TRUE(has(line, "\"plugin\": \"mantissa_shift\"") && has(line, "bit-stall rate")) << line;
        }
        if (switch_step > 0 && number_in(line, "step") > switch_step && has(line, "\"role\": \"weight\"") &&
            has(line, "\"format\": \"e5m2\""))
            e5m2_weights_after = true;
    }
    // 4 blocks x 4 linear layers + the LM head: 17 weight tensors switched, once each.
    EXPECT_EQ(switches, 17);
    EXPECT_TRUE(e5m2_weights_after);
}

TEST(Stability, NonFiniteLossStopsWithACheckpointAndAReport) {
    scratch s;
    // E1M6 (max 1.97, with Inf) on unscaled activations with overflow to Inf: the
    // LayerNorm outputs overflow at once.
    const fs::path cfg =
        s.config("nan", "overflow = \"nonfinite\"\nscaling = \"none\"\nactivation_format = \"e1m6\"\n");
    const fs::path out = s.path / "nan";
    const run_result r = run("run " + cfg.string() + " --out " + out.string());
    ASSERT_EQ(r.exit_code, 3) << r.out;
    const std::string summary = file_text(out / "summary.json");
    const auto nan_summary = ::altgrad::host::run::read_summary(out / "summary.json");
    EXPECT_EQ(nan_summary.failure_mode, "nan_loss") << summary;
    EXPECT_EQ(nan_summary.failure_step, std::optional<int64_t>(1)) << summary;
    EXPECT_TRUE(fs::exists(out / "checkpoints" / "step_0000001" / "state.json"));
    const std::string report = file_text(out / "reports" / "failure.md");
    EXPECT_TRUE(has(report, "| collapse step (first evidence) | 1 |")) << report;
    EXPECT_TRUE(has(report, "quantization.overflow = \\\"saturate\\\"") ||
                has(report, "overflow = \"saturate\""))
        << report;
    EXPECT_TRUE(has(report, "blocks.0.attn.qkv.input (e1m6")) << report;
}

TEST(Stability, WithMantissaShiftANonFiniteRunSwitchesAndGoesOn) {
    scratch s;
    const fs::path cfg =
        s.config("nan-shift", "overflow = \"nonfinite\"\nscaling = \"none\"\nactivation_format = \"e1m6\"\n");
    const fs::path out = s.path / "nan-shift";
    const run_result r =
        run("run " + cfg.string() + " --set stability.interventions=mantissa_shift --out " + out.string());
    ASSERT_EQ(r.exit_code, 0) << r.out;
    // nan_patience 3: steps 1-3 are non-finite and skipped, then every E1M6 tensor moves to E3M4.
    int nonfinite = 0;
    int64_t first_switch = -1;
    for (const std::string& line : lines_of(out / "metrics.jsonl")) {
        if (has(line, "\"event\": \"nonfinite\"")) ++nonfinite;
        if (has(line, "\"event\": \"switch_format\"") && first_switch < 0) {
            first_switch = static_cast<int64_t>(number_in(line, "step"));
            EXPECT_TRUE(has(line, "\"from\": \"e1m6\", \"to\": \"e3m4\"")) << line;
        }
    }
    EXPECT_EQ(nonfinite, 3);
    EXPECT_EQ(first_switch, 3);
    EXPECT_TRUE(has(file_text(out / "summary.json"), "\"status\": \"finished\""));
}

TEST(Stability, EveryDiagnosticWritesItsValuesAndBitStallAgreesWithTheHost) {
    scratch s;
    const fs::path cfg = s.config(
        "diag", "",
        "[diagnostics]\nplugins = [\"range\", \"stiffness\", \"grid_alignment\", \"bit_stall\", \"ulp\", "
        "\"grad_stiffness\", \"kurtosis\", \"attention_entropy\"]\n");
    const fs::path out = s.path / "diag";
    const run_result r = run("run " + cfg.string() + " --out " + out.string());
    ASSERT_EQ(r.exit_code, 0) << r.out;
    std::map<std::string, int> lines_per_diagnostic;
    std::map<std::string, std::string> host_stall;  // "step tensor" -> the host's bit_stall_rate text
    std::vector<std::string> plugin_stall;
    for (const std::string& line : lines_of(out / "metrics.jsonl")) {
        const size_t d = line.find("\"diagnostic\": \"");
        if (d != std::string::npos)
            ++lines_per_diagnostic[line.substr(d + 15, line.find('"', d + 15) - d - 15)];
        if (has(line, "\"diagnostic\": \"bit_stall\"")) plugin_stall.push_back(line);
        if (has(line, "\"role\": \"weight\", \"format\""))
            host_stall[std::to_string(static_cast<int64_t>(number_in(line, "step"))) + " " +
                       line.substr(line.find("\"tensor\": ") + 10,
                                   line.find(", \"role\"") - line.find("\"tensor\": ") - 10)] =
                std::to_string(number_in(line, "bit_stall_rate"));
    }
    for (const char* name : {"range", "stiffness", "grid_alignment", "bit_stall", "ulp", "grad_stiffness",
                             "kurtosis", "attention_entropy"})
        EXPECT_GT(lines_per_diagnostic[name], 0) << name;
    const std::vector<std::string> m = lines_of(out / "metrics.jsonl");
    const auto any = [&](const std::string& a, const std::string& b) {
        for (const std::string& line : m)
            if (has(line, a) && has(line, b)) return true;
        return false;
    };
    EXPECT_TRUE(any("\"diagnostic\": \"attention_entropy\"", "\"tensor\": \"blocks.0.attn.probs\""))
        << "attention probs";
    EXPECT_TRUE(any("\"diagnostic\": \"kurtosis\"", "\"tensor\": \"blocks.0.attn.qkv.input\""))
        << "activations";
    EXPECT_TRUE(any("\"diagnostic\": \"grad_stiffness\"", "\"role\": \"weight_gradient\""))
        << "weight gradients";
    EXPECT_TRUE(any("\"diagnostic\": \"range\"", "\"role\": \"output_gradient\"")) << "output gradients";
    // A quantized tensor's line names the output gradient as the diagnostics do: one name, one meaning.
    EXPECT_TRUE(any(".output_grad\", \"role\": \"output_gradient\", \"format\"", "\"overflow\""))
        << "quantized output gradients";
    EXPECT_FALSE(any("\"role\": \"gradient\"", "")) << "no bare \"gradient\" role";
    // The plugin and the host measure bit stall by the same definition on the same tensors.
    int compared = 0;
    for (const std::string& line : plugin_stall) {
        const std::string tensor = line.substr(line.find("\"tensor\": ") + 10,
                                               line.find(", \"role\"") - line.find("\"tensor\": ") - 10);
        const std::string key = std::to_string(static_cast<int64_t>(number_in(line, "step"))) + " " + tensor;
        const double plugin = number_in(line, "bit_stall_rate");
        if (!host_stall.count(key) || std::isnan(plugin)) continue;
        EXPECT_EQ(std::to_string(plugin), host_stall[key]) << key;
        ++compared;
    }
    EXPECT_GT(compared, 0);
}

// Eight bytes flipped in the middle of a file (a damaged copy, a bad disk).
void flip_bytes(const fs::path& file) {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(file) / 2));
    f.write("\xde\xad\xbe\xef\xde\xad\xbe\xef", 8);
}

// LibTorch's archive reader checks nothing: without the checkpoint's own
// sizes and CRC-32s a flipped byte resumed silently with wrong results.
TEST(Resume, ADamagedCheckpointIsRefusedNamingTheFileAndFallbackResumesFromTheIntactOne) {
    scratch s;
    const fs::path out = s.path / "run";
    ASSERT_EQ(run("run " + s.config("tiny").string() + " --out " + out.string()).exit_code, 0);
    const std::vector<std::string> whole = comparable_metrics(out);
    const fs::path last = out / "checkpoints" / "step_0000012";
    for (const char* file : {"model.pt", "optimizer.pt", "rng.pt", "bit_stall.pt"}) {
        const fs::path f = last / file, saved = s.path / "saved";
        fs::copy_file(f, saved, fs::copy_options::overwrite_existing);
        flip_bytes(f);
        const run_result r = run("run --resume " + out.string());
        EXPECT_EQ(r.exit_code, 1) << file << "\n" << r.out;
        EXPECT_TRUE(has(r.out, f.string() + ": its contents changed since the checkpoint was written"))
            << r.out;
        EXPECT_TRUE(has(r.out, "--fallback` resumes from the newest intact earlier checkpoint")) << r.out;
        fs::copy_file(saved, f, fs::copy_options::overwrite_existing);
    }
    // A state.json about another step; then a damaged model with --fallback: step 8 is intact.
    const std::string state = file_text(last / "state.json");
    rewrite_state(last / "state.json", [](nlohmann::ordered_json& j) { j["step"] = 13; });
    const run_result wrong_step = run("run --resume " + out.string());
    EXPECT_EQ(wrong_step.exit_code, 1);
    EXPECT_TRUE(has(wrong_step.out, "state.json: key 'step': 13, but the folder is step_0000012"))
        << wrong_step.out;
    std::ofstream(last / "state.json") << state;
    flip_bytes(last / "model.pt");
    const run_result r = run("run --resume " + out.string() + " --fallback");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_TRUE(has(r.out, "--fallback: skipping step_0000012: ")) << r.out;
    EXPECT_TRUE(has(r.out, "at step 8")) << r.out;
    EXPECT_EQ(comparable_metrics(out), whole);  // steps 9..12 again, the same bits
}

// state.json records the CRC-32 of every other file of its checkpoint, but
// nothing covered state.json itself: a site's format edited by hand (e4m3 for
// e5m2) resumed silently in the edited format. Its own CRC-32 refuses the
// edit; made to match, the format is still one the run cannot have reached.
TEST(Resume, AFormatEditedByHandInStateJsonIsRefusedAndFallbackSkipsIt) {
    scratch s;
    const fs::path whole = s.path / "whole";
    ASSERT_EQ(run("run " + s.config("tiny").string() + " --out " + whole.string()).exit_code, 0);
    const std::vector<std::string> metrics = comparable_metrics(whole);
    const fs::path state12 = fs::path("checkpoints") / "step_0000012" / "state.json";
    const auto copy_of_whole = [&](const std::string& name) {
        fs::copy(whole, s.path / name, fs::copy_options::recursive);
        return s.path / name;
    };
    // Edited as text: the first site, blocks.0.attn.qkv.weight.
    const fs::path edited = copy_of_whole("edited");
    std::string text = file_text(edited / state12);
    text.replace(text.find("\"format\": \"e5m2\""), 16, "\"format\": \"e4m3\"");
    std::ofstream(edited / state12) << text;
    run_result r = run("run --resume " + edited.string());
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_TRUE(has(r.out, "altgrad-host: error: " + (edited / state12).string() + ": key 'state_crc32': "))
        << r.out;
    EXPECT_TRUE(has(r.out, "(state.json was damaged or edited by hand); `run --resume " + edited.string() +
                               " --fallback` resumes from the newest intact earlier checkpoint instead"))
        << r.out;
    r = run("run --resume " + edited.string() + " --fallback");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_TRUE(has(r.out, "--fallback: skipping step_0000012: ")) << r.out;
    EXPECT_TRUE(has(r.out, "at step 8")) << r.out;
    EXPECT_EQ(comparable_metrics(edited), metrics);

    // A checkpoint of a host before the check (layout 2, no state_crc32) still resumes, and says so.
    const fs::path older = copy_of_whole("older");
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(std::ifstream(older / state12));
    j["layout"] = 2;
    j.erase("state_crc32");
    std::ofstream(older / state12) << j.dump(1);
    r = run("run --resume " + older.string());
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_TRUE(has(r.out, "note: " + (older / state12).string() +
                               " records no CRC-32 of itself (a checkpoint of a host before it): its values "
                               "are taken as written"))
        << r.out;
    EXPECT_EQ(comparable_metrics(older), metrics);

    // The same edit with a matching CRC-32: no config or switch gives e4m3.
    const fs::path forged = copy_of_whole("forged");
    rewrite_state(forged / state12, [](nlohmann::ordered_json& j) { j["sites"][0]["format"] = "e4m3"; });
    r = run("run --resume " + forged.string());
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_TRUE(has(r.out, "altgrad-host: error: " + (forged / state12).string() +
                               ": key 'sites[0].format': \"e4m3\", but the run's config (config.toml and "
                               "--set) makes blocks.0.attn.qkv.weight \"e5m2\" and key 'history.switches' "
                               "records no switch of it (edited by hand?)"))
        << r.out;
    r = run("run --resume " + forged.string() + " --fallback");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_TRUE(has(r.out, "--fallback: skipping step_0000012: ")) << r.out;
    EXPECT_EQ(comparable_metrics(forged), metrics);
    // A format given on resume is refused the same way (the checkpoint's would silently win).
    r = run("run --resume " + whole.string() + " --set quantization.weight_format=e4m3");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_TRUE(has(r.out,
                    ": key 'sites[0].format': \"e5m2\", but the run's config (config.toml and --set) "
                    "makes blocks.0.attn.qkv.weight \"e4m3\""))
        << r.out;
}

// A format an intervention switched resumes: mantissa_shift moves every E1M6
// activation to E3M4 at step 3, and a run resumed from its step-8 checkpoint
// ends as the uninterrupted one. Set back to E1M6 by hand, the checkpoint is
// refused: the switch the history records says E3M4.
TEST(Resume, AFormatAnInterventionSwitchedResumesAndOneEditedBackIsRefused) {
    scratch s;
    const fs::path cfg =
        s.config("shift", "overflow = \"nonfinite\"\nscaling = \"none\"\nactivation_format = \"e1m6\"\n",
                 "keep_checkpoints = 5\n[stability]\ninterventions = [\"mantissa_shift\"]\n");
    const fs::path whole = s.path / "whole", resumed = s.path / "resumed";
    ASSERT_EQ(run("run " + cfg.string() + " --out " + whole.string()).exit_code, 0);
    fs::copy(whole, resumed, fs::copy_options::recursive);
    fs::remove_all(resumed / "checkpoints" / "step_0000012");
    const fs::path state8 = resumed / "checkpoints" / "step_0000008" / "state.json";
    const nlohmann::ordered_json state = nlohmann::ordered_json::parse(std::ifstream(state8));
    ASSERT_EQ(state["sites"][1]["name"], "blocks.0.attn.qkv.input");
    ASSERT_EQ(state["sites"][1]["format"], "e3m4");
    size_t switch_of_site1 = 0;
    while (switch_of_site1 < state["history"]["switches"].size() &&
           state["history"]["switches"][switch_of_site1]["tensor"] != "blocks.0.attn.qkv.input")
        ++switch_of_site1;
    ASSERT_LT(switch_of_site1, state["history"]["switches"].size());
    const fs::path untouched = s.path / "untouched";
    fs::copy(resumed, untouched, fs::copy_options::recursive);

    run_result r = run("run --resume " + resumed.string());
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_TRUE(has(r.out, "at step 8")) << r.out;
    EXPECT_EQ(comparable_metrics(resumed), comparable_metrics(whole));

    rewrite_state(untouched / "checkpoints" / "step_0000008" / "state.json",
                  [](nlohmann::ordered_json& j) { j["sites"][1]["format"] = "e1m6"; });
    r = run("run --resume " + untouched.string());
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_TRUE(has(r.out,
                    "step_0000008/state.json: key 'sites[1].format': \"e1m6\", but mantissa_shift "
                    "switched blocks.0.attn.qkv.input to \"e3m4\" at step 3 (key 'history.switches[" +
                        std::to_string(switch_of_site1) + "]'), its last switch (edited by hand?)"))
        << r.out;
    // A switch from a format the tensor did not have then is no switch the run made.
    rewrite_state(untouched / "checkpoints" / "step_0000008" / "state.json", [&](nlohmann::ordered_json& j) {
        j["sites"][1]["format"] = "e3m4";
        j["history"]["switches"][switch_of_site1]["from"] = "e5m2";
    });
    r = run("run --resume " + untouched.string());
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_TRUE(has(r.out, "step_0000008/state.json: key 'history.switches[" +
                               std::to_string(switch_of_site1) +
                               "].from': \"e5m2\", but before that switch the run's config (config.toml and "
                               "--set) makes blocks.0.attn.qkv.input \"e1m6\" (edited by hand?)"))
        << r.out;
}

TEST(Resume, AMissingMetricsFileIsRefused) {
    scratch s;
    const fs::path out = s.path / "run";
    ASSERT_EQ(run("run " + s.config("tiny").string() + " --out " + out.string()).exit_code, 0);
    fs::remove(out / "metrics.jsonl");
    const run_result r = run("run --resume " + out.string());
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_TRUE(has(r.out, (out / "metrics.jsonl").string() + ": missing")) << r.out;
}

// A full disk, as a file-size limit makes it (SIGXFSZ ignored: writes fail
// with EFBIG): LibTorch's writer used to abort the host from a destructor.
// 32 blocks of 512 bytes (dash's unit): catalog.json (about 10 KB) and the
// first steps' metrics fit, the first checkpoint's model.pt does not.
TEST(Run, AFullDiskStopsTheRunWithOneLineAndASummary) {
    scratch s;
    const fs::path out = s.path / "run";
    const run_result r = run("run " + s.config("tiny").string() + " --out " + out.string(), kPlugins,
                             "ulimit -f 32; trap '' XFSZ; ");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_TRUE(has(r.out, "altgrad-host: error: " + (out / "checkpoints" / "step_0000004").string() +
                               ": cannot write the checkpoint"))
        << r.out;
    EXPECT_FALSE(has(r.out, "frame #")) << r.out;  // no LibTorch backtrace
    for (const auto& e : fs::directory_iterator(out / "checkpoints"))
        EXPECT_NE(e.path().filename().string().rfind(".tmp-", 0), 0u) << e.path();
    const auto summary = ::altgrad::host::run::read_summary(out / "summary.json");
    EXPECT_EQ(summary.status, "error");
    EXPECT_EQ(summary.steps_done, 4);
}

namespace {

// A plugins folder with the bundled plugins and broken_quantize_after, an
// E4M3 that segfaults in quantize once ALTGRAD_TEST_CRASH_AFTER_CALLS calls
// have passed (and never without the variable).
fs::path plugins_with_crashing_format(const scratch& s) {
    const fs::path plugins = s.path / "plugins";
    fs::copy(kPlugins, plugins, fs::copy_options::recursive);
    fs::copy(fs::path(ALTGRAD_TEST_PLUGIN_DIR) / "broken_quantize_after", plugins / "broken_quantize_after");
    return plugins;
}

}  // namespace

// Before `run` watched its training process, this run ended with exit 139,
// no summary.json and no word of the plugin.
TEST(Run, APluginThatCrashesLeavesACrashedSummaryNamingItAndTheRunResumes) {
    scratch s;
    const fs::path plugins = plugins_with_crashing_format(s);
    const fs::path cfg = s.config("crashy", "weight_format = \"broken_quantize_after\"\n");
    ASSERT_EQ(
        run("run " + cfg.string() + " --out " + (s.path / "whole").string(), plugins.string()).exit_code, 0);

    const fs::path out = s.path / "crashed";
    const run_result r = run("run " + cfg.string() + " --out " + out.string(), plugins.string(),
                             "ALTGRAD_TEST_CRASH_AFTER_CALLS=60 ");
    EXPECT_EQ(r.exit_code, 4) << r.out;
    const auto summary = ::altgrad::host::run::read_summary(out / "summary.json");
    EXPECT_EQ(summary.status, "crashed");
    ASSERT_TRUE(summary.crash.has_value());
    EXPECT_EQ(summary.crash->plugin, "broken_quantize_after");
    EXPECT_EQ(summary.crash->call, "quantize");
    EXPECT_EQ(summary.crash->signal, SIGSEGV);
    EXPECT_EQ(summary.crash->signal_name, "SIGSEGV");
    // What metrics.jsonl holds: the steps done and the last losses.
    int64_t train_lines = 0;
    double last_loss = NAN;
    for (const std::string& line : lines_of(out / "metrics.jsonl")) {
        const auto j = nlohmann::json::parse(line);
        if (j["kind"] != "train") continue;
        ++train_lines;
        last_loss = j["loss"].get<double>();
    }
    EXPECT_EQ(summary.steps_done, train_lines);
    EXPECT_EQ(summary.crash->steps_done, train_lines);
    EXPECT_EQ(summary.values.get("final_train_loss"), last_loss);
    ASSERT_GE(train_lines, 4) << "the crash came before the first checkpoint; raise the call count";
    ASSERT_LT(train_lines, 12) << "the run finished before the crash; lower the call count";
    EXPECT_TRUE(has(r.out, "altgrad-host: plugin 'broken_quantize_after' crashed the run in quantize after " +
                               std::to_string(train_lines) +
                               " steps: signal 11 (SIGSEGV, Segmentation fault); "))
        << r.out;
    EXPECT_TRUE(has(r.out, "run --resume " + out.string())) << r.out;

    // Resumed without the variable, it ends as the uninterrupted run did.
    const run_result resumed = run("run --resume " + out.string(), plugins.string());
    ASSERT_EQ(resumed.exit_code, 0) << resumed.out;
    EXPECT_EQ(::altgrad::host::run::read_summary(out / "summary.json").status, "finished");
    EXPECT_EQ(comparable_metrics(s.path / "whole"), comparable_metrics(out));
}

namespace altgrad::test {
namespace {

// Products through accumulators (docs/accumulation.md): a run trains, its
// resolved config keeps them, they change the result (a 9-bit accumulator
// summing 4 products at a time is not float32), and a resume from a
// checkpoint ends bit for bit as the uninterrupted run. A format the model
// cannot round to nearest exactly is refused naming the key and the layer.
TEST(Accumulators, TrainChangeTheResultAndResumeBitForBit) {
    scratch s;
    const std::string acc =
        "[quantization.forward]\naccumulator = { format = \"bf16\", mma_depth = 4, promote_every = 8 }\n"
        "[quantization.weight_gradient]\naccumulator = { format = \"fp16\", rounding = \"nearest\" }\n"
        "[[quantization.rules]]\npattern = \"lm_head\"\nforward = { accumulator = \"none\" }\n";
    const fs::path plain = s.config("plain"), with = s.config("with", acc);
    const fs::path whole = s.path / "whole", resumed = s.path / "resumed";
    ASSERT_EQ(run("run " + plain.string() + " --out " + (s.path / "plain").string()).exit_code, 0);
    const run_result r = run("run " + with.string() + " --out " + whole.string());
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(comparable_metrics(whole), comparable_metrics(s.path / "plain"));
    std::ifstream resolved(whole / "config.toml");
    const std::string text((std::istreambuf_iterator<char>(resolved)), std::istreambuf_iterator<char>());
    EXPECT_TRUE(has(text,
                    "[quantization.forward]\naccumulator = { format = \"bf16\", rounding = \"toward-zero\", "
                    "mma_depth = 4, promote_every = 8 }\n"))
        << text;
    EXPECT_TRUE(has(text, "pattern = \"lm_head\"\nforward = { accumulator = \"none\" }\n")) << text;

    fs::copy(whole, resumed, fs::copy_options::recursive);
    fs::remove_all(resumed / "checkpoints" / "step_0000012");
    const run_result again = run("run --resume " + resumed.string());
    ASSERT_EQ(again.exit_code, 0) << again.out;
    EXPECT_TRUE(has(again.out, "at step 8")) << again.out;
    EXPECT_EQ(comparable_metrics(resumed), comparable_metrics(whole));

    const fs::path bad =
        s.config("bad",
                 "[quantization.input_gradient]\naccumulator = { format = \"fp32\" }\n"
                 "[[quantization.rules]]\npattern = \"blocks.0.mlp.*\"\n"
                 "input_gradient = { accumulator = { format = \"float\", params = { mantissa_bits = 22 }, "
                 "rounding = \"nearest\" } }\n");
    const run_result refused = run("run " + bad.string() + " --out " + (s.path / "bad").string());
    EXPECT_EQ(refused.exit_code, 1) << refused.out;
    EXPECT_TRUE(has(refused.out, bad.string() +
                                     ": key 'quantization.rules[0].input_gradient.accumulator' "
                                     "(blocks.0.mlp.fc): accumulator format 'float': nearest rounding"))
        << refused.out;
}

// Products through a GPU instruction (an accumulator plugin): a run trains
// and keeps them in its resolved config, per-tensor scaled and in
// DeepSeek-V3's blocks (as long as promote_every: their scales multiply
// each promoted sum); blocks of another length are refused naming the key
// and the layer.
TEST(Accumulators, InstructionsTrainPerTensorAndInBlocks) {
    scratch s;
    const std::string acc =
        "[quantization.forward]\naccumulator = { instruction = \"sm90_wgmma_fp8\", promote_every = 64 }\n"
        "[quantization.input_gradient]\naccumulator = { instruction = \"sm90_wgmma_fp16\" }\n";
    const fs::path with = s.config("with", acc);
    const run_result r = run("run " + with.string() + " --out " + (s.path / "with").string());
    ASSERT_EQ(r.exit_code, 0) << r.out;
    std::ifstream resolved(s.path / "with" / "config.toml");
    const std::string text((std::istreambuf_iterator<char>(resolved)), std::istreambuf_iterator<char>());
    EXPECT_TRUE(has(text, "accumulator = { instruction = \"sm90_wgmma_fp8\", promote_every = 64 }\n"))
        << text;

    const std::string blocks = "scaling = \"none\"\ngranularity = \"block\"\nblock_size = 64\n";
    const std::string every =
        "[quantization.weight_gradient]\naccumulator = { instruction = "
        "\"sm90_wgmma_fp8\", promote_every = 64 }\n";
    const fs::path deepseek = s.config("deepseek", blocks + every);
    const run_result d = run("run " + deepseek.string() + " --out " + (s.path / "deepseek").string());
    ASSERT_EQ(d.exit_code, 0) << d.out;

    const fs::path other = s.config("other", "granularity = \"block\"\nblock_size = 32\n" + every);
    const run_result refused = run("run " + other.string() + " --out " + (s.path / "other").string());
    EXPECT_EQ(refused.exit_code, 1) << refused.out;
    EXPECT_TRUE(
        has(refused.out, other.string() +
                             ": key 'quantization.weight_gradient.accumulator' (blocks.0.attn.qkv): "
                             "blocks through instruction 'sm90_wgmma_fp8' are as long as promote_every"))
        << refused.out;
}

}  // namespace
}  // namespace altgrad::test

namespace altgrad::test {
namespace {

bool cpu_has_avx512() {
    std::ifstream in("/proc/cpuinfo");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return has(text, " avx512f");
}

// The demo's config (configs/e5m2_short.toml: the default model) on the test corpus for 20 steps,
// under environment `env`, into `out`; its metrics without the timing fields.
std::vector<std::string> demo_metrics(const scratch& s, const std::string& env, const std::string& out) {
    const std::string config = std::string(ALTGRAD_CONFIG_DIR) + "/e5m2_short.toml";
    const run_result r = run("run " + config + " --out " + (s.path / out).string() +
                                 " --set data.path=" + (s.path / "corpus.txt").string() +
                                 " --set training.max_steps=20 --set training.eval_interval=10 "
                                 "--set training.warmup_steps=2 --set training.threads=1",
                             kPlugins, env + " ");
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_TRUE(has(r.out, env.find("native") == std::string::npos
                               ? "cpu kernels OpenBLAS Haswell, ATen avx2 (pinned"
                               : "cpu kernels as this CPU chooses them (ALTGRAD_CPU_KERNELS=native"))
        << r.out;
    return comparable_metrics(s.path / out);
}

// The host pins OpenBLAS's and ATen's kernels (util/cpu_kernels.hpp): a run forced onto other
// kernels from outside computes the same bits. Unpinned, on a CPU where the forced kernels exist,
// the same two environments give different bits (the control: the pin is what makes them equal).
TEST(Reproducibility, ForcedCpuKernelsGiveTheSameBits) {
    scratch s;
    const std::string skylake = "OPENBLAS_CORETYPE=SkylakeX ATEN_CPU_CAPABILITY=avx512";
    const std::string zen = "OPENBLAS_CORETYPE=Zen ATEN_CPU_CAPABILITY=default";
    const auto a = demo_metrics(s, skylake, "a"), b = demo_metrics(s, zen, "b");
    ASSERT_FALSE(a.empty());
    EXPECT_EQ(a, b);
    if (!cpu_has_avx512()) {
        std::cout << "no AVX-512 here: the unpinned control (SkylakeX kernels) cannot run\n";
        return;
    }
    const auto c = demo_metrics(s, "ALTGRAD_CPU_KERNELS=native " + skylake, "c");
    const auto d = demo_metrics(s, "ALTGRAD_CPU_KERNELS=native " + zen, "d");
    EXPECT_NE(c, d) << "unpinned, SkylakeX/avx512 and Zen/default kernels computed the same bits";
}

// The first line of `kind` (and, for tensor lines, of `tensor`) at `step` in a run's metrics.
nlohmann::json metrics_line(const fs::path& run_dir, const std::string& kind, int64_t step,
                            const std::string& tensor = "") {
    std::ifstream in(run_dir / "metrics.jsonl");
    std::string line;
    while (std::getline(in, line)) {
        const auto j = nlohmann::json::parse(line);
        if (j.value("kind", "") == kind && j.value("step", int64_t{-1}) == step &&
            (tensor.empty() || j.value("tensor", "") == tensor))
            return j;
    }
    return nullptr;
}

double relative_difference(double a, double b) { return std::fabs(a - b) / std::fabs(b); }

// training.grad_accum: two micro-batches of 2 rows are the batch of 4 rows
// (the same rows: fill_batch's first_row), each backward at loss / 2, so in
// float32 the first step's loss and gradient norm are the whole batch's up to
// rounding (a mean of two means against one mean of four), and so is the
// validation loss (each evaluation batch a whole step's, in two pieces).
TEST(MicroBatches, TwoOfTwoRowsAreOneBatchOfFour) {
    scratch s;
    const fs::path cfg = s.config("fp32", "enabled = false\n");
    const std::string once = " --set training.max_steps=1 --set training.warmup_steps=0";
    ASSERT_EQ(run("run " + cfg.string() + once + " --out " + (s.path / "whole").string()).exit_code, 0);
    const run_result r =
        run("run " + cfg.string() + once + " --set training.batch_size=2 --set training.grad_accum=2 --out " +
            (s.path / "two").string());
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const auto whole = metrics_line(s.path / "whole", "train", 1),
               two = metrics_line(s.path / "two", "train", 1);
    ASSERT_FALSE(whole.is_null());
    ASSERT_FALSE(two.is_null());
    EXPECT_LT(relative_difference(two["loss"], whole["loss"]), 1e-6) << two["loss"] << " " << whole["loss"];
    EXPECT_LT(relative_difference(two["grad_norm"], whole["grad_norm"]), 1e-5)
        << two["grad_norm"] << " " << whole["grad_norm"];
    const auto val_whole = metrics_line(s.path / "whole", "val", 0),
               val_two = metrics_line(s.path / "two", "val", 0);
    ASSERT_FALSE(val_whole.is_null());
    EXPECT_LT(relative_difference(val_two["val_loss"], val_whole["val_loss"]), 1e-6);
    // One micro-batch of 2 rows alone is another batch: the test can tell.
    ASSERT_EQ(
        run("run " + cfg.string() + once + " --set training.batch_size=2 --out " + (s.path / "half").string())
            .exit_code,
        0);
    EXPECT_GT(relative_difference(metrics_line(s.path / "half", "train", 1)["loss"], whole["loss"]), 1e-4);
}

// A step of two micro-batches keeps one record per tensor: the first layer's
// input (embeddings through a LayerNorm, row by row: each row's values do not
// depend on the other rows) has, at step 1, the whole batch's amax (the larger
// of the halves'), its element count and the whole batch's overflow count
// (scaling none: every micro-batch at scale 1), and with delayed scaling the
// checkpoint's amax history holds that amax once, not once per micro-batch.
TEST(MicroBatches, AStepRecordsEachTensorOnce) {
    scratch s;
    const std::string input = "blocks.0.attn.qkv.input";
    const std::string once = " --set training.max_steps=1 --set training.warmup_steps=0";
    for (const std::string scaling : {"none", "delayed"}) {
        const fs::path cfg =
            s.config(scaling, "activation_format = \"e5m2\"\nscaling = \"" + scaling + "\"\n");
        const fs::path whole = s.path / (scaling + "-whole"), two = s.path / (scaling + "-two");
        ASSERT_EQ(run("run " + cfg.string() + once + " --out " + whole.string()).exit_code, 0);
        const run_result r =
            run("run " + cfg.string() + once +
                " --set training.batch_size=2 --set training.grad_accum=2 --out " + two.string());
        ASSERT_EQ(r.exit_code, 0) << r.out;
        const auto a = metrics_line(whole, "tensor", 1, input), b = metrics_line(two, "tensor", 1, input);
        ASSERT_FALSE(a.is_null());
        ASSERT_FALSE(b.is_null());
        EXPECT_EQ(b["amax"].get<double>(), a["amax"].get<double>()) << scaling;
        EXPECT_EQ(b["count"].get<double>(), 4.0 * 16 * 16) << scaling;
        if (scaling == "none") {
            EXPECT_EQ(b["overflow"].get<double>(), a["overflow"].get<double>());
            EXPECT_EQ(b["underflow"].get<double>(), a["underflow"].get<double>());
            continue;
        }
        const auto history = [&](const fs::path& run_dir) {
            const auto state =
                nlohmann::json::parse(std::ifstream(run_dir / "checkpoints" / "step_0000001" / "state.json"));
            for (const auto& site : state["sites"])
                if (site["name"] == input) return site["amax_history"];
            return nlohmann::json();
        };
        EXPECT_EQ(history(two), nlohmann::json::array({a["amax"]}));
        EXPECT_EQ(history(whole), nlohmann::json::array({a["amax"]}));
    }
}

// [quantization.communication] (issue #47): each micro-batch's parameter
// gradients are quantized before they are summed. In E5M2 at scale 1
// (scaling none, nearest), a step of one micro-batch leaves every weight's
// gradient on E5M2's grid, so its smallest non-zero magnitude is at least
// E5M2's smallest subnormal, 2^-16: range's dynamic_range (log2 of max over
// min non-zero |g|) is at most log2(amax) + 16. Sent as computed, some
// weight's gradient spans more than that (the test can fail). Each
// parameter's communication site has a tensor line, weight_gradient, with
// every element counted once per micro-batch.
TEST(Communication, GradientsAreSummedInTheirFormat) {
    scratch s;
    const std::string diagnostics = "[diagnostics]\nplugins = [\"range\"]\n";
    const fs::path cfg = s.config("comm", "", diagnostics);
    const std::string once =
        " --set training.max_steps=1 --set training.warmup_steps=0 --set training.grad_clip=0 --set "
        "quantization.diagnostic_interval=1";
    const std::string e5m2 =
        " --set 'quantization.communication.gradients={ format = \"e5m2\", rounding = \"nearest\", scaling = "
        "\"none\" }'";
    const fs::path sent = s.path / "sent", plain = s.path / "plain";
    const run_result r = run("run " + cfg.string() + once + e5m2 + " --out " + sent.string());
    ASSERT_EQ(r.exit_code, 0) << r.out;
    ASSERT_EQ(run("run " + cfg.string() + once + " --out " + plain.string()).exit_code, 0);
    // The widest margin over log2(amax) + 16 among the weights' gradients at step 1.
    const auto widest = [](const fs::path& run_dir) {
        double most = -INFINITY;
        int lines = 0;
        std::ifstream in(run_dir / "metrics.jsonl");
        std::string line;
        while (std::getline(in, line)) {
            const auto j = nlohmann::json::parse(line);
            if (j.value("kind", "") != "diagnostic" || j.value("step", 0) != 1 ||
                j.value("role", "") != "weight_gradient" ||
                j.value("tensor", "").find(".communication") != std::string::npos)
                continue;
            const auto& v = j["values"];
            most =
                std::max(most, v["dynamic_range"].get<double>() - (std::log2(v["amax"].get<double>()) + 16));
            ++lines;
        }
        EXPECT_GT(lines, 0) << run_dir;
        return most;
    };
    EXPECT_LE(widest(sent), 1e-9);
    EXPECT_GT(widest(plain), 1.0);
    const auto qkv = metrics_line(sent, "tensor", 1, "blocks.0.attn.qkv.weight.communication");
    ASSERT_FALSE(qkv.is_null());
    EXPECT_EQ(qkv["role"], "weight_gradient");
    EXPECT_EQ(qkv["format"], "e5m2");
    EXPECT_EQ(qkv["count"].get<double>(), 3.0 * 16 * 16);  // qkv is [3 * 16, 16]
    EXPECT_TRUE(metrics_line(plain, "tensor", 1, "blocks.0.attn.qkv.weight.communication").is_null());
    // Two micro-batches: each counted.
    const fs::path two = s.path / "two";
    ASSERT_EQ(run("run " + cfg.string() + once + e5m2 +
                  " --set training.batch_size=2 --set training.grad_accum=2 --out " + two.string())
                  .exit_code,
              0);
    EXPECT_EQ(metrics_line(two, "tensor", 1, "blocks.0.attn.qkv.weight.communication")["count"].get<double>(),
              2 * 3.0 * 16 * 16);
}

// The communication sites' scaling state (delayed: an amax history of its
// own per parameter) is checkpointed like any site's: a run resumed from its
// step-4 checkpoint ends with the uninterrupted run's metrics and weights.
TEST(Communication, AResumedRunKeepsItsBits) {
    scratch s;
    const fs::path cfg = s.config("comm_resume", "", "");
    const std::string args =
        " --set training.max_steps=8 --set output.checkpoint_interval=4 --set "
        "training.grad_accum=2 --set training.batch_size=2 --set "
        "'quantization.communication.gradients={ format = \"e4m3\", scaling = \"delayed\" }'";
    const fs::path whole = s.path / "whole", resumed = s.path / "resumed";
    ASSERT_EQ(run("run " + cfg.string() + args + " --out " + whole.string()).exit_code, 0);
    fs::copy(whole, resumed, fs::copy_options::recursive);
    fs::remove_all(resumed / "checkpoints" / "step_0000008");
    fs::remove(resumed / "summary.json");
    const run_result r = run("run --resume " + resumed.string());
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(comparable_metrics(resumed), comparable_metrics(whole));
    const auto bytes = [](const fs::path& p) {
        std::ifstream in(p, std::ios::binary);
        return std::string(std::istreambuf_iterator<char>(in), {});
    };
    const fs::path model = fs::path("checkpoints") / "step_0000008" / "model.pt";
    EXPECT_EQ(bytes(resumed / model), bytes(whole / model));
    EXPECT_NE(bytes(whole / "checkpoints" / "step_0000004" / "state.json").find("communication"),
              std::string::npos);
}

}  // namespace
}  // namespace altgrad::test
