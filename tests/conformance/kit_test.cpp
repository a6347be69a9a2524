// The conformance kit catches bugs: each tests/plugins/broken_* plugin is a
// correct E4M3 with one planted bug, and the kit must report it with the
// right check and status, with a reason and (for a finding) the input that
// shows it. Crashes and hangs must stay inside their check's child process.
// Every bundled plugin must pass. The kit is called in-process, as the CLI
// calls it.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <ostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include "conformance/format_reference.hpp"
#include "conformance/kit.hpp"

// gtest prints outcomes by name.
namespace altgrad::host::conformance {
inline void PrintTo(outcome o, std::ostream* os) { *os << outcome_name(o); }
}  // namespace altgrad::host::conformance

namespace {

namespace fs = std::filesystem;
namespace kit = altgrad::host::conformance;
using kit::outcome;

const fs::path kBundled = ALTGRAD_BUNDLED_PLUGIN_DIR;
const fs::path kTestPlugins = ALTGRAD_TEST_PLUGIN_DIR;
constexpr uint64_t kSeed = 20261121;

kit::options opts(const std::string& only, double timeout_seconds = 30) {
    kit::options o;
    o.only = only;
    o.seed = kSeed;
    o.timeout_seconds = timeout_seconds;
    return o;
}

// Run the kit on test plugin `name` (by its manifest's path).
kit::plugin_report check(const std::string& name, const std::string& only = "", double timeout_seconds = 30) {
    return kit::check_plugin(kit::target_by_path(kTestPlugins / name / "manifest.toml"),
                             opts(only, timeout_seconds));
}

// Every result, one a line, for failure messages.
std::string dump(const kit::plugin_report& r) {
    std::ostringstream out;
    out << r.target.label << ":\n";
    for (const kit::result& x : r.results)
        out << "  " << x.check << ": " << kit::outcome_name(x.status) << " -- " << x.reason
            << (x.input.empty() ? "" : " [" + x.input + "]") << "\n";
    return out.str();
}

const kit::result* find(const kit::plugin_report& r, const std::string& check) {
    for (const kit::result& x : r.results)
        if (x.check == check) return &x;
    return nullptr;
}

// `check` ran and ended `want`, with a reason; a finding (failed, warning)
// also names the input that shows it.
void expect_outcome(const kit::plugin_report& r, const std::string& check, outcome want) {
    const kit::result* x = find(r, check);
    ASSERT_NE(x, nullptr) << check << " did not run\n" << dump(r);
    EXPECT_EQ(x->status, want) << check << ": want " << kit::outcome_name(want) << ", got "
                               << kit::outcome_name(x->status) << "\n"
                               << dump(r);
    EXPECT_FALSE(x->reason.empty()) << check << ": no reason\n" << dump(r);
    if (want == outcome::failed || want == outcome::warning)
        EXPECT_FALSE(x->input.empty()) << check << ": no input\n" << dump(r);
}

// Every check but `planted` (the one the planted bug must fail) ends without
// a failure.
void expect_no_other_failure(const kit::plugin_report& r, const std::string& planted) {
    for (const kit::result& x : r.results)
        if (x.check != planted) EXPECT_FALSE(kit::is_failure(x.status)) << x.check << "\n" << dump(r);
}

std::vector<std::string> check_names(altgrad_plugin_kind kind = ALTGRAD_KIND_FORMAT) {
    std::vector<std::string> names;
    for (const kit::check_info& c : kit::check_list(kind)) names.push_back(c.name);
    return names;
}

// ---------------------------------------------------------------- planted bugs

TEST(KitPlanted, WrongDeclaredMaxFailsDeclaredRange) {
    const kit::plugin_report r = check("broken_max", "codes.*");
    expect_outcome(r, "codes.declared_range", outcome::failed);
    expect_outcome(r, "codes.roundtrip", outcome::passed);  // the codes themselves are right
    const kit::result* x = find(r, "codes.declared_range");
    ASSERT_NE(x, nullptr);
    EXPECT_NE(x->reason.find(kit::hex_float(480.0)), std::string::npos) << x->reason;
    EXPECT_NE(x->reason.find(kit::hex_float(448.0)), std::string::npos) << x->reason;
}

TEST(KitPlanted, TiesAwayFromZeroFailTiesToEven) {
    expect_outcome(check("broken_ties", "quantize.ties_to_even"), "quantize.ties_to_even", outcome::failed);
}

TEST(KitPlanted, NotIdempotentFailsIdempotent) {
    expect_outcome(check("broken_idempotent", "quantize.idempotent"), "quantize.idempotent", outcome::failed);
}

TEST(KitPlanted, NotMonotoneFailsMonotone) {
    expect_outcome(check("broken_monotone", "quantize.monotone"), "quantize.monotone", outcome::failed);
}

// A shared scratch buffer is invisible to one thread: only the threads check
// may fail.
TEST(KitPlanted, RacyGlobalBufferFailsThreadsOnly) {
    const kit::plugin_report r = check("broken_race");
    expect_outcome(r, "concurrency.threads", outcome::failed);
    for (const char* single : {"quantize.nearest", "quantize.ties_to_even", "quantize.idempotent",
                               "quantize.monotone", "quantize.scaling", "stochastic.chunking"})
        expect_outcome(r, single, outcome::passed);
    expect_no_other_failure(r, "concurrency.threads");  // single-threaded, the buffer is fine
}

// A segfault kills one check's child process, not the kit: the load checks
// pass, quantize.nearest reports the crash, and every later check still
// reports a verdict of its own.
TEST(KitPlanted, CrashIsReportedAndTheKitGoesOn) {
    const kit::plugin_report r = check("broken_crash");
    for (const char* load : {"load.manifest", "load.library", "load.exports", "load.abi_version",
                             "load.descriptor", "load.repeat"})
        expect_outcome(r, load, outcome::passed);
    expect_outcome(r, "quantize.nearest", outcome::crashed);
    const kit::result* x = find(r, "quantize.nearest");
    ASSERT_NE(x, nullptr);
    EXPECT_NE(x->reason.find("signal"), std::string::npos) << x->reason;
    // Every check ran, in order, and those that never see 3.0 still pass.
    std::vector<std::string> ran;
    for (const kit::result& y : r.results) ran.push_back(y.check);
    EXPECT_EQ(ran, check_names()) << dump(r);
    expect_outcome(r, "codes.roundtrip", outcome::passed);      // encode is not broken
    expect_outcome(r, "concurrency.threads", outcome::passed);  // random inputs only
}

TEST(KitPlanted, EndlessLoopTimesOut) {
    const kit::plugin_report r = check("broken_hang", "quantize.nearest", 2);
    expect_outcome(r, "quantize.nearest", outcome::timed_out);
    const kit::result* x = find(r, "quantize.nearest");
    ASSERT_NE(x, nullptr);
    EXPECT_GE(x->seconds, 1.9);
    EXPECT_LT(x->seconds, 10) << "the child should be killed at the 2 s limit";
}

TEST(KitPlanted, AbiFromTheFutureFailsAbiVersionAndSkipsTheRest) {
    const kit::plugin_report r = check("abi_future");
    expect_outcome(r, "load.abi_version", outcome::failed);
    size_t quantize_checks = 0;
    for (const kit::result& x : r.results)
        if (altgrad::host::glob_match("quantize.*", x.check)) {
            ++quantize_checks;
            expect_outcome(r, x.check, outcome::skipped);
        }
    EXPECT_GT(quantize_checks, 0u);
}

TEST(KitPlanted, DescriptorMismatchFailsDescriptor) {
    const kit::plugin_report r = check("descriptor_mismatch", "load.*");
    expect_outcome(r, "load.descriptor", outcome::failed);
    expect_outcome(r, "load.abi_version", outcome::passed);
}

// A plugin the host refuses (ABI or descriptor) is load.abi_version's or
// load.descriptor's finding. load.repeat cannot do its job on it and must
// skip, as load.descriptor skips after an ABI refusal and every format check
// skips, rather than fail a second time with the loader's exception and no
// input or hint.
TEST(KitPlanted, RefusedPluginSkipsLoadRepeat) {
    for (const char* name : {"abi_future", "descriptor_mismatch"}) {
        SCOPED_TRACE(name);
        expect_outcome(check(name, "load.*"), "load.repeat", outcome::skipped);
    }
}

// Without the version script a second function is exported: a warning (not a
// failure) naming it. Everything else about the plugin is a correct E4M3, so
// the base the other broken_* plugins share passes every other check.
TEST(KitPlanted, ExtraExportWarnsAndNamesIt) {
    const kit::plugin_report r = check("broken_exports");
    expect_outcome(r, "load.exports", outcome::warning);
    const kit::result* x = find(r, "load.exports");
    ASSERT_NE(x, nullptr);
    EXPECT_NE(x->reason.find("altgrad_broken_exports_extra"), std::string::npos) << x->reason;
    for (const kit::result& y : r.results)
        if (y.check != "load.exports") EXPECT_EQ(y.status, outcome::passed) << y.check << "\n" << dump(r);
}

// A static global shared by instances: one instance at a time behaves (and
// create resets it), two live instances disturb each other.
TEST(KitPlanted, SharedStaticStateFailsInstancesSeparate) {
    const kit::plugin_report r = check("broken_shared_state");
    expect_outcome(r, "instances.separate", outcome::failed);
    const kit::result* x = find(r, "instances.separate");
    ASSERT_NE(x, nullptr);
    EXPECT_FALSE(x->hint.empty());
    EXPECT_NE(x->reason.find("(seed " + std::to_string(kSeed) + ")"), std::string::npos) << x->reason;
    for (const char* other :
         {"params.defaults", "answers.deterministic", "observe.nonfinite", "observe.empty"})
        expect_outcome(r, other, outcome::passed);
    std::vector<std::string> ran;
    for (const kit::result& y : r.results) ran.push_back(y.check);
    EXPECT_EQ(ran, check_names(ALTGRAD_KIND_INTERVENTION)) << dump(r);
}

// save_state leaves out that clipping is on: a restored instance answers
// differently from the original, which state.resume names. A plugin that
// saves no state skips it.
TEST(KitPlanted, ForgetfulSavedStateFailsStateResume) {
    const kit::plugin_report r = check("broken_forgetful_state");
    expect_outcome(r, "state.resume", outcome::failed);
    const kit::result* x = find(r, "state.resume");
    ASSERT_NE(x, nullptr);
    EXPECT_NE(x->reason.find("the restored instance answered (no actions) where the original answered "
                             "[clip_grad_norm"),
              std::string::npos)
        << x->reason;
    EXPECT_FALSE(x->hint.empty());
    for (const char* other : {"params.defaults", "instances.separate", "answers.deterministic",
                              "observe.nonfinite", "observe.empty"})
        expect_outcome(r, other, outcome::passed);
    expect_outcome(check("broken_shared_state", "state.*"), "state.resume", outcome::skipped);
}

// A plugin whose entry function returns NULL describes nothing and cannot be
// loaded: load.abi_version fails it (it used to skip, and with every later
// check skipping too the kit passed the plugin). One whose entry has no
// descriptor fails load.descriptor. Either way the report has a failure.
TEST(KitPlanted, NullOrMalformedEntryFails) {
    const kit::plugin_report null_entry = check("null_entry");
    expect_outcome(null_entry, "load.abi_version", outcome::failed);
    const kit::result* x = find(null_entry, "load.abi_version");
    ASSERT_NE(x, nullptr);
    EXPECT_NE(x->reason.find("returned NULL"), std::string::npos) << x->reason;
    const kit::plugin_report malformed = check("malformed_entry");
    expect_outcome(malformed, "load.abi_version", outcome::passed);
    expect_outcome(malformed, "load.descriptor", outcome::failed);
    for (const kit::plugin_report* r : {&null_entry, &malformed})
        EXPECT_TRUE(std::any_of(r->results.begin(), r->results.end(), [](const kit::result& y) {
            return kit::is_failure(y.status);
        })) << dump(*r);
}

// Writing one element past count hits the guard page after the output
// buffer: the check crashes, and the report names the call, the buffer and
// the element (count, the first one past the end).
TEST(KitPlanted, WritePastCountCrashesNamingTheCall) {
    const kit::plugin_report r = check("broken_overrun", "quantize.*");
    expect_outcome(r, "quantize.nearest", outcome::crashed);
    const kit::result* x = find(r, "quantize.nearest");
    ASSERT_NE(x, nullptr);
    // The call's element count is in the call's description; the faulting
    // element is that same number.
    const std::string& why = x->reason;
    EXPECT_EQ(why.rfind("quantize of ", 0), 0u) << why;
    const std::string n = why.substr(12, why.find(' ', 12) - 12);
    EXPECT_NE(why.find("touched element " + n + " of its output buffer of " + n + " elements, past the end"),
              std::string::npos)
        << why;
    EXPECT_NE(why.find("signal"), std::string::npos) << why;
    EXPECT_FALSE(x->hint.empty());
    // Encode is not broken.
    expect_outcome(check("broken_overrun", "codes.roundtrip"), "codes.roundtrip", outcome::passed);
}

// An intervention and a diagnostic writing one element past their output
// buffer hit the guard page after it, as a format does: the check crashes,
// and the report names the call, the buffer and the element. observe.empty's
// first call has no tensors, so its action buffer holds the minimum, 64; the
// diagnostic wants weights only and 1 value per tensor, so measure.empty's
// first call (one tensor) has room for 1 x (1 + 1) = 2 values.
TEST(KitPlanted, InterventionAndDiagnosticWritesPastTheBufferCrashNamingTheCall) {
    struct planted {
        const char* plugin;
        const char* check;
        std::string reason;
    };
    // A diagnostic's tensors name a format (format_ref): the kit takes one
    // from the plugin's own folder, so the diagnostic sits beside e5m2.
    const fs::path folder = fs::temp_directory_path() / ("altgrad-kit-overrun-" + std::to_string(::getpid()));
    fs::remove_all(folder);
    fs::create_directories(folder);
    fs::copy(kTestPlugins / "broken_value_overrun", folder / "broken_value_overrun");
    fs::copy(kBundled / "e5m2", folder / "e5m2");
    for (const planted& p : {planted{"broken_action_overrun", "observe.empty",
                                     "observe of step 0 (tensor count 0) touched element 64 of its actions "
                                     "buffer of 64 elements, past "
                                     "the end (a guard page)"},
                             planted{"broken_value_overrun", "measure.empty",
                                     "measure of step 0 (tensor count 1) touched element 2 of its values "
                                     "buffer of 2 elements, past the "
                                     "end (a guard page)"}}) {
        SCOPED_TRACE(p.plugin);
        const fs::path home = fs::exists(folder / p.plugin) ? folder : kTestPlugins;
        const kit::plugin_report r =
            kit::check_plugin(kit::target_by_path(home / p.plugin / "manifest.toml"), opts(p.check));
        expect_outcome(r, p.check, outcome::crashed);
        const kit::result* x = find(r, p.check);
        ASSERT_NE(x, nullptr);
        EXPECT_EQ(x->reason.rfind(p.reason, 0), 0u) << x->reason;
        EXPECT_NE(x->reason.find("signal"), std::string::npos) << x->reason;
        EXPECT_FALSE(x->hint.empty());
    }
    fs::remove_all(folder);
}

// A load_state that reads one byte past its state: the kit hands it a
// guarded buffer, so state.resume crashes, naming the call and the buffer.
TEST(KitPlanted, LoadStateReadingPastItsStateCrashesNamingTheCall) {
    const kit::plugin_report r = check("broken_state_overread", "state.resume");
    expect_outcome(r, "state.resume", outcome::crashed);
    const kit::result* x = find(r, "state.resume");
    ASSERT_NE(x, nullptr);
    EXPECT_EQ(x->reason.rfind("load_state of ", 0), 0u) << x->reason;
    EXPECT_NE(x->reason.find("of its state buffer of"), std::string::npos) << x->reason;
    EXPECT_NE(x->reason.find("past the end"), std::string::npos) << x->reason;
}

// Decode that ignores the scale: only the check that decodes with scales
// other than 1 sees it, and its input names the scale.
TEST(KitPlanted, DecodeIgnoringTheScaleFailsEncodeDecode) {
    const kit::plugin_report r = check("broken_decode_scale");
    expect_outcome(r, "quantize.encode_decode", outcome::failed);
    const kit::result* x = find(r, "quantize.encode_decode");
    ASSERT_NE(x, nullptr);
    EXPECT_EQ(x->input.find("scale 0x1p+0"), std::string::npos) << x->input;
    EXPECT_NE(x->input.find("scale "), std::string::npos) << x->input;
    expect_no_other_failure(r, "quantize.encode_decode");
}

// Quantize that ignores the ABI 1.2 block scales: quantize.block_scales
// fails, naming an element, its block and the block's scale; encode and
// decode take the scales, so nothing else fails.
TEST(KitPlanted, QuantizeIgnoringBlockScalesFailsBlockScales) {
    const kit::plugin_report r = check("broken_block_scales");
    expect_outcome(r, "quantize.block_scales", outcome::failed);
    const kit::result* x = find(r, "quantize.block_scales");
    ASSERT_NE(x, nullptr);
    EXPECT_NE(x->reason.find("(block "), std::string::npos) << x->reason;
    EXPECT_NE(x->input.find("block scales, blocks of 32"), std::string::npos) << x->input;
    expect_no_other_failure(r, "quantize.block_scales");
}

// A format built for ABI 1.1 never sees block scales (the host splits its
// calls), so the check is skipped, saying why; everything else passes.
TEST(KitPlanted, AnAbi11FormatSkipsTheBlockScaleCheck) {
    const kit::plugin_report r = check("abi11_format");
    expect_outcome(r, "quantize.block_scales", outcome::skipped);
    const kit::result* x = find(r, "quantize.block_scales");
    ASSERT_NE(x, nullptr);
    EXPECT_NE(x->reason.find("ABI 1.1"), std::string::npos) << x->reason;
    for (const kit::result& y : r.results)
        EXPECT_FALSE(kit::is_failure(y.status)) << y.check << "\n" << dump(r);
}

// The ABI 1.1 format's source rebuilt against today's headers reports the
// current ABI but declares no capabilities: the host still splits its
// block-scaled calls and refuses few random bits, so both checks are
// skipped, naming the missing capability, and nothing fails.
TEST(KitPlanted, ARebuiltAbi11FormatDeclaresNothingAndPasses) {
    const kit::plugin_report r = check("rebuilt_abi11_format");
    for (const char* name : {"quantize.block_scales", "stochastic.random_bits"}) {
        expect_outcome(r, name, outcome::skipped);
        const kit::result* x = find(r, name);
        ASSERT_NE(x, nullptr);
        EXPECT_NE(x->reason.find("ALTGRAD_FORMAT_CAPABILITY_"), std::string::npos) << x->reason;
    }
    for (const kit::result& y : r.results)
        EXPECT_FALSE(kit::is_failure(y.status)) << y.check << "\n" << dump(r);
}

// Quantize that declares random bits but rounds with all 32: only
// stochastic.random_bits fails, naming the number of bits.
TEST(KitPlanted, QuantizeIgnoringRandomBitsFailsRandomBits) {
    const kit::plugin_report r = check("broken_random_bits");
    expect_outcome(r, "stochastic.random_bits", outcome::failed);
    const kit::result* x = find(r, "stochastic.random_bits");
    ASSERT_NE(x, nullptr);
    EXPECT_NE(x->input.find("random_bits "), std::string::npos) << x->input;
    expect_no_other_failure(r, "stochastic.random_bits");
}

// A 1.2 diagnostic that reads the view's `scale` (1 with block scales) where
// each element's block scale is meant: measure.block_scales fails, showing
// both answers (max |x*3| against max |x|); nothing else does. A diagnostic
// built for ABI 1.1 cannot see block scales: the check is skipped for it.
TEST(KitPlanted, ADiagnosticReadingOnlyScaleFailsTheBlockViewCheck) {
    // Each beside e5m2, the format its tensors name (see above).
    const fs::path folder =
        fs::temp_directory_path() / ("altgrad-kit-block-view-" + std::to_string(::getpid()));
    fs::remove_all(folder);
    fs::create_directories(folder);
    fs::copy(kTestPlugins / "broken_block_view", folder / "broken_block_view");
    fs::copy(kTestPlugins / "abi11_diagnostic", folder / "abi11_diagnostic");
    fs::copy(kBundled / "e5m2", folder / "e5m2");
    const kit::plugin_report r =
        kit::check_plugin(kit::target_by_path(folder / "broken_block_view" / "manifest.toml"), opts(""));
    expect_outcome(r, "measure.block_scales", outcome::failed);
    const kit::result* x = find(r, "measure.block_scales");
    ASSERT_NE(x, nullptr);
    EXPECT_NE(x->reason.find("the block-scaled view answered"), std::string::npos) << x->reason;
    expect_no_other_failure(r, "measure.block_scales");
    const kit::plugin_report old =
        kit::check_plugin(kit::target_by_path(folder / "abi11_diagnostic" / "manifest.toml"), opts(""));
    expect_outcome(old, "measure.block_scales", outcome::skipped);
    const kit::result* y = find(old, "measure.block_scales");
    ASSERT_NE(y, nullptr);
    EXPECT_NE(y->reason.find("ABI 1.1"), std::string::npos) << y->reason;
    for (const kit::result& z : old.results)
        EXPECT_FALSE(kit::is_failure(z.status)) << z.check << "\n" << dump(old);
    fs::remove_all(folder);
}

// A folder holding the given test plugins beside e5m2 (the format a
// diagnostic's tensors name), removed at destruction.
struct beside_e5m2 {
    fs::path folder;
    explicit beside_e5m2(const std::vector<std::string>& plugins) {
        folder = fs::temp_directory_path() / ("altgrad-kit-headlines-" + std::to_string(::getpid()));
        fs::remove_all(folder);
        fs::create_directories(folder);
        for (const std::string& p : plugins) fs::copy(kTestPlugins / p, folder / p);
        fs::copy(kBundled / "e5m2", folder / "e5m2");
    }
    ~beside_e5m2() { fs::remove_all(folder); }
    kit::plugin_report check(const std::string& name) const {
        return kit::check_plugin(kit::target_by_path(folder / name / "manifest.toml"), opts(""));
    }
};

// ABI 1.3 headlines. A well-formed declaration that names a value measure
// never writes: the host loads it, and only measure.headlines fails, naming
// the headline, the value and what was written.
TEST(KitPlanted, AHeadlineNamingAValueNeverWrittenFailsHeadlines) {
    const beside_e5m2 dir({"broken_headline_value"});
    const kit::plugin_report r = dir.check("broken_headline_value");
    expect_outcome(r, "measure.headlines", outcome::failed);
    const kit::result* x = find(r, "measure.headlines");
    ASSERT_NE(x, nullptr);
    EXPECT_EQ(x->reason.rfind("headline 1 (series 'broken_headline_value.never_written') names value "
                              "'never_written', which measure never wrote (it wrote: written)",
                              0),
              0u)
        << x->reason;
    EXPECT_NE(x->reason.find("(seed "), std::string::npos) << x->reason;
    EXPECT_NE(x->input.find("random tensors of 64 elements (weight"), std::string::npos) << x->input;
    EXPECT_FALSE(x->hint.empty());
    expect_no_other_failure(r, "measure.headlines");
}

// A malformed declaration: the host refuses to load the plugin
// (load.descriptor fails with the loader's message), measure.headlines names
// the rule, and every check that needs the plugin loaded is skipped.
TEST(KitPlanted, AMalformedHeadlineFailsHeadlinesAndTheLoad) {
    const beside_e5m2 dir({"broken_headlines"});
    for (const auto& [rule, want] : std::vector<std::pair<std::string, std::string>>{
             {"", "headline 0: series 'Stiffness Mean' is not [a-z0-9_.]+"},  // unset: the default rule
             {"duplicate", "headline 1: series 'broken_headlines.ok' is headline 0's too"},
             {"flags", "headline 0 (series 'broken_headlines.ok'): flags 6 hold bits other than"}}) {
        SCOPED_TRACE(rule);
        if (rule.empty()) ::unsetenv("ALTGRAD_TEST_BROKEN_HEADLINE");
        else ::setenv("ALTGRAD_TEST_BROKEN_HEADLINE", rule.c_str(), 1);
        const kit::plugin_report r = dir.check("broken_headlines");
        expect_outcome(r, "measure.headlines", outcome::failed);
        expect_outcome(r, "load.descriptor", outcome::failed);
        const std::string& reason = find(r, "measure.headlines")->reason;
        EXPECT_EQ(reason.rfind("plugin 'broken_headlines': " + want, 0), 0u) << dump(r);
        EXPECT_NE(find(r, "load.descriptor")->reason.find("headlines: " + want), std::string::npos)
            << dump(r);
        for (const kit::result& x : r.results)
            if (x.check != "measure.headlines" && x.check != "load.descriptor")
                EXPECT_FALSE(kit::is_failure(x.status)) << x.check << "\n" << dump(r);
    }
    ::unsetenv("ALTGRAD_TEST_BROKEN_HEADLINE");
}

// A diagnostic built for ABI 1.1 declares no headlines: skipped, saying so.
TEST(KitPlanted, AnAbi11DiagnosticSkipsTheHeadlineCheck) {
    const beside_e5m2 dir({"abi11_diagnostic"});
    const kit::plugin_report r = dir.check("abi11_diagnostic");
    expect_outcome(r, "measure.headlines", outcome::skipped);
    EXPECT_NE(find(r, "measure.headlines")->reason.find("built for ABI 1.1"), std::string::npos) << dump(r);
}

// 4 KiB a call never freed: memory.leak fails, naming the growth; the answers
// are right, so nothing else does.
TEST(KitPlanted, LeakPerCallFailsMemoryLeak) {
    const kit::plugin_report r = check("broken_leak");
    expect_outcome(r, "memory.leak", outcome::failed);
    const kit::result* x = find(r, "memory.leak");
    ASSERT_NE(x, nullptr);
    EXPECT_NE(x->reason.find("grew by"), std::string::npos) << x->reason;
    expect_no_other_failure(r, "memory.leak");
}

// No check of the report failed (a skip is no failure).
void expect_nothing_fails(const kit::plugin_report& r) {
    for (const kit::result& x : r.results)
        EXPECT_FALSE(kit::is_failure(x.status)) << x.check << "\n" << dump(r);
}

// A Hadamard transform (ABI 1.4) with one planted bug at a time: the check
// named fails, with its input; the bugs that keep T orthogonal and row-local
// fail nothing else. Unset, the plugin passes every transform check.
TEST(KitPlanted, TransformBugsFailTheirCheck) {
    const std::vector<std::pair<std::string, std::string>> bugs = {{"unnormalised", "transform.products"},
                                                                   {"row_index", "transform.chunking"},
                                                                   {"hidden_seed", "transform.reproducible"},
                                                                   {"in_place", "transform.buffers"},
                                                                   {"lenient", "transform.bad_arguments"}};
    for (const auto& [bug, planted] : bugs) {
        SCOPED_TRACE(bug);
        ::setenv("ALTGRAD_TEST_BROKEN_TRANSFORM", bug.c_str(), 1);
        const kit::plugin_report r = check("broken_transform", "transform.*");
        expect_outcome(r, planted, outcome::failed);
        if (bug == "unnormalised") expect_outcome(r, "transform.inverse", outcome::failed);
        if (bug == "row_index") expect_outcome(r, "transform.products", outcome::failed);
        if (bug != "unnormalised" && bug != "row_index") expect_no_other_failure(r, planted);
    }
    ::unsetenv("ALTGRAD_TEST_BROKEN_TRANSFORM");
    expect_nothing_fails(check("broken_transform"));  // no parameters: params.refused skips
}

// Hopper's FP8 instruction (ABI 1.5) with one planted bug at a time: the
// check named fails, with its input. Unset, the plugin passes every check.
TEST(KitPlanted, AccumulatorBugsFailTheirCheck) {
    const std::vector<std::pair<std::string, std::string>> bugs = {
        {"exact_sum", "accumulator.truncation"},
        {"more_bits", "accumulator.truncation"},
        {"signed_zero", "accumulator.specials"},
        {"nan_payload", "accumulator.specials"},
        {"row_position", "accumulator.deterministic"},
        {"in_place", "accumulator.buffers"},
        {"deep", "accumulator.depth"},
        {"lenient", "accumulator.bad_arguments"}};
    for (const auto& [bug, planted] : bugs) {
        SCOPED_TRACE(bug);
        ::setenv("ALTGRAD_TEST_BROKEN_ACCUMULATOR", bug.c_str(), 1);
        const kit::plugin_report r = check("broken_accumulator", "accumulator.*");
        expect_outcome(r, planted, outcome::failed);
        // Wrong arithmetic shows against the model too.
        if (bug == "exact_sum" || bug == "more_bits")
            expect_outcome(r, "accumulator.definition", outcome::failed);
    }
    ::unsetenv("ALTGRAD_TEST_BROKEN_ACCUMULATOR");
    expect_nothing_fails(check("broken_accumulator"));  // no parameters: params.refused skips
}

// ---------------------------------------------------------------- bundled plugins

// The bundled accumulators run the accumulator checks and pass each, with
// their defaults and (where they have the variant) FP16 accumulators.
TEST(KitBundled, AccumulatorsPassTheirChecks) {
    const std::vector<std::string> want = {"load.manifest",
                                           "load.library",
                                           "load.exports",
                                           "load.abi_version",
                                           "load.descriptor",
                                           "load.repeat",
                                           "params.defaults",
                                           "params.refused",
                                           "accumulator.exact",
                                           "accumulator.definition",
                                           "accumulator.truncation",
                                           "accumulator.output",
                                           "accumulator.specials",
                                           "accumulator.depth",
                                           "accumulator.deterministic",
                                           "accumulator.buffers",
                                           "accumulator.bad_arguments",
                                           "memory.leak"};
    EXPECT_EQ(check_names(ALTGRAD_KIND_ACCUMULATOR), want);
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"sm90_wgmma_fp8", "float32"},  {"sm90_wgmma_fp8", "float16"}, {"sm90_wgmma_fp16", "float32"},
        {"sm89_mma_fp8", "float32"},    {"sm80_mma_fp16", "float16"},  {"sm100_tcgen05_fp8", "float32"},
        {"sm100_tcgen05_mxf8f6f4", ""}, {"sm100_tcgen05_mxf4nvf4", ""}};
    for (const auto& [name, accumulator] : cases) {
        SCOPED_TRACE(name + " " + accumulator);
        kit::options o = opts("");
        if (!accumulator.empty()) o.params = {{"accumulator", accumulator}};
        const kit::plugin_report r =
            kit::check_plugin(kit::target_by_path(kBundled / name / "manifest.toml"), o);
        std::vector<std::string> ran;
        for (const kit::result& x : r.results) ran.push_back(x.check);
        EXPECT_EQ(ran, want) << dump(r);
        for (const kit::result& x : r.results)  // the block-scaled ones have no parameter to refuse
            EXPECT_EQ(x.status,
                      x.check == "params.refused" && accumulator.empty() ? outcome::skipped : outcome::passed)
                << x.check << "\n"
                << dump(r);
    }
}

