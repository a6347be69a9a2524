// sm100_tcgen05_mxf8f6f4: Blackwell's block-scaled tcgen05.mma
// .kind::mxf8f6f4 (MXFP8, MXFP6 or MXFP4 operands, k32, one UE8M0 scale per
// operand row of 32): each product's exponent takes both scales' exponents,
// then 32 products and C align to the largest exponent, each truncated to 25
// fractional bits, the sum truncated to float32. MMA-Sim (Xie et al., arXiv
// 2511.10909), TCGen05MMASim; not checked on hardware here.
#include <altgrad/sdk/accumulator_plugin.hpp>

namespace {

altgrad::sdk::instruction_model make(const altgrad::sdk::param_view&) {
    altgrad::sdk::instruction i;
    i.depth = 32;
    i.fraction_bits = 25;
    i.scale_kinds = (1u << ALTGRAD_ACC_SCALE_UE8M0_32);
    return altgrad::sdk::instruction_model(i);
}

}  // namespace

// The name, version and description are manifest.toml's.
ALTGRAD_ACCUMULATOR_PLUGIN(make)
