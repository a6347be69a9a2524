// The run config's name tables, its writer (to_toml) and what the trainer asks
// of it (the formats and scaling of a layer, its layer names); the reader is
// reader.cpp, the schema both walk schema.cpp.
#include "config/run_config.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "config/layer_names.hpp"
#include "config/recipe.hpp"
#include "config/schema.hpp"
#include "config/value_text.hpp"
#include "util/glob.hpp"

namespace altgrad::host::config {

const name_table<activation_function>& activation_names() {
    static const name_table<activation_function> t{{activation_function::gelu, "gelu"},
                                                   {activation_function::swiglu, "swiglu"}};
    return t;
}
const name_table<data_format>& data_format_names() {
    static const name_table<data_format> t{
        {data_format::auto_detect, "auto"}, {data_format::text, "text"}, {data_format::nanogpt, "nanogpt"}};
    return t;
}
const name_table<lr_schedule_kind>& lr_schedule_names() {
    static const name_table<lr_schedule_kind> t{{lr_schedule_kind::cosine, "cosine"},
                                                {lr_schedule_kind::constant, "constant"}};
    return t;
}
const name_table<compute_device>& device_names() {
    static const name_table<compute_device> t{{compute_device::cpu, "cpu"}, {compute_device::cuda, "cuda"}};
    return t;
}
const name_table<product_kind>& product_names() {
    static const name_table<product_kind> t{{product_kind::forward, "forward"},
                                            {product_kind::input_gradient, "input_gradient"},
                                            {product_kind::weight_gradient, "weight_gradient"}};
    return t;
}

const name_table<operand_kind>& operand_names() {
    static const name_table<operand_kind> t{
        {operand_kind::x, "x"}, {operand_kind::w, "w"}, {operand_kind::dy, "dy"}};
    return t;
}

const name_table<copy_source>& copy_source_names() {
    static const name_table<copy_source> t{{copy_source::unquantized, "unquantized"},
                                           {copy_source::rowwise, "rowwise"}};
    return t;
}

std::array<operand_kind, 2> operands_of(product_kind p) {
    switch (p) {
        case product_kind::forward: return {operand_kind::x, operand_kind::w};
        case product_kind::input_gradient: return {operand_kind::dy, operand_kind::w};
        default: return {operand_kind::dy, operand_kind::x};
    }
}

product_kind first_use_of(operand_kind o) {
    return o == operand_kind::dy ? product_kind::input_gradient : product_kind::forward;
}

const char* role_of(operand_kind o) {
    return o == operand_kind::w ? "weight" : o == operand_kind::x ? "activation" : "gradient";
}

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

bool operator==(const accumulator_config& a, const accumulator_config& b) {
    return a.format == b.format && a.params == b.params && a.rounding == b.rounding &&
           a.mma_depth == b.mma_depth && a.promote_every == b.promote_every;
}

bool operator==(const transform_config& a, const transform_config& b) {
    return a.name == b.name && a.params == b.params;
}

bool operator==(const product_config& a, const product_config& b) {
    return a.accumulator == b.accumulator && a.transform == b.transform && a.operands == b.operands;
}

namespace {

template <class S>
std::string value_text(const field<S>& f, const S& s) {
    switch (f.type) {
        case kind::integer: return std::to_string(s.*std::get<int64_t S::*>(f.member));
        case kind::number: return float_text(s.*std::get<double S::*>(f.member));
        case kind::boolean: return s.*std::get<bool S::*>(f.member) ? "true" : "false";
        case kind::choice:
            return std::visit(
                [&](auto member) -> std::string {
                    using E = std::remove_cv_t<std::remove_reference_t<decltype(s.*member)>>;
                    if constexpr (std::is_enum_v<E>) return quote(names_for(E{}).name(s.*member));
                    else return "";  // a choice's member is always an enum
                },
                f.member);
        default: return quote(s.*std::get<std::string S::*>(f.member));
    }
}

// The keys an overlay gives, as (key, value) pairs in the schema's order.
std::vector<std::pair<std::string, std::string>> overlay_entries(const operand_overlay& o) {
    std::vector<std::pair<std::string, std::string>> out;
    for (const overlay_field& f : overlay_fields()) {
        if (!f.given(o)) continue;
        operand_spec s;
        f.apply(o, s);
        out.emplace_back(f.spec.key, value_text(f.spec, s));
    }
    return out;
}

// The keys an overlay gives, one "key = value" line each.
std::string scaling_toml(const operand_overlay& o) {
    std::string out;
    for (const auto& [key, value] : overlay_entries(o)) out += key + " = " + value + "\n";
    return out;
}

// A table of plugin parameters as an inline table: { key = value, ... }.
std::string params_inline(const host::given_params& values) {
    std::string o;
    for (const auto& [param, text] : values)
        o += (o.empty() ? "{ " : ", ") + key_text(param) + " = " + param_toml(text);
    return o + " }";
}

// An accumulator as its inline table, every key written; "none" for none.
std::string accumulator_toml(const accumulator_config& a) {
    if (!a.modelled()) return quote("none");
    std::string o = "{ ";
    for (const auto& f : accumulator_fields()) {
        o += std::string(f.key) + " = " + value_text(f, a) + ", ";
        if (std::string(f.key) == "format" && !a.params.empty())
            o += "params = " + params_inline(a.params) + ", ";
    }
    o.resize(o.size() - 2);
    return o + " }";
}

// An operand's keys as an inline table: { format = "bf16", block_size = 32 }.
std::string operand_toml(const operand_overlay& o) {
    std::string out;
    for (const auto& [key, value] : overlay_entries(o)) out += (out.empty() ? "{ " : ", ") + key + " = " + value;
    return out + " }";
}

// What a product_config gives, as `key = value` pairs: its accumulator and operands.
std::vector<std::pair<std::string, std::string>> product_entries(const product_config& p) {
    std::vector<std::pair<std::string, std::string>> out;
    if (p.accumulator) out.emplace_back(kAccumulatorKey, accumulator_toml(*p.accumulator));
    if (p.transform)
        out.emplace_back(kTransformKey, !p.transform->applied() ? quote("none")
                                        : p.transform->params.empty()
                                            ? quote(p.transform->name)
                                            : "{ name = " + quote(p.transform->name) +
                                                  ", params = " + params_inline(p.transform->params) + " }");
    for (size_t k = 0; k < kOperands; ++k)
        if (!p.operands[k].empty())
            out.emplace_back(operand_names().name(static_cast<operand_kind>(k)), operand_toml(p.operands[k]));
    return out;
}

// The products a rule gives, one line each: forward = { accumulator = ..., x = {...} }.
std::string products_inline(const product_configs& products) {
    std::string o;
    for (size_t p = 0; p < kProducts; ++p) {
        std::string line;
        for (const auto& [key, value] : product_entries(products[p]))
            line += (line.empty() ? "{ " : ", ") + key + " = " + value;
        if (!line.empty())
            o += std::string(product_names().name(static_cast<product_kind>(p))) + " = " + line + " }\n";
    }
    return o;
}

// How an operand is quantized, in one phrase: "e4m3 nearest, blocks 1x32 pow2 round_up, pre_scale 0.75".
std::string operand_phrase(const operand_spec& s) {
    std::string o = s.format;
    if (s.format == "fp32") return o;
    o += std::string(" ") + names_for(altgrad_rounding{}).name(s.rounding);
    if (s.granularity == granularity_kind::tensor) o += ", per tensor";
    else {
        o += s.granularity == granularity_kind::row
                 ? std::string(", per row")
                 : ", blocks " + std::to_string(s.block_rows) + "x" + std::to_string(s.block_size);
        o += " " + s.scale_format + " " + scale_rule_names().name(s.scale_rule);
    }
    if (s.pre_scale != 1.0) o += ", pre_scale " + float_text(s.pre_scale);
    if (s.source == copy_source::rowwise) o += ", from the rowwise copy";
    return o;
}

// Every layer's products' operands as operand_for resolves them, as TOML
// comments (for the reader of a run's config.toml; not read back): layers
// that resolve alike share one entry.
std::string resolved_operands(const run_config& c) {
    std::vector<std::pair<std::string, std::vector<std::string>>> groups;  // text -> its layers
    for (const layer_recipe& layer : resolve(c).layers) {
        std::string text;
        for (const product_recipe& p : layer.products) {
            text += std::string("#   ") + product_names().name(p.product) + ":";
            for (operand_kind o : operands_of(p.product))
                text +=
                    std::string(" ") + operand_names().name(o) + " = " + operand_phrase(p.operand(o)) + ";";
            text.back() = '\n';
        }
        auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == text; });
        if (it == groups.end()) groups.push_back({text, {layer.layer}});
        else it->second.push_back(layer.layer);
    }
    std::string o =
        "\n# Every product's operands, resolved from the keys above (read for reference, not read back):\n";
    for (const auto& [text, layers] : groups) {
        std::string names;
        for (const std::string& l : layers) names += (names.empty() ? "" : ", ") + l;
        o += "# " + names + "\n" + text;
    }
    return o;
}

}  // namespace

