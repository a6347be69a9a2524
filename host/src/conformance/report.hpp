// Printing conformance results: a table for people, JSON for tools.
#pragma once

#include <ostream>
#include <vector>

#include "conformance/kit.hpp"

namespace altgrad::host::conformance {

// brief: one line per plugin plus the results that did not pass.
void print_text(std::ostream& out, const std::vector<plugin_report>& reports, const options& o,
                bool brief = false);
void print_json(std::ostream& out, const std::vector<plugin_report>& reports, const options& o);

// True when any result failed, crashed or timed out.
bool any_failure(const std::vector<plugin_report>& reports);

}  // namespace altgrad::host::conformance
