// sm100_tcgen05_mxf4nvf4: Blackwell's block-scaled FP4 tcgen05.mma
// .kind::mxf4nvf4 (E2M1 operands, k64): the products summed exactly in groups
// of 16, each group times its two scales' significands at their exponents
// (UE8M0 per 32 elements, MXFP4; or E4M3 by magnitude per 16, NVFP4), then
// the four groups and C aligned to the largest exponent, each truncated to 35
// fractional bits, the sum truncated to float32. MMA-Sim (Xie et al., arXiv
// 2511.10909), nv_fused_dot_add_with_block_scale; not checked on hardware here.
#include <altgrad/sdk/accumulator_plugin.hpp>

namespace {

altgrad::sdk::instruction_model make(const altgrad::sdk::param_view&) {
    altgrad::sdk::instruction i;
    i.depth = 64;
    i.group_size = 16;
    i.fraction_bits = 35;
    i.scale_kinds = (1u << ALTGRAD_ACC_SCALE_UE8M0_32) | (1u << ALTGRAD_ACC_SCALE_UE4M3_16);
    return altgrad::sdk::instruction_model(i);
}

}  // namespace

// The name, version and description are manifest.toml's.
ALTGRAD_ACCUMULATOR_PLUGIN(make)
