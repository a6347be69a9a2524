#include "config/run_config.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <array>
#include <map>
#include <set>
#include <sstream>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

#include <toml++/toml.h>

#include "util/abi_names.hpp"
#include <altgrad/sdk/names.hpp>

#include "config/layer_names.hpp"
#include "util/edit_distance.hpp"
#include "util/error.hpp"
#include "util/glob.hpp"
#include "util/toml_text.hpp"

namespace altgrad::host::config {
namespace fs = std::filesystem;

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
const name_table<scaling_mode>& scaling_names() {
    static const name_table<scaling_mode> t{
        {scaling_mode::delayed, "delayed"}, {scaling_mode::current, "current"}, {scaling_mode::none, "none"}};
    return t;
}
const name_table<amax_compute_kind>& amax_compute_names() {
    static const name_table<amax_compute_kind> t{{amax_compute_kind::max, "max"},
                                                 {amax_compute_kind::most_recent, "most_recent"}};
    return t;
}
const name_table<granularity_kind>& granularity_names() {
    static const name_table<granularity_kind> t{
        {granularity_kind::tensor, "tensor"}, {granularity_kind::row, "row"}, {granularity_kind::block, "block"}};
    return t;
}
const name_table<scale_rule_kind>& scale_rule_names() {
    static const name_table<scale_rule_kind> t{{scale_rule_kind::mx_floor, "mx_floor"},
                                               {scale_rule_kind::round_up, "round_up"},
                                               {scale_rule_kind::two_level, "two_level"}};
    return t;
}

void scaling_override::apply_to(block_scaling& b) const {
    if (granularity) b.granularity = *granularity;
    if (block_size) b.block_size = *block_size;
    if (scale_format) b.scale_format = *scale_format;
    if (scale_rule) b.scale_rule = *scale_rule;
}

bool operator==(const scaling_override& a, const scaling_override& b) {
    return a.granularity == b.granularity && a.block_size == b.block_size && a.scale_format == b.scale_format &&
           a.scale_rule == b.scale_rule;
}

namespace {

// The name table of each choice's type, found by overload (the argument only
// selects the type).
const name_table<altgrad_rounding>& names_for(altgrad_rounding) { return rounding_names(); }
const name_table<altgrad_overflow>& names_for(altgrad_overflow) { return overflow_names(); }
const name_table<activation_function>& names_for(activation_function) { return activation_names(); }
const name_table<data_format>& names_for(data_format) { return data_format_names(); }
const name_table<lr_schedule_kind>& names_for(lr_schedule_kind) { return lr_schedule_names(); }
const name_table<compute_device>& names_for(compute_device) { return device_names(); }
const name_table<scaling_mode>& names_for(scaling_mode) { return scaling_names(); }
const name_table<amax_compute_kind>& names_for(amax_compute_kind) { return amax_compute_names(); }
const name_table<granularity_kind>& names_for(granularity_kind) { return granularity_names(); }
const name_table<scale_rule_kind>& names_for(scale_rule_kind) { return scale_rule_names(); }

// ---- Text of values -------------------------------------------------------

// The shortest decimal text that reads back to exactly `d`, always a TOML
// float (1.0, not 1).
std::string float_text(double d) {
    char buf[48];
    int precision = 1;
    for (; precision <= 17; ++precision) {
        std::snprintf(buf, sizeof buf, "%.*g", precision, d);
        if (std::strtod(buf, nullptr) == d) break;
    }
    // %g writes 50 as 5e+01: between 1e-4 and 1e16 prefer the same digits in fixed notation.
    if (std::strchr(buf, 'e') != nullptr && std::fabs(d) >= 1e-4 && std::fabs(d) < 1e16) {
        const int exponent = static_cast<int>(std::floor(std::log10(std::fabs(d))));
        char fixed[48];
        std::snprintf(fixed, sizeof fixed, "%.*f", std::max(0, precision - 1 - exponent), d);
        if (std::strtod(fixed, nullptr) == d) std::strcpy(buf, fixed);
    }
    std::string s(buf);
    if (s.find_first_of(".eEni") == std::string::npos) s += ".0";
    return s;
}

// A bound in a range description: 1000000 rather than 1e+06, 0.5 as is.
std::string bound_text(double d) {
    if (d == std::floor(d) && std::fabs(d) < 1e15) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.0f", d);
        return buf;
    }
    std::string s = float_text(d);
    return s;
}

// A TOML basic string, escaped.
std::string quote(const std::string& s) {
    std::string out = "\"";
    for (unsigned char ch : s) {
        switch (ch) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\b': out += "\\b"; break;
            case '\t': out += "\\t"; break;
            case '\n': out += "\\n"; break;
            case '\f': out += "\\f"; break;
            case '\r': out += "\\r"; break;
            default:
                if (ch < 0x20 || ch == 0x7f) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04X", ch);
                    out += buf;
                } else {
                    out += static_cast<char>(ch);
                }
        }
    }
    return out + "\"";
}

// A key as TOML text: bare when it may be (A-Za-z0-9_-), else quoted, so a
// parameter named "a.b" or "with space" is one key again when read back.
std::string key_text(const std::string& k) {
    bool bare = !k.empty();
    for (unsigned char ch : k)
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-'))
            bare = false;
    return bare ? k : quote(k);
}

// What a node holds, for "got ..." in errors (long strings shortened).
std::string describe(const toml::node& n) {
    if (const auto* s = n.as_string()) {
        const std::string& v = s->get();
        return v.size() > 80 ? quote(v.substr(0, 77)) + "..." : quote(v);
    }
    if (const auto* i = n.as_integer()) return std::to_string(i->get());
    if (const auto* f = n.as_floating_point()) return float_text(f->get());
    if (const auto* b = n.as_boolean()) return b->get() ? "true" : "false";
    if (n.is_table()) return "a table";
    if (n.is_array()) return "an array";
    return "a date/time";
}

