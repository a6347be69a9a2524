// Experiment configs (host/src/config/run_config.hpp): defaults, errors that
// name the file and the key, --set overrides, the to_toml round trip, per-layer
// rules, and every config in configs/.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <toml++/toml.h>
#include <unistd.h>

#include "config/run_config.hpp"
#include "config/writer.hpp"
#include "config_errors.hpp"
#include "util/error.hpp"

namespace altgrad::test {
namespace {

namespace fs = std::filesystem;
using namespace host::config;

// A parameter as the config gives it: its text and TOML kind.
host::given_param integer(const char* text) { return {text, host::param_kind::integer}; }
host::given_param floating(const char* text) { return {text, host::param_kind::floating}; }
host::given_param boolean(const char* text) { return {text, host::param_kind::boolean}; }
host::given_param string(const char* text) { return {text, host::param_kind::string}; }

// ---- Defaults ----------------------------------------------------------------

TEST(ConfigDefaults, EmptyFileGivesTheSchemaDefaults) {
    const run_config c = parse_config("", kFile);
    EXPECT_EQ(c.name, "my_run");  // the file's stem
    EXPECT_EQ(c.source, fs::path(kFile));

    EXPECT_EQ(c.model.n_layer, 4);
    EXPECT_EQ(c.model.n_head, 4);
    EXPECT_EQ(c.model.n_embd, 128);
    EXPECT_EQ(c.model.block_size, 64);
    EXPECT_EQ(c.model.dropout, 0.0);
    EXPECT_TRUE(c.model.bias);
    EXPECT_EQ(c.model.activation, activation_function::gelu);
    EXPECT_EQ(c.model.vocab_size, 0);

    EXPECT_EQ(c.data.path, "/usr/share/games/fortunes");
    EXPECT_EQ(c.data.format, data_format::auto_detect);
    EXPECT_EQ(c.data.val_fraction, 0.1);
    EXPECT_EQ(c.data.vocab_size, 0);

    EXPECT_EQ(c.training.max_steps, 500);
    EXPECT_EQ(c.training.batch_size, 12);
    EXPECT_EQ(c.training.learning_rate, 6e-4);
    EXPECT_EQ(c.training.min_lr, 6e-5);
    EXPECT_EQ(c.training.warmup_steps, 50);
    EXPECT_EQ(c.training.lr_schedule, lr_schedule_kind::cosine);
    EXPECT_EQ(c.training.weight_decay, 0.1);
    EXPECT_EQ(c.training.beta1, 0.9);
    EXPECT_EQ(c.training.beta2, 0.95);
    EXPECT_EQ(c.training.grad_clip, 1.0);
    EXPECT_EQ(c.training.seed, 42);
    EXPECT_EQ(c.training.eval_interval, 50);
    EXPECT_EQ(c.training.eval_batches, 10);
    EXPECT_EQ(c.training.log_interval, 10);
    EXPECT_EQ(c.training.device, compute_device::cpu);
    EXPECT_EQ(c.training.threads, 1);

    EXPECT_TRUE(c.quantization.enabled);
    EXPECT_EQ(c.quantization.weight_format, "e5m2");
    EXPECT_EQ(c.quantization.activation_format, "e5m2");
    EXPECT_EQ(c.quantization.gradient_format, "e5m2");
    EXPECT_EQ(c.quantization.forward_rounding, ALTGRAD_ROUND_NEAREST_EVEN);
    EXPECT_EQ(c.quantization.backward_rounding, ALTGRAD_ROUND_STOCHASTIC);
    EXPECT_EQ(c.quantization.sr_bits, 32);  // full stochastic rounding, as before the key
    EXPECT_EQ(c.quantization.overflow, ALTGRAD_OVERFLOW_SATURATE);
    EXPECT_EQ(c.quantization.scaling, scaling_mode::delayed);
    EXPECT_EQ(c.quantization.amax_history_len, 16);
    EXPECT_EQ(c.quantization.amax_compute, amax_compute_kind::max);
    EXPECT_EQ(c.quantization.margin, 0);
    EXPECT_TRUE(c.quantization.shadow_weights);
    EXPECT_EQ(c.quantization.diagnostic_interval, 50);
    EXPECT_TRUE(c.quantization.rules.empty());

    EXPECT_EQ(c.output.dir, "runs");
    EXPECT_EQ(c.output.checkpoint_interval, 100);
    EXPECT_EQ(c.output.keep_checkpoints, 2);
}

TEST(ConfigDefaults, DefaultConstructedStructIsTheDefaultConfig) {
    run_config expected;
    expected.name = "my_run";
    EXPECT_TRUE(parse_config("", kFile) == expected);
    EXPECT_TRUE(parse_config("[model]\n[data]\n[training]\n[quantization]\n[output]\n", kFile) == expected);
}

TEST(ConfigDefaults, ExplicitNameAndValuesAreRead) {
    const run_config c = parse_config(R"(
name = "exp 1"
[model]
n_layer = 2
activation = "swiglu"
bias = false
dropout = 0.25
[training]
learning_rate = 1     # an integer is accepted for a float key
min_lr = 0
device = "cuda"
seed = 9223372036854775807
[quantization]
forward_rounding = "toward-zero"
overflow = "nonfinite"
scaling = "current"
amax_compute = "most_recent"
)",
                                      kFile);
    EXPECT_EQ(c.name, "exp 1");
    EXPECT_EQ(c.model.n_layer, 2);
    EXPECT_EQ(c.model.activation, activation_function::swiglu);
    EXPECT_FALSE(c.model.bias);
    EXPECT_EQ(c.model.dropout, 0.25);
    EXPECT_EQ(c.training.learning_rate, 1.0);
    EXPECT_EQ(c.training.min_lr, 0.0);
    EXPECT_EQ(c.training.device, compute_device::cuda);
    EXPECT_EQ(c.training.seed, INT64_MAX);
    EXPECT_EQ(c.quantization.forward_rounding, ALTGRAD_ROUND_TOWARD_ZERO);
    EXPECT_EQ(c.quantization.overflow, ALTGRAD_OVERFLOW_NONFINITE);
    EXPECT_EQ(c.quantization.scaling, scaling_mode::current);
    EXPECT_EQ(c.quantization.amax_compute, amax_compute_kind::most_recent);
}

TEST(ConfigDefaults, RangeEndsAreAccepted) {
    EXPECT_EQ(
        error_of("[model]\nn_layer = 64\nn_head = 64\nn_embd = 4096\nblock_size = 2\nvocab_size = 65535\n"
                 "[data]\nval_fraction = 0.5\n"
                 "[training]\nmax_steps = 1000000000\nwarmup_steps = 0\nbatch_size = 65536\n"
                 "learning_rate = 10\nmin_lr = 10\nweight_decay = 0\nbeta1 = 0\nbeta2 = 0.999999\n"
                 "grad_clip = 1e6\nthreads = 1024\neval_batches = 1000000\nseed = 0\n"
                 "[quantization]\namax_history_len = 1024\nmargin = 64\nsr_bits = 1\n"
                 "[output]\nkeep_checkpoints = 1000\ncheckpoint_interval = 1\n"),
        "");
}

// ---- Errors --------------------------------------------------------------------

TEST(ConfigErrors, IntegerOutOfRangeHasTheDocumentedMessage) {
    EXPECT_EQ(error_of("[training]\nmax_steps = -5\n"),
              std::string(kFile) + ": key 'training.max_steps': expected an integer 1..1000000000, got -5");
}

TEST(ConfigErrors, IntegerKeysRejectFloatsAndStrings) {
    expect_error(error_of("[training]\nmax_steps = 50.0\n"), "training.max_steps",
                 "expected an integer 1..1000000000, got 50.0");
    expect_error(error_of("[model]\nn_layer = \"4\"\n"), "model.n_layer",
                 "expected an integer 1..64, got \"4\"");
    expect_error(error_of("[training]\nseed = -1\n"), "training.seed",
                 "expected an integer 0..9223372036854775807");
    expect_error(error_of("[model]\nn_layer = 65\n"), "model.n_layer", "expected an integer 1..64, got 65");
    expect_error(error_of("[training]\nthreads = true\n"), "training.threads", "got true");
}

// sr_bits: 1..32 random bits; 0 (which the ABI reads as 32) is not a config value.
TEST(ConfigErrors, SrBitsIsOneToThirtyTwo) {
    EXPECT_EQ(error_of("[quantization]\nsr_bits = 0\n"),
              std::string(kFile) + ": key 'quantization.sr_bits': expected an integer 1..32, got 0");
    expect_error(error_of("[quantization]\nsr_bits = 33\n"), "quantization.sr_bits",
                 "expected an integer 1..32, got 33");
    expect_error(error_of("[quantization]\nsr_bits = 8.0\n"), "quantization.sr_bits", "got 8.0");
    EXPECT_EQ(parse_config("[quantization]\nsr_bits = 8\n", kFile).quantization.sr_bits, 8);
    EXPECT_EQ(parse_config("", kFile, {"quantization.sr_bits=4"}).quantization.sr_bits, 4);
    expect_error(error_of("", {"quantization.sr_bits=64"}), "quantization.sr_bits",
                 "expected an integer 1..32");
}

TEST(ConfigErrors, FloatRangesSayWhichEndIsOpen) {
    expect_error(error_of("[model]\ndropout = 1\n"), "model.dropout", "expected a number in [0, 1), got 1");
    expect_error(error_of("[training]\nlearning_rate = 0.0\n"), "training.learning_rate",
                 "expected a number in (0, 10], got 0.0");
    expect_error(error_of("[data]\nval_fraction = 0\n"), "data.val_fraction",
                 "expected a number in (0, 0.5], got 0");
    expect_error(error_of("[training]\nbeta2 = 1.0\n"), "training.beta2", "expected a number in [0, 1)");
    expect_error(error_of("[training]\ngrad_clip = 2e6\n"), "training.grad_clip",
                 "expected a number in [0, 1000000], got 2000000.0");
    expect_error(error_of("[training]\nweight_decay = nan\n"), "training.weight_decay", "got nan");
    expect_error(error_of("[training]\nbeta1 = inf\n"), "training.beta1", "got inf");
    expect_error(error_of("[training]\nlearning_rate = \"fast\"\n"), "training.learning_rate",
                 "got \"fast\"");
}

TEST(ConfigErrors, ChoicesListTheAlternatives) {
    EXPECT_EQ(error_of("[model]\nactivation = \"relu\"\n"),
              std::string(kFile) + ": key 'model.activation': expected one of gelu, swiglu, got \"relu\"");
    expect_error(error_of("[quantization]\nbackward_rounding = \"up\"\n"), "quantization.backward_rounding",
                 "expected one of nearest, stochastic, toward-zero, got \"up\"");
    expect_error(error_of("[training]\ndevice = 0\n"), "training.device", "expected one of cpu, cuda, got 0");
    expect_error(error_of("[data]\nformat = \"csv\"\n"), "data.format",
                 "expected one of auto, text, nanogpt");
    expect_error(error_of("[quantization]\nscaling = \"Delayed\"\n"), "quantization.scaling",
                 "expected one of delayed, current, none");
}

// Every choice key: each of its names (written here from docs/config.md, not
// from the tables) is read, written back by to_toml under the same name, and
// read again to the same value; any other name is an error listing them all.
TEST(ConfigChoices, EveryNameRoundTripsAndOthersAreRefused) {
    struct choice_key {
        const char* section;
        const char* key;
        std::vector<std::string> names;
    };
    const std::vector<choice_key> keys = {
        {"model", "activation", {"gelu", "swiglu"}},
        {"data", "format", {"auto", "text", "nanogpt"}},
        {"training", "lr_schedule", {"cosine", "constant"}},
        {"training", "device", {"cpu", "cuda"}},
        {"quantization", "forward_rounding", {"nearest", "stochastic", "toward-zero"}},
        {"quantization", "backward_rounding", {"nearest", "stochastic", "toward-zero"}},
        {"quantization", "overflow", {"saturate", "nonfinite"}},
        {"quantization", "scaling", {"delayed", "current", "none"}},
        {"quantization", "amax_compute", {"max", "most_recent"}},
    };
    for (const choice_key& k : keys) {
        const std::string dotted = std::string(k.section) + "." + k.key;
        std::string list;
        for (const std::string& n : k.names) list += (list.empty() ? "" : ", ") + n;
        std::set<std::string> distinct;
        for (const std::string& name : k.names) {
            SCOPED_TRACE(dotted + " = " + name);
            const run_config c =
                parse_config("[" + std::string(k.section) + "]\n" + k.key + " = \"" + name + "\"\n", kFile);
            const std::string text = to_toml(c);
            EXPECT_NE(text.find(std::string("\n") + k.key + " = \"" + name + "\"\n"), std::string::npos)
                << text;
            EXPECT_TRUE(parse_config(text, kFile) == c);
            // From --set too, as a bare word.
            EXPECT_TRUE(parse_config("", kFile, {dotted + "=" + name}) == c);
            distinct.insert(text);
        }
        EXPECT_EQ(distinct.size(), k.names.size()) << dotted << ": every name is a different value";
        // A near miss is refused, never taken as the default (an unknown rounding once became nearest-even).
        const std::string wrong = k.names[1] + "_x";
        EXPECT_EQ(error_of("[" + std::string(k.section) + "]\n" + k.key + " = \"" + wrong + "\"\n"),
                  std::string(kFile) + ": key '" + dotted + "': expected one of " + list + ", got \"" +
                      wrong + "\"");
        expect_error(error_of("", {dotted + "=" + wrong}), dotted,
                     "expected one of " + list + ", got \"" + wrong + "\"");
    }
}

TEST(ConfigErrors, BooleansStringsAndFormatNames) {
    expect_error(error_of("[model]\nbias = 1\n"), "model.bias", "expected true or false, got 1");
    expect_error(error_of("[quantization]\nshadow_weights = \"yes\"\n"), "quantization.shadow_weights",
                 "expected true or false");
    expect_error(error_of("[data]\npath = \"\"\n"), "data.path", "expected a non-empty string");
    expect_error(error_of("[output]\ndir = 5\n"), "output.dir", "expected a non-empty string, got 5");
    expect_error(error_of("[quantization]\nweight_format = \"E4M3\"\n"), "quantization.weight_format",
                 "expected a format plugin name");
    expect_error(error_of("[quantization]\ngradient_format = \"e4-m3\"\n"), "quantization.gradient_format",
                 "got \"e4-m3\"");
    expect_error(error_of("name = \"a/b\"\n"), "name", "expected a run name");
    expect_error(error_of("name = \"\"\n"), "name", "expected a run name");
}

TEST(ConfigErrors, UnknownKeysAreNeverIgnored) {
    expect_error(error_of("[training]\nmax_stesp = 50\n"), "training.max_stesp",
                 "unknown key (a typo?); did you mean 'training.max_steps'?");
    expect_error(error_of("[trainig]\nmax_steps = 50\n"), "trainig",
                 "unknown key (a typo?); did you mean 'training'?");
    expect_error(error_of("[training]\nn_layer = 2\n"), "training.n_layer", "did you mean 'model.n_layer'?");
    expect_error(error_of("seed = 1\n"), "seed", "unknown key");
    expect_error(error_of("[model.extra]\nx = 1\n"), "model.extra", "unknown key");
    expect_error(error_of("[output]\nzzz = 1\n"), "output.zzz", "unknown key (a typo?)");
    // A typo is reported even when another key is also wrong further down.
    expect_error(error_of("[model]\nn_layer = 0\n[output]\ndri = \"x\"\n"), "output.dri", "unknown key");
}

TEST(ConfigErrors, SectionsMustBeTables) {
    expect_error(error_of("model = 3\n"), "model", "expected a table ([model]), got 3");
    expect_error(error_of("[quantization]\nrules = 1\n"), "quantization.rules",
                 "expected an array of tables");
}

TEST(ConfigErrors, CrossKeyChecks) {
    expect_error(error_of("[model]\nn_embd = 130\nn_head = 4\n"), "model.n_embd",
                 "expected a multiple of model.n_head (4), got 130");
    expect_error(error_of("[training]\nlearning_rate = 1e-5\n"), "training.min_lr",
                 "expected at most training.learning_rate (1e-05), got 6e-05");
    expect_error(error_of("[training]\nmax_steps = 10\nwarmup_steps = 20\n"), "training.warmup_steps",
                 "expected at most training.max_steps (10), got 20");
    EXPECT_EQ(error_of("[training]\nmax_steps = 10\nwarmup_steps = 10\nmin_lr = 6e-4\n"), "");
}

TEST(ConfigErrors, SyntaxErrorsGiveTheLine) {
    const std::string e = error_of("[model]\nn_layer = 4\nn_head = = 2\n");
    EXPECT_EQ(e.rfind(std::string(kFile) + ":3: not valid TOML", 0), 0u) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    const std::string dup = error_of("[model]\nn_layer = 4\nn_layer = 5\n");
    EXPECT_EQ(dup.rfind(std::string(kFile) + ":3:", 0), 0u) << dup;
}

// Two inputs that stop toml++ 3.3.0 when it is compiled with its assertions
// and clang's checks (found by fuzzing, docs/reliability.md): a table header
// whose key cannot start a key (an assertion), and a character beyond ASCII
// outside a string (its whitespace table reaches __builtin_unreachable).
// Debian's library, which the host links, refuses both with a syntax error
// naming the line; this keeps it so.
TEST(ConfigErrors, InputsThatStopToml3p3InDebugBuildsAreSyntaxErrors) {
    const std::vector<std::string> lines = {"[@]", std::string("[\t\0ugin]", 8), "\xc3\xa9 = 1",
                                            "max_steps = 1 \xc3\xa9", "[\xc3\xa9]"};
    for (const std::string& line : lines) {
        const std::string e = error_of("name = \"x\"\n" + line + "\n");
        EXPECT_EQ(e.rfind(std::string(kFile) + ":2: not valid TOML: ", 0), 0u) << e;
        EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    }
}

TEST(ConfigErrors, MissingFileAndFolder) {
    try {
        load_config("/nonexistent/x.toml");
        FAIL() << "no error";
    } catch (const host::error& e) {
        EXPECT_NE(std::string(e.what()).find("/nonexistent/x.toml: no such config file"), std::string::npos)
            << e.what();
    }
    EXPECT_THROW(load_config(ALTGRAD_CONFIGS_DIR), host::error);
}

// ---- Overrides -----------------------------------------------------------------

TEST(ConfigOverrides, ValuesAreParsedAsToml) {
    const run_config c =
        parse_config("[training]\nmax_steps = 100\n", kFile,
                     {"training.max_steps=50", "training.learning_rate=1e-3", "model.bias=false",
                      "quantization.weight_format=\"e4m3\"", "quantization.activation_format=e3m4",
                      "data.path=/tmp/my data", "name=2024", "output.dir = out ", "model.dropout=0",
                      "training.min_lr=1e-4"});
    EXPECT_EQ(c.training.max_steps, 50);
    EXPECT_EQ(c.training.learning_rate, 1e-3);
    EXPECT_FALSE(c.model.bias);
    EXPECT_EQ(c.quantization.weight_format, "e4m3");
    EXPECT_EQ(c.quantization.activation_format, "e3m4");  // a bare word is a string
    EXPECT_EQ(c.data.path, "/tmp/my data");
    EXPECT_EQ(c.name, "2024");  // a string key takes the text, not the number
    EXPECT_EQ(c.output.dir, "out");
    EXPECT_EQ(c.model.dropout, 0.0);
    EXPECT_EQ(c.training.min_lr, 1e-4);
}

TEST(ConfigOverrides, TheLastOfTwoWins) {
    EXPECT_EQ(parse_config("", kFile, {"training.seed=1", "training.seed=7"}).training.seed, 7);
}

TEST(ConfigOverrides, UnknownKeyNamesTheSetArgument) {
    const std::string e = error_of("", {"training.max_stesp=50"});
    expect_error(e, "training.max_stesp", "unknown key (a typo?); did you mean 'training.max_steps'?");
    EXPECT_NE(e.find("--set training.max_stesp=50"), std::string::npos) << e;
    expect_error(error_of("", {"training=5"}), "training", "is a table");
    expect_error(error_of("", {"seed=5"}), "seed", "unknown key");
}

TEST(ConfigOverrides, BadValuesNameTheSetArgument) {
    const std::string e = error_of("", {"training.max_steps=-5"});
    EXPECT_EQ(e, std::string(kFile) +
                     ": --set training.max_steps=-5: key 'training.max_steps': expected an integer "
                     "1..1000000000, got -5");
    expect_error(error_of("", {"training.max_steps=fifty"}), "training.max_steps", "got \"fifty\"");
    expect_error(error_of("", {"model.activation=relu"}), "model.activation",
                 "expected one of gelu, swiglu, got \"relu\"");
    expect_error(error_of("", {"training.learning_rate=.001"}), "training.learning_rate", "got \".001\"");
}

// The rules are replaced as a whole list (an ablation's one --set), never key by key.
TEST(ConfigOverrides, RulesAreReplacedAsAList) {
    const std::string file = "[[quantization.rules]]\npattern = \"lm_head\"\nformat = \"bf16\"\n";
    EXPECT_TRUE(parse_config(file, kFile, {"quantization.rules=[]"}).quantization.rules.empty());
    const run_config c =
        parse_config(file, kFile, {"quantization.rules=[{ pattern = \"blocks.*\", format = \"fp16\" }]"});
    ASSERT_EQ(c.quantization.rules.size(), 1u);
    EXPECT_EQ(c.quantization.rules[0].pattern, "blocks.*");
    EXPECT_EQ(*c.quantization.rules[0].weight, "fp16");
    for (const char* o : {"quantization.rules.0.pattern=x", "quantization.rules[0].format=bf16"}) {
        const std::string e = error_of("", {o});
        const std::string key = std::string(o).substr(0, std::string(o).find('='));
        expect_error(e, key, "cannot be set one by one");
        EXPECT_NE(e.find(std::string("--set ") + o), std::string::npos) << e;
    }
    expect_error(error_of("", {"quantization.rules=bf16"}), "quantization.rules",
                 "expected an array of rule tables");
    // A replaced list is checked as the file's: here a rule that matches no layer.
    expect_error(error_of("", {"quantization.rules=[{ pattern = \"nope\", format = \"bf16\" }]"}),
                 "quantization.rules[0].pattern", "matches no layer");
}

TEST(ConfigOverrides, WithoutAnEqualsSignIsAUsageError) {
    EXPECT_THROW(parse_config("", kFile, {"training.max_steps"}), host::usage_error);
    EXPECT_THROW(parse_config("", kFile, {"=5"}), host::usage_error);
}

TEST(ConfigOverrides, CrossKeyErrorsSayWhereTheOtherValueCameFrom) {
    EXPECT_EQ(error_of("[training]\nwarmup_steps = 50\n", {"training.max_steps=10"}),
              std::string(kFile) +
                  ": key 'training.warmup_steps': expected at most training.max_steps "
                  "(10, from --set training.max_steps=10), got 50");
}

// The first experiment a newcomer tries: a short run. The default warm-up (50)
// gives way, to a tenth of the run, and says so; a warm-up that was set does not.
TEST(ConfigOverrides, AShortRunShortensTheDefaultWarmUpWithANote) {
    const run_config c = parse_config("", kFile, {"training.max_steps=20"});
    EXPECT_EQ(c.training.max_steps, 20);
    EXPECT_EQ(c.training.warmup_steps, 2);
    ASSERT_EQ(c.notes.size(), 1u);
    EXPECT_NE(c.notes[0].find("training.warmup_steps: the default 50 is more than training.max_steps (20); "
                              "shortened to max_steps / 10 = 2"),
              std::string::npos)
        << c.notes[0];
    EXPECT_TRUE(parse_config("", kFile, {"training.max_steps=50"}).notes.empty());  // 50 fits: unchanged
    EXPECT_EQ(parse_config("", kFile, {"training.max_steps=50"}).training.warmup_steps, 50);
    EXPECT_NE(error_of("", {"training.max_steps=20", "training.warmup_steps=30"}), "");
}

TEST(ConfigOverrides, OverrideFixesACrossKeyProblemInTheFile) {
    EXPECT_EQ(error_of("[training]\nmax_steps = 10\n", {"training.warmup_steps=5"}), "");
}

// ---- to_toml -------------------------------------------------------------------

TEST(ConfigToToml, DefaultsRoundTripAndEveryKeyIsWritten) {
    const run_config c = parse_config("", kFile);
    const std::string text = to_toml(c);
    EXPECT_TRUE(parse_config(text, "elsewhere/config.toml") == c) << text;
    for (const char* line :
         {"name = \"my_run\"", "[model]", "n_layer = 4", "dropout = 0.0", "bias = true",
          "activation = \"gelu\"", "path = \"/usr/share/games/fortunes\"", "val_fraction = 0.1",
          "learning_rate = 0.0006", "min_lr = 6e-05", "grad_clip = 1.0", "seed = 42", "weight_decay = 0.1",
          "beta2 = 0.95", "backward_rounding = \"stochastic\"", "margin = 0", "rules = []", "[output]",
          "keep_checkpoints = 2"})
        EXPECT_NE(text.find(std::string(line) + "\n"), std::string::npos) << line << "\n" << text;
    EXPECT_NE(text.find("\nsr_bits = 32\n"), std::string::npos) << text;
}

TEST(ConfigToToml, EverythingChangedRoundTrips) {
    const run_config c = parse_config(R"(
name = "odd \"name\" with ünïcode"
[model]
n_layer = 3
n_head = 6
n_embd = 96
block_size = 128
dropout = 0.1
bias = false
activation = "swiglu"
vocab_size = 256
[data]
path = "data/we\\ird \"dir\"\ttab"
format = "nanogpt"
val_fraction = 0.3333333333333333
vocab_size = 65
[training]
max_steps = 1000
batch_size = 64
learning_rate = 3e-4
min_lr = 3.0000000000000004e-05
warmup_steps = 100
lr_schedule = "constant"
weight_decay = 0.0
beta1 = 0.8
beta2 = 0.99
grad_clip = 0.5
seed = 1234567890123
eval_interval = 25
eval_batches = 3
log_interval = 1
device = "cuda"
threads = 8
[quantization]
enabled = false
weight_format = "e4m3"
activation_format = "e3m4"
gradient_format = "e5m2"
forward_rounding = "stochastic"
backward_rounding = "nearest"
sr_bits = 8
overflow = "nonfinite"
scaling = "current"
amax_history_len = 1024
amax_compute = "most_recent"
margin = 3
shadow_weights = false
diagnostic_interval = 7
[[quantization.rules]]
pattern = "lm_head"
format = "fp32"
[[quantization.rules]]
pattern = "blocks.*.mlp.gate"
activation = "bf16"
[[quantization.rules]]
pattern = "blocks.?.attn.*"
format = "e4m3"
gradient = "e5m2"
[output]
dir = "/tmp/runs"
checkpoint_interval = 10
keep_checkpoints = 5
)",
                                      kFile);
    const std::string text = to_toml(c);
    const run_config back = parse_config(text, "x.toml");
    EXPECT_TRUE(back == c) << text;
    EXPECT_EQ(to_toml(back), text);
    EXPECT_EQ(back.training.min_lr, 3.0000000000000004e-05);
    EXPECT_EQ(back.data.val_fraction, 1.0 / 3.0);
    EXPECT_EQ(back.quantization.sr_bits, 8);
    EXPECT_NE(text.find("weight_decay = 0.0\n"), std::string::npos) << text;
    EXPECT_NE(text.find("sr_bits = 8\n"), std::string::npos) << text;
    EXPECT_EQ(back.data.path, "data/we\\ird \"dir\"\ttab");
    EXPECT_EQ(back.name, "odd \"name\" with ünïcode");
}

