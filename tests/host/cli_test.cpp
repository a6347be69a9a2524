// The altgrad-host binary as a user runs it: outputs, exit codes, errors.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include "test_support.hpp"
#include "util/json_output.hpp"
#include "util/numbers.hpp"

namespace altgrad::test {
namespace {

const std::string kPlugins = "--plugins " + kBundled.string() + " ";
using host::ordered_json;

size_t count_lines(const std::string& s) { return static_cast<size_t>(std::count(s.begin(), s.end(), '\n')); }

TEST(Cli, ListShowsEveryBundledPluginOk) {
    const run_result r = run_host(kPlugins + "list");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    for (const char* name : {"e5m2", "e4m3", "e3m4", "e1m6", "e7m0", "e0m7", "bf16", "fp16", "fp32",
                             "fp4_e2m1", "fp6_e2m3", "fp6_e3m2", "ue8m0", "float", "int"})
        EXPECT_NE(r.out.find(std::string(name)), std::string::npos) << name;
    EXPECT_EQ(r.out.find("broken"), std::string::npos) << r.out;
    // header + 15 formats, 8 diagnostics, 3 interventions, 2 transforms, 7 accumulators
    EXPECT_EQ(count_lines(r.out), 36u) << r.out;
    EXPECT_NE(r.out.find("transform     hadamard"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("accumulator   sm90_wgmma_fp8"), std::string::npos) << r.out;
}

// A command's stdout parsed as JSON (a parse error fails the test with the text).
ordered_json parsed_json(const std::string& args) {
    const run_result r = run_host(args, "", "/dev/null");
    EXPECT_EQ(r.exit_code, 0) << r.out;
    try {
        return ordered_json::parse(r.out);
    } catch (const std::exception& e) {
        ADD_FAILURE() << args << ": not JSON (" << e.what() << "):\n" << r.out;
        return nullptr;
    }
}

std::vector<std::string> keys_of(const ordered_json& object) {
    std::vector<std::string> keys;
    for (const auto& item : object.items()) keys.push_back(item.key());
    return keys;
}

using keys = std::vector<std::string>;

TEST(Cli, ListJsonShowsBrokenPluginsWithTheirReason) {
    scratch_dir dir;
    dir.add_plugin("good", format_manifest("e5m2", "libaltgrad_e5m2.so"), bundled_library("e5m2"));
    dir.add_plugin("bad", format_manifest("bad", "nothing.so"));
    const ordered_json j = parsed_json("--plugins " + dir.path().string() + " list --json");
    EXPECT_EQ(keys_of(j), (keys{"plugins_dir", "plugins"}));
    EXPECT_EQ(j["plugins_dir"], dir.path().string());
    ASSERT_EQ(j["plugins"].size(), 2u) << j.dump();
    const ordered_json& bad = j["plugins"][0]["name"] == "bad" ? j["plugins"][0] : j["plugins"][1];
    const ordered_json& good = j["plugins"][0]["name"] == "bad" ? j["plugins"][1] : j["plugins"][0];
    for (const ordered_json* p : {&good, &bad})
        EXPECT_EQ(keys_of(*p),
                  (keys{"kind", "name", "aliases", "version", "status", "description", "manifest", "error"}));
    EXPECT_EQ(good["name"], "e5m2");
    EXPECT_EQ(good["kind"], "format");
    EXPECT_EQ(good["version"], "1.0.0");
    EXPECT_EQ(good["status"], "ok");
    EXPECT_EQ(good["description"], "test");
    EXPECT_TRUE(good["error"].is_null());
    EXPECT_EQ(bad["version"], "?");
    EXPECT_EQ(bad["status"], "broken");
    EXPECT_TRUE(bad["description"].is_null());
    EXPECT_NE(bad["error"].get<std::string>().find("key 'plugin.library'"), std::string::npos) << bad.dump();
    // The count of broken plugins goes to stderr, beside the JSON.
    const run_result r = run_host("--plugins " + dir.path().string() + " list --json");
    EXPECT_NE(r.out.find("1 of 2 plugins are broken"), std::string::npos) << r.out;
}

// E4M3 as the OCP FP8 spec defines it: bias 7, no infinities, S.1111.111 is
// NaN (two codes), max finite 1.75 * 2^8 = 448, min normal 2^-6, min subnormal 2^-9.
TEST(Cli, DescribeJsonOfE4M3HoldsItsEncodingAsNumbers) {
    const ordered_json j = parsed_json(kPlugins + "describe e4m3 --json");
    EXPECT_EQ(keys_of(j), (keys{"name", "aliases", "kind", "version", "abi_version", "description", "library",
                                "parameters", "format"}));
    EXPECT_EQ(j["name"], "e4m3");
    EXPECT_EQ(j["kind"], "format");
    EXPECT_TRUE(j["parameters"].is_array());
    const ordered_json& f = j["format"];
    EXPECT_EQ(keys_of(f), (keys{"total_bits", "code_bytes", "exponent_bits", "mantissa_bits", "bias",
                                "signed", "zero", "subnormals", "inf", "nan_codes", "max_finite",
                                "lowest_finite", "min_normal", "min_subnormal"}));
    EXPECT_EQ(f["total_bits"], 8);
    EXPECT_EQ(f["code_bytes"], 1);
    EXPECT_EQ(f["exponent_bits"], 4);
    EXPECT_EQ(f["mantissa_bits"], 3);
    EXPECT_EQ(f["bias"], 7);
    EXPECT_EQ(f["signed"], true);
    EXPECT_EQ(f["zero"], "signed");  // ALTGRAD_ZERO_SIGNED: +0 and -0
    EXPECT_EQ(f["subnormals"], true);
    EXPECT_EQ(f["inf"], false);
    EXPECT_EQ(f["nan_codes"], 2);
    ASSERT_TRUE(f["max_finite"].is_number()) << f.dump();
    EXPECT_EQ(f["max_finite"].get<double>(), 448.0);
    EXPECT_EQ(f["lowest_finite"].get<double>(), -448.0);
    EXPECT_EQ(f["min_normal"].get<double>(), std::ldexp(1.0, -6));
    EXPECT_EQ(f["min_subnormal"].get<double>(), std::ldexp(1.0, -9));
}

// A diagnostic's describe shows what a report draws for it (ABI 1.3
// headlines): stiffness's one figure, in text and JSON.
TEST(Cli, DescribeOfADiagnosticShowsItsHeadlines) {
    const ordered_json j = parsed_json(kPlugins + "describe stiffness --json");
    EXPECT_EQ(keys_of(j), (keys{"name", "aliases", "kind", "version", "abi_version", "description", "library",
                                "parameters", "headlines"}));
    EXPECT_EQ(j["abi_version"], "1.3");
    ASSERT_EQ(j["headlines"].size(), 1u) << j.dump();
    const ordered_json& h = j["headlines"][0];
    EXPECT_EQ(keys_of(h), (keys{"value", "series", "title", "label", "unit", "summary", "log_scale"}));
    EXPECT_EQ(h["value"], "stiffness_mean");
    EXPECT_EQ(h["series"], "stiffness");
    EXPECT_EQ(h["title"], "Stiffness (mean S = 2^(floor(log2|w|) - M))");
    EXPECT_EQ(h["label"], "mean stiffness");
    EXPECT_EQ(h["unit"], "");
    EXPECT_EQ(h["summary"], "mean");
    EXPECT_EQ(h["log_scale"], true);
    const run_result r = run_host(kPlugins + "describe stiffness");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("\nheadline        stiffness: the mean over tensors of stiffness_mean\n"
                         "  title         Stiffness (mean S = 2^(floor(log2|w|) - M))\n"
                         "  axis          mean stiffness, log scale\n"),
              std::string::npos)
        << r.out;
    // A format has no headlines.
    EXPECT_FALSE(parsed_json(kPlugins + "describe e4m3 --json").contains("headlines"));
}

TEST(Cli, DescribeJsonTableHasEveryCodeAndNaNAsNull) {
    const ordered_json j = parsed_json(kPlugins + "describe e4m3 --table --json");
    const ordered_json& codes = j["codes"];
    ASSERT_EQ(codes.size(), 256u);
    EXPECT_EQ(keys_of(codes[0]), (keys{"code", "value", "hex"}));
    // 0x01: the smallest subnormal, 2^-3 * 2^(1-7); 0x7e: 0.1111.110 = 1.75 * 2^8; 0x7f: NaN.
    EXPECT_EQ(codes[0x01]["code"], 1);
    EXPECT_EQ(codes[0x01]["value"].get<double>(), std::ldexp(1.0, -9));
    EXPECT_EQ(codes[0x01]["hex"], "0x1p-9");
    EXPECT_EQ(codes[0x7e]["value"].get<double>(), 448.0);
    EXPECT_EQ(codes[0xfe]["value"].get<double>(), -448.0);
    EXPECT_TRUE(codes[0x7f]["value"].is_null()) << codes[0x7f].dump();  // JSON has no NaN
    EXPECT_EQ(codes[0x7f]["hex"], "nan");
}

TEST(Cli, ConformanceJsonParsesWithEveryResult) {
    const ordered_json j = parsed_json(kPlugins + "conformance --seed 7 --only 'quantize.*' e4m3 --json");
    EXPECT_EQ(keys_of(j), (keys{"seed", "plugins", "failed"}));
    EXPECT_EQ(j["seed"], 7);
    EXPECT_EQ(j["failed"], false);
    ASSERT_EQ(j["plugins"].size(), 1u);
    const ordered_json& p = j["plugins"][0];
    EXPECT_EQ(keys_of(p), (keys{"plugin", "manifest", "params", "results"}));
    EXPECT_EQ(p["plugin"], "e4m3");
    EXPECT_TRUE(p["params"].is_object() && p["params"].empty()) << p["params"].dump();
    ASSERT_FALSE(p["results"].empty());
    for (const ordered_json& x : p["results"]) {
        EXPECT_EQ(keys_of(x), (keys{"check", "status", "reason", "input", "hint", "seconds"}));
        EXPECT_EQ(x["check"].get<std::string>().rfind("quantize.", 0), 0u) << x.dump();
        EXPECT_TRUE(x["status"] == "passed" || x["status"] == "skipped") << x.dump();
        EXPECT_TRUE(x["seconds"].is_number()) << x.dump();
    }
}

// Shortest round-trip decimals (describe's parameter defaults and bounds):
// 0.1 needs one digit where %.17g writes 0.10000000000000001; 0.1 + 0.2 needs
// all 17 (Python's repr, also shortest round-trip, gives the same strings).
TEST(ShortestDecimal, ReadsBackExactlyWithFewestDigits) {
    EXPECT_EQ(host::shortest_decimal(0.1), "0.1");
    EXPECT_EQ(host::shortest_decimal(57344), "57344");
    EXPECT_EQ(host::shortest_decimal(1000), "1000");  // %.1g reads back too, as "1e+03"
    EXPECT_EQ(host::shortest_decimal(1e300), "1e+300");
    EXPECT_EQ(host::shortest_decimal(std::ldexp(1.0, -9)), "0.001953125");
    EXPECT_EQ(host::shortest_decimal(1e-7), "1e-07");
    EXPECT_EQ(host::shortest_decimal(1.0 / 3), "0.3333333333333333");
    EXPECT_EQ(host::shortest_decimal(0.1 + 0.2), "0.30000000000000004");
    EXPECT_EQ(host::shortest_decimal(-0.0), "-0");
    EXPECT_EQ(host::shortest_decimal(std::nan("")), "nan");
    EXPECT_EQ(host::shortest_decimal(-INFINITY), "-inf");
}

// The documented choices of json_output: NaN and infinities as null, bytes
// that are not UTF-8 as U+FFFD (EF BF BD), two-space indent, a final newline.
TEST(JsonOutput, NonFiniteIsNullAndBadUtf8IsReplaced) {
    const ordered_json j{
        {"nan", std::nan("")}, {"inf", INFINITY}, {"half", 0.5}, {"text", std::string("a\xff\"")}};
    EXPECT_EQ(
        host::json_output(j),
        "{\n  \"nan\": null,\n  \"inf\": null,\n  \"half\": 0.5,\n  \"text\": \"a\xef\xbf\xbd\\\"\"\n}\n");
}

TEST(Cli, QuantizePrintsHexFloats) {
    // E5M2 facts: 1.1 -> 1; 61440 is the tie above max 57344 = 0x1.cp+15 and
    // rounds to the even 2^16, i.e. overflows, so saturates; 0.75 is exact;
    // 1e-7 is below half the smallest subnormal 2^-16.
    const run_result r = run_host(kPlugins + "quantize e5m2", "1.1 61440 0x1.8p-1\nnan -inf 1e-7 -1e-7");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(r.out, "0x1p+0\n0x1.cp+15\n0x1.8p-1\nnan\n-0x1.cp+15\n0x0p+0\n-0x0p+0\n");
}

TEST(Cli, QuantizeModesAndScale) {
    // Non-finite overflow: E5M2 has Inf.
    EXPECT_EQ(run_host(kPlugins + "quantize e5m2 --overflow nonfinite", "61440 -1e6").out, "inf\n-inf\n");
    // E7M0 toward zero: 3 -> 2; nearest: 3 is a tie between 2 (code 0x41) and 4 (0x42, even).
    EXPECT_EQ(run_host(kPlugins + "quantize e7m0 --rounding toward-zero", "3").out, "0x1p+1\n");
    EXPECT_EQ(run_host(kPlugins + "quantize e7m0", "3").out, "0x1p+2\n");
    // Scale 0.5: 464 * 0.5 = 232 is a tie in E4M3 between 224 (mantissa 110) and 240; 224 / 0.5 = 448.
    EXPECT_EQ(run_host(kPlugins + "quantize e4m3 --scale 0.5", "464").out, "0x1.cp+8\n");
    // E0M7: two's complement, so -1 is representable and +1 saturates to 127/128.
    EXPECT_EQ(run_host(kPlugins + "quantize e0m7", "-1 1").out, "-0x1p+0\n0x1.fcp-1\n");
}

TEST(Cli, QuantizeStochasticIsReproducibleFromTheSeed) {
    const std::string input = "0.3 0.3 0.3 0.3 0.3 0.3 0.3 0.3 0.3 0.3 0.3 0.3 0.3 0.3 0.3 0.3";
    const run_result a = run_host(kPlugins + "quantize e1m6 --rounding stochastic --seed 7", input);
    const run_result b = run_host(kPlugins + "quantize e1m6 --rounding stochastic --seed 7", input);
    ASSERT_EQ(a.exit_code, 0) << a.out;
    EXPECT_EQ(a.out, b.out);
    // 0.3 lies between 19/64 and 20/64: only those two may come out.
    for (size_t pos = 0; pos < a.out.size();) {
        const size_t end = a.out.find('\n', pos);
        const std::string line = a.out.substr(pos, end - pos);
        EXPECT_TRUE(line == "0x1.3p-2" || line == "0x1.4p-2") << line;
        pos = end + 1;
    }
}

// Block scaling as the trainer does it (quant::quantize_blocked), worked by hand: E2M1 (max 6,
// emax 2; values 0 0.5 1 1.5 2 3 4 6), MX's floor rule X = 2^(floor(log2 amax) - 2) on E8M0 scales.
// The scale rule issue #45 added through the table (quant/vocabulary.hpp): X = a / 6 to the nearest
// power of two, ties up. {8.4 1}: 1.4 -> X = 1, so 8.4 saturates to 6 (the rule may clip).
// {9 1}: 1.5 is a tie -> X = 2: 4.5 -> 4 (E2M1's tie to even), times 2 = 8; 0.5 -> 0.5, times 2 = 1.
TEST(Cli, QuantizeWithTheNearestScaleRule) {
    const run_result r =
        run_host(kPlugins + "quantize fp4_e2m1 --block-size 2 --scale-rule nearest --counts", "8.4 1 9 1");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(r.out,
              "0x1.8p+2\n0x1p+0\n0x1p+3\n0x1p+0\noverflow 1 underflow 0 of 4\n"
              "blocks 2 saturated 0 underflowed 0 neutral 0\n");
    // The help lists the rules from the table.
    EXPECT_NE(run_host("quantize --help").out.find("mx_floor | round_up | two_level | nearest:"),
              std::string::npos);
}

TEST(Cli, QuantizeInBlocksOfOneRowAndInTiles) {
    const std::string mx = kPlugins + "quantize fp4_e2m1 --scale-format ue8m0 --scale-rule mx_floor ";
    // One row, blocks of 4. {7 1 0.3 0}: amax 7, X = 1: 7 saturates to 6, 0.3 -> 0.5 (above 0.25).
    // {0.1 0.2 -0.05 0}: amax 0.2 = 1.6 * 2^-3, X = 2^-5: 3.2 -> 3, 6.4 -> 6, -1.6 -> -1.5, over 32.
    const run_result blocks = run_host(mx + "--block-size 4 --counts", "7 1 0.3 0 0.1 0.2 -0.05 0");
    ASSERT_EQ(blocks.exit_code, 0) << blocks.out;
    EXPECT_EQ(blocks.out,
              "0x1.8p+2\n0x1p+0\n0x1p-1\n0x0p+0\n0x1.8p-4\n0x1.8p-3\n-0x1.8p-5\n0x0p+0\n"
              "overflow 1 underflow 0 of 8\nblocks 2 saturated 0 underflowed 0 neutral 0\n");
    // Rows of 4 (--cols), tiles of 2 x 2: the tile {7 1 / 0.3 0} has amax 7, so 0.3 -> 0.5 (in a
    // 1 x 2 block {0.3 0} it would be X = 2^-4: 4.8 -> 4, 0.25); {0.1 0.2 / -0.05 0}: X = 2^-5.
    const std::string tiles_out = "0x1.8p+2\n0x1p+0\n0x1.8p-4\n0x1.8p-3\n0x1p-1\n0x0p+0\n-0x1.8p-5\n0x0p+0\n";
    const run_result tiles =
        run_host(mx + "--block-size 2 --block-rows 2 --cols 4", "7 1 0.1 0.2 0.3 0 -0.05 0");
    ASSERT_EQ(tiles.exit_code, 0) << tiles.out;
    EXPECT_EQ(tiles.out, tiles_out);
    EXPECT_EQ(run_host(mx + "--block-size 2 --cols 4", "7 1 0.1 0.2 0.3 0 -0.05 0").out,
              "0x1.8p+2\n0x1p+0\n0x1.8p-4\n0x1.8p-3\n0x1p-2\n0x0p+0\n-0x1.8p-5\n0x0p+0\n");
    // A 2-D .npy: its rows are the tensor's rows.
    scratch_dir dir;
    const fs::path npy = dir.path() / "x.npy";
    {
        std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }";
        header.append(128 - 10 - header.size() - 1, ' ');  // magic, version, length: 10 bytes; 128 in all
        header += '\n';
        std::ofstream out(npy, std::ios::binary);
        out << "\x93NUMPY" << '\x01' << '\x00' << static_cast<char>(header.size()) << '\x00' << header;
        for (const float v : {7.0f, 1.0f, 0.1f, 0.2f, 0.3f, 0.0f, -0.05f, 0.0f})
            out.write(reinterpret_cast<const char*>(&v), sizeof v);
    }
    EXPECT_EQ(run_host(mx + "--block-size 2 --block-rows 2 --input " + npy.string()).out, tiles_out);
    // pre-scale 3/4 multiplies the scale: 7 * 0.75 = 5.25 -> 6, / 0.75 = 8; 2 * 0.75 = 1.5 exactly.
    EXPECT_EQ(run_host(mx + "--block-size 4 --pre-scale 0.75", "7 2 0 0").out,
              "0x1p+3\n0x1p+1\n0x0p+0\n0x0p+0\n");
    // NVFP4's two levels, E4M3 block scales: A = 1536 gives g = 448 * 6 / A = 1.75; the block {1536 6}
    // has X = 1536 / 6 * g = 448, s = g / X = 2^-8, where 6 / 256 is below E2M1's 0.25: 0; {6 3} has
    // X = 6 / 6 * g = 1.75 (an E4M3 value), s = 1.
    EXPECT_EQ(
        run_host(kPlugins + "quantize fp4_e2m1 --scale-rule two_level --scale-format e4m3 --block-size 2",
                 "1536 6 6 3")
            .out,
        "0x1.8p+10\n0x0p+0\n0x1.8p+2\n0x1.8p+1\n");
}

TEST(Cli, QuantizeInBlocksRefusesBadOptions) {
    const std::string q = kPlugins + "quantize fp4_e2m1 ";
    const auto expect_error = [&](const std::string& options, int code, const std::string& message) {
        const run_result r = run_host(q + options, "1 2 3 4 5 6 7 8");
        EXPECT_EQ(r.exit_code, code) << options << "\n" << r.out;
        EXPECT_NE(r.out.find(message), std::string::npos) << options << "\n" << r.out;
        EXPECT_EQ(count_lines(r.out), code == 1 ? 1u : count_lines(r.out)) << r.out;
    };
    expect_error("--block-size 0", 2, "quantize: --block-size 0: expected at least 1");
    expect_error("--block-size 4 --block-rows 0", 2, "quantize: --block-rows 0: expected at least 1");
    expect_error("--block-rows 2", 2, "quantize: --block-rows needs --block-size");
    expect_error("--cols 4", 2, "quantize: --cols needs --block-size");
    expect_error("--block-size 4 --scale 2", 2, "quantize: --scale and --block-size");
    expect_error("--block-size 4 --scale-rule floor", 2,
                 "quantize: --scale-rule \"floor\": expected one of mx_floor, round_up, two_level, nearest");
    expect_error("--block-size 4 --pre-scale 0", 2,
                 "quantize: --pre-scale \"0\": expected a finite number > 0");
    expect_error("--block-size 4 --cols 3", 1,
                 "quantize: --cols 3 does not divide the input's 8 values into rows");
    expect_error("--block-size 4 --block-rows 2", 1,
                 "quantize: tiles of 2x4 do not divide a tensor of [1, 8] (rows by row length)");
    expect_error("--block-size 4 --block-rows 3 --cols 4", 1,
                 "quantize: tiles of 3x4 do not divide a tensor of [2, 4] (rows by row length)");
    expect_error("--block-size 4 --scale-format e9m9", 1,
                 "quantize: --scale-format \"e9m9\": no format plugin named 'e9m9'");
    expect_error("--block-size 4 --scale-format fp32x", 1, "quantize: --scale-format \"fp32x\"");
}

TEST(Cli, UnparsableInputIsAnErrorNamingTheToken) {
    const run_result r = run_host(kPlugins + "quantize e5m2", "1.0 abc 2.0");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find("token 2 \"abc\" is not a number"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("0x1p+0"), std::string::npos) << "nothing printed before the error: " << r.out;
}

TEST(Cli, UnknownFormatListsTheKnownOnes) {
    const run_result r = run_host(kPlugins + "quantize e2m5", "1");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find("no format plugin named 'e2m5'"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("e3m4"), std::string::npos) << r.out;
}

TEST(Cli, UsageErrorsExitTwo) {
    EXPECT_EQ(run_host(kPlugins + "quantize e5m2 --rounding up", "1").exit_code, 2);
    EXPECT_EQ(run_host(kPlugins + "quantize e5m2 --scale 0", "1").exit_code, 2);
    EXPECT_EQ(run_host(kPlugins + "quantize e5m2 --bogus", "1").exit_code, 2);
    EXPECT_EQ(run_host(kPlugins + "frobnicate").exit_code, 2);
    EXPECT_EQ(run_host(kPlugins + "quantize e5m2 --param bits", "1").exit_code, 2);
}

TEST(Cli, MissingPluginFolder) {
    const run_result r = run_host("--plugins /nonexistent/dir list");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find("--plugins /nonexistent/dir: not a folder"), std::string::npos) << r.out;
}

