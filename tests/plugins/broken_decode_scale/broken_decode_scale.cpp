// Test plugin: E4M3 whose decode ignores the scale (returns the code's value,
// not value / scale). Quantize and encode are right, so only a check that
// decodes with a scale other than 1 sees it.
#include "../broken_common.hpp"

namespace {
altgrad_status decode_unscaled(const altgrad_format* f, altgrad_decode_args* a, altgrad_error* e) {
    if (a == nullptr) return broken::e4m3_adapter::decode(f, a, e);
    altgrad_decode_args unscaled = *a;
    unscaled.scale = 1.0f;
    return broken::e4m3_adapter::decode(f, &unscaled, e);
}
}  // namespace

BROKEN_E4M3_TABLE_PLUGIN("broken_decode_scale", decode, decode_unscaled,
                         "Test plugin: E4M3 whose decode ignores the scale")
