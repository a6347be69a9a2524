// The schema of the run config: the tables of its sections and keys
// (schema.hpp says what each is).
#include "config/schema.hpp"

#include "config/recipe.hpp"
#include "config/value_text.hpp"
#include "util/abi_names.hpp"

namespace altgrad::host::config {

const name_table<altgrad_rounding>& names_for(altgrad_rounding) { return rounding_names(); }
const name_table<altgrad_overflow>& names_for(altgrad_overflow) { return overflow_names(); }
const name_table<activation_function>& names_for(activation_function) { return activation_names(); }
const name_table<data_format>& names_for(data_format) { return data_format_names(); }
const name_table<lr_schedule_kind>& names_for(lr_schedule_kind) { return lr_schedule_names(); }
const name_table<compute_device>& names_for(compute_device) { return device_names(); }
const name_table<distributed_backend>& names_for(distributed_backend) { return backend_names(); }
const name_table<scaling_mode>& names_for(scaling_mode) { return scaling_names(); }
const name_table<amax_compute_kind>& names_for(amax_compute_kind) { return amax_compute_names(); }
const name_table<granularity_kind>& names_for(granularity_kind) { return granularity_names(); }
const name_table<scale_rule_kind>& names_for(scale_rule_kind) { return scale_rule_names(); }
const name_table<product_kind>& names_for(product_kind) { return product_names(); }
const name_table<copy_source>& names_for(copy_source) { return copy_source_names(); }
const name_table<tensor_scale_kind>& names_for(tensor_scale_kind) { return tensor_scale_names(); }
const name_table<first_scale_kind>& names_for(first_scale_kind) { return first_scale_names(); }

namespace {

template <class S>
field<S> integer(const char* key, int64_t S::*m, int64_t lo, int64_t hi) {
    field<S> f(key, kind::integer, m);
    f.imin = lo;
    f.imax = hi;
    return f;
}
// [lo, hi], with either end open.
template <class S>
field<S> number(const char* key, double S::*m, double lo, bool lo_open, double hi, bool hi_open) {
    field<S> f(key, kind::number, m);
    f.dmin = lo;
    f.dmax = hi;
    f.min_open = lo_open;
    f.max_open = hi_open;
    return f;
}
template <class S>
field<S> boolean(const char* key, bool S::*m) {
    return field<S>(key, kind::boolean, m);
}
template <class S>
field<S> text(const char* key, std::string S::*m) {
    return field<S>(key, kind::text, m);
}
template <class S, class E>
field<S> choice(const char* key, E S::*m) {
    return field<S>(key, kind::choice, m);
}
template <class S>
field<S> format(const char* key, std::string S::*m) {
    return field<S>(key, kind::format, m);
}

constexpr int64_t kBillion = 1000000000;
constexpr int64_t kMaxBlockSize = 1 << 20;

}  // namespace

const section<model_config>& model_section() {
    using M = model_config;
    static const section<M> s{
        "model",
        &run_config::model,
        {integer("n_layer", &M::n_layer, 1, 64), integer("n_head", &M::n_head, 1, 64),
         integer("n_embd", &M::n_embd, 8, 4096), integer("block_size", &M::block_size, 2, 8192),
         number("dropout", &M::dropout, 0.0, false, 1.0, true), boolean("bias", &M::bias),
         choice("activation", &M::activation), integer("vocab_size", &M::vocab_size, 0, 65535)}};
    return s;
}

const section<data_config>& data_section() {
    using D = data_config;
    static const section<D> s{"data",
                              &run_config::data,
                              {text("path", &D::path), choice("format", &D::format),
                               number("val_fraction", &D::val_fraction, 0.0, true, 0.5, false),
                               integer("vocab_size", &D::vocab_size, 0, 65535)}};
    return s;
}

const section<training_config>& training_section() {
    using T = training_config;
    static const section<T> s{
        "training",
        &run_config::training,
        {integer("max_steps", &T::max_steps, 1, kBillion), integer("batch_size", &T::batch_size, 1, 65536),
         integer("grad_accum", &T::grad_accum, 1, 65536),
         number("learning_rate", &T::learning_rate, 0.0, true, 10.0, false),
         number("min_lr", &T::min_lr, 0.0, false, 10.0, false),
         integer("warmup_steps", &T::warmup_steps, 0, kBillion), choice("lr_schedule", &T::lr_schedule),
         number("weight_decay", &T::weight_decay, 0.0, false, 10.0, false),
         number("beta1", &T::beta1, 0.0, false, 1.0, true), number("beta2", &T::beta2, 0.0, false, 1.0, true),
         number("grad_clip", &T::grad_clip, 0.0, false, 1e6, false), integer("seed", &T::seed, 0, INT64_MAX),
         integer("eval_interval", &T::eval_interval, 1, kBillion),
         integer("eval_batches", &T::eval_batches, 1, 1000000),
         integer("log_interval", &T::log_interval, 1, kBillion), choice("device", &T::device),
         integer("threads", &T::threads, 0, 1024)}};
    return s;
}

const section<distributed_config>& distributed_section() {
    using D = distributed_config;
    static const section<D> s{
        "training.distributed",
        &run_config::distributed,
        {choice("backend", &D::backend), integer("timeout_s", &D::timeout_s, 1, 86400)}};
    return s;
}

const section<quantization_config>& quantization_section() {
    using Q = quantization_config;
    static const section<Q> s{"quantization",
                              &run_config::quantization,
                              {boolean("enabled", &Q::enabled),
                               format("weight_format", &Q::weight_format),
                               format("activation_format", &Q::activation_format),
                               format("gradient_format", &Q::gradient_format),
                               choice("forward_rounding", &Q::forward_rounding),
                               choice("backward_rounding", &Q::backward_rounding),
                               integer("sr_bits", &Q::sr_bits, 1, 32),
                               choice("overflow", &Q::overflow),
                               choice("scaling", &Q::scaling),
                               integer("amax_history_len", &Q::amax_history_len, 1, 1024),
                               choice("amax_compute", &Q::amax_compute),
                               integer("margin", &Q::margin, 0, 64),
                               choice("tensor_scale", &Q::tensor_scale),
                               choice("first_scale", &Q::first_scale),
                               boolean("shadow_weights", &Q::shadow_weights),
                               integer("diagnostic_interval", &Q::diagnostic_interval, 1, kBillion),
                               choice("granularity", &Q::granularity),
                               integer("block_size", &Q::block_size, 1, kMaxBlockSize),
                               integer("block_rows", &Q::block_rows, 1, kMaxBlockSize),
                               format("scale_format", &Q::scale_format),
                               choice("scale_rule", &Q::scale_rule)}};
    return s;
}

namespace {

// An overlay row: the spec's member S and the overlay's optional O of one key.
template <auto S, auto O>
overlay_field overlay_row(field<operand_spec> f, bool scaling) {
    return {std::move(f),
            scaling,
            [](const operand_overlay& o) { return (o.*O).has_value(); },
            [](const operand_overlay& from, operand_spec& to) {
                if (from.*O) to.*S = *(from.*O);
            },
            [](const operand_spec& from, operand_overlay& to) { to.*O = from.*S; },
            [](const operand_overlay& a, const operand_overlay& b) { return a.*O == b.*O; }};
}

}  // namespace

const std::vector<overlay_field>& overlay_fields() {
    using S = operand_spec;
    using O = operand_overlay;
    static const std::vector<overlay_field> f{
        overlay_row<&S::format, &O::format>(format("format", &S::format), false),
        overlay_row<&S::rounding, &O::rounding>(choice("rounding", &S::rounding), false),
        overlay_row<&S::granularity, &O::granularity>(choice("granularity", &S::granularity), true),
        overlay_row<&S::block_size, &O::block_size>(integer("block_size", &S::block_size, 1, kMaxBlockSize),
                                                    true),
        overlay_row<&S::block_rows, &O::block_rows>(integer("block_rows", &S::block_rows, 1, kMaxBlockSize),
                                                    true),
        overlay_row<&S::scale_format, &O::scale_format>(format("scale_format", &S::scale_format), true),
        overlay_row<&S::scale_rule, &O::scale_rule>(choice("scale_rule", &S::scale_rule), true),
        overlay_row<&S::pre_scale, &O::pre_scale>(number("pre_scale", &S::pre_scale, 0.0, true, 1e6, false),
                                                  false),
        overlay_row<&S::source, &O::source>(choice("source", &S::source), false)};
    return f;
}

const std::vector<role_table>& role_tables() {
    static const std::vector<role_table> t{{"weight", &quantization_config::weight_scaling},
                                           {"activation", &quantization_config::activation_scaling},
                                           {"gradient", &quantization_config::gradient_scaling}};
    return t;
}

const section<failure_config>& failure_section() {
    using F = failure_config;
    static const section<F> s{"failure",
                              &run_config::failure,
                              {number("bit_stall", &F::bit_stall, 0.0, false, 1.0, false),
                               number("min_progress", &F::min_progress, 0.0, false, 1.0, false),
                               number("overflow", &F::overflow, 0.0, false, 1.0, false),
                               number("vanishing", &F::vanishing, 0.0, false, 1.0, false),
                               number("near_zero", &F::near_zero, 0.0, false, 1.0, false),
                               number("early_stop", &F::early_stop, 0.0, false, 1.0, false),
                               integer("patience", &F::patience, 1, 1000000),
                               integer("max_nonfinite_steps", &F::max_nonfinite_steps, 1, 1000000)}};
    return s;
}

const section<output_config>& output_section() {
    using O = output_config;
    static const section<O> s{
        "output",
        &run_config::output,
        {text("dir", &O::dir), integer("checkpoint_interval", &O::checkpoint_interval, 1, kBillion),
         integer("keep_checkpoints", &O::keep_checkpoints, 1, 1000)}};
    return s;
}

std::vector<plugin_list> plugin_lists(run_config& c) {
    return {{"stability", "interventions", &c.stability.interventions, &c.stability.params},
            {"diagnostics", "plugins", &c.diagnostics.plugins, &c.diagnostics.params}};
}
const std::vector<field<accumulator_config>>& accumulator_fields() {
    using A = accumulator_config;
    static const std::vector<field<A>> f{format("format", &A::format), text("instruction", &A::instruction),
                                         choice("rounding", &A::rounding),
                                         integer("mma_depth", &A::mma_depth, 1, int64_t{1} << 24),
                                         integer("promote_every", &A::promote_every, 0, kBillion)};
    return f;
}

std::string product_key(product_kind p) { return std::string("quantization.") + product_names().name(p); }

std::string operand_key(product_kind p, operand_kind o) {
    return product_key(p) + "." + operand_names().name(o);
}

const std::vector<std::string> kRuleKeys = [] {
    std::vector<std::string> k{"pattern", "last",       "last_fraction", "format",
                               "weight",  "activation", "gradient"};
    for (const overlay_field& f : overlay_fields())
        if (f.scaling) k.push_back(f.spec.key);
    for (const char* product : {"forward", "input_gradient", "weight_gradient"}) k.push_back(product);
    return k;
}();

const std::map<std::string, std::optional<kind>>& known_keys() {
    static const std::map<std::string, std::optional<kind>> keys = [] {
        std::map<std::string, std::optional<kind>> k;
        k["name"] = kind::text;
        for_each_section([&](const auto& s) {
            k[s.name] = std::nullopt;
            for (const auto& f : s.fields) k[std::string(s.name) + "." + f.key] = f.type;
        });
        k[kRulesKey] = std::nullopt;
        for (const role_table& r : role_tables()) {
            k[r.key()] = std::nullopt;
            for (const overlay_field& f : overlay_fields())
                if (f.scaling) k[r.key() + "." + f.spec.key] = f.spec.type;
        }
        for (size_t p = 0; p < kProducts; ++p) {
            const std::string key = product_key(static_cast<product_kind>(p));
            k[key] = std::nullopt;
            k[key + "." + kAccumulatorKey] = kind::accumulator;
            k[key + "." + kTransformKey] = kind::transform;
            for (operand_kind o : operands_of(static_cast<product_kind>(p)))
                k[operand_key(static_cast<product_kind>(p), o)] = kind::operand;
        }
        k[kCommunicationKey] = std::nullopt;
        k[kCommunicationGradientsKey] = kind::operand;
        k[kQuantizationParamsKey] = std::nullopt;
        run_config c;
        for (const plugin_list& l : plugin_lists(c)) {
            k[l.section] = std::nullopt;
            k[l.list_key()] = kind::names;
            k[l.params_key()] = std::nullopt;
        }
        return k;
    }();
    return keys;
}

std::vector<std::string> known_key_list() {
    std::vector<std::string> out;
    for (const auto& [k, v] : known_keys()) out.push_back(k);
    return out;
}

bool is_string_kind(kind k) { return k == kind::text || k == kind::choice || k == kind::format; }

std::optional<std::array<std::string, 3>> split_param_key(const std::string& key) {
    run_config c;
    std::vector<std::string> params_keys{kQuantizationParamsKey};
    for (const plugin_list& l : plugin_lists(c)) params_keys.push_back(l.params_key());
    for (const std::string& params_key : params_keys) {
        const std::string prefix = params_key + ".";
        if (key.rfind(prefix, 0) != 0) continue;
        const std::string rest = key.substr(prefix.size());
        const size_t dot = rest.find('.');
        if (dot == std::string::npos || dot == 0 || dot + 1 == rest.size()) return std::nullopt;
        return std::array<std::string, 3>{params_key, rest.substr(0, dot), rest.substr(dot + 1)};
    }
    return std::nullopt;
}

std::optional<host::given_param> param_value(const toml::node& n) {
    using host::param_kind;
    if (const auto* v = n.as_string()) return host::given_param(v->get(), param_kind::string);
    if (const auto* v = n.as_integer())
        return host::given_param(std::to_string(v->get()), param_kind::integer);
    if (const auto* v = n.as_floating_point())
        return host::given_param(float_text(v->get()), param_kind::floating);
    if (const auto* v = n.as_boolean())
        return host::given_param(v->get() ? "true" : "false", param_kind::boolean);
    return std::nullopt;
}

std::string param_toml(const host::given_param& value) {
    if (value.kind == host::param_kind::string) return quote(value.text);
    if (value.kind != host::param_kind::text) return value.text;
    try {
        const std::string doc = "v = " + value.text;
        toml::table t = toml::parse(std::string_view(doc));
        const toml::node* v = t.get("v");
        std::optional<host::given_param> read;
        if (t.size() == 1 && v != nullptr && (v->is_integer() || v->is_floating_point() || v->is_boolean()))
            read = param_value(*v);
        if (read && read->text == value.text) return value.text;
    } catch (const toml::parse_error&) {}
    return quote(value.text);
}

std::optional<config_problem> operand_problem(const run_config& c, const std::vector<std::string>& layers) {
    const quantization_config& q = c.quantization;
    // Tiles (block_rows > 1) are blocks: a table that gives both keys must agree
    // (block_rows, like block_size, is otherwise read only where granularity is "block").
    std::optional<config_problem> problem;
    auto check_tiles = [&](const operand_overlay& o, const std::string& key) {
        if (!problem && o.block_rows && *o.block_rows > 1 && o.granularity &&
            *o.granularity != granularity_kind::block)
            problem = config_problem{key + ".block_rows",
                                     "block_rows " + std::to_string(*o.block_rows) +
                                         " needs granularity = \"block\" (this table gives \"" +
                                         granularity_names().name(*o.granularity) + "\")"};
    };
    operand_overlay global;
    global.block_rows = q.block_rows, global.granularity = q.granularity;
    check_tiles(global, "quantization");
    for (const role_table& r : role_tables()) check_tiles(q.*r.member, r.key());
    auto check_products = [&](const product_configs& products, const std::string& at) {
        for (size_t p = 0; p < kProducts; ++p)
            for (size_t k = 0; k < kOperands; ++k)
                check_tiles(products[p].operands[k], at + product_names().name(static_cast<product_kind>(p)) +
                                                         "." +
                                                         operand_names().name(static_cast<operand_kind>(k)));
    };
    check_products(q.products, "quantization.");
    for (size_t i = 0; i < q.rules.size(); ++i) {
        const std::string rule = std::string(kRulesKey) + "[" + std::to_string(i) + "]";
        check_tiles(q.rules[i].scaling, rule);
        check_products(q.rules[i].products, rule + ".");
    }
    if (problem) return problem;
    // A second copy from the rowwise one would carry the first product's transform (the config
    // is checked as written: with quantization off too).
    quantization_config as_written = q;
    as_written.enabled = true;
    for (const layer_recipe& layer : resolve(as_written, layers).layers)
        for (const operand_kind o : {operand_kind::w, operand_kind::x, operand_kind::dy}) {
            const operand_spec& s = layer.second_use(o);
            if (s.source != copy_source::rowwise) continue;
            for (product_kind p : {first_use_of(o), second_use_of(o)})
                if (layer.product(p).transform)
                    return config_problem{s.key + ".source",
                                          std::string("\"rowwise\" with a transform on the ") +
                                              product_names().name(p) + " product (" + layer.layer +
                                              "): a transformed copy is quantized from the "
                                              "unquantized tensor"};
        }
    return std::nullopt;
}

}  // namespace altgrad::host::config
