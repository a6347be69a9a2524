// Discovery and loading: broken plugins are reported with their reason and
// never take the others down; the ABI and descriptor checks catch liars.
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include "plugins/accumulator_handle.hpp"
#include "plugins/format_handle.hpp"
#include "plugins/intervention_handle.hpp"
#include "plugins/registry.hpp"
#include "plugins/transform_handle.hpp"
#include "test_support.hpp"
#include "util/error.hpp"

namespace altgrad::test {
namespace {

using host::plugin_status;
using host::registry;

uint32_t bits_of(float x) {
    uint32_t b;
    std::memcpy(&b, &x, sizeof b);
    return b;
}

const host::plugin_record& record(const registry& reg, const std::string& name) {
    for (const auto& r : reg.records())
        if (r.name() == name) return r;
    throw std::runtime_error("no record " + name);
}

std::string load_error(registry& reg, const std::string& name) {
    try {
        reg.load(name);
        return "";
    } catch (const host::error& e) {
        return e.what();
    }
}

TEST(Registry, BundledPluginsAllLoad) {
    registry reg(kBundled);
    reg.load_all();
    std::set<std::string> names;
    for (const auto& r : reg.records()) {
        EXPECT_EQ(r.status, plugin_status::ok) << r.name() << ": " << r.error;
        names.insert(r.name());
    }
    std::set<std::string> want = {"bf16",     "e0m7",     "e1m6",  "e3m4",  "e4m3",
                                  "e5m2",     "e7m0",     "fp16",  "fp32",  "fp4_e2m1",
                                  "fp6_e2m3", "fp6_e3m2", "ue8m0", "float", "int"};
    for (const char* other : {"range",
                              "stiffness",
                              "grid_alignment",
                              "bit_stall",
                              "ulp",
                              "grad_stiffness",
                              "kurtosis",
                              "attention_entropy",
                              "partition_clip",
                              "mantissa_shift",
                              "precision_schedule",
                              "hadamard",
                              "random_hadamard",
                              "sm90_wgmma_fp8",
                              "sm90_wgmma_fp16",
                              "sm89_mma_fp8",
                              "sm80_mma_fp16",
                              "sm100_tcgen05_fp8",
                              "sm100_tcgen05_mxf8f6f4",
                              "sm100_tcgen05_mxf4nvf4"})
        want.insert(other);
    EXPECT_EQ(names, want);
}

TEST(Registry, ManifestsAreReadWithoutLoading) {
    registry reg(kBundled);
    for (const auto& r : reg.records()) EXPECT_EQ(r.status, plugin_status::not_loaded) << r.name();
    reg.load("e5m2");
    EXPECT_EQ(record(reg, "e5m2").status, plugin_status::ok);
    EXPECT_EQ(record(reg, "e4m3").status, plugin_status::not_loaded);
}

TEST(Registry, OneBrokenPluginLeavesTheOthersWorking) {
    scratch_dir dir;
    dir.add_plugin("good", format_manifest("e5m2", "libaltgrad_e5m2.so"), bundled_library("e5m2"));
    dir.add_plugin("bad", "[plugin]\nkind = \"format\"\n");
    dir.add_plugin("future", format_manifest("abi_future", "libaltgrad_abi_future.so"),
                   kTestPlugins / "abi_future" / "libaltgrad_abi_future.so");
    registry reg(dir.path());
    reg.load_all();
    EXPECT_EQ(record(reg, "e5m2").status, plugin_status::ok);
    EXPECT_EQ(record(reg, "bad").status, plugin_status::broken);
    EXPECT_NE(record(reg, "bad").error.find("key 'plugin.name': missing"), std::string::npos);
    EXPECT_EQ(record(reg, "abi_future").status, plugin_status::broken);
    const auto e5m2 = host::format_handle::create(reg.load("e5m2"));
    EXPECT_EQ(e5m2->info().max_finite, 57344.0);
}

TEST(Registry, AbiMinorFromTheFutureIsRefusedNamingBothVersions) {
    scratch_dir dir;
    dir.add_plugin("f", format_manifest("abi_future", "libaltgrad_abi_future.so"),
                   kTestPlugins / "abi_future" / "libaltgrad_abi_future.so");
    registry reg(dir.path());
    const std::string e = load_error(reg, "abi_future");
    EXPECT_NE(e.find("ABI 1.99"), std::string::npos) << e;
    EXPECT_NE(e.find("ABI 1." + std::to_string(ALTGRAD_ABI_VERSION_MINOR)), std::string::npos)
        << e;  // the host's
    EXPECT_NE(e.find("newer host"), std::string::npos) << e;
}

TEST(Registry, AbiMajorMismatchInTheManifestIsRefused) {
    scratch_dir dir;
    dir.add_plugin("f", format_manifest("e5m2", "libaltgrad_e5m2.so", "1.0.0", "2.0"),
                   bundled_library("e5m2"));
    registry reg(dir.path());
    const std::string e = load_error(reg, "e5m2");
    EXPECT_NE(e.find("ABI 2.0"), std::string::npos) << e;
    EXPECT_NE(e.find("ABI 1." + std::to_string(ALTGRAD_ABI_VERSION_MINOR)), std::string::npos)
        << e;  // the host's
    EXPECT_NE(e.find("major versions differ"), std::string::npos) << e;
}

// ABI 1.1: save_state and load_state come as a pair.
TEST(Registry, SaveStateWithoutLoadStateIsRefused) {
    scratch_dir dir;
    dir.add_plugin("s",
                   "[plugin]\nkind = \"intervention\"\nname = \"state_half\"\nversion = \"1.0.0\"\n"
                   "abi_version = \"1.1\"\nlibrary = \"libaltgrad_state_half.so\"\ndescription = \"test\"\n",
                   kTestPlugins / "state_half" / "libaltgrad_state_half.so");
    registry reg(dir.path());
    const std::string e = load_error(reg, "state_half");
    EXPECT_NE(e.find("intervention table"), std::string::npos) << e;
    EXPECT_NE(e.find("save_state and load_state must be set together"), std::string::npos) << e;
}

// A plugin built with the 1.0 headers loads in the 1.1 host, which reads its
// shorter vtable as saving no state (and never calls past struct_size).
TEST(Registry, AnAbi10InterventionLoadsAndSavesNoState) {
    scratch_dir dir;
    dir.add_plugin(
        "a",
        "[plugin]\nkind = \"intervention\"\nname = \"abi10_intervention\"\nversion = \"1.0.0\"\n"
        "abi_version = \"1.0\"\nlibrary = \"libaltgrad_abi10_intervention.so\"\ndescription = \"test\"\n",
        kTestPlugins / "abi10_intervention" / "libaltgrad_abi10_intervention.so");
    registry reg(dir.path());
    const auto h = host::intervention_handle::create(reg.load("abi10_intervention"));
    EXPECT_FALSE(h->saves_state());
    EXPECT_THROW(h->save_state(), host::error);
    host::observation o;
    const std::vector<host::action> a = h->observe(o);
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].value, 1.0);
}

