// Test plugin: a diagnostic as the ABI 1.1 headers built it. Its entry says
// 1.1 and it reads the host's tensor views only up to their 1.1 end (`scale`;
// the ABI 1.2 block-scale fields lie beyond what it knows). The host must load
// it and hand it views it reads correctly at their stride. It reports
// scaled_amax = max |x * scale| over the finite elements: with the 1.1 view of
// a block-scaled tensor, at scale 1.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

#include <altgrad/sdk/diagnostic_plugin.hpp>

namespace {
namespace sdk = altgrad::sdk;

class abi11_diagnostic {
public:
    uint32_t interests() const { return (1u << ALTGRAD_TENSOR_WEIGHT) | (1u << ALTGRAD_TENSOR_ACTIVATION); }
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

abi11_diagnostic make(const sdk::param_view&) { return abi11_diagnostic(); }
using adapter = sdk::diagnostic_adapter<abi11_diagnostic, &make>;

// Where 1.1's altgrad_tensor_view ended (a multiple of 8: the next field is a pointer).
constexpr size_t kSize11 = offsetof(altgrad_tensor_view, block_scales);

// The views as a 1.1 plugin sees them: each cut to the 1.1 size, packed at
// that stride, then measured by the SDK's adapter (which reads them as a
// 1.1 adapter read bigger views).
altgrad_status measure11(altgrad_diagnostic* d, uint64_t step, const altgrad_tensor_view* tensors, size_t n,
                         altgrad_value_buffer* values, altgrad_error* error) {
    if (n == 0 || tensors == nullptr) return adapter::measure(d, step, tensors, n, values, error);
    std::vector<altgrad_tensor_view> storage(n * kSize11 / sizeof(altgrad_tensor_view) + 1);
    char* packed = reinterpret_cast<char*>(storage.data());
    for (size_t i = 0; i < n; ++i) {
        const altgrad_tensor_view* t = ALTGRAD_ARRAY_AT(const altgrad_tensor_view, tensors, i);
        std::memcpy(packed + i * kSize11, t, std::min(kSize11, t->struct_size));
        reinterpret_cast<altgrad_tensor_view*>(packed + i * kSize11)->struct_size = kSize11;
    }
    return adapter::measure(d, step, reinterpret_cast<const altgrad_tensor_view*>(packed), n, values, error);
}

// Its table as 1.1 sized it: it ends at measure (the 1.3 headline fields lie
// beyond; the host must not read them).
const altgrad_diagnostic_vtable* table() {
    static const altgrad_diagnostic_vtable t = {offsetof(altgrad_diagnostic_vtable, headlines),
                                                &adapter::create,
                                                &adapter::destroy,
                                                &adapter::interests,
                                                &adapter::max_values_per_tensor,
                                                &measure11};
    return &t;
}

}  // namespace

extern "C" ALTGRAD_EXPORT const altgrad_entry* altgrad_plugin_entry(void) {
    static const altgrad_descriptor descriptor = {
        sizeof(altgrad_descriptor),
        ALTGRAD_KIND_DIAGNOSTIC,
        "abi11_diagnostic",
        {1, 0, 0},
        "Test plugin: an ABI 1.1 diagnostic (no block scales in its views)",
        nullptr,
        0};
    static const altgrad_entry entry = {
        sizeof(altgrad_entry), {1, 1, 0}, &descriptor, nullptr, nullptr, table()};
    return &entry;
}
