#include "plugins/params.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "util/error.hpp"

namespace altgrad::host {

namespace {

std::string describe_range(const param_decl& d) {
    std::string s;
    if (d.min) s += " min " + std::to_string(*d.min);
    if (d.max) s += " max " + std::to_string(*d.max);
    return s;
}

// A parameter given that the manifest does not declare is an error naming it and the declared ones.
void refuse_undeclared(const manifest& m, const given_params& given, const std::string& who) {
    for (const auto& [key, value] : given) {
        bool declared = false;
        for (const param_decl& d : m.params) declared = declared || d.key == key;
        if (declared) continue;
        std::string keys;
        for (const param_decl& d : m.params) keys += (keys.empty() ? "" : ", ") + d.key;
        throw error(who + ": unknown parameter '" + key + "' (declared: " + (keys.empty() ? "none" : keys) +
                    ")");
    }
}

// The TOML kinds a config may write a parameter of `type` as (text, untyped, always).
bool kind_fits(param_kind kind, altgrad_param_type type) {
    switch (kind) {
        case param_kind::text: return true;
        case param_kind::string: return type == ALTGRAD_PARAM_STRING;
        case param_kind::integer: return type == ALTGRAD_PARAM_INT || type == ALTGRAD_PARAM_FLOAT;
        case param_kind::floating: return type == ALTGRAD_PARAM_FLOAT;
        case param_kind::boolean: return type == ALTGRAD_PARAM_BOOL;
    }
    return false;
}

const char* kind_name(param_kind kind) {
    switch (kind) {
        case param_kind::text: return "text";
        case param_kind::string: return "a string";
        case param_kind::integer: return "an integer";
        case param_kind::floating: return "a float";
        case param_kind::boolean: return "a boolean";
    }
    return "?";
}

const char* type_name(altgrad_param_type type) {
    switch (type) {
        case ALTGRAD_PARAM_BOOL: return "a boolean";
        case ALTGRAD_PARAM_INT: return "an integer";
        case ALTGRAD_PARAM_FLOAT: return "a number";
        case ALTGRAD_PARAM_STRING: return "a string";
    }
    return "?";
}

}  // namespace

param_values resolve_params(const manifest& m, const given_params& given, const std::string& where) {
    const std::string who = where + ": plugin '" + m.name + "'";
    refuse_undeclared(m, given, who);
    param_values v;
    for (const param_decl& d : m.params) {
        altgrad_param p{};
        p.struct_size = sizeof p;
        p.type = d.type;
        v.strings_.push_back(std::make_unique<std::string>(d.key));
        p.key = v.strings_.back()->c_str();
        const auto it = given.find(d.key);
        const bool user = it != given.end();
        const std::string& text = user ? it->second.text : std::string();
        auto bad = [&](const std::string& what) -> error {
            return error(who + ": parameter '" + d.key + "' = \"" + text + "\": " + what);
        };
        if (user && !kind_fits(it->second.kind, d.type))
            throw bad(std::string("expected ") + type_name(d.type) + ", got " + kind_name(it->second.kind));
        switch (d.type) {
            case ALTGRAD_PARAM_BOOL:
                if (!user) p.bool_value = d.default_bool;
                else if (text == "true") p.bool_value = 1;
                else if (text == "false") p.bool_value = 0;
                else throw bad("expected true or false");
                break;
            case ALTGRAD_PARAM_INT: {
                p.int_value = d.default_int;
                if (user) {
                    char* end = nullptr;
                    errno = 0;
                    const long long x = std::strtoll(text.c_str(), &end, 10);
                    if (text.empty() || *end != '\0' || errno == ERANGE) throw bad("expected an integer");
                    p.int_value = x;
                }
                const double x = static_cast<double>(p.int_value);
                if ((d.min && x < *d.min) || (d.max && x > *d.max))
                    throw bad("out of range:" + describe_range(d));
                break;
            }
            case ALTGRAD_PARAM_FLOAT: {
                p.float_value = d.default_float;
                if (user) {
                    char* end = nullptr;
                    const double x = std::strtod(text.c_str(), &end);
                    if (text.empty() || *end != '\0' || !std::isfinite(x))
                        throw bad("expected a finite number");
                    p.float_value = x;
                }
                if ((d.min && p.float_value < *d.min) || (d.max && p.float_value > *d.max))
                    throw bad("out of range:" + describe_range(d));
                break;
            }
            case ALTGRAD_PARAM_STRING: {
                const std::string value = user ? text : d.default_string;
                if (!d.choices.empty()) {
                    bool ok = false;
                    std::string all;
                    for (const std::string& c : d.choices) {
                        ok = ok || c == value;
                        all += (all.empty() ? "" : ", ") + c;
                    }
                    if (!ok) throw bad("expected one of " + all);
                }
                v.strings_.push_back(std::make_unique<std::string>(value));
                p.string_value = v.strings_.back()->c_str();
                break;
            }
        }
        v.items_.push_back(p);
    }
    v.list_.items = v.items_.empty() ? nullptr : v.items_.data();
    v.list_.count = v.items_.size();
    return v;
}

}  // namespace altgrad::host