// ABI 1.2 block scales: a format built for 1.1 reads `scale` only, so the
// host calls it once per block. Blocks of two with scales 1/2 and 128 (E4M3,
// worked by hand in tests/sdk/block_scales_test.cpp): 1000 -> 896 (saturated
// at 448 * 2), 3 -> 3, 0.3 -> 0.3125, -0.001 -> -2^-10. With the scalar scale
// 1 alone, 1000 would give 448 and -0.001 -2^-9.
TEST(Registry, AnAbi11FormatGetsBlockScaledCallsOneBlockAtATime) {
    scratch_dir dir;
    dir.add_plugin("a", format_manifest("abi11_format", "libaltgrad_abi11_format.so", "1.0.0", "1.1"),
                   kTestPlugins / "abi11_format" / "libaltgrad_abi11_format.so");
    registry reg(dir.path());
    const auto old = host::format_handle::create(reg.load("abi11_format"));
    EXPECT_FALSE(old->takes_block_scales());
    const std::vector<float> xs = {1000.0f, 3.0f, 0.3f, -0.001f};
    const std::vector<float> scales = {0.5f, 128.0f};
    host::quantize_options o;
    o.block_scales = scales.data();
    o.block_size = 2;
    std::vector<float> out(4);
    const host::quantize_counts c = old->quantize(xs.data(), out.data(), 4, o);
    EXPECT_EQ(out, (std::vector<float>{896.0f, 3.0f, 0.3125f, -0.0009765625f}));
    EXPECT_EQ(c.overflow, 1u);
    std::vector<uint8_t> codes(4);
    EXPECT_EQ(old->encode(xs.data(), codes.data(), 4, o).overflow, 1u);
    std::vector<float> back(4);
    old->decode(codes.data(), back.data(), 4, 1.0f, scales.data(), 2);
    EXPECT_EQ(back, out);
    // A bundled plugin (ABI 1.2) takes the scales itself, with the same results.
    registry bundled(kBundled);
    const auto e4m3 = host::format_handle::create(bundled.load("e4m3"));
    EXPECT_TRUE(e4m3->takes_block_scales());
    std::vector<float> out12(4);
    e4m3->quantize(xs.data(), out12.data(), 4, o);
    EXPECT_EQ(out12, out);
    // Block scales in GPU memory cannot be split by the host.
    o.memory = ALTGRAD_MEMORY_CUDA;
    try {
        old->quantize(xs.data(), out.data(), 4, o);
        ADD_FAILURE() << "CUDA block scales were accepted for an ABI 1.1 plugin";
    } catch (const host::error& e) {
        EXPECT_NE(std::string(e.what()).find("ABI 1.1"), std::string::npos) << e.what();
    }
}

