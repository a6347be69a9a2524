#include "plugins/accumulator_handle.hpp"

#include <altgrad/sdk/fused_dot_add.hpp>  // instruction_problem

#include "plugins/call_record.hpp"

namespace altgrad::host {

accumulator_handle::accumulator_handle(std::shared_ptr<const loaded_plugin> plugin,
                                       const host::given_params& params, const std::string& where)
    : plugin_instance(std::move(plugin), params, where) {
    info_.struct_size = sizeof info_;
    call("get_info", vtable().get_info, &info_);
    // What a host relies on later (abi/accumulator.h), by the rules the SDK's adapter applies too.
    const std::string problem = sdk::instruction_problem(info_);
    if (!problem.empty()) bad("get_info", problem);
}

void accumulator_handle::dot_add(const sdk::dot_add_operands& operands) const {
    const altgrad_accumulator_args a = sdk::accumulator_args(operands);
    call("dot_add", vtable().dot_add, &a);
}

altgrad_status accumulator_handle::dot_add_raw(const altgrad_accumulator_args& args,
                                               std::string& message) const {
    altgrad_error e = sdk::blank_error();
    const noted_call noted(name(), "dot_add");
    const altgrad_status s = vtable().dot_add(instance(), &args, &e);
    message = s == ALTGRAD_STATUS_OK ? std::string() : sdk::error_message(e);
    return s;
}

}  // namespace altgrad::host
