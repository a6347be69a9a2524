// The reader of run configs: a config's TOML text and the command line's
// --set overrides, checked key by key against the schema (schema.hpp), into a
// run_config; load_config and parse_config.
#include "config/run_config.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <toml++/toml.h>

#include <altgrad/sdk/names.hpp>

#include "config/layer_names.hpp"
#include "config/recipe.hpp"
#include "config/schema.hpp"
#include "config/value_text.hpp"
#include "util/error.hpp"
#include "util/file_text.hpp"
#include "util/toml_text.hpp"

namespace altgrad::host::config {
namespace fs = std::filesystem;

namespace {

class reader {
public:
    // `layers`: the quantized layers the rules must reach; null: the config's model's.
    reader(std::string file, fs::path source, const std::vector<std::string>* layers = nullptr)
        : file_(std::move(file)), source_(std::move(source)), layers_(layers) {}

    // A syntax problem (no '='): a usage error. An unknown key, or the rules: an error.
    void add_override(const std::string& arg) {
        const size_t eq = arg.find('=');
        const std::string key = eq == std::string::npos ? "" : trim(arg.substr(0, eq));
        if (key.empty())
            throw usage_error(file_ + ": --set " + arg +
                              ": expected KEY=VALUE, e.g. --set training.max_steps=50");
        const std::string value = trim(arg.substr(eq + 1));
        const std::string where = file_ + ": --set " + arg + ": ";
        if (key.rfind(std::string(kRulesKey) + ".", 0) == 0 ||
            key.rfind(std::string(kRulesKey) + "[", 0) == 0)
            throw error(
                where + "key '" + key + "': a rule's keys cannot be set one by one; replace the list " +
                "instead, e.g. --set 'quantization.rules=[{ pattern = \"lm_head\", format = \"bf16\" }]'");
        if (key == kRulesKey) {  // the whole list, as a TOML array of inline tables
            override_value ov;
            ov.text = arg;
            try {
                ov.holder = toml::parse(std::string_view("v = " + value), std::string_view("--set"));
            } catch (const toml::parse_error&) {}
            const toml::node* v = ov.holder.get("v");
            if (v == nullptr || !v->is_array())
                throw error(where + "key '" + key + "': expected an array of rule tables, e.g. [] or " +
                            "[{ pattern = \"lm_head\", format = \"bf16\" }]");
            overrides_[key] = std::move(ov);
            return;
        }
        if (const auto p = split_param_key(key)) {
            std::optional<given_param> text;
            try {
                const std::string doc = "v = " + value;
                toml::table t = toml::parse(std::string_view(doc), std::string_view("--set"));
                if (t.size() == 1 && t.get("v") != nullptr) {
                    text = param_value(*t.get("v"));
                    // As in the file: an array or a table is no parameter value.
                    if (!text)
                        throw error(where + "key '" + key + "': expected a string, number or boolean, got " +
                                    describe(*t.get("v")));
                }
            } catch (const toml::parse_error&) {}
            if (!text) {
                if (!valid_utf8(value))
                    throw error(where + "key '" + key + "': the value is not valid UTF-8");
                text = given_param(value, param_kind::string);  // a bare word: --set KEY=nearest
            }
            param_overrides_[(*p)[0]][(*p)[1]][(*p)[2]] = {*text, arg};
            return;
        }
        const auto it = known_keys().find(key);
        if (it == known_keys().end())
            throw error(where + "key '" + key + "': unknown key (a typo?)" +
                        suggestion(key, known_key_list()));
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
        } catch (const toml::parse_error&) {}
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
                fail("name",
                     "expected a run name (a string, not empty, at most 128 characters, no '/', '\\' or "
                     "control characters), got " +
                         describe(*n));
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
        read_products(section_table(doc, "quantization"), c.quantization);
        read_communication(section_table(doc, "quantization"), c.quantization);
        read_format_params(section_table(doc, "quantization"), c.quantization);
        for (const plugin_list& l : plugin_lists(c)) read_plugin_list(doc, l);

