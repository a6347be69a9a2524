// Turning user-given parameter values (text, from the command line or a
// config) into the validated, complete altgrad_param_list a plugin's create()
// receives: every declared key once, typed, in range, defaults filled in.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <altgrad/altgrad.h>

#include "plugins/manifest.hpp"

namespace altgrad::host {

// Owns the strings and items the C list points into.
class param_values {
public:
    const altgrad_param_list* list() const { return &list_; }
    const std::vector<altgrad_param>& items() const { return items_; }

private:
    friend param_values resolve_params(const manifest&, const std::map<std::string, std::string>&,
                                       const std::string&);
    std::vector<std::unique_ptr<std::string>> strings_;
    std::vector<altgrad_param> items_;
    altgrad_param_list list_{sizeof(altgrad_param_list), nullptr, 0};
};

// Validate `given` (key -> text) against the manifest. `where` names the
// source in errors (e.g. "--param" or "configs/x.toml: quantization.params").
param_values resolve_params(const manifest& m, const std::map<std::string, std::string>& given,
                            const std::string& where);

}  // namespace altgrad::host
