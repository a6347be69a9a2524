// The user-facing names of the ABI's enums (sdk/include/altgrad/abi/*.h): one
// table each, used in both directions by the config, the command line,
// `describe`, manifests, metrics and reports.
#pragma once

#include <altgrad/altgrad.h>

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
// format, intervention, diagnostic (the manifest's plugin.kind)
const name_table<altgrad_plugin_kind>& plugin_kind_names();
// bool, int, float, string (a manifest parameter's type)
const name_table<altgrad_param_type>& param_type_names();

// ok, invalid argument, ... (a call's status, in error messages; "unknown status" outside the table)
const name_table<altgrad_status>& status_names();
// clip_grad_norm, switch_format, skip_step (an intervention's action)
const name_table<altgrad_action_kind>& action_kind_names();
// How `describe` shows a format's family and zeros: "float (sign, exponent,
// mantissa)", ...; "+0 and -0", "one zero", "none".
const name_table<altgrad_format_family>& format_family_names();
const name_table<altgrad_zero_kind>& zero_kind_names();

inline const char* rounding_name(altgrad_rounding r) { return rounding_names().name(r); }
inline const char* overflow_name(altgrad_overflow o) { return overflow_names().name(o); }
inline const char* role_name(altgrad_tensor_role r) { return tensor_role_names().name(r); }
inline const char* kind_name(altgrad_plugin_kind k) { return plugin_kind_names().name(k); }
inline const char* param_type_name(altgrad_param_type t) { return param_type_names().name(t); }
inline const char* status_name(altgrad_status s) { return status_names().name(s); }
inline const char* action_kind_name(altgrad_action_kind k) { return action_kind_names().name(k); }

}  // namespace altgrad::host
