// The first hour of a newcomer and of a plugin author (issue #18): the
// default plugin folder, aliases, "did you mean", operands that are not
// options, quantize's decimal output and binary files, new-plugin.
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "cli/tensor_files.hpp"
#include "plugins/manifest.hpp"
#include "plugins/registry.hpp"
#include "test_support.hpp"
#include "util/json_output.hpp"

namespace altgrad::test {
namespace {

const std::string kPlugins = "--plugins " + kBundled.string() + " ";
bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string file_bytes(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// ---- the default plugin folder -------------------------------------------------------------

TEST(DefaultPlugins, EnvironmentThenBuildThenInstallation) {
    scratch_dir dir;
    const fs::path build_host = dir.path() / "build" / "altgrad-host";
    const fs::path installed_host = dir.path() / "prefix" / "bin" / "altgrad-host";
    fs::create_directories(dir.path() / "build" / "plugins");
    fs::create_directories(dir.path() / "prefix" / "bin");
    fs::create_directories(dir.path() / "prefix" / "lib" / "altgrad" / "plugins");
    const fs::path sub = "lib/altgrad/plugins";

    auto d = host::default_plugin_folder("/some/where", build_host, sub);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->dir, "/some/where");
    EXPECT_EQ(d->source, "ALTGRAD_PLUGINS");

    d = host::default_plugin_folder("", build_host, sub);  // set but empty: ignored
    ASSERT_TRUE(d);
    EXPECT_EQ(d->dir, dir.path() / "build" / "plugins");
    EXPECT_EQ(d->source, "the build's (beside the host)");

    d = host::default_plugin_folder(nullptr, installed_host, sub);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->dir, dir.path() / "prefix" / "lib" / "altgrad" / "plugins");
    EXPECT_EQ(d->source, "the installation's");

