// A created transform-plugin instance (ABI 1.4), from the host's side: the
// checked transform info and apply calls that turn a plugin's status into a
// host::error naming the plugin. Creation, ownership and errors are
// plugin_instance's. Thread-safe like the ABI promises: many threads may call
// apply on one handle with distinct output buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include <altgrad/altgrad.h>

#include "plugins/loader.hpp"
#include "plugins/plugin_instance.hpp"

namespace altgrad::host {

class transform_handle : public plugin_instance<transform_handle, altgrad_transform_vtable> {
public:
    const altgrad_transform_info& info() const { return info_; }

    // Transform each of `rows` rows of `cols` floats (row-major) from `in`
    // into `out` (which may equal `in`); inverse applies T^-1. cols must be a
    // multiple of info().block_size. Host memory, or with cuda_device >= 0
    // memory of that GPU, the work enqueued on its default stream (LibTorch's
    // current one, as the format calls': docs/cuda.md), which the plugin
    // must list (accepts). Throws host::error "plugin 'NAME': apply failed
    // (STATUS): MESSAGE" when the plugin refuses.
    void apply(const float* in, float* out, size_t rows, size_t cols, uint64_t seed, bool inverse,
               int32_t cuda_device = -1) const;
    bool accepts(altgrad_memory_kind m) const { return (info_.memory_kinds & (1u << m)) != 0; }

    // The same call with an args struct the caller filled (the conformance
    // kit's bad arguments); the plugin's status, its message in `message`.
    altgrad_status apply_raw(const altgrad_transform_args& args, std::string& message) const;

private:
    friend plugin_instance;
    transform_handle(std::shared_ptr<const loaded_plugin> plugin, const host::given_params& params,
                     const std::string& where);

    altgrad_transform_info info_{};
};

}  // namespace altgrad::host
