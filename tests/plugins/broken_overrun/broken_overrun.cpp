// Test plugin: E4M3 whose quantize writes one element past count (an
// off-by-one a hand-written loop makes). The kit's guard page after the output
// buffer must turn it into a crash naming the call, the buffer and the element.
#include "../broken_common.hpp"

namespace {
altgrad_status quantize_one_past(const altgrad_format* f, altgrad_quantize_args* a, altgrad_error* e) {
    const altgrad_status s = broken::e4m3_adapter::quantize(f, a, e);
    if (s == ALTGRAD_STATUS_OK && a->count > 0) a->output[a->count] = a->output[a->count - 1];
    return s;
}
}  // namespace

BROKEN_E4M3_TABLE_PLUGIN("broken_overrun", quantize, quantize_one_past,
                         "Test plugin: E4M3 whose quantize writes one element past count")
