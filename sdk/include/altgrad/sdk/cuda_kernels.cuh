// AltGrad SDK: the CUDA side of the format adapter (format_plugin.hpp), and
// block-scaled quantize with the scales derived on the device.
//
// Included by format_plugin.hpp only when nvcc compiles the plugin (the
// CUDA keyword of altgrad_add_plugin does that). A format class whose
// kernel() returns a trivially copyable value with the element functions
// marked ALTGRAD_SDK_HD (exmy_kernel, fixed_point_format) then accepts
// ALTGRAD_MEMORY_CUDA buffers with no code of its own: the kernels below run
// the very element functions the host loop runs, so GPU and CPU results are
// the same bits, counts included.
//
// The rules of the ABI (abi/format.h) as they apply here:
//  - What one thread does to one group of four elements (scaling, random
//    bits, the element function, a block's scale) is in element_groups.hpp,
//    which the CPU tests run too; this file adds the loops over the groups,
//    the loads and stores, the tallies and the CUDA runtime calls.
//  - Work is enqueued on args.cuda_stream on device args.device_index; the
//    calling thread's current device is restored before returning.
//  - quantize with device_counts set is asynchronous: the counts are added to
//    that device memory by atomics. Otherwise (and always for encode and
//    decode, which must report bad elements) the call waits for its stream.
//
// Speed (docs/performance.md, "On a GPU"): a quantize moves 8 bytes an
// element, so it can run at a device copy's speed if each byte moves as a
// copy's does. The quantize kernel reads and writes whole groups as 16-byte
// quads, two groups in flight per thread, on a grid of as many blocks as the
// GPU holds at once, each thread striding over the call; the tallies are
// added once per block. quantize_with_block_scales does the same with a
// block's amax taken across the lanes that hold it (shuffles), so the data
// is read once.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>

#include <altgrad/altgrad.h>
#include <altgrad/sdk/element_groups.hpp>
#include <altgrad/sdk/error.hpp>

namespace altgrad::sdk::cuda {

constexpr unsigned kThreads = 256;
constexpr unsigned kMaxBlocks = 8192;  // grid-stride beyond this

// Map a CUDA error to a plugin_error naming the call: no usable GPU or driver
// is UNSUPPORTED (the request cannot be served on this machine), a failed
// allocation OUT_OF_MEMORY, anything else INTERNAL.
inline void check(cudaError_t e, const char* what) {
    if (e == cudaSuccess) return;
    altgrad_status status = ALTGRAD_STATUS_INTERNAL;
    if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorNoKernelImageForDevice)
        status = ALTGRAD_STATUS_UNSUPPORTED;
    if (e == cudaErrorMemoryAllocation) status = ALTGRAD_STATUS_OUT_OF_MEMORY;
    throw plugin_error(status, std::string("CUDA ") + what + ": " + cudaGetErrorString(e));
}

inline unsigned grid_for(uint64_t groups) {
    const uint64_t blocks = (groups + kThreads - 1) / kThreads;
    return static_cast<unsigned>(blocks < kMaxBlocks ? (blocks > 0 ? blocks : 1) : kMaxBlocks);
}

// A grid for `kernel` that strides over `groups` groups, two a thread per
// stride: no more blocks than the current device holds at once (its SMs times
// the kernel's occupancy, which is queried once per kernel and device), so
// that every thread strides over equal shares and no wave is left half full.
template <class Kernel>
unsigned resident_grid(Kernel kernel, uint64_t groups) {
    int device = 0, sms = 1;
    check(cudaGetDevice(&device), "cudaGetDevice");
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
    static std::mutex m;
    static std::map<std::pair<const void*, int>, int> blocks_per_sm;
    int per_sm = 0;
    {
        const std::lock_guard<std::mutex> lock(m);
        int& known = blocks_per_sm[{reinterpret_cast<const void*>(kernel), device}];
        if (known == 0) {
            check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&known, kernel, kThreads, 0),
                  "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
            if (known < 1) known = 1;
        }
        per_sm = known;
    }
    const uint64_t wanted = (groups + 2 * kThreads - 1) / (2 * kThreads);
    const uint64_t resident = static_cast<uint64_t>(sms) * static_cast<uint64_t>(per_sm);
    return static_cast<unsigned>(wanted < 1 ? 1 : wanted < resident ? wanted : resident);
}

