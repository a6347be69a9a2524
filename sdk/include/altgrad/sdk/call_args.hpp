// AltGrad SDK: what a caller of a plugin fills in, built in one place for
// every caller: the host, a diagnostic that quantizes through a tensor's
// format (diagnostic_plugin.hpp), the tests' own loader.
//
//  - conversion_mode: everything a quantize or encode call takes besides the
//    buffers (rounding, overflow, scale or block scales, seed, offset, random
//    bits, where the buffers live).
//  - quantize_args / encode_args / decode_args: the ABI's args structs from a
//    mode and the caller's buffers, zeroed first (results, cuda_stream NULL:
//    the device's default stream, device_counts NULL: synchronous counts).
//    The structs point at the caller's buffers and own nothing.
//  - dot_add_operands / accumulator_args (ABI 1.5): what an accumulator's
//    dot_add multiplies, and the args struct from it (host memory).
//  - blank_error / error_message: the caller-owned altgrad_error a call fills,
//    and its message read back safely (a plugin may leave it empty or, broken,
//    without a NUL).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include <altgrad/altgrad.h>

namespace altgrad::sdk {

struct conversion_mode {
    altgrad_rounding rounding = ALTGRAD_ROUND_NEAREST_EVEN;
    altgrad_overflow overflow = ALTGRAD_OVERFLOW_SATURATE;
    float scale = 1.0f;
    uint64_t seed = 0;  // stochastic rounding: element i draws from (seed, offset + i)
    uint64_t offset = 0;
    altgrad_memory_kind memory = ALTGRAD_MEMORY_HOST;
    int32_t device_index = 0;  // CUDA: the device the buffers are on
    // ABI 1.2 block scaling (format.h): one scale per block_size elements,
    // used instead of `scale` when set; only for plugins of ABI >= 1.2.
    const float* block_scales = nullptr;
    size_t block_size = 0;
    // ABI 1.4: stochastic rounding uses the top random_bits of each element's
    // 32 (format.h); 0 and 32: all of them. Only for plugins that declare
    // ALTGRAD_FORMAT_CAPABILITY_RANDOM_BITS.
    uint32_t random_bits = 0;
};

namespace detail {
// The fields quantize and encode share (their structs differ only in the
// output buffer's name and type).
template <class Args>
Args conversion_args(const float* in, size_t n, const conversion_mode& m) {
    Args a;
    std::memset(&a, 0, sizeof a);
    a.struct_size = sizeof a;
    a.input = in;
    a.count = n;
    a.scale = m.scale;
    a.rounding = m.rounding;
    a.overflow = m.overflow;
    a.seed = m.seed;
    a.offset = m.offset;
    a.memory = m.memory;
    a.device_index = m.device_index;
    a.block_scales = m.block_scales;
    a.block_size = m.block_size;
    a.random_bits = m.random_bits;
    return a;
}
}  // namespace detail

inline altgrad_quantize_args quantize_args(const float* in, float* out, size_t n,
                                           const conversion_mode& m = {}) {
    altgrad_quantize_args a = detail::conversion_args<altgrad_quantize_args>(in, n, m);
    a.output = out;
    return a;
}

inline altgrad_encode_args encode_args(const float* in, void* codes, size_t n,
                                       const conversion_mode& m = {}) {
    altgrad_encode_args a = detail::conversion_args<altgrad_encode_args>(in, n, m);
    a.codes = codes;
    return a;
}

// block_scales/block_size: ABI 1.2 block scaling, as in conversion_mode.
inline altgrad_decode_args decode_args(const void* codes, float* out, size_t n, float scale = 1.0f,
                                       altgrad_memory_kind memory = ALTGRAD_MEMORY_HOST,
                                       int32_t device_index = 0, const float* block_scales = nullptr,
                                       size_t block_size = 0) {
    altgrad_decode_args a;
    std::memset(&a, 0, sizeof a);
    a.struct_size = sizeof a;
    a.codes = codes;
    a.output = out;
    a.count = n;
    a.scale = scale;
    a.memory = memory;
    a.device_index = device_index;
    a.block_scales = block_scales;
    a.block_size = block_size;
    return a;
}

// What one accumulator instruction multiplies (abi/accumulator.h): a [m, k]
// and b [n, k] row-major, c and d [m, n] (d may be c), the operands' formats
// by their smallest normal exponents, and the block scales of scale_kind
// ([m, ceil(k / block)] and [n, ceil(k / block)]).
struct dot_add_operands {
    const float* a = nullptr;
    const float* b = nullptr;
    const float* c = nullptr;
    float* d = nullptr;
    size_t m = 0, n = 0, k = 0;
    int32_t a_min_exponent = -126, b_min_exponent = -126;
    altgrad_acc_scale_kind scale_kind = ALTGRAD_ACC_SCALE_NONE;
    const float* a_scales = nullptr;
    const float* b_scales = nullptr;
};

inline altgrad_accumulator_args accumulator_args(const dot_add_operands& o) {
    altgrad_accumulator_args a;
    std::memset(&a, 0, sizeof a);
    a.struct_size = sizeof a;
    a.a = o.a;
    a.b = o.b;
    a.c = o.c;
    a.d = o.d;
    a.m = o.m;
    a.n = o.n;
    a.k = o.k;
    a.a_min_exponent = o.a_min_exponent;
    a.b_min_exponent = o.b_min_exponent;
    a.scale_kind = o.scale_kind;
    a.a_scales = o.a_scales;
    a.b_scales = o.b_scales;
    a.memory = ALTGRAD_MEMORY_HOST;
    return a;
}

// An error object for one call: struct_size set, message empty.
inline altgrad_error blank_error() {
    altgrad_error e;
    std::memset(&e, 0, sizeof e);
    e.struct_size = sizeof e;
    return e;
}

// What a failed call wrote, or "no message" when it wrote nothing or no NUL
// within the capacity.
inline const char* error_message(const altgrad_error& e) {
    const bool terminated = std::memchr(e.message, '\0', sizeof e.message) != nullptr;
    return terminated && e.message[0] != '\0' ? e.message : "no message";
}

}  // namespace altgrad::sdk
