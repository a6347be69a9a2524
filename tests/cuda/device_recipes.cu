#include "device_recipes.hpp"

#include <altgrad/sdk/exmy.hpp>
#include <altgrad/sdk/format_plugin.hpp>  // with nvcc: cuda_kernels.cuh

namespace device_recipes {

namespace sdk = altgrad::sdk;

namespace {

// The bundled plugins' definitions (plugins/e4m3, plugins/fp4_e2m1).
const sdk::exmy_format& e4m3() {
    static const sdk::exmy_format f({4, 3, 7, sdk::exmy_specials::finite_nan});
    return f;
}
const sdk::exmy_format& e2m1() {
    static const sdk::exmy_format f({2, 1, 1, sdk::exmy_specials::finite});
    return f;
}

}  // namespace

const char* name_of(recipe r) {
    switch (r) {
        case recipe::mxfp8_floor: return "mxfp8_floor";
        case recipe::mxfp8_round_up: return "mxfp8_round_up";
        case recipe::nvfp4: return "nvfp4";
    }
    return "?";
}

size_t block_size_of(recipe r) { return r == recipe::nvfp4 ? 16 : 32; }

void tensor_amax(const float* x, size_t n, uint32_t* amax_bits, cudaStream_t stream) {
    sdk::cuda::check(cudaMemsetAsync(amax_bits, 0, sizeof(uint32_t), stream), "cudaMemsetAsync");
    sdk::cuda::tensor_amax(x, n, amax_bits, stream);
}

void enqueue(recipe r, sdk::block_scaled_args a, bool amax_given) {
    a.block_size = block_size_of(r);
    if (r == recipe::nvfp4) {
        static const auto nvfp4 = sdk::two_level_recipe(e4m3(), e2m1().info().max_finite);
        if (a.tensor_amax_bits == nullptr)
            throw sdk::plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT, "nvfp4: tensor_amax_bits is NULL");
        if (!amax_given && a.count > 0)
            tensor_amax(a.input, a.count, a.tensor_amax_bits, static_cast<cudaStream_t>(a.cuda_stream));
        sdk::cuda::quantize_with_block_scales(e2m1().kernel(), nvfp4, a);
        return;
    }
    // E8M0's values: every power of two from 2^-127 to 2^127.
    static const auto floor = sdk::block_recipe_on_powers_of_two(sdk::block_scale_rule::mx_floor, -127, 127,
                                                                 e4m3().info().max_finite);
    static const auto round_up = sdk::block_recipe_on_powers_of_two(sdk::block_scale_rule::round_up, -127,
                                                                    127, e4m3().info().max_finite);
    sdk::cuda::quantize_with_block_scales(e4m3().kernel(), r == recipe::mxfp8_floor ? floor : round_up, a);
}

}  // namespace device_recipes