// The ABI 1.1 format's source rebuilt against today's headers reports the
// current ABI but declares no capabilities (issue #30): the version must not
// buy it block scales or random bits. Its block-scaled calls are split per
// block, bit for bit what the bundled E4M3 (which declares them) gives, and
// stochastic rounding with fewer than 32 random bits is an error naming it.
TEST(Registry, ARebuiltAbi11FormatIsSplitPerBlockNotTrustedForItsVersion) {
    scratch_dir dir;
    fs::copy(kTestPlugins / "rebuilt_abi11_format", dir.path() / "rebuilt_abi11_format");
    registry reg(dir.path());
    const auto rebuilt = host::format_handle::create(reg.load("rebuilt_abi11_format"));
    EXPECT_EQ(rebuilt->plugin().entry->abi_version.minor, ALTGRAD_ABI_VERSION_MINOR);
    EXPECT_EQ(rebuilt->info().capabilities, 0u);
    EXPECT_FALSE(rebuilt->takes_block_scales());
    EXPECT_FALSE(rebuilt->takes_random_bits());
    registry bundled(kBundled);
    const auto e4m3 = host::format_handle::create(bundled.load("e4m3"));
    EXPECT_EQ(e4m3->info().capabilities,
              ALTGRAD_FORMAT_CAPABILITY_BLOCK_SCALES | ALTGRAD_FORMAT_CAPABILITY_RANDOM_BITS);
    // Inputs over E4M3's range and beyond, blocks of 7 (a short last one),
    // power-of-two and other scales.
    std::vector<float> xs;
    for (int i = 0; i < 1000; ++i)
        xs.push_back(std::ldexp(static_cast<float>((i * 7919) % 2001) - 1000.0f, i % 19 - 12));
    std::vector<float> scales;
    for (size_t b = 0; b < (xs.size() + 6) / 7; ++b)
        scales.push_back(b % 3 == 0 ? 0.75f : std::ldexp(1.0f, static_cast<int>(b % 9) - 4));
    for (altgrad_rounding r :
         {ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_ROUND_STOCHASTIC, ALTGRAD_ROUND_TOWARD_ZERO}) {
        SCOPED_TRACE(r);
        host::quantize_options o;
        o.rounding = r;
        o.seed = 99;
        o.offset = 5;
        o.block_scales = scales.data();
        o.block_size = 7;
        std::vector<float> split(xs.size()), whole(xs.size());
        const host::quantize_counts a = rebuilt->quantize(xs.data(), split.data(), xs.size(), o);
        const host::quantize_counts b = e4m3->quantize(xs.data(), whole.data(), xs.size(), o);
        for (size_t i = 0; i < xs.size(); ++i)
            ASSERT_EQ(bits_of(split[i]), bits_of(whole[i])) << "element " << i << " x " << xs[i];
        EXPECT_EQ(a.overflow, b.overflow);
        EXPECT_EQ(a.underflow, b.underflow);
        EXPECT_GT(b.overflow, 0u);  // the inputs reach past max
        std::vector<uint8_t> split_codes(xs.size()), whole_codes(xs.size());
        rebuilt->encode(xs.data(), split_codes.data(), xs.size(), o);
        e4m3->encode(xs.data(), whole_codes.data(), xs.size(), o);
        EXPECT_EQ(split_codes, whole_codes);
    }
    // Few random bits: refused, naming the plugin; 32 (all) is what it does anyway.
    host::quantize_options o;
    o.rounding = ALTGRAD_ROUND_STOCHASTIC;
    o.random_bits = 8;
    std::vector<float> out(xs.size());
    try {
        rebuilt->quantize(xs.data(), out.data(), xs.size(), o);
        ADD_FAILURE() << "random_bits 8 was accepted by a plugin that does not declare them";
    } catch (const host::error& e) {
        EXPECT_NE(std::string(e.what()).find("rebuilt_abi11_format"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("ALTGRAD_FORMAT_CAPABILITY_RANDOM_BITS"), std::string::npos)
            << e.what();
    }
    o.random_bits = 32;
    std::vector<float> with32(xs.size());
    rebuilt->quantize(xs.data(), out.data(), xs.size(), o);
    e4m3->quantize(xs.data(), with32.data(), xs.size(), o);
    EXPECT_EQ(out, with32);
}

// Enum fields a plugin fills in are read as integers and range-checked before
// the host loads them as enums (a C++ load of a value outside a C enum's
// range is undefined behaviour, which the sanitizer build reports): 1000 in
// each is an error naming the plugin and the field.
TEST(Registry, AnEnumFieldOutOfRangeIsAnErrorNamingThePluginAndTheField) {
    scratch_dir dir;
    fs::copy(kTestPlugins / "broken_enums", dir.path() / "broken_enums");
    const std::vector<std::pair<const char*, std::string>> cases = {
        {"kind", "descriptor: kind 1000 is not one of format, intervention, diagnostic"},
        {"param_type", "descriptor: parameter 'unused': type 1000 is not one of bool, int, float, string"},
        {"family", "plugin 'broken_enums': get_info: family 1000 is not one of float, fixed_point, codebook"},
        {"zero", "plugin 'broken_enums': get_info: zero 1000 is not one of signed, unsigned, none"}};
    for (const auto& [field, want] : cases) {
        SCOPED_TRACE(field);
        ::setenv("ALTGRAD_TEST_BROKEN_ENUM", field, 1);
        registry reg(dir.path());
        try {
            host::format_handle::create(reg.load("broken_enums"));
            ADD_FAILURE() << "loaded and created";
        } catch (const host::error& e) {
            EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find("broken_enums"), std::string::npos) << e.what();
        }
    }
    // With every field valid the same library loads and creates.
    ::unsetenv("ALTGRAD_TEST_BROKEN_ENUM");
    registry reg(dir.path());
    EXPECT_EQ(host::format_handle::create(reg.load("broken_enums"))->info().zero, ALTGRAD_ZERO_SIGNED);

    fs::copy(kTestPlugins / "broken_action_kind", dir.path() / "broken_action_kind");
    registry with_action(dir.path());
    const auto h = host::intervention_handle::create(with_action.load("broken_action_kind"));
    try {
        h->observe(host::observation{});
        ADD_FAILURE() << "an action of kind 1000 was accepted";
    } catch (const host::error& e) {
        EXPECT_NE(
            std::string(e.what()).find("plugin 'broken_action_kind': observe: action 0: kind 1000 is not one "
                                       "of clip_grad_norm, switch_format, skip_step"),
            std::string::npos)
            << e.what();
    }
}

