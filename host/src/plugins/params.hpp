// Turning user-given parameter values (text, from the command line or a
// config) into the validated, complete altgrad_param_list a plugin's create()
// receives: every declared key once, typed, in range, defaults filled in.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <altgrad/altgrad.h>

#include "plugins/manifest.hpp"

namespace altgrad::host {

// How a parameter's value was written: as bare text with no type (the command
// line's --param KEY=VALUE, Python's keywords), or as a TOML string, integer,
// float or boolean (a config). A typed value must match the manifest's type,
// so `d = "16"` is refused where d is an integer; bare text is read as the
// manifest's type.
enum class param_kind { text, string, integer, floating, boolean };

// One parameter as given: its text (a string's contents, a number's or a
// boolean's TOML text) and how it was written.
struct given_param {
    std::string text;
    param_kind kind = param_kind::text;
    given_param() = default;
    given_param(std::string t, param_kind k = param_kind::text) : text(std::move(t)), kind(k) {}
    given_param(const char* t) : text(t) {}
    bool operator==(const given_param& o) const { return text == o.text && kind == o.kind; }
    bool operator<(const given_param& o) const { return text != o.text ? text < o.text : kind < o.kind; }
};

// A plugin's parameters as given: key -> value.
using given_params = std::map<std::string, given_param>;

// Owns the strings and items the C list points into.
class param_values {
public:
    const altgrad_param_list* list() const { return &list_; }
    const std::vector<altgrad_param>& items() const { return items_; }

private:
    friend param_values resolve_params(const manifest&, const given_params&, const std::string&);
    std::vector<std::unique_ptr<std::string>> strings_;
    std::vector<altgrad_param> items_;
    altgrad_param_list list_{sizeof(altgrad_param_list), nullptr, 0};
};

// Validate `given` (key -> text) against the manifest. `where` names the
// source in errors (e.g. "--param" or "configs/x.toml: quantization.params").
param_values resolve_params(const manifest& m, const given_params& given, const std::string& where);

}  // namespace altgrad::host