TEST(ConfigToToml, FloatsStayFloatsAndRoundTripExactly) {
    for (double v : {1.0, 0.1, 1e-3, 6e-4, 1.0 / 3.0, 0.30000000000000004, 1e-9, 2.5e-7, 9.999999999999998,
                     10.0, 9.87654321, 5e-324, 1e-4, 0.00012345678901234567, 7.0}) {
        run_config c = parse_config("", kFile);
        c.training.learning_rate = v;
        c.training.min_lr = 0;
        const std::string text = to_toml(c);
        const run_config back = parse_config(text, kFile);
        EXPECT_EQ(back.training.learning_rate, v) << text;
    }
}

TEST(ConfigToToml, EqualityIgnoresOnlyTheSource) {
    run_config a = parse_config("", "a.toml"), b = parse_config("", "b.toml");
    EXPECT_FALSE(a == b);  // names differ (the stems)
    b.name = a.name;
    EXPECT_TRUE(a == b);
    b.training.beta1 = 0.91;
    EXPECT_FALSE(a == b);
    b = a;
    b.quantization.rules.push_back({"lm_head", std::string("fp32"), std::nullopt, std::nullopt});
    EXPECT_TRUE(a != b);
}

// ---- Rules ---------------------------------------------------------------------

TEST(ConfigRules, FormatFillsTheDirectionsTheRuleLeavesOut) {
    const run_config c = parse_config(R"(
[quantization]
weight_format = "e4m3"
activation_format = "e4m3"
gradient_format = "e5m2"
[[quantization.rules]]
pattern = "lm_head"
format = "fp32"
[[quantization.rules]]
pattern = "blocks.*.attn.*"
format = "bf16"
gradient = "e5m2"
[[quantization.rules]]
pattern = "blocks.*.mlp.fc"
activation = "e1m6"
)",
                                      kFile);
    const auto& r = c.quantization.rules;
    ASSERT_EQ(r.size(), 3u);
    EXPECT_EQ(r[0],
              (quantization_rule{"lm_head", std::string("fp32"), std::string("fp32"), std::string("fp32")}));
    EXPECT_EQ(r[1], (quantization_rule{"blocks.*.attn.*", std::string("bf16"), std::string("bf16"),
                                       std::string("e5m2")}));
    EXPECT_EQ(r[2], (quantization_rule{"blocks.*.mlp.fc", std::nullopt, std::string("e1m6"), std::nullopt}));

    // Each layer's operands as resolve() gives them, with the key of the rule that decided.
    auto first_uses = [&](const std::string& layer) {
        const layer_recipe r = recipe_of(c.quantization, layer);
        return std::vector<std::string>{
            r.first_use(operand_kind::w).format, r.first_use(operand_kind::x).format,
            r.first_use(operand_kind::dy).format, r.first_use(operand_kind::w).key};
    };
    EXPECT_EQ(first_uses("lm_head"),
              (std::vector<std::string>{"fp32", "fp32", "fp32", "quantization.rules[0]"}));
    EXPECT_EQ(first_uses("blocks.3.attn.qkv"),
              (std::vector<std::string>{"bf16", "bf16", "e5m2", "quantization.rules[1]"}));
    // blocks.*.mlp.fc's rule leaves the weight and the gradient: the global formats, by their keys.
    EXPECT_EQ(first_uses("blocks.0.mlp.fc"),
              (std::vector<std::string>{"e4m3", "e1m6", "e5m2", "quantization.weight_format"}));
    EXPECT_EQ(first_uses("blocks.0.mlp.proj"),
              (std::vector<std::string>{"e4m3", "e4m3", "e5m2", "quantization.weight_format"}));
}

