// Test plugin: a correct Hadamard transform whose entry claims ABI 1.3, before
// transforms existed (an entry of 1.3 has no transform field). The host must
// refuse it rather than read the field.
#include <altgrad/sdk/hadamard.hpp>
#include <altgrad/sdk/transform_plugin.hpp>

namespace {

class hadamard16 {
public:
    altgrad_transform_info info() const {
        altgrad_transform_info i{};
        i.block_size = 16;
        i.self_inverse = 1;
        return i;
    }
    void apply(float* data, size_t rows, size_t cols, uint64_t, bool) const {
        altgrad::sdk::fwht(data, rows * (cols / 16), 16);
    }
};

hadamard16 make(const altgrad::sdk::param_view&) { return {}; }

}  // namespace

extern "C" ALTGRAD_EXPORT const altgrad_entry* altgrad_plugin_entry(void) {
    static const altgrad_descriptor descriptor = {sizeof(altgrad_descriptor),
                                                  ALTGRAD_KIND_TRANSFORM,
                                                  "abi13_transform",
                                                  {1, 0, 0},
                                                  "claims ABI 1.3",
                                                  nullptr,
                                                  0};
    static const altgrad_entry entry = {sizeof(altgrad_entry),
                                        {1, 3, 0},
                                        &descriptor,
                                        nullptr,
                                        nullptr,
                                        nullptr,
                                        altgrad::sdk::transform_adapter<hadamard16, &make>::vtable()};
    return &entry;
}
