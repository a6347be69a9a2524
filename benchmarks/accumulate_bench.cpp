// altgrad_accumulate_bench: the accumulation model's matrix product
// (host/src/quant/accumulate.hpp, docs/accumulation.md) at M x K x N =
// 256 x 4096 x 256, the size `altgrad-host gemm` runs by default, beside a
// plain float64 product of the same operands (a loop the compiler vectorizes,
// no BLAS: the floor of what any exact-sum model costs).
//
// Benchmarks:
//   accumulate/<format>/<rounding>/promote<N>/threads<T>
//      format: fp16, bf16, fp32, and e8m13 (the float plugin with exponent_bits
//      8, mantissa_bits 13: 14 significant bits, float32's bias and IEEE
//      specials); rounding: toward_zero, nearest; N: 0 (never)
//      or 128; T: 1 or 2 threads. mma_depth 32.
//   float64/threads1   the float64 product (sum of float64 products in k order)
// items_per_second counts products (M * K * N per iteration, one multiply-add
// of the model each): 1e9 / items_per_second is the cost per element, in ns.
// Inputs: N(0,1) floats. Wall-clock time (UseRealTime).
//
// Extra flag: --altgrad_plugin_dir=DIR (the bundled plugins; default the build's).
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "plugins/format_handle.hpp"
#include "plugins/registry.hpp"
#include "quant/accumulate.hpp"

#ifndef ALTGRAD_BENCH_PLUGIN_DIR
#define ALTGRAD_BENCH_PLUGIN_DIR "plugins"
#endif

namespace {

namespace host = altgrad::host;
namespace quant = altgrad::host::quant;

constexpr size_t kM = 256, kK = 4096, kN = 256;

std::string g_plugin_dir = ALTGRAD_BENCH_PLUGIN_DIR;

uint64_t splitmix64(uint64_t& state) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

std::vector<float> normal(size_t n, uint64_t seed) {
    std::vector<float> out(n);
    uint64_t state = seed;
    for (float& x : out) {
        const double u1 = (static_cast<double>(splitmix64(state) >> 11) + 1.0) * 0x1.0p-53;
        const double u2 = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;
        x = static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
    }
    return out;
}

struct operands {
    std::vector<float> a = normal(kM * kK, 1), b = normal(kK * kN, 2);
    std::vector<float> c = std::vector<float>(kM * kN);
};
operands& data() {
    static operands d;
    return d;
}

void set_counters(benchmark::State& state) {
    state.SetItemsProcessed(static_cast<int64_t>(kM * kK * kN) * state.iterations());
}

void bench_accumulate(benchmark::State& state, std::shared_ptr<const host::format_handle> format,
                      altgrad_rounding rounding, size_t promote_every, unsigned threads) {
    const quant::accumulator acc(std::move(format), {rounding, 32, promote_every});
    operands& d = data();
    const quant::gemm_operands p{
        d.a.data(), quant::operand_layout::as_is, d.b.data(), quant::operand_layout::as_is, kM, kK, kN};
    for (auto _ : state) {
        acc.gemm(p, d.c.data(), threads);
        benchmark::DoNotOptimize(d.c.data());
        benchmark::ClobberMemory();
    }
    set_counters(state);
}

void bench_float64(benchmark::State& state) {
    operands& d = data();
    std::vector<double> row(kN);
    for (auto _ : state) {
        for (size_t i = 0; i < kM; ++i) {
            std::fill(row.begin(), row.end(), 0.0);
            for (size_t k = 0; k < kK; ++k) {
                const double x = d.a[i * kK + k];
                const float* b = d.b.data() + k * kN;
                for (size_t j = 0; j < kN; ++j) row[j] += x * static_cast<double>(b[j]);
            }
            for (size_t j = 0; j < kN; ++j) d.c[i * kN + j] = static_cast<float>(row[j]);
        }
        benchmark::DoNotOptimize(d.c.data());
        benchmark::ClobberMemory();
    }
    set_counters(state);
}

// The formats to time: name in the benchmark -> (plugin, parameters).
struct format_case {
    std::string plugin;
    host::given_params params;
};

void register_all() {
    const std::map<std::string, format_case> cases = {
        {"fp16", {"fp16", {}}},
        {"bf16", {"bf16", {}}},
        {"fp32", {"fp32", {}}},
        {"e8m13", {"float", {{"exponent_bits", "8"}, {"mantissa_bits", "13"}}}}};
    static std::unique_ptr<host::registry> reg;
    for (const auto& [name, c] : cases) {
        std::shared_ptr<const host::format_handle> format;
        try {
            if (!reg) reg = std::make_unique<host::registry>(g_plugin_dir);
            format = host::format_handle::create(reg->load(c.plugin), c.params);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "accumulate/%s skipped: %s\n", name.c_str(), e.what());
            continue;
        }
        for (const auto& [rounding_name, rounding] :
             {std::pair{"toward_zero", ALTGRAD_ROUND_TOWARD_ZERO}, {"nearest", ALTGRAD_ROUND_NEAREST_EVEN}})
            for (const size_t promote : {size_t{0}, size_t{128}})
                for (const unsigned threads : {1u, 2u})
                    benchmark::RegisterBenchmark(
                        ("accumulate/" + name + "/" + rounding_name + "/promote" + std::to_string(promote) +
                         "/threads" + std::to_string(threads))
                            .c_str(),
                        bench_accumulate, format, rounding, promote, threads)
                        ->Unit(benchmark::kMillisecond)
                        ->UseRealTime();
    }
    benchmark::RegisterBenchmark("float64/threads1", bench_float64)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
}

// Takes --altgrad_plugin_dir=DIR out of argv.
void take_own_flags(int& argc, char** argv) {
    int kept = 1;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a.rfind("--altgrad_plugin_dir=", 0) == 0) g_plugin_dir = a.substr(21);
        else argv[kept++] = argv[i];
    }
    argc = kept;
}

}  // namespace

int main(int argc, char** argv) {
    take_own_flags(argc, argv);
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    register_all();
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
