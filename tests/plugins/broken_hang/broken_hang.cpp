// Test plugin: E4M3 whose quantize loops forever when the (scaled) input is
// exactly 5.0. The kit's quantize.nearest must time out.
#include "../broken_common.hpp"

namespace {
volatile bool keep_looping = true;  // volatile: the loop is not optimised away

struct hangs : broken::e4m3 {
    template <altgrad_rounding R, altgrad_overflow O>
    uint32_t quantize_bits(uint32_t bits, uint32_t random, element_counts& counts) const {
        if (bits == float_bits(5.0f))
            while (keep_looping) {}
        return f_.template quantize_bits<R, O>(bits, random, counts);
    }
};
}  // namespace

BROKEN_E4M3_PLUGIN("broken_hang", hangs, "Test plugin: E4M3 whose quantize loops forever on input 5.0")