// Sums of a thread's values over its block, added to dst[0 .. N) once per
// block (by atomics: none for a zero sum). Every thread of the block calls it
// with the same N (a block-wide barrier).
template <unsigned N>
__device__ void add_over_block(const unsigned long long (&v)[N], unsigned long long* dst) {
    __shared__ unsigned long long warp_sums[kThreads / 32][N];
    __syncthreads();  // a previous call's readers are done with warp_sums
    const unsigned warp = threadIdx.x / 32, lane = threadIdx.x & 31u;
    for (unsigned i = 0; i < N; ++i) {
        unsigned long long x = v[i];
        for (int delta = 16; delta > 0; delta /= 2) x += __shfl_down_sync(0xFFFFFFFFu, x, delta);
        if (lane == 0) warp_sums[warp][i] = x;
    }
    __syncthreads();
    if (threadIdx.x < N) {
        unsigned long long sum = 0;
        for (unsigned w = 0; w < blockDim.x / 32; ++w) sum += warp_sums[w][threadIdx.x];
        if (sum != 0) atomicAdd(dst + threadIdx.x, sum);
    }
}

// The largest (Max) or smallest of a thread's value over its block, combined
// into *dst once per block (atomicMax or atomicMin; not when every thread
// holds the identity).
template <bool Max>
__device__ void combine_over_block(uint32_t v, uint32_t* dst) {
    __shared__ uint32_t warp_values[kThreads / 32];
    constexpr uint32_t identity = Max ? 0u : ~0u;
    const auto pick = [](uint32_t a, uint32_t b) { return Max ? (a > b ? a : b) : (a < b ? a : b); };
    __syncthreads();
    for (int delta = 16; delta > 0; delta /= 2) v = pick(v, __shfl_down_sync(0xFFFFFFFFu, v, delta));
    if ((threadIdx.x & 31u) == 0) warp_values[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (unsigned w = 1; w < blockDim.x / 32; ++w) v = pick(v, warp_values[w]);
        if (v != identity) {
            if constexpr (Max) atomicMax(dst, v);
            else atomicMin(dst, v);
        }
    }
}

__device__ __forceinline__ void add_counts(const element_counts& c, unsigned long long* counts) {
    const unsigned long long v[2] = {c.overflow, c.underflow};
    add_over_block<2>(v, counts);
}

__device__ __forceinline__ quad load_quad(const float* p) {
    const float4 v = *reinterpret_cast<const float4*>(p);
    return quad{{v.x, v.y, v.z, v.w}};
}
__device__ __forceinline__ void store_quad(float* p, const quad& q) {
    *reinterpret_cast<float4*>(p) = make_float4(q.v[0], q.v[1], q.v[2], q.v[3]);
}

// Thread t does groups t, t + S, t + 2S, ... (S the grid's threads), two per
// step, both loaded before either is quantized so that two loads are in
// flight. A whole group goes as a quad where `quads` (the call's buffers are
// aligned for it and its lanes share a scale: quantize()), any other group
// element by element.
template <class K, altgrad_rounding R, altgrad_overflow O>
__global__ void __launch_bounds__(kThreads)
    quantize_kernel(K k, const float* in, float* out, size_t n, scale_source s, uint32_t block_shift,
                    bool quads, uint64_t seed, uint64_t offset, uint32_t random_mask, uint64_t groups,
                    unsigned long long* counts) {
    element_counts c;
    const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
    for (uint64_t g = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; g < groups; g += 2 * stride) {
        const uint64_t pair[2] = {g, g + stride};
        quad x[2];
        bool whole[2];
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            whole[j] = quads && pair[j] < groups && group_is_whole(pair[j], offset, n);
            if (whole[j]) x[j] = load_quad(in + group_first_element(pair[j], offset));
        }
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            if (whole[j])
                store_quad(out + group_first_element(pair[j], offset),
                           quantize_whole_group<K, R, O>(k, x[j], s, block_shift, seed, offset, random_mask,
                                                         pair[j], c));
            else if (pair[j] < groups)
                quantize_group<K, R, O>(k, in, out, n, s, seed, offset, random_mask, pair[j], c);
        }
    }
    add_counts(c, counts);  // every thread of the block reaches this, as the barrier needs
}