// The bundled transforms run the transform checks and pass each, with their
// defaults and at d = 128.
TEST(KitBundled, TransformsPassTheirChecks) {
    const std::vector<std::string> want = {"load.manifest",      "load.library",
                                           "load.exports",       "load.abi_version",
                                           "load.descriptor",    "load.repeat",
                                           "params.defaults",    "params.refused",
                                           "transform.products", "transform.inverse",
                                           "transform.chunking", "transform.reproducible",
                                           "transform.buffers",  "transform.bad_arguments",
                                           "memory.leak"};
    EXPECT_EQ(check_names(ALTGRAD_KIND_TRANSFORM), want);
    for (const char* name : {"hadamard", "random_hadamard"})
        for (const std::string& d : {"16", "128"}) {
            SCOPED_TRACE(std::string(name) + " d = " + d);
            kit::options o = opts("");
            o.params = {{"d", d}};
            const kit::plugin_report r =
                kit::check_plugin(kit::target_by_path(kBundled / name / "manifest.toml"), o);
            std::vector<std::string> ran;
            for (const kit::result& x : r.results) ran.push_back(x.check);
            EXPECT_EQ(ran, want) << dump(r);
            for (const kit::result& x : r.results)
                EXPECT_EQ(x.status, outcome::passed) << x.check << "\n" << dump(r);
        }
}

