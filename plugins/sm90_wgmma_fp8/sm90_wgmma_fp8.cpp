// sm90_wgmma_fp8: Hopper's FP8 warpgroup MMA, wgmma.mma_async .m64nNk32 with
// E4M3 or E5M2 operands: 32 products and C aligned to the largest exponent,
// each truncated to 13 fractional bits, and the sum truncated to 13 fractional
// bits too (E8M13) in a float32 accumulator; with FP16 accumulators rounded to
// FP16 instead. MMA-Sim (Xie et al., arXiv 2511.10909), WGMMASim, FP8 case;
// checked bit for bit against an H200 (docs/accumulation.md).
#include <altgrad/sdk/accumulator_plugin.hpp>

namespace {

altgrad::sdk::instruction_model make(const altgrad::sdk::param_view& p) {
    altgrad::sdk::instruction i;
    i.depth = 32;
    i.fraction_bits = 13;
    i.output = altgrad::sdk::accumulator_output(p, ALTGRAD_ACC_OUTPUT_E8M13);
    return altgrad::sdk::instruction_model(i);
}

}  // namespace

// The name, version and description are manifest.toml's.
ALTGRAD_ACCUMULATOR_PLUGIN_WITH_PARAMS(make, &altgrad::sdk::kAccumulatorParam, 1)