bool valid_utf8(const std::string& s) {
    size_t i = 0;
    while (i < s.size()) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
        if (len == 0 || i + len > s.size()) return false;
        for (size_t k = 1; k < len; ++k)
            if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return false;
        i += len;
    }
    return true;
}

std::string trim(const std::string& s) {
    const size_t b = s.find_first_not_of(" \t");
    if (b == std::string::npos) return "";
    const size_t e = s.find_last_not_of(" \t");
    return s.substr(b, e - b + 1);
}

std::string leaf_of(const std::string& key) {
    const size_t dot = key.rfind('.');
    return dot == std::string::npos ? key : key.substr(dot + 1);
}

// "; did you mean 'training.max_steps'?" for a near miss (or the same key in
// another section), else "".
std::string suggestion(const std::string& key, const std::vector<std::string>& candidates) {
    const std::string leaf = leaf_of(key);
    for (const std::string& c : candidates)
        if (leaf_of(c) == leaf && c != key && c.find('.') != std::string::npos) return "; did you mean '" + c + "'?";
    const std::string* best = nullptr;
    size_t best_d = 0;
    for (const std::string& c : candidates) {
        const size_t d = edit_distance(key, c);
        if (best == nullptr || d < best_d) best = &c, best_d = d;
    }
    if (best != nullptr && best_d <= std::max<size_t>(2, leaf.size() / 4)) return "; did you mean '" + *best + "'?";
    return "";
}

bool valid_pattern(const std::string& s) {
    if (s.empty() || s.size() > 256) return false;
    for (char c : s)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == '*' || c == '?' || c == '-'))
            return false;
    return true;
}

bool valid_run_name(const std::string& s) {
    if (s.empty() || s.size() > 128 || s == "." || s == "..") return false;
    for (unsigned char c : s)
        if (c < 0x20 || c == 0x7f || c == '/' || c == '\\') return false;
    return valid_utf8(s);
}

// ---- The schema -----------------------------------------------------------

enum class kind { integer, number, boolean, text, choice, format, names };

template <class S>
struct field {
    // A choice is one of the enum members; its names come from names_for.
    using member_ptr = std::variant<int64_t S::*, double S::*, bool S::*, std::string S::*, altgrad_rounding S::*,
                                    altgrad_overflow S::*, activation_function S::*, data_format S::*,
                                    lr_schedule_kind S::*, compute_device S::*, scaling_mode S::*,
                                    amax_compute_kind S::*, granularity_kind S::*, scale_rule_kind S::*>;
    field(const char* k, kind t, member_ptr m) : key(k), type(t), member(m) {}

    const char* key;
    kind type;
    member_ptr member;
    int64_t imin = 0, imax = 0;
    double dmin = 0, dmax = 0;
    bool min_open = false, max_open = false;
};

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

template <class S>
struct section {
    const char* name;
    S run_config::*member;
    std::vector<field<S>> fields;
};

constexpr int64_t kBillion = 1000000000;
constexpr int64_t kMaxBlockSize = 1 << 20;

const section<model_config>& model_section() {
    using M = model_config;
    static const section<M> s{"model", &run_config::model,
                              {integer("n_layer", &M::n_layer, 1, 64), integer("n_head", &M::n_head, 1, 64),
                               integer("n_embd", &M::n_embd, 8, 4096), integer("block_size", &M::block_size, 2, 8192),
                               number("dropout", &M::dropout, 0.0, false, 1.0, true), boolean("bias", &M::bias),
                               choice("activation", &M::activation),
                               integer("vocab_size", &M::vocab_size, 0, 65535)}};
    return s;
}

const section<data_config>& data_section() {
    using D = data_config;
    static const section<D> s{"data", &run_config::data,
                              {text("path", &D::path), choice("format", &D::format),
                               number("val_fraction", &D::val_fraction, 0.0, true, 0.5, false),
                               integer("vocab_size", &D::vocab_size, 0, 65535)}};
    return s;
}

const section<training_config>& training_section() {
    using T = training_config;
    static const section<T> s{
        "training", &run_config::training,
        {integer("max_steps", &T::max_steps, 1, kBillion), integer("batch_size", &T::batch_size, 1, 65536),
         number("learning_rate", &T::learning_rate, 0.0, true, 10.0, false),
         number("min_lr", &T::min_lr, 0.0, false, 10.0, false), integer("warmup_steps", &T::warmup_steps, 0, kBillion),
         choice("lr_schedule", &T::lr_schedule),
         number("weight_decay", &T::weight_decay, 0.0, false, 10.0, false),
         number("beta1", &T::beta1, 0.0, false, 1.0, true), number("beta2", &T::beta2, 0.0, false, 1.0, true),
         number("grad_clip", &T::grad_clip, 0.0, false, 1e6, false),
         integer("seed", &T::seed, 0, INT64_MAX), integer("eval_interval", &T::eval_interval, 1, kBillion),
         integer("eval_batches", &T::eval_batches, 1, 1000000), integer("log_interval", &T::log_interval, 1, kBillion),
         choice("device", &T::device), integer("threads", &T::threads, 0, 1024)}};
    return s;
}

