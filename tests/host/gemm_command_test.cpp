// altgrad-host gemm (docs/accumulation.md) as a user runs it: its lines, its table over K, the
// seed, the float32 accumulator's error by the definition, and a one-line usage error (exit 2)
// for every bad argument.
#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_support.hpp"

namespace altgrad::test {
namespace {

const std::string kGemm = "--plugins " + kBundled.string() + " gemm ";

size_t line_count(const std::string& s) { return static_cast<size_t>(std::count(s.begin(), s.end(), '\n')); }

// "max error        0.00012" -> {"max error", 0.00012}, for each line that ends in a number.
std::map<std::string, double> numbers_of(const std::string& out) {
    std::map<std::string, double> m;
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line)) {
        const size_t gap = line.find("  ");
        if (gap == std::string::npos || line.find("error") == std::string::npos) continue;
        m[line.substr(0, gap)] = std::strtod(line.substr(line.find_last_of(' ') + 1).c_str(), nullptr);
    }
    return m;
}

TEST(Gemm, PrintsTheAccumulatorTheProductAndThreeErrors) {
    const run_result r =
        run_host(kGemm + "--k 300 --rows 8 --cols 9 --accumulator fp16 --promote-every 64 --seed 3");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(r.out.rfind("accumulator      fp16, toward-zero, mma depth 32, promoted every 64\n"
                          "product          8 x 300 x 9 (M x K x N), normal inputs, seed 3\n",
                          0),
              0u)
        << r.out;
    const auto e = numbers_of(r.out);
    ASSERT_EQ(e.size(), 3u) << r.out;
    // fp16 keeps 11 bits: each element's error is some units of 2^-11 of its sum of magnitudes at most.
    EXPECT_GT(e.at("max error"), 0.0);
    EXPECT_LT(e.at("max error"), 0.01);
    EXPECT_LE(e.at("median error"), e.at("max error"));
    // The same seed prints the same; another seed other numbers.
    EXPECT_EQ(
        run_host(kGemm + "--k 300 --rows 8 --cols 9 --accumulator fp16 --promote-every 64 --seed 3").out,
        r.out);
    EXPECT_NE(
        run_host(kGemm + "--k 300 --rows 8 --cols 9 --accumulator fp16 --promote-every 64 --seed 4").out,
        r.out);
}

// A parameterised accumulator is named with its parameters, in key order: "float" alone is no format.
TEST(Gemm, NamesAParameterisedAccumulatorWithItsParameters) {
    const run_result r = run_host(kGemm +
                                  "--k 64 --rows 2 --cols 2 --accumulator float --param mantissa_bits=13 "
                                  "--param exponent_bits=8 --promote-every 0 --rounding nearest");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(
        r.out.rfind("accumulator      float (exponent_bits=8, mantissa_bits=13), nearest, mma depth 32, "
                    "never promoted\n",
                    0),
        0u)
        << r.out;
}

TEST(Gemm, CsvRowsAreThePlainRunsAtEachK) {
    // The inputs at a smaller K are the leading part of those at a larger one, so each row of the
    // table is what a plain run at that K prints.
    const std::string args = "--rows 6 --cols 5 --accumulator bf16 --promote-every 0 --rounding nearest ";
    const run_result table = run_host(kGemm + args + "--k 1000 --csv");
    ASSERT_EQ(table.exit_code, 0) << table.out;
    std::istringstream in(table.out);
    std::string line;
    std::getline(in, line);
    EXPECT_EQ(line, "k,max_error,median_error,normwise_error");
    std::vector<std::string> ks;
    while (std::getline(in, line)) {
        const std::string k = line.substr(0, line.find(','));
        ks.push_back(k);
        const run_result plain = run_host(kGemm + args + "--k " + k);
        const auto e = numbers_of(plain.out);
        std::ostringstream row;
        row << k;
        for (const char* name : {"max error", "median error", "norm-wise error"}) {
            const size_t at = plain.out.find(name);
            row << "," << plain.out.substr(at + 17, plain.out.find('\n', at) - at - 17);
        }
        EXPECT_EQ(line, row.str());
        EXPECT_EQ(e.size(), 3u);
    }
    EXPECT_EQ(ks, (std::vector<std::string>{"256", "512", "1000"}));
}

