// A created diagnostic-plugin instance, from the host's side: creation with
// validated parameters, its interests, and measure calls whose results come
// back as a vector, with a plugin's failure (or a malformed result) turned
// into a host::error naming the plugin. One thread at a time per handle, as
// the ABI says.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <altgrad/altgrad.h>

#include "plugins/loader.hpp"

namespace altgrad::host {

struct diagnostic_value {
    uint32_t tensor_index;  // index into the call's tensors, or ALTGRAD_ALL_TENSORS
    std::string name;
    double value;
};

class diagnostic_handle {
public:
    // Create an instance of `plugin` (a diagnostic plugin) with user
    // parameters (key -> text); `where` names their source in errors.
    static std::shared_ptr<diagnostic_handle> create(std::shared_ptr<const loaded_plugin> plugin,
                                                     const std::map<std::string, std::string>& params = {},
                                                     const std::string& where = "--param");
    ~diagnostic_handle();
    diagnostic_handle(const diagnostic_handle&) = delete;
    diagnostic_handle& operator=(const diagnostic_handle&) = delete;

    const std::string& name() const { return plugin_->info.name; }
    const loaded_plugin& plugin() const { return *plugin_; }

    // Bit set of (1u << altgrad_tensor_role); read once at creation.
    uint32_t interests() const { return interests_; }
    bool interested_in(altgrad_tensor_role role) const { return (interests_ >> role) & 1u; }
    size_t max_values_per_tensor() const { return max_values_; }

    // Measure. The buffer holds max_values_per_tensor * (tensors.size() + 1)
    // values (one tensor's worth for ALTGRAD_ALL_TENSORS entries).
    std::vector<diagnostic_value> measure(uint64_t step, const std::vector<altgrad_tensor_view>& tensors);
    std::vector<diagnostic_value> measure(uint64_t step, const altgrad_tensor_view* tensors, size_t n);

private:
    diagnostic_handle() = default;
    [[noreturn]] void fail(const char* call, altgrad_status s, const altgrad_error& e) const;
    [[noreturn]] void bad(const std::string& what) const;

    std::shared_ptr<const loaded_plugin> plugin_;  // keeps the code loaded
    const altgrad_diagnostic_vtable* vtable_ = nullptr;
    altgrad_diagnostic* instance_ = nullptr;
    uint32_t interests_ = 0;
    size_t max_values_ = 0;
    std::vector<altgrad_diagnostic_value> buffer_;
};

}  // namespace altgrad::host