// Without `rules`, which has a reader of its own.
const section<quantization_config>& quantization_section() {
    using Q = quantization_config;
    static const section<Q> s{
        "quantization", &run_config::quantization,
        {boolean("enabled", &Q::enabled), format("weight_format", &Q::weight_format),
         format("activation_format", &Q::activation_format), format("gradient_format", &Q::gradient_format),
         choice("forward_rounding", &Q::forward_rounding), choice("backward_rounding", &Q::backward_rounding),
         choice("overflow", &Q::overflow), choice("scaling", &Q::scaling),
         integer("amax_history_len", &Q::amax_history_len, 1, 1024),
         choice("amax_compute", &Q::amax_compute), integer("margin", &Q::margin, 0, 64),
         boolean("shadow_weights", &Q::shadow_weights), integer("diagnostic_interval", &Q::diagnostic_interval, 1, kBillion),
         choice("granularity", &Q::granularity), integer("block_size", &Q::block_size, 1, kMaxBlockSize),
         format("scale_format", &Q::scale_format), choice("scale_rule", &Q::scale_rule)}};
    return s;
}

// The keys of block_scaling, as a role table ([quantization.weight]) or a
// rule gives them; the same names and ranges as quantization's own.
const std::vector<field<block_scaling>>& block_scaling_fields() {
    using B = block_scaling;
    static const std::vector<field<B>> f{choice("granularity", &B::granularity),
                                         integer("block_size", &B::block_size, 1, kMaxBlockSize),
                                         format("scale_format", &B::scale_format), choice("scale_rule", &B::scale_rule)};
    return f;
}

// Copies the key `key` of `from` into `to` (a block_scaling field read into a scratch struct).
void set_override(const std::string& key, const block_scaling& from, scaling_override& to) {
    if (key == "granularity") to.granularity = from.granularity;
    if (key == "block_size") to.block_size = from.block_size;
    if (key == "scale_format") to.scale_format = from.scale_format;
    if (key == "scale_rule") to.scale_rule = from.scale_rule;
}

// The role tables: [quantization.weight], [quantization.activation], [quantization.gradient].
struct role_table {
    const char* role;
    scaling_override quantization_config::*member;
    std::string key() const { return std::string("quantization.") + role; }
};
const std::vector<role_table>& role_tables() {
    static const std::vector<role_table> t{{"weight", &quantization_config::weight_scaling},
                                           {"activation", &quantization_config::activation_scaling},
                                           {"gradient", &quantization_config::gradient_scaling}};
    return t;
}
const char* const kQuantizationParamsKey = "quantization.params";

const section<failure_config>& failure_section() {
    using F = failure_config;
    static const section<F> s{"failure", &run_config::failure,
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
    static const section<O> s{"output", &run_config::output,
                              {text("dir", &O::dir), integer("checkpoint_interval", &O::checkpoint_interval, 1, kBillion),
                               integer("keep_checkpoints", &O::keep_checkpoints, 1, 1000)}};
    return s;
}

template <class F>
void for_each_section(F&& f) {
    f(model_section());
    f(data_section());
    f(training_section());
    f(quantization_section());
    f(failure_section());
    f(output_section());
}

const char* const kRulesKey = "quantization.rules";

// The plugin lists and their parameter tables: [stability] interventions and
// [stability.params.NAME], [diagnostics] plugins and [diagnostics.params.NAME].
struct plugin_list {
    const char* section;   // "stability"
    const char* list;      // "interventions"
    std::vector<std::string>* names;
    plugin_params* params;
    std::string list_key() const { return std::string(section) + "." + list; }
    std::string params_key() const { return std::string(section) + ".params"; }
};
std::vector<plugin_list> plugin_lists(run_config& c) {
    return {{"stability", "interventions", &c.stability.interventions, &c.stability.params},
            {"diagnostics", "plugins", &c.diagnostics.plugins, &c.diagnostics.params}};
}
const std::vector<std::string> kRuleKeys = {"pattern",     "format",     "weight",      "activation", "gradient",
                                            "granularity", "block_size", "scale_format", "scale_rule"};

// Every dotted key the schema knows, with its kind (sections and rules: none).
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
            for (const auto& f : block_scaling_fields()) k[r.key() + "." + f.key] = f.type;
        }
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

// "stability.params.NAME.KEY" -> {"stability.params", NAME, KEY}; else nullopt.
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

// A plugin parameter's value as the text resolve_params reads: a string's
// contents, or the TOML text of a number or boolean; nullopt for anything else.
std::optional<std::string> param_text(const toml::node& n) {
    if (const auto* v = n.as_string()) return v->get();
    if (const auto* v = n.as_integer()) return std::to_string(v->get());
    if (const auto* v = n.as_floating_point()) return float_text(v->get());
    if (const auto* v = n.as_boolean()) return std::string(v->get() ? "true" : "false");
    return std::nullopt;
}

// How to_toml writes a parameter text back: bare when it reads as a TOML
// number or boolean, so the type survives a round trip; else a string.
std::string param_toml(const std::string& text) {
    try {
        const std::string doc = "v = " + text;
        toml::table t = toml::parse(std::string_view(doc));
        const toml::node* v = t.get("v");
        if (t.size() == 1 && v != nullptr && (v->is_integer() || v->is_floating_point() || v->is_boolean()) &&
            param_text(*v) == text)
            return text;
    } catch (const toml::parse_error&) {
    }
    return quote(text);
}

// ---- The reader -----------------------------------------------------------

class reader {
public:
    reader(std::string file, fs::path source) : file_(std::move(file)), source_(std::move(source)) {}