template <class K, altgrad_rounding R, altgrad_overflow O, class Code>
__global__ void encode_kernel(K k, const float* in, Code* codes, size_t n, scale_source s, uint64_t seed,
                              uint64_t offset, uint32_t random_mask, uint64_t groups,
                              unsigned long long* counts, unsigned long long* first_bad) {
    element_counts c;
    for (uint64_t g = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; g < groups;
         g += uint64_t{gridDim.x} * blockDim.x) {
        const uint64_t bad = encode_group<K, R, O, Code>(k, in, codes, n, s, seed, offset, random_mask, g, c);
        if (bad != kNoElement) atomicMin(first_bad, static_cast<unsigned long long>(bad));
    }
    add_counts(c, counts);
}

template <class K, class Code>
__global__ void decode_kernel(K k, const Code* codes, float* out, size_t n, scale_source s, uint64_t limit,
                              unsigned long long* first_bad) {
    for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n;
         i += size_t{gridDim.x} * blockDim.x) {
        bool bad = false;
        out[i] = decode_element(k, codes, i, s, limit, bad);
        if (bad) atomicMin(first_bad, static_cast<unsigned long long>(i));
    }
}

// Makes device_index current for the scope and restores the caller's device.
class device_scope {
public:
    explicit device_scope(int32_t device) {
        check(cudaGetDevice(&previous_), "cudaGetDevice");
        if (device != previous_) check(cudaSetDevice(device), "cudaSetDevice");
    }
    ~device_scope() { cudaSetDevice(previous_); }
    device_scope(const device_scope&) = delete;
    device_scope& operator=(const device_scope&) = delete;

private:
    int previous_ = 0;
};

// Checks that p (count elements) is memory the device can reach, so a host
// pointer passed as CUDA memory is an INVALID_ARGUMENT, not a kernel fault.
inline void check_device_pointer(const void* p, size_t count, const char* what) {
    if (count == 0) return;
    cudaPointerAttributes attributes{};
    const cudaError_t e = cudaPointerGetAttributes(&attributes, p);
    if (e != cudaSuccess ||
        (attributes.type != cudaMemoryTypeDevice && attributes.type != cudaMemoryTypeManaged)) {
        cudaGetLastError();  // a failed query leaves its error behind; take it
        throw plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT,
                           std::string(what) + " is not CUDA device memory (memory = ALTGRAD_MEMORY_CUDA)");
    }
}

// The call's scales; block scales must be device memory like the data.
template <class Args>
scale_source device_scales(const Args& a, const char* call) {
    const scale_source s = scales_of(a);
    if (s.per_block())
        check_device_pointer(s.block_scales, block_count(a.count, s.block_size),
                             (std::string(call) + ": block_scales").c_str());
    return s;
}

// Scratch device memory for one call: tallies and the first bad element,
// on the call's stream; copies them back and waits when asked.
class scratch {
public:
    explicit scratch(cudaStream_t stream) : stream_(stream) {
        check(cudaMallocAsync(reinterpret_cast<void**>(&words_), 3 * sizeof(unsigned long long), stream),
              "cudaMallocAsync");
        // Counts start at 0, the first bad element at kNoElement (all ones).
        check(cudaMemsetAsync(words_, 0, 2 * sizeof(unsigned long long), stream), "cudaMemsetAsync");
        check(cudaMemsetAsync(words_ + 2, 0xFF, sizeof(unsigned long long), stream), "cudaMemsetAsync");
    }
    ~scratch() { cudaFreeAsync(words_, stream_); }
    scratch(const scratch&) = delete;
    scratch& operator=(const scratch&) = delete;

