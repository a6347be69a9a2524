// Text of values, for the config's reader (reader.cpp) and writer (to_toml,
// writer.cpp), private to the config room: values and keys written as
// TOML, a value named in an error, and the checks a text must pass.
#pragma once

#include <string>
#include <vector>

#include <toml++/toml.h>

namespace altgrad::host::config {

// The shortest decimal text that reads back to exactly `d`, always a TOML
// float (1.0, not 1).
std::string float_text(double d);
// A bound in a range description: 1000000 rather than 1e+06, 0.5 as is.
std::string bound_text(double d);
// A TOML basic string, escaped.
std::string quote(const std::string& s);
// A key as TOML text: bare when it may be (A-Za-z0-9_-), else quoted, so a
// parameter named "a.b" or "with space" is one key again when read back.
std::string key_text(const std::string& k);
// What a node holds, for "got ..." in errors (long strings shortened).
std::string describe(const toml::node& n);

bool valid_utf8(const std::string& s);
// Without the spaces and tabs around it.
std::string trim(const std::string& s);
// The last part of a dotted key.
std::string leaf_of(const std::string& key);
// "; did you mean 'training.max_steps'?" for a near miss (or the same key in
// another section), else "".
std::string suggestion(const std::string& key, const std::vector<std::string>& candidates);
// A layer-name pattern: letters, digits, '_', '-', '.', '*' and '?' (at most 256).
bool valid_pattern(const std::string& s);
// A run name: not empty, at most 128 bytes of UTF-8, no '/', '\\' or control characters.
bool valid_run_name(const std::string& s);

}  // namespace altgrad::host::config