TEST(ConfigRules, FirstMatchWins) {
    const run_config c = parse_config(R"(
[[quantization.rules]]
pattern = "blocks.0.*"
format = "fp32"
[[quantization.rules]]
pattern = "blocks.*"
format = "bf16"
)",
                                      kFile);
    EXPECT_EQ(recipe_of(c.quantization, "blocks.0.attn.qkv").first_use(operand_kind::w).format, "fp32");
    EXPECT_EQ(recipe_of(c.quantization, "blocks.1.attn.qkv").first_use(operand_kind::w).format, "bf16");
    EXPECT_EQ(recipe_of(c.quantization, "lm_head").first_use(operand_kind::w).format, "e5m2");
}

TEST(ConfigRules, PatternGlob) {
    EXPECT_TRUE(pattern_matches("blocks.*.attn.*", "blocks.0.attn.qkv"));
    EXPECT_TRUE(pattern_matches("blocks.*.attn.*", "blocks.12.attn.proj"));
    EXPECT_FALSE(pattern_matches("blocks.*.attn.*", "blocks.0.mlp.fc"));
    EXPECT_TRUE(pattern_matches("*", "lm_head"));
    EXPECT_TRUE(pattern_matches("*proj", "blocks.1.mlp.proj"));  // '*' crosses dots
    EXPECT_TRUE(pattern_matches("lm_head", "lm_head"));
    EXPECT_FALSE(pattern_matches("lm_head", "lm_head2"));
    EXPECT_FALSE(pattern_matches("lm", "lm_head"));  // whole name
    EXPECT_TRUE(pattern_matches("blocks.?.ln_?", "blocks.3.ln_2"));
    EXPECT_FALSE(pattern_matches("blocks.?.ln_1", "blocks.10.ln_1"));
    EXPECT_TRUE(pattern_matches("a*b*c", "aXbYbZc"));
    EXPECT_TRUE(pattern_matches("**", ""));
    EXPECT_FALSE(pattern_matches("?", ""));
}