// `list`, `describe` and `conformance` over a folder of libraries that crash,
// hang or exit while loading: each command says what happened to each, and
// the good plugin beside them works.
TEST(Cli, ListSurvivesLibrariesThatCrashHangOrExitWhileLoading) {
    scratch_dir dir;
    const auto expected = add_plugins_that_die_loading(dir);
    const run_result r = run_host("--plugins " + dir.path().string() + " list");
    EXPECT_EQ(r.exit_code, 0) << r.out;
    for (const auto& [name, reason] : expected) {
        const size_t line = r.out.find(" " + name + " ");
        ASSERT_NE(line, std::string::npos) << name << "\n" << r.out;
        const std::string text = r.out.substr(line, r.out.find('\n', line) - line);
        EXPECT_NE(text.find("broken: plugin '" + name + "'"), std::string::npos) << text;
        EXPECT_NE(text.find(reason), std::string::npos) << text;
    }
    EXPECT_NE(r.out.find(" e4m3 "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("6 of 7 plugins are broken"), std::string::npos) << r.out;
}

TEST(Cli, DescribeAndConformanceSurviveALibraryThatCrashesWhileLoading) {
    scratch_dir dir;
    add_plugins_that_die_loading(dir);
    const std::string plugins = "--plugins " + dir.path().string();
    const run_result crash = run_host(plugins + " describe broken_load_segv");
    EXPECT_EQ(crash.exit_code, 1) << crash.out;
    EXPECT_NE(crash.out.find(
                  "altgrad-host: error: plugin 'broken_load_segv' is broken: plugin 'broken_load_segv' ("),
              std::string::npos)
        << crash.out;
    EXPECT_NE(crash.out.find("signal 11 (Segmentation fault)"), std::string::npos) << crash.out;
    EXPECT_EQ(count_lines(crash.out), 1u) << crash.out;
    EXPECT_EQ(run_host(plugins + " describe e4m3").exit_code, 0);

    const run_result kit = run_host(plugins + " conformance --brief --only load.library --timeout 2");
    EXPECT_EQ(kit.exit_code, 1) << kit.out;  // the broken ones fail; the kit goes on to the end
    for (const char* name : {"broken_load_segv", "broken_entry_abort", "broken_entry_loop",
                             "broken_entry_exit", "broken_entry_data", "truncated", "e4m3"})
        EXPECT_NE(kit.out.find(name), std::string::npos) << name << "\n" << kit.out;
}

TEST(Cli, BrokenPluginIsAnErrorWithItsReason) {
    scratch_dir dir;
    dir.add_plugin("f", format_manifest("abi_future", "libaltgrad_abi_future.so"),
                   kTestPlugins / "abi_future" / "libaltgrad_abi_future.so");
    const run_result r = run_host("--plugins " + dir.path().string() + " quantize abi_future", "1");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find("plugin 'abi_future' is broken"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("ABI 1.99"), std::string::npos) << r.out;
}

TEST(Cli, DescribeShowsTheEncoding) {
    const run_result r = run_host(kPlugins + "describe e4m3");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("max finite      0x1.cp+8 (448)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("min normal      0x1p-6 (0.015625)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("min subnormal   0x1p-9 (0.001953125)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("infinities      none"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("NaN codes       2 (canonical 0x7f)"), std::string::npos) << r.out;
}

TEST(Cli, DescribeTableListsEveryCode) {
    const run_result r = run_host(kPlugins + "describe e0m7 --table");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("0x80    10000000  -0x1p+0 (-1)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("0x7f    01111111  0x1.fcp-1 (0.9921875)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("0xff    11111111  -0x1p-7 (-0.0078125)"), std::string::npos) << r.out;
    const run_result e5 = run_host(kPlugins + "describe e5m2 --table");
    EXPECT_NE(e5.out.find("0x7c    01111100  inf"), std::string::npos) << e5.out;
    EXPECT_NE(e5.out.find("0x7b    01111011  0x1.cp+15 (57344)"), std::string::npos) << e5.out;
    EXPECT_NE(e5.out.find("0x01    00000001  0x1p-16"), std::string::npos) << e5.out;
    EXPECT_EQ(run_host(kPlugins + "describe fp32 --table").exit_code, 2);
}

TEST(Cli, HelpOnEverySubcommand) {
    std::vector<const char*> commands = {"list",        "describe", "quantize",  "gemm",
                                         "conformance", "report",   "new-plugin"};
#ifndef ALTGRAD_HOST_WITHOUT_TRAINER
    commands.push_back("run");
    commands.push_back("sweep");
#endif
    for (const char* cmd : commands) {
        SCOPED_TRACE(cmd);
        const run_result r = run_host(std::string(cmd) + " --help");
        EXPECT_EQ(r.exit_code, 0) << r.out;
        EXPECT_EQ(r.out.rfind("usage: altgrad-host ", 0), 0u) << r.out;
        EXPECT_NE(r.out.find(std::string(" ") + cmd + " "), std::string::npos) << r.out;
        // An example command line, then the exit codes, last.
        const size_t example = r.out.find("\nexample:\n  "), codes = r.out.find("\nexit codes:\n");
        ASSERT_NE(example, std::string::npos) << r.out;
        ASSERT_NE(codes, std::string::npos) << r.out;
        EXPECT_LT(example, codes);
        const std::string example_line =
            r.out.substr(example + 12, r.out.find('\n', example + 12) - example - 12);
        EXPECT_NE((example_line + " ").find(" " + std::string(cmd) + " "), std::string::npos) << example_line;
        EXPECT_NE(example_line.find("altgrad-host "), std::string::npos) << example_line;
        EXPECT_NE(r.out.find("  0  ", codes), std::string::npos) << r.out;
        EXPECT_NE(r.out.find("  2  a wrong command line\n", codes), std::string::npos) << r.out;
        // The positional arguments are named in the usage line, not listed as internal options.
        for (const char* internal : {"--name", "--config ", "--run ", "--plugin "})
            EXPECT_EQ(r.out.find(internal), std::string::npos) << internal << " in:\n" << r.out;
    }
#ifndef ALTGRAD_HOST_WITHOUT_TRAINER
    // The run's own exit code, 3, is said where it can happen.
    EXPECT_NE(run_host("run --help").out.find("  3  the run stopped early"), std::string::npos);
#endif
}

TEST(Cli, AMissingNameIsSaidInUserTerms) {
    for (const char* cmd : {"quantize", "describe"}) {
        const run_result r = run_host(kPlugins + cmd, "1");
        EXPECT_EQ(r.exit_code, 2) << r.out;
        EXPECT_NE(r.out.find(std::string(cmd) + ": which "), std::string::npos) << r.out;
        EXPECT_NE(r.out.find("list' shows them"), std::string::npos) << r.out;
        EXPECT_EQ(r.out.find("--name"), std::string::npos) << r.out;
    }
}

TEST(Cli, QuantizeModeNamesComeFromTheOneTable) {
    const run_result r = run_host(kPlugins + "quantize e5m2 --rounding up", "1");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.out.find("quantize: --rounding \"up\": expected one of nearest, stochastic, toward-zero"),
              std::string::npos)
        << r.out;
    EXPECT_NE(run_host(kPlugins + "quantize e5m2 --overflow wrap", "1")
                  .out.find("--overflow \"wrap\": expected one of saturate, nonfinite"),
              std::string::npos);
}

TEST(Cli, ListColumnsStayAlignedForLongNames) {
    scratch_dir dir;
    const std::string long_name = "a_plugin_with_a_name_much_longer_than_sixteen_characters";
    dir.add_plugin("e5m2", format_manifest("e5m2", "libaltgrad_e5m2.so"), bundled_library("e5m2"));
    dir.add_plugin(long_name, format_manifest(long_name, "libaltgrad_e5m2.so", "10.200.3000"),
                   bundled_library("e5m2"));
    const run_result r = run_host("--plugins " + dir.path().string() + " list");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    std::vector<std::string> lines;
    for (size_t pos = 0; pos < r.out.size();) {
        const size_t end = r.out.find('\n', pos);
        lines.push_back(r.out.substr(pos, end - pos));
        pos = end + 1;
    }
    ASSERT_GE(lines.size(), 3u) << r.out;
    const size_t name_at = lines[0].find("NAME"), version_at = lines[0].find("VERSION"),
                 status_at = lines[0].find("STATUS");
    ASSERT_NE(status_at, std::string::npos) << r.out;
    size_t rows = 0;
    for (size_t i = 1; i < lines.size(); ++i) {
        if (lines[i].rfind("format", 0) != 0) continue;  // the broken-plugin note, if any
        ++rows;
        // Every column starts where its heading does, after at least one space.
        const std::string name = lines[i].substr(name_at, lines[i].find(' ', name_at) - name_at);
        EXPECT_TRUE(name == "e5m2" || name == long_name) << lines[i];
        EXPECT_EQ(lines[i][version_at - 1], ' ') << lines[i];
        EXPECT_TRUE(lines[i].compare(version_at, 5, "1.0.0") == 0 ||
                    lines[i].compare(version_at, 11, "10.200.3000") == 0)
            << lines[i];
        EXPECT_EQ(lines[i][status_at - 1], ' ') << lines[i];
        EXPECT_TRUE(lines[i].compare(status_at, 2, "ok") == 0 ||
                    lines[i].compare(status_at, 6, "broken") == 0)
            << lines[i];
    }
    EXPECT_EQ(rows, 2u) << r.out;
}

// strtof stops at a NUL byte: "1<NUL>2" used to pass as 1, silently dropping
// the rest of the token. The whole token must be a number.
TEST(Cli, AnEmbeddedNulByteIsNotPartOfANumber) {
    const run_result r = run_host(kPlugins + "quantize e5m2", std::string("1\0"
                                                                          "2 3",
                                                                          5));
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_EQ(r.out,
              "altgrad-host: error: quantize: standard input: token 1 \"1\\u00002\" is not a number "
              "(decimal, hex-float, nan or inf)\n");
}

// conformance --param: checked against each plugin's manifest before any
// check runs (else every check of a plugin refusing them would skip), and
// only for format plugins.
TEST(Cli, ConformanceParamsAreCheckedFirst) {
    const run_result unknown = run_host(kPlugins + "conformance --param bits=4 e5m2");
    EXPECT_EQ(unknown.exit_code, 1) << unknown.out;
    EXPECT_NE(unknown.out.find("conformance --param: plugin 'e5m2': unknown parameter 'bits'"),
              std::string::npos)
        << unknown.out;
    const run_result diagnostic = run_host(kPlugins + "conformance --param bits=4 kurtosis");
    EXPECT_EQ(diagnostic.exit_code, 2) << diagnostic.out;
    EXPECT_NE(
        diagnostic.out.find(
            "conformance: --param is for format, transform and accumulator plugins, and 'kurtosis' is a "
            "diagnostic"),
        std::string::npos)
        << diagnostic.out;
    const run_result malformed = run_host(kPlugins + "conformance --param bits e5m2");
    EXPECT_EQ(malformed.exit_code, 2) << malformed.out;
}

// float and int: a parameter the manifest refuses, or a combination that is
// no float32 format, is one line naming the plugin and the parameters, exit 1;
// the defaults are OCP E5M2 and symmetric INT8.
TEST(Cli, FloatAndIntParameters) {
    const std::vector<std::pair<std::string, std::string>> refused = {
        {"quantize float --param mantissa_bits=40",
         "altgrad-host: error: --param: plugin 'float': parameter 'mantissa_bits' = \"40\": out of range"},
        {"quantize float --param specials=fnuz --param signed=false",
         "altgrad-host: error: plugin 'float': create failed (invalid argument): specials=fnuz needs "
         "signed=true: fnuz's NaN is the code of -0, which has a sign bit\n"},
        {"quantize float --param exponent_bits=8 --param bias=0",
         "altgrad-host: error: plugin 'float': create failed (invalid argument): max finite exceeds "
         "float32's "
         "range (exponent_bits=8 mantissa_bits=2 bias=0 subnormals=true specials=ieee signed=true)\n"},
        {"quantize int --param bits=1",
         "altgrad-host: error: --param: plugin 'int': parameter 'bits' = \"1\""},
    };
    for (const auto& [args, want] : refused) {
        const run_result r = run_host(kPlugins + args, "1");
        EXPECT_EQ(r.exit_code, 1) << args << "\n" << r.out;
        EXPECT_EQ(r.out.rfind(want, 0), 0u) << args << "\n" << r.out;
        EXPECT_EQ(count_lines(r.out), 1u) << args << "\n" << r.out;
    }
    const run_result e5m2 = run_host(kPlugins + "describe float");
    EXPECT_NE(e5m2.out.find("bits            8 (exponent 5, mantissa 2, bias 15, signed)"), std::string::npos)
        << e5m2.out;
    EXPECT_NE(e5m2.out.find("max finite      0x1.cp+15 (57344)"), std::string::npos) << e5m2.out;
    const run_result int8 = run_host(kPlugins + "describe int");
    EXPECT_NE(int8.out.find("lowest finite   -0x1.fcp+6 (-127)"), std::string::npos) << int8.out;
    EXPECT_NE(int8.out.find("NaN codes       1 (canonical 0x80)"), std::string::npos) << int8.out;
}

// Program_Options read "-1" into a uint64_t as 2^64-1; so did it 2^64.
// --sr-bits 1: 0.3 lies at f = 0.2 of the step from 19/64 to 20/64 in E1M6,
// and floor(0.2 * 2^1) = 0, so with one random bit it never rounds up.
TEST(Cli, QuantizeWithOneRandomBitNeverRoundsUpBelowHalfAStep) {
    const std::string input = "0.3 0.3 0.3 0.3 0.3 0.3 0.3 0.3 0.3 0.3 0.3 0.3 0.3 0.3 0.3 0.3";
    const run_result r =
        run_host(kPlugins + "quantize e1m6 --rounding stochastic --seed 7 --sr-bits 1", input);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    std::string want;
    for (int i = 0; i < 16; ++i) want += "0x1.3p-2\n";
    EXPECT_EQ(r.out, want);
    // 0.4 lies at f = 0.6 of the step from 25/64 to 26/64: 0.5 of the time up, never always.
    const run_result half = run_host(kPlugins + "quantize e1m6 --rounding stochastic --sr-bits 1 --seed 7",
                                     "0.4 0.4 0.4 0.4 0.4 0.4 0.4 0.4 0.4 0.4 0.4 0.4 0.4 0.4 0.4 0.4");
    ASSERT_EQ(half.exit_code, 0) << half.out;
    EXPECT_NE(half.out.find("0x1.9p-2"), std::string::npos) << half.out;
    EXPECT_NE(half.out.find("0x1.ap-2"), std::string::npos) << half.out;
    for (const char* bad : {"0", "33", "-1", "8.5", ""}) {
        SCOPED_TRACE(bad);
        const run_result e =
            run_host(kPlugins + "quantize e1m6 --rounding stochastic --sr-bits '" + bad + "'", "0.3");
        EXPECT_EQ(e.exit_code, 2) << e.out;
        EXPECT_EQ(e.out, "altgrad-host: quantize: --sr-bits \"" + std::string(bad) +
                             "\": expected an integer 1 .. 32 (see altgrad-host --help)\n");
    }
}

TEST(Cli, SeedsAndOffsetsAreUnsignedIntegers) {
    const std::string q = kPlugins + "quantize e1m6 --rounding stochastic ";
    for (const char* option : {"--seed", "--offset"})
        for (const char* bad : {"-1", "-5", "18446744073709551616", "1e3", "+1", "0x10", ""}) {
            SCOPED_TRACE(std::string(option) + " '" + bad + "'");
            const run_result r = run_host(q + option + " '" + bad + "'", "0.3");
            EXPECT_EQ(r.exit_code, 2) << r.out;
            EXPECT_EQ(r.out,
                      "altgrad-host: quantize: " + std::string(option) + " \"" + bad +
                          "\": expected an integer 0 .. 18446744073709551615 (see altgrad-host --help)\n");
        }
    // The largest is accepted, and is not the same stream as 0.
    const run_result top = run_host(q + "--seed 18446744073709551615 --offset 18446744073709551615", "0.3");
    EXPECT_EQ(top.exit_code, 0) << top.out;
    const run_result c = run_host(kPlugins + "conformance --seed -1 e5m2");
    EXPECT_EQ(c.exit_code, 2) << c.out;
    EXPECT_NE(c.out.find("conformance: --seed \"-1\": expected an integer"), std::string::npos) << c.out;
}

// Output that cannot be written (a full disk) is an error, exit 1, one line:
// it used to exit 0 with the output lost. The reason is known when the last
// flush failed; a longer output fails earlier, and errno is not kept.
TEST(Cli, AnUnwritableStandardOutputIsAnError) {
    const std::string full = "altgrad-host: error: standard output: write failed";
    std::string many;  // more than stdio's buffer, so writes fail before the end too
    for (int i = 0; i < 20000; ++i) many += "0.1 ";
    const std::vector<std::pair<std::string, std::string>> commands = {
        {kPlugins + "list", ""},
        {kPlugins + "list --json", ""},
        {kPlugins + "describe e4m3 --table", ""},
        {kPlugins + "describe e4m3 --json", ""},
        {kPlugins + "quantize e4m3", "0.1 2"},
        {kPlugins + "quantize e4m3", many},
        {"conformance --list-checks", ""},
        {kPlugins + "conformance --brief --only 'load.*' e4m3", ""},
        {"--version", ""},
        {"--help", ""},
        {"list --help", ""}};
    for (const auto& [args, input] : commands) {
        SCOPED_TRACE(args);
        const run_result r = run_host(args, input, "&1", "/dev/full");
        EXPECT_EQ(r.exit_code, 1);
        EXPECT_TRUE(r.out == full + "\n" || r.out == full + ": No space left on device\n") << r.out;
    }
    EXPECT_EQ(run_host("--version", "", "&1", "/dev/full").out, full + ": No space left on device\n");
    // A command that failed keeps its own exit code.
    EXPECT_EQ(run_host(kPlugins + "quantize e4m3 --rounding up", "1", "&1", "/dev/full").exit_code, 2);
}

// An unknown option before the command was skipped and its value taken for
// the command: "--plugns DIR list" said "unknown command 'DIR'".
TEST(Cli, AnUnknownGlobalOptionIsNamed) {
    run_result r = run_host("--plugns " + kBundled.string() + " list");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(
        r.out,
        "altgrad-host: unknown option '--plugns'; did you mean '--plugins'? (see altgrad-host --help)\n");
    r = run_host("--plugns=" + kBundled.string() + " list");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(
        r.out,
        "altgrad-host: unknown option '--plugns'; did you mean '--plugins'? (see altgrad-host --help)\n");
    r = run_host("--frobnicate " + kPlugins + "list");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.out, "altgrad-host: unknown option '--frobnicate' (see altgrad-host --help)\n");
    // Options after the command are the command's.
    r = run_host(kPlugins + "list --plugns");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.out.find("list: unrecognised option '--plugns'"), std::string::npos) << r.out;
}