// The bundled interventions and diagnostics run their kind's checks (never
// "not written yet") and pass every one of them.
TEST(KitBundled, InterventionsAndDiagnosticsPassTheirChecks) {
    const std::vector<std::pair<std::string, altgrad_plugin_kind>> plugins = {
        {"partition_clip", ALTGRAD_KIND_INTERVENTION},
        {"mantissa_shift", ALTGRAD_KIND_INTERVENTION},
        {"range", ALTGRAD_KIND_DIAGNOSTIC},
        {"stiffness", ALTGRAD_KIND_DIAGNOSTIC},
        {"grid_alignment", ALTGRAD_KIND_DIAGNOSTIC}};
    for (const auto& [name, kind] : plugins) {
        SCOPED_TRACE(name);
        const kit::plugin_report r =
            kit::check_plugin(kit::target_by_path(kBundled / name / "manifest.toml"), opts(""));
        std::vector<std::string> ran;
        for (const kit::result& x : r.results) ran.push_back(x.check);
        EXPECT_EQ(ran, check_names(kind)) << dump(r);
        for (const char* c :
             {"params.defaults", "instances.separate", "answers.deterministic", "memory.leak"})
            expect_outcome(r, c, outcome::passed);
        if (kind == ALTGRAD_KIND_INTERVENTION) {
            expect_outcome(r, "observe.nonfinite", outcome::passed);
            expect_outcome(r, "observe.empty", outcome::passed);
            expect_outcome(r, "state.resume", outcome::passed);  // both save their state
        } else {
            expect_outcome(r, "measure.nonfinite", outcome::passed);
            expect_outcome(r, "measure.empty", outcome::passed);
            expect_outcome(r, "measure.names", outcome::passed);
            expect_outcome(r, "measure.block_scales", outcome::passed);
            expect_outcome(r, "measure.headlines", outcome::passed);
        }
        for (const kit::result& x : r.results) {
            EXPECT_FALSE(kit::is_failure(x.status)) << x.check << "\n" << dump(r);
            EXPECT_EQ(x.reason.find("not written yet"), std::string::npos) << x.check << "\n" << dump(r);
        }
    }
    // Those with declared ranges really test them.
    expect_outcome(kit::check_plugin(kit::target_by_path(kBundled / "partition_clip" / "manifest.toml"),
                                     opts("params.refused")),
                   "params.refused", outcome::passed);
}

