// What the run config's types do (run_config.hpp): an overlay applied and
// compared, configs compared, format names renamed, and which layers a rule
// selects. Its name tables are names.cpp, its writer writer.cpp, its reader
// reader.cpp; the schema they walk is schema.cpp.
#include "config/run_config.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "config/layer_names.hpp"
#include "config/schema.hpp"
#include "config/value_text.hpp"
#include "util/glob.hpp"

namespace altgrad::host::config {

bool operand_overlay::empty() const {
    const std::vector<overlay_field>& f = overlay_fields();
    return std::none_of(f.begin(), f.end(), [&](const overlay_field& r) { return r.given(*this); });
}

void operand_overlay::apply_to(operand_spec& s) const {
    for (const overlay_field& r : overlay_fields()) r.apply(*this, s);
}

bool operator==(const operand_overlay& a, const operand_overlay& b) {
    const std::vector<overlay_field>& f = overlay_fields();
    return std::all_of(f.begin(), f.end(), [&](const overlay_field& r) { return r.same(a, b); });
}

bool operator==(const communication_config& a, const communication_config& b) {
    return a.gradients == b.gradients && a.scaling == b.scaling;
}

bool operator==(const accumulator_config& a, const accumulator_config& b) {
    return a.format == b.format && a.instruction == b.instruction && a.params == b.params &&
           a.rounding == b.rounding && a.mma_depth == b.mma_depth && a.promote_every == b.promote_every;
}

bool operator==(const transform_config& a, const transform_config& b) {
    return a.name == b.name && a.params == b.params;
}

bool operator==(const product_config& a, const product_config& b) {
    return a.accumulator == b.accumulator && a.transform == b.transform && a.operands == b.operands;
}

void rename_formats(
    quantization_config& q,
    const std::function<std::string(const std::string& key, const std::string& name)>& rename) {
    const std::string at = "quantization.";
    for (auto [key, f] : {std::pair{"weight_format", &q.weight_format},
                          {"activation_format", &q.activation_format},
                          {"gradient_format", &q.gradient_format},
                          {"scale_format", &q.scale_format}})
        *f = rename(at + key, *f);
    for (const role_table& r : role_tables())
        if (auto& f = (q.*r.member).scale_format) f = rename(r.key() + ".scale_format", *f);
    auto rename_accumulators = [&](product_configs& products, const std::string& where) {
        for (size_t p = 0; p < kProducts; ++p) {
            const std::string product = where + product_names().name(static_cast<product_kind>(p)) + ".";
            if (auto& a = products[p].accumulator; a && !a->format.empty())
                a->format = rename(product + kAccumulatorKey + ".format", a->format);
            for (size_t k = 0; k < kOperands; ++k) {
                operand_overlay& o = products[p].operands[k];
                const std::string operand = product + operand_names().name(static_cast<operand_kind>(k));
                if (o.format) o.format = rename(operand + ".format", *o.format);
                if (o.scale_format) o.scale_format = rename(operand + ".scale_format", *o.scale_format);
            }
        }
    };
    rename_accumulators(q.products, at);
    for (auto [key, f] : {std::pair{"format", &q.communication.gradients.format},
                          {"scale_format", &q.communication.gradients.scale_format}})
        if (*f) *f = rename(kCommunicationGradientsKey + ("." + std::string(key)), **f);
    for (size_t i = 0; i < q.rules.size(); ++i) {
        const std::string rule = at + "rules[" + std::to_string(i) + "]";
        for (auto* f : {&q.rules[i].weight, &q.rules[i].activation, &q.rules[i].gradient,
                        &q.rules[i].scaling.scale_format})
            if (*f) *f = rename(rule, **f);
        rename_accumulators(q.rules[i].products, rule + ".");
    }
    plugin_params params;
    for (auto& [name, values] : q.params)
        params[rename(kQuantizationParamsKey + ("." + name), name)].insert(values.begin(), values.end());
    q.params = std::move(params);
}

bool operator==(const quantization_rule& a, const quantization_rule& b) {
    return a.pattern == b.pattern && a.last == b.last && a.last_fraction == b.last_fraction &&
           a.weight == b.weight && a.activation == b.activation && a.gradient == b.gradient &&
           a.scaling == b.scaling && a.products == b.products;
}

bool operator==(const run_config& a, const run_config& b) {
    bool equal = a.name == b.name && a.quantization.rules == b.quantization.rules &&
                 a.quantization.weight_scaling == b.quantization.weight_scaling &&
                 a.quantization.activation_scaling == b.quantization.activation_scaling &&
                 a.quantization.gradient_scaling == b.quantization.gradient_scaling &&
                 a.quantization.params == b.quantization.params &&
                 a.quantization.products == b.quantization.products &&
                 a.quantization.communication == b.quantization.communication &&
                 a.stability.interventions == b.stability.interventions &&
                 a.stability.params == b.stability.params && a.diagnostics.plugins == b.diagnostics.plugins &&
                 a.diagnostics.params == b.diagnostics.params;
    for_each_section([&](const auto& s) {
        for (const auto& f : s.fields)
            std::visit(
                [&](auto member) { equal = equal && (a.*(s.member)).*member == (b.*(s.member)).*member; },
                f.member);
    });
    return equal;
}

bool pattern_matches(std::string_view pattern, std::string_view name) { return glob_match(pattern, name); }

size_t last_fraction_count(double fraction, size_t count) {
    // A product within 1e-9 above an integer counts as that integer, so the
    // decimal the user wrote decides: the double nearest 0.1 is a little
    // above it, and 0.1 of 10 layers is 1, not 2. (count <= 1e6 keeps the
    // product's own rounding error far below 1e-9.)
    const double product = fraction * static_cast<double>(count);
    return static_cast<size_t>(std::ceil(product - 1e-9));
}

bool rule_selects(const quantization_rule& r, std::string_view layer, size_t index, size_t count) {
    if (r.last) return index + static_cast<size_t>(*r.last) >= count;
    if (r.last_fraction) return index + last_fraction_count(*r.last_fraction, count) >= count;
    return pattern_matches(r.pattern, layer);
}

const char* rule_selector_key(const quantization_rule& r) {
    return r.last ? "last" : r.last_fraction ? "last_fraction" : "pattern";
}

std::string rule_selector(const quantization_rule& r) {
    if (r.last) return "last = " + std::to_string(*r.last);
    if (r.last_fraction) return "last_fraction = " + float_text(*r.last_fraction);
    return quote(r.pattern);
}

std::vector<std::string> layer_names(const model_config& model) {
    return config::layer_names(model.n_layer, model.activation == activation_function::swiglu);
}

}  // namespace altgrad::host::config