    EXPECT_FALSE(host::default_plugin_folder(nullptr, dir.path() / "elsewhere" / "altgrad-host", sub));
}

TEST(DefaultPlugins, TheBuildsHostFindsTheBuildsPlugins) {
    // The test host is build/altgrad-host, beside build/plugins.
    const run_result r = run_host("list");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_TRUE(has(r.out, "e4m3")) << r.out;
    const run_result help = run_host("--help");
    EXPECT_TRUE(has(help.out, "Here that is: " + (fs::path(kHost).parent_path() / "plugins").string() +
                                  " (the build's (beside the host))"))
        << help.out;
}

// A shell command's exit status and its stdout and stderr together.
std::pair<int, std::string> shell(const std::string& command) {
    FILE* p = ::popen((command + " 2>&1").c_str(), "r");
    if (p == nullptr) return {-1, ""};
    std::string out;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    const int status = ::pclose(p);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(DefaultPlugins, AltgradPluginsWins) {
    scratch_dir dir;
    dir.add_plugin("only", format_manifest("only_one", "libaltgrad_e5m2.so"), bundled_library("e5m2"));
    const auto [status, out] = shell("ALTGRAD_PLUGINS=" + dir.path().string() + " " + kHost + " list");
    EXPECT_EQ(status, 0) << out;
    EXPECT_TRUE(has(out, "only_one")) << out;
    EXPECT_FALSE(has(out, "e4m3")) << out;
}

TEST(DefaultPlugins, AHostWithNoPluginsAnywhereSaysHowToGiveThem) {
    scratch_dir dir;
    const fs::path lone = dir.path() / "altgrad-host";
    fs::copy_file(kHost, lone);
    const auto [status, out] = shell("env -u ALTGRAD_PLUGINS " + lone.string() + " list");
    EXPECT_EQ(status, 2) << out;
    EXPECT_TRUE(has(out, "--plugins DIR is required (or set ALTGRAD_PLUGINS)")) << out;
}

// ---- command lines --------------------------------------------------------------------------

TEST(Newcomer, OperandsAreNotOptions) {
    run_result r = run_host(kPlugins + "conformance --plugin e5m2");
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_TRUE(has(r.out, "conformance: unrecognised option '--plugin'")) << r.out;
    r = run_host(kPlugins + "describe --name e4m3");
    EXPECT_EQ(r.exit_code, 2) << r.out;
    EXPECT_TRUE(has(r.out, "describe: unrecognised option '--name'")) << r.out;
}

TEST(Newcomer, AWrongFormatNameGetsASuggestionAndOnlyFormats) {
    const run_result r = run_host(kPlugins + "quantize e4m3fn", "1");
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_TRUE(has(r.out, "no format plugin named 'e4m3fn'")) << r.out;
    EXPECT_TRUE(has(r.out, "did you mean 'e4m3'?")) << r.out;
    EXPECT_TRUE(has(r.out, "e5m2")) << r.out;
    EXPECT_FALSE(has(r.out, "kurtosis")) << "a diagnostic is no format: " << r.out;
    // Far from every name: no guess.
    const run_result far = run_host(kPlugins + "quantize zzzzzzzzzzzz", "1");
    EXPECT_FALSE(has(far.out, "did you mean")) << far.out;
    // A plugin of the wrong kind says so.
    const run_result kind = run_host(kPlugins + "quantize kurtosis", "1");
    EXPECT_EQ(kind.exit_code, 1) << kind.out;
    EXPECT_TRUE(has(kind.out, "'kurtosis' is a diagnostic plugin, not a format plugin")) << kind.out;
}

// ---- aliases --------------------------------------------------------------------------------

TEST(Aliases, DescribeAndQuantizeAcceptTheMlDtypesNames) {
    // ml_dtypes / PyTorch names of OCP and IEEE formats, and the bundled plugin each is.
    const std::vector<std::pair<std::string, std::string>> aliases = {
        {"float8_e4m3fn", "e4m3"},     {"float8_e5m2", "e5m2"},       {"float8_e3m4", "e3m4"},
        {"bfloat16", "bf16"},          {"float16", "fp16"},           {"float32", "fp32"},
        {"float4_e2m1fn", "fp4_e2m1"}, {"float6_e2m3fn", "fp6_e2m3"}, {"float6_e3m2fn", "fp6_e3m2"},
        {"float8_e8m0fnu", "ue8m0"}};
    for (const auto& [alias, name] : aliases) {
        const run_result r = run_host(kPlugins + "describe " + alias);
        ASSERT_EQ(r.exit_code, 0) << alias << ": " << r.out;
        EXPECT_TRUE(has(r.out, "name            " + name + " ")) << r.out;
        EXPECT_TRUE(has(r.out, "aliases         " + alias)) << r.out;
    }
    // OCP E4M3FN: 464 lies halfway between 448 and the would-be 480 and 448 is the max: saturates.
    const run_result q = run_host(kPlugins + "quantize float8_e4m3fn", "464 0.1");
    ASSERT_EQ(q.exit_code, 0) << q.out;
    EXPECT_EQ(q.out, "0x1.cp+8\n0x1.ap-4\n");
}

TEST(Aliases, JsonListsThem) {
    const run_result r = run_host(kPlugins + "describe float8_e5m2 --json", "", "/dev/null");
    const host::ordered_json j = host::ordered_json::parse(r.out);
    EXPECT_EQ(j["name"], "e5m2");
    EXPECT_EQ(j["aliases"], host::ordered_json::array({"float8_e5m2"}));
    const host::ordered_json l =
        host::ordered_json::parse(run_host(kPlugins + "list --json", "", "/dev/null").out);
    bool seen = false;
    for (const auto& p : l["plugins"])
        if (p["name"] == "e4m3") seen = p["aliases"] == host::ordered_json::array({"float8_e4m3fn"});
    EXPECT_TRUE(seen) << l.dump(2);
}

TEST(Aliases, ManifestChecksThem) {
    scratch_dir dir;
    const std::string base = format_manifest("mine", "libaltgrad_e5m2.so");
    const auto with = [&](const std::string& line) {
        std::string m = base;
        m.insert(m.find("version ="), line + "\n");
        return m;
    };
    dir.add_plugin("p", with("aliases = [\"Float8\"]"), bundled_library("e5m2"));
    try {
        host::read_manifest(dir.path() / "p" / "manifest.toml");
        ADD_FAILURE() << "an invalid alias was accepted";
    } catch (const std::exception& e) {
        EXPECT_TRUE(has(e.what(), "key 'plugin.aliases': \"Float8\" is not a valid name")) << e.what();
    }
    dir.add_plugin("p", with("aliases = \"x\""), bundled_library("e5m2"));
    EXPECT_THROW(host::read_manifest(dir.path() / "p" / "manifest.toml"), std::exception);
    dir.add_plugin("p", with("aliases = [\"mine\"]"), bundled_library("e5m2"));
    EXPECT_THROW(host::read_manifest(dir.path() / "p" / "manifest.toml"), std::exception);
    dir.add_plugin("p", with("aliases = [\"a\", \"b\"]"), bundled_library("e5m2"));
    EXPECT_EQ(host::read_manifest(dir.path() / "p" / "manifest.toml").aliases,
              (std::vector<std::string>{"a", "b"}));
}

TEST(Aliases, ANameWinsAndASharedAliasIsRefused) {
    scratch_dir dir;
    const auto manifest = [](const std::string& name, const std::string& aliases) {
        std::string m = format_manifest(name, "libaltgrad_" + name + ".so", "1.0.0", "1.2");
        if (!aliases.empty()) m.insert(m.find("version ="), "aliases = [" + aliases + "]\n");
        return m;
    };
    dir.add_plugin("e5m2", manifest("e5m2", "\"shared\", \"e4m3\""), bundled_library("e5m2"));
    dir.add_plugin("e4m3", manifest("e4m3", ""), bundled_library("e4m3"));
    dir.add_plugin("e7m0", manifest("e7m0", "\"shared\", \"p3109_e7m0\""), bundled_library("e7m0"));
    host::registry reg(dir.path());
    EXPECT_EQ(reg.load("p3109_e7m0")->info.name, "e7m0");
    EXPECT_EQ(reg.load("e4m3")->info.name, "e4m3");  // e5m2's alias, but a plugin's own name wins
    try {
        reg.load("shared");
        ADD_FAILURE() << "an alias of two plugins was resolved";
    } catch (const std::exception& e) {
        EXPECT_TRUE(has(e.what(), "'shared' is an alias of two plugins, 'e5m2' and 'e7m0'")) << e.what();
    }
}

// The text table: an ALIASES column between VERSION and STATUS ("-" for none), and `list NAME...`
// lists only the plugins named, by name or alias, in the order given.
TEST(Aliases, ListShowsThemAndTakesNames) {
    const run_result all = run_host(kPlugins + "list", "", "/dev/null");
    ASSERT_EQ(all.exit_code, 0) << all.out;
    std::vector<std::string> lines;
    for (size_t pos = 0; pos < all.out.size();) {
        const size_t end = all.out.find('\n', pos);
        lines.push_back(all.out.substr(pos, end - pos));
        pos = end + 1;
    }
    ASSERT_GE(lines.size(), 3u) << all.out;
    const size_t aliases_at = lines[0].find("ALIASES"), status_at = lines[0].find("STATUS");
    ASSERT_LT(aliases_at, status_at) << lines[0];
    const auto column = [&](const std::string& line) {
        return line.substr(aliases_at, line.find(' ', aliases_at) - aliases_at);
    };
    size_t seen = 0;
    const std::vector<std::pair<std::string, std::string>> expected = {
        {"e4m3", "float8_e4m3fn"}, {"fp32", "float32"}, {"kurtosis", "-"}};
    for (const std::string& line : lines)
        for (const auto& [name, aliases] : expected)
            if (line.find(" " + name + " ") != std::string::npos) {
                ++seen;
                EXPECT_EQ(column(line), aliases) << line;
            }
    EXPECT_EQ(seen, 3u) << all.out;

    const run_result named = run_host(kPlugins + "list float8_e4m3fn bf16", "", "/dev/null");
    ASSERT_EQ(named.exit_code, 0) << named.out;
    EXPECT_EQ(named.out,
              "KIND    NAME  VERSION  ALIASES        STATUS\n"
              "format  e4m3  1.0.0    float8_e4m3fn  ok\n"
              "format  bf16  1.0.0    bfloat16       ok\n");
    const host::ordered_json j =
        host::ordered_json::parse(run_host(kPlugins + "list --json float16", "", "/dev/null").out);
    ASSERT_EQ(j["plugins"].size(), 1u) << j.dump(2);
    EXPECT_EQ(j["plugins"][0]["name"], "fp16");

    const run_result wrong = run_host(kPlugins + "list e4m3fn");
    EXPECT_EQ(wrong.exit_code, 1) << wrong.out;
    EXPECT_TRUE(has(wrong.out, "no plugin named 'e4m3fn'")) << wrong.out;
    EXPECT_TRUE(has(wrong.out, "did you mean 'e4m3'?")) << wrong.out;
}

// --plugins is optional (the default folder, above): every usage line says so.
TEST(Newcomer, UsagesShowPluginsAsOptional) {
#ifdef ALTGRAD_HOST_WITHOUT_TRAINER  // the sanitizer build's host has no run or sweep
    for (const std::string command : {"list", "describe", "quantize", "conformance"}) {
#else
    for (const std::string command : {"list", "describe", "quantize", "conformance", "run", "sweep"}) {
#endif
        const run_result r = run_host(command + " --help");
        EXPECT_EQ(r.out.rfind("usage: altgrad-host [--plugins DIR] " + command + " ", 0), 0u) << r.out;
    }
}

// ---- quantize: decimal output, binary files ------------------------------------------------

// OCP E4M3FN by hand: 0.1 = 1.6 * 2^-4, step 2^-7 -> 13/128 = 0.1015625; -0.3 = -1.2 * 2^-2, step
// 2^-5 -> -10/32 = -0.3125; 464 and 1e5 saturate to 448; -0 stays -0.
TEST(Quantize, DecimalOutputIsTheShortestExactDecimal) {
    const run_result r =
        run_host(kPlugins + "quantize e4m3 --output-format decimal", "0.1 -0.3 464 1e5 -0 nan", "/dev/null");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(r.out, "0.1015625\n-0.3125\n448\n448\n-0\nnan\n");
    EXPECT_EQ(run_host(kPlugins + "quantize e4m3 --output-format octal", "1").exit_code, 2);
}

// A .npy file as numpy.save writes it (format 1.0), built byte by byte.
std::string npy_bytes(const std::string& descr, const std::string& shape, const std::vector<float>& values) {
    std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
    header.append(64 - (10 + header.size() + 1) % 64, ' ');
    header += '\n';
    std::string bytes = std::string("\x93NUMPY\x01\x00", 8);
    bytes += static_cast<char>(header.size() & 0xff);
    bytes += static_cast<char>(header.size() >> 8);
    bytes += header;
    bytes.append(reinterpret_cast<const char*>(values.data()), values.size() * 4);
    return bytes;
}

TEST(Quantize, NpyInAndOutKeepsTheShape) {
    scratch_dir dir;
    const fs::path in = dir.path() / "w.npy", out = dir.path() / "q.npy";
    std::ofstream(in, std::ios::binary) << npy_bytes("<f4", "(2, 2)", {0.1f, 464.0f, -0.3f, 1e5f});
    const run_result r =
        run_host(kPlugins + "quantize e4m3 --input " + in.string() + " --output " + out.string());
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(file_bytes(out), npy_bytes("<f4", "(2, 2)", {0.1015625f, 448.0f, -0.3125f, 448.0f}));
    // And as text to standard output.
    const run_result text =
        run_host(kPlugins + "quantize e4m3 --output-format decimal --input " + in.string(), "", "/dev/null");
    EXPECT_EQ(text.out, "0.1015625\n448\n-0.3125\n448\n");
}

TEST(Quantize, RawFloat32InAndOut) {
    scratch_dir dir;
    const fs::path in = dir.path() / "w.f32", out = dir.path() / "q.f32";
    const std::vector<float> x = {0.1f, -0.3f, 464.0f};
    std::ofstream(in, std::ios::binary).write(reinterpret_cast<const char*>(x.data()), 12);
    const run_result r =
        run_host(kPlugins + "quantize e4m3 --input " + in.string() + " --output " + out.string());
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const std::string bytes = file_bytes(out);
    ASSERT_EQ(bytes.size(), 12u);
    std::vector<float> y(3);
    std::memcpy(y.data(), bytes.data(), 12);
    EXPECT_EQ(y, (std::vector<float>{0.1015625f, -0.3125f, 448.0f}));
}

TEST(Quantize, BadBinaryFilesAreOneLineErrors) {
    scratch_dir dir;
    const fs::path f8 = dir.path() / "d.npy", odd = dir.path() / "odd.f32", cut = dir.path() / "cut.npy";
    std::ofstream(f8, std::ios::binary) << npy_bytes("<f8", "(1,)", {0.0f, 0.0f});
    std::ofstream(odd, std::ios::binary) << "abcde";
    std::string short_data = npy_bytes("<f4", "(3,)", {1.0f, 2.0f});
    std::ofstream(cut, std::ios::binary) << short_data;
    run_result r = run_host(kPlugins + "quantize e4m3 --input " + f8.string());
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_TRUE(has(r.out, f8.string() + ": .npy dtype '<f8' is not float32 ('<f4')")) << r.out;
    r = run_host(kPlugins + "quantize e4m3 --input " + odd.string());
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_TRUE(has(r.out, odd.string() + ": raw float32 data of 5 bytes is not a whole number")) << r.out;
    r = run_host(kPlugins + "quantize e4m3 --input " + cut.string());
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_TRUE(has(r.out, cut.string() + ": .npy shape holds 3 values, the file 2")) << r.out;
    r = run_host(
        kPlugins + "quantize e4m3 --output-format decimal --output " + (dir.path() / "x.npy").string(), "1");
    EXPECT_EQ(r.exit_code, 2) << r.out;
}

// ---- new-plugin ---------------------------------------------------------------------------
// (tests/out_of_tree builds each kind against an installed SDK and runs the kit on it.)

TEST(NewPlugin, WritesTheProjectAndRefusesToOverwrite) {
    scratch_dir dir;
    const run_result r =
        run_host("new-plugin my_fp4 --kind format --dir " + dir.path().string(), "", "/dev/null");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    for (const char* f : {"CMakeLists.txt", "manifest.toml", "my_fp4.cpp", "README.md"}) {
        EXPECT_TRUE(has(r.out, (dir.path() / "my_fp4" / f).string())) << r.out;
        EXPECT_TRUE(fs::is_regular_file(dir.path() / "my_fp4" / f)) << f;
    }
    const std::string manifest = file_bytes(dir.path() / "my_fp4" / "manifest.toml");
    EXPECT_TRUE(has(manifest, "name = \"my_fp4\"")) << manifest;
    EXPECT_TRUE(has(manifest, "abi_version = \"" + std::to_string(ALTGRAD_ABI_VERSION_MAJOR) + "." +
                                  std::to_string(ALTGRAD_ABI_VERSION_MINOR) + "\""))
        << manifest;
    // The identity is written once, in the manifest; the source's macro takes it from there.
    EXPECT_TRUE(has(manifest, "version = \"0.1.0\"")) << manifest;
    EXPECT_TRUE(has(manifest, "description = \"A 4-bit table format")) << manifest;
    const std::string source = file_bytes(dir.path() / "my_fp4" / "my_fp4.cpp");
    EXPECT_TRUE(has(source, "\nALTGRAD_FORMAT_PLUGIN(make_format)")) << source;
    EXPECT_FALSE(has(source, "\"my_fp4\"")) << source;
    // A diagnostic declares its headline, a series named after it while that
    // stays shorter than 64 bytes, else the value's own name.
    ASSERT_EQ(run_host("new-plugin my_diag --kind diagnostic --dir " + dir.path().string()).exit_code, 0);
    EXPECT_TRUE(has(file_bytes(dir.path() / "my_diag" / "my_diag.cpp"),
                    "sdk::headline(\"mean_abs\", \"my_diag.mean_abs\")"));
    const std::string long_name(60, 'd');
    ASSERT_EQ(
        run_host("new-plugin " + long_name + " --kind diagnostic --dir " + dir.path().string()).exit_code, 0);
    EXPECT_TRUE(has(file_bytes(dir.path() / long_name / (long_name + ".cpp")),
                    "sdk::headline(\"mean_abs\", \"mean_abs\")"));
    const run_result again = run_host("new-plugin my_fp4 --kind format --dir " + dir.path().string());
    EXPECT_EQ(again.exit_code, 1);
    EXPECT_TRUE(has(again.out, "exists and is not empty")) << again.out;
    EXPECT_EQ(run_host("new-plugin x --kind codec --dir " + dir.path().string()).exit_code, 2);
    EXPECT_EQ(run_host("new-plugin Bad-Name --kind format --dir " + dir.path().string()).exit_code, 1);
}

}  // namespace
}  // namespace altgrad::test
