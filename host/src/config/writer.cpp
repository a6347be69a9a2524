// The config written back as TOML (writer.hpp): every key in schema order,
// the overlays and rules as they were given, and the resolved operands as
// comments.
#include "config/writer.hpp"

#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "config/recipe.hpp"
#include "config/schema.hpp"
#include "config/value_text.hpp"

namespace altgrad::host::config {

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

// An accumulator as its inline table, every key of its kind written; "none" for none.
std::string accumulator_toml(const accumulator_config& a) {
    if (!a.modelled()) return quote("none");
    // An instruction has no format, rounding or depth of the config's; the model no instruction.
    const bool instruction = !a.instruction.empty();
    std::string o = "{ ";
    for (const auto& f : accumulator_fields()) {
        const std::string key = f.key;
        const bool model_key = key == "format" || key == "rounding" || key == "mma_depth";
        if (instruction ? model_key : key == "instruction") continue;
        o += key + " = " + value_text(f, a) + ", ";
        if ((key == "format" || key == "instruction") && !a.params.empty())
            o += "params = " + params_inline(a.params) + ", ";
    }
    o.resize(o.size() - 2);
    return o + " }";
}

// An operand's keys as an inline table: { format = "bf16", block_size = 32 }.
std::string operand_toml(const operand_overlay& o) {
    std::string out;
    for (const auto& [key, value] : overlay_entries(o))
        out += (out.empty() ? "{ " : ", ") + key + " = " + value;
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
            if (const communication_config& cc = q.communication; !cc.gradients.empty()) {
                std::string g = operand_toml(cc.gradients);
                if (cc.scaling)
                    g.insert(g.size() - 2,
                             ", scaling = " + quote(names_for(scaling_mode{}).name(*cc.scaling)));
                o << "\n[" << kCommunicationKey << "]\ngradients = " << g << "\n";
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

}  // namespace altgrad::host::config
