// The sweep file (host/src/sweep/): parsing, expansion into runs in the
// documented order, run names, the one-line errors, run statuses read from
// run directories, and the Slurm job script. No LibTorch, no runs: the
// expected names and orders are worked out by hand from docs/sweeps.md.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "run/files.hpp"
#include "sweep/run_state.hpp"
#include "sweep/slurm.hpp"
#include "sweep/sweep_file.hpp"
#include "util/error.hpp"

namespace {

namespace fs = std::filesystem;
using namespace altgrad::host;
using namespace altgrad::host::sweep;

// A fresh folder holding a tiny config (name "tiny", seed 7), removed at the end.
class scratch {
public:
    scratch() {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        dir_ = fs::temp_directory_path() /
               ("altgrad-sweep-" + std::string(info->name()) + "-" + std::to_string(::getpid()));
        fs::remove_all(dir_);
        fs::create_directories(dir_ / "configs");
        write("configs/tiny.toml", "name = \"tiny\"\n[training]\nseed = 7\nmax_steps = 20\n");
    }
    ~scratch() { fs::remove_all(dir_); }
    void write(const std::string& rel, const std::string& text) const {
        fs::create_directories((dir_ / rel).parent_path());
        std::ofstream(dir_ / rel) << text;
    }
    // sweeps/s.toml with `text`, its configs relative to sweeps/.
    fs::path sweep(const std::string& text) const {
        write("sweeps/s.toml", text);
        return dir_ / "sweeps" / "s.toml";
    }
    const fs::path& path() const { return dir_; }

private:
    fs::path dir_;
};

const char* const kHeader = "name = \"formats\"\nconfigs = [\"../configs/tiny.toml\"]\n";

// The message of the error plan_runs(load_sweep(file)) throws ("" if none).
std::string error_of(const fs::path& file) {
    try {
        plan_runs(load_sweep(file));
    } catch (const error& e) {
        return e.what();
    }
    return "";
}

TEST(SweepFile, ExpandsConfigThenPointThenSeedWithStableNames) {
    scratch s;
    const fs::path file =
        s.sweep(std::string(kHeader) +
                "seeds = [42, 1]\n"
                "[grid]\n"
                "\"quantization.scaling\" = [\"none\", \"delayed\"]\n"
                "\"quantization.shadow_weights\" = [true, false]\n"
                "[[point]]\n"
                "set = [\"quantization.weight_format=e4m3\", \"quantization.scaling=delayed\"]\n");
    const std::vector<sweep_run> runs = plan_runs(load_sweep(file));
    // 4 grid points (the first key slowest) + 1 explicit point, 2 seeds each.
    ASSERT_EQ(runs.size(), 10u);
    const std::vector<std::string> names = {
        "tiny-scaling=none-shadow_weights=true-s42",     "tiny-scaling=none-shadow_weights=true-s1",
        "tiny-scaling=none-shadow_weights=false-s42",    "tiny-scaling=none-shadow_weights=false-s1",
        "tiny-scaling=delayed-shadow_weights=true-s42",  "tiny-scaling=delayed-shadow_weights=true-s1",
        "tiny-scaling=delayed-shadow_weights=false-s42", "tiny-scaling=delayed-shadow_weights=false-s1",
        "tiny-weight_format=e4m3-scaling=delayed-s42",   "tiny-weight_format=e4m3-scaling=delayed-s1"};
    for (size_t i = 0; i < runs.size(); ++i) {
        EXPECT_EQ(runs[i].index, i);
        EXPECT_EQ(runs[i].name, names[i]) << i;
        EXPECT_EQ(runs[i].point, i / 2);
        EXPECT_EQ(runs[i].seed, i % 2 == 0 ? 42 : 1);
        EXPECT_EQ(runs[i].config, (s.path() / "configs" / "tiny.toml").lexically_normal());
    }
    // The sweep's default threads first, then the point's, then the seed.
    EXPECT_EQ(runs[2].overrides,
              (std::vector<std::string>{"training.threads=1", "quantization.scaling=none",
                                        "quantization.shadow_weights=false", "training.seed=42"}));
}

TEST(SweepFile, GridKeysKeepFileOrderAndSeedsDefaultToTheConfigs) {
    scratch s;
    // Not alphabetical: training.* before model.*; a float axis; sweep-wide sets.
    const fs::path file = s.sweep(std::string(kHeader) +
                                  "set = [\"training.threads=2\", \"training.max_steps=10\"]\n"
                                  "[grid]\n"
                                  "\"training.learning_rate\" = [1e-3, 1.0]\n"
                                  "\"model.n_layer\" = [1]\n");
    const std::vector<sweep_run> runs = plan_runs(load_sweep(file));
    ASSERT_EQ(runs.size(), 2u);
    EXPECT_EQ(runs[0].name, "tiny-learning_rate=0.001-n_layer=1-s7");
    EXPECT_EQ(runs[1].name, "tiny-learning_rate=1.0-n_layer=1-s7");
    // The sweep sets threads itself: no default added.
    EXPECT_EQ(runs[1].overrides,
              (std::vector<std::string>{"training.threads=2", "training.max_steps=10",
                                        "training.learning_rate=1.0", "model.n_layer=1", "training.seed=7"}));
}

TEST(SweepFile, NoAxesIsOneRunPerConfigAndSeed) {
    scratch s;
    s.write("configs/other.toml", "[training]\nseed = 3\n");  // no name: the file's stem
    const fs::path file =
        s.sweep("name = \"x\"\nconfigs = [\"../configs/tiny.toml\", \"../configs/other.toml\"]\n");
    const std::vector<sweep_run> runs = plan_runs(load_sweep(file));
    ASSERT_EQ(runs.size(), 2u);
    EXPECT_EQ(runs[0].name, "tiny-s7");
    EXPECT_EQ(runs[1].name, "other-s3");
    EXPECT_EQ(runs[1].overrides, (std::vector<std::string>{"training.threads=1", "training.seed=3"}));
}

// A config written as a table has overrides of its own: after the sweep's `set`, before the
// point's, for its runs only, and not in their names (the recipe's own choice, pinned).
TEST(SweepFile, AConfigsOwnSetGoesBetweenTheSweepsAndThePoints) {
    scratch s;
    s.write("configs/other.toml", "[training]\nseed = 3\n");
    const fs::path file = s.sweep(
        "name = \"x\"\nconfigs = [{ path = \"../configs/tiny.toml\", set = [\"model.n_layer=2\"] },\n"
        "  \"../configs/other.toml\"]\nseeds = [5]\nset = [\"model.n_layer=1\"]\n"
        "[[point]]\nset = [\"model.n_head=2\"]\n");
    const std::vector<sweep_run> runs = plan_runs(load_sweep(file));
    ASSERT_EQ(runs.size(), 2u);
    EXPECT_EQ(runs[0].name, "tiny-n_head=2-s5");
    EXPECT_EQ(runs[0].overrides,
              (std::vector<std::string>{"training.threads=1", "model.n_layer=1", "model.n_layer=2",
                                        "model.n_head=2", "training.seed=5"}));
    EXPECT_EQ(runs[1].name, "other-n_head=2-s5");
    EXPECT_EQ(runs[1].overrides, (std::vector<std::string>{"training.threads=1", "model.n_layer=1",
                                                           "model.n_head=2", "training.seed=5"}));
    const std::string f = file.string();
    const auto error_for = [&](const std::string& entry) {
        return error_of(s.sweep("name = \"x\"\nconfigs = [" + entry + "]\n"));
    };
    EXPECT_EQ(error_for("{ path = \"../configs/tiny.toml\", sett = [] }"),
              f + ": key 'configs[1].sett': unknown key (a typo?); did you mean 'configs[1].set'?");
    EXPECT_EQ(error_for("{ set = [\"model.n_layer=1\"] }"),
              f + ": key 'configs[1].path': missing (the config file)");
    EXPECT_EQ(error_for("{ path = \"../configs/tiny.toml\", set = [\"model.n_layer\"] }"),
              f + ": key 'configs[1].set': value 1 \"model.n_layer\": expected KEY=VALUE, e.g. "
                  "\"training.max_steps=50\"");
}

// A point's own name replaces its overrides in its runs' names (a recipe's ablations read as words
// there, not as inline tables); the grid's points and unnamed points keep theirs.
TEST(SweepFile, APointsNameNamesItsRuns) {
    scratch s;
    const fs::path file =
        s.sweep(std::string(kHeader) +
                "[grid]\n\"model.n_layer\" = [1]\n"
                "[[point]]\nname = \"no_sr\"\nset = [\"quantization.backward_rounding=nearest\"]\n"
                "[[point]]\nset = [\"quantization.scaling=none\"]\n");
    const std::vector<sweep_run> runs = plan_runs(load_sweep(file));
    ASSERT_EQ(runs.size(), 3u);
    EXPECT_EQ(runs[0].name, "tiny-n_layer=1-s7");
    EXPECT_EQ(runs[1].name, "tiny-no_sr-s7");
    EXPECT_EQ(runs[1].overrides,
              (std::vector<std::string>{"training.threads=1", "quantization.backward_rounding=nearest",
                                        "training.seed=7"}));
    EXPECT_EQ(runs[2].name, "tiny-scaling=none-s7");
    const std::string f = file.string();
    const auto error_for = [&](const std::string& name_line) {
        return error_of(
            s.sweep(std::string(kHeader) + "[[point]]\n" + name_line + "set = [\"model.n_layer=1\"]\n"));
    };
    EXPECT_EQ(error_for("name = \"no sr\"\n"), f + ": key 'point[1].name': expected a string of letters, "
                                                   "digits, '_', '.', '=', '+', '-', got \"no sr\"");
    EXPECT_EQ(
        error_for("name = 3\n"),
        f + ": key 'point[1].name': expected a string of letters, digits, '_', '.', '=', '+', '-', got 3");
}

// nodes and ntasks_per_node: every run's at the top, a point's own for its runs.
TEST(SweepFile, RanksPerRunAtTheTopAndPerPoint) {
    scratch s;
    const fs::path file = s.sweep(std::string(kHeader) +
                                  "ntasks_per_node = 2\n[grid]\n\"model.n_layer\" = [1]\n"
                                  "[[point]]\nset = [\"model.n_layer=2\"]\nnodes = 3\n"
                                  "[[point]]\nset = [\"model.n_layer=3\"]\nntasks_per_node = 1\n");
    const std::vector<sweep_run> runs = plan_runs(load_sweep(file));
    ASSERT_EQ(runs.size(), 3u);
    EXPECT_TRUE((runs[0].layout == rank_layout{1, 2}));  // the grid's: the top's
    EXPECT_TRUE((runs[1].layout == rank_layout{3, 2}));
    EXPECT_TRUE((runs[2].layout == rank_layout{1, 1}));
    EXPECT_EQ(runs[1].layout.ranks(), 6);
    EXPECT_TRUE((plan_runs(load_sweep(s.sweep(kHeader)))[0].layout == rank_layout{1, 1}));
    const std::string f = file.string();
    EXPECT_EQ(error_of(s.sweep(std::string(kHeader) + "nodes = 0\n")),
              f + ": key 'nodes': expected an integer 1..1024, got 0");
    EXPECT_EQ(error_of(s.sweep(std::string(kHeader) +
                               "[[point]]\nset = [\"model.n_layer=1\"]\nntasks_per_node = \"2\"\n")),
              f + ": key 'point[1].ntasks_per_node': expected an integer 1..1024, got \"2\"");
    EXPECT_EQ(error_of(s.sweep(std::string(kHeader) + "ntask_per_node = 2\n")),
              f + ": key 'ntask_per_node': unknown key (a typo?); did you mean 'ntasks_per_node'?");
}

TEST(SweepFile, NamesUseTheFullKeyWhenTheLastPartIsAmbiguousAndReplaceOddCharacters) {
    const std::vector<std::string> keys = {"quantization.granularity", "quantization.weight.granularity",
                                           "data.path"};
    EXPECT_EQ(run_name("c", {"quantization.granularity=block", "data.path=/data/my corpus"}, keys, 3),
              "c-quantization.granularity=block-path=_data_my_corpus-s3");
    EXPECT_EQ(run_name("c", {"training.learning_rate=6e-4"}, {"training.learning_rate"}, 0),
              "c-learning_rate=6e-4-s0");
}

TEST(SweepFile, BadFilesGiveOneLineNamingTheFileAndKey) {
    scratch s;
    const std::string f = (s.path() / "sweeps" / "s.toml").string();
    const auto expect = [&](const std::string& text, const std::string& message) {
        const std::string got = error_of(s.sweep(text));
        EXPECT_NE(got.find(message), std::string::npos) << "got: " << got << "\nexpected: " << message;
        EXPECT_EQ(got.find('\n'), std::string::npos) << got;
        EXPECT_EQ(got.rfind(f, 0), 0u) << got;  // starts with the sweep file
    };
    expect("configs = [\"../configs/tiny.toml\"]\n", f + ": key 'name': missing");
    expect("name = \"a b\"\nconfigs = [\"../configs/tiny.toml\"]\n",
           f + ": key 'name': expected a string of letters");
    expect("name = \"x\"\n", f + ": key 'configs': missing");
    expect("name = \"x\"\nconfigs = []\n", f + ": key 'configs': expected a non-empty array");
    expect(std::string(kHeader) + "seed = [1]\n",
           f + ": key 'seed': unknown key (a typo?); did you mean 'seeds'?");
    expect(std::string(kHeader) + "seeds = [1, -2]\n", f + ": key 'seeds': value 2: expected an integer 0..");
    expect(std::string(kHeader) + "set = [\"training.threads\"]\n",
           f + ": key 'set': value 1 \"training.threads\": expected KEY=VALUE");
    expect(std::string(kHeader) + "[grid]\n\"model.n_layer\" = [1, [2]]\n",
           f + ": key 'grid.\"model.n_layer\"': value 2: expected a string, integer, float or boolean, got "
               "an array");
    expect(std::string(kHeader) + "[grid]\n\"model.n_layer\" = []\n",
           f + ": key 'grid.\"model.n_layer\"': expected a non-empty array");
    expect(std::string(kHeader) + "[[point]]\nsets = [\"a=1\"]\n",
           f + ": key 'point[1].sets': unknown key (a typo?); did you mean 'point[1].set'?");
    expect(std::string(kHeader) + "name = \"y\"\n", f + ":3: not valid TOML");
    expect(
        "name = \"x\"\nconfigs = [\"../configs/missing.toml\"]\n",
        f + ": key 'configs': " + (s.path() / "configs" / "missing.toml").string() + ": no such config file");
}

TEST(SweepFile, AGridOfTooManyCombinationsIsRefusedBeforeExpanding) {
    scratch s;
    const auto grid = [](int keys, int values) {
        std::string text = std::string(kHeader) + "[grid]\n";
        for (int k = 0; k < keys; ++k) {
            text += "\"k" + std::to_string(k) + "\" = [0";
            for (int v = 1; v < values; ++v) text += ", " + std::to_string(v);
            text += "]\n";
        }
        return text;
    };
    // 10^5 combinations from five keys of ten values: over the limit of 10000.
    EXPECT_NE(error_of(s.sweep(grid(5, 10))).find("s.toml: key 'grid': more than 10000 combinations"),
              std::string::npos);
    // Four keys (10^4 points) is at the limit and expands.
    EXPECT_EQ(expand_points(load_sweep(s.sweep(grid(4, 10)))).size(), 10000u);
    EXPECT_NE(error_of(s.sweep(grid(65, 1))).find("s.toml: key 'grid': 65 keys: at most 64"),
              std::string::npos);
}

TEST(SweepFile, AMissingFileOrAFolderIsSaidSo) {
    scratch s;
    const auto message = [](const fs::path& p) {
        try {
            load_sweep(p);
        } catch (const error& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    EXPECT_EQ(message(s.path() / "none.toml"), (s.path() / "none.toml").string() + ": no such sweep file");
    EXPECT_EQ(message(s.path() / "configs"),
              (s.path() / "configs").string() + ": not a file (expected a sweep file)");
}

TEST(SweepFile, ABadOverrideFailsTheWholeSweepNamingThePointAndTheKey) {
    scratch s;
    const std::string f = (s.path() / "sweeps" / "s.toml").string();
    const std::string got =
        error_of(s.sweep(std::string(kHeader) + "[[point]]\nset = [\"model.n_layer=1\"]\n"
                                                "[[point]]\nset = [\"training.max_steps=-5\"]\n"));
    EXPECT_EQ(got.rfind(f + ": point 2 (training.max_steps=-5), seed 7: ", 0), 0u) << got;
    EXPECT_NE(got.find("key 'training.max_steps'"), std::string::npos) << got;
    const std::string typo =
        error_of(s.sweep(std::string(kHeader) + "[grid]\n\"training.max_stepz\" = [5]\n"));
    EXPECT_NE(typo.find("point 1 (training.max_stepz=5)"), std::string::npos) << typo;
    EXPECT_NE(typo.find("did you mean 'training.max_steps'"), std::string::npos) << typo;
}

TEST(SweepFile, TwoRunsOfOneNameAreAnErrorNamingBothPoints) {
    scratch s;
    const std::string got =
        error_of(s.sweep(std::string(kHeader) + "[[point]]\nset = [\"model.n_layer=1\"]\n"
                                                "[[point]]\nset = [\"model.n_layer=2\"]\n"
                                                "[[point]]\nset = [\"model.n_layer=1\"]\n"));
    EXPECT_NE(got.find("two runs are named tiny-n_layer=1-s7"), std::string::npos) << got;
    EXPECT_NE(got.find("point 1 (model.n_layer=1)"), std::string::npos) << got;
    EXPECT_NE(got.find("point 3 (model.n_layer=1)"), std::string::npos) << got;
}

run::summary_record summary(const std::string& status) {
    run::summary_record r;
    r.run_id = "r";
    r.name = "tiny";
    r.status = status;
    r.failure_mode = "none";
    return r;
}

void add_checkpoint(const fs::path& dir, int64_t step) {
    run::checkpoint_state st;
    st.run_id = "r";
    st.step = step;
    fs::create_directories(run::checkpoint_dir(dir, step));
    run::write_checkpoint_state(run::checkpoint_dir(dir, step), st);
}

TEST(RunState, StatusComesFromTheSummaryAndTheCheckpoints) {
    scratch s;
    const fs::path d = s.path() / "run";
    EXPECT_EQ(status_of(d), run_status::fresh);  // no folder
    fs::create_directories(d);
    EXPECT_EQ(status_of(d), run_status::fresh);  // empty: started fresh
    add_checkpoint(d, 20);
    EXPECT_EQ(status_of(d), run_status::interrupted);  // killed: no summary, a checkpoint
    run::write_summary(d, summary("interrupted"));
    EXPECT_EQ(status_of(d), run_status::interrupted);
    run::write_summary(d, summary("crashed"));
    EXPECT_EQ(status_of(d), run_status::interrupted);
    run::write_summary(d, summary("error"));
    EXPECT_EQ(status_of(d), run_status::failed);  // retried from the start
    run::write_summary(d, summary("collapsed"));
    EXPECT_EQ(status_of(d), run_status::collapsed);
    run::write_summary(d, summary("finished"));
    EXPECT_EQ(status_of(d), run_status::finished);
    fs::remove_all(run::checkpoints_dir(d));
    run::write_summary(d, summary("crashed"));
    EXPECT_EQ(status_of(d), run_status::failed);                   // crashed before its first checkpoint
    std::ofstream(run::summary_file(d)) << "{\"status\": \"fini";  // cut short while written
    EXPECT_EQ(status_of(d), run_status::fresh);
    EXPECT_STREQ(status_name(run_status::fresh), "new");
}

TEST(RunState, RunArgumentsStartFreshOrResume) {
    sweep_run r;
    r.config = "configs/tiny.toml";
    r.name = "tiny-s7";
    r.overrides = {"training.threads=1", "training.seed=7"};
    EXPECT_EQ(
        run_command("/h", "/p", "out", r, run_status::fresh),
        (std::vector<std::string>{"/h", "--plugins", "/p", "run", "configs/tiny.toml", "--out", "out/tiny-s7",
                                  "--set", "training.threads=1", "--set", "training.seed=7"}));
    EXPECT_EQ(
        run_command("/h", "/p", "out", r, run_status::interrupted),
        (std::vector<std::string>{"/h", "--plugins", "/p", "run", "--resume", "out/tiny-s7", "--fallback"}));
    // One rank: srun is not needed.
    EXPECT_EQ(run_command("/h", "/p", "out", r, run_status::interrupted, rank_launcher::srun),
              run_command("/h", "/p", "out", r, run_status::interrupted));
    // 2 nodes x 3 ranks: six ranks started here by the host, or by srun in their allocation.
    r.layout = {2, 3};
    EXPECT_EQ(run_command("/h", "/p", "out", r, run_status::interrupted),
              (std::vector<std::string>{"/h", "--plugins", "/p", "run", "--resume", "out/tiny-s7",
                                        "--fallback", "--nproc", "6"}));
    EXPECT_EQ(run_command("/h", "/p", "out", r, run_status::interrupted, rank_launcher::srun),
              (std::vector<std::string>{"srun", "--nodes=2", "--ntasks-per-node=3", "--ntasks=6",
                                        "--kill-on-bad-exit=1", "/h", "--plugins", "/p", "run", "--resume",
                                        "out/tiny-s7", "--fallback"}));
    EXPECT_EQ(shell_words({"run", "a b", "it's", "x=1"}), "run 'a b' 'it'\\''s' x=1");
}

TEST(RunState, OnlyAMarkedSweepFoldersLogsAndSlurmAreHousekeeping) {
    scratch s;
    const fs::path out = s.path() / "out";
    fs::create_directories(out / "logs");
    fs::create_directories(out / "slurm");
    EXPECT_FALSE(is_sweep_housekeeping(out / "logs"));  // not marked: report must still refuse it
    mark_sweep_folder(out, s.path() / "sweeps" / "s.toml");
    EXPECT_TRUE(is_sweep_housekeeping(out / "logs"));
    EXPECT_TRUE(is_sweep_housekeeping((out / "slurm").string() + "/"));  // as a shell's */ names it
    EXPECT_FALSE(is_sweep_housekeeping(out / "tiny-s7"));
}

TEST(Slurm, ArrayListsAreCompactRanges) {
    EXPECT_EQ(array_list({0, 1, 2, 5, 7, 8, 9}), "0-2,5,7-9");
    EXPECT_EQ(array_list({3}), "3");
    EXPECT_EQ(array_list({4, 6}), "4,6");
}

TEST(Slurm, TheJobScriptArraysOnlyTheRunsNotDone) {
    scratch s;
    const fs::path file =
        s.sweep(std::string(kHeader) + "seeds = [1, 2]\n[grid]\n\"model.n_layer\" = [1, 2, 3]\n");
    const std::vector<sweep_run> runs = plan_runs(load_sweep(file));
    ASSERT_EQ(runs.size(), 6u);
    const fs::path out = s.path() / "out";
    // Runs 0 and 2 finished, 4 collapsed, 3 interrupted (resumed by its task), 1 and 5 never started.
    for (const size_t i : {0, 2, 4, 3}) fs::create_directories(run_dir(out, runs[i]));
    run::write_summary(run_dir(out, runs[0]), summary("finished"));
    run::write_summary(run_dir(out, runs[2]), summary("finished"));
    run::write_summary(run_dir(out, runs[4]), summary("collapsed"));
    add_checkpoint(run_dir(out, runs[3]), 10);
    std::vector<size_t> todo;
    for (const sweep_run& r : runs)
        if (!is_done(status_of(run_dir(out, r)))) todo.push_back(r.index);
    const std::string script = sbatch_script({"formats", todo, "/opt/ag/bin/altgrad-host", "/opt/ag/plugins",
                                              "/shared/s.toml", "/shared/runs/formats"});
    EXPECT_EQ(script,
              "#!/bin/bash\n"
              "# The sweep formats as a Slurm job array, written by altgrad-host sweep --slurm\n"
              "# (docs/sweeps.md): one task per run not yet finished; a task runs, resumes or\n"
              "# skips run $SLURM_ARRAY_TASK_ID, so a requeued task continues from its checkpoint.\n"
              "#SBATCH --job-name=formats\n"
              "#SBATCH --array=1,3,5\n"
              "#SBATCH --cpus-per-task=1\n"
              "#SBATCH --requeue\n"
              "#SBATCH --output=/shared/runs/formats/logs/slurm-%A_%a.log\n"
              "#SBATCH --open-mode=append\n"
              "exec /opt/ag/bin/altgrad-host --plugins /opt/ag/plugins sweep /shared/s.toml --out "
              "/shared/runs/formats "
              "--task \"$SLURM_ARRAY_TASK_ID\"\n");
    // Runs of 2 nodes x 4 ranks: their own script, their allocation, the ranks started by srun.
    slurm_job ranks{"formats",
                    {2},
                    "/opt/ag/bin/altgrad-host",
                    "/opt/ag/plugins",
                    "/shared/s.toml",
                    "/shared/runs/formats"};
    ranks.layout = {2, 4};
    const std::string multi = sbatch_script(ranks);
    EXPECT_NE(multi.find("#SBATCH --array=2\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=4\n"
                         "#SBATCH --cpus-per-task=1\n"),
              std::string::npos)
        << multi;
    EXPECT_NE(multi.find("--task \"$SLURM_ARRAY_TASK_ID\" --srun\n"), std::string::npos) << multi;
    EXPECT_EQ(script_file("/o", {}), fs::path("/o/slurm/sweep.sbatch"));
    EXPECT_EQ(script_file("/o", {2, 4}), fs::path("/o/slurm/sweep-2x4.sbatch"));
    // Paths with spaces are quoted in the exec line, but cannot be in an #SBATCH line.
    EXPECT_NE(sbatch_script({"f", {0}, "/my bin/altgrad-host", "/p", "/s.toml", "/o"})
                  .find("exec '/my bin/altgrad-host'"),
              std::string::npos);
    EXPECT_THROW(sbatch_script({"f", {0}, "/h", "/p", "/s.toml", "/my runs"}), error);
}

TEST(Slurm, SlurmArgsSplitOnWhitespaceHonouringQuotes) {
    EXPECT_EQ(split_arguments("  --partition=debug --time \"1:00:00\"  --comment='a b'\t-N1 "),
              (std::vector<std::string>{"--partition=debug", "--time", "1:00:00", "--comment=a b", "-N1"}));
    EXPECT_EQ(split_arguments(""), std::vector<std::string>{});
    EXPECT_EQ(split_arguments("''"), std::vector<std::string>{""});
    EXPECT_THROW(split_arguments("--comment='a b"), usage_error);
}

}  // namespace
