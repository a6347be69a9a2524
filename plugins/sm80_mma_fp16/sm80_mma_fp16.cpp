// sm80_mma_fp16: Ampere's half-precision warp MMA, mma.sync .m16n8k16 with
// FP16 or BF16 operands, which runs as two fused dot-adds of 8 products in
// sequence (the second onto the first's result), each aligning to the largest
// exponent, truncating to 24 fractional bits and truncating to float32 (or
// rounding to FP16 with FP16 accumulators). MMA-Sim (Xie et al., arXiv
// 2511.10909), MMASim on Ampere; not checked on hardware here.
#include <altgrad/sdk/accumulator_plugin.hpp>

namespace {

altgrad::sdk::instruction_model make(const altgrad::sdk::param_view& p) {
    altgrad::sdk::instruction i;
    i.depth = 16;
    i.fraction_bits = 24;
    i.halves = 2;
    i.output = altgrad::sdk::accumulator_output(p, ALTGRAD_ACC_OUTPUT_FLOAT32);
    return altgrad::sdk::instruction_model(i);
}

}  // namespace

// The name, version and description are manifest.toml's.
ALTGRAD_ACCUMULATOR_PLUGIN_WITH_PARAMS(make, &altgrad::sdk::kAccumulatorParam, 1)