        // Cross-key checks.
        if (c.model.n_embd % c.model.n_head != 0)
            fail("model.n_embd", "expected a multiple of model.n_head (" + std::to_string(c.model.n_head) +
                                     origin("model.n_head") + "), got " + std::to_string(c.model.n_embd));
        if (c.training.min_lr > c.training.learning_rate)
            fail("training.min_lr",
                 "expected at most training.learning_rate (" + float_text(c.training.learning_rate) +
                     origin("training.learning_rate") + "), got " + float_text(c.training.min_lr));
        if (c.training.warmup_steps > c.training.max_steps) {
            // The default warm-up (not the config's, not a --set) gives way to a short run.
            if (get(section_table(doc, "training"), "training.warmup_steps") != nullptr)
                fail("training.warmup_steps",
                     "expected at most training.max_steps (" + std::to_string(c.training.max_steps) +
                         origin("training.max_steps") + "), got " + std::to_string(c.training.warmup_steps));
            const int64_t shortened = c.training.max_steps / 10;
            c.notes.push_back("training.warmup_steps: the default " +
                              std::to_string(c.training.warmup_steps) + " is more than training.max_steps (" +
                              std::to_string(c.training.max_steps) + "); shortened to max_steps / 10 = " +
                              std::to_string(shortened) + " (set training.warmup_steps to choose)");
            c.training.warmup_steps = shortened;
        }
        const std::vector<std::string> layers = layers_ ? *layers_ : layer_names(c.model);
        if (const std::optional<config_problem> p = rule_problem(c, layers, layers_ != nullptr))
            fail(p->key, p->what);
        if (const std::optional<config_problem> p = operand_problem(c, layers)) fail(p->key, p->what);
        return c;
    }

private:
    struct override_value {
        std::string text;    // the --set argument as given
        toml::table holder;  // its value, as holder["v"]
    };

    std::string file_;
    fs::path source_;
    const std::vector<std::string>* layers_;
    std::map<std::string, override_value> overrides_;
    // --set stability.params.NAME.KEY=VALUE: params key -> NAME -> KEY -> (value text, the argument).
    std::map<std::string, std::map<std::string, std::map<std::string, std::pair<given_param, std::string>>>>
        param_overrides_;

    [[noreturn]] void fail(const std::string& key, const std::string& what) const {
        std::string message = file_ + ": ";
        if (const auto it = overrides_.find(key); it != overrides_.end())
            message += "--set " + it->second.text + ": ";
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
        for (size_t p = 0; p < kProducts; ++p)
            if (section_name == product_key(static_cast<product_kind>(p))) first = kAccumulatorKey;
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

    // A section's table; a dotted name ("training.distributed") is a table in a table.
    static const toml::table* section_table(const toml::table& doc, const char* name) {
        const toml::node* n = doc.at_path(name).node();
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
                if (!is_subtable(key2)) continue;
                if (!v2.is_table()) fail(key2, "expected a table ([" + key2 + "]), got " + describe(v2));
                for (auto&& [k3, v3] : *v2.as_table()) {
                    const std::string key3 = key2 + "." + std::string(k3.str());
                    if (known_keys().count(key3) == 0) {
                        std::string hint;
                        for (size_t p = 0; p < kProducts; ++p)
                            if (key2 == product_key(static_cast<product_kind>(p)))
                                hint = operands_hint(static_cast<product_kind>(p));
                        fail(key3, "unknown key (a typo?)" + suggestion(key3, candidates) + hint);
                    }
                }
            }
        }
    }

    // The tables inside a section: [training.distributed], and in [quantization]
    // the role and the product tables.
    static bool is_subtable(const std::string& key) {
        if (key == distributed_section().name || key == kCommunicationKey) return true;
        for (const role_table& r : role_tables())
            if (key == r.key()) return true;
        for (size_t p = 0; p < kProducts; ++p)
            if (key == product_key(static_cast<product_kind>(p))) return true;
        return false;
    }

