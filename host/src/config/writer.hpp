// The run config written back out: what a run directory's config.toml, the
// failure report and the report's settings table hold.
#pragma once

#include <string>

#include "config/run_config.hpp"

namespace altgrad::host::config {

// The fully resolved config as TOML: every key with its value (defaults filled
// in), in schema order, then every layer's resolved operands as comments;
// parse_config(to_toml(c), ...) == c.
std::string to_toml(const run_config& config);

}  // namespace altgrad::host::config
