// AltGrad SDK: the CUDA side of the format adapter (format_plugin.hpp).
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
//    bits, the element function) is in element_groups.hpp, which the CPU
//    tests run too; this file adds the loops over the groups, the loads and
//    stores, the tallies and the CUDA runtime calls.
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
// added once per block.
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

}  // namespace altgrad::sdk::cuda
