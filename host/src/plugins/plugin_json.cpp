// The JSON documents of `list --json` and `describe --json` (plugins/plugin_json.hpp).
#include "plugins/plugin_json.hpp"

#include "util/abi_names.hpp"
#include "util/numbers.hpp"

namespace altgrad::host {

namespace {

ordered_json format_json(const altgrad_format_info& i) {
    return {{"total_bits", i.total_bits},
            {"code_bytes", i.code_bytes},
            {"exponent_bits", i.exponent_bits},
            {"mantissa_bits", i.mantissa_bits},
            {"bias", i.bias},
            {"signed", i.is_signed != 0},
            {"zero", zero_kind_names().name(i.zero)},
            {"subnormals", i.has_subnormals != 0},
            {"inf", i.has_inf != 0},
            {"nan_codes", i.nan_code_count},
            {"max_finite", i.max_finite},
            {"lowest_finite", i.lowest_finite},
            {"min_normal", i.min_normal},
            {"min_subnormal", i.min_subnormal}};
}

ordered_json codes_json(const std::vector<float>& values) {
    ordered_json codes = ordered_json::array();
    for (size_t c = 0; c < values.size(); ++c)
        codes.push_back(ordered_json{
            {"code", c}, {"value", static_cast<double>(values[c])}, {"hex", hex_float(values[c])}});
    return codes;
}

}  // namespace

std::string param_summary(const param_decl& p) {
    std::string s = p.key + " (" + param_type_name(p.type) + ", default ";
    switch (p.type) {
        case ALTGRAD_PARAM_BOOL: s += p.default_bool ? "true" : "false"; break;
        case ALTGRAD_PARAM_INT: s += std::to_string(p.default_int); break;
        case ALTGRAD_PARAM_FLOAT: s += shortest_decimal(p.default_float); break;
        case ALTGRAD_PARAM_STRING: s += "\"" + p.default_string + "\""; break;
    }
    if (p.min || p.max)
        s += ", " + (p.min ? shortest_decimal(*p.min) : std::string("-inf")) + ".." +
             (p.max ? shortest_decimal(*p.max) : std::string("inf"));
    if (!p.choices.empty()) {
        s += ", one of";
        for (const std::string& c : p.choices) s += " " + c;
    }
    return s + ")" + (p.description.empty() ? "" : ": " + p.description);
}

ordered_json headline_json(const diagnostic_headline& h) {
    return ordered_json{{"value", h.value},        {"series", h.series},
                        {"title", h.title},        {"label", h.label},
                        {"unit", h.unit},          {"summary", headline_summary_names().name(h.summary)},
                        {"log_scale", h.log_scale}};
}

ordered_json transform_json(const altgrad_transform_info& i) {
    ordered_json memory = ordered_json::array();
    for (const auto& [kind, name] : memory_kind_names().entries())
        if (i.memory_kinds & (1u << kind)) memory.push_back(name);
    return {{"block_size", i.block_size},
            {"self_inverse", i.self_inverse != 0},
            {"uses_seed", i.uses_seed != 0},
            {"memory", memory}};
}

ordered_json accumulator_json(const altgrad_accumulator_info& i) {
    ordered_json memory = ordered_json::array(), scales = ordered_json::array();
    for (const auto& [kind, name] : memory_kind_names().entries())
        if (i.memory_kinds & (1u << kind)) memory.push_back(name);
    for (const auto& [kind, name] : acc_scale_kind_names().entries())
        if (i.scale_kinds & (1u << kind)) scales.push_back(name);
    return {{"depth", i.depth},
            {"group_size", i.group_size},
            {"fraction_bits", i.fraction_bits},
            {"halves", i.halves},
            {"output", acc_output_names().name(i.output)},
            {"scale_kinds", scales},
            {"memory", memory}};
}

ordered_json describe_json(const loaded_plugin& plugin, const format_handle* f, bool table,
                           const transform_handle* t, const accumulator_handle* acc) {
    const manifest& m = plugin.info;
    ordered_json parameters = ordered_json::array();
    for (const param_decl& p : m.params)
        parameters.push_back(
            ordered_json{{"key", p.key}, {"type", param_type_name(p.type)}, {"summary", param_summary(p)}});
    ordered_json out{{"name", m.name},
                     {"aliases", m.aliases},
                     {"kind", kind_name(m.kind)},
                     {"version", version_string(m.version)},
                     {"abi_version", version_string(m.abi_version, false)},
                     {"description", m.description},
                     {"library", m.library.string()},
                     {"parameters", parameters}};
    if (m.kind == ALTGRAD_KIND_DIAGNOSTIC) {
        ordered_json headlines = ordered_json::array();
        for (const diagnostic_headline& h : plugin.headlines) headlines.push_back(headline_json(h));
        out["headlines"] = headlines;
    }
    if (f != nullptr) {
        out["format"] = format_json(f->info());
        if (table) out["codes"] = codes_json(f->decode_all_codes());
    }
    if (t != nullptr) out["transform"] = transform_json(t->info());
    if (acc != nullptr) out["accumulator"] = accumulator_json(acc->info());
    return out;
}

ordered_json plugin_record_json(const plugin_record& r) {
    const bool ok = r.status == plugin_status::ok;
    return ordered_json{{"kind", r.info ? kind_name(r.info->kind) : "?"},
                        {"name", r.name()},
                        {"aliases", r.info ? ordered_json(r.info->aliases) : ordered_json::array()},
                        {"version", r.info ? version_string(r.info->version) : "?"},
                        {"status", ok ? "ok" : "broken"},
                        {"description", r.info ? ordered_json(r.info->description) : ordered_json(nullptr)},
                        {"manifest", r.manifest_path.string()},
                        {"error", ok ? ordered_json(nullptr) : ordered_json(r.error)}};
}

}  // namespace altgrad::host
