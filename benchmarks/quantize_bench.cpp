// altgrad_quantize_bench: quantization throughput of the bundled format
// plugins, called through the C ABI exactly as the host calls them, beside a
// plain memcpy of the same size.
//
// Benchmarks (one per format x rounding mode x size, plus one copy per size):
//   quantize/<format>/<mode>/<size>   mode: nearest_even, stochastic, toward_zero
//   quantize_scaled/<format>/<mode>/<size>   the same call with scale 2 over the
//                                     input halved: the format sees quantize/'s
//                                     values, and the call multiplies by its scale
//                                     and back, as every call with a scale other
//                                     than 1 does (the trainer's, with a power-of-two
//                                     scale from the amax)
//   quantize_block32/<format>/<mode>/<size>   the same call with ABI 1.2 block
//                                     scales, one per 32 elements (OCP MX blocks);
//                                     its per-tensor counterpart is quantize_scaled
//   quantize_amax/<format>/<mode>/<size>   per tensor with current scaling, as the
//                                     trainer does it: the array's amax, its
//                                     power-of-two scale, then the call
//   quantize_delayed/<format>/<mode>/<size>   per tensor with the scale known
//                                     before (delayed scaling), as the trainer does
//                                     it: the calls over 1 MiB pieces, each piece's
//                                     amax taken just before (quantize_taking_amax)
//   quantize_mx32/<format>/<mode>/<size>   block-scaled as the trainer does it: per
//                                     1 MiB piece, each block's amax, its scale by
//                                     the OCP MX rule, the call
//                                     (quantize_with_block_scales, block_scales.hpp)
//   copy/memcpy/<size>                size: 4KiB 64KiB 256KiB 1MiB 16MiB 64MiB
// <size> is the float32 input; every element is 4 bytes read and 4 written, so
// bytes_per_second counts 8 bytes per element for quantize and copy alike.
// Overflow is saturate, scale 1, seed fixed, offset 0. Single-threaded.
//
// Input: N(0,1) floats (fixed seed, Box-Muller over SplitMix64, so identical
// on every platform) multiplied per format so that the largest magnitude of
// the array is about max_finite / 2: a realistic spread across the format's
// exponent range, with a few near the top and a tail in the subnormals.
//
// Extra flags (besides Google Benchmark's): --altgrad_plugin_dir=DIR, the
// folder holding <name>/libaltgrad_<name>.so (default: the build's, or the
// ALTGRAD_PLUGIN_DIR environment variable); with CUDA --altgrad_cuda_batch=N
// (below). Ratios to copy: benchmarks/ratios.py (CPU), scripts/gpu_check.sh (GPU).
//
// Built with ALTGRAD_CUDA, the program also times the GPU (size: 16MiB 256MiB):
//   cuda_copy/device/<size>                cudaMemcpyAsync, device to device: the bar
//   cuda_quantize/<format>/<mode>/<size>   a plugin's quantize on GPU buffers, through the
//                                          C ABI, device_counts set (asynchronous, as a
//                                          trainer would call it)
//   cuda_block/<recipe>/<mode>/<size>      block-scaled quantize with the scales derived on
//                                          the GPU (tests/cuda/device_recipes.hpp): recipe
//                                          mxfp8_floor, mxfp8_round_up (E4M3, E8M0 per 32),
//                                          nvfp4 (E2M1, E4M3 per 16: the tensor's amax
//                                          first, then the blocks), nvfp4_amax_given (the
//                                          blocks alone, the amax already on the device)
//   cuda_amax/<size>                       nvfp4's tensor amax pass alone (reads 4 bytes an
//                                          element; bytes_per_second still counts 8)
// on the default stream. An iteration enqueues --altgrad_cuda_batch calls (default 8)
// between two CUDA events and reports their time divided by the batch (manual time), so a
// call's host-side work overlaps the kernels before it, as in a training step. The copy is
// timed the same way; its time over a call's is the call's ratio to the copy.
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#ifdef ALTGRAD_BENCH_CUDA
#include <cuda_runtime.h>

#include "device_recipes.hpp"
#endif