    // [quantization.forward] etc.: each product's accumulator and operands (--set too).
    void read_products(const toml::table* q, quantization_config& out) const {
        for (size_t p = 0; p < kProducts; ++p) {
            const auto product = static_cast<product_kind>(p);
            const std::string key = product_key(product);
            const toml::node* t = q == nullptr ? nullptr : q->get(leaf_of(key));
            const toml::table* table = t == nullptr ? nullptr : t->as_table();
            const std::string akey = key + "." + kAccumulatorKey;
            if (const toml::node* n = get(table, akey))
                out.products[p].accumulator = read_accumulator(*n, akey);
            const std::string tkey = key + "." + kTransformKey;
            if (const toml::node* n = get(table, tkey)) out.products[p].transform = read_transform(*n, tkey);
            for (operand_kind o : operands_of(product)) {
                const std::string okey = operand_key(product, o);
                if (const toml::node* n = get(table, okey))
                    out.products[p].operands[static_cast<size_t>(o)] = read_operand(*n, okey, product, o);
            }
        }
    }

    // An inline table of plugin parameters (an accumulator's or a transform's `params`).
    host::given_params read_params(const toml::node& p, const std::string& key) const {
        if (!p.is_table()) fail(key, "expected a table of parameters, got " + describe(p));
        host::given_params out;
        for (auto&& [k, v] : *p.as_table()) {
            const std::optional<given_param> text = param_value(v);
            if (!text)
                fail(key + "." + std::string(k.str()),
                     "expected a string, number or boolean, got " + describe(v));
            out[std::string(k.str())] = *text;
        }
        return out;
    }

    // A transform: "none", "NAME", or { name = "NAME", params = {...} }.
    transform_config read_transform(const toml::node& n, const std::string& key) const {
        transform_config t;
        const std::string expected =
            "expected a transform plugin's name (\"random_hadamard\"), { name = \"random_hadamard\", params "
            "= { d = 16 } } or \"none\", got ";
        if (const auto* s = n.as_string()) {
            if (s->get() == "none") return t;
            if (!sdk::is_plugin_name(s->get())) fail(key, expected + describe(n));
            t.name = s->get();
            return t;
        }
        const toml::table* table = n.as_table();
        if (table == nullptr) fail(key, expected + describe(n));
        for (auto&& [k, v] : *table) {
            const std::string sub = key + "." + std::string(k.str());
            if (k.str() != "name" && k.str() != "params")
                fail(sub, "unknown key (a typo?)" + suggestion(sub, {key + ".name", key + ".params"}));
        }
        const toml::node* name = table->get("name");
        if (name == nullptr)
            fail(key + ".name", "missing (the transform plugin, e.g. name = \"random_hadamard\")");
        if (!name->is_string() || !sdk::is_plugin_name(name->as_string()->get()))
            fail(key + ".name", std::string("expected a plugin name (") + sdk::kPluginNamePattern +
                                    "), got " + describe(*name));
        t.name = name->as_string()->get();
        if (const toml::node* p = table->get("params")) t.params = read_params(*p, key + ".params");
        return t;
    }

    // An operand of a product: { format, rounding, granularity, block_size,
    // block_rows, scale_format, scale_rule, pre_scale, source }, each optional.
    operand_overlay read_operand(const toml::node& n, const std::string& key, product_kind product,
                                 operand_kind operand) const {
        const operand_overlay o = read_operand_table(n, key, "the operand's");
        if (o.source && first_use_of(operand) == product)
            fail(key + ".source",
                 std::string("only an operand's second use has a source: ") + operand_names().name(operand) +
                     " is first quantized for " + product_names().name(product) +
                     " (the second uses are input_gradient.w, weight_gradient.x and weight_gradient.dy)");
        if (o.empty()) fail(key, "sets nothing: give format, rounding, a scaling key, pre_scale or source");
        return o;
    }

    // A table of an operand's keys (`whose` names them in errors), and `also`
    // besides: a key neither of them is an error.
    operand_overlay read_operand_table(const toml::node& n, const std::string& key, const std::string& whose,
                                       const std::vector<std::string>& also = {}) const {
        const toml::table* t = n.as_table();
        if (t == nullptr)
            fail(key,
                 "expected a table of " + whose + " keys, e.g. { format = \"bf16\" }, got " + describe(n));
        std::vector<std::string> candidates;
        for (const overlay_field& f : overlay_fields()) candidates.push_back(key + "." + f.spec.key);
        for (const std::string& k : also) candidates.push_back(key + "." + k);
        for (auto&& [k, v] : *t) {
            const std::string sub = key + "." + std::string(k.str());
            if (std::find(candidates.begin(), candidates.end(), sub) == candidates.end())
                fail(sub, "unknown key (a typo?)" + suggestion(sub, candidates));
        }
        operand_overlay o;
        for (const overlay_field& f : overlay_fields())
            if (const toml::node* v = t->get(f.spec.key)) read_overlay_key(f, *v, key + "." + f.spec.key, o);
        return o;
    }