// --list-checks shows every check once, format names unchanged and first.
TEST(KitSelection, CheckListCoversEveryKind) {
    std::vector<std::string> all;
    for (const kit::check_info& c : kit::all_checks()) all.push_back(c.name);
    const std::vector<std::string> format = check_names(ALTGRAD_KIND_FORMAT);
    ASSERT_GE(all.size(), format.size());
    EXPECT_TRUE(std::equal(format.begin(), format.end(), all.begin()));
    for (altgrad_plugin_kind kind : {ALTGRAD_KIND_INTERVENTION, ALTGRAD_KIND_DIAGNOSTIC,
                                     ALTGRAD_KIND_TRANSFORM, ALTGRAD_KIND_ACCUMULATOR})
        for (const std::string& n : check_names(kind))
            EXPECT_EQ(std::count(all.begin(), all.end(), n), 1) << n;
    for (const char* n : {"memory.leak",
                          "params.defaults",
                          "params.refused",
                          "instances.separate",
                          "answers.deterministic",
                          "observe.nonfinite",
                          "observe.empty",
                          "state.resume",
                          "measure.nonfinite",
                          "measure.empty",
                          "measure.names",
                          "measure.block_scales",
                          "measure.headlines",
                          "transform.products",
                          "transform.inverse",
                          "transform.chunking",
                          "transform.reproducible",
                          "transform.buffers",
                          "transform.bad_arguments",
                          "accumulator.exact",
                          "accumulator.definition",
                          "accumulator.truncation",
                          "accumulator.output",
                          "accumulator.specials",
                          "accumulator.depth",
                          "accumulator.deterministic",
                          "accumulator.buffers",
                          "accumulator.bad_arguments"})
        EXPECT_NE(std::find(all.begin(), all.end(), n), all.end()) << n;
}

