// sm89_mma_fp8: Ada's FP8 warp MMA, mma.sync .m16n8k32 with E4M3 or E5M2
// operands, which runs as two fused dot-adds of 16 products in sequence
// (the second onto the first's result), each aligning to the largest exponent,
// truncating to 13 fractional bits and truncating its float32 result to 13
// (E8M13; FP16 accumulators round to FP16). MMA-Sim (Xie et al., arXiv
// 2511.10909), MMASim on Ada Lovelace; not checked on hardware here.
#include <altgrad/sdk/accumulator_plugin.hpp>

namespace {

altgrad::sdk::instruction_model make(const altgrad::sdk::param_view& p) {
    altgrad::sdk::instruction i;
    i.depth = 32;
    i.fraction_bits = 13;
    i.halves = 2;
    i.output = altgrad::sdk::accumulator_output(p, ALTGRAD_ACC_OUTPUT_E8M13);
    return altgrad::sdk::instruction_model(i);
}

}  // namespace

// The name, version and description are manifest.toml's.
ALTGRAD_ACCUMULATOR_PLUGIN_WITH_PARAMS(make, &altgrad::sdk::kAccumulatorParam, 1)