TEST(Gemm, Float32AccumulatorInOneChunkIsTheCorrectlyRoundedProduct) {
    // One chunk holding all of K (--mma-depth >= K) with fp32 and nearest: each element is the
    // exact dot product rounded once to float32, so its error against the float64 product is at
    // most 2^-24 |c| plus the float64 sum's own, K * 2^-53 of the sum of magnitudes.
    const run_result r = run_host(kGemm +
                                  "--k 512 --rows 16 --cols 16 --accumulator fp32 --promote-every 0 "
                                  "--rounding nearest --mma-depth 512 --distribution uniform");
    ASSERT_EQ(r.exit_code, 0) << r.out;
    const auto e = numbers_of(r.out);
    EXPECT_LE(e.at("max error"), 0x1p-24 + 512 * 0x1p-53) << r.out;
    // Chunks of 1 round 512 times: the errors grow past one rounding's.
    const run_result chunks = run_host(kGemm +
                                       "--k 512 --rows 16 --cols 16 --accumulator fp32 --promote-every 0 "
                                       "--rounding toward-zero --mma-depth 1 --distribution uniform");
    EXPECT_GT(numbers_of(chunks.out).at("max error"), 4 * 0x1p-24) << chunks.out;
}

TEST(Gemm, ThreadsDoNotChangeTheResult) {
    const std::string args = kGemm + "--k 700 --rows 37 --cols 20 --accumulator fp16 --promote-every 96 ";
    const std::string one = run_host(args + "--threads 1").out;
    EXPECT_EQ(run_host(args + "--threads 2").out, one);
    EXPECT_EQ(run_host(args + "--threads 5").out, one);
}

// Each (arguments, words): exit 2 and one line on stderr, "altgrad-host: gemm: ..." holding the words.
void expect_usage_errors(const std::vector<std::pair<std::string, std::string>>& cases) {
    for (const auto& [args, words] : cases) {
        SCOPED_TRACE(args);
        const run_result r = run_host(kGemm + args, "", "&1", "/dev/null");  // stderr only
        EXPECT_EQ(r.exit_code, 2) << r.out;
        EXPECT_EQ(line_count(r.out), 1u) << r.out;
        EXPECT_NE(r.out.find(words), std::string::npos) << r.out;
        EXPECT_EQ(r.out.rfind("altgrad-host: gemm: ", 0), 0u) << r.out;
    }
}

TEST(Gemm, EveryBadArgumentIsAOneLineUsageError) {
    const std::string ok = "--accumulator fp16 --promote-every 0 ";
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"--accumulator fp16 --promote-every 0", "--k is required"},
        {"--k 64 --promote-every 0", "--accumulator is required"},
        {"--k 64 --accumulator fp16", "--promote-every is required"},
        {ok + "--k 0", "--k 0: expected 1 .."},
        {ok + "--k 4x", "--k \"4x\""},
        {ok + "--k -5", "--k \"-5\""},
        {ok + "--k 64 --rows 0", "--rows 0"},
        {ok + "--k 64 --cols 70000", "--cols 70000"},
        {ok + "--k 16777216 --rows 65536", "an operand of more than"},
        {ok + "--k 64 --mma-depth 0", "--mma-depth 0"},
        {ok + "--k 64 --rounding stochastic", "expected nearest or toward-zero"},
        {ok + "--k 64 --rounding up", "--rounding \"up\""},
        {ok + "--k 64 --distribution cauchy", "expected one of normal, uniform, fp8-e4m3"},
        {ok + "--k 64 --seed x", "--seed \"x\""},
        {ok + "--k 64 --threads 5000", "--threads 5000"},
        {ok + "--k 64 --param bits", "expected KEY=VALUE"},
        {ok + "--k 64 --param bits=3", "--accumulator fp16: "},
        {ok + "--k 64 --bogus", "unrecognised option '--bogus'"},
        {"--k 64 --promote-every 0 --accumulator fp17", "--accumulator fp17: no format plugin named 'fp17'"},
        {"--k 64 --promote-every 0 --accumulator stiffness", "--accumulator stiffness:"},
        // A format nearest cannot be exact for: its float32 midpoints are odd.
        {"--k 64 --promote-every 0 --accumulator e0m7 --rounding nearest", "modelled for float formats"}};
    expect_usage_errors(cases);
}

