// A created accumulator-plugin instance (ABI 1.5), from the host's side: the
// checked instruction info and dot_add calls that turn a plugin's status into
// a host::error naming the plugin. Creation, ownership and errors are
// plugin_instance's. Thread-safe like the ABI promises: many threads may call
// dot_add on one handle with distinct output buffers.
#pragma once

#include <map>
#include <memory>
#include <string>

#include <altgrad/altgrad.h>
#include <altgrad/sdk/call_args.hpp>

#include "plugins/loader.hpp"
#include "plugins/plugin_instance.hpp"

namespace altgrad::host {

class accumulator_handle : public plugin_instance<accumulator_handle, altgrad_accumulator_vtable> {
public:
    // The instruction: depth, group_size, fraction_bits, halves, output,
    // scale_kinds, memory_kinds; checked by the SDK's rules
    // (sdk::instruction_problem) when the handle was created.
    const altgrad_accumulator_info& info() const { return info_; }

    // One instruction for every output of the tile (host memory):
    // d = fused_dot_add(c, a, b, scales), k <= info().depth. Throws host::error
    // "plugin 'NAME': dot_add failed (STATUS): MESSAGE" when the plugin refuses.
    void dot_add(const sdk::dot_add_operands& operands) const;

    // The same call with an args struct the caller filled (the conformance
    // kit's bad arguments); the plugin's status, its message in `message`.
    altgrad_status dot_add_raw(const altgrad_accumulator_args& args, std::string& message) const;

private:
    friend plugin_instance;
    accumulator_handle(std::shared_ptr<const loaded_plugin> plugin, const host::given_params& params,
                       const std::string& where);

    altgrad_accumulator_info info_{};
};

}  // namespace altgrad::host
