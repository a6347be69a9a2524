// sm90_wgmma_fp16: Hopper's half-precision warpgroup MMA, wgmma.mma_async
// .m64nNk16 with FP16 or BF16 operands: 16 products and C aligned to the
// largest exponent, each truncated to 25 fractional bits, the sum truncated
// to float32 (or rounded to FP16 with FP16 accumulators). MMA-Sim (Xie et
// al., arXiv 2511.10909), WGMMASim; the BF16 case checked bit for bit against
// an H200 (docs/accumulation.md).
#include <altgrad/sdk/accumulator_plugin.hpp>

namespace {

altgrad::sdk::instruction_model make(const altgrad::sdk::param_view& p) {
    altgrad::sdk::instruction i;
    i.depth = 16;
    i.fraction_bits = 25;
    i.output = altgrad::sdk::accumulator_output(p, ALTGRAD_ACC_OUTPUT_FLOAT32);
    return altgrad::sdk::instruction_model(i);
}

}  // namespace

// The name, version and description are manifest.toml's.
ALTGRAD_ACCUMULATOR_PLUGIN_WITH_PARAMS(make, &altgrad::sdk::kAccumulatorParam, 1)