TEST(Registry, DescriptorMustMatchManifest) {
    scratch_dir dir;
    dir.add_plugin("m", format_manifest("descriptor_mismatch", "libaltgrad_descriptor_mismatch.so"),
                   kTestPlugins / "descriptor_mismatch" / "libaltgrad_descriptor_mismatch.so");
    // A bundled library under another name: the descriptor says e4m3.
    dir.add_plugin("n", format_manifest("renamed", "libaltgrad_e4m3.so"), bundled_library("e4m3"));
    registry reg(dir.path());
    std::string e = load_error(reg, "descriptor_mismatch");
    EXPECT_NE(e.find("library says name 'not_the_manifest_name', manifest says 'descriptor_mismatch'"),
              std::string::npos)
        << e;
    e = load_error(reg, "renamed");
    EXPECT_NE(e.find("library says name 'e4m3', manifest says 'renamed'"), std::string::npos) << e;
}

TEST(Registry, VersionAndKindMustMatchManifest) {
    scratch_dir dir;
    dir.add_plugin("v", format_manifest("e5m2", "libaltgrad_e5m2.so", "1.0.1"), bundled_library("e5m2"));
    std::string text = format_manifest("e4m3", "libaltgrad_e4m3.so");
    text.replace(text.find("\"format\""), 8, "\"diagnostic\"");
    dir.add_plugin("k", text, bundled_library("e4m3"));
    registry reg(dir.path());
    std::string e = load_error(reg, "e5m2");
    EXPECT_NE(e.find("library says version 1.0.0, manifest says 1.0.1"), std::string::npos) << e;
    e = load_error(reg, "e4m3");
    EXPECT_NE(e.find("library says kind 'format', manifest says 'diagnostic'"), std::string::npos) << e;
}

// A plugin's identity is written once, in its manifest: altgrad_add_plugin
// hands the manifest's name, version and description to the library's
// source (AltGradPlugin.cmake). So every bundled plugin's descriptor says
// exactly what its manifest says, as the host's TOML parser reads it.
TEST(Registry, EveryBundledDescriptorIsItsManifestsIdentity) {
    registry reg(kBundled);
    reg.load_all();
    for (const auto& r : reg.records()) {
        SCOPED_TRACE(r.name());
        ASSERT_TRUE(r.loaded) << r.error;
        const altgrad_descriptor& d = r.loaded->descriptor();
        EXPECT_EQ(std::string(d.name), r.info->name);
        EXPECT_EQ(std::string(d.description), r.info->description);
        EXPECT_EQ(host::version_string(d.version), host::version_string(r.info->version));
    }
}

