// AltGrad SDK: where an element's scale comes from in a format call.
//
// A call has one scale for every element, or (ABI 1.2 block scaling) one
// scale per block of block_size consecutive elements, element i taking
// block_scales[i / block_size] (abi/format.h states the rule). scale_source
// holds either, so the element loops of the CPU adapter and of the CUDA
// kernels ask one question, "the scale of element i", and a block-scaled call
// is by construction the same as one call per block.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include <altgrad/abi/format.h>
#include <altgrad/sdk/error.hpp>
#include <altgrad/sdk/rounding.hpp>

namespace altgrad::sdk {

// Blocks of block_size (>= 1) in count elements; the last may be short.
ALTGRAD_SDK_HD inline size_t block_count(size_t count, size_t block_size) {
    return count == 0 ? 0 : (count - 1) / block_size + 1;
}

// Trivially copyable, so a CUDA kernel takes it by value. block_scales points
// into the call's memory (host or device, as the data).
struct scale_source {
    float scale = 1.0f;                   // every element's scale when block_scales is NULL
    const float* block_scales = nullptr;  // or one scale per block
    size_t block_size = 0;                // >= 1 when block_scales is set

    ALTGRAD_SDK_HD bool per_block() const { return block_scales != nullptr; }
    ALTGRAD_SDK_HD float at(size_t i) const {
        return block_scales != nullptr ? block_scales[i / block_size] : scale;
    }
};

// The scales of a quantize, encode or decode call: the block fields are read
// only when the caller's struct has them (a 1.0/1.1 host's struct ends
// before them: one scale then).
template <class Args>
scale_source scales_of(const Args& a) {
    if (ALTGRAD_STRUCT_HAS(&a, Args, block_size) && a.block_scales != nullptr)
        return {a.scale, a.block_scales, a.block_size};
    return {a.scale, nullptr, 0};
}

// Checks a call's scales, as the ABI asks: block_size >= 1 and, for host
// memory, every block scale finite and > 0 (device-memory scales are the
// host's to check: reading them back would stall the call). Throws
// INVALID_ARGUMENT naming the first bad block, its message after `call`
// (e.g. "decode: ").
inline void check_scales(const scale_source& s, size_t count, bool scales_in_host_memory, const char* call) {
    auto refuse = [&](const std::string& why) {
        throw plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT, std::string(call) + why);
    };
    if (!s.per_block()) {
        if (!(std::isfinite(s.scale) && s.scale > 0.0f))
            refuse("scale must be finite and > 0, got " + std::to_string(s.scale));
        return;
    }
    if (s.block_size == 0) refuse("block_size is 0 with block_scales set");
    if (!scales_in_host_memory) return;
    const size_t blocks = block_count(count, s.block_size);
    // One pass without an early exit vectorizes; the search for the first bad one runs only then.
    uint32_t bad = 0;
    for (size_t b = 0; b < blocks; ++b)
        bad |= static_cast<uint32_t>(!positive_finite_bits(float_bits(s.block_scales[b])));
    if (bad == 0) return;
    for (size_t b = 0; b < blocks; ++b)
        if (!positive_finite_bits(float_bits(s.block_scales[b])))
            refuse("block scale " + std::to_string(b) + " must be finite and > 0, got " +
                   std::to_string(s.block_scales[b]));
}

}  // namespace altgrad::sdk
