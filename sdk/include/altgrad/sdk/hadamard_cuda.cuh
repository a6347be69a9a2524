// AltGrad SDK: the (randomised) Hadamard transform on CUDA buffers: the
// device path of the hadamard and random_hadamard plugins
// (transform_plugin.hpp, apply_cuda), compiled only by nvcc.
//
// One thread per block of d elements (d <= 128, a power of two): it loads the
// block, runs transform_block (hadamard.hpp: the signs, the butterflies in
// the host's order, the scale, all float32 with no addition fed by a
// rounded product) and stores it, so each element gets the host path's bits.
// The signs (at most 128) are drawn on the host and passed by value. The work
// is enqueued on the call's stream on its device; the call does not wait.
// Speed is not the aim yet: a thread's block is read element by element (not
// coalesced), which a shared-memory tile would fix.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include <altgrad/sdk/cuda_kernels.cuh>  // check, device_scope, kThreads
#include <altgrad/sdk/hadamard.hpp>

namespace altgrad::sdk::cuda {

constexpr uint32_t kMaxHadamardBlock = 128;

// The signs of one call, by value (a kernel argument of 512 bytes).
struct hadamard_signs_arg {
    float s[kMaxHadamardBlock];
};

__global__ void hadamard_kernel(float* x, size_t blocks, uint32_t d, hadamard_signs_arg signs, bool has_signs,
                                bool inverse, float scale) {
    float v[kMaxHadamardBlock];
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t b = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; b < blocks; b += stride) {
        float* block = x + b * d;
        for (uint32_t j = 0; j < d; ++j) v[j] = block[j];
        transform_block(v, d, has_signs ? signs.s : nullptr, inverse, scale);
        for (uint32_t j = 0; j < d; ++j) block[j] = v[j];
    }
}

// H_d diag(s) / sqrt(d) (or its inverse) in place on `blocks` consecutive
// blocks of d elements of device memory at x; `signs` (host memory, d of
// them) or null for the plain transform. Enqueued on `stream` of `device`.
inline void hadamard(float* x, size_t blocks, uint32_t d, const float* signs, bool inverse, int32_t device,
                     void* stream) {
    if (d == 0 || d > kMaxHadamardBlock)
        throw plugin_error(ALTGRAD_STATUS_INTERNAL, "hadamard: d out of range");
    if (blocks == 0) return;
    const device_scope on(device);
    hadamard_signs_arg arg{};
    if (signs != nullptr)
        for (uint32_t j = 0; j < d; ++j) arg.s[j] = signs[j];
    hadamard_kernel<<<grid_for(blocks), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        x, blocks, d, arg, signs != nullptr, inverse, hadamard_scale(d));
    check(cudaGetLastError(), "hadamard_kernel launch");
}

}  // namespace altgrad::sdk::cuda