// The same for a manifest written to be hard to turn into C (literal string,
// comments, escapes, raw UTF-8, a version part with a leading zero); and its
// library beside a manifest of another version is refused, naming the check.
TEST(Registry, AManifestsEscapesReachTheLibraryByteForByte) {
    scratch_dir dir;
    fs::copy(kTestPlugins / "manifest_identity", dir.path() / "manifest_identity");
    registry reg(dir.path());
    const auto p = reg.load("manifest_identity");
    const altgrad_descriptor& d = p->descriptor();
    EXPECT_EQ(std::string(d.name), "manifest_identity");
    EXPECT_EQ(d.version.major, 2u);
    EXPECT_EQ(d.version.minor, 10u);  // "010": ten, not C's octal eight
    EXPECT_EQ(d.version.patch, 3u);
    // TOML's \" \\ \t \u00e9 \U0001F600, written out as UTF-8 bytes here.
    const std::string want =
        "Test: \"quoted\", back\\slash, tab\there, caf\xc3\xa9 \xf0\x9f\x98\x80 "
        "\xc2\xb1 ?\?= ; [x] ${y} @z@ # kept";
    EXPECT_EQ(std::string(d.description), want);
    EXPECT_EQ(p->info.description, want);  // and the host's TOML parser agrees

    std::ifstream in(dir.path() / "manifest_identity" / "manifest.toml");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    text.replace(text.find("2.010.3"), 7, "2.010.4");
    dir.add_plugin("other", text, dir.path() / "manifest_identity" / "libaltgrad_manifest_identity.so");
    fs::remove_all(dir.path() / "manifest_identity");
    registry other(dir.path());
    const std::string e = load_error(other, "manifest_identity");
    EXPECT_NE(e.find("descriptor: library says version 2.10.3, manifest says 2.10.4"), std::string::npos)
        << e;
}

// ABI 1.3: a diagnostic's headline declaration is read and checked when it
// loads; each broken rule is refused in one line naming the plugin, the
// headline and the field, and the others still load.
TEST(Registry, AMalformedHeadlineIsRefusedNamingThePluginAndTheField) {
    scratch_dir dir;
    fs::copy(kTestPlugins / "broken_headlines", dir.path() / "broken_headlines");
    fs::copy(kBundled / "stiffness", dir.path() / "stiffness");
    const std::vector<std::pair<const char*, std::string>> cases = {
        {"series", "headline 0: series 'Stiffness Mean' is not [a-z0-9_.]+"},
        {"host_series", "headline 0 (series 'loss'): series is one of the host's own series"},
        {"duplicate", "headline 1: series 'broken_headlines.ok' is headline 0's too"},
        {"value", "headline 0 (series 'broken_headlines.ok'): value is NULL"},
        {"title", "headline 0 (series 'broken_headlines.ok'): title is empty"},
        {"label", "headline 0 (series 'broken_headlines.ok'): label is not NUL-terminated within 128 bytes"},
        {"unit",
         "headline 0 (series 'broken_headlines.ok'): unit holds a control character (byte 0x0a at offset 1)"},
        {"utf8", "headline 0 (series 'broken_headlines.ok'): title is not UTF-8 (byte 0xff at offset 4)"},
        {"summary", "headline 0 (series 'broken_headlines.ok'): summary 7 is not one of mean, max, min"},
        {"flags",
         "headline 0 (series 'broken_headlines.ok'): flags 6 hold bits other than "
         "ALTGRAD_HEADLINE_LOG_SCALE"},
        {"count", "headline_count 65 is more than ALTGRAD_HEADLINE_MAX_COUNT (64)"},
        {"null", "headlines is NULL with headline_count 1"},
        {"struct_size", "headline 0: struct_size 8 is not a headline's"}};
    for (const auto& [rule, want] : cases) {
        SCOPED_TRACE(rule);
        ::setenv("ALTGRAD_TEST_BROKEN_HEADLINE", rule, 1);
        registry reg(dir.path());
        const std::string e = load_error(reg, "broken_headlines");
        EXPECT_EQ(e.rfind("plugin 'broken_headlines'", 0), 0u) << e;
        EXPECT_NE(e.find("headlines: " + want), std::string::npos) << e;
        EXPECT_EQ(e.find('\n'), std::string::npos) << e;  // one line
        EXPECT_EQ(reg.load("stiffness")->headlines.size(), 1u);
    }
    // The same library with a well-formed declaration loads, and keeps a copy.
    ::setenv("ALTGRAD_TEST_BROKEN_HEADLINE", "valid", 1);
    registry reg(dir.path());
    const auto p = reg.load("broken_headlines");
    ::unsetenv("ALTGRAD_TEST_BROKEN_HEADLINE");
    ASSERT_EQ(p->headlines.size(), 1u);
    EXPECT_EQ(p->headlines[0].value, "ok");
    EXPECT_EQ(p->headlines[0].series, "broken_headlines.ok");
    EXPECT_EQ(p->headlines[0].title, "OK (mean over tensors of 1)");
    EXPECT_EQ(p->headlines[0].unit, "");
    EXPECT_EQ(p->headlines[0].summary, ALTGRAD_HEADLINE_MEAN);
    EXPECT_FALSE(p->headlines[0].log_scale);
}

