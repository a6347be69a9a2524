// Test plugin: E4M3 whose quantize writes through a NULL pointer when the
// (scaled) input is exactly 3.0, killing its process with SIGSEGV. The kit's
// quantize.nearest must report it crashed, and the kit must go on.
#include "../broken_common.hpp"

namespace {
int* volatile null_pointer = nullptr;  // volatile: the compiler cannot see it is NULL

struct crashes : broken::e4m3 {
    template <altgrad_rounding R, altgrad_overflow O>
    uint32_t quantize_bits(uint32_t bits, uint32_t random, element_counts& counts) const {
        if (bits == float_bits(3.0f)) *null_pointer = 1;
        return f_.template quantize_bits<R, O>(bits, random, counts);
    }
};
}  // namespace

BROKEN_E4M3_PLUGIN("broken_crash", crashes,
                   "Test plugin: E4M3 whose quantize writes through NULL on input 3.0")
