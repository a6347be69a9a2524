// One glob for the whole host: config rules ("blocks.*.attn.*") and the
// conformance kit's --only ("quantize.*") match names the same way.
#pragma once

#include <string_view>

namespace altgrad::host {

// Whole-name match: '*' matches any run of characters (dots too, empty too),
// '?' exactly one; every other character matches itself.
bool glob_match(std::string_view pattern, std::string_view name);

}  // namespace altgrad::host
