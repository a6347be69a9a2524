// Test plugin: E4M3 whose quantize sends every input in (1.5, 2) to 1.0, below
// q(1.5) = 1.5. The kit's quantize.monotone must fail.
#include "../broken_common.hpp"

namespace {
struct not_monotone : broken::e4m3 {
    template <altgrad_rounding R, altgrad_overflow O>
    uint32_t quantize_bits(uint32_t bits, uint32_t random, element_counts& counts) const {
        const float x = bits_float(bits);
        if (x > 1.5f && x < 2.0f) return float_bits(1.0f);
        return f_.template quantize_bits<R, O>(bits, random, counts);
    }
};
}  // namespace

BROKEN_E4M3_PLUGIN("broken_monotone", not_monotone, "Test plugin: E4M3 sending inputs in (1.5, 2) to 1.0")
