// The JSON documents of `list --json` (one entry per plugin) and `describe
// --json`, for the commands and for the Python package (host/python/), so both
// report the same information.
#pragma once

#include "plugins/accumulator_handle.hpp"
#include "plugins/format_handle.hpp"
#include "plugins/manifest.hpp"
#include "plugins/registry.hpp"
#include "plugins/transform_handle.hpp"
#include "util/json_output.hpp"

namespace altgrad::host {

// One plugin of `list --json`: kind, name, aliases, version, status, description, manifest, error.
ordered_json plugin_record_json(const plugin_record& r);

// `describe --json`: the manifest; for a format (f set) its encoding (with
// `table`, every code); for a diagnostic its headlines (ABI 1.3, [] when it
// declares none); for a transform (t set, ABI 1.4) and an accumulator (acc
// set, ABI 1.5) its info.
ordered_json describe_json(const loaded_plugin& plugin, const format_handle* f, bool table,
                           const transform_handle* t = nullptr, const accumulator_handle* acc = nullptr);

// A transform's info: block_size, self_inverse, uses_seed, memory.
ordered_json transform_json(const altgrad_transform_info& i);

// An accumulator's info: depth, group_size, fraction_bits, halves, output, scale_kinds, memory.
ordered_json accumulator_json(const altgrad_accumulator_info& i);

// A diagnostic's headline: value, series, title, label, unit, summary, log_scale.
ordered_json headline_json(const diagnostic_headline& h);

// A parameter in one line: "bits (int, default 4, 1..8): the exponent width".
std::string param_summary(const param_decl& p);

}  // namespace altgrad::host
