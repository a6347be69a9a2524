// Test plugin: E4M3 whose quantize sends the representable input 2.0 to the
// next code up, 2.25, so q(q(x)) != q(x) for every x that rounds to 2.0. The
// kit's quantize.idempotent must fail.
#include "../broken_common.hpp"

namespace {
struct not_idempotent : broken::e4m3 {
    template <altgrad_rounding R, altgrad_overflow O>
    uint32_t quantize_bits(uint32_t bits, uint32_t random, element_counts& counts) const {
        if (bits == float_bits(2.0f)) return float_bits(2.25f);
        return f_.template quantize_bits<R, O>(bits, random, counts);
    }
};
}  // namespace

BROKEN_E4M3_PLUGIN("broken_idempotent", not_idempotent,
                   "Test plugin: E4M3 sending the representable 2.0 to the next code up")
