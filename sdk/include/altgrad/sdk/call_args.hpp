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