    // A syntax problem (no '='): a usage error. An unknown key, or the rules: an error.
    void add_override(const std::string& arg) {
        const size_t eq = arg.find('=');
        const std::string key = eq == std::string::npos ? "" : trim(arg.substr(0, eq));
        if (key.empty())
            throw usage_error(file_ + ": --set " + arg + ": expected KEY=VALUE, e.g. --set training.max_steps=50");
        const std::string value = trim(arg.substr(eq + 1));
        const std::string where = file_ + ": --set " + arg + ": ";
        if (key == kRulesKey || key.rfind(std::string(kRulesKey) + ".", 0) == 0 ||
            key.rfind(std::string(kRulesKey) + "[", 0) == 0)
            throw error(where + "key '" + kRulesKey +
                        "': overriding the rules from the command line is not supported (edit the config file)");
        if (const auto p = split_param_key(key)) {
            std::optional<std::string> text;
            try {
                const std::string doc = "v = " + value;
                toml::table t = toml::parse(std::string_view(doc), std::string_view("--set"));
                if (t.size() == 1 && t.get("v") != nullptr) {
                    text = param_text(*t.get("v"));
                    // As in the file: an array or a table is no parameter value.
                    if (!text)
                        throw error(where + "key '" + key + "': expected a string, number or boolean, got " +
                                    describe(*t.get("v")));
                }
            } catch (const toml::parse_error&) {
            }
            if (!text) {
                if (!valid_utf8(value)) throw error(where + "key '" + key + "': the value is not valid UTF-8");
                text = value;
            }
            param_overrides_[(*p)[0]][(*p)[1]][(*p)[2]] = {*text, arg};
            return;
        }
        const auto it = known_keys().find(key);
        if (it == known_keys().end())
            throw error(where + "key '" + key + "': unknown key (a typo?)" + suggestion(key, known_key_list()));
        if (!it->second)
            throw error(where + "key '" + key + "': is a table; set one of its keys, e.g. --set " +
                        (key == "model" ? "model.n_layer=2" : key + "." + first_key_of(key) + "=..."));

        override_value ov;
        ov.text = arg;
        bool parsed = false;
        try {
            const std::string doc = "v = " + value;
            toml::table t = toml::parse(std::string_view(doc), std::string_view("--set"));
            const toml::node* v = t.get("v");
            if (t.size() == 1 && v != nullptr && !(is_string_kind(*it->second) && !v->is_string())) {
                ov.holder = std::move(t);
                parsed = true;
            }
        } catch (const toml::parse_error&) {
        }
        if (!parsed) {
            if (!valid_utf8(value)) throw error(where + "key '" + key + "': the value is not valid UTF-8");
            ov.holder.insert_or_assign("v", value);
        }
        overrides_[key] = std::move(ov);
    }

    run_config read(const toml::table& doc) const {
        run_config c;
        c.source = source_;

        check_unknown_keys(doc);

        if (const toml::node* n = get(&doc, "name")) {
            if (!n->is_string() || !valid_run_name(n->as_string()->get()))
                fail("name", "expected a run name (a string, not empty, at most 128 characters, no '/', '\\' or "
                             "control characters), got " + describe(*n));
            c.name = n->as_string()->get();
        } else {
            c.name = source_.stem().string();
            if (c.name.empty()) c.name = "run";
        }

        for_each_section([&](const auto& s) {
            const toml::table* t = section_table(doc, s.name);
            for (const auto& f : s.fields) {
                const std::string key = std::string(s.name) + "." + f.key;
                if (const toml::node* n = get(t, key)) read_field(f, *n, c.*(s.member), key);
            }
        });
        read_rules(section_table(doc, "quantization"), c.quantization);
        read_role_tables(section_table(doc, "quantization"), c.quantization);
        read_format_params(section_table(doc, "quantization"), c.quantization);
        for (const plugin_list& l : plugin_lists(c)) read_plugin_list(doc, l);

        // Cross-key checks.
        if (c.model.n_embd % c.model.n_head != 0)
            fail("model.n_embd", "expected a multiple of model.n_head (" + std::to_string(c.model.n_head) +
                                     origin("model.n_head") + "), got " + std::to_string(c.model.n_embd));
        if (c.training.min_lr > c.training.learning_rate)
            fail("training.min_lr", "expected at most training.learning_rate (" +
                                        float_text(c.training.learning_rate) + origin("training.learning_rate") +
                                        "), got " + float_text(c.training.min_lr));
        if (c.training.warmup_steps > c.training.max_steps) {
            // The default warm-up (not the config's, not a --set) gives way to a short run.
            if (get(section_table(doc, "training"), "training.warmup_steps") != nullptr)
                fail("training.warmup_steps", "expected at most training.max_steps (" +
                                                  std::to_string(c.training.max_steps) + origin("training.max_steps") +
                                                  "), got " + std::to_string(c.training.warmup_steps));
            const int64_t shortened = c.training.max_steps / 10;
            c.notes.push_back("training.warmup_steps: the default " + std::to_string(c.training.warmup_steps) +
                              " is more than training.max_steps (" + std::to_string(c.training.max_steps) +
                              "); shortened to max_steps / 10 = " + std::to_string(shortened) +
                              " (set training.warmup_steps to choose)");
            c.training.warmup_steps = shortened;
        }
        check_rules_reach_layers(c);
        return c;
    }

private:
    struct override_value {
        std::string text;    // the --set argument as given
        toml::table holder;  // its value, as holder["v"]
    };

    std::string file_;
    fs::path source_;
    std::map<std::string, override_value> overrides_;
    // --set stability.params.NAME.KEY=VALUE: params key -> NAME -> KEY -> (value text, the argument).
    std::map<std::string, std::map<std::string, std::map<std::string, std::pair<std::string, std::string>>>>
        param_overrides_;

    [[noreturn]] void fail(const std::string& key, const std::string& what) const {
        std::string message = file_ + ": ";
        if (const auto it = overrides_.find(key); it != overrides_.end()) message += "--set " + it->second.text + ": ";
        throw error(message + "key '" + key + "': " + what);
    }

    // ", from --set KEY=VALUE" when `key` was overridden, for errors about another key.
    std::string origin(const std::string& key) const {
        const auto it = overrides_.find(key);
        return it == overrides_.end() ? "" : ", from --set " + it->second.text;
    }