TEST(ConfigRules, LayerNames) {
    model_config m;
    m.n_layer = 2;
    const std::vector<std::string> gelu = layer_names(m);
    EXPECT_EQ(gelu.size(), 2u * 4 + 1);  // qkv, proj, fc, proj per block; lm_head
    EXPECT_EQ(gelu.front(), "blocks.0.attn.qkv");
    EXPECT_EQ(gelu[2], "blocks.0.mlp.fc");
    EXPECT_EQ(std::count(gelu.begin(), gelu.end(), "tok_emb"), 0);  // embeddings stay float32
    EXPECT_EQ(gelu.back(), "lm_head");
    EXPECT_EQ(std::count(gelu.begin(), gelu.end(), "blocks.1.mlp.gate"), 0);
    m.activation = activation_function::swiglu;
    const std::vector<std::string> swiglu = layer_names(m);
    EXPECT_EQ(swiglu.size(), 2u * 5 + 1);
    EXPECT_EQ(std::count(swiglu.begin(), swiglu.end(), "blocks.1.mlp.gate"), 1);
}

TEST(ConfigRules, Errors) {
    const std::string rule = "[[quantization.rules]]\n";
    expect_error(error_of(rule + "format = \"bf16\"\n"), "quantization.rules[0].pattern", "missing");
    expect_error(error_of(rule + "pattern = \"lm_head\"\n"), "quantization.rules[0]", "sets nothing");
    expect_error(error_of(rule + "pattern = \"lm_head\"\nfromat = \"bf16\"\n"),
                 "quantization.rules[0].fromat",
                 "unknown key (a typo?); did you mean 'quantization.rules[0].format'?");
    expect_error(error_of(rule + "pattern = \"lm_head\"\nformat = \"BF16\"\n"),
                 "quantization.rules[0].format", "expected a format plugin name");
    expect_error(error_of(rule + "pattern = \"lm_head\"\nweight = 8\n"), "quantization.rules[0].weight",
                 "got 8");
    expect_error(error_of(rule + "pattern = \"blocks[0]\"\nformat = \"bf16\"\n"),
                 "quantization.rules[0].pattern", "expected a layer-name pattern");
    expect_error(error_of(rule + "pattern = 3\nformat = \"bf16\"\n"), "quantization.rules[0].pattern",
                 "got 3");
    expect_error(error_of("[quantization]\nrules = [1]\n"), "quantization.rules[0]", "expected a table");
    // Index counts from 0 in file order.
    expect_error(error_of(rule + "pattern = \"lm_head\"\nformat = \"bf16\"\n" + rule + "pattern = \"x\"\n"),
                 "quantization.rules[1]", "sets nothing");
}

TEST(ConfigRules, APatternThatMatchesNoLayerIsAnError) {
    const std::string rule = "[[quantization.rules]]\nformat = \"bf16\"\npattern = ";
    expect_error(error_of(rule + "\"blocks.*.atn.*\"\n"), "quantization.rules[0].pattern",
                 "\"blocks.*.atn.*\" matches no layer of this model");
    expect_error(error_of(rule + "\"lm_head.weight\"\n"), "quantization.rules[0].pattern",
                 "without \".weight\"");
    expect_error(error_of(rule + "\"blocks.4.*\"\n"), "quantization.rules[0].pattern", "N = 0..3");
    expect_error(error_of(rule + "\"blocks.*.mlp.gate\"\n"), "quantization.rules[0].pattern",
                 "matches no layer");
    EXPECT_EQ(error_of("[model]\nactivation = \"swiglu\"\n" + rule + "\"blocks.*.mlp.gate\"\n"), "");
    // The model size comes from overrides too.
    expect_error(error_of(rule + "\"blocks.3.*\"\n", {"model.n_layer=2"}), "quantization.rules[0].pattern",
                 "matches no layer");
}

// Issue #18: "blocks.0.ln_1" matched no layer, yet the list of layers showed
// blocks.N.{ln_1, ...}. LayerNorms are not quantized layers: the list must not
// name them.
// rename_formats (how the trainer gives aliases their plugin's name) reaches
// every place a format is named, and says which key each stands at.
TEST(ConfigRules, RenameFormatsVisitsEveryFormatWithItsKey) {
    run_config c = parse_config(
        "[quantization]\nweight_format = \"w\"\nactivation_format = \"a\"\ngradient_format = \"g\"\n"
        "scale_format = \"s\"\n[quantization.weight]\nscale_format = \"ws\"\n[quantization.params.w]\nk = 1\n"
        "[[quantization.rules]]\npattern = \"lm_head\"\nweight = \"rw\"\nscale_format = \"rs\"\n",
        kFile);
    std::set<std::string> seen;
    rename_formats(c.quantization, [&](const std::string& key, const std::string& name) {
        seen.insert(key + "=" + name);
        return name + "2";
    });
    EXPECT_EQ(seen, (std::set<std::string>{"quantization.weight_format=w", "quantization.activation_format=a",
                                           "quantization.gradient_format=g", "quantization.scale_format=s",
                                           "quantization.weight.scale_format=ws", "quantization.params.w=w",
                                           "quantization.rules[0]=rw", "quantization.rules[0]=rs"}));
    const quantization_config& q = c.quantization;
    EXPECT_EQ(q.weight_format + q.activation_format + q.gradient_format + q.scale_format, "w2a2g2s2");
    EXPECT_EQ(q.weight_scaling.scale_format, std::optional<std::string>("ws2"));
    EXPECT_EQ(q.rules.at(0).weight, std::optional<std::string>("rw2"));
    EXPECT_EQ(q.rules.at(0).scaling.scale_format, std::optional<std::string>("rs2"));
    EXPECT_FALSE(q.rules.at(0).activation) << "a direction the rule leaves to the global format stays unset";
    ASSERT_EQ(q.params.count("w2"), 1u);
    EXPECT_EQ(q.params.at("w2").at("k"), integer("1"));
}

TEST(ConfigRules, TheNoLayerErrorListsOnlyLayersThatExist) {
    const std::string e =
        error_of("[[quantization.rules]]\nformat = \"bf16\"\npattern = \"blocks.0.ln_1\"\n");
    expect_error(e, "quantization.rules[0].pattern", "\"blocks.0.ln_1\" matches no layer of this model");
    EXPECT_EQ(e.find("ln_1", e.find("its layers")), std::string::npos) << e;
    EXPECT_NE(e.find("blocks.N.attn.qkv"), std::string::npos) << e;
}

TEST(ConfigRules, ARuleShadowedByEarlierOnesIsAnError) {
    const std::string e = error_of(
        "[[quantization.rules]]\npattern = \"*\"\nformat = \"bf16\"\n"
        "[[quantization.rules]]\npattern = \"lm_head\"\nformat = \"fp32\"\n");
    expect_error(e, "quantization.rules[1].pattern", "never applies");
    EXPECT_NE(e.find("quantization.rules[0]"), std::string::npos) << e;
    EXPECT_NE(e.find("first matching rule wins"), std::string::npos) << e;
    // Partly shadowed is fine: it still decides some layer.
    EXPECT_EQ(error_of("[[quantization.rules]]\npattern = \"blocks.0.*\"\nformat = \"bf16\"\n"
                       "[[quantization.rules]]\npattern = \"blocks.*\"\nformat = \"fp32\"\n"),
              "");
}

// A rule can name its layers by their place instead of their names, so a
// recipe holds for any model (issue #45): the last N linear layers, or the
// last fraction f of them, ceil(f * count) of the decimal written.
TEST(ConfigRules, LastAndLastFractionTakeTheLastLayersInModelOrder) {
    // Expected counts are the decimal arithmetic: 0.1 x 10 = 1, 0.7 x 10 = 7,
    // 0.15 x 17 = 2.55 -> 3, 0.15 x 20 = 3, 0.3 x 10 = 3 (the doubles nearest
    // 0.1 and 0.7 lie above and below them).
    EXPECT_EQ(last_fraction_count(0.1, 10), 1u);
    EXPECT_EQ(last_fraction_count(0.7, 10), 7u);
    EXPECT_EQ(last_fraction_count(0.15, 17), 3u);
    EXPECT_EQ(last_fraction_count(0.15, 20), 3u);
    EXPECT_EQ(last_fraction_count(0.3, 10), 3u);
    EXPECT_EQ(last_fraction_count(1.0, 9), 9u);
    EXPECT_EQ(last_fraction_count(0.01, 9), 1u);  // any positive fraction takes at least one
    model_config m;
    m.n_layer = 2;  // 9 linear layers: 4 per block and the head
    const std::vector<std::string> layers = layer_names(m);
    const run_config c = parse_config(R"(
[[quantization.rules]]
last = 1
format = "fp32"
[[quantization.rules]]
last_fraction = 0.5
format = "bf16"
)",
                                      kFile);
    const resolved_recipe r = resolve(c.quantization, layers);
    std::vector<std::string> formats;
    for (const layer_recipe& l : r.layers) formats.push_back(l.first_use(operand_kind::w).format);
    // ceil(0.5 x 9) = 5: the last five, of which the head goes to the first rule.
    EXPECT_EQ(formats, (std::vector<std::string>{"e5m2", "e5m2", "e5m2", "e5m2", "bf16", "bf16", "bf16",
                                                 "bf16", "fp32"}));
    EXPECT_EQ(layers.back(), "lm_head");
    // last beyond the count takes every layer.
    quantization_rule all;
    all.last = 100;
    for (size_t i = 0; i < layers.size(); ++i) EXPECT_TRUE(rule_selects(all, layers[i], i, layers.size()));
}

