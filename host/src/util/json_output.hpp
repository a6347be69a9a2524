// The --json outputs of `list`, `describe` and `conformance`, built with
// nlohmann::json (keys in the order written, as the run directory's files).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace altgrad::host {

using ordered_json = nlohmann::ordered_json;

// The document as the commands print it: indented by two spaces, one final
// newline. JSON has no NaN or infinity: a non-finite number is written as
// null (nlohmann's rule). Text that is not UTF-8 (a plugin's description or
// error) has each bad byte replaced by U+FFFD, so the output always parses.
inline std::string json_output(const ordered_json& document) {
    return document.dump(2, ' ', false, ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace altgrad::host
