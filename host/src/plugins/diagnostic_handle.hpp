// A created diagnostic-plugin instance, from the host's side: its interests,
// its headline values (ABI 1.3, read when the plugin loaded), and measure
// calls whose results come back as a vector, a malformed result turned into a
// host::error naming the plugin. Creation, ownership and a
// failed call's error are plugin_instance's. One thread at a time per handle,
// as the ABI says.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <altgrad/altgrad.h>

#include "plugins/headlines.hpp"
#include "plugins/loader.hpp"
#include "plugins/plugin_instance.hpp"

namespace altgrad::host {

struct diagnostic_value {
    uint32_t tensor_index;  // index into the call's tensors, or ALTGRAD_ALL_TENSORS
    std::string name;
    double value;
};

class diagnostic_handle : public plugin_instance<diagnostic_handle, altgrad_diagnostic_vtable> {
public:
    // Bit set of (1u << altgrad_tensor_role); read once at creation.
    uint32_t interests() const { return interests_; }
    bool interested_in(altgrad_tensor_role role) const { return (interests_ >> role) & 1u; }
    size_t max_values_per_tensor() const { return max_values_; }

    // The headline values the plugin declares (ABI 1.3), copied out of the
    // library and checked when it loaded; none for a plugin built against an
    // older ABI, or one that declares none (headline_count 0).
    const std::vector<diagnostic_headline>& headlines() const { return plugin().headlines; }
    // Whether it declares any: built against ABI 1.3 or newer, with at least
    // one headline. A report shows every value of a plugin that does not.
    bool declares_headlines() const { return !plugin().headlines.empty(); }

    // Measure. The buffer holds max_values_per_tensor * (tensors.size() + 1)
    // values (one tensor's worth for ALTGRAD_ALL_TENSORS entries).
    std::vector<diagnostic_value> measure(uint64_t step, const std::vector<altgrad_tensor_view>& tensors);
    std::vector<diagnostic_value> measure(uint64_t step, const altgrad_tensor_view* tensors, size_t n);
    // The value buffer measure() offers for n tensors.
    size_t value_capacity(size_t n) const { return max_values_ * (n + 1); }
    // measure() into the caller's buffer of `capacity` values (the conformance
    // kit hands a guarded one); the others use the handle's own.
    std::vector<diagnostic_value> measure(uint64_t step, const altgrad_tensor_view* tensors, size_t n,
                                          altgrad_diagnostic_value* items, size_t capacity);

private:
    friend plugin_instance;
    diagnostic_handle(std::shared_ptr<const loaded_plugin> plugin, const host::given_params& params,
                      const std::string& where);

    uint32_t interests_ = 0;
    size_t max_values_ = 0;
    std::vector<altgrad_diagnostic_value> buffer_;
};

}  // namespace altgrad::host
