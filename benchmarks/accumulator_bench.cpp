// altgrad_accumulator_bench: the accumulator plugins (ABI 1.5,
// docs/accumulation.md, "Instruction models") computing a whole product the
// way a GPU kernel does, instruction after instruction along K with C = the
// previous D, through the host's accumulator_handle (the plugin's C ABI, its
// argument checks included), on one thread.
//
// Benchmarks:
//   chain/<plugin>/promote<N>   M x K x N = 256 x 4096 x 256: K / depth calls of
//      dot_add on the 256 x 256 tile, each on the operands' next `depth`
//      columns (packed as a host packs them, timed too); with N = 128 the
//      chain's D is added into a float32 total every 128 elements (DeepSeek-V3's
//      promotion). Operands: E4M3 (the FP8 instructions), BF16 (the FP16 ones),
//      E2M1 with UE8M0 scales (the block-scaled ones), N(0,1) (std::mt19937_64) rounded.
//   tile/<isa>    one sm90_wgmma_fp8 instruction on a 256 x 256 tile (k 32) through
//      the SDK's fused_dot_add with its loops for baseline x86-64, AVX2 or AVX-512
//      (skipped where the CPU lacks it).
// items_per_second counts products (M * K * N per iteration; M * 32 * N for
// tile/): 1e9 / items_per_second is the cost of a product in ns. Wall-clock
// time (UseRealTime).
//
// Extra flag: --altgrad_plugin_dir=DIR (the bundled plugins; default the build's).
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <altgrad/sdk/fused_dot_add.hpp>

#include "plugins/accumulator_handle.hpp"
#include "plugins/registry.hpp"

#ifndef ALTGRAD_BENCH_PLUGIN_DIR
#define ALTGRAD_BENCH_PLUGIN_DIR "plugins"
#endif

namespace {

namespace host = altgrad::host;
namespace sdk = altgrad::sdk;

constexpr size_t kM = 256, kK = 4096, kN = 256;

std::string g_plugin_dir = ALTGRAD_BENCH_PLUGIN_DIR;

// N(0,1) rounded to a format of `mantissa_bits` fraction bits, smallest
// normal exponent min_exponent and largest value `largest`: toward zero,
// subnormals kept, |x| capped at `largest`.
std::vector<float> operand(size_t n, uint64_t seed, int mantissa_bits, int min_exponent, float largest) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::vector<float> out(n);
    for (float& x : out) {
        const double v = normal(rng);
        const int e = std::max(static_cast<int>(std::floor(std::log2(std::fabs(v) + 1e-300))), min_exponent);
        const double step = std::ldexp(1.0, e - mantissa_bits);
        x = static_cast<float>(std::max(-static_cast<double>(largest),
                                        std::min(static_cast<double>(largest), std::trunc(v / step) * step)));
    }
    return out;
}

struct operands {
    std::vector<float> a, b;
    int32_t min_exponent;
};

// The operands of an instruction's formats: A [M, K] and B [N, K], row-major.
const operands& operands_for(const std::string& plugin) {
    static const operands e4m3{operand(kM * kK, 1, 3, -6, 448), operand(kN * kK, 2, 3, -6, 448), -6};
    static const operands bf16{operand(kM * kK, 1, 7, -126, 3e38f), operand(kN * kK, 2, 7, -126, 3e38f),
                               -126};
    static const operands e2m1{operand(kM * kK, 1, 1, 0, 6), operand(kN * kK, 2, 1, 0, 6), 0};
    if (plugin.find("fp16") != std::string::npos) return bf16;
    if (plugin.find("mxf4") != std::string::npos) return e2m1;
    return e4m3;
}

std::shared_ptr<host::accumulator_handle> accumulator(const std::string& name) {
    static host::registry reg(g_plugin_dir);
    return host::accumulator_handle::create(reg.load(name));
}

// Columns [k0, k0 + width) of a row-major rows x K matrix, packed.
void pack(const std::vector<float>& x, size_t rows, size_t k0, size_t width, std::vector<float>& out) {
    out.resize(rows * width);
    for (size_t r = 0; r < rows; ++r) std::memcpy(&out[r * width], &x[r * kK + k0], width * sizeof(float));
}

void set_counters(benchmark::State& state) {
    const double products = static_cast<double>(kM * kK * kN);
    state.SetItemsProcessed(static_cast<int64_t>(products) * state.iterations());
}