// An accumulator plugin's instructions with the options of the model, a format with theirs, and a
// promotion between instructions.
TEST(Gemm, OptionsOfTheOtherPathAreOneLineUsageErrors) {
    const std::string fp8 = "--k 64 --accumulator sm90_wgmma_fp8 --a-format e4m3 --b-format e4m3 ";
    expect_usage_errors({{fp8 + "--mma-depth 16", "--mma-depth: the accumulation model's; sm90_wgmma_fp8 is"},
                         {fp8 + "--promote-every 100",
                          "--promote-every 100: not a multiple of sm90_wgmma_fp8's instruction depth 32"},
                         {"--k 64 --accumulator fp16 --promote-every 0 --a-format e4m3",
                          "--a-format: only with an accumulator plugin"}});
}

// The instructions' operand formats: both required, format plugins.
TEST(Gemm, InstructionsNeedTheirOperandsFormats) {
    expect_usage_errors(
        {{"--k 64 --accumulator sm90_wgmma_fp8 --a-format e4m3",
          "--b-format is required with the accumulator"},
         {"--k 64 --accumulator sm90_wgmma_fp8 --a-format e4m3 --b-format sm89_mma_fp8",
          "--b-format sm89_mma_fp8: 'sm89_mma_fp8' is an accumulator plugin, not a format plugin"}});
}

// An accumulator plugin's instructions (sm90_wgmma_fp8: Hopper's FP8 wgmma, which keeps 13 bits below
// the largest term's exponent and truncates its result to E8M13) on E4M3 inputs.
TEST(Gemm, InstructionsPrintTheAccumulatorTheProductAndThreeErrors) {
    const std::string args = kGemm +
                             "--k 512 --rows 16 --cols 12 --accumulator sm90_wgmma_fp8 --a-format e4m3 "
                             "--b-format e4m3 --distribution fp8-e4m3 --seed 5 ";
    const run_result promoted = run_host(args + "--promote-every 128");
    ASSERT_EQ(promoted.exit_code, 0) << promoted.out;
    EXPECT_EQ(
        promoted.out.rfind("accumulator      sm90_wgmma_fp8, instructions of depth 32, promoted every 128\n"
                           "product          16 x 512 x 12 (M x K x N), fp8-e4m3 inputs rounded to e4m3 "
                           "(A) and e4m3 (B), seed 5\n",
                           0),
        0u)
        << promoted.out;
    const auto e = numbers_of(promoted.out);
    ASSERT_EQ(e.size(), 3u) << promoted.out;
    // Truncation to 13 bits below each instruction's largest term: errors of a few 2^-13 of the sums,
    // under 2^-8 of the sum of magnitudes, and more than nothing; a chain that dropped C (or the
    // promotion's total) would be off by most of the sum.
    EXPECT_GT(e.at("max error"), 0.0);
    EXPECT_LT(e.at("max error"), 0x1p-8);
    // Never promoted, the chain's truncations pile up: the norm-wise error grows.
    const auto never = numbers_of(run_host(args).out);
    EXPECT_GT(never.at("norm-wise error"), e.at("norm-wise error"));
    // The threads share the rows without changing a bit (--threads 0, every core, printed the first).
    EXPECT_EQ(run_host(args + "--promote-every 128 --threads 3").out, promoted.out);
}

TEST(Gemm, SaveWritesTheOperandsAndTheProduct) {
    scratch_dir dir;
    const run_result r =
        run_host(kGemm + "--k 70 --rows 3 --cols 5 --accumulator fp16 --promote-every 0 --save " +
                 (dir.path() / "out").string());
    ASSERT_EQ(r.exit_code, 0) << r.out;
    // .npy: a header, then the float32 values.
    for (const auto& [name, count] : {std::pair{"a.npy", 3 * 70}, {"b.npy", 70 * 5}, {"c.npy", 3 * 5}}) {
        const fs::path file = dir.path() / "out" / name;
        ASSERT_TRUE(fs::exists(file)) << file;
        EXPECT_GT(fs::file_size(file), static_cast<uintmax_t>(count) * 4);
        EXPECT_LT(fs::file_size(file), static_cast<uintmax_t>(count) * 4 + 256);
    }
}

}  // namespace
}  // namespace altgrad::test