    // [quantization.communication] gradients = { format, rounding, scaling
    // keys, pre_scale, scaling } (config::communication_config).
    void read_communication(const toml::table* q, quantization_config& out) const {
        const toml::node* section = q == nullptr ? nullptr : q->get(leaf_of(kCommunicationKey));
        const std::string key = kCommunicationGradientsKey;
        const toml::node* n = get(section == nullptr ? nullptr : section->as_table(), key);
        if (n == nullptr) return;
        communication_config& c = out.communication;
        c.gradients = read_operand_table(*n, key, "the gradients'", {"scaling"});
        if (const toml::node* mode = n->as_table()->get("scaling")) {
            quantization_config scratch;  // read as quantization.scaling is
            for (const auto& f : quantization_section().fields)
                if (std::string(f.key) == "scaling") read_field(f, *mode, scratch, key + ".scaling");
            c.scaling = scratch.scaling;
        }
        if (!c.gradients.format)
            fail(key + ".format", "missing (the format the gradients are sent in, e.g. format = \"e5m2\")");
        if (c.gradients.source)
            fail(key + ".source", "only an operand's second use has a source; gradients are quantized once");
        if (c.gradients.block_rows && *c.gradients.block_rows != 1)
            fail(key + ".block_rows", "expected 1 (blocks along a row): a bias or a LayerNorm gain is 1-D");
    }

    // An accumulator: "none", { format = ..., params = {...}, rounding, mma_depth, promote_every }
    // (the chunked model) or { instruction = ..., params = {...}, promote_every } (a GPU instruction).
    accumulator_config read_accumulator(const toml::node& n, const std::string& key) const {
        accumulator_config a;
        if (n.is_string() && n.as_string()->get() == "none") return a;
        const toml::table* t = n.as_table();
        if (t == nullptr)
            fail(key,
                 "expected an accumulator ({ format = \"fp16\", rounding = \"toward-zero\", mma_depth = 32, "
                 "promote_every = 128 }) or \"none\", got " +
                     describe(n));
        std::vector<std::string> candidates{key + ".params"};
        for (const auto& f : accumulator_fields()) candidates.push_back(key + "." + f.key);
        for (auto&& [k, v] : *t) {
            const std::string sub = key + "." + std::string(k.str());
            if (std::find(candidates.begin(), candidates.end(), sub) == candidates.end())
                fail(sub, "unknown key (a typo?)" + suggestion(sub, candidates));
        }
        const bool instruction = t->get("instruction") != nullptr;
        if (t->get("format") == nullptr && !instruction)
            fail(key + ".format",
                 "missing (the chunked model's format plugin, e.g. format = \"fp16\", or a GPU instruction's "
                 "accumulator plugin, e.g. instruction = \"sm90_wgmma_fp8\")");
        if (instruction)
            for (const char* model_key : {"format", "rounding", "mma_depth"})
                if (t->get(model_key) != nullptr)
                    fail(
                        key + "." + model_key,
                        "an instruction (instruction = ...) decides its own depth, rounding and format; give "
                        "it promote_every and params only, or format = ... for the chunked model");
        for (const auto& f : accumulator_fields())
            if (const toml::node* v = t->get(f.key)) read_field(f, *v, a, key + "." + f.key);
        if (instruction && !sdk::is_plugin_name(a.instruction))
            fail(key + ".instruction", std::string("expected an accumulator plugin's name (") +
                                           sdk::kPluginNamePattern + ", e.g. \"sm90_wgmma_fp8\"), got " +
                                           describe(*t->get("instruction")));
        if (a.rounding == ALTGRAD_ROUND_STOCHASTIC)
            fail(
                key + ".rounding",
                "expected nearest or toward-zero (a stochastically rounded accumulator is not modelled), got "
                "\"stochastic\"");
        if (const toml::node* p = t->get("params")) a.params = read_params(*p, key + ".params");
        return a;
    }

