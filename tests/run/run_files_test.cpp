// The run directory's records (host/src/run/): each writer against its
// reader, exact numbers through the checkpoint state, the metrics lines of
// hosts before "kind", and damaged files refused naming the file and key.
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <boost/crc.hpp>
#include <nlohmann/json.hpp>

#include "run/files.hpp"
#include "run/supervise.hpp"

namespace altgrad::host::run {
namespace {

class scratch {
public:
    scratch() {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        path_ = fs::temp_directory_path() /
                ("altgrad-run-" + std::string(info->name()) + "-" + std::to_string(::getpid()));
        fs::remove_all(path_);
        fs::create_directories(path_);
    }
    ~scratch() { fs::remove_all(path_); }
    const fs::path& path() const { return path_; }

private:
    fs::path path_;
};

std::string read(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

void write(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
}

// The same bits (NaN equals NaN).
bool same(double a, double b) {
    return std::memcmp(&a, &b, sizeof a) == 0 || (std::isnan(a) && std::isnan(b));
}

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const error& e) {
        return e.what();
    }
    return "(no error)";
}

TEST(Metrics, EveryKindRoundTripsWithItsKindAndRunId) {
    scratch tmp;
    const fs::path file = tmp.path() / "metrics.jsonl";
    {
        metrics_writer w(file, "e5m2_short-2", false);
        w.write(train_line{1,
                           {{"loss", 4.25},
                            {"lr", 6e-4},
                            {"grad_norm", NAN},
                            {"tokens_per_s", 9000.5},
                            {"grad_sparsity", 0.01},
                            {"overflow_rate", 0.0},
                            {"underflow_rate", 0.125}}});
        w.write(val_line{1, {{"val_loss", 4.5}}});
        w.write(tensor_line{2,
                            "blocks.0.mlp.fc.weight",
                            "weight",
                            "e5m2",
                            {{"scale", 0.5},
                             {"amax", 3.75},
                             {"overflow", 7},
                             {"underflow", 0},
                             {"count", 1000},
                             {"bit_stall_rate", 0.25}}});
        w.write(
            tensor_line{2,
                        "blocks.0.mlp.fc.input",
                        "activation",
                        "e5m2",
                        {{"scale", 2}, {"amax", 1.5}, {"overflow", 0}, {"underflow", 3}, {"count", 4096}}});
        w.write(diagnostic_line{
            2, "stiffness", "*", "all", {{"stiffness_mean", 0.01}, {"stiffness_max", INFINITY}}});
        event_line sw{3, "switch_format", "mantissa_shift", "3 non-finite steps"};
        sw.tensor = "blocks.0.attn.qkv.weight", sw.from = "e7m0", sw.to = "e5m2";
        w.write(sw);
        event_line clip{3, "clip_grad_norm", "partition_clip", "overflow 2%"};
        clip.value = 0.5;
        w.write(clip);
        event_line c{4, "collapse", "host", "loss not finite"};
        c.mode = "nan_loss", c.evidence_step = 3;
        w.write(c);
    }
    // Each line leads with kind, run_id, step: pandas.read_json(lines=True) can filter by kind.
    std::istringstream lines(read(file));
    std::string first;
    std::getline(lines, first);
    EXPECT_EQ(first.rfind("{\"kind\":\"train\",\"run_id\":\"e5m2_short-2\",\"step\":1,", 0), 0u) << first;
    EXPECT_NE(first.find("\"grad_norm\":null"), std::string::npos) << first;

    const metrics_contents m = read_metrics(file);
    EXPECT_TRUE(m.problems.empty()) << m.problems.front();
    EXPECT_EQ(m.run_id, "e5m2_short-2");
    ASSERT_EQ(m.lines.size(), 8u);
    const char* kinds[] = {"train", "val", "tensor", "tensor", "diagnostic", "event", "event", "event"};
    for (size_t k = 0; k < 8; ++k) EXPECT_STREQ(kind_name(m.lines[k]), kinds[k]) << k;
    const auto& t = std::get<train_line>(m.lines[0]);
    EXPECT_EQ(t.step, 1);
    EXPECT_EQ(t.values.get("loss"), 4.25);
    EXPECT_EQ(t.values.get("lr"), 6e-4);
    EXPECT_TRUE(t.values.has("grad_norm"));  // written as null: present, not finite
    EXPECT_TRUE(std::isnan(t.values.get("grad_norm")));
    EXPECT_EQ(t.values.get("underflow_rate"), 0.125);
    const auto& w = std::get<tensor_line>(m.lines[2]);
    EXPECT_EQ(w.values.get("overflow"), 7);
    EXPECT_EQ(w.values.get("count"), 1000);
    EXPECT_EQ(w.overflow_rate(), 0.007);
    EXPECT_EQ(w.bit_stall_rate(), 0.25);
    EXPECT_FALSE(std::get<tensor_line>(m.lines[3]).values.has("bit_stall_rate"));
    const auto& d = std::get<diagnostic_line>(m.lines[4]);
    ASSERT_EQ(d.values.size(), 2u);
    EXPECT_EQ(d.values[0].first, "stiffness_mean");  // the plugin's order, not sorted
    EXPECT_TRUE(std::isnan(d.values[1].second));     // Inf is written as null
    const auto& e = std::get<event_line>(m.lines[5]);
    EXPECT_EQ(e.to, "e5m2");
    EXPECT_EQ(*std::get<event_line>(m.lines[6]).value, 0.5);
    EXPECT_EQ(std::get<event_line>(m.lines[7]).mode, "nan_loss");
    EXPECT_EQ(*std::get<event_line>(m.lines[7]).evidence_step, 3);
}

// Run directories of hosts before "kind" told lines apart by their keys.
TEST(Metrics, LinesOfOlderHostsAreReadByTheirKeys) {
    scratch tmp;
    const fs::path file = tmp.path() / "metrics.jsonl";
    write(file,
          "{\"step\": 0, \"val_loss\": 4.7}\n"
          "{\"step\": 1, \"loss\": 4.5, \"lr\": 0.0006, \"grad_norm\": 1.5, \"tokens_per_s\": 9000, "
          "\"grad_sparsity\": 0.01, \"overflow_rate\": 0, \"underflow_rate\": 0.02}\n"
          "{\"step\": 1, \"tensor\": \"w\", \"role\": \"weight\", \"format\": \"e5m2\", \"scale\": 1, "
          "\"amax\": 0.5, "
          "\"overflow\": 0, \"underflow\": 0, \"count\": 10}\n"
          "{\"step\": 1, \"diagnostic\": \"range\", \"tensor\": \"*\", \"role\": \"all\", \"values\": "
          "{\"x\": 1}}\n"
          "{\"step\": 1, \"event\": \"skip_step\", \"plugin\": \"p\", \"reason\": \"r\"}\n"
          "{\"step\": 2, \"event\": \"switch_format\", \"plugin\": \"p\", \"reason\": \"r\", \"tensor\": "
          "\"w\", "
          "\"from\": \"e7m0\", \"to\": \"e5m2\"}\n");
    const metrics_contents m = read_metrics(file);
    EXPECT_TRUE(m.problems.empty()) << m.problems.front();
    ASSERT_EQ(m.lines.size(), 6u);
    const char* kinds[] = {"val", "train", "tensor", "diagnostic", "event", "event"};
    for (size_t k = 0; k < 6; ++k) EXPECT_STREQ(kind_name(m.lines[k]), kinds[k]) << k;
    EXPECT_EQ(m.run_id, "");
}

TEST(Metrics, DamagedLinesAreSkippedAndNamed) {
    scratch tmp;
    const fs::path file = tmp.path() / "metrics.jsonl";
    write(file,
          "{\"kind\":\"val\",\"run_id\":\"r\",\"step\":0,\"val_loss\":4.7}\n"
          "{\"kind\":\"val\",\"run_id\":\"r\",\"step\":1,\"val_lo\n"  // cut by a kill, then resumed
          "{\"kind\":\"val\",\"run_id\":\"r\",\"step\":\"two\",\"val_loss\":4}\n"  // a wrong type
          "{\"kind\":\"future\",\"run_id\":\"r\",\"step\":3}\n"                    // a newer host's kind
          "not json\n"
          "{\"kind\":\"val\",\"run_id\":\"r\",\"step\":5,\"val_loss\":4.1}");  // no newline yet
    const metrics_contents m = read_metrics(file);
    ASSERT_EQ(m.lines.size(), 2u);
    EXPECT_EQ(step_of(m.lines[1]), 5);
    ASSERT_EQ(m.problems.size(), 3u);
    EXPECT_EQ(m.problems[0], "metrics.jsonl: line 2 truncated (skipped)");
    EXPECT_EQ(m.problems[1], "metrics.jsonl: line 3: key 'step': expected an integer (skipped)");
    EXPECT_EQ(m.problems[2].rfind("metrics.jsonl: line 5: not JSON, ", 0), 0u) << m.problems[2];
}

// A number beyond double's range is nlohmann's out_of_range error, not a
// parse_error: it escaped read_metrics (found by fuzzing, tests/fuzz/metrics/).
TEST(Metrics, ANumberBeyondDoubleIsABadLine) {
    const metrics_contents m = parse_metrics(
        "{\"kind\":\"val\",\"run_id\":\"r\",\"step\":0,\"val_loss\":1e400}\n"
        "{\"kind\":\"val\",\"run_id\":\"r\",\"step\":1,\"val_loss\":4.5}\n");
    ASSERT_EQ(m.lines.size(), 1u);
    EXPECT_EQ(step_of(m.lines[0]), 1);
    ASSERT_EQ(m.problems.size(), 1u);
    EXPECT_EQ(m.problems[0], "metrics.jsonl: line 1: not JSON, number overflow parsing '1e400' (skipped)");
}

// NaN and Infinity are not JSON (the host writes a non-finite number as null;
// Python's json.dumps writes them): such a line is a bad line, as Python's
// read_run refuses it too (tests/python/test_runs.py).
TEST(Metrics, NonFiniteLiteralsAreBadLines) {
    const metrics_contents m = parse_metrics(
        "{\"kind\":\"val\",\"run_id\":\"r\",\"step\":0,\"val_loss\":NaN}\n"
        "{\"kind\":\"val\",\"run_id\":\"r\",\"step\":1,\"val_loss\":Infinity}\n"
        "{\"kind\":\"val\",\"run_id\":\"r\",\"step\":2,\"val_loss\":-Infinity}\n"
        "{\"kind\":\"val\",\"run_id\":\"r\",\"step\":3,\"val_loss\":null}\n");
    ASSERT_EQ(m.lines.size(), 1u);
    EXPECT_EQ(step_of(m.lines[0]), 3);
    ASSERT_EQ(m.problems.size(), 3u);
    for (size_t k = 0; k < 3; ++k)
        EXPECT_EQ(m.problems[k].rfind("metrics.jsonl: line " + std::to_string(k + 1) + ": not JSON, ", 0), 0u)
            << m.problems[k];
}

TEST(Metrics, TruncateKeepsTheStepsUpToTheCheckpoint) {
    scratch tmp;
    const fs::path file = tmp.path() / "metrics.jsonl";
    {
        metrics_writer w(file, "r", false);
        for (int64_t s = 1; s <= 5; ++s) w.write(val_line{s, {{"val_loss", 1.0 * s}}});
    }
    std::ofstream(file, std::ios::app) << "{\"kind\":\"val\",\"step\":6,";  // half a line
    truncate_metrics(file, 3);
    const metrics_contents m = read_metrics(file);
    EXPECT_TRUE(m.problems.empty());
    ASSERT_EQ(m.lines.size(), 3u);
    EXPECT_EQ(step_of(m.lines.back()), 3);
    // Appending continues it.
    metrics_writer(file, "r", true).write(val_line{4, {{"val_loss", 9.0}}});
    EXPECT_EQ(read_metrics(file).lines.size(), 4u);
}

TEST(Metrics, AFailedWriteIsAnErrorNamingTheFile) {
    if (!fs::exists("/dev/full")) GTEST_FAIL() << "/dev/full is needed for this test";
    metrics_writer w("/dev/full", "r", true);
    const std::string e = error_of([&] { w.write(val_line{1, {{"val_loss", 2.0}}}); });
    EXPECT_EQ(e, "/dev/full: cannot write (disk full?)");
}

summary_record a_summary() {
    summary_record s;
    s.run_id = "e7m0-3";
    s.name = "e7m0_uniform";
    s.status = "collapsed";
    s.failure_mode = "nan_loss";
    s.failure_step = 7;
    s.failure_evidence = "loss not finite at step 7";
    s.steps_done = 7;
    s.max_steps = 500;
    s.seed = 42;
    s.values = {{"final_train_loss", NAN},
                {"final_val_loss", 4.125},
                {"best_val_loss", 4.0625},
                {"seconds", 12.5},
                {"cpu_seconds", 20.25}};
    s.formats = {"e7m0", "e7m0", "e5m2"};
    s.parameters = 816000;
    s.corpus = {3.25, 2.5, NAN};
    s.switches = {{3, "mantissa_shift", "blocks.0.attn.qkv.weight", "e7m0", "e5m2"}};
    s.interventions = {{"mantissa_shift", {{"switch_format", 1}}}};
    return s;
}

TEST(Summary, RoundTrips) {
    scratch tmp;
    write_summary(tmp.path(), a_summary());
    const summary_record s = read_summary(summary_file(tmp.path()));
    const summary_record w = a_summary();
    EXPECT_EQ(s.run_id, w.run_id);
    EXPECT_EQ(s.status, w.status);
    EXPECT_EQ(*s.failure_step, 7);
    EXPECT_TRUE(std::isnan(s.values.get("final_train_loss")));
    EXPECT_TRUE(s.values.has("final_train_loss"));  // null: known, not finite
    EXPECT_EQ(s.values.get("final_val_loss"), 4.125);
    EXPECT_EQ(s.values.get("seconds"), 12.5);
    EXPECT_EQ(s.values.get("cpu_seconds"), 20.25);
    EXPECT_EQ(s.formats.gradient, "e5m2");
    ASSERT_EQ(s.switches.size(), 1u);
    EXPECT_EQ(s.switches[0].plugin, "mantissa_shift");
    EXPECT_EQ(s.switches[0].to, "e5m2");
    EXPECT_EQ(s.interventions.at("mantissa_shift").at("switch_format"), 1);
    EXPECT_EQ(s.corpus.unigram_entropy, 3.25);
    EXPECT_EQ(s.corpus.bigram, 2.5);
    EXPECT_TRUE(std::isnan(s.corpus.trigram));  // written as null
    EXPECT_EQ(s.parameters, std::optional<int64_t>(816000));
    // A summary of a host before "model" and "corpus" reads with them unknown.
    std::string text = read(summary_file(tmp.path()));
    const size_t from = text.find("\"model\""), to = text.find("\"switches\"");
    ASSERT_NE(from, std::string::npos);
    text.erase(from, to - from);
    const size_t cpu = text.find("  \"cpu_seconds\"");
    ASSERT_NE(cpu, std::string::npos);
    text.erase(cpu, text.find('\n', cpu) + 1 - cpu);
    const summary_record old = parse_summary(text, "old/summary.json");
    EXPECT_FALSE(old.values.has("cpu_seconds"));  // nor before "cpu_seconds"
    EXPECT_TRUE(std::isnan(old.corpus.unigram_entropy));
    EXPECT_TRUE(std::isnan(old.corpus.bigram));
    EXPECT_FALSE(old.parameters);
    EXPECT_EQ(old.values.get("final_val_loss"), 4.125);
}

// A training process killed from outside while between plugin calls: the
// summary is made from config.toml and metrics.jsonl, and says no plugin call
// was running (naming the last one), and round-trips with its crash.
TEST(Summary, ACrashOutsideAnyPluginCallIsSaidAsSuch) {
    scratch tmp;
    write(config_file(tmp.path()),
          "name = \"crashy\"\n[training]\nmax_steps = 20\nwarmup_steps = 2\nseed = 5\n"
          "[quantization]\nweight_format = \"e4m3\"\n");
    {
        metrics_writer w(metrics_file(tmp.path()), "crashy-2", false);
        w.write(val_line{0, {{"val_loss", 4.5}}});
        // Every value a train line holds (a reader refuses one without them).
        train_line t{1,
                     {{"loss", 4.25},
                      {"lr", 1e-3},
                      {"grad_norm", 1},
                      {"tokens_per_s", 100},
                      {"grad_sparsity", 0},
                      {"overflow_rate", 0},
                      {"underflow_rate", 0}}};
        w.write(t);
        event_line e;
        e.step = 1;
        e.event = "switch_format";
        e.plugin = "mantissa_shift";
        e.tensor = "lm_head.weight";
        e.from = "e4m3";
        e.to = "e5m2";
        w.write(e);
        w.write(val_line{2, {{"val_loss", 3.5}}});
        t.step = 2;
        t.values.set("loss", 3.75);
        w.write(t);
        w.write(val_line{3, {{"val_loss", 4.0}}});
    }
    call_snapshot at;
    at.in_call = false;
    at.plugin = "e4m3";
    at.call = "quantize";
    at.steps_done = 3;
    at.run_dir = tmp.path();
    write_summary(tmp.path(), crash_summary(tmp.path(), at, 9, 1.5));
    const summary_record s = read_summary(summary_file(tmp.path()));
    EXPECT_EQ(s.status, "crashed");
    EXPECT_EQ(s.run_id, "crashy-2");
    EXPECT_EQ(s.name, "crashy");
    EXPECT_EQ(s.max_steps, 20);
    EXPECT_EQ(s.seed, 5);
    EXPECT_EQ(s.steps_done, 3);
    EXPECT_EQ(s.values.get("final_train_loss"), 3.75);
    EXPECT_EQ(s.values.get("final_val_loss"), 4.0);
    EXPECT_EQ(s.values.get("best_val_loss"), 3.5);
    EXPECT_EQ(s.formats.weight, "e4m3");
    ASSERT_EQ(s.switches.size(), 1u);
    EXPECT_EQ(s.switches[0].to, "e5m2");
    EXPECT_EQ(s.interventions.at("mantissa_shift").at("switch_format"), 1);
    ASSERT_TRUE(s.crash.has_value());
    EXPECT_EQ(s.crash->signal, 9);
    EXPECT_EQ(s.crash->signal_name, "SIGKILL");
    EXPECT_EQ(s.crash->plugin, "");  // null: no plugin call was running
    EXPECT_EQ(s.crash->call, "");
    EXPECT_EQ(s.crash->steps_done, 3);
    EXPECT_EQ(s.failure_evidence,
              "the training process died of signal 9 (SIGKILL, Killed) after 3 steps, in no plugin call "
              "(the last one: plugin 'e4m3' quantize)");
    EXPECT_NE(read(summary_file(tmp.path())).find("\"plugin\": null"), std::string::npos);
}

TEST(Summary, DamageIsNamed) {
    scratch tmp;
    const fs::path file = summary_file(tmp.path());
    write(file, "{\"name\": \"x\", \"status\": \"fini");
    try {
        read_summary(file);
        ADD_FAILURE() << "accepted a half-written summary";
    } catch (const summary_error& e) {
        EXPECT_TRUE(e.truncated);
        EXPECT_EQ(std::string(e.what()).rfind(file.string() + ": half-written (parse error at line 1", 0), 0u)
            << e.what();
    }
    write_summary(tmp.path(), a_summary());
    std::string text = read(file);
    text.replace(text.find("\"seed\": 42"), 10, "\"seed\": \"42\"");
    write(file, text);
    EXPECT_EQ(error_of([&] { read_summary(file); }), file.string() + ": key 'seed': expected an integer");
    // Beyond double: nlohmann's out_of_range, which escaped (found by fuzzing).
    text.replace(text.find("\"seed\": \"42\""), 12, "\"seed\": 1e999");
    write(file, text);
    try {
        read_summary(file);
        ADD_FAILURE() << "accepted a number beyond double";
    } catch (const summary_error& e) {
        EXPECT_FALSE(e.truncated);
        EXPECT_EQ(std::string(e.what()),
                  file.string() + ": not valid JSON (number overflow parsing '1e999')");
    }
}

checkpoint_state a_state() {
    checkpoint_state s;
    s.run_id = "e5m2_short";
    s.step = 40;
    s.detector.window_loss_sum = 0.1 + 0.2;  // not a short decimal: must come back to the bit
    s.detector.window_loss_n = 3;
    s.detector.nonfinite = {2, 39, NAN, INFINITY};
    s.detector.overflow = {1, 40, 0.15, -INFINITY};
    s.detector.previous_window_loss = 3.0000000000000004;
    s.sites = {{"lm_head.weight", "e4m3", 0.49999999999999994, {0.0078125f, {1e-300, 5e-324, NAN}}},
               {"lm_head.input", "fp32", NAN, {1.0f, {}}}};
    s.history.events = {"step 3: x switched y"};
    s.history.trend = {
        {40, {{"loss", 2.5}, {"grad_norm", NAN}, {"grad_sparsity", 0.01}, {"bit_stall", 0.25}}}};
    s.history.diagnostics = {{40, "stiffness.stiffness_mean", 0.001}};
    s.history.interventions = {{"partition_clip", {{"clip_grad_norm", 12}}}};
    s.history.switches = {{30, "mantissa_shift", "lm_head.weight", "e7m0", "e4m3"}};
    s.history.last_val_loss = 2.75;
    s.history.best_val_loss = 2.7;
    return s;
}

TEST(CheckpointState, RoundTripsExactly) {
    scratch tmp;
    const checkpoint_state w = a_state();
    write_checkpoint_state(tmp.path(), w);
    const checkpoint_state s = read_checkpoint_state(tmp.path());
    EXPECT_EQ(s.run_id, w.run_id);
    EXPECT_EQ(s.step, 40);
    EXPECT_TRUE(same(s.detector.window_loss_sum, w.detector.window_loss_sum));
    EXPECT_EQ(s.detector.window_loss_n, 3);
    EXPECT_TRUE(same(s.detector.nonfinite.first_value, NAN));
    EXPECT_TRUE(same(s.detector.nonfinite.last_value, INFINITY));
    EXPECT_TRUE(same(s.detector.overflow.last_value, -INFINITY));
    EXPECT_TRUE(same(s.detector.previous_window_loss, w.detector.previous_window_loss));
    ASSERT_EQ(s.sites.size(), 2u);
    EXPECT_TRUE(same(s.sites[0].bit_stall_rate, w.sites[0].bit_stall_rate));
    EXPECT_EQ(s.sites[0].scaling.scale, 0.0078125f);
    ASSERT_EQ(s.sites[0].scaling.amax_history.size(), 3u);
    for (size_t k = 0; k < 3; ++k)
        EXPECT_TRUE(same(s.sites[0].scaling.amax_history[k], w.sites[0].scaling.amax_history[k])) << k;
    EXPECT_EQ(s.sites[1].format, "fp32");
    EXPECT_EQ(s.history.trend.size(), 1u);
    const auto& row = s.history.trend[0].values.entries();  // every value, in order
    ASSERT_EQ(row.size(), 4u);
    EXPECT_EQ(row[0], std::make_pair(std::string("loss"), 2.5));
    EXPECT_EQ(row[1].first, "grad_norm");
    EXPECT_TRUE(std::isnan(row[1].second));
    EXPECT_EQ(row[3], std::make_pair(std::string("bit_stall"), 0.25));
    EXPECT_EQ(s.history.interventions.at("partition_clip").at("clip_grad_norm"), 12);
    EXPECT_EQ(s.history.switches[0].from, "e7m0");
    EXPECT_EQ(s.history.best_val_loss, 2.7);
}

TEST(CheckpointState, DamageIsRefusedNamingTheFileAndKey) {
    scratch tmp;
    write_checkpoint_state(tmp.path(), a_state());
    const fs::path file = state_file(tmp.path());
    const std::string good = read(file);
    const auto with = [&](const std::string& from, const std::string& to) {
        std::string t = good;
        const size_t at = t.find(from);
        EXPECT_NE(at, std::string::npos) << from;
        t.replace(at, from.size(), to);
        write(file, t);
        return error_of([&] { read_checkpoint_state(tmp.path()); });
    };
    EXPECT_EQ(with("\"layout\": 3", "\"layout\": 4"),
              file.string() +
                  ": key 'layout': 4 is not this host's 3 (written by another version of altgrad-host)");
    EXPECT_EQ(with("\"scale\": 0.0078125", "\"scale\": \"big\""),
              file.string() + ": key 'sites[0].scale': expected a number, \"nan\", \"inf\" or \"-inf\"");
    EXPECT_EQ(with("\"window_loss_n\": 3", "\"window_loss_n\": -3.5"),
              file.string() + ": key 'loop.window_loss_n': expected an integer");
    // Beyond double: nlohmann's out_of_range, which escaped (found by fuzzing).
    EXPECT_EQ(with("\"window_loss_n\": 3", "\"window_loss_n\": 1e400"),
              file.string() + ": not valid JSON: number overflow parsing '1e400'");
    write(file, good.substr(0, good.size() / 2));
    EXPECT_EQ(error_of([&] { read_checkpoint_state(tmp.path()); }).rfind(file.string() + ": cut short", 0),
              0u);
    fs::remove(file);
    EXPECT_EQ(error_of([&] { read_checkpoint_state(tmp.path()); }), file.string() + ": cannot read");
}

// state.json's own CRC-32 as docs/training.md defines it: of the document
// without "state_crc32", written compactly by nlohmann-json in the file's key order.
uint64_t documented_crc(nlohmann::ordered_json j) {
    j.erase("state_crc32");
    const std::string text = j.dump();
    boost::crc_32_type crc;
    crc.process_bytes(text.data(), text.size());
    return crc.checksum();
}

// The file list's CRC-32s cover every other file of a checkpoint; nothing
// covered state.json itself, so a format edited by hand (e4m3 for e5m2)
// resumed silently. It records its own CRC-32 now.
TEST(CheckpointState, ItsOwnCrc32RefusesAnEditedFile) {
    scratch tmp;
    write_checkpoint_state(tmp.path(), a_state());
    const fs::path file = state_file(tmp.path());
    const std::string good = read(file);
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(good);
    ASSERT_TRUE(j.contains("state_crc32")) << good;
    EXPECT_EQ(j["state_crc32"].get<uint64_t>(), documented_crc(j));
    // Re-indented by another tool: the same document, still read.
    write(file, j.dump(4));
    EXPECT_EQ(read_checkpoint_state(tmp.path()).sites[0].format, "e4m3");

    // The site's format edited by hand.
    std::string edited = good;
    edited.replace(edited.find("\"format\": \"e4m3\""), 16, "\"format\": \"e5m2\"");
    write(file, edited);
    EXPECT_EQ(error_of([&] { read_checkpoint_state(tmp.path()); }),
              file.string() + ": key 'state_crc32': " + std::to_string(j["state_crc32"].get<uint64_t>()) +
                  ", but the file's contents give " +
                  std::to_string(documented_crc(nlohmann::ordered_json::parse(edited))) +
                  " (state.json was damaged or edited by hand)");
    // Taken away: refused too (this layout has it).
    nlohmann::ordered_json without = j;
    without.erase("state_crc32");
    write(file, without.dump(1));
    EXPECT_EQ(error_of([&] { read_checkpoint_state(tmp.path()); }),
              file.string() + ": key 'state_crc32': missing");
    // A checkpoint of a host before it (layout 2, no state_crc32) is still read.
    without["layout"] = 2;
    without["sites"][0]["format"] = "e5m2";
    write(file, without.dump(1));
    EXPECT_EQ(read_checkpoint_state(tmp.path()).sites[0].format, "e5m2");
}

// Layout 1 (hosts before the metric catalog) kept five values per trend row,
// the bit stall of all weights as bit_stall_rate: a resume still reads it.
TEST(CheckpointState, Layout1TrendRowsAreRead) {
    scratch tmp;
    write_checkpoint_state(tmp.path(), a_state());
    std::string text = read(state_file(tmp.path()));
    text.replace(text.find("\"layout\": 3"), 11, "\"layout\": 1");
    text.replace(text.find("\"bit_stall\": 0.25"), 11, "\"bit_stall_rate\"");
    write(state_file(tmp.path()), text);
    const checkpoint_state s = read_checkpoint_state(tmp.path());
    ASSERT_EQ(s.history.trend.size(), 1u);
    EXPECT_EQ(s.history.trend[0].values.get("bit_stall"), 0.25);
    EXPECT_FALSE(s.history.trend[0].values.has("bit_stall_rate"));
}

// catalog.json: the metrics a run writes, every field back as written.
TEST(Catalog, RoundTripsAndNamesDamage) {
    scratch tmp;
    metric_catalog c;
    metric headline;
    headline.name = "stiffness_mean";
    headline.record = metric_record::diagnostic;
    headline.source = "stiffness";
    headline.series = "stiffness";
    headline.title = "Stiffness (mean S = 2^(floor(log2|w|) - M))";
    headline.label = "mean stiffness";
    headline.summary = tensor_summary::mean;
    headline.summary_of = "stiffness_mean";
    headline.log_scale = true;
    c.add(headline);
    write_catalog(tmp.path(), c);
    const metric_catalog back = read_catalog(catalog_file(tmp.path()));
    ASSERT_EQ(back.metrics().size(), host_metrics().size() + 1);
    const metric* s = back.series("stiffness");
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->source, "stiffness");
    EXPECT_EQ(s->record, metric_record::diagnostic);
    EXPECT_EQ(s->summary, tensor_summary::mean);
    EXPECT_TRUE(s->log_scale);
    EXPECT_EQ(s->title, headline.title);
    const metric* overflow = back.series("overflow");
    ASSERT_NE(overflow, nullptr);
    EXPECT_EQ(overflow->summary_of, "overflow_rate");
    // A series taken twice, and a bad field, are refused naming the file and key.
    EXPECT_EQ(error_of([&] { c.add(headline); }),
              "metric 'stiffness_mean' of stiffness: its series 'stiffness' is taken by 'stiffness_mean' of "
              "stiffness");
    std::string text = read(catalog_file(tmp.path()));
    text.replace(text.find("\"summary\": \"mean\""), 17, "\"summary\": \"median\"");
    write(catalog_file(tmp.path()), text);
    const std::string e = error_of([&] { read_catalog(catalog_file(tmp.path())); });
    EXPECT_NE(e.find("summary': \"median\" is not one of none, count_weighted_mean, mean, max, min"),
              std::string::npos)
        << e;
    // A run directory's catalog: the host's when catalog.json is damaged, and the damage a problem.
    std::vector<std::string> problems;
    EXPECT_EQ(catalog_of(tmp.path(), problems).metrics().size(), host_metrics().size());
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_EQ(problems[0].rfind("catalog.json: ", 0), 0u) << problems[0];
}

