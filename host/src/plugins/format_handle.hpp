// A created format-plugin instance, from the host's side: creation with
// validated parameters, the checked format info, and quantize / encode /
// decode calls that turn a plugin's status into a host::error naming the
// plugin. Thread-safe like the ABI promises: many threads may call quantize on
// one handle with distinct buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <altgrad/altgrad.h>

#include "plugins/loader.hpp"

namespace altgrad::host {

struct quantize_options {
    altgrad_rounding rounding = ALTGRAD_ROUND_NEAREST_EVEN;
    altgrad_overflow overflow = ALTGRAD_OVERFLOW_SATURATE;
    float scale = 1.0f;
    uint64_t seed = 0;
    uint64_t offset = 0;
    // Where the buffers live. CUDA work goes on the device's default stream
    // (cuda_stream NULL), which is LibTorch's current stream: the host never
    // sets another, so plugin kernels and LibTorch's stay in order.
    altgrad_memory_kind memory = ALTGRAD_MEMORY_HOST;
    int32_t device_index = 0;
};

struct quantize_counts {
    uint64_t overflow = 0;
    uint64_t underflow = 0;
};

class format_handle {
public:
    // Create an instance of `plugin` (a format plugin) with user parameters
    // (key -> text); `where` names their source in errors.
    static std::shared_ptr<format_handle> create(std::shared_ptr<const loaded_plugin> plugin,
                                                 const std::map<std::string, std::string>& params = {},
                                                 const std::string& where = "--param");
    ~format_handle();
    format_handle(const format_handle&) = delete;
    format_handle& operator=(const format_handle&) = delete;

    const std::string& name() const { return plugin_->info.name; }
    const altgrad_format_info& info() const { return info_; }
    const loaded_plugin& plugin() const { return *plugin_; }
    altgrad_format_ref ref() const;
    // Whether the plugin takes buffers of this kind (info().memory_kinds).
    bool accepts(altgrad_memory_kind memory) const { return (info_.memory_kinds & (1u << memory)) != 0; }

    quantize_counts quantize(const float* in, float* out, size_t n, const quantize_options& o) const;
    quantize_counts encode(const float* in, void* codes, size_t n, const quantize_options& o) const;
    void decode(const void* codes, float* out, size_t n, float scale = 1.0f) const;
    // The value of every code, in code order (formats of at most 16 bits).
    std::vector<float> decode_all_codes() const;

private:
    format_handle() = default;
    [[noreturn]] void fail(const char* call, altgrad_status s, const altgrad_error& e) const;

    std::shared_ptr<const loaded_plugin> plugin_;  // keeps the code loaded
    const altgrad_format_vtable* vtable_ = nullptr;
    altgrad_format* instance_ = nullptr;
    altgrad_format_info info_{};
};

const char* status_name(altgrad_status s);

}  // namespace altgrad::host