TEST(ConfigRules, ASelectorIsExactlyOneOfPatternLastAndLastFraction) {
    const std::string rule = "[[quantization.rules]]\nformat = \"bf16\"\n";
    expect_error(error_of(rule), "quantization.rules[0].pattern", "last = N");
    expect_error(error_of(rule + "pattern = \"lm_head\"\nlast = 1\n"), "quantization.rules[0]",
                 "names its layers twice");
    expect_error(error_of(rule + "last = 1\nlast_fraction = 0.5\n"), "quantization.rules[0]",
                 "names its layers twice");
    for (const char* bad : {"0", "-1", "1.5", "\"1\"", "1000001"})
        expect_error(error_of(rule + "last = " + bad + "\n"), "quantization.rules[0].last",
                     std::string("expected an integer 1..1000000 (the last N linear layers), got"));
    for (const char* bad : {"0", "0.0", "-0.5", "1.5", "\"0.5\"", "nan"})
        expect_error(error_of(rule + "last_fraction = " + bad + "\n"), "quantization.rules[0].last_fraction",
                     "expected a number in (0, 1]");
    EXPECT_EQ(error_of(rule + "last_fraction = 1\n"), "");
    // Shadowing is said with the selector.
    expect_error(error_of(rule + "last = 3\n" + rule + "last = 2\n"), "quantization.rules[1].last",
                 "last = 2 never applies: every layer it matches is taken by an earlier rule "
                 "(quantization.rules[0], last = 3, e.g. blocks.3.mlp.proj)");
}

TEST(ConfigRules, SelectorsRoundTripThroughToToml) {
    const run_config c = parse_config(R"(
[[quantization.rules]]
last = 2
format = "fp32"
[[quantization.rules]]
last_fraction = 0.15
format = "bf16"
[[quantization.rules]]
pattern = "blocks.0.*"
format = "e4m3"
)",
                                      kFile);
    const std::string text = to_toml(c);
    EXPECT_NE(text.find("\nlast = 2\n"), std::string::npos) << text;
    EXPECT_NE(text.find("\nlast_fraction = 0.15\n"), std::string::npos) << text;
    EXPECT_NE(text.find("\npattern = \"blocks.0.*\"\n"), std::string::npos) << text;
    EXPECT_EQ(parse_config(text, kFile), c);
}

TEST(ConfigRules, InlineArrayOfTablesAndEmptyRules) {
    const run_config c =
        parse_config("[quantization]\nrules = [{ pattern = \"lm_head\", format = \"bf16\" }]\n", kFile);
    ASSERT_EQ(c.quantization.rules.size(), 1u);
    EXPECT_EQ(*c.quantization.rules[0].weight, "bf16");
    EXPECT_TRUE(parse_config("[quantization]\nrules = []\n", kFile).quantization.rules.empty());
}

// ---- Plugin lists, their parameters, and [failure] ------------------------------

TEST(ConfigPlugins, DefaultsAreEmptyListsAndTheDocumentedFailureThresholds) {
    const run_config c = parse_config("", kFile);
    EXPECT_TRUE(c.stability.interventions.empty());
    EXPECT_TRUE(c.stability.params.empty());
    EXPECT_TRUE(c.diagnostics.plugins.empty());
    EXPECT_TRUE(c.diagnostics.params.empty());
    EXPECT_EQ(c.failure.bit_stall, 0.5);
    EXPECT_EQ(c.failure.min_progress, 0.01);
    EXPECT_EQ(c.failure.overflow, 0.1);
    EXPECT_EQ(c.failure.vanishing, 0.7);
    EXPECT_EQ(c.failure.near_zero, 1e-8);
    EXPECT_EQ(c.failure.early_stop, 0.1);
    EXPECT_EQ(c.failure.patience, 3);
    EXPECT_EQ(c.failure.max_nonfinite_steps, 10);

    run_config expected;
    expected.name = "my_run";
    EXPECT_TRUE(c == expected);
    EXPECT_TRUE(parse_config("[stability]\n[diagnostics]\n[failure]\n", kFile) == expected);
    EXPECT_TRUE(parse_config("[stability]\ninterventions = []\n[diagnostics]\nplugins = []\n", kFile) ==
                expected);
}

TEST(ConfigPlugins, ListsAndParametersAreRead) {
    const run_config c = parse_config(R"(
[stability]
interventions = ["mantissa_shift", "partition_clip"]
[stability.params.mantissa_shift]
chain = "e7m0>e5m2"
nan_patience = 3
stall_threshold = 0.25
verbose = true
[diagnostics]
plugins = ["stiffness", "bit_stall"]
[diagnostics.params.stiffness]
sample = 1024
relative = false
[failure]
bit_stall = 0.6
min_progress = 0
overflow = 0.2
vanishing = 0.9
near_zero = 1e-6
early_stop = 0.25
patience = 5
max_nonfinite_steps = 20
)",
                                      kFile);
    EXPECT_EQ(c.stability.interventions, (std::vector<std::string>{"mantissa_shift", "partition_clip"}));
    const plugin_params expected_stability = {{"mantissa_shift",
                                               {{"chain", string("e7m0>e5m2")},
                                                {"nan_patience", integer("3")},
                                                {"stall_threshold", floating("0.25")},
                                                {"verbose", boolean("true")}}}};
    EXPECT_EQ(c.stability.params, expected_stability);  // partition_clip: no table, no entry
    EXPECT_EQ(c.diagnostics.plugins, (std::vector<std::string>{"stiffness", "bit_stall"}));
    const plugin_params expected_diagnostics = {
        {"stiffness", {{"sample", integer("1024")}, {"relative", boolean("false")}}}};
    EXPECT_EQ(c.diagnostics.params, expected_diagnostics);
    EXPECT_EQ(c.failure.bit_stall, 0.6);
    EXPECT_EQ(c.failure.min_progress, 0.0);
    EXPECT_EQ(c.failure.overflow, 0.2);
    EXPECT_EQ(c.failure.vanishing, 0.9);
    EXPECT_EQ(c.failure.near_zero, 1e-6);
    EXPECT_EQ(c.failure.early_stop, 0.25);
    EXPECT_EQ(c.failure.patience, 5);
    EXPECT_EQ(c.failure.max_nonfinite_steps, 20);
}

TEST(ConfigPlugins, ListOrderIsKept) {
    const run_config c =
        parse_config("[stability]\ninterventions = [\"partition_clip\", \"mantissa_shift\"]\n", kFile);
    EXPECT_EQ(c.stability.interventions, (std::vector<std::string>{"partition_clip", "mantissa_shift"}));
}

TEST(ConfigPlugins, InlineParamsTablesAreRead) {
    const run_config c = parse_config(
        "[stability]\ninterventions = [\"mantissa_shift\"]\nparams = { mantissa_shift = { nan_patience = 2 } "
        "}\n",
        kFile);
    EXPECT_EQ(c.stability.params.at("mantissa_shift").at("nan_patience"), integer("2"));
}

TEST(ConfigPlugins, EverythingRoundTripsThroughToToml) {
    const run_config c = parse_config(R"(
[quantization]
weight_format = "e7m0"
[[quantization.rules]]
pattern = "lm_head"
format = "bf16"
[stability]
interventions = ["mantissa_shift", "partition_clip"]
[stability.params.mantissa_shift]
chain = "e7m0>e5m2,e1m6>e3m4"
nan_patience = "3"
stall_threshold = 0.25
tiny = 1e-8
offset = -2
on = false
empty = ""
odd = "say \"hi\" \\ back"
looks_true = "true"
looks_float = "1.0"
not_quite_a_number = "1e5"
with_hash = "1 # not a comment"
[stability.params.partition_clip]
threshold = 0.1
[diagnostics]
plugins = ["stiffness"]
[diagnostics.params.stiffness]
sample = 4096
[failure]
bit_stall = 0.75
min_progress = 0.005
overflow = 0.3
vanishing = 0.95
near_zero = 0
early_stop = 1
patience = 1000000
max_nonfinite_steps = 1
)",
                                      kFile);
    const auto& ms = c.stability.params.at("mantissa_shift");
    EXPECT_EQ(ms.at("chain"), string("e7m0>e5m2,e1m6>e3m4"));
    EXPECT_EQ(ms.at("nan_patience"), string("3"));  // as written: the manifest is checked at run start
    EXPECT_EQ(ms.at("tiny"), floating("1e-08"));
    EXPECT_EQ(ms.at("offset"), integer("-2"));
    EXPECT_EQ(ms.at("on"), boolean("false"));
    EXPECT_EQ(ms.at("empty"), string(""));
    EXPECT_EQ(ms.at("odd"), string("say \"hi\" \\ back"));
    EXPECT_EQ(ms.at("looks_true"), string("true")) << "a string that reads as a boolean stays a string";

    const std::string text = to_toml(c);
    const run_config back = parse_config(text, "x.toml");
    EXPECT_TRUE(back == c) << text;
    EXPECT_EQ(back.stability.params, c.stability.params) << text;
    EXPECT_EQ(back.diagnostics.params, c.diagnostics.params) << text;
    EXPECT_EQ(to_toml(back), text);
    for (const char* line : {"[stability]",
                             "interventions = [\"mantissa_shift\", \"partition_clip\"]",
                             "[stability.params.mantissa_shift]",
                             "chain = \"e7m0>e5m2,e1m6>e3m4\"",
                             "stall_threshold = 0.25",
                             "on = false",
                             "not_quite_a_number = \"1e5\"",
                             "looks_true = \"true\"",
                             "looks_float = \"1.0\"",
                             "[stability.params.partition_clip]",
                             "[diagnostics]",
                             "plugins = [\"stiffness\"]",
                             "[diagnostics.params.stiffness]",
                             "sample = 4096",
                             "[failure]",
                             "bit_stall = 0.75",
                             "near_zero = 0.0",
                             "early_stop = 1.0",
                             "patience = 1000000",
                             "max_nonfinite_steps = 1"})
        EXPECT_NE(text.find(std::string(line) + "\n"), std::string::npos) << line << "\n" << text;
}