    // A rule's forward = { accumulator = ..., x = {...}, w = {...} } (and the other products).
    void read_rule_products(const toml::table& rule, const std::string& key, product_configs& out) const {
        for (size_t p = 0; p < kProducts; ++p) {
            const auto product = static_cast<product_kind>(p);
            const std::string name = product_names().name(product);
            const toml::node* n = rule.get(name);
            if (n == nullptr) continue;
            const std::string pkey = key + "." + name, akey = pkey + "." + kAccumulatorKey;
            if (!n->is_table())
                fail(pkey,
                     "expected a table ({ accumulator = {...}, OPERAND = {...} }), got " + describe(*n));
            const std::string tkey = pkey + "." + kTransformKey;
            std::vector<std::string> candidates{akey, tkey};
            for (operand_kind o : operands_of(product))
                candidates.push_back(pkey + "." + operand_names().name(o));
            for (auto&& [k, v] : *n->as_table()) {
                const std::string sub = pkey + "." + std::string(k.str());
                if (std::find(candidates.begin(), candidates.end(), sub) == candidates.end())
                    fail(sub, "unknown key (a typo?)" + suggestion(sub, candidates) + operands_hint(product));
            }
            if (const toml::node* a = n->as_table()->get(kAccumulatorKey))
                out[p].accumulator = read_accumulator(*a, akey);
            if (const toml::node* t = n->as_table()->get(kTransformKey))
                out[p].transform = read_transform(*t, tkey);
            for (operand_kind o : operands_of(product))
                if (const toml::node* v = n->as_table()->get(operand_names().name(o)))
                    out[p].operands[static_cast<size_t>(o)] =
                        read_operand(*v, pkey + "." + operand_names().name(o), product, o);
        }
    }

    // "; the forward product's operands are x and w".
    static std::string operands_hint(product_kind p) {
        const auto o = operands_of(p);
        return std::string("; the ") + product_names().name(p) + " product's operands are " +
               operand_names().name(o[0]) + " and " + operand_names().name(o[1]);
    }

    // [quantization.weight] etc.: the keys each gives, over quantization's own.
    void read_role_tables(const toml::table* q, quantization_config& out) const {
        for (const role_table& r : role_tables()) {
            const toml::node* n = q == nullptr ? nullptr : q->get(r.role);
            read_scaling_keys(n == nullptr ? nullptr : n->as_table(), r.key(), out.*r.member);
        }
    }

    // One key of an operand (`f`, read from `n` as the key `key`) into `out`.
    void read_overlay_key(const overlay_field& f, const toml::node& n, const std::string& key,
                          operand_overlay& out) const {
        operand_spec read;
        read_field(f.spec, n, read, key);
        f.take(read, out);
    }

    // The scaling keys of table t (KEY.granularity, ...; --set too) into `out`.
    void read_scaling_keys(const toml::table* t, const std::string& key, operand_overlay& out) const {
        for (const overlay_field& f : overlay_fields()) {
            const std::string k = key + "." + f.spec.key;
            if (!f.scaling) continue;
            if (const toml::node* n = get(t, k)) read_overlay_key(f, *n, k, out);
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
            return "parameters for '" + name +
                   "', which no format or scale_format key of this config names (it names " + list + ")";
        };
        const toml::node* p = q == nullptr ? nullptr : q->get("params");
        if (p != nullptr && !p->is_table())
            fail(pkey, "expected a table of tables ([" + pkey + ".NAME]), got " + describe(*p));
        if (p != nullptr) {
            for (auto&& [k, v] : *p->as_table()) {
                const std::string name(k.str()), where = pkey + "." + name;
                if (!v.is_table()) fail(where, "expected a table of parameters, got " + describe(v));
                if (const std::string problem = check_named(name); !problem.empty()) fail(where, problem);
                for (auto&& [k2, v2] : *v.as_table()) {
                    const std::string param(k2.str());
                    const std::optional<given_param> text = param_value(v2);
                    if (!text)
                        fail(where + "." + param,
                             "expected a string, number or boolean, got " + describe(v2));
                    out.params[name][param] = *text;
                }
            }
        }
        if (const auto it = param_overrides_.find(pkey); it != param_overrides_.end()) {
            for (const auto& [name, values] : it->second)
                for (const auto& [param, given] : values) {
                    if (const std::string problem = check_named(name); !problem.empty())
                        throw error(file_ + ": --set " + given.second + ": key '" + pkey + "." + name +
                                    "': " + problem);
                    out.params[name][param] = given.first;
                }
        }
    }

