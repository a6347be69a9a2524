// AltGrad SDK: the ABI's naming rules, written once. The host checks
// manifests, configs and plugin results with these; a plugin may check the
// names it is given (e.g. format names in its parameters) with the same.
//
//   plugin name    [a-z0-9][a-z0-9_]*, at most 64 characters (entry.h)
//   parameter key  [a-z][a-z0-9_]*, at most 64 characters (params.h)
//   value name     [a-z0-9_.]+, shorter than ALTGRAD_VALUE_NAME_CAPACITY (diagnostic.h)
#pragma once

#include <cstddef>
#include <string_view>

#include <altgrad/altgrad.h>

namespace altgrad::sdk {

// For messages: "expected plugin names ([a-z0-9][a-z0-9_]*)".
inline constexpr const char* kPluginNamePattern = "[a-z0-9][a-z0-9_]*";
inline constexpr size_t kMaxPluginNameLength = 64;

inline bool is_plugin_name(std::string_view s) {
    if (s.empty() || s.size() > kMaxPluginNameLength || s[0] == '_') return false;
    for (char c : s)
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
    return true;
}

inline bool is_param_key(std::string_view s) { return is_plugin_name(s) && s[0] >= 'a' && s[0] <= 'z'; }

// `name` must be NUL-terminated (callers reading a fixed-size ABI field check
// that first).
inline bool is_value_name(const char* name) {
    if (name == nullptr || name[0] == '\0') return false;
    size_t n = 0;
    for (; name[n] != '\0'; ++n) {
        const char c = name[n];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.')) return false;
    }
    return n < ALTGRAD_VALUE_NAME_CAPACITY;
}

}  // namespace altgrad::sdk
