// Test plugin: E4M3 built for ABI 1.2 whose quantize ignores the block
// scales (it uses `scale` for every element), as a plugin that copied its
// loop from a 1.1 one might. Encode and decode are right, so only a check
// that compares a block-scaled quantize with one call per block sees it.
#include "../broken_common.hpp"

namespace {
altgrad_status quantize_one_scale(const altgrad_format* f, altgrad_quantize_args* a, altgrad_error* e) {
    if (a == nullptr) return broken::e4m3_adapter::quantize(f, a, e);
    altgrad_quantize_args one = *a;
    one.block_scales = nullptr;
    const altgrad_status s = broken::e4m3_adapter::quantize(f, &one, e);
    a->overflow_count = one.overflow_count;
    a->underflow_count = one.underflow_count;
    return s;
}
}  // namespace

BROKEN_E4M3_TABLE_PLUGIN("broken_block_scales", quantize, quantize_one_scale,
                         "Test plugin: E4M3 whose quantize ignores the block scales")