// TOML++ parses a folder as an empty document, so a manifest.toml that is a
// folder was reported as "missing [plugin] table".
TEST(Cli, AManifestThatIsAFolderIsSaid) {
    scratch_dir dir;
    fs::create_directories(dir.path() / "odd" / "manifest.toml");
    const run_result r = run_host("--plugins " + dir.path().string() + " list");
    EXPECT_NE(r.out.find((dir.path() / "odd" / "manifest.toml").string() +
                         ": is a folder, expected a manifest file (TOML)"),
              std::string::npos)
        << r.out;
    EXPECT_EQ(r.out.find("[plugin]"), std::string::npos) << r.out;
}

// Every file the host reads whole has a size limit (util/file_text.hpp): a
// manifest, config or input that never ends (/dev/zero) is refused at once.
TEST(Cli, FilesThatNeverEndAreRefusedBySize) {
    scratch_dir dir;
    fs::create_directories(dir.path() / "zero");
    fs::create_symlink("/dev/zero", dir.path() / "zero" / "manifest.toml");
    run_result r = run_host("--plugins " + dir.path().string() + " list");
    EXPECT_NE(r.out.find("zero/manifest.toml: more than 1 MiB (a manifest is at most that)"),
              std::string::npos)
        << r.out;
#ifndef ALTGRAD_HOST_WITHOUT_TRAINER
    r = run_host(kPlugins + "run /dev/zero");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find("/dev/zero: more than 16 MiB (a config file is at most that)"), std::string::npos)
        << r.out;
