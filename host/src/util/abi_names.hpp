// The user-facing names of the ABI's enums (sdk/include/altgrad/abi/*.h): one
// table each, used in both directions by the config, the command line,
// `describe`, manifests, metrics and reports.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <altgrad/altgrad.h>
#include <altgrad/sdk/raw_enum.hpp>

#include "util/name_table.hpp"

namespace altgrad::host {

// nearest, stochastic, toward-zero
const name_table<altgrad_rounding>& rounding_names();
// saturate, nonfinite
const name_table<altgrad_overflow>& overflow_names();
// weight, weight_gradient, activation, attention_probs, output_gradient: a
// parameter's gradient and a layer's output gradient (the gradient flowing back
// into the layer) have distinct names.
const name_table<altgrad_tensor_role>& tensor_role_names();
// host, cuda
const name_table<altgrad_memory_kind>& memory_kind_names();
// format, intervention, diagnostic, transform, accumulator (the manifest's plugin.kind)
const name_table<altgrad_plugin_kind>& plugin_kind_names();
// float32, e8m13, float16 (how an accumulator's instruction rounds its result, ABI 1.5)
const name_table<altgrad_acc_output>& acc_output_names();
// none, ue8m0_32, ue4m3_16 (the block scales an accumulator's instruction takes, ABI 1.5)
const name_table<altgrad_acc_scale_kind>& acc_scale_kind_names();
// bool, int, float, string (a manifest parameter's type)
const name_table<altgrad_param_type>& param_type_names();

// ok, invalid argument, ... (a call's status, in error messages; "unknown status" outside the table)
const name_table<altgrad_status>& status_names();
// float, fixed_point, codebook (a format's family)
const name_table<altgrad_format_family>& format_family_names();
// signed, unsigned, none (a format's zeros)
const name_table<altgrad_zero_kind>& zero_kind_names();
// clip_grad_norm, switch_format, skip_step (an intervention's actions)
const name_table<altgrad_action_kind>& action_kind_names();
// mean, max, min (how a diagnostic's headline summarises its tensors, ABI 1.3)
const name_table<altgrad_headline_summary>& headline_summary_names();

inline const char* rounding_name(altgrad_rounding r) { return rounding_names().name(r); }
inline const char* overflow_name(altgrad_overflow o) { return overflow_names().name(o); }
inline const char* role_name(altgrad_tensor_role r) { return tensor_role_names().name(r); }
inline const char* kind_name(altgrad_plugin_kind k) { return plugin_kind_names().name(k); }
inline const char* param_type_name(altgrad_param_type t) { return param_type_names().name(t); }
inline const char* status_name(altgrad_status s) { return status_names().name(s); }
inline const char* action_kind_name(altgrad_action_kind k) { return action_kind_names().name(k); }

// An enum field a plugin filled in (a descriptor's kind, a format's zero, an
// action's kind...), read as its integer and range-checked before it is ever
// loaded as the enum: a C++ load of a value outside a C enum's range is
// undefined behaviour, and a plugin may store anything there. The value, or
// nothing when it is not one of `names`.
template <class E>
std::optional<E> plugin_enum(const E& field, const name_table<E>& names) {
    const int32_t raw = sdk::detail::raw_enum(field);
    for (const auto& [value, name] : names.entries())
        if (static_cast<int32_t>(value) == raw) return value;
    return std::nullopt;
}

// "kind 1000 is not one of format, intervention, diagnostic", for a field
// plugin_enum refused.
template <class E>
std::string plugin_enum_error(const char* field_name, const E& field, const name_table<E>& names) {
    return std::string(field_name) + " " + std::to_string(sdk::detail::raw_enum(field)) + " is not one of " +
           names.list();
}

}  // namespace altgrad::host
