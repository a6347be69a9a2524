// A created format-plugin instance, from the host's side: the checked format
// info, and quantize / encode / decode calls that turn a plugin's status into a
// host::error naming the plugin. Creation, ownership and errors are
// plugin_instance's. Thread-safe like the ABI promises: many threads may call
// quantize on one handle with distinct buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <altgrad/altgrad.h>
#include <altgrad/sdk/call_args.hpp>

#include "plugins/loader.hpp"
#include "plugins/plugin_instance.hpp"
#include "util/abi_names.hpp"  // status_name

namespace altgrad::host {

// Rounding, overflow, scale or block scales, seed, offset, random bits
// (random_bits: 1..32, 0 meaning 32) and where the buffers live. CUDA
// work goes on the device's default stream (cuda_stream NULL), which is
// LibTorch's current stream: the host never sets another, so plugin kernels
// and LibTorch's stay in order.
using quantize_options = sdk::conversion_mode;

struct quantize_counts {
    uint64_t overflow = 0;
    uint64_t underflow = 0;
};

class format_handle : public plugin_instance<format_handle, altgrad_format_vtable> {
public:
    const altgrad_format_info& info() const { return info_; }
    altgrad_format_ref ref() const;
    // Whether the plugin takes buffers of this kind (info().memory_kinds).
    bool accepts(altgrad_memory_kind memory) const { return (info_.memory_kinds & (1u << memory)) != 0; }

    // With o.block_scales set (ABI 1.2 block scaling), a plugin that does not
    // take them (takes_block_scales), which would read `scale` only, gets one
    // call per block instead: the same results, more calls. Its block scales
    // must then be in host memory (the host reads them); CUDA ones are
    // refused. Stochastic rounding with o.random_bits in 1..31 needs a plugin
    // that takes random bits (takes_random_bits): else a host::error naming
    // the plugin, never a silent 32.
    quantize_counts quantize(const float* in, float* out, size_t n, const quantize_options& o) const;
    quantize_counts encode(const float* in, void* codes, size_t n, const quantize_options& o) const;
    void decode(const void* codes, float* out, size_t n, float scale = 1.0f,
                const float* block_scales = nullptr, size_t block_size = 0) const;
    // Whether the plugin reads block scales itself: it declares
    // ALTGRAD_FORMAT_CAPABILITY_BLOCK_SCALES, or reports ABI 1.2 or 1.3, where
    // the version implied it (abi/format.h, Capabilities).
    bool takes_block_scales() const;
    // Whether it declares ALTGRAD_FORMAT_CAPABILITY_RANDOM_BITS.
    bool takes_random_bits() const;
    // The value of every code, in code order (formats of at most 16 bits).
    std::vector<float> decode_all_codes() const;

private:
    friend plugin_instance;
    format_handle(std::shared_ptr<const loaded_plugin> plugin, const host::given_params& params,
                  const std::string& where);

    // Calls call(first, count, options) once per block of o, each with its
    // block's scale and offset, and sums the counts (see quantize).
    template <class Call>
    quantize_counts for_each_block(const char* what, size_t n, const quantize_options& o, Call&& call) const;

    // Refuses o.random_bits beyond 32, or in 1..31 for stochastic rounding
    // through a plugin that does not take random bits.
    void check_random_bits(const char* what, const quantize_options& o) const;

    altgrad_format_info info_{};
};

}  // namespace altgrad::host