TEST(Registry, MissingEntrySymbol) {
    scratch_dir dir;
    dir.add_plugin("x", format_manifest("no_entry", "libaltgrad_no_entry.so"),
                   kTestPlugins / "no_entry" / "libaltgrad_no_entry.so");
    registry reg(dir.path());
    const std::string e = load_error(reg, "no_entry");
    EXPECT_NE(e.find("does not export altgrad_plugin_entry"), std::string::npos) << e;
}

TEST(Registry, LibraryThatIsNotALibrary) {
    scratch_dir dir;
    const fs::path m = dir.add_plugin("x", format_manifest("junk", "libjunk.so"));
    std::ofstream(m.parent_path() / "libjunk.so") << "not an ELF file";
    registry reg(dir.path());
    const std::string e = load_error(reg, "junk");
    EXPECT_NE(e.find("plugin 'junk'"), std::string::npos) << e;
    EXPECT_NE(e.find(": load: "), std::string::npos) << e;
}

TEST(Registry, DuplicateNamesBreakBothAndNameEachOther) {
    scratch_dir dir;
    const fs::path a =
        dir.add_plugin("a", format_manifest("same", "libaltgrad_e5m2.so"), bundled_library("e5m2"));
    const fs::path b =
        dir.add_plugin("b", format_manifest("same", "libaltgrad_e4m3.so"), bundled_library("e4m3"));
    registry reg(dir.path());
    ASSERT_EQ(reg.records().size(), 2u);
    for (const auto& r : reg.records()) {
        EXPECT_EQ(r.status, plugin_status::broken);
        EXPECT_NE(r.error.find("duplicate plugin name 'same'"), std::string::npos) << r.error;
        EXPECT_NE(r.error.find((r.manifest_path == a ? b : a).string()), std::string::npos) << r.error;
    }
    EXPECT_NE(load_error(reg, "same").find("duplicate"), std::string::npos);
}

TEST(Registry, UnknownNameListsWhatExists) {
    registry reg(kBundled);
    const std::string e = load_error(reg, "e9m9");
    EXPECT_NE(e.find("no plugin named 'e9m9'"), std::string::npos) << e;
    EXPECT_NE(e.find("e5m2"), std::string::npos) << e;
}

// Each of these killed, hung or silently ended the process that loaded it
// before libraries were probed in a child process.
TEST(Registry, LibrariesThatCrashHangOrExitWhileLoadingAreBrokenAndTheHostGoesOn) {
    scratch_dir dir;
    const auto expected = add_plugins_that_die_loading(dir);
    registry reg(dir.path(), 2.0);
    const auto start = std::chrono::steady_clock::now();
    reg.load_all();
    EXPECT_LT(std::chrono::steady_clock::now() - start,
              std::chrono::seconds(20));  // one time limit, not a hang
    for (const auto& [name, reason] : expected) {
        const host::plugin_record& r = record(reg, name);
        EXPECT_EQ(r.status, plugin_status::broken) << name;
        EXPECT_EQ(r.loaded, nullptr) << name;
        EXPECT_NE(r.error.find("plugin '" + name + "' ("), std::string::npos) << r.error;
        EXPECT_NE(r.error.find(": load: "), std::string::npos) << r.error;
        EXPECT_NE(r.error.find(reason), std::string::npos) << r.error;
    }
    EXPECT_NE(record(reg, "broken_entry_loop").error.find("still running after 2 s"), std::string::npos);
    EXPECT_EQ(record(reg, "e4m3").status, plugin_status::ok);
    EXPECT_EQ(host::format_handle::create(reg.load("e4m3"))->info().max_finite, 448.0);
    EXPECT_NE(load_error(reg, "broken_load_segv").find("plugin 'broken_load_segv' is broken"),
              std::string::npos);
}

