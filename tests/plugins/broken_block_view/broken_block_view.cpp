// Test plugin: a diagnostic built against ABI 1.2 that still reads only the
// view's `scale` (1 for a block-scaled tensor) instead of each element's block
// scale. It reports scaled_amax = max |x * scale| over the finite elements;
// the conformance kit's measure.block_scales must catch it.
#include <algorithm>
#include <cmath>

#include <altgrad/sdk/diagnostic_plugin.hpp>

namespace {
namespace sdk = altgrad::sdk;

class broken_block_view {
public:
    uint32_t interests() const { return 1u << ALTGRAD_TENSOR_WEIGHT; }
    size_t max_values_per_tensor() const { return 1; }
    void measure(uint64_t, const altgrad_tensor_view* tensors, size_t n, sdk::value_sink& out) {
        for (size_t i = 0; i < n; ++i) {
            double amax = 0;
            for (size_t j = 0; j < tensors[i].count; ++j)
                if (std::isfinite(tensors[i].data[j]))
                    amax =
                        std::max(amax, std::fabs(static_cast<double>(tensors[i].data[j]) * tensors[i].scale));
            out.add(static_cast<uint32_t>(i), "scaled_amax", amax);
        }
    }
};

broken_block_view make(const sdk::param_view&) { return broken_block_view(); }
}  // namespace

ALTGRAD_DIAGNOSTIC_PLUGIN("broken_block_view", 1, 0, 0,
                          "Test plugin: reads the view's scale, not its block scales", make)