TEST(ConfigPlugins, DefaultListsAreWrittenToo) {
    const std::string text = to_toml(parse_config("", kFile));
    for (const char* line :
         {"[stability]", "interventions = []", "[diagnostics]", "plugins = []", "[failure]",
          "bit_stall = 0.5", "min_progress = 0.01", "overflow = 0.1", "vanishing = 0.7", "near_zero = 1e-08",
          "early_stop = 0.1", "patience = 3", "max_nonfinite_steps = 10"})
        EXPECT_NE(text.find(std::string(line) + "\n"), std::string::npos) << line << "\n" << text;
}

TEST(ConfigPlugins, AParameterNameThatIsNoBareKeyRoundTrips) {
    const run_config c = parse_config(
        "[stability]\ninterventions = [\"mantissa_shift\"]\n[stability.params.mantissa_shift]\n"
        "\"with space\" = 1\n\"a.b\" = \"x\"\n\"\" = true\n\"qu\\\"ote\" = 2\n",
        kFile, {"stability.params.mantissa_shift.x.y=3"});  // --set: the key is everything after the name
    const auto& p = c.stability.params.at("mantissa_shift");
    EXPECT_EQ(p.at("with space"), integer("1"));
    EXPECT_EQ(p.at("a.b"), string("x"));
    EXPECT_EQ(p.at(""), boolean("true"));
    EXPECT_EQ(p.at("qu\"ote"), integer("2"));
    EXPECT_EQ(p.at("x.y"), integer("3"));
    const std::string text = to_toml(c);
    try {
        EXPECT_TRUE(parse_config(text, "x.toml") == c) << text;
    } catch (const std::exception& ex) {
        ADD_FAILURE() << ex.what() << "\n" << text;
    }
    EXPECT_NE(text.find("\"a.b\" = \"x\"\n"), std::string::npos) << text;
    EXPECT_NE(text.find("\"x.y\" = 3\n"), std::string::npos) << text;
}

TEST(ConfigPlugins, ParamsForAPluginNotInTheList) {
    const std::string e = error_of(
        "[stability]\ninterventions = [\"mantissa_shift\"]\n[stability.params.partition_clip]\nthreshold = "
        "0.1\n");
    EXPECT_EQ(e, std::string(kFile) +
                     ": key 'stability.params.partition_clip': parameters for 'partition_clip', "
                     "which is not in stability.interventions (enable it there)");
    expect_error(error_of("[stability.params.mantissa_shift]\nnan_patience = 2\n"),
                 "stability.params.mantissa_shift", "which is not in stability.interventions");
    expect_error(error_of("[diagnostics]\nplugins = [\"stiffness\"]\n[diagnostics.params.kurtosis]\nx = 1\n"),
                 "diagnostics.params.kurtosis",
                 "parameters for 'kurtosis', which is not in diagnostics.plugins");
    // Enabled in the other list is not enabled here.
    expect_error(error_of("[diagnostics]\nplugins = [\"stiffness\"]\n[stability.params.stiffness]\nx = 1\n"),
                 "stability.params.stiffness", "which is not in stability.interventions");
}

TEST(ConfigPlugins, ListErrors) {
    EXPECT_EQ(error_of("[stability]\ninterventions = [\"mantissa_shift\", \"mantissa_shift\"]\n"),
              std::string(kFile) + ": key 'stability.interventions': \"mantissa_shift\" is listed twice");
    expect_error(error_of("[diagnostics]\nplugins = [\"Stiffness\"]\n"), "diagnostics.plugins",
                 "expected plugin names ([a-z0-9][a-z0-9_]*), got \"Stiffness\"");
    expect_error(error_of("[diagnostics]\nplugins = [\"grid-alignment\"]\n"), "diagnostics.plugins",
                 "got \"grid-alignment\"");
    expect_error(error_of("[stability]\ninterventions = [\"\"]\n"), "stability.interventions",
                 "expected plugin names");
    expect_error(error_of("[stability]\ninterventions = [1]\n"), "stability.interventions",
                 "expected an array of plugin names, got an element 1");
    expect_error(error_of("[stability]\ninterventions = 3\n"), "stability.interventions",
                 "expected an array of plugin names, e.g. [\"mantissa_shift\"], got 3");
    expect_error(error_of("[diagnostics]\nplugins = { a = 1 }\n"), "diagnostics.plugins", "got a table");
    expect_error(error_of("stability = 1\n"), "stability", "expected a table ([stability]), got 1");
}

TEST(ConfigPlugins, ParamsErrors) {
    const std::string enabled = "[stability]\ninterventions = [\"mantissa_shift\"]\n";
    expect_error(error_of(enabled + "params = 3\n"), "stability.params",
                 "expected a table of tables ([stability.params.NAME]), got 3");
    expect_error(error_of(enabled + "params = { mantissa_shift = 3 }\n"), "stability.params.mantissa_shift",
                 "expected a table of parameters, got 3");
    expect_error(error_of(enabled + "params = { mantissa_shift = \"nan_patience=3\" }\n"),
                 "stability.params.mantissa_shift", "expected a table of parameters, got \"nan_patience=3\"");
    expect_error(error_of(enabled + "[stability.params.mantissa_shift]\nchain = [\"e7m0\", \"e5m2\"]\n"),
                 "stability.params.mantissa_shift.chain",
                 "expected a string, number or boolean, got an array");
    expect_error(error_of(enabled + "[stability.params.mantissa_shift.chain]\nfrom = \"e7m0\"\n"),
                 "stability.params.mantissa_shift.chain",
                 "expected a string, number or boolean, got a table");
    expect_error(error_of(enabled + "[stability.params.mantissa_shift]\nwhen = 1979-05-27\n"),
                 "stability.params.mantissa_shift.when", "got a date/time");
    expect_error(
        error_of("[diagnostics]\nplugins = [\"stiffness\"]\n[diagnostics.params.stiffness]\nx = []\n"),
        "diagnostics.params.stiffness.x", "got an array");
}

TEST(ConfigPlugins, UnknownKeysInTheNewSections) {
    expect_error(error_of("[failure]\npatince = 2\n"), "failure.patince",
                 "unknown key (a typo?); did you mean 'failure.patience'?");
    expect_error(error_of("[failure]\nmax_nonfinite_step = 2\n"), "failure.max_nonfinite_step",
                 "did you mean 'failure.max_nonfinite_steps'?");
    expect_error(error_of("[failure]\nbitstall = 0.5\n"), "failure.bitstall",
                 "did you mean 'failure.bit_stall'?");
    expect_error(error_of("[stability]\nintervention = [\"mantissa_shift\"]\n"), "stability.intervention",
                 "did you mean 'stability.interventions'?");
    expect_error(error_of("[diagnostics]\nplugin = [\"stiffness\"]\n"), "diagnostics.plugin",
                 "did you mean 'diagnostics.plugins'?");
    expect_error(error_of("[failures]\npatience = 2\n"), "failures", "did you mean 'failure'?");
    // A failure key in the wrong section points at its section.
    expect_error(error_of("[training]\npatience = 2\n"), "training.patience",
                 "did you mean 'failure.patience'?");
}

TEST(ConfigPlugins, FailureValuesOutOfRange) {
    EXPECT_EQ(error_of("[failure]\npatience = 0\n"),
              std::string(kFile) + ": key 'failure.patience': expected an integer 1..1000000, got 0");
    expect_error(error_of("[failure]\npatience = 1000001\n"), "failure.patience",
                 "expected an integer 1..1000000");
    expect_error(error_of("[failure]\nmax_nonfinite_steps = 0\n"), "failure.max_nonfinite_steps",
                 "expected an integer 1..1000000, got 0");
    expect_error(error_of("[failure]\npatience = 2.0\n"), "failure.patience", "got 2.0");
    expect_error(error_of("[failure]\nbit_stall = 1.5\n"), "failure.bit_stall",
                 "expected a number in [0, 1], got 1.5");
    expect_error(error_of("[failure]\noverflow = -0.1\n"), "failure.overflow",
                 "expected a number in [0, 1], got -0.1");
    expect_error(error_of("[failure]\nvanishing = 2\n"), "failure.vanishing",
                 "expected a number in [0, 1], got 2");
    expect_error(error_of("[failure]\nnear_zero = -1e-9\n"), "failure.near_zero",
                 "expected a number in [0, 1]");
    expect_error(error_of("[failure]\nmin_progress = nan\n"), "failure.min_progress", "got nan");
    expect_error(error_of("[failure]\nearly_stop = \"half\"\n"), "failure.early_stop", "got \"half\"");
    // The ends of [0, 1] are accepted.
    EXPECT_EQ(error_of("[failure]\nbit_stall = 0\noverflow = 1\nvanishing = 1.0\nearly_stop = 0\n"
                       "patience = 1\nmax_nonfinite_steps = 1000000\n"),
              "");
}

TEST(ConfigPluginOverrides, CommaSeparatedList) {
    const run_config c = parse_config("", kFile, {"stability.interventions=mantissa_shift,partition_clip"});
    EXPECT_EQ(c.stability.interventions, (std::vector<std::string>{"mantissa_shift", "partition_clip"}));
    EXPECT_EQ(parse_config("", kFile, {"diagnostics.plugins= stiffness , bit_stall "}).diagnostics.plugins,
              (std::vector<std::string>{"stiffness", "bit_stall"}));
    EXPECT_EQ(parse_config("", kFile, {"diagnostics.plugins=\"stiffness,ulp\""}).diagnostics.plugins,
              (std::vector<std::string>{"stiffness", "ulp"}));
    EXPECT_EQ(parse_config("", kFile, {"stability.interventions=mantissa_shift"}).stability.interventions,
              (std::vector<std::string>{"mantissa_shift"}));
}

TEST(ConfigPluginOverrides, TomlArrayList) {
    const run_config c = parse_config("", kFile, {"stability.interventions=[\"mantissa_shift\"]"});
    EXPECT_EQ(c.stability.interventions, (std::vector<std::string>{"mantissa_shift"}));
    EXPECT_TRUE(parse_config("", kFile, {"stability.interventions=[]"}).stability.interventions.empty());
}

TEST(ConfigPluginOverrides, TheListReplacesTheFiles) {
    const std::string file = "[stability]\ninterventions = [\"partition_clip\"]\n";
    EXPECT_EQ(parse_config(file, kFile, {"stability.interventions=mantissa_shift"}).stability.interventions,
              (std::vector<std::string>{"mantissa_shift"}));
    EXPECT_TRUE(parse_config(file, kFile, {"stability.interventions=[]"}).stability.interventions.empty());
    EXPECT_TRUE(parse_config(file, kFile, {"stability.interventions="}).stability.interventions.empty());
    // The file's params for the plugin the override removed are now an error.
    expect_error(error_of(file + "[stability.params.partition_clip]\nthreshold = 0.2\n",
                          {"stability.interventions=mantissa_shift"}),
                 "stability.params.partition_clip", "which is not in stability.interventions");
}