// A series' value at a step from its tensors' values, by each summary rule.
TEST(Catalog, SummariesOverTensors) {
    metric m;
    const std::vector<tensor_value> tensors = {{false, 0.5, 100}, {false, NAN, 50}, {false, 0.25, 300}};
    m.summary = tensor_summary::count_weighted_mean;
    EXPECT_EQ(summarise(m, tensors), (0.5 * 100 + 0.25 * 300) / 400);  // the NaN tensor counts nowhere
    m.summary = tensor_summary::mean;
    EXPECT_EQ(summarise(m, tensors), 0.375);
    m.summary = tensor_summary::max;
    EXPECT_EQ(summarise(m, tensors), 0.5);
    m.summary = tensor_summary::min;
    EXPECT_EQ(summarise(m, tensors), 0.25);
    // The all-tensor value, where finite, is the step's value whatever the rule.
    std::vector<tensor_value> with_all = tensors;
    with_all.push_back({true, 7.0, 0});
    EXPECT_EQ(summarise(m, with_all), 7.0);
    with_all.back().value = NAN;
    EXPECT_EQ(summarise(m, with_all), 0.25);
    EXPECT_TRUE(std::isnan(summarise(m, {{false, INFINITY, 1}})));  // nothing finite
}

TEST(Checkpoints, OnlyCompleteFoldersCountNewestLast) {
    scratch tmp;
    const fs::path run = tmp.path();
    for (const int64_t step : {100, 20, 300}) fs::create_directories(checkpoint_dir(run, step));
    fs::create_directories(checkpoints_dir(run) / ".tmp-step_0000400");
    write_checkpoint_state(checkpoint_dir(run, 100), a_state());
    write_checkpoint_state(checkpoint_dir(run, 20), a_state());
    fs::create_directories(checkpoint_dir(run, 300));  // no state.json: incomplete
    write_checkpoint_state(checkpoints_dir(run) / ".tmp-step_0000400", a_state());  // being written
    write(checkpoint_dir(run, 10) / "state.toml", "step = 10\n");                   // an older host's
    const std::vector<checkpoint_ref> all = complete_checkpoints(run);
    ASSERT_EQ(all.size(), 3u);
    EXPECT_EQ(all[0].step, 10);
    EXPECT_TRUE(all[0].legacy);
    EXPECT_EQ(all[1].step, 20);
    EXPECT_EQ(all[2].step, 100);
    EXPECT_FALSE(all[2].legacy);
    EXPECT_EQ(latest_checkpoint(run)->dir, checkpoint_dir(run, 100));
    EXPECT_EQ(checkpoint_dir(run, 100).filename(), "step_0000100");
}

}  // namespace
}  // namespace altgrad::host::run