    // Every format plugin the quantization keys name (not "fp32" or "pow2").
    static std::set<std::string> formats_named(const quantization_config& q) {
        std::set<std::string> out;
        quantization_config scratch = q;
        scratch.params.clear();
        rename_formats(scratch,
                       [&](const std::string&, const std::string& name) { return *out.insert(name).first; });
        out.erase("fp32");
        out.erase("pow2");
        return out;
    }

    template <class S>
    void read_field(const field<S>& f, const toml::node& n, S& out, const std::string& key) const {
        switch (f.type) {
            case kind::integer: {
                const std::string expected = "expected an integer " + std::to_string(f.imin) + ".." +
                                             std::to_string(f.imax) + ", got ";
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
            case kind::format: out.*std::get<std::string S::*>(f.member) = format_name(n, key); break;
            case kind::names:             // plugin lists have a reader of their own
            case kind::accumulator:       // so do accumulators
            case kind::operand:           // and operands
            case kind::transform: break;  // and transforms
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
                    if (!e.is_string())
                        fail(key, "expected an array of plugin names, got an element " + describe(e));
                    given.push_back(e.as_string()->get());
                }
            } else {
                fail(key,
                     "expected an array of plugin names, e.g. [\"mantissa_shift\"], got " + describe(*n));
            }
            for (const std::string& name : given) {
                if (!sdk::is_plugin_name(name))
                    fail(key, std::string("expected plugin names (") + sdk::kPluginNamePattern + "), got " +
                                  quote(name));
                if (std::find(l.names->begin(), l.names->end(), name) != l.names->end())
                    fail(key, quote(name) + " is listed twice");
                l.names->push_back(name);
            }
        }
        const std::string pkey = l.params_key();
        const toml::node* p = section == nullptr ? nullptr : section->get("params");
        if (p != nullptr && !p->is_table())
            fail(pkey, "expected a table of tables ([" + pkey + ".NAME]), got " + describe(*p));
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
                    const std::optional<given_param> text = param_value(v2);
                    if (!text)
                        fail(where + "." + param,
                             "expected a string, number or boolean, got " + describe(v2));
                    (*l.params)[name][param] = *text;
                }
            }
        }
        if (const auto it = param_overrides_.find(pkey); it != param_overrides_.end()) {
            for (const auto& [name, values] : it->second)
                for (const auto& [param, given] : values) {
                    if (std::find(l.names->begin(), l.names->end(), name) == l.names->end())
                        throw error(file_ + ": --set " + given.second + ": key '" + pkey + "." + name +
                                    "': parameters for '" + name + "', which is not in " + key +
                                    " (enable it there)");
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

    // Which layers a rule takes: exactly one of pattern, last and last_fraction.
    void read_rule_selector(const toml::table& t, const std::string& key, quantization_rule& rule) const {
        const toml::node* p = t.get("pattern");
        const toml::node* last = t.get("last");
        const toml::node* fraction = t.get("last_fraction");
        const int given = (p != nullptr) + (last != nullptr) + (fraction != nullptr);
        if (given == 0)
            fail(key + ".pattern",
                 "missing (every rule names its layers: pattern = \"blocks.*.attn.*\", last = N (the last N "
                 "linear layers) or last_fraction = F)");
        if (given > 1) fail(key, "names its layers twice: give one of pattern, last and last_fraction");
        if (p != nullptr) {
            if (!p->is_string() || !valid_pattern(p->as_string()->get()))
                fail(key + ".pattern",
                     "expected a layer-name pattern (letters, digits, '_', '-', '.', '*' and '?'), got " +
                         describe(*p));
            rule.pattern = p->as_string()->get();
        }
        if (last != nullptr) {
            const std::optional<int64_t> n = last->value<int64_t>();
            if (!last->is_integer() || !n || *n < 1 || *n > 1000000)
                fail(key + ".last",
                     "expected an integer 1..1000000 (the last N linear layers), got " + describe(*last));
            rule.last = *n;
        }
        if (fraction != nullptr) {
            const std::optional<double> f = fraction->value<double>();
            if (!(fraction->is_floating_point() || fraction->is_integer()) || !f || !(*f > 0.0 && *f <= 1.0))
                fail(key + ".last_fraction",
                     "expected a number in (0, 1] (the last fraction of the linear layers), got " +
                         describe(*fraction));
            rule.last_fraction = *f;
        }
    }

    void read_rules(const toml::table* q, quantization_config& out) const {
        const toml::node* n = get(q, kRulesKey);
        if (n == nullptr) return;
        const toml::array* rules = n->as_array();
        if (rules == nullptr)
            fail(kRulesKey,
                 "expected an array of tables ([[quantization.rules]] entries), got " + describe(*n));
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
                    fail(key + "." + name,
                         "unknown key (a typo?)" + suggestion(key + "." + name, candidates));
            }
            quantization_rule rule;
            read_rule_selector(t, key, rule);
            std::optional<std::string> all;
            if (const toml::node* f = t.get("format")) all = format_name(*f, key + ".format");
            std::optional<std::string>* directions[] = {&rule.weight, &rule.activation, &rule.gradient};
            const char* names[] = {"weight", "activation", "gradient"};
            for (int d = 0; d < 3; ++d) {
                if (const toml::node* f = t.get(names[d]))
                    *directions[d] = format_name(*f, key + "." + names[d]);
                else *directions[d] = all;
            }
            for (const overlay_field& f : overlay_fields())
                if (const toml::node* v = t.get(f.spec.key); v && f.scaling)
                    read_overlay_key(f, *v, key + "." + f.spec.key, rule.scaling);
            read_rule_products(t, key, rule.products);
            const bool products = std::any_of(rule.products.begin(), rule.products.end(),
                                              [](const product_config& p) { return !p.empty(); });
            if (!rule.weight && !rule.activation && !rule.gradient && rule.scaling.empty() && !products)
                fail(key,
                     "sets nothing: give format (all three directions), weight, activation or gradient, "
                     "a scaling key (granularity, block_size, block_rows, scale_format, scale_rule) or a "
                     "product's accumulator or operands (forward, input_gradient, weight_gradient)");
            out.rules.push_back(std::move(rule));
        }
    }
};

