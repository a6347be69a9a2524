// The schema of the run config, private to the config room: the sections and
// their fields (each key's kind, range and member), the role tables, the
// plugin lists, the rules' keys, and every dotted key it knows. The reader
// (reader.cpp) and the writer (to_toml, writer.cpp) both walk it.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <toml++/toml.h>

#include "config/run_config.hpp"
#include "plugins/params.hpp"

namespace altgrad::host::config {

// The name table of each choice's type, found by overload (the argument only
// selects the type).
const name_table<altgrad_rounding>& names_for(altgrad_rounding);
const name_table<altgrad_overflow>& names_for(altgrad_overflow);
const name_table<activation_function>& names_for(activation_function);
const name_table<data_format>& names_for(data_format);
const name_table<lr_schedule_kind>& names_for(lr_schedule_kind);
const name_table<compute_device>& names_for(compute_device);
const name_table<distributed_backend>& names_for(distributed_backend);
const name_table<scaling_mode>& names_for(scaling_mode);
const name_table<amax_compute_kind>& names_for(amax_compute_kind);
const name_table<granularity_kind>& names_for(granularity_kind);
const name_table<scale_rule_kind>& names_for(scale_rule_kind);
const name_table<product_kind>& names_for(product_kind);
const name_table<copy_source>& names_for(copy_source);
const name_table<tensor_scale_kind>& names_for(tensor_scale_kind);
const name_table<first_scale_kind>& names_for(first_scale_kind);

// What a key holds: a choice is a name of an enum (names_for); names a list of
// plugin names; accumulator a table of accumulator_fields (or "none");
// operand a table of an operand's keys (overlay_fields).
enum class kind { integer, number, boolean, text, choice, format, names, accumulator, operand, transform };

// A key of a struct S of the config: its name, kind, range and the member it sets.
template <class S>
struct field {
    // A choice is one of the enum members; its names come from names_for.
    using member_ptr =
        std::variant<int64_t S::*, double S::*, bool S::*, std::string S::*, altgrad_rounding S::*,
                     altgrad_overflow S::*, activation_function S::*, data_format S::*, lr_schedule_kind S::*,
                     compute_device S::*, distributed_backend S::*, scaling_mode S::*, amax_compute_kind S::*,
                     granularity_kind S::*, scale_rule_kind S::*, copy_source S::*, tensor_scale_kind S::*,
                     first_scale_kind S::*>;
    field(const char* k, kind t, member_ptr m) : key(k), type(t), member(m) {}

    const char* key;
    kind type;
    member_ptr member;
    int64_t imin = 0, imax = 0;
    double dmin = 0, dmax = 0;
    bool min_open = false, max_open = false;
};

// A table of the config ([model], ...): the run_config member it fills, key by key.
template <class S>
struct section {
    const char* name;
    S run_config::*member;
    std::vector<field<S>> fields;
};

const section<model_config>& model_section();
const section<data_config>& data_section();
const section<training_config>& training_section();
const section<distributed_config>& distributed_section();  // [training.distributed]
// Without `rules`, which has a reader of its own.
const section<quantization_config>& quantization_section();
const section<failure_config>& failure_section();
const section<output_config>& output_section();

template <class F>
void for_each_section(F&& f) {
    f(model_section());
    f(data_section());
    f(training_section());
    f(distributed_section());
    f(quantization_section());
    f(failure_section());
    f(output_section());
}

// An operand's keys, one row each (operand_spec's members, operand_overlay's
// optionals): the one table that reads, writes, compares and applies them,
// in the order to_toml writes them.
struct overlay_field {
    field<operand_spec> spec;  // key, kind, range, and the operand_spec member it resolves
    // A scaling key (granularity, block_size, block_rows, scale_format,
    // scale_rule): a role table ([quantization.weight]) and a rule's top
    // level may give it too, with quantization's own of the same name below.
    bool scaling = false;
    bool (*given)(const operand_overlay& o);
    void (*apply)(const operand_overlay& from, operand_spec& to);  // sets `to`'s member if given
    void (*take)(const operand_spec& from, operand_overlay& to);   // gives `to` the member of `from`
    bool (*same)(const operand_overlay& a, const operand_overlay& b);
};
const std::vector<overlay_field>& overlay_fields();

// The role tables: [quantization.weight], [quantization.activation], [quantization.gradient].
struct role_table {
    const char* role;
    operand_overlay quantization_config::*member;  // scaling keys only
    std::string key() const { return std::string("quantization.") + role; }
};
const std::vector<role_table>& role_tables();
// The product tables: [quantization.forward], [quantization.input_gradient],
// [quantization.weight_gradient] ("quantization." + the product's name), each
// with an `accumulator` key; a rule gives the same as forward = {...}.
std::string product_key(product_kind p);
const char* const kAccumulatorKey = "accumulator";
const char* const kTransformKey = "transform";
// The keys of an accumulator table but `params` (a table of plugin parameters).
const std::vector<field<accumulator_config>>& accumulator_fields();
// "quantization.forward.x": the operand tables a product table may hold
// (only the product's own two operands).
std::string operand_key(product_kind p, operand_kind o);

// A mistake across the product and operand tables, which no one key shows:
// a table giving tiles (block_rows > 1) with another granularity, or a
// second copy from the rowwise one where a product has a transform (on any
// of `layers`, the model's quantized layers).
struct config_problem {
    std::string key, what;
};
std::optional<config_problem> operand_problem(const run_config& c, const std::vector<std::string>& layers);

// [quantization.communication] and its one key, gradients = {...}
// (config::communication_config).
const char* const kCommunicationKey = "quantization.communication";
const char* const kCommunicationGradientsKey = "quantization.communication.gradients";

// [quantization.params.NAME]: a format's parameters.
const char* const kQuantizationParamsKey = "quantization.params";

// [[quantization.rules]]: an array of tables, read apart from the quantization section.
const char* const kRulesKey = "quantization.rules";

// The plugin lists and their parameter tables: [stability] interventions and
// [stability.params.NAME], [diagnostics] plugins and [diagnostics.params.NAME].
struct plugin_list {
    const char* section;  // "stability"
    const char* list;     // "interventions"
    std::vector<std::string>* names;
    plugin_params* params;
    std::string list_key() const { return std::string(section) + "." + list; }
    std::string params_key() const { return std::string(section) + ".params"; }
};
std::vector<plugin_list> plugin_lists(run_config& c);
// The keys a [[quantization.rules]] entry may give.
extern const std::vector<std::string> kRuleKeys;

// Every dotted key the schema knows, with its kind (sections and rules: none).
const std::map<std::string, std::optional<kind>>& known_keys();
std::vector<std::string> known_key_list();
bool is_string_kind(kind k);

// "stability.params.NAME.KEY" -> {"stability.params", NAME, KEY}; else nullopt.
std::optional<std::array<std::string, 3>> split_param_key(const std::string& key);
// A plugin parameter's value as resolve_params reads it: a string's contents,
// or the TOML text of a number or boolean, with its TOML kind (so the
// manifest's type is checked against it); nullopt for anything else.
std::optional<host::given_param> param_value(const toml::node& n);
// How to_toml writes a parameter back: a string quoted, a number or boolean
// bare, so the kind survives a round trip; untyped text bare when it reads as
// a TOML number or boolean, else quoted.
std::string param_toml(const host::given_param& value);

}  // namespace altgrad::host::config