TEST(Registry, ProbingLoadsNothingIntoTheHost) {
    registry reg(kBundled);
    reg.probe_all();
    for (const auto& r : reg.records()) {
        EXPECT_EQ(r.status, plugin_status::ok) << r.name() << ": " << r.error;
        EXPECT_EQ(r.loaded, nullptr) << r.name();
    }
    EXPECT_NE(reg.load("e5m2"), nullptr);  // probed once, then loaded here
}

TEST(Registry, NotAFolder) { EXPECT_THROW(registry("/nonexistent/altgrad/plugins"), host::error); }

}  // namespace
// ---------------------------------------------------------------- transforms (ABI 1.4)

TEST(Registry, TransformPluginsLoadAndApply) {
    registry reg(kBundled);
    const auto plugin = reg.load("random_hadamard");
    EXPECT_EQ(plugin->info.kind, ALTGRAD_KIND_TRANSFORM);
    const auto t = host::transform_handle::create(plugin, {{"d", "32"}, {"signs", "fixed"}});
    EXPECT_EQ(t->info().block_size, 32u);
    EXPECT_EQ(t->info().self_inverse, 0u);
    EXPECT_EQ(t->info().uses_seed, 0u);
    // e_0 becomes s_0 times the first column of H_32 / sqrt(32): every element +-fl(1/sqrt(32)).
    std::vector<float> x(64, 0.0f), y(64);
    x[0] = 1.0f;
    x[32] = 1.0f;
    t->apply(x.data(), y.data(), 2, 32, 0, false);
    for (size_t i = 0; i < 64; ++i)
        EXPECT_EQ(std::fabs(y[i]), 0x1.6a09e6p-3f) << i;  // 1/sqrt(32) = 0.1767...
    t->apply(y.data(), y.data(), 2, 32, 0, true);         // in place, back
    for (size_t i = 0; i < 64; ++i) EXPECT_NEAR(y[i], x[i], 1e-6) << i;
}

TEST(Registry, TransformApplyFailureNamesThePluginAndStatus) {
    registry reg(kBundled);
    const auto t = host::transform_handle::create(reg.load("hadamard"));
    std::vector<float> x(24, 1.0f);
    try {
        t->apply(x.data(), x.data(), 1, 24, 0, false);
        FAIL() << "cols 24 with d 16 was accepted";
    } catch (const host::error& e) {
        EXPECT_EQ(
            std::string(e.what()),
            "plugin 'hadamard': apply failed (invalid argument): apply: cols 24 is not a multiple of the "
            "block size 16");
    }
}

TEST(Registry, TransformOfAnotherKindIsRefused) {
    registry reg(kBundled);
    try {
        host::transform_handle::create(reg.load("e4m3"));
        FAIL() << "a format was created as a transform";
    } catch (const host::error& e) {
        EXPECT_EQ(std::string(e.what()), "plugin 'e4m3' is a format plugin, not a transform");
    }
    try {
        host::format_handle::create(reg.load("hadamard"));
        FAIL() << "a transform was created as a format";
    } catch (const host::error& e) {
        EXPECT_EQ(std::string(e.what()), "plugin 'hadamard' is a transform plugin, not a format");
    }
}

TEST(Registry, TransformManifestBeforeAbi14IsRefused) {
    scratch_dir dir;
    std::string text = format_manifest("hadamard", "libaltgrad_hadamard.so", "1.0.0", "1.3");
    text.replace(text.find("\"format\""), 8, "\"transform\"");
    dir.add_plugin("hadamard", text, bundled_library("hadamard"));
    registry reg(dir.path());
    const std::string e = load_error(reg, "hadamard");
    EXPECT_NE(e.find("plugin.abi_version"), std::string::npos) << e;
    EXPECT_NE(e.find("a transform plugin needs ABI 1.4 or newer"), std::string::npos) << e;
}

TEST(Registry, TransformWhoseEntryClaimsAbi13IsRefused) {
    scratch_dir dir;
    fs::copy(kTestPlugins / "abi13_transform", dir.path() / "abi13_transform");
    registry reg(dir.path());
    const std::string e = load_error(reg, "abi13_transform");
    EXPECT_NE(e.find("entry: a transform plugin needs ABI 1.4 or newer (the entry reports ABI 1.3"),
              std::string::npos)
        << e;
}

// ---------------------------------------------------------------- accumulators (ABI 1.5)