void bench_chain(benchmark::State& state, const std::string& name, size_t promote) {
    const auto acc = accumulator(name);
    const operands& x = operands_for(name);
    const size_t depth = acc->info().depth;
    const bool scaled = (acc->info().scale_kinds & (1u << ALTGRAD_ACC_SCALE_NONE)) == 0;
    // UE8M0 scales of 1 (one per 32 elements), for the block-scaled instructions.
    const std::vector<float> a_scales(kM * ((depth + 31) / 32), 1.0f),
        b_scales(kN * ((depth + 31) / 32), 1.0f);
    std::vector<float> a, b, c(kM * kN), total(kM * kN);
    for (auto _ : state) {
        std::fill(c.begin(), c.end(), 0.0f);
        std::fill(total.begin(), total.end(), 0.0f);
        for (size_t k0 = 0; k0 < kK; k0 += depth) {
            pack(x.a, kM, k0, depth, a);
            pack(x.b, kN, k0, depth, b);
            sdk::dot_add_operands o;
            o.a = a.data();
            o.b = b.data();
            o.c = o.d = c.data();
            o.m = kM;
            o.n = kN;
            o.k = depth;
            o.a_min_exponent = o.b_min_exponent = x.min_exponent;
            if (scaled) {
                o.scale_kind = ALTGRAD_ACC_SCALE_UE8M0_32;
                o.a_scales = a_scales.data();
                o.b_scales = b_scales.data();
            }
            acc->dot_add(o);
            if (promote != 0 && (k0 + depth) % promote == 0) {
                for (size_t i = 0; i < c.size(); ++i) total[i] += c[i];
                std::fill(c.begin(), c.end(), 0.0f);
            }
        }
        benchmark::DoNotOptimize(promote != 0 ? total.data() : c.data());
        benchmark::ClobberMemory();
    }
    set_counters(state);
}

// One sm90_wgmma_fp8 instruction (k 32) on a 256 x 256 tile, by the SDK's loops for `isa`.
void bench_tile(benchmark::State& state, sdk::detail::vector_isa isa) {
    const bool supported = isa == sdk::detail::vector_isa::baseline ||
                           (isa == sdk::detail::vector_isa::avx2 &&
                            sdk::detail::cpu_vector_isa() != sdk::detail::vector_isa::baseline) ||
                           sdk::detail::cpu_vector_isa() == sdk::detail::vector_isa::avx512;
    if (!supported) {
        state.SkipWithError("this CPU lacks the instruction set");
        return;
    }
    const operands& x = operands_for("sm90_wgmma_fp8");
    std::vector<float> a, b, c(kM * kN, 0.0f), d(kM * kN);
    pack(x.a, kM, 0, 32, a);
    pack(x.b, kN, 0, 32, b);
    sdk::instruction ins;
    ins.depth = 32;
    ins.fraction_bits = 13;
    ins.output = ALTGRAD_ACC_OUTPUT_E8M13;
    sdk::dot_add_operands o;
    o.a = a.data();
    o.b = b.data();
    o.c = c.data();
    o.d = d.data();
    o.m = kM;
    o.n = kN;
    o.k = 32;
    o.a_min_exponent = o.b_min_exponent = -6;
    const altgrad_accumulator_args args = sdk::accumulator_args(o);
    for (auto _ : state) {
        sdk::fused_dot_add(ins, args, isa);
        benchmark::DoNotOptimize(d.data());
        benchmark::ClobberMemory();
    }
    const double products = static_cast<double>(kM * 32 * kN);
    state.SetItemsProcessed(static_cast<int64_t>(products) * state.iterations());
}

void register_benchmarks() {
    for (const char* name : {"sm90_wgmma_fp8", "sm90_wgmma_fp16", "sm89_mma_fp8", "sm80_mma_fp16",
                             "sm100_tcgen05_fp8", "sm100_tcgen05_mxf8f6f4", "sm100_tcgen05_mxf4nvf4"})
        benchmark::RegisterBenchmark((std::string("chain/") + name + "/promote0").c_str(), bench_chain, name,
                                     0)
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
    benchmark::RegisterBenchmark("chain/sm90_wgmma_fp8/promote128", bench_chain, "sm90_wgmma_fp8", 128)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    const std::pair<const char*, sdk::detail::vector_isa> isas[] = {
        {"baseline", sdk::detail::vector_isa::baseline},
        {"avx2", sdk::detail::vector_isa::avx2},
        {"avx512", sdk::detail::vector_isa::avx512}};
    for (const auto& [isa_name, isa] : isas)
        benchmark::RegisterBenchmark((std::string("tile/") + isa_name).c_str(), bench_tile, isa)
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
}

}  // namespace

int main(int argc, char** argv) {
    const std::string flag = "--altgrad_plugin_dir=";
    std::vector<char*> rest;
    for (int i = 0; i < argc; ++i) {
        if (i > 0 && std::strncmp(argv[i], flag.c_str(), flag.size()) == 0)
            g_plugin_dir = argv[i] + flag.size();
        else rest.push_back(argv[i]);
    }
    int rest_count = static_cast<int>(rest.size());
    benchmark::Initialize(&rest_count, rest.data());
    register_benchmarks();
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