    static std::string first_key_of(const std::string& section_name) {
        std::string first;
        run_config c;
        for (const plugin_list& l : plugin_lists(c)) {
            if (section_name == l.section) first = l.list;
            if (section_name == l.params_key()) first = "NAME.KEY";
        }
        if (section_name == kQuantizationParamsKey) first = "NAME.KEY";
        for (const role_table& r : role_tables())
            if (section_name == r.key()) first = "granularity";
        for_each_section([&](const auto& s) {
            if (section_name == s.name && !s.fields.empty()) first = s.fields.front().key;
        });
        return first;
    }

    // The value of a dotted key: an override first, else the file's (or null).
    const toml::node* get(const toml::table* t, const std::string& key) const {
        if (const auto it = overrides_.find(key); it != overrides_.end()) return it->second.holder.get("v");
        return t == nullptr ? nullptr : t->get(leaf_of(key));
    }

    static const toml::table* section_table(const toml::table& doc, const char* name) {
        const toml::node* n = doc.get(name);
        return n == nullptr ? nullptr : n->as_table();
    }

    void check_unknown_keys(const toml::table& doc) const {
        const std::vector<std::string> candidates = known_key_list();
        for (auto&& [k, v] : doc) {
            const std::string key(k.str());
            const auto it = key.find('.') == std::string::npos ? known_keys().find(key) : known_keys().end();
            if (it == known_keys().end()) fail(key, "unknown key (a typo?)" + suggestion(key, candidates));
            if (it->second) continue;  // name
            if (!v.is_table()) fail(key, "expected a table ([" + key + "]), got " + describe(v));
            for (auto&& [k2, v2] : *v.as_table()) {
                const std::string key2 = key + "." + std::string(k2.str());
                if (known_keys().count(key2) == 0)
                    fail(key2, "unknown key (a typo?)" + suggestion(key2, candidates));
                if (!is_role_table(key2)) continue;
                if (!v2.is_table()) fail(key2, "expected a table ([" + key2 + "]), got " + describe(v2));
                for (auto&& [k3, v3] : *v2.as_table()) {
                    const std::string key3 = key2 + "." + std::string(k3.str());
                    if (known_keys().count(key3) == 0)
                        fail(key3, "unknown key (a typo?)" + suggestion(key3, candidates));
                }
            }
        }
    }

    static bool is_role_table(const std::string& key) {
        for (const role_table& r : role_tables())
            if (key == r.key()) return true;
        return false;
    }

    // [quantization.weight] etc.: the keys each gives, over quantization's own.
    void read_role_tables(const toml::table* q, quantization_config& out) const {
        for (const role_table& r : role_tables()) {
            const toml::node* n = q == nullptr ? nullptr : q->get(r.role);
            read_scaling_keys(n == nullptr ? nullptr : n->as_table(), r.key(), out.*r.member);
        }
    }

    // The block_scaling keys of table t (KEY.granularity, ...; --set too) into `out`.
    void read_scaling_keys(const toml::table* t, const std::string& key, scaling_override& out) const {
        for (const auto& f : block_scaling_fields()) {
            const std::string k = key + "." + f.key;
            if (const toml::node* n = get(t, k)) {
                block_scaling scratch;
                read_field(f, *n, scratch, k);
                set_override(f.key, scratch, out);
            }
        }
    }

    // [quantization.params.NAME] (and --set quantization.params.NAME.KEY=V):
    // NAME must be a format some key of the config names.
    void read_format_params(const toml::table* q, quantization_config& out) const {
        const std::string pkey = kQuantizationParamsKey;
        const std::set<std::string> named = formats_named(out);
        auto check_named = [&](const std::string& name) -> std::string {
            if (named.count(name)) return "";
            std::string list;
            for (const std::string& n : named) list += (list.empty() ? "" : ", ") + n;
            return "parameters for '" + name + "', which no format or scale_format key of this config names (it names " +
                   list + ")";
        };
        const toml::node* p = q == nullptr ? nullptr : q->get("params");
        if (p != nullptr && !p->is_table()) fail(pkey, "expected a table of tables ([" + pkey + ".NAME]), got " + describe(*p));
        if (p != nullptr) {
            for (auto&& [k, v] : *p->as_table()) {
                const std::string name(k.str()), where = pkey + "." + name;
                if (!v.is_table()) fail(where, "expected a table of parameters, got " + describe(v));
                if (const std::string problem = check_named(name); !problem.empty()) fail(where, problem);
                for (auto&& [k2, v2] : *v.as_table()) {
                    const std::string param(k2.str());
                    const std::optional<std::string> text = param_text(v2);
                    if (!text) fail(where + "." + param, "expected a string, number or boolean, got " + describe(v2));
                    out.params[name][param] = *text;
                }
            }
        }
        if (const auto it = param_overrides_.find(pkey); it != param_overrides_.end()) {
            for (const auto& [name, values] : it->second)
                for (const auto& [param, given] : values) {
                    if (const std::string problem = check_named(name); !problem.empty())
                        throw error(file_ + ": --set " + given.second + ": key '" + pkey + "." + name + "': " + problem);
                    out.params[name][param] = given.first;
                }
        }
    }

    // Every format plugin the quantization keys name (not "fp32" or "pow2").
    static std::set<std::string> formats_named(const quantization_config& q) {
        std::set<std::string> out;
        quantization_config scratch = q;
        scratch.params.clear();
        rename_formats(scratch, [&](const std::string&, const std::string& name) { return *out.insert(name).first; });
        out.erase("fp32");
        out.erase("pow2");
        return out;
    }