// One output of two products, 1 x 1 and 2^-7 x 2^-7: Hopper's FP8 instruction
// keeps 13 bits below the largest exponent, so 2^-14 is truncated away; its
// BF16 one keeps 25 and gives 1 + 2^-14 (what DeepGEMM #43 and the issue
// describe: 32 FP8 products need more than 14 bits).
TEST(Registry, AccumulatorPluginsLoadAndDotAdd) {
    registry reg(kBundled);
    const auto plugin = reg.load("sm90_wgmma_fp8");
    EXPECT_EQ(plugin->info.kind, ALTGRAD_KIND_ACCUMULATOR);
    const auto fp8 = host::accumulator_handle::create(plugin);
    EXPECT_EQ(fp8->info().depth, 32u);
    EXPECT_EQ(fp8->info().fraction_bits, 13u);
    EXPECT_EQ(fp8->info().output, ALTGRAD_ACC_OUTPUT_E8M13);
    const auto bf16 = host::accumulator_handle::create(reg.load("sm90_wgmma_fp16"));
    const float a[] = {1.0f, 0x1p-7f}, b[] = {1.0f, 0x1p-7f}, c[] = {0.0f};
    for (const auto& [acc, min_exponent, want] :
         {std::tuple{fp8.get(), -6, 1.0f}, std::tuple{bf16.get(), -126, 1.0f + 0x1p-14f}}) {
        float d = -1.0f;
        altgrad::sdk::dot_add_operands o;
        o.a = a;
        o.b = b;
        o.c = c;
        o.d = &d;
        o.m = o.n = 1;
        o.k = 2;
        o.a_min_exponent = o.b_min_exponent = min_exponent;
        acc->dot_add(o);
        EXPECT_EQ(d, want) << acc->name();
    }
}

TEST(Registry, AccumulatorDotAddFailureNamesThePluginAndStatus) {
    registry reg(kBundled);
    const auto acc = host::accumulator_handle::create(reg.load("sm90_wgmma_fp8"));
    std::vector<float> a(33, 1.0f), b(33, 1.0f), c(1, 0.0f), d(1);
    altgrad::sdk::dot_add_operands o;
    o.a = a.data();
    o.b = b.data();
    o.c = c.data();
    o.d = d.data();
    o.m = o.n = 1;
    o.k = 33;
    o.a_min_exponent = o.b_min_exponent = -6;
    try {
        acc->dot_add(o);
        FAIL() << "k 33 with depth 32 was accepted";
    } catch (const host::error& e) {
        EXPECT_EQ(
            std::string(e.what()),
            "plugin 'sm90_wgmma_fp8': dot_add failed (invalid argument): dot_add: k 33 is more than the "
            "depth 32");
    }
}

TEST(Registry, AccumulatorOfAnotherKindIsRefused) {
    registry reg(kBundled);
    try {
        host::accumulator_handle::create(reg.load("hadamard"));
        FAIL() << "a transform was created as an accumulator";
    } catch (const host::error& e) {
        EXPECT_EQ(std::string(e.what()), "plugin 'hadamard' is a transform plugin, not an accumulator");
    }
    try {
        host::format_handle::create(reg.load("sm100_tcgen05_mxf4nvf4"));
        FAIL() << "an accumulator was created as a format";
    } catch (const host::error& e) {
        EXPECT_EQ(std::string(e.what()),
                  "plugin 'sm100_tcgen05_mxf4nvf4' is an accumulator plugin, not a format");
    }
}

TEST(Registry, AccumulatorManifestBeforeAbi15IsRefused) {
    scratch_dir dir;
    std::string text =
        format_manifest("abi14_accumulator", "libaltgrad_abi14_accumulator.so", "1.0.0", "1.4");
    text.replace(text.find("\"format\""), 8, "\"accumulator\"");
    dir.add_plugin("abi14_accumulator", text,
                   kTestPlugins / "abi14_accumulator" / "libaltgrad_abi14_accumulator.so");
    registry reg(dir.path());
    const std::string e = load_error(reg, "abi14_accumulator");
    EXPECT_NE(e.find("plugin.abi_version"), std::string::npos) << e;
    EXPECT_NE(e.find("an accumulator plugin needs ABI 1.5 or newer"), std::string::npos) << e;
}

TEST(Registry, AccumulatorWhoseEntryClaimsAbi14IsRefused) {
    scratch_dir dir;
    fs::copy(kTestPlugins / "abi14_accumulator", dir.path() / "abi14_accumulator");
    registry reg(dir.path());
    const std::string e = load_error(reg, "abi14_accumulator");
    EXPECT_NE(e.find("entry: an accumulator plugin needs ABI 1.5 or newer (the entry reports ABI 1.4"),
              std::string::npos)
        << e;
}

}  // namespace altgrad::test