run_config parse_impl(const std::string& text, const std::string& file, const fs::path& source,
                      const std::vector<std::string>& overrides,
                      const std::vector<std::string>* layers = nullptr) {
    const toml::table doc = parse_toml_text(text, file);
    reader r(file, source, layers);
    for (const std::string& o : overrides) r.add_override(o);
    return r.read(doc);
}

}  // namespace

run_config load_config(const fs::path& file, const std::vector<std::string>& overrides) {
    const std::string name = file.string();
    std::error_code ec;
    if (fs::is_directory(file, ec)) throw error(name + ": is a folder, expected a config file (.toml)");
    if (!fs::exists(file, ec)) throw error(name + ": no such config file");
    return parse_impl(read_file_text(file, kConfigLimit, "a config file"), name, file, overrides);
}

run_config parse_config(const std::string& toml_text, const std::string& source_name,
                        const std::vector<std::string>& overrides) {
    return parse_impl(toml_text, source_name, fs::path(source_name), overrides);
}

run_config parse_config_for_layers(const std::string& toml_text, const std::string& source_name,
                                   const std::vector<std::string>& layers,
                                   const std::vector<std::string>& overrides) {
    return parse_impl(toml_text, source_name, fs::path(source_name), overrides, &layers);
}

}  // namespace altgrad::host::config
