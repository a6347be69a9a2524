// AltGrad SDK: the ABI's naming rules, written once. The host checks
// manifests, configs and plugin results with these; a plugin may check the
// names it is given (e.g. format names in its parameters) with the same.
//
//   plugin name    [a-z0-9][a-z0-9_]*, at most 64 characters (entry.h)
//   parameter key  [a-z][a-z0-9_]*, at most 64 characters (params.h)
//   value name     [a-z0-9_.]+, shorter than ALTGRAD_VALUE_NAME_CAPACITY (diagnostic.h)
//   series name    a headline's series (ABI 1.3, diagnostic.h): a value name
//                  that is none of the host's own series (kHostSeriesNames)
//   headline text  a headline's title, label or unit: one line shorter than
//                  ALTGRAD_HEADLINE_TEXT_CAPACITY, no control characters
//
// All are constexpr, so the diagnostic adapter checks a class's headlines
// when the plugin compiles.
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
inline constexpr bool is_value_name(const char* name) {
    if (name == nullptr || name[0] == '\0') return false;
    for (size_t n = 0; name[n] != '\0'; ++n) {  // reads at most ALTGRAD_VALUE_NAME_CAPACITY bytes
        const char c = name[n];
        if (n + 1 >= ALTGRAD_VALUE_NAME_CAPACITY) return false;
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.')) return false;
    }
    return true;
}

// The series the host itself records for every run (metrics.jsonl, reports):
// a diagnostic's headline may not take one of these names.
inline constexpr const char* kHostSeriesNames[] = {"loss",      "val_loss",     "lr",
                                                   "grad_norm", "tokens_per_s", "grad_sparsity",
                                                   "overflow",  "underflow",    "bit_stall"};

// Two NUL-terminated strings hold the same bytes (std::strcmp, but constexpr).
inline constexpr bool same_text(const char* a, const char* b) {
    size_t i = 0;
    while (a[i] != '\0' && a[i] == b[i]) ++i;
    return a[i] == b[i];
}

inline constexpr bool is_host_series_name(const char* name) {
    for (const char* host : kHostSeriesNames)
        if (same_text(name, host)) return true;
    return false;
}

// A headline's series: a value name that is not one of the host's series.
inline constexpr bool is_series_name(const char* name) {
    return is_value_name(name) && !is_host_series_name(name);
}

// A headline's title, label or unit (NUL-terminated): shorter than
// ALTGRAD_HEADLINE_TEXT_CAPACITY bytes, no control character (0x00-0x1F,
// 0x7F), empty only when `may_be_empty`. UTF-8 beyond ASCII is the host's to
// check (the bytes pass here).
inline constexpr bool is_headline_text(const char* text, bool may_be_empty) {
    if (text == nullptr) return false;
    size_t n = 0;
    for (; text[n] != '\0'; ++n) {
        const unsigned char c = static_cast<unsigned char>(text[n]);
        if (c < 0x20 || c == 0x7F || n + 1 >= ALTGRAD_HEADLINE_TEXT_CAPACITY) return false;
    }
    return n > 0 || may_be_empty;
}

}  // namespace altgrad::sdk