    unsigned long long* counts() const { return words_; }
    unsigned long long* first_bad() const { return words_ + 2; }

    // Wait for the stream and read the three words back.
    void read(unsigned long long (&host)[3]) const {
        check(cudaMemcpyAsync(host, words_, sizeof host, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync");
        check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    }

private:
    cudaStream_t stream_;
    unsigned long long* words_ = nullptr;
};

template <class K>
void quantize(const K& k, altgrad_quantize_args& a) {
    static_assert(std::is_trivially_copyable<K>::value, "a format's kernel() must be trivially copyable");
    if (a.count == 0) return;
    const device_scope device(a.device_index);
    check_device_pointer(a.input, a.count, "quantize: input");
    check_device_pointer(a.output, a.count, "quantize: output");
    const scale_source scales = device_scales(a, "quantize");
    const uint32_t random_mask = detail::random_mask_of(a);
    const cudaStream_t stream = static_cast<cudaStream_t>(a.cuda_stream);
    const uint64_t groups = group_count(a.offset, a.count);
    // Quads where both buffers put every group's lane 0 on 16 bytes and a
    // group's lanes share one scale.
    const bool quads = quads_aligned(a.input, a.offset) && quads_aligned(a.output, a.offset) &&
                       (!scales.per_block() || (scales.block_size % 4 == 0 && a.offset % 4 == 0));
    const uint32_t block_shift = scales.per_block() ? block_shift_of(scales.block_size) : kNoShift;
    auto launch = [&](unsigned long long* counts) {
        detail::dispatch_modes(a.rounding, a.overflow, [&](auto r, auto o) {
            constexpr altgrad_rounding R = decltype(r)::value;
            constexpr altgrad_overflow O = decltype(o)::value;
            const auto kernel = quantize_kernel<K, R, O>;
            kernel<<<resident_grid(kernel, groups), kThreads, 0, stream>>>(
                k, a.input, a.output, a.count, scales, block_shift, quads, a.seed, a.offset, random_mask,
                groups, counts);
        });
        check(cudaGetLastError(), "quantize kernel launch");
    };
    if (a.device_counts != nullptr) {
        check_device_pointer(a.device_counts, 2, "quantize: device_counts");
        launch(reinterpret_cast<unsigned long long*>(a.device_counts));
        return;
    }
    const scratch tally(stream);
    launch(tally.counts());
    unsigned long long host[3];
    tally.read(host);
    a.overflow_count = host[0];
    a.underflow_count = host[1];
}

template <class K>
void encode(const K& k, altgrad_encode_args& a, uint32_t code_bytes) {
    static_assert(std::is_trivially_copyable<K>::value, "a format's kernel() must be trivially copyable");
    if (a.count == 0) return;
    const device_scope device(a.device_index);
    check_device_pointer(a.input, a.count, "encode: input");
    check_device_pointer(a.codes, a.count, "encode: codes");
    const scale_source scales = device_scales(a, "encode");
    const uint32_t random_mask = detail::random_mask_of(a);
    const cudaStream_t stream = static_cast<cudaStream_t>(a.cuda_stream);
    const uint64_t groups = group_count(a.offset, a.count);
    if (a.device_counts != nullptr) check_device_pointer(a.device_counts, 2, "encode: device_counts");
    const scratch tally(stream);
    unsigned long long* counts =
        a.device_counts != nullptr ? reinterpret_cast<unsigned long long*>(a.device_counts) : tally.counts();
    detail::dispatch_modes(a.rounding, a.overflow, [&](auto r, auto o) {
        constexpr altgrad_rounding R = decltype(r)::value;
        constexpr altgrad_overflow O = decltype(o)::value;
        auto run = [&](auto* codes) {
            using Code = std::remove_pointer_t<decltype(codes)>;
            encode_kernel<K, R, O, Code><<<grid_for(groups), kThreads, 0, stream>>>(
                k, a.input, codes, a.count, scales, a.seed, a.offset, random_mask, groups, counts,
                tally.first_bad());
        };
        if (code_bytes == 1) run(static_cast<uint8_t*>(a.codes));
        else if (code_bytes == 2) run(static_cast<uint16_t*>(a.codes));
        else run(static_cast<uint32_t*>(a.codes));
    });
    check(cudaGetLastError(), "encode kernel launch");
    unsigned long long host[3];
    tally.read(host);  // waits: a NaN the format cannot hold must be reported
    if (a.device_counts == nullptr) {
        a.overflow_count = host[0];
        a.underflow_count = host[1];
    }
    if (host[2] != static_cast<unsigned long long>(kNoElement))
        throw plugin_error(ALTGRAD_STATUS_NOT_REPRESENTABLE, "encode: element " + std::to_string(host[2]) +
                                                                 " is NaN and this format has no NaN code");
}

template <class K>
void decode(const K& k, altgrad_decode_args& a, uint32_t code_bytes, uint32_t total_bits) {
    static_assert(std::is_trivially_copyable<K>::value, "a format's kernel() must be trivially copyable");
    if (a.count == 0) return;
    const device_scope device(a.device_index);
    check_device_pointer(a.codes, a.count, "decode: codes");
    check_device_pointer(a.output, a.count, "decode: output");
    const scale_source scales = device_scales(a, "decode");
    const cudaStream_t stream = static_cast<cudaStream_t>(a.cuda_stream);
    const uint64_t limit = uint64_t{1} << total_bits;
    const scratch tally(stream);
    auto run = [&](const auto* codes) {
        using Code = std::remove_const_t<std::remove_pointer_t<decltype(codes)>>;
        decode_kernel<K, Code><<<grid_for((a.count + 3) / 4), kThreads, 0, stream>>>(
            k, codes, a.output, a.count, scales, limit, tally.first_bad());
    };
    if (code_bytes == 1) run(static_cast<const uint8_t*>(a.codes));
    else if (code_bytes == 2) run(static_cast<const uint16_t*>(a.codes));
    else run(static_cast<const uint32_t*>(a.codes));
    check(cudaGetLastError(), "decode kernel launch");
    unsigned long long host[3];
    tally.read(host);
    if (host[2] != static_cast<unsigned long long>(kNoElement))
        detail::invalid("decode: the code at element " + std::to_string(host[2]) +
                        " has bits above total_bits");
}

// ---- Block-scaled quantize with the scales derived on the device ----

// Call-relative group g of a call of n elements (elements [4g, 4g + 4)): how
// many of its lanes lie in the call, and their values (0 past the end), by one
// quad load where `quads` (the buffer is 16-byte aligned) and all four do.
__device__ __forceinline__ quad load_group(const float* x, size_t n, uint64_t g, bool quads,
                                           unsigned& present) {
    const uint64_t first = 4u * g;
    present = first >= n ? 0u : n - first >= 4u ? 4u : static_cast<unsigned>(n - first);
    if (quads && present == 4u) return load_quad(x + first);
    quad q;
    for (unsigned i = 0; i < 4; ++i) q.v[i] = i < present ? x[first + i] : 0.0f;
    return q;
}
// Its `present` lanes, written back the same way.
__device__ __forceinline__ void store_group(float* y, uint64_t g, bool quads, unsigned present,
                                            const quad& q) {
    const uint64_t first = 4u * g;
    if (quads && present == 4u) store_quad(y + first, q);
    else
        for (unsigned i = 0; i < present; ++i) y[first + i] = q.v[i];
}

// Thread t does call-relative groups t, t + S, ... (elements [4g, 4g + 4)),
// two per step. The lanes of a warp hold 32 consecutive groups, so a block of
// 2^block_lanes_log2 groups lies in aligned lanes of one warp: its amax is
// their maximum by shuffles, then every lane of it takes the block's scale.
// The loop runs while the warp's first group is in the call (a lane past the
// end holds amax 0 and writes nothing), so every lane takes every shuffle.
template <class K, class G, altgrad_rounding R, altgrad_overflow O>
__global__ void __launch_bounds__(kThreads)
    block_scaled_kernel(K k, block_scale_recipe<G> recipe, const float* in, float* out, size_t n,
                        uint32_t block_lanes_log2, bool quads, uint64_t seed, uint64_t offset,
                        uint32_t random_mask, const uint32_t* tensor_amax_bits, float* scales,
                        block_tally* tally) {
    const uint64_t groups = (n + 3) / 4;
    const unsigned lane = threadIdx.x & 31u, block_lanes = 1u << block_lanes_log2;
    const tensor_scale t = tensor_scale_of(recipe, tensor_amax_bits != nullptr ? *tensor_amax_bits : 0u);
    element_counts c;
    unsigned long long blocks[3] = {0, 0, 0};  // saturated, underflowed, neutral
    uint32_t amax = 0, largest_s = 0, smallest_s = ~0u;
    const uint64_t stride = uint64_t{gridDim.x} * blockDim.x;
    for (uint64_t g = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; g - lane < groups; g += 2 * stride) {
        const uint64_t pair[2] = {g, g + stride};
        quad x[2];
        unsigned present[2];
#pragma unroll
        for (int j = 0; j < 2; ++j) x[j] = load_group(in, n, pair[j], quads, present[j]);
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            if (pair[j] - lane >= groups) break;  // the whole warp is past the end
            uint32_t block_amax = quad_amax_bits(x[j]);
            for (unsigned d = 1; d < block_lanes; d *= 2) {
                const uint32_t other = __shfl_xor_sync(0xFFFFFFFFu, block_amax, d);
                block_amax = other > block_amax ? other : block_amax;
            }
            if (present[j] == 0) continue;
            block_scale b;
            const quad y = quantize_block_group<K, G, R, O>(k, recipe, t, x[j], present[j], block_amax, seed,
                                                            offset, random_mask, pair[j], b, c);
            store_group(out, pair[j], quads, present[j], y);
            if ((pair[j] & (block_lanes - 1u)) != 0) continue;  // the block's first lane tallies it
            if (scales != nullptr) scales[pair[j] >> block_lanes_log2] = b.scale;
            blocks[0] += b.saturated, blocks[1] += b.underflowed, blocks[2] += b.neutral;
            amax = block_amax > amax ? block_amax : amax;
            if (!b.neutral) {
                const uint32_t s_bits = float_bits(b.scale);
                largest_s = s_bits > largest_s ? s_bits : largest_s;
                smallest_s = s_bits < smallest_s ? s_bits : smallest_s;
            }
        }
    }
    const unsigned long long sums[block_tally::kCounts] = {c.overflow, c.underflow, blocks[0], blocks[1],
                                                           blocks[2]};
    add_over_block<block_tally::kCounts>(sums, tally->counts);
    combine_over_block<true>(amax, &tally->amax_bits);
    combine_over_block<true>(largest_s, &tally->largest_scale_bits);
    combine_over_block<false>(smallest_s, &tally->smallest_scale_bits);
}

// The largest |x| of x[0, n) as float bits (a NaN wins), combined into
// *amax_bits by atomicMax.
__global__ void __launch_bounds__(kThreads)
    amax_kernel(const float* x, size_t n, bool quads, uint32_t* amax_bits) {
    const uint64_t groups = (n + 3) / 4, stride = uint64_t{gridDim.x} * blockDim.x;
    uint32_t m = 0;
    for (uint64_t g = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; g < groups; g += 2 * stride) {
        const uint64_t pair[2] = {g, g + stride};
        quad v[2];
        unsigned present[2];
#pragma unroll
        for (int j = 0; j < 2; ++j) v[j] = load_group(x, n, pair[j], quads, present[j]);
        const uint32_t a = quad_amax_bits(v[0]), b = quad_amax_bits(v[1]);
        m = a > m ? a : m;
        m = b > m ? b : m;
    }
    combine_over_block<true>(m, amax_bits);
}

inline bool aligned_16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Enqueue the largest |x| of device memory x[0, n) into *amax_bits (device
// memory, combined by atomicMax: start it at 0), as float bits: two_level's
// tensor amax.
inline void tensor_amax(const float* x, size_t n, uint32_t* amax_bits, cudaStream_t stream) {
    if (n == 0) return;
    check_device_pointer(x, n, "tensor_amax: x");
    check_device_pointer(amax_bits, 1, "tensor_amax: amax_bits");
    amax_kernel<<<resident_grid(amax_kernel, (n + 3) / 4), kThreads, 0, stream>>>(x, n, aligned_16(x),
                                                                                  amax_bits);
    check(cudaGetLastError(), "amax kernel launch");
}

// Enqueue a block-scaled quantize whose scales the device derives, on the
// current device: each block's amax, its scale by the recipe
// (block_recipe_on_powers_of_two, two_level_recipe; element_groups.hpp),
// the elements quantized by the element format's kernel k, as a block-scaled
// call with those scales would. Asynchronous: the tallies are added to
// a.tally. Throws plugin_error (INVALID_ARGUMENT) for what it cannot do.
template <class K, class G>
void quantize_with_block_scales(const K& k, const block_scale_recipe<G>& recipe, const block_scaled_args& a) {
    static_assert(std::is_trivially_copyable<K>::value && std::is_trivially_copyable<G>::value,
                  "kernels take the element format and the grid by value");
    const size_t bs = a.block_size;
    if (bs < 4 || bs > 128 || (bs & (bs - 1)) != 0)
        detail::invalid("block scales on the device: block_size must be a power of two in 4 .. 128, got " +
                        std::to_string(bs));
    if (a.tally == nullptr) detail::invalid("block scales on the device: tally is NULL");
    if (recipe.rule == block_scale_rule::two_level && a.tensor_amax_bits == nullptr)
        detail::invalid("block scales on the device: two_level needs the tensor's amax (tensor_amax_bits)");
    if (a.random_bits > 32) detail::invalid("random_bits " + std::to_string(a.random_bits) + " is not 0..32");
    if (a.count == 0) return;
    if (a.output != a.input && a.output < a.input + a.count && a.input < a.output + a.count)
        detail::invalid("block scales on the device: output overlaps input without being the same buffer");
    check_device_pointer(a.input, a.count, "block scales on the device: input");
    check_device_pointer(a.output, a.count, "block scales on the device: output");
    check_device_pointer(a.tally, 1, "block scales on the device: tally");
    if (a.scales != nullptr) check_device_pointer(a.scales, block_count(a.count, bs), "block scales: scales");
    const uint64_t groups = (a.count + 3) / 4;
    const bool quads = aligned_16(a.input) && aligned_16(a.output);
    const uint32_t lanes_log2 = block_shift_of(bs / 4);
    detail::dispatch_modes(a.rounding, a.overflow, [&](auto r, auto o) {
        constexpr altgrad_rounding R = decltype(r)::value;
        constexpr altgrad_overflow O = decltype(o)::value;
        const auto kernel = block_scaled_kernel<K, G, R, O>;
        kernel<<<resident_grid(kernel, groups), kThreads, 0, static_cast<cudaStream_t>(a.cuda_stream)>>>(
            k, recipe, a.input, a.output, a.count, lanes_log2, quads, a.seed, a.offset,
            random_bits_mask(a.random_bits), a.tensor_amax_bits, a.scales, a.tally);
    });
    check(cudaGetLastError(), "block-scaled quantize kernel launch");
}

}  // namespace altgrad::sdk::cuda