TEST(ConfigPluginOverrides, BadListValuesNameTheSetArgument) {
    const std::string e = error_of("", {"stability.interventions=mantissa_shift,Partition_clip"});
    EXPECT_EQ(e, std::string(kFile) +
                     ": --set stability.interventions=mantissa_shift,Partition_clip: key "
                     "'stability.interventions': expected plugin names ([a-z0-9][a-z0-9_]*), got "
                     "\"Partition_clip\"");
    expect_error(error_of("", {"stability.interventions=a,a"}), "stability.interventions",
                 "\"a\" is listed twice");
    expect_error(error_of("", {"stability.interventions=a,,b"}), "stability.interventions", "got \"\"");
    expect_error(error_of("", {"diagnostics.plugins=5"}), "diagnostics.plugins",
                 "expected an array of plugin names");
    expect_error(error_of("", {"diagnostics.plugins=[5]"}), "diagnostics.plugins", "got an element 5");
}

TEST(ConfigPluginOverrides, AParameter) {
    const std::string enabled = "[stability]\ninterventions = [\"mantissa_shift\"]\n";
    const run_config c = parse_config(
        enabled, kFile,
        {"stability.params.mantissa_shift.nan_patience=5",
         "stability.params.mantissa_shift.chain=e7m0>e5m2,e1m6>e3m4",
         "stability.params.mantissa_shift.threshold=0.25", "stability.params.mantissa_shift.verbose=true",
         "stability.params.mantissa_shift.quoted=\"3\""});
    const plugin_params expected = {{"mantissa_shift",
                                     {{"nan_patience", integer("5")},
                                      {"chain", string("e7m0>e5m2,e1m6>e3m4")},
                                      {"threshold", floating("0.25")},
                                      {"verbose", boolean("true")},
                                      {"quoted", string("3")}}}};
    EXPECT_EQ(c.stability.params, expected);
    // It round-trips like a parameter from the file.
    const std::string text = to_toml(c);
    EXPECT_TRUE(parse_config(text, "x.toml") == c) << text;

    // Over the file's value; the last of two wins.
    const run_config d = parse_config(
        enabled + "[stability.params.mantissa_shift]\nnan_patience = 2\nkeep = 1\n", kFile,
        {"stability.params.mantissa_shift.nan_patience=4", "stability.params.mantissa_shift.nan_patience=5"});
    EXPECT_EQ(d.stability.params.at("mantissa_shift").at("nan_patience"), integer("5"));
    EXPECT_EQ(d.stability.params.at("mantissa_shift").at("keep"), integer("1"));

    // Enabled from the command line too.
    const run_config e = parse_config(
        "", kFile,
        {"stability.params.mantissa_shift.nan_patience=5", "stability.interventions=mantissa_shift"});
    EXPECT_EQ(e.stability.params.at("mantissa_shift").at("nan_patience"), integer("5"));
    EXPECT_EQ(parse_config("[diagnostics]\nplugins = [\"stiffness\"]\n", kFile,
                           {"diagnostics.params.stiffness.sample=64"})
                  .diagnostics.params.at("stiffness")
                  .at("sample"),
              integer("64"));
}

TEST(ConfigPluginOverrides, AParameterForAPluginNotEnabled) {
    const std::string e = error_of("", {"stability.params.mantissa_shift.nan_patience=5"});
    EXPECT_EQ(e, std::string(kFile) +
                     ": --set stability.params.mantissa_shift.nan_patience=5: key "
                     "'stability.params.mantissa_shift': parameters for 'mantissa_shift', which is "
                     "not in stability.interventions (enable it there)");
    expect_error(error_of("[stability]\ninterventions = [\"partition_clip\"]\n",
                          {"stability.params.mantissa_shift.nan_patience=5"}),
                 "stability.params.mantissa_shift", "which is not in stability.interventions");
    expect_error(error_of("", {"diagnostics.params.stiffness.sample=64"}), "diagnostics.params.stiffness",
                 "which is not in diagnostics.plugins");
}

// As in the file, a parameter value is a string, number or boolean: an array
// or inline table from --set is refused, not passed on as the text "[1]".
TEST(ConfigPluginOverrides, AnArrayOrTableIsNoParameterValue) {
    const std::string file = "[stability]\ninterventions = [\"mantissa_shift\"]\n";
    EXPECT_EQ(error_of(file, {"stability.params.mantissa_shift.nan_patience=[1]"}),
              std::string(kFile) +
                  ": --set stability.params.mantissa_shift.nan_patience=[1]: key "
                  "'stability.params.mantissa_shift.nan_patience': expected a string, number or "
                  "boolean, got an array");
    expect_error(error_of(file, {"stability.params.mantissa_shift.chain={a=1}"}),
                 "stability.params.mantissa_shift.chain", "expected a string, number or boolean");
    // A bare word is still a string.
    EXPECT_EQ(parse_config(file, kFile, {"stability.params.mantissa_shift.chain=e7m0>e5m2"})
                  .stability.params.at("mantissa_shift")
                  .at("chain"),
              string("e7m0>e5m2"));
}

TEST(ConfigPluginOverrides, FailureKeys) {
    const run_config c = parse_config("", kFile,
                                      {"failure.patience=5", "failure.bit_stall=0.75",
                                       "failure.max_nonfinite_steps=2", "failure.near_zero=0"});
    EXPECT_EQ(c.failure.patience, 5);
    EXPECT_EQ(c.failure.bit_stall, 0.75);
    EXPECT_EQ(c.failure.max_nonfinite_steps, 2);
    EXPECT_EQ(c.failure.near_zero, 0.0);
    EXPECT_EQ(
        error_of("", {"failure.patience=0"}),
        std::string(kFile) +
            ": --set failure.patience=0: key 'failure.patience': expected an integer 1..1000000, got 0");
    expect_error(error_of("", {"failure.bit_stall=2"}), "failure.bit_stall",
                 "expected a number in [0, 1], got 2");
    expect_error(error_of("", {"failure.patince=2"}), "failure.patince", "did you mean 'failure.patience'?");
    expect_error(error_of("", {"failure=1"}), "failure",
                 "is a table; set one of its keys, e.g. --set failure.bit_stall=...");
    expect_error(error_of("", {"stability=1"}), "stability", "e.g. --set stability.interventions=...");
    expect_error(error_of("", {"stability.params=1"}), "stability.params",
                 "is a table; set one of its keys, e.g. --set stability.params.NAME.KEY=...");
    expect_error(error_of("", {"diagnostics.params=1"}), "diagnostics.params",
                 "e.g. --set diagnostics.params.NAME.KEY=...");
}

// ---- configs/ ------------------------------------------------------------------

std::vector<fs::path> config_files() {
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(ALTGRAD_CONFIGS_DIR))
        if (entry.is_regular_file() && entry.path().extension() == ".toml") files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    return files;
}

TEST(ConfigFiles, EveryConfigLoadsValidatesAndRoundTrips) {
    const std::vector<fs::path> files = config_files();
    EXPECT_GE(files.size(), 9u);
    for (const fs::path& file : files) {
        SCOPED_TRACE(file.string());
        const std::optional<run_config> c = expect_config_file_loads(file);
        if (!c) continue;
        EXPECT_EQ(c->source, file);
        EXPECT_TRUE(
            load_config(file, {"training.max_steps=50", "training.warmup_steps=5"}).training.max_steps == 50);
    }
}

TEST(ConfigFiles, TheSeedExperimentsAreThereWithTheSeedSettings) {
    const std::set<std::string> expected = {"bf16_baseline", "e5m2_fp8",     "e5m2_short",
                                            "e4m3_uniform",  "e3m4_uniform", "e1m6_uniform",
                                            "e1m6_postln",   "e0m7_uniform", "e7m0_uniform"};
    for (const std::string& name : expected) {
        SCOPED_TRACE(name);
        const fs::path file = fs::path(ALTGRAD_CONFIGS_DIR) / (name + ".toml");
        ASSERT_TRUE(fs::exists(file));
        const run_config c = load_config(file);
        EXPECT_EQ(c.training.max_steps, name == "e5m2_fp8" ? 1000 : 500);
        EXPECT_EQ(c.training.seed, 42);
        EXPECT_EQ(c.training.batch_size, 12);
        EXPECT_EQ(c.training.learning_rate, 6e-4);
        EXPECT_TRUE(c.quantization.shadow_weights);
        EXPECT_TRUE(c.quantization.enabled);
        if (name.size() > 8 && name.compare(name.size() - 8, 8, "_uniform") == 0) {
            const std::string format = name.substr(0, name.size() - 8);
            EXPECT_EQ(c.quantization.weight_format, format);
            EXPECT_EQ(c.quantization.activation_format, format);
            EXPECT_EQ(c.quantization.gradient_format, format);
            EXPECT_TRUE(c.quantization.rules.empty());
        }
    }
    const run_config bf16 = load_config(fs::path(ALTGRAD_CONFIGS_DIR) / "bf16_baseline.toml");
    EXPECT_EQ(resolve(bf16).operand_formats(), std::vector<std::string>{"bf16"});
    for (const char* name : {"e5m2_short", "e5m2_fp8"}) {
        const run_config c = load_config(fs::path(ALTGRAD_CONFIGS_DIR) / (std::string(name) + ".toml"));
        EXPECT_EQ(
            c.quantization.weight_format + c.quantization.activation_format + c.quantization.gradient_format,
            "e5m2e5m2e5m2");
    }
}

// The studies' sweeps at the separating workload (every study*.toml sweep file but study_seeds.toml,
// which keeps the seeds' 500 steps, and study 5's study5_*.toml, which scale it to other model
// sizes; gpt2_small_recipes.toml is GPT-2 small's workload, not a study's)
// repeat configs/separating_bf16.toml's [training] settings as overrides (a sweep file names base
// configs, not a workload): they must agree, or the study would not train what
// docs/performance.md measured.
TEST(ConfigFiles, TheStudySweepsTrainAtTheSeparatingWorkload) {
    const fs::path dir = ALTGRAD_CONFIGS_DIR;
    run_config workload = load_config(dir / "separating_bf16.toml");
    std::vector<std::string> sweeps;
    for (const auto& entry : fs::directory_iterator(dir / "sweeps"))
        if (entry.path().extension() == ".toml" && entry.path().filename().string().rfind("study", 0) == 0 &&
            entry.path().filename() != "study_seeds.toml" &&
            entry.path().filename().string().rfind("study5_", 0) != 0 &&
            entry.path().filename().string().rfind("study7_", 0) != 0)  // GPT-2 small on GPUs
            sweeps.push_back(entry.path().filename().string());
    EXPECT_GE(sweeps.size(), 11u);  // study 2 and 3's four, study 4's seven
    for (const std::string& sweep : sweeps) {
        SCOPED_TRACE(sweep);
        const toml::table t = toml::parse_file((dir / "sweeps" / sweep).string());
        std::vector<std::string> training;
        const toml::array* set = t["set"].as_array();
        ASSERT_NE(set, nullptr);
        for (const toml::node& n : *set) {
            const std::string o = n.value_or(std::string());
            if (o.rfind("training.", 0) == 0 && o.rfind("training.threads=", 0) != 0) training.push_back(o);
        }
        run_config c = load_config(dir / "bf16_baseline.toml", training);
        EXPECT_GT(c.training.max_steps, 500);
        c.name = workload.name;
        c.source = workload.source;
        EXPECT_TRUE(c == workload)
            << "bf16_baseline with the sweep's training.* overrides differs from separating_bf16";
    }
}