TEST(KitBundled, EveryBundledPluginPasses) {
    const std::vector<kit::plugin_target> targets = kit::all_targets(kBundled);
    std::vector<std::string> names;
    for (const kit::plugin_target& t : targets) names.push_back(t.label);
    for (const char* want : {"e5m2", "e4m3", "e3m4", "e1m6", "e7m0", "e0m7", "bf16", "fp16", "fp32",
                             "fp4_e2m1", "fp6_e2m3", "fp6_e3m2", "ue8m0", "float", "int"})
        EXPECT_NE(std::find(names.begin(), names.end(), want), names.end())
            << want << " is not in " << kBundled;
    for (const kit::plugin_target& t : targets) {
        const kit::plugin_report r = kit::check_plugin(t, opts(""));
        ASSERT_TRUE(t.info.has_value()) << t.manifest_error;
        std::vector<std::string> ran;
        for (const kit::result& x : r.results) ran.push_back(x.check);
        EXPECT_EQ(ran, check_names(t.info->kind)) << dump(r);
        for (const kit::result& x : r.results)
            EXPECT_FALSE(kit::is_failure(x.status)) << t.label << " " << x.check << "\n" << dump(r);
    }
}

// ---------------------------------------------------------------- selection

TEST(KitSelection, GlobMatch) {
    EXPECT_TRUE(altgrad::host::glob_match("quantize.*", "quantize.nearest"));
    EXPECT_TRUE(altgrad::host::glob_match("quantize.*", "quantize."));
    EXPECT_FALSE(altgrad::host::glob_match("quantize.*", "load.exports"));
    EXPECT_FALSE(altgrad::host::glob_match("quantize.*", "xquantize.nearest"));
    EXPECT_TRUE(altgrad::host::glob_match("*", ""));
    EXPECT_TRUE(altgrad::host::glob_match("*.threads", "concurrency.threads"));
    EXPECT_TRUE(altgrad::host::glob_match("?", "a"));
    EXPECT_FALSE(altgrad::host::glob_match("?", ""));
    EXPECT_FALSE(altgrad::host::glob_match("?", "ab"));
    EXPECT_TRUE(altgrad::host::glob_match("load.?xports", "load.exports"));
    EXPECT_FALSE(altgrad::host::glob_match("load.?xports", "load.xports"));
    EXPECT_TRUE(altgrad::host::glob_match("q*.?onotone", "quantize.monotone"));
    EXPECT_FALSE(altgrad::host::glob_match("quantize.nearest", "quantize.nearest_even"));
}

