// sm100_tcgen05_fp8: Blackwell's tcgen05.mma .kind::f8f6f4 without block
// scales (FP8, FP6 or FP4 operands, k32): 32 products and C aligned to the
// largest exponent, each truncated to 25 fractional bits, the sum truncated to
// float32 (or rounded to FP16 with FP16 accumulators). MMA-Sim (Xie et al.,
// arXiv 2511.10909), TCGen05MMASim; not checked on hardware here.
#include <altgrad/sdk/accumulator_plugin.hpp>

namespace {

altgrad::sdk::instruction_model make(const altgrad::sdk::param_view& p) {
    altgrad::sdk::instruction i;
    i.depth = 32;
    i.fraction_bits = 25;
    i.output = altgrad::sdk::accumulator_output(p, ALTGRAD_ACC_OUTPUT_FLOAT32);
    return altgrad::sdk::instruction_model(i);
}

}  // namespace

// The name, version and description are manifest.toml's.
ALTGRAD_ACCUMULATOR_PLUGIN_WITH_PARAMS(make, &altgrad::sdk::kAccumulatorParam, 1)
