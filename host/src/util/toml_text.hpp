// TOML text to a table, with a syntax error as the host's one-line error:
//   configs/x.toml:7: not valid TOML: Error while parsing key-value pair: ...
// (run configs and hypotheses files both read this way).
#pragma once

#include <algorithm>
#include <string>
#include <string_view>

#include <toml++/toml.h>

#include "util/error.hpp"

namespace altgrad::host {

inline toml::table parse_toml_text(const std::string& text, const std::string& source_name) {
    try {
        return toml::parse(std::string_view(text), std::string_view(source_name));
    } catch (const toml::parse_error& e) {
        std::string what(e.description());
        std::replace(what.begin(), what.end(), '\n', ' ');
        throw error(source_name + ":" + std::to_string(e.source().begin.line) + ": not valid TOML: " + what);
    }
}

}  // namespace altgrad::host
