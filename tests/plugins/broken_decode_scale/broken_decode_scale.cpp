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

const altgrad_format_vtable* table() {
    static const altgrad_format_vtable t = [] {
        altgrad_format_vtable v = *broken::e4m3_adapter::vtable();
        v.decode = decode_unscaled;
        return v;
    }();
    return &t;
}
}  // namespace

BROKEN_E4M3_TABLE_PLUGIN("broken_decode_scale", table, "Test plugin: E4M3 whose decode ignores the scale")
