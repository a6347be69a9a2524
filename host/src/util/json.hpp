// A small JSON writer for --json outputs (and, later, metrics.jsonl).
#pragma once

#include <string>

namespace altgrad::host::json {

// A JSON string literal, quotes included.
std::string quote(const std::string& s);

// A JSON number; non-finite values become null (JSON has no NaN or Inf).
std::string number(double x);

}  // namespace altgrad::host::json