#include <altgrad/altgrad.h>
#include <altgrad/sdk/call_args.hpp>
#include <altgrad/sdk/hadamard.hpp>

#include "quant/block_scales.hpp"
#include "quant/scaling.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#ifndef ALTGRAD_BENCH_PLUGIN_DIR
#define ALTGRAD_BENCH_PLUGIN_DIR "plugins"
#endif

namespace {

const char* const kFormats[] = {"e5m2", "e4m3", "e3m4",     "e1m6",     "e7m0",     "e0m7", "bf16",
                                "fp16", "fp32", "fp4_e2m1", "fp6_e2m3", "fp6_e3m2", "ue8m0"};
constexpr size_t kBlockSize = 32;  // quantize_block32: OCP MX's block

struct mode {
    const char* name;
    altgrad_rounding rounding;
};
const mode kModes[] = {{"nearest_even", ALTGRAD_ROUND_NEAREST_EVEN},
                       {"stochastic", ALTGRAD_ROUND_STOCHASTIC},
                       {"toward_zero", ALTGRAD_ROUND_TOWARD_ZERO}};

struct size_case {
    const char* name;
    size_t bytes;
};
const size_case kSizes[] = {{"4KiB", size_t{4} << 10},     {"64KiB", size_t{64} << 10},
                            {"256KiB", size_t{256} << 10}, {"1MiB", size_t{1} << 20},
                            {"16MiB", size_t{16} << 20},   {"64MiB", size_t{64} << 20}};

constexpr uint64_t kDataSeed = 0x5EEDF00DCAFEF00Dull;
constexpr uint64_t kRoundingSeed = 0x0123456789ABCDEFull;

std::string g_plugin_dir = ALTGRAD_BENCH_PLUGIN_DIR;

// ---- Buffers -------------------------------------------------------------

struct aligned_free {
    void operator()(float* p) const { std::free(p); }
};
using buffer = std::unique_ptr<float[], aligned_free>;

buffer make_buffer(size_t count) {
    const size_t bytes = ((count * sizeof(float) + 63) / 64) * 64;
    void* p = std::aligned_alloc(64, bytes > 0 ? bytes : 64);
    if (p == nullptr) {
        std::fprintf(stderr, "out of memory allocating %zu bytes\n", bytes);
        std::exit(1);
    }
    std::memset(p, 0, bytes);  // fault every page in before any timing
    return buffer(static_cast<float*>(p));
}

uint64_t splitmix64(uint64_t& state) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// N(0,1) samples by Box-Muller in double, rounded to float.
void fill_normal(float* out, size_t n, uint64_t seed) {
    uint64_t state = seed;
    const double two_pi = 6.283185307179586476925286766559;
    for (size_t i = 0; i < n; i += 2) {
        const double u1 = (static_cast<double>(splitmix64(state) >> 11) + 1.0) * 0x1.0p-53;  // (0, 1]
        const double u2 = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;          // [0, 1)
        const double r = std::sqrt(-2.0 * std::log(u1));
        out[i] = static_cast<float>(r * std::cos(two_pi * u2));
        if (i + 1 < n) out[i + 1] = static_cast<float>(r * std::sin(two_pi * u2));
    }
}

// Per size: the N(0,1) base array, its largest magnitude, and one input and
// one output buffer that every benchmark of that size reuses.
struct size_data {
    size_t count = 0;
    buffer normal, input, output;
    float amax = 0;
};

size_data& data_for(size_t bytes) {
    static std::map<size_t, size_data> cache;
    size_data& d = cache[bytes];
    if (d.count == 0) {
        d.count = bytes / sizeof(float);
        d.normal = make_buffer(d.count);
        d.input = make_buffer(d.count);
        d.output = make_buffer(d.count);
        fill_normal(d.normal.get(), d.count, kDataSeed);
        for (size_t i = 0; i < d.count; ++i) d.amax = std::fmax(d.amax, std::fabs(d.normal[i]));
    }
    return d;
}

// ---- Plugins, through the C ABI ------------------------------------------

struct plugin {
    void* library = nullptr;
    const altgrad_format_vtable* vtable = nullptr;
    altgrad_format* instance = nullptr;
    altgrad_format_info info{};
    std::string error;  // non-empty: could not be loaded
};

plugin& plugin_for(const std::string& name) {
    static std::map<std::string, plugin> cache;
    auto found = cache.find(name);
    if (found != cache.end()) return found->second;
    plugin& p = cache[name];
    const std::string path = g_plugin_dir + "/" + name + "/libaltgrad_" + name + ".so";
    p.library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (p.library == nullptr) {
        const char* why = dlerror();
        p.error = "dlopen " + path + ": " + (why ? why : "unknown error");
        return p;
    }
    auto entry_fn = reinterpret_cast<altgrad_entry_fn>(dlsym(p.library, ALTGRAD_ENTRY_SYMBOL));
    if (entry_fn == nullptr) {
        p.error = path + ": no symbol " ALTGRAD_ENTRY_SYMBOL;
        return p;
    }
    const altgrad_entry* entry = entry_fn();
    if (entry == nullptr || entry->format == nullptr) {
        p.error = path + ": not a format plugin";
        return p;
    }
    p.vtable = entry->format;
    altgrad_error err{};
    err.struct_size = sizeof err;
    const altgrad_param_list params{sizeof(altgrad_param_list), nullptr, 0};
    if (p.vtable->create(&params, &p.instance, &err) != ALTGRAD_STATUS_OK) {
        p.error = name + ": create failed: " + err.message;
        return p;
    }
    p.info.struct_size = sizeof p.info;
    if (p.vtable->get_info(p.instance, &p.info, &err) != ALTGRAD_STATUS_OK) {
        p.error = name + ": get_info failed: " + err.message;
        return p;
    }
    return p;
}

// ---- Benchmarks -----------------------------------------------------------

void set_throughput(benchmark::State& state, size_t count) {
    const int64_t n = static_cast<int64_t>(count) * static_cast<int64_t>(state.iterations());
    state.SetItemsProcessed(n);
    state.SetBytesProcessed(n * 8);  // 4 bytes read + 4 written per element
}

// What every timed quantize call passes: scale 1, saturate, the fixed seed, host memory.
altgrad_quantize_args bench_args(const float* in, float* out, size_t count, altgrad_rounding rounding) {
    altgrad::sdk::conversion_mode mode;
    mode.rounding = rounding;
    mode.seed = kRoundingSeed;
    return altgrad::sdk::quantize_args(in, out, count, mode);
}

void bm_copy(benchmark::State& state, size_t bytes) {
    size_data& d = data_for(bytes);
    std::memcpy(d.input.get(), d.normal.get(), bytes);
    for (auto _ : state) {
        std::memcpy(d.output.get(), d.input.get(), bytes);
        benchmark::ClobberMemory();
    }
    set_throughput(state, d.count);
}

// Which scales a timed call uses and where they come from.
enum class scales_from {
    none,          // scale 1 (quantize/)
    doubled,       // scale 2 over the input halved (quantize_scaled/)
    given,         // block scales set before timing (quantize_block32/)
    tensor_amax,   // the array's amax and its power-of-two scale, timed (quantize_amax/)
    known_scale,   // the scale set before timing, the amax taken piece by piece, timed (quantize_delayed/)
    block_amaxes,  // every block's amax and MX scale piece by piece, timed (quantize_mx32/)
};

// The array's amax and the trainer's per-tensor scale for it (scaling.hpp, current scaling).
float tensor_scale(const float* x, size_t n, altgrad::host::quant::scaling_state& scaling) {
    float amax = 0;
    altgrad::host::quant::block_amaxes(x, n, n, &amax);  // one block: the whole array
    return scaling.scale_for(amax);
}

// Marks the benchmark skipped with `why` (its loop run empty, as the library expects before a return).
void skip(benchmark::State& state, const char* why) {
    state.SkipWithError(why);
    for (auto _ : state) {}
}

void bm_quantize(benchmark::State& state, std::string format, altgrad_rounding rounding, size_t bytes,
                 scales_from from) {
    plugin& p = plugin_for(format);
    if (!p.error.empty()) return skip(state, p.error.c_str());
    size_data& d = data_for(bytes);
    // Scale N(0,1) so the array's largest magnitude is about max_finite / 2.
    const float factor = static_cast<float>(p.info.max_finite / 2.0 / d.amax);
    for (size_t i = 0; i < d.count; ++i) d.input[i] = d.normal[i] * factor;
    // Halving is exact for these inputs (normal floats far above float32's
    // subnormals), so scale 2 gives the format exactly quantize/'s values.

    altgrad_quantize_args args = bench_args(d.input.get(), d.output.get(), d.count, rounding);
    if (from == scales_from::doubled) {
        // Halving is exact for these inputs (normal floats far above float32's
        // subnormals), so scale 2 gives the format exactly quantize/'s values.
        for (size_t i = 0; i < d.count; ++i) {
            const float half = d.input[i] * 0.5f;
            if (half * 2.0f != d.input[i])
                return skip(state, "an input does not halve exactly: quantize_scaled would see other values");
            d.input[i] = half;
        }
        args.scale = 2.0f;
    }
    // Block scales by the OCP MX rule (the trainer's code): set once before
    // timing (given: the plugin's share of a block-scaled quantize), or
    // derived piece by piece in every timed iteration (block_amaxes: the whole of it).
    const altgrad::host::quant::scale_grid grid = altgrad::host::quant::scale_grid::power_of_two();
    const altgrad::host::quant::block_recipe recipe{altgrad::host::quant::scale_rule::mx_floor, &grid,
                                                    p.info.max_finite};
    std::vector<float> block_scales;
    if (from == scales_from::given || from == scales_from::block_amaxes) {
        block_scales.resize((d.count + kBlockSize - 1) / kBlockSize);
        altgrad::host::quant::block_amaxes(d.input.get(), d.count, kBlockSize, block_scales.data());
        altgrad::host::quant::scales_from_amaxes(block_scales.data(), block_scales.size(), recipe);
        args.block_scales = block_scales.data();
        args.block_size = kBlockSize;
    }
    altgrad::host::quant::scaling_config current;
    current.mode = altgrad::host::quant::scaling_mode::current;
    altgrad::host::quant::scaling_state tensor_scaling(current, p.info.max_finite);
    altgrad_error err{};
    err.struct_size = sizeof err;

    if (from == scales_from::known_scale) args.scale = tensor_scale(d.input.get(), d.count, tensor_scaling);

    uint64_t underflow = 0, overflow = 0;
    bool failed = false;
    // One call on a piece of the array (the fused loops' callback), its counts added up.
    auto call_on_piece = [&](size_t first, size_t count, const float* scales) {
        altgrad_quantize_args piece = args;
        piece.input = d.input.get() + first;
        piece.output = d.output.get() + first;
        piece.count = count;
        piece.offset = first;
        piece.block_scales = scales;
        if (failed || p.vtable->quantize(p.instance, &piece, &err) != ALTGRAD_STATUS_OK) {
            failed = true;
            return;
        }
        underflow += piece.underflow_count;
        overflow += piece.overflow_count;
    };
    for (auto _ : state) {
        underflow = overflow = 0;
        if (from == scales_from::known_scale) {
            benchmark::DoNotOptimize(altgrad::host::quant::quantize_taking_amax(
                d.input.get(), d.count,
                [&](size_t first, size_t count) { call_on_piece(first, count, nullptr); }));
        } else if (from == scales_from::block_amaxes) {
            altgrad::host::quant::quantize_with_block_scales(d.input.get(), d.count, kBlockSize, recipe,
                                                             block_scales.data(), call_on_piece);
        } else {
            if (from == scales_from::tensor_amax)
                args.scale = tensor_scale(d.input.get(), d.count, tensor_scaling);
            failed = p.vtable->quantize(p.instance, &args, &err) != ALTGRAD_STATUS_OK;
            underflow = args.underflow_count;
            overflow = args.overflow_count;
        }
        if (failed) {
            state.SkipWithError(err.message);
            break;
        }
        benchmark::ClobberMemory();
    }
    if (failed) return;
    set_throughput(state, d.count);
    // What fraction of the input flushed to zero or saturated: a sanity check
    // that the data exercises the format as intended.
    state.counters["underflow_frac"] = static_cast<double>(underflow) / static_cast<double>(d.count);
    state.counters["overflow_frac"] = static_cast<double>(overflow) / static_cast<double>(d.count);
}

// The SDK's fast Walsh-Hadamard transform (random_hadamard's and hadamard's work) on the N(0,1)
// array in blocks of d, in place each iteration: `vector` is altgrad::sdk::fwht as plugins call it,
// the other its scalar definition (detail::fwht_baseline), whose bits the vector path gives.
void bm_fwht(benchmark::State& state, uint32_t d, bool vector, size_t bytes) {
    size_data& data = data_for(bytes);
    std::memcpy(data.input.get(), data.normal.get(), bytes);
    for (auto _ : state) {
        if (vector) altgrad::sdk::fwht(data.input.get(), data.count / d, d);
        else altgrad::sdk::detail::fwht_baseline(data.input.get(), data.count / d, d);
        benchmark::ClobberMemory();
    }
    state.SetItemsProcessed(static_cast<int64_t>(data.count) * static_cast<int64_t>(state.iterations()));
}

// The block scales alone (scales_from_amaxes, the trainer's step between a tensor's block amaxes
// and its quantize call): the N(0,1) array's amaxes of 16-element blocks (NVFP4's), copied into
// place and turned into scales each iteration, under one rule and grid. two_level on E4M3's values
// is NVFP4's, where each block's scale is searched for in the grid.
void bm_block_scales(benchmark::State& state, altgrad::host::quant::scale_rule rule, bool e4m3_grid,
                     size_t bytes) {
    size_data& d = data_for(bytes);
    std::vector<float> amaxes((d.count + 15) / 16), work(amaxes.size());
    altgrad::host::quant::block_amaxes(d.normal.get(), d.count, 16, amaxes.data());
    std::vector<float> e4m3;  // OCP E4M3's positive values: subnormals m/8 * 2^-6, normals to 448
    for (int m = 1; m < 8; ++m) e4m3.push_back(std::ldexp(m / 8.0f, -6));
    for (int e = 1; e <= 15; ++e)
        for (int m = 0; m < 8 && !(e == 15 && m == 7); ++m)
            e4m3.push_back(std::ldexp(1.0f + m / 8.0f, e - 7));
    const altgrad::host::quant::scale_grid grid =
        e4m3_grid ? altgrad::host::quant::scale_grid::of_values("e4m3", e4m3)
                  : altgrad::host::quant::scale_grid::power_of_two();
    const altgrad::host::quant::block_recipe recipe{rule, &grid, 6.0};  // E2M1 elements
    for (auto _ : state) {
        std::memcpy(work.data(), amaxes.data(), amaxes.size() * sizeof(float));
        benchmark::DoNotOptimize(
            altgrad::host::quant::scales_from_amaxes(work.data(), work.size(), recipe, d.amax).blocks);
        benchmark::ClobberMemory();
    }
    state.SetItemsProcessed(static_cast<int64_t>(amaxes.size()) * static_cast<int64_t>(state.iterations()));
}

#ifdef ALTGRAD_BENCH_CUDA
// ---- The same on the GPU ----------------------------------------------------

const size_case kCudaSizes[] = {{"16MiB", size_t{16} << 20}, {"256MiB", size_t{256} << 20}};
int g_cuda_batch = 8;  // calls per timed iteration (--altgrad_cuda_batch)

// Per size: device input, output, counts, the block-scaled calls' scales, tally and tensor
// amax, and CUDA events for timing.
struct device_data {
    size_t count = 0;
    float* input = nullptr;
    float* output = nullptr;
    uint64_t* counts = nullptr;
    float* scales = nullptr;  // one per 16 elements (NVFP4's blocks; MXFP8 uses half)
    altgrad::sdk::block_tally* tally = nullptr;
    uint32_t* tensor_amax = nullptr;
    cudaEvent_t start{}, stop{};
};

bool cuda_ok(benchmark::State& state, cudaError_t e, const char* what) {
    if (e == cudaSuccess) return true;
    state.SkipWithError((std::string(what) + ": " + cudaGetErrorString(e)).c_str());
    return false;
}

device_data* device_data_for(benchmark::State& state, size_t bytes) {
    static std::map<size_t, device_data> cache;
    device_data& d = cache[bytes];
    if (d.count != 0) return &d;
    const size_t count = bytes / sizeof(float);
    const altgrad::sdk::block_tally zero;
    if (!cuda_ok(state, cudaMalloc(&d.input, bytes), "cudaMalloc") ||
        !cuda_ok(state, cudaMalloc(&d.output, bytes), "cudaMalloc") ||
        !cuda_ok(state, cudaMalloc(&d.counts, 2 * sizeof(uint64_t)), "cudaMalloc") ||
        !cuda_ok(state, cudaMalloc(&d.scales, count / 16 * sizeof(float)), "cudaMalloc") ||
        !cuda_ok(state, cudaMalloc(&d.tally, sizeof zero), "cudaMalloc") ||
        !cuda_ok(state, cudaMemcpy(d.tally, &zero, sizeof zero, cudaMemcpyHostToDevice), "cudaMemcpy") ||
        !cuda_ok(state, cudaMalloc(&d.tensor_amax, sizeof(uint32_t)), "cudaMalloc") ||
        !cuda_ok(state, cudaEventCreate(&d.start), "cudaEventCreate") ||
        !cuda_ok(state, cudaEventCreate(&d.stop), "cudaEventCreate"))
        return nullptr;
    d.count = count;
    return &d;
}

// The CPU benchmark's N(0,1) input of this size times `factor`, uploaded.
bool upload_input(benchmark::State& state, device_data& d, size_t bytes, float factor) {
    size_data& h = data_for(bytes);
    for (size_t i = 0; i < h.count; ++i) h.input[i] = h.normal[i] * factor;
    return cuda_ok(state, cudaMemcpy(d.input, h.input.get(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
}

// Time g_cuda_batch calls of `call` per iteration with events on the default stream.
template <class Call>
void time_on_device(benchmark::State& state, device_data& d, Call&& call) {
    for (auto _ : state) {
        cudaEventRecord(d.start);
        for (int i = 0; i < g_cuda_batch; ++i)
            if (!call()) return;
        cudaEventRecord(d.stop);
        if (!cuda_ok(state, cudaEventSynchronize(d.stop), "cudaEventSynchronize")) return;
        float ms = 0;
        cudaEventElapsedTime(&ms, d.start, d.stop);
        state.SetIterationTime(ms / 1e3 / g_cuda_batch);
    }
    set_throughput(state, d.count);
}

void bm_cuda_copy(benchmark::State& state, size_t bytes) {
    device_data* d = device_data_for(state, bytes);
    if (d == nullptr) return;
    time_on_device(state, *d, [&] {
        return cuda_ok(state, cudaMemcpyAsync(d->output, d->input, bytes, cudaMemcpyDeviceToDevice),
                       "cudaMemcpyAsync");
    });
}

void bm_cuda_quantize(benchmark::State& state, std::string format, altgrad_rounding rounding, size_t bytes) {
    plugin& p = plugin_for(format);
    if (!p.error.empty() || (p.info.memory_kinds & (1u << ALTGRAD_MEMORY_CUDA)) == 0) {
        state.SkipWithError(p.error.empty() ? "the plugin has no CUDA implementation" : p.error.c_str());
        return;
    }
    device_data* d = device_data_for(state, bytes);
    if (d == nullptr ||
        !upload_input(state, *d, bytes, static_cast<float>(p.info.max_finite / 2.0 / data_for(bytes).amax)))
        return;
    altgrad_quantize_args args = bench_args(d->input, d->output, d->count, rounding);
    args.memory = ALTGRAD_MEMORY_CUDA;
    args.device_counts = d->counts;
    altgrad_error err{};
    err.struct_size = sizeof err;
    time_on_device(state, *d, [&] {
        if (p.vtable->quantize(p.instance, &args, &err) == ALTGRAD_STATUS_OK) return true;
        state.SkipWithError(err.message);
        return false;
    });
}

// Block-scaled with the scales derived on the GPU; the input N(0,1) as it is (the block
// scales bring each block into the element format's range). amax_given: NVFP4's blocks
// alone, the tensor's amax taken once before the timing.
void bm_cuda_block(benchmark::State& state, device_recipes::recipe r, bool amax_given,
                   altgrad_rounding rounding, size_t bytes) {
    device_data* d = device_data_for(state, bytes);
    if (d == nullptr || !upload_input(state, *d, bytes, 1.0f)) return;
    altgrad::sdk::block_scaled_args a;
    a.input = d->input;
    a.output = d->output;
    a.count = d->count;
    a.rounding = rounding;
    a.seed = kRoundingSeed;
    a.scales = d->scales;
    a.tensor_amax_bits = d->tensor_amax;
    a.tally = d->tally;
    bool given = false;
    const auto enqueue = [&] {
        try {
            device_recipes::enqueue(r, a, given);
            return true;
        } catch (const std::exception& e) {
            state.SkipWithError(e.what());
            return false;
        }
    };
    if (amax_given) {
        if (!enqueue()) return;  // takes the amax into d->tensor_amax
        given = true;
    }
    time_on_device(state, *d, enqueue);
}

void bm_cuda_amax(benchmark::State& state, size_t bytes) {
    device_data* d = device_data_for(state, bytes);
    if (d == nullptr || !upload_input(state, *d, bytes, 1.0f)) return;
    time_on_device(state, *d, [&] {
        try {
            device_recipes::tensor_amax(d->input, d->count, d->tensor_amax, nullptr);
            return true;
        } catch (const std::exception& e) {
            state.SkipWithError(e.what());
            return false;
        }
    });
}

void register_cuda_benchmarks() {
    using device_recipes::recipe;
    const std::tuple<const char*, recipe, bool> block_cases[] = {
        {"mxfp8_floor", recipe::mxfp8_floor, false},
        {"mxfp8_round_up", recipe::mxfp8_round_up, false},
        {"nvfp4", recipe::nvfp4, false},
        {"nvfp4_amax_given", recipe::nvfp4, true}};
    const auto timed = [](const std::string& name, auto&& fn) {
        benchmark::RegisterBenchmark(name.c_str(), fn)->Unit(benchmark::kMicrosecond)->UseManualTime();
    };
    for (const size_case& sz : kCudaSizes) {
        const size_t bytes = sz.bytes;
        timed(std::string("cuda_copy/device/") + sz.name,
              [bytes](benchmark::State& s) { bm_cuda_copy(s, bytes); });
        timed(std::string("cuda_amax/") + sz.name, [bytes](benchmark::State& s) { bm_cuda_amax(s, bytes); });
        for (const mode& m : kModes) {
            const altgrad_rounding r = m.rounding;
            for (const char* format : kFormats) {
                const std::string f = format;
                timed(std::string("cuda_quantize/") + format + "/" + m.name + "/" + sz.name,
                      [f, r, bytes](benchmark::State& s) { bm_cuda_quantize(s, f, r, bytes); });
            }
            for (const auto& [name, which, given] : block_cases) {
                const recipe w = which;
                const bool g = given;
                timed(std::string("cuda_block/") + name + "/" + m.name + "/" + sz.name,
                      [w, g, r, bytes](benchmark::State& s) { bm_cuda_block(s, w, g, r, bytes); });
            }
        }
    }
}
#endif

}  // namespace

int main(int argc, char** argv) {
    if (const char* env = std::getenv("ALTGRAD_PLUGIN_DIR"); env != nullptr && *env != '\0')
        g_plugin_dir = env;
    benchmark::Initialize(&argc, argv);
    // Our own flags, after Google Benchmark has removed its.
    int kept = 1;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        const std::string flag = "--altgrad_plugin_dir=";
#ifdef ALTGRAD_BENCH_CUDA
        const std::string batch = "--altgrad_cuda_batch=";
        if (arg.compare(0, batch.size(), batch) == 0) {
            g_cuda_batch = std::max(1, std::atoi(arg.c_str() + batch.size()));
            continue;
        }
#endif
        if (arg.compare(0, flag.size(), flag) == 0) g_plugin_dir = arg.substr(flag.size());
        else argv[kept++] = argv[i];
    }
    argc = kept;
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

    benchmark::AddCustomContext("altgrad_plugin_dir", g_plugin_dir);
    benchmark::AddCustomContext("altgrad_bytes_per_element", "8 (4 read + 4 written)");
    benchmark::AddCustomContext("altgrad_input", "N(0,1) * (max_finite/2)/amax, scale 1, overflow saturate");
    benchmark::AddCustomContext("altgrad_cpu_avx2", __builtin_cpu_supports("avx2") ? "yes" : "no");
    // The plugins' AVX-512 loops need F, VL, BW and DQ (philox.hpp, cpu_vector_isa).
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
    benchmark::AddCustomContext("altgrad_cpu_avx512", avx512 ? "yes" : "no");

    // Size-major order, so each size's buffers are made once and a filter on
    // the size (e.g. --benchmark_filter=/64MiB) touches only that size.
    for (const size_case& sz : kSizes) {
        const size_t bytes = sz.bytes;
        benchmark::RegisterBenchmark((std::string("copy/memcpy/") + sz.name).c_str(),
                                     [bytes](benchmark::State& s) { bm_copy(s, bytes); })
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
        const std::pair<const char*, scales_from> families[] = {
            {"quantize/", scales_from::none},
            {"quantize_scaled/", scales_from::doubled},
            {"quantize_block32/", scales_from::given},
            {"quantize_amax/", scales_from::tensor_amax},
            {"quantize_delayed/", scales_from::known_scale},
            {"quantize_mx32/", scales_from::block_amaxes}};
        using rule = altgrad::host::quant::scale_rule;
        const std::tuple<const char*, rule, bool> block_scale_cases[] = {
            {"block_scales/mx_floor/pow2/", rule::mx_floor, false},
            {"block_scales/round_up/e4m3/", rule::round_up, true},
            {"block_scales/two_level/e4m3/", rule::two_level, true}};
        for (const uint32_t d : {16u, 64u})
            for (const bool vector : {false, true}) {
                const std::string name =
                    "fwht/" + std::to_string(d) + (vector ? "/vector/" : "/scalar/") + sz.name;
                benchmark::RegisterBenchmark(
                    name.c_str(), [d, vector, bytes](benchmark::State& s) { bm_fwht(s, d, vector, bytes); })
                    ->Unit(benchmark::kMicrosecond)
                    ->UseRealTime();
            }
        for (const auto& [family, r, e4m3] : block_scale_cases) {
            const rule how = r;
            const bool grid = e4m3;
            benchmark::RegisterBenchmark(
                (std::string(family) + sz.name).c_str(),
                [how, grid, bytes](benchmark::State& s) { bm_block_scales(s, how, grid, bytes); })
                ->Unit(benchmark::kMicrosecond)
                ->UseRealTime();
        }
        for (const auto& [family, from] : families)
            for (const char* format : kFormats)
                for (const mode& m : kModes) {
                    const std::string name = std::string(family) + format + "/" + m.name + "/" + sz.name;
                    const std::string f = format;
                    const altgrad_rounding r = m.rounding;
                    const scales_from how = from;
                    benchmark::RegisterBenchmark(
                        name.c_str(),
                        [f, r, bytes, how](benchmark::State& s) { bm_quantize(s, f, r, bytes, how); })
                        ->Unit(benchmark::kMicrosecond)
                        ->UseRealTime();
                }
    }
#ifdef ALTGRAD_BENCH_CUDA
    register_cuda_benchmarks();
#endif
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
