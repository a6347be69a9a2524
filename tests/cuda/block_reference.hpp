// The host's block-scaled quantize, which the device's (quantize_with_block_scales,
// cuda_kernels.cuh) must equal bit for bit: quant::quantize_blocked, the code the
// trainer, the CLI and Python run on the CPU (each block's amax, its scale by
// scales_from_amaxes, the bundled plugin's block-scaled call), and the comparison of
// a result with it. Used by the CPU test of the kernels' per-thread code
// (block_groups_test.cpp) and by the GPU test (cuda_block_scaled_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <altgrad/sdk/call_args.hpp>
#include <altgrad/sdk/element_groups.hpp>

#include "plugins/format_handle.hpp"
#include "quant/block_scales.hpp"

namespace block_reference {

namespace quant = altgrad::host::quant;

// A published block-scaled recipe: its element format and scale format (bundled plugins), its
// block and rule.
struct recipe_spec {
    std::string name;  // device_recipes::name_of's
    std::string element, scale_format;
    size_t block_size;
    quant::scale_rule rule;
};
// MXFP8 (E4M3 elements, E8M0 scales per 32) by OCP MX's rule and by TransformerEngine's;
// NVFP4 (E2M1 elements, E4M3 scales per 16 under a tensor scale).
const std::vector<recipe_spec>& published();

// The bundled plugin of that name, loaded once.
std::shared_ptr<const altgrad::host::format_handle> bundled(const std::string& name);
// The host's grid of a scale format (scale_grid_named), made once.
const quant::scale_grid& grid_of(const std::string& scale_format);

struct result {
    std::vector<float> out, scales;  // scales: each block's encode scale s
    uint64_t overflow = 0, underflow = 0;
    quant::block_scale_stats stats;
};

// x through the recipe on the host, one row (blocks along it, the last perhaps short),
// m's rounding, overflow, seed, offset and random bits.
result on_host(const recipe_spec& r, const std::vector<float>& x, const altgrad::sdk::conversion_mode& m);

// Every rounding and overflow mode, seed fixed, from global index offset; an odd offset with
// the top 5 random bits only (ABI 1.4's random_bits).
std::vector<altgrad::sdk::conversion_mode> modes_at(uint64_t offset);
std::string describe(const altgrad::sdk::conversion_mode& m);

// The host's block_scale_stats of a call of `blocks` blocks from a device tally.
quant::block_scale_stats stats_of(const altgrad::sdk::block_tally& t, size_t blocks);

// Every value (any NaN for NaN), scale, count and stat equal.
::testing::AssertionResult same_result(const std::vector<float>& x, const result& want, const result& got);

// n inputs that give blocks of every kind: values with 16 random significant bits at a
// magnitude per 16 elements, blocks of zeros, float32 subnormals, E2M1 and E4M3 ties after
// scaling, blocks whose amax is a power of two or M times one. wide: magnitudes from 2^-140 to
// 2^120 and blocks with a NaN or an Inf (the tensor's amax is then NaN: two_level's g = 1);
// else 2^-12 to 2^12, all finite (a finite g, as in training).
std::vector<float> sample_inputs(size_t n, uint64_t seed, bool wide = true);

}  // namespace block_reference
