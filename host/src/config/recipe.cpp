// The resolved recipe (recipe.hpp): the one walk of the config's levels.
#include "config/recipe.hpp"

#include <algorithm>
#include <set>

#include "config/layer_names.hpp"
#include "config/schema.hpp"
#include "util/error.hpp"

namespace altgrad::host::config {

namespace {

// A layer as the rules see it: its name and its place among the model's linear layers.
struct layer_at {
    std::string_view name;
    size_t index = 0, count = 0;
};

// A product's setting `member` ([quantization.PRODUCT] KEY, or the first rule
// matching the layer if it gives one), and the key that decided it.
template <class T>
std::optional<T> product_setting(const quantization_config& q, const layer_at& layer, product_kind product,
                                 std::optional<T> product_config::*member, const char* name,
                                 std::string* key) {
    const size_t p = static_cast<size_t>(product);
    const std::string at = std::string(product_names().name(product)) + "." + name;
    std::optional<T> v = q.products[p].*member;
    if (key) *key = "quantization." + at;
    for (size_t i = 0; i < q.rules.size(); ++i) {
        const quantization_rule& r = q.rules[i];
        if (!rule_selects(r, layer.name, layer.index, layer.count)) continue;
        if (r.products[p].*member) {
            v = r.products[p].*member;
            if (key) *key = "quantization.rules[" + std::to_string(i) + "]." + at;
        }
        break;
    }
    return v;
}

std::optional<accumulator_config> accumulator_for(const quantization_config& q, const layer_at& layer,
                                                  product_kind product, std::string* key) {
    std::optional<accumulator_config> a =
        product_setting(q, layer, product, &product_config::accumulator, kAccumulatorKey, key);
    if (a && !a->modelled()) a.reset();
    return a;
}

std::optional<transform_config> transform_for(const quantization_config& q, const layer_at& layer,
                                              product_kind product, std::string* key) {
    std::optional<transform_config> t =
        product_setting(q, layer, product, &product_config::transform, kTransformKey, key);
    if (t && !t->applied()) t.reset();
    return t;
}

// quantization's own scaling keys: the least specific level of every operand.
void global_keys(const quantization_config& q, operand_spec& s) {
    s.granularity = q.granularity, s.block_size = q.block_size, s.block_rows = q.block_rows;
    s.scale_format = q.scale_format, s.scale_rule = q.scale_rule;
}

operand_spec operand_for(const quantization_config& q, const layer_at& layer, product_kind product,
                         operand_kind operand) {
    const size_t p = static_cast<size_t>(product), k = static_cast<size_t>(operand);
    const std::string at = std::string(product_names().name(product)) + "." + operand_names().name(operand);
    operand_spec s;
    // One level's overlay, `key` the table that gave it.
    auto apply = [&](const operand_overlay& o, const std::string& key) {
        if (o.empty()) return;
        o.apply_to(s);
        if (o.block_rows) s.tile_key = key + ".block_rows";
        s.key = key;
    };
    global_keys(q, s);
    s.format = operand == operand_kind::w   ? q.weight_format
               : operand == operand_kind::x ? q.activation_format
                                            : q.gradient_format;
    s.rounding = operand == operand_kind::dy ? q.backward_rounding : q.forward_rounding;
    s.key = operand == operand_kind::w   ? "quantization.weight_format"
            : operand == operand_kind::x ? "quantization.activation_format"
                                         : "quantization.gradient_format";
    for (const role_table& r : role_tables())
        if (std::string_view(role_of(operand)) == r.role) apply(q.*r.member, r.key());
    apply(q.products[p].operands[k], "quantization." + at);
    for (size_t i = 0; i < q.rules.size(); ++i) {
        const quantization_rule& r = q.rules[i];
        if (!rule_selects(r, layer.name, layer.index, layer.count)) continue;
        const std::string rule = "quantization.rules[" + std::to_string(i) + "]";
        const std::optional<std::string>& format = operand == operand_kind::w   ? r.weight
                                                   : operand == operand_kind::x ? r.activation
                                                                                : r.gradient;
        if (format) s.format = *format, s.key = rule;
        apply(r.scaling, rule);
        apply(r.products[p].operands[k], rule + "." + at);
        break;
    }
    return s;
}

// Whether two uses of a tensor are quantized alike (so one copy serves
// both): the keys their granularity reads, not `key` or `source`.
bool same_quantization(const operand_spec& a, const operand_spec& b) {
    const bool same_scaling = a.granularity == b.granularity &&
                              (a.granularity == granularity_kind::tensor ||
                               (a.scale_format == b.scale_format && a.scale_rule == b.scale_rule &&
                                (a.granularity == granularity_kind::row ||
                                 (a.block_size == b.block_size && a.block_rows == b.block_rows))));
    return a.format == b.format && a.rounding == b.rounding && same_scaling && a.pre_scale == b.pre_scale;
}

size_t index_in(product_kind p, operand_kind o) {
    const std::array<operand_kind, 2> both = operands_of(p);
    return both[0] == o ? 0 : 1;
}

}  // namespace

const operand_spec& product_recipe::operand(operand_kind o) const { return operands[index_in(product, o)]; }
bool product_recipe::owns(operand_kind o) const { return own[index_in(product, o)]; }

product_kind second_use_of(operand_kind o) {
    return o == operand_kind::w ? product_kind::input_gradient : product_kind::weight_gradient;
}

const operand_spec& layer_recipe::first_use(operand_kind o) const {
    return product(first_use_of(o)).operand(o);
}
const operand_spec& layer_recipe::second_use(operand_kind o) const {
    return product(second_use_of(o)).operand(o);
}
bool layer_recipe::second_use_owns(operand_kind o) const { return product(second_use_of(o)).owns(o); }

bool layer_recipe::quantizes() const {
    for (const product_recipe& p : products) {
        if (p.transform || p.accumulator) return true;
        for (const operand_spec& s : p.operands)
            if (s.format != "fp32") return true;
    }
    return false;
}

const layer_recipe& resolved_recipe::at(std::string_view layer) const {
    for (const layer_recipe& l : layers)
        if (l.layer == layer) return l;
    throw error("the recipe was not resolved for a layer named '" + std::string(layer) + "'");
}

std::vector<std::string> resolved_recipe::operand_formats() const {
    std::set<std::string> used;
    for (const layer_recipe& l : layers)
        for (const product_recipe& p : l.products)
            for (const operand_spec& s : p.operands) used.insert(s.format);
    return {used.begin(), used.end()};
}

resolved_recipe resolve(const quantization_config& q, const std::vector<std::string>& layers) {
    resolved_recipe r;
    r.enabled = q.enabled;
    for (size_t index = 0; index < layers.size(); ++index) {
        const std::string& name = layers[index];
        const layer_at at{name, index, layers.size()};
        layer_recipe l;
        l.layer = name;
        for (size_t p = 0; p < kProducts; ++p) {
            product_recipe& pr = l.products[p];
            pr.product = static_cast<product_kind>(p);
            const std::array<operand_kind, 2> both = operands_of(pr.product);
            if (!q.enabled) {
                for (size_t k = 0; k < 2; ++k) {
                    pr.operands[k].format = "fp32";
                    pr.operands[k].key = "quantization.enabled";
                }
                continue;
            }
            pr.transform = transform_for(q, at, pr.product, &pr.transform_key);
            pr.accumulator = accumulator_for(q, at, pr.product, &pr.accumulator_key);
            for (size_t k = 0; k < 2; ++k) {
                pr.operands[k] = operand_for(q, at, pr.product, both[k]);
                if (first_use_of(both[k]) != pr.product)
                    pr.own[k] = !same_quantization(operand_for(q, at, first_use_of(both[k]), both[k]),
                                                   pr.operands[k]);
            }
        }
        r.layers.push_back(std::move(l));
    }
    return r;
}

operand_spec communication_spec(const quantization_config& q) {
    operand_spec s;
    global_keys(q, s);
    s.format = "fp32";
    s.rounding = q.backward_rounding;
    q.communication.gradients.apply_to(s);
    s.key = kCommunicationGradientsKey;
    s.tile_key = std::string(kCommunicationGradientsKey) + ".block_rows";
    if (!q.enabled) s.format = "fp32", s.key = "quantization.enabled";
    return s;
}

resolved_recipe resolve(const run_config& c) { return resolve(c.quantization, layer_names(c.model)); }

namespace {

// "fc, head": given layers.
std::string listed(const std::vector<std::string>& layers) {
    std::string s;
    for (const std::string& layer : layers) s += (s.empty() ? "" : ", ") + layer;
    return s.empty() ? "(none)" : s;
}

// "blocks.N.attn.qkv, ... for N = 0..3, lm_head": the quantized layers.
std::string layer_summary(const model_config& m) {
    std::string s;
    for (const std::string& layer : names_of_block("N", m.activation == activation_function::swiglu).layers())
        s += layer + ", ";
    s.resize(s.size() - 2);
    return s + " for N = 0.." + std::to_string(m.n_layer - 1) + ", " + kHeadLayer;
}

// The first rule before `i` that takes the layer at `index`, or i.
size_t first_rule_taking(const std::vector<quantization_rule>& rules, size_t i, const std::string& layer,
                         size_t index, size_t count) {
    size_t j = 0;
    while (j < i && !rule_selects(rules[j], layer, index, count)) ++j;
    return j;
}

}  // namespace

std::optional<config_problem> rule_problem(const run_config& c, const std::vector<std::string>& layers,
                                           bool layers_given) {
    const auto& rules = c.quantization.rules;
    for (size_t i = 0; i < rules.size(); ++i) {
        const std::string key =
            std::string(kRulesKey) + "[" + std::to_string(i) + "]." + rule_selector_key(rules[i]);
        bool matches = false, reaches = false;
        size_t taken_by = 0;
        std::string taken_layer;
        for (size_t index = 0; index < layers.size() && !reaches; ++index) {
            if (!rule_selects(rules[i], layers[index], index, layers.size())) continue;
            matches = true;
            const size_t j = first_rule_taking(rules, i, layers[index], index, layers.size());
            reaches = j == i;
            if (!reaches && taken_layer.empty()) taken_by = j, taken_layer = layers[index];
        }
        if (!matches) {
            const std::string& p = rules[i].pattern;
            const bool weight = p.size() > 7 && p.compare(p.size() - 7, 7, ".weight") == 0;
            return config_problem{
                key, rule_selector(rules[i]) + " matches no layer of this model" +
                         (weight ? " (patterns match layer names, without \".weight\")" : "") +
                         "; its layers: " + (layers_given ? listed(layers) : layer_summary(c.model))};
        }
        if (!reaches)
            return config_problem{
                key, rule_selector(rules[i]) +
                         " never applies: every layer it matches is taken by an earlier rule (" + kRulesKey +
                         "[" + std::to_string(taken_by) + "], " + rule_selector(rules[taken_by]) + ", e.g. " +
                         taken_layer + "); the first matching rule wins"};
    }
    return std::nullopt;
}

}  // namespace altgrad::host::config