std::string to_toml(const run_config& c) {
    std::ostringstream o;
    o << "# altgrad-host run config, fully resolved: every key with its value, defaults filled in\n"
         "# (docs/config.md). Running from this file alone repeats the run.\n";
    o << "name = " << quote(c.name) << "\n";
    for_each_section([&](const auto& s) {
        o << "\n[" << s.name << "]\n";
        for (const auto& f : s.fields) o << f.key << " = " << value_text(f, c.*(s.member)) << "\n";
        if (std::string(s.name) == "quantization") {
            const quantization_config& q = c.quantization;
            if (q.rules.empty()) o << "rules = []\n";
            for (const role_table& r : role_tables())
                if (!(q.*r.member).empty()) o << "\n[" << r.key() << "]\n" << scaling_toml(q.*r.member);
            for (size_t p = 0; p < kProducts; ++p) {
                if (q.products[p].empty()) continue;
                o << "\n[" << product_key(static_cast<product_kind>(p)) << "]\n";
                for (const auto& [key, value] : product_entries(q.products[p]))
                    o << key << " = " << value << "\n";
            }
            for (const auto& [name, values] : q.params) {
                o << "\n[" << kQuantizationParamsKey << "." << name << "]\n";
                for (const auto& [param, text] : values)
                    o << key_text(param) << " = " << param_toml(text) << "\n";
            }
            for (const quantization_rule& r : q.rules) {
                o << "\n[[quantization.rules]]\n"
                  << (r.pattern.empty() ? "" : "pattern = ") << rule_selector(r) << "\n";
                if (r.weight) o << "weight = " << quote(*r.weight) << "\n";
                if (r.activation) o << "activation = " << quote(*r.activation) << "\n";
                if (r.gradient) o << "gradient = " << quote(*r.gradient) << "\n";
                o << scaling_toml(r.scaling) << products_inline(r.products);
            }
            if (q.enabled) o << resolved_operands(c);
            run_config copy = c;
            for (const plugin_list& l : plugin_lists(copy)) {
                o << "\n[" << l.section << "]\n" << l.list << " = [";
                for (size_t i = 0; i < l.names->size(); ++i) o << (i ? ", " : "") << quote((*l.names)[i]);
                o << "]\n";
                for (const auto& [name, values] : *l.params) {
                    o << "\n[" << l.params_key() << "." << name << "]\n";
                    for (const auto& [param, text] : values)
                        o << key_text(param) << " = " << param_toml(text) << "\n";
                }
            }
        }
    });
    return o.str();
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
            if (auto& a = products[p].accumulator; a && a->modelled())
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