// options::params (--param): every instance the checks create has them. The
// test plugin param_format is E4M3FN by default (max 448); with E5M2's
// parameters its declared and decoded max is 57344 (0x1.cp+15), and every
// check still passes.
TEST(KitParams, FormatInstancesAreCreatedWithTheParameters) {
    const kit::plugin_target t = kit::target_by_path(kTestPlugins / "param_format" / "manifest.toml");
    kit::options o = opts("");
    o.params = {{"exponent_bits", "5"}, {"mantissa_bits", "2"}, {"bias", "15"}, {"specials", "ieee"}};
    const kit::plugin_report r = kit::check_plugin(t, o);
    const kit::result* range = find(r, "codes.declared_range");
    ASSERT_NE(range, nullptr) << dump(r);
    EXPECT_EQ(range->status, outcome::passed) << dump(r);
    EXPECT_NE(range->reason.find("max 0x1.cp+15"), std::string::npos) << range->reason;
    for (const kit::result& x : r.results)
        EXPECT_FALSE(kit::is_failure(x.status)) << x.check << "\n" << dump(r);
    const kit::plugin_report defaults = kit::check_plugin(t, opts("codes.declared_range"));
    const kit::result* deflt = find(defaults, "codes.declared_range");
    ASSERT_NE(deflt, nullptr);
    EXPECT_NE(deflt->reason.find("max 0x1.cp+8"), std::string::npos) << deflt->reason;
}

TEST(KitSelection, OnlyRestrictsTheChecksRun) {
    const kit::plugin_target e4m3 = kit::target_by_path(kBundled / "e4m3" / "manifest.toml");
    std::vector<std::string> want_load;
    for (const std::string& n : check_names())
        if (n.rfind("load.", 0) == 0) want_load.push_back(n);
    ASSERT_FALSE(want_load.empty());

    const kit::plugin_report load = kit::check_plugin(e4m3, opts("load.*"));
    std::vector<std::string> ran;
    for (const kit::result& x : load.results) ran.push_back(x.check);
    EXPECT_EQ(ran, want_load);

    const kit::plugin_report one = kit::check_plugin(e4m3, opts("quantize.ties_to_even"));
    ASSERT_EQ(one.results.size(), 1u) << dump(one);
    EXPECT_EQ(one.results[0].check, "quantize.ties_to_even");
    EXPECT_EQ(one.results[0].status, outcome::passed);

    EXPECT_TRUE(kit::check_plugin(e4m3, opts("no.such.check")).results.empty());
}

}  // namespace
