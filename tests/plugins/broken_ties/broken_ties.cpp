// Test plugin: E4M3 whose nearest-even rounds exact ties away from zero. It
// borrows stochastic rounding with the random bits fixed at 2^31: the step
// away is taken exactly when the dropped fraction is >= 1/2. The kit's
// quantize.ties_to_even must fail.
#include "../broken_common.hpp"

namespace {
struct ties_away : broken::e4m3 {
    template <altgrad_rounding R, altgrad_overflow O>
    uint32_t quantize_bits(uint32_t bits, uint32_t random, element_counts& counts) const {
        if constexpr (R == ALTGRAD_ROUND_NEAREST_EVEN)
            return f_.template quantize_bits<ALTGRAD_ROUND_STOCHASTIC, O>(bits, 0x80000000u, counts);
        return f_.template quantize_bits<R, O>(bits, random, counts);
    }
};
}  // namespace

BROKEN_E4M3_PLUGIN("broken_ties", ties_away,
                   "Test plugin: E4M3 rounding ties away from zero under nearest-even")