#endif
    // Text input: a stream of NUL bytes is one endless token.
    r = run_host(kPlugins + "quantize e4m3 --input /dev/zero");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find("/dev/zero: token 1 is longer than 128 characters: not a number"), std::string::npos)
        << r.out;
}

// The limit is exact: a manifest of 1 MiB is read (and parsed), one byte more is not.
TEST(Cli, AManifestAtTheSizeLimitIsReadOneByteMoreIsNot) {
    scratch_dir dir;
    const std::string manifest = "[plugin]\nkind = \"format\"\nname = \"big\"\n";
    for (const size_t size : {size_t{1} << 20, (size_t{1} << 20) + 1}) {
        fs::remove_all(dir.path() / "big");
        fs::create_directories(dir.path() / "big");
        std::ofstream(dir.path() / "big" / "manifest.toml")
            << manifest << "#" << std::string(size - manifest.size() - 2, 'x') << "\n";
        ASSERT_EQ(fs::file_size(dir.path() / "big" / "manifest.toml"), size);
        const run_result r = run_host("--plugins " + dir.path().string() + " list");
        EXPECT_EQ(r.out.find("more than 1 MiB") != std::string::npos, size > (size_t{1} << 20))
            << size << r.out;
        EXPECT_NE(r.out.find("broken"), std::string::npos)
            << r.out;  // no version, library: parsed, then refused
    }
}

// Boost.Program_Options guesses abbreviations unless told not to: "gemm --m 16"
// was --mma-depth 16.
TEST(Cli, NoOptionIsAbbreviated) {
    run_result r = run_host(kPlugins + "gemm --m 16 --k 32 --accumulator fp16 --promote-every 0");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.out.find("gemm: unrecognised option '--m'"), std::string::npos) << r.out;
    r = run_host(kPlugins + "quantize e4m3 --round nearest", "1");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.out.find("quantize: unrecognised option '--round'"), std::string::npos) << r.out;
    r = run_host(kPlugins + "quantize e4m3 --rounding nearest", "1");  // the whole name still works
    EXPECT_EQ(r.exit_code, 0) << r.out;
}

}  // namespace
}  // namespace altgrad::test