TEST(ConfigFiles, E1m6PostLnQuantizesOnlyThePostLayerNormInputs) {
    const run_config c = load_config(fs::path(ALTGRAD_CONFIGS_DIR) / "e1m6_postln.toml");
    for (const std::string& layer : layer_names(c.model)) {
        SCOPED_TRACE(layer);
        const layer_recipe f = recipe_of(c.quantization, layer);
        const bool post_ln =
            pattern_matches("blocks.*.attn.qkv", layer) || pattern_matches("blocks.*.mlp.fc", layer);
        EXPECT_EQ(f.first_use(operand_kind::w).format, "bf16");
        EXPECT_EQ(f.first_use(operand_kind::dy).format, "bf16");
        EXPECT_EQ(f.first_use(operand_kind::x).format, post_ln ? "e1m6" : "bf16");
    }
}

TEST(ConfigFiles, LoadConfigReadsAFileWithOverrides) {
    char dir_template[] = "/tmp/altgrad_config_test_XXXXXX";
    ASSERT_NE(mkdtemp(dir_template), nullptr);
    const fs::path dir(dir_template);
    const fs::path file = dir / "tiny.toml";
    std::ofstream(file) << "[training]\nmax_steps = 20\nwarmup_steps = 2\n";
    const run_config c = load_config(file, {"training.max_steps=30"});
    EXPECT_EQ(c.name, "tiny");
    EXPECT_EQ(c.training.max_steps, 30);
    // The resolved config written to a run folder repeats the run by itself.
    const fs::path resolved = dir / "config.toml";
    std::ofstream(resolved) << to_toml(c);
    const run_config again = load_config(resolved);
    EXPECT_TRUE(again == c);
    EXPECT_EQ(again.name, "tiny");
    std::ofstream(file) << "[training]\nmax_steps = 20\nwarmup_steps = 2\nmax_setps = 1\n";
    try {
        load_config(file);
        ADD_FAILURE() << "no error";
    } catch (const host::error& e) {
        EXPECT_EQ(std::string(e.what()).rfind(file.string() + ": key 'training.max_setps': unknown key", 0),
                  0u)
            << e.what();
    }
    fs::remove_all(dir);
}

// ---- Block scaling: granularity, role tables, rules, format parameters ---------

TEST(ConfigBlockScaling, DefaultsArePerTensor) {
    const run_config c = parse_config("", kFile);
    const operand_spec b = recipe_of(c.quantization, "lm_head").first_use(operand_kind::w);
    EXPECT_EQ(b.granularity, granularity_kind::tensor);
    EXPECT_EQ(b.block_size, 32);
    EXPECT_EQ(b.scale_format, "pow2");
    EXPECT_EQ(b.scale_rule, scale_rule_kind::mx_floor);
}

TEST(ConfigBlockScaling, RuleOverRoleTableOverSection) {
    const run_config c = parse_config(
        "[quantization]\ngranularity = \"block\"\nblock_size = 16\nscale_format = \"ue8m0\"\n"
        "[quantization.gradient]\ngranularity = \"tensor\"\n"
        "[quantization.weight]\nscale_rule = \"round_up\"\nblock_size = 64\n"
        "[[quantization.rules]]\npattern = \"lm_head\"\ngranularity = \"row\"\nscale_format = \"fp32\"\n",
        kFile);
    const quantization_config& q = c.quantization;
    const operand_spec w = recipe_of(q, "blocks.0.mlp.fc").first_use(operand_kind::w);
    EXPECT_EQ(w.granularity, granularity_kind::block);
    EXPECT_EQ(w.block_size, 64);
    EXPECT_EQ(w.scale_format, "ue8m0");
    EXPECT_EQ(w.scale_rule, scale_rule_kind::round_up);
    const operand_spec a = recipe_of(q, "blocks.0.mlp.fc").first_use(operand_kind::x);
    EXPECT_EQ(a.granularity, granularity_kind::block);
    EXPECT_EQ(a.block_size, 16);
    EXPECT_EQ(a.scale_rule, scale_rule_kind::mx_floor);
    EXPECT_EQ(recipe_of(q, "blocks.0.mlp.fc").first_use(operand_kind::dy).granularity,
              granularity_kind::tensor);
    // The rule: every role of lm_head, over the role tables.
    for (const operand_kind o : {operand_kind::w, operand_kind::x, operand_kind::dy}) {
        const operand_spec h = recipe_of(q, "lm_head").first_use(o);
        EXPECT_EQ(h.granularity, granularity_kind::row) << role_of(o);
        EXPECT_EQ(h.scale_format, "fp32") << role_of(o);
    }
    EXPECT_EQ(recipe_of(q, "lm_head").first_use(operand_kind::w).block_size,
              64);  // the rule leaves it to the role table
    // A rule that sets only scaling is a rule, and its layers keep the section's formats.
    EXPECT_EQ(recipe_of(q, "lm_head").first_use(operand_kind::w).format, "e5m2");
}

TEST(ConfigBlockScaling, SetReachesRoleTablesAndParams) {
    const run_config c =
        parse_config("[quantization]\nweight_format = \"exmy_param\"\n", kFile,
                     {"quantization.gradient.granularity=block", "quantization.gradient.block_size=128",
                      "quantization.params.exmy_param.mantissa_bits=2"});
    EXPECT_EQ(recipe_of(c.quantization, "lm_head").first_use(operand_kind::dy).granularity,
              granularity_kind::block);
    EXPECT_EQ(recipe_of(c.quantization, "lm_head").first_use(operand_kind::dy).block_size, 128);
    EXPECT_EQ(recipe_of(c.quantization, "lm_head").first_use(operand_kind::w).granularity,
              granularity_kind::tensor);
    EXPECT_EQ(c.quantization.params.at("exmy_param").at("mantissa_bits"), integer("2"));
}

TEST(ConfigBlockScaling, EverythingRoundTripsThroughToToml) {
    const run_config c = parse_config(
        "[quantization]\nweight_format = \"exmy_param\"\ngranularity = \"block\"\nscale_format = \"e4m3\"\n"
        "scale_rule = \"two_level\"\nblock_size = 16\n"
        "[quantization.activation]\ngranularity = \"row\"\n"
        "[quantization.params.exmy_param]\nexponent_bits = 3\nspecials = \"finite\"\n"
        "[[quantization.rules]]\npattern = \"blocks.*\"\nblock_size = 8\nscale_rule = \"round_up\"\n",
        kFile);
    const run_config back = parse_config(to_toml(c), kFile);
    EXPECT_EQ(back, c) << to_toml(c);
    EXPECT_EQ(back.quantization.params.at("exmy_param").at("specials"), string("finite"));
    EXPECT_EQ(*back.quantization.rules.at(0).scaling.block_size, 8);
    EXPECT_EQ(*back.quantization.activation_scaling.granularity, granularity_kind::row);
    // Not equal once anything differs.
    run_config other = c;
    other.quantization.gradient_scaling.block_size = 4;
    EXPECT_NE(other, c);
}

// Every scale rule of the kernels' table (quant/vocabulary.hpp) is a config value, read and written.
TEST(ConfigBlockScaling, EveryScaleRuleOfTheTableIsAValue) {
    for (const host::quant::scale_rule_info& rule : host::quant::scale_rules()) {
        const run_config c = parse_config(
            std::string("[quantization]\ngranularity = \"block\"\nscale_rule = \"") + rule.name + "\"\n",
            kFile);
        EXPECT_EQ(recipe_of(c.quantization, "lm_head").first_use(operand_kind::w).scale_rule, rule.rule);
        EXPECT_TRUE(parse_config(to_toml(c), kFile) == c) << rule.name;
    }
}

TEST(ConfigBlockScaling, Errors) {
    expect_error(error_of("[quantization]\ngranularity = \"blocks\"\n"), "quantization.granularity",
                 "expected one of tensor, row, block");
    expect_error(error_of("[quantization]\nblock_size = 0\n"), "quantization.block_size",
                 "expected an integer 1..1048576");
    expect_error(error_of("[quantization]\nscale_rule = \"floor\"\n"), "quantization.scale_rule",
                 "expected one of mx_floor, round_up, two_level, nearest");
    expect_error(error_of("[quantization]\nscale_format = \"E8M0\"\n"), "quantization.scale_format",
                 "expected a format plugin name");
    expect_error(error_of("[quantization.weight]\nblok_size = 4\n"), "quantization.weight.blok_size",
                 "did you mean 'quantization.weight.block_size'?");
    expect_error(error_of("[quantization]\nweight = 3\n"), "quantization.weight", "expected a table");
    expect_error(error_of("[quantization.gradient]\nblock_size = -1\n"), "quantization.gradient.block_size",
                 "expected an integer 1..1048576");
    expect_error(error_of("[[quantization.rules]]\npattern = \"lm_head\"\ngranularity = 3\n"),
                 "quantization.rules[0].granularity", "expected one of tensor, row, block");
    expect_error(error_of("", {"quantization.activation.scale_rule=up"}),
                 "quantization.activation.scale_rule", "--set quantization.activation.scale_rule=up");
    // Parameters for a format no key names (the list says which it names).
    expect_error(error_of("[quantization.params.e4m3]\nx = 1\n"), "quantization.params.e4m3",
                 "which no format or scale_format key of this config names (it names e5m2)");
    expect_error(error_of("", {"quantization.params.ue8m0.x=1"}), "quantization.params.ue8m0",
                 "no format or scale_format");
    expect_error(error_of("[quantization]\nscale_format = \"ue8m0\"\n[quantization.params.ue8m0]\nx = [1]\n"),
                 "quantization.params.ue8m0.x", "expected a string, number or boolean");
    // A scale_format names a plugin whose parameters may then be given.
    EXPECT_EQ(error_of("[quantization]\nscale_format = \"ue8m0\"\n[quantization.params.ue8m0]\nx = 1\n"), "");
}

}  // namespace
}  // namespace altgrad::test
