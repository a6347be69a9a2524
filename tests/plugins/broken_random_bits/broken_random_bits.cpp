// Test plugin: E4M3 that declares ALTGRAD_FORMAT_CAPABILITY_RANDOM_BITS (the
// SDK adapter does) but whose quantize ignores random_bits, rounding with all
// 32 random bits whatever the call asks. Only the check that measures the
// rate of rounding away with few random bits sees it.
#include "../broken_common.hpp"

namespace {
altgrad_status quantize_all_bits(const altgrad_format* f, altgrad_quantize_args* a, altgrad_error* e) {
    if (a == nullptr) return broken::e4m3_adapter::quantize(f, a, e);
    altgrad_quantize_args all = *a;
    all.random_bits = 0;
    const altgrad_status s = broken::e4m3_adapter::quantize(f, &all, e);
    a->overflow_count = all.overflow_count;
    a->underflow_count = all.underflow_count;
    return s;
}
}  // namespace

BROKEN_E4M3_TABLE_PLUGIN("broken_random_bits", quantize, quantize_all_bits,
                         "Test plugin: E4M3 whose quantize ignores random_bits")
