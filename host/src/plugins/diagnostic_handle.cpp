#include "plugins/diagnostic_handle.hpp"

#include <cstring>

#include <altgrad/sdk/names.hpp>

namespace altgrad::host {

diagnostic_handle::diagnostic_handle(std::shared_ptr<const loaded_plugin> plugin,
                                     const host::given_params& params, const std::string& where)
    : plugin_instance(std::move(plugin), params, where) {
    {
        const noted_call noted(name(), "interests");
        interests_ = vtable().interests(instance());
    }
    {
        const noted_call noted(name(), "max_values_per_tensor");
        max_values_ = vtable().max_values_per_tensor(instance());
    }
    constexpr uint32_t known = (1u << ALTGRAD_TENSOR_WEIGHT) | (1u << ALTGRAD_TENSOR_GRADIENT) |
                               (1u << ALTGRAD_TENSOR_ACTIVATION) | (1u << ALTGRAD_TENSOR_ATTENTION_PROBS) |
                               (1u << ALTGRAD_TENSOR_OUTPUT_GRADIENT);
    if ((interests_ & ~known) != 0) bad("interests", "unknown tensor roles " + std::to_string(interests_));
    if (max_values_ > (size_t{1} << 20))
        bad("max_values_per_tensor", std::to_string(max_values_) + " is unreasonably large");
}

std::vector<diagnostic_value> diagnostic_handle::measure(uint64_t step,
                                                         const std::vector<altgrad_tensor_view>& tensors) {
    return measure(step, tensors.data(), tensors.size());
}

std::vector<diagnostic_value> diagnostic_handle::measure(uint64_t step, const altgrad_tensor_view* tensors,
                                                         size_t n) {
    buffer_.resize(value_capacity(n));
    return measure(step, tensors, n, buffer_.data(), buffer_.size());
}

std::vector<diagnostic_value> diagnostic_handle::measure(uint64_t step, const altgrad_tensor_view* tensors,
                                                         size_t n, altgrad_diagnostic_value* items,
                                                         size_t capacity) {
    for (size_t i = 0; i < capacity; ++i) {
        items[i] = altgrad_diagnostic_value{};
        items[i].struct_size = sizeof(altgrad_diagnostic_value);
    }
    altgrad_value_buffer values{sizeof(altgrad_value_buffer), items, capacity, 0};
    call("measure", vtable().measure, step, tensors, n, &values);
    if (values.count > capacity)
        bad("measure",
            "count " + std::to_string(values.count) + " exceeds the capacity " + std::to_string(capacity));
    std::vector<diagnostic_value> out;
    out.reserve(values.count);
    for (size_t i = 0; i < values.count; ++i) {
        const altgrad_diagnostic_value& v = items[i];
        const bool terminated = std::memchr(v.name, '\0', sizeof v.name) != nullptr;
        if (!terminated || !sdk::is_value_name(v.name))
            bad("measure", "value " + std::to_string(i) + " has a name that is not [a-z0-9_.]+");
        if (v.tensor_index != ALTGRAD_ALL_TENSORS && v.tensor_index >= n)
            bad("measure", "value '" + std::string(v.name) + "' names tensor " +
                               std::to_string(v.tensor_index) + " of " + std::to_string(n));
        out.push_back({v.tensor_index, v.name, v.value});
    }
    return out;
}

}  // namespace altgrad::host