    template <class S>
    void read_field(const field<S>& f, const toml::node& n, S& out, const std::string& key) const {
        switch (f.type) {
            case kind::integer: {
                const std::string expected =
                    "expected an integer " + std::to_string(f.imin) + ".." + std::to_string(f.imax) + ", got ";
                if (!n.is_integer()) fail(key, expected + describe(n));
                const int64_t v = n.as_integer()->get();
                if (v < f.imin || v > f.imax) fail(key, expected + describe(n));
                out.*std::get<int64_t S::*>(f.member) = v;
                break;
            }
            case kind::number: {
                const std::string expected = "expected a number in " + std::string(f.min_open ? "(" : "[") +
                                             bound_text(f.dmin) + ", " + bound_text(f.dmax) +
                                             (f.max_open ? ")" : "]") + ", got ";
                double v = 0;
                if (n.is_integer()) v = static_cast<double>(n.as_integer()->get());
                else if (n.is_floating_point()) v = n.as_floating_point()->get();
                else fail(key, expected + describe(n));
                const bool ok = std::isfinite(v) && (f.min_open ? v > f.dmin : v >= f.dmin) &&
                                (f.max_open ? v < f.dmax : v <= f.dmax);
                if (!ok) fail(key, expected + describe(n));
                out.*std::get<double S::*>(f.member) = v;
                break;
            }
            case kind::boolean:
                if (!n.is_boolean()) fail(key, "expected true or false, got " + describe(n));
                out.*std::get<bool S::*>(f.member) = n.as_boolean()->get();
                break;
            case kind::text:
                if (!n.is_string() || n.as_string()->get().empty())
                    fail(key, "expected a non-empty string, got " + describe(n));
                out.*std::get<std::string S::*>(f.member) = n.as_string()->get();
                break;
            case kind::choice:
                std::visit(
                    [&](auto member) {
                        using E = std::remove_reference_t<decltype(out.*member)>;
                        if constexpr (std::is_enum_v<E>) {
                            const name_table<E>& names = names_for(E{});
                            const auto v = n.is_string() ? names.value(n.as_string()->get()) : std::nullopt;
                            if (!v) fail(key, "expected one of " + names.list() + ", got " + describe(n));
                            out.*member = *v;
                        }
                    },
                    f.member);
                break;
            case kind::format:
                out.*std::get<std::string S::*>(f.member) = format_name(n, key);
                break;
            case kind::names:
                break;  // plugin lists have a reader of their own
        }
    }

    // [SECTION] LIST = ["a", "b"] (or, from --set, "a,b") and [SECTION.params.NAME] tables.
    void read_plugin_list(const toml::table& doc, const plugin_list& l) const {
        const std::string key = l.list_key();
        const toml::table* section = section_table(doc, l.section);
        if (const toml::node* n = get(section, key)) {
            std::vector<std::string> given;
            if (const auto* s = n->as_string()) {
                std::string item;
                std::istringstream in(s->get());
                while (std::getline(in, item, ',')) given.push_back(trim(item));
            } else if (const auto* a = n->as_array()) {
                for (const toml::node& e : *a) {
                    if (!e.is_string()) fail(key, "expected an array of plugin names, got an element " + describe(e));
                    given.push_back(e.as_string()->get());
                }
            } else {
                fail(key, "expected an array of plugin names, e.g. [\"mantissa_shift\"], got " + describe(*n));
            }
            for (const std::string& name : given) {
                if (!sdk::is_plugin_name(name))
                    fail(key, std::string("expected plugin names (") + sdk::kPluginNamePattern + "), got " + quote(name));
                if (std::find(l.names->begin(), l.names->end(), name) != l.names->end())
                    fail(key, quote(name) + " is listed twice");
                l.names->push_back(name);
            }
        }
        const std::string pkey = l.params_key();
        const toml::node* p = section == nullptr ? nullptr : section->get("params");
        if (p != nullptr && !p->is_table()) fail(pkey, "expected a table of tables ([" + pkey + ".NAME]), got " + describe(*p));
        auto check_enabled = [&](const std::string& name, const std::string& where) {
            if (std::find(l.names->begin(), l.names->end(), name) == l.names->end())
                fail(where, "parameters for '" + name + "', which is not in " + key + " (enable it there)");
        };
        if (p != nullptr) {
            for (auto&& [k, v] : *p->as_table()) {
                const std::string name(k.str()), where = pkey + "." + name;
                if (!v.is_table()) fail(where, "expected a table of parameters, got " + describe(v));
                check_enabled(name, where);
                for (auto&& [k2, v2] : *v.as_table()) {
                    const std::string param(k2.str());
                    const std::optional<std::string> text = param_text(v2);
                    if (!text) fail(where + "." + param, "expected a string, number or boolean, got " + describe(v2));
                    (*l.params)[name][param] = *text;
                }
            }
        }
        if (const auto it = param_overrides_.find(pkey); it != param_overrides_.end()) {
            for (const auto& [name, values] : it->second)
                for (const auto& [param, given] : values) {
                    if (std::find(l.names->begin(), l.names->end(), name) == l.names->end())
                        throw error(file_ + ": --set " + given.second + ": key '" + pkey + "." + name +
                                    "': parameters for '" + name + "', which is not in " + key + " (enable it there)");
                    (*l.params)[name][param] = given.first;
                }
        }
    }

    std::string format_name(const toml::node& n, const std::string& key) const {
        if (!n.is_string() || !sdk::is_plugin_name(n.as_string()->get()))
            fail(key, std::string("expected a format plugin name (") + sdk::kPluginNamePattern +
                          ", e.g. \"e4m3\" or \"bf16\"), got " + describe(n));
        return n.as_string()->get();
    }

