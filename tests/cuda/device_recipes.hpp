// MXFP8 and NVFP4 quantized with their block scales derived on the GPU: the
// SDK's quantize_with_block_scales and tensor_amax (cuda_kernels.cuh)
// instantiated for the published recipes' formats, behind plain functions so
// that code the C++ compiler builds (tests/cuda, benchmarks/quantize_bench.cpp)
// can call them. nvcc compiles device_recipes.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include <altgrad/abi/format.h>
#include <altgrad/sdk/element_groups.hpp>

namespace device_recipes {

enum class recipe {
    mxfp8_floor,     // E4M3 elements, E8M0 scales per 32, OCP MX's rule (mx_floor)
    mxfp8_round_up,  // the same with TransformerEngine's rule (round_up: nothing clips)
    nvfp4            // E2M1 elements, E4M3 scales per 16 under a float32 tensor scale (two_level)
};
const char* name_of(recipe r);
size_t block_size_of(recipe r);

// Enqueue a's call on its stream (asynchronous) in the recipe's blocks (a.block_size is
// replaced). NVFP4 first takes the tensor's amax into *a.tensor_amax_bits (a device word)
// unless amax_given, when that word holds it already. Throws altgrad::sdk::plugin_error.
void enqueue(recipe r, altgrad::sdk::block_scaled_args a, bool amax_given = false);

// Enqueue the largest |x| of device memory x[0, n) into *amax_bits (device memory), as float
// bits (a NaN wins): NVFP4's first pass.
void tensor_amax(const float* x, size_t n, uint32_t* amax_bits, cudaStream_t stream);

}  // namespace device_recipes
