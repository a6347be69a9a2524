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

#include "plugins/abi_names.hpp"  // status_name
#include "plugins/loader.hpp"
#include "plugins/plugin_instance.hpp"

namespace altgrad::host {

// Rounding, overflow, scale, seed, offset and where the buffers live. CUDA
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

    quantize_counts quantize(const float* in, float* out, size_t n, const quantize_options& o) const;
    quantize_counts encode(const float* in, void* codes, size_t n, const quantize_options& o) const;
    void decode(const void* codes, float* out, size_t n, float scale = 1.0f) const;
    // The value of every code, in code order (formats of at most 16 bits).
    std::vector<float> decode_all_codes() const;

private:
    friend plugin_instance;
    format_handle(std::shared_ptr<const loaded_plugin> plugin, const std::map<std::string, std::string>& params,
                  const std::string& where);

    altgrad_format_info info_{};
};

}  // namespace altgrad::host