    void read_rules(const toml::table* q, quantization_config& out) const {
        const toml::node* n = q == nullptr ? nullptr : q->get("rules");
        if (n == nullptr) return;
        const toml::array* rules = n->as_array();
        if (rules == nullptr)
            fail(kRulesKey, "expected an array of tables ([[quantization.rules]] entries), got " + describe(*n));
        for (size_t i = 0; i < rules->size(); ++i) {
            const std::string key = std::string(kRulesKey) + "[" + std::to_string(i) + "]";
            const toml::node& e = *rules->get(i);
            if (!e.is_table())
                fail(key, "expected a table (pattern = \"...\" and format = \"...\"), got " + describe(e));
            const toml::table& t = *e.as_table();
            std::vector<std::string> candidates;
            for (const std::string& k : kRuleKeys) candidates.push_back(key + "." + k);
            for (auto&& [k, v] : t) {
                const std::string name(k.str());
                if (std::find(kRuleKeys.begin(), kRuleKeys.end(), name) == kRuleKeys.end())
                    fail(key + "." + name, "unknown key (a typo?)" + suggestion(key + "." + name, candidates));
            }
            quantization_rule rule;
            const toml::node* p = t.get("pattern");
            if (p == nullptr) fail(key + ".pattern", "missing (every rule needs one, e.g. pattern = \"blocks.*.attn.*\")");
            if (!p->is_string() || !valid_pattern(p->as_string()->get()))
                fail(key + ".pattern", "expected a layer-name pattern (letters, digits, '_', '-', '.', '*' and '?'), got " +
                                           describe(*p));
            rule.pattern = p->as_string()->get();
            std::optional<std::string> all;
            if (const toml::node* f = t.get("format")) all = format_name(*f, key + ".format");
            std::optional<std::string>* directions[] = {&rule.weight, &rule.activation, &rule.gradient};
            const char* names[] = {"weight", "activation", "gradient"};
            for (int d = 0; d < 3; ++d) {
                if (const toml::node* f = t.get(names[d])) *directions[d] = format_name(*f, key + "." + names[d]);
                else *directions[d] = all;
            }
            for (const auto& f : block_scaling_fields()) {
                if (const toml::node* v = t.get(f.key)) {
                    block_scaling scratch;
                    read_field(f, *v, scratch, key + "." + f.key);
                    set_override(f.key, scratch, rule.scaling);
                }
            }
            if (!rule.weight && !rule.activation && !rule.gradient && rule.scaling.empty())
                fail(key, "sets nothing: give format (all three directions), weight, activation or gradient, "
                          "or a scaling key (granularity, block_size, scale_format, scale_rule)");
            out.rules.push_back(std::move(rule));
        }
    }

    // A rule that matches no layer of the model, or only layers an earlier rule
    // already takes, is a mistake (a typo in the pattern, or the wrong order).
    void check_rules_reach_layers(const run_config& c) const {
        const std::vector<std::string> layers = layer_names(c.model);
        const auto& rules = c.quantization.rules;
        for (size_t i = 0; i < rules.size(); ++i) {
            const std::string key = std::string(kRulesKey) + "[" + std::to_string(i) + "].pattern";
            bool matches = false, reaches = false;
            size_t taken_by = 0;
            std::string taken_layer;
            for (const std::string& layer : layers) {
                if (!pattern_matches(rules[i].pattern, layer)) continue;
                matches = true;
                size_t j = 0;
                while (j < i && !pattern_matches(rules[j].pattern, layer)) ++j;
                if (j == i) {
                    reaches = true;
                    break;
                }
                if (taken_layer.empty()) taken_by = j, taken_layer = layer;
            }
            if (!matches) {
                std::string hint;
                const std::string& p = rules[i].pattern;
                if (p.size() > 7 && p.compare(p.size() - 7, 7, ".weight") == 0)
                    hint = " (patterns match layer names, without \".weight\")";
                fail(key, quote(p) + " matches no layer of this model" + hint + "; its layers: " + layer_summary(c.model));
            }
            if (!reaches)
                fail(key, quote(rules[i].pattern) + " never applies: every layer it matches is taken by an earlier rule (" +
                              kRulesKey + "[" + std::to_string(taken_by) + "], " + quote(rules[taken_by].pattern) +
                              ", e.g. " + taken_layer + "); the first matching rule wins");
        }
    }

    // "blocks.N.attn.qkv, ... for N = 0..3, lm_head": the quantized layers.
    static std::string layer_summary(const model_config& m) {
        std::string s;
        for (const std::string& layer : names_of_block("N", m.activation == activation_function::swiglu).layers())
            s += layer + ", ";
        s.resize(s.size() - 2);
        return s + " for N = 0.." + std::to_string(m.n_layer - 1) + ", " + kHeadLayer;
    }
};

run_config parse_impl(const std::string& text, const std::string& file, const fs::path& source,
                      const std::vector<std::string>& overrides) {
    const toml::table doc = parse_toml_text(text, file);
    reader r(file, source);
    for (const std::string& o : overrides) r.add_override(o);
    return r.read(doc);
}

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

// The keys a scaling_override gives, one "key = value" line each.
std::string scaling_toml(const scaling_override& s) {
    std::string o;
    if (s.granularity) o += "granularity = " + quote(granularity_names().name(*s.granularity)) + "\n";
    if (s.block_size) o += "block_size = " + std::to_string(*s.block_size) + "\n";
    if (s.scale_format) o += "scale_format = " + quote(*s.scale_format) + "\n";
    if (s.scale_rule) o += "scale_rule = " + quote(scale_rule_names().name(*s.scale_rule)) + "\n";
    return o;
}

}  // namespace

