// A small strict JSON reader, for what the host itself wrote (metrics.jsonl,
// summary.json) and reads back in `report`. RFC 8259: no comments, no trailing
// commas, no NaN/Inf (the writer puts null there), whole input one value.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/error.hpp"

namespace altgrad::host::json {

class value {
public:
    enum class kind { null, boolean, number, string, array, object };

    value() = default;
    static value make_bool(bool b);
    static value make_number(double d);
    static value make_string(std::string s);
    static value make_array(std::vector<value> items);
    static value make_object(std::vector<std::pair<std::string, value>> members);

    kind type() const { return kind_; }
    bool is_null() const { return kind_ == kind::null; }
    bool is_bool() const { return kind_ == kind::boolean; }
    bool is_number() const { return kind_ == kind::number; }
    bool is_string() const { return kind_ == kind::string; }
    bool is_array() const { return kind_ == kind::array; }
    bool is_object() const { return kind_ == kind::object; }

    // The payloads; each is empty/zero for a value of another kind.
    bool as_bool() const { return bool_; }
    double as_number() const { return number_; }
    const std::string& as_string() const { return string_; }
    const std::vector<value>& items() const { return items_; }
    // Object members in file order (a repeated key keeps both; find() gives the last).
    const std::vector<std::pair<std::string, value>>& members() const { return members_; }

    // The member `key` of an object (the last one when repeated), or nullptr.
    const value* find(std::string_view key) const;
    // Convenience for optional fields: the member as a number / string when it is one.
    std::optional<double> number_at(std::string_view key) const;
    std::optional<std::string> string_at(std::string_view key) const;

private:
    kind kind_ = kind::null;
    bool bool_ = false;
    double number_ = 0;
    std::string string_;
    std::vector<value> items_;
    std::vector<std::pair<std::string, value>> members_;
};

// A syntax error: the message says what and where ("at offset 17: expected ':'").
// `truncated` is true when the text ended in the middle of a value, i.e. the
// text is a prefix of some valid JSON (a line cut off by a kill mid-write).
class parse_error : public error {
public:
    parse_error(const std::string& message, size_t at, bool cut_off) : error(message), offset(at), truncated(cut_off) {}
    size_t offset;
    bool truncated;
};

// Parses `text` as exactly one JSON value (whitespace around it allowed).
// Throws parse_error. Nesting deeper than 200 levels is an error.
value parse(std::string_view text);

}  // namespace altgrad::host::json
