#include "plugins/transform_handle.hpp"

#include <altgrad/sdk/call_args.hpp>

#include "plugins/call_record.hpp"
#include "util/abi_names.hpp"

namespace altgrad::host {

transform_handle::transform_handle(std::shared_ptr<const loaded_plugin> plugin,
                                   const host::given_params& params, const std::string& where)
    : plugin_instance(std::move(plugin), params, where) {
    info_.struct_size = sizeof info_;
    call("get_info", vtable().get_info, &info_);
    // Checks a host relies on later (abi/transform.h).
    if (info_.block_size == 0) bad("get_info", "block_size is 0");
    if (info_.self_inverse > 1 || info_.uses_seed > 1)
        bad("get_info", "self_inverse and uses_seed must be 0 or 1");
    if ((info_.memory_kinds & (1u << ALTGRAD_MEMORY_HOST)) == 0) bad("get_info", "host memory is required");
}

void transform_handle::apply(const float* in, float* out, size_t rows, size_t cols, uint64_t seed,
                             bool inverse, int32_t cuda_device) const {
    altgrad_transform_args a{};
    a.struct_size = sizeof a;
    a.input = in;
    a.output = out;
    a.rows = rows;
    a.cols = cols;
    a.seed = seed;
    a.inverse = inverse ? 1u : 0u;
    a.memory = cuda_device >= 0 ? ALTGRAD_MEMORY_CUDA : ALTGRAD_MEMORY_HOST;
    a.device_index = cuda_device >= 0 ? cuda_device : 0;
    call("apply", vtable().apply, &a);
}

altgrad_status transform_handle::apply_raw(const altgrad_transform_args& args, std::string& message) const {
    altgrad_error e = sdk::blank_error();
    const noted_call noted(name(), "apply");
    const altgrad_status s = vtable().apply(instance(), &args, &e);
    message = s == ALTGRAD_STATUS_OK ? std::string() : sdk::error_message(e);
    return s;
}

}  // namespace altgrad::host