run_config load_config(const fs::path& file, const std::vector<std::string>& overrides) {
    const std::string name = file.string();
    std::error_code ec;
    if (fs::is_directory(file, ec)) throw error(name + ": is a folder, expected a config file (.toml)");
    if (!fs::exists(file, ec)) throw error(name + ": no such config file");
    std::ifstream in(file, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    if (!in) throw error(name + ": cannot read the config file");
    return parse_impl(text.str(), name, file, overrides);
}

run_config parse_config(const std::string& toml_text, const std::string& source_name,
                        const std::vector<std::string>& overrides) {
    return parse_impl(toml_text, source_name, fs::path(source_name), overrides);
}

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
            for (const auto& [name, values] : q.params) {
                o << "\n[" << kQuantizationParamsKey << "." << name << "]\n";
                for (const auto& [param, text] : values) o << key_text(param) << " = " << param_toml(text) << "\n";
            }
            for (const quantization_rule& r : q.rules) {
                o << "\n[[quantization.rules]]\npattern = " << quote(r.pattern) << "\n";
                if (r.weight) o << "weight = " << quote(*r.weight) << "\n";
                if (r.activation) o << "activation = " << quote(*r.activation) << "\n";
                if (r.gradient) o << "gradient = " << quote(*r.gradient) << "\n";
                o << scaling_toml(r.scaling);
            }
            run_config copy = c;
            for (const plugin_list& l : plugin_lists(copy)) {
                o << "\n[" << l.section << "]\n" << l.list << " = [";
                for (size_t i = 0; i < l.names->size(); ++i) o << (i ? ", " : "") << quote((*l.names)[i]);
                o << "]\n";
                for (const auto& [name, values] : *l.params) {
                    o << "\n[" << l.params_key() << "." << name << "]\n";
                    for (const auto& [param, text] : values) o << key_text(param) << " = " << param_toml(text) << "\n";
                }
            }
        }
    });
    return o.str();
}

void rename_formats(quantization_config& q,
                    const std::function<std::string(const std::string& key, const std::string& name)>& rename) {
    const std::string at = "quantization.";
    for (auto [key, f] : {std::pair{"weight_format", &q.weight_format}, {"activation_format", &q.activation_format},
                          {"gradient_format", &q.gradient_format}, {"scale_format", &q.scale_format}})
        *f = rename(at + key, *f);
    for (const role_table& r : role_tables())
        if (auto& f = (q.*r.member).scale_format) f = rename(r.key() + ".scale_format", *f);
    for (size_t i = 0; i < q.rules.size(); ++i)
        for (auto* f : {&q.rules[i].weight, &q.rules[i].activation, &q.rules[i].gradient, &q.rules[i].scaling.scale_format})
            if (*f) *f = rename(at + "rules[" + std::to_string(i) + "]", **f);
    plugin_params params;
    for (auto& [name, values] : q.params) params[rename(kQuantizationParamsKey + ("." + name), name)].insert(values.begin(), values.end());
    q.params = std::move(params);
}

bool operator==(const quantization_rule& a, const quantization_rule& b) {
    return a.pattern == b.pattern && a.weight == b.weight && a.activation == b.activation && a.gradient == b.gradient &&
           a.scaling == b.scaling;
}

bool operator==(const run_config& a, const run_config& b) {
    bool equal = a.name == b.name && a.quantization.rules == b.quantization.rules &&
                 a.quantization.weight_scaling == b.quantization.weight_scaling &&
                 a.quantization.activation_scaling == b.quantization.activation_scaling &&
                 a.quantization.gradient_scaling == b.quantization.gradient_scaling &&
                 a.quantization.params == b.quantization.params &&
                 a.stability.interventions == b.stability.interventions && a.stability.params == b.stability.params &&
                 a.diagnostics.plugins == b.diagnostics.plugins && a.diagnostics.params == b.diagnostics.params;
    for_each_section([&](const auto& s) {
        for (const auto& f : s.fields)
            std::visit([&](auto member) { equal = equal && (a.*(s.member)).*member == (b.*(s.member)).*member; },
                       f.member);
    });
    return equal;
}

bool pattern_matches(std::string_view pattern, std::string_view name) { return glob_match(pattern, name); }

std::vector<std::string> layer_names(const model_config& model) {
    return config::layer_names(model.n_layer, model.activation == activation_function::swiglu);
}

layer_formats formats_for(const quantization_config& q, std::string_view layer) {
    layer_formats out{q.weight_format, q.activation_format, q.gradient_format, -1};
    for (size_t i = 0; i < q.rules.size(); ++i) {
        const quantization_rule& r = q.rules[i];
        if (!pattern_matches(r.pattern, layer)) continue;
        if (r.weight) out.weight = *r.weight;
        if (r.activation) out.activation = *r.activation;
        if (r.gradient) out.gradient = *r.gradient;
        out.rule = static_cast<int>(i);
        break;
    }
    return out;
}

}  // namespace altgrad::host::config

namespace altgrad::host::config {

block_scaling scaling_for(const quantization_config& q, std::string_view layer, std::string_view role) {
    block_scaling b{q.granularity, q.block_size, q.scale_format, q.scale_rule};
    for (const role_table& r : role_tables())
        if (role == r.role) (q.*r.member).apply_to(b);
    for (const quantization_rule& r : q.rules) {
        if (!pattern_matches(r.pattern, layer)) continue;
        r.scaling.apply_to(b);
        break;
    }
    return b;
}

block_scaling scaling_for(const quantization_config& q, std::string_view layer, altgrad_tensor_role role) {
    return scaling_for(q, layer,
                       role == ALTGRAD_TENSOR_WEIGHT       ? "weight"
                       : role == ALTGRAD_TENSOR_ACTIVATION ? "activation"
                                                           : "gradient");
}

}  // namespace altgrad::host::config
