// The JSON the run directory's files are written in, for the writers and
// readers of run/files.hpp only: numbers in both forms (metrics and summaries:
// null for a non-finite one; checkpoint state: exact, with "nan"/"inf"), and
// `fields`, which reads an object's keys with errors naming the file and key.
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "run/catalog.hpp"
#include "run/records.hpp"
#include "util/error.hpp"

namespace altgrad::host::run::json_io {

namespace fs = std::filesystem;

// Ordered: keys stay in the order written, so "kind", "run_id", "step" lead.
using json = nlohmann::ordered_json;

// ---- numbers ------------------------------------------------------------------------

// Metrics and summary numbers: JSON has no NaN or Inf, and null reads as NaN in pandas.
inline json number_or_null(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }

// State numbers, exactly: finite doubles round-trip through nlohmann's
// shortest decimal form; the non-finite ones become strings.
inline json exact(double x) {
    if (std::isfinite(x)) return json(x);
    if (std::isnan(x)) return json("nan");
    return json(x > 0 ? "inf" : "-inf");
}

// ---- reading fields, with errors naming the file and key ---------------------------------

class fields {
public:
    fields(const json& object, std::string where, std::string prefix = "")
        : j_(object), where_(std::move(where)), prefix_(std::move(prefix)) {
        if (!j_.is_object()) throw fail("", "expected an object");
    }
    error fail(const std::string& key, const std::string& what) const {
        if (key.empty() && prefix_.empty()) return error(where_ + ": " + what);
        return error(where_ + ": key '" + prefix_ + key + "': " + what);
    }
    bool has(const char* key) const { return j_.contains(key); }
    const json& at(const char* key) const {
        const auto it = j_.find(key);
        if (it == j_.end()) throw fail(key, "missing");
        return *it;
    }
    fields object(const char* key) const { return fields(at(key), where_, prefix_ + key + "."); }
    const json& array(const char* key) const {
        const json& a = at(key);
        if (!a.is_array()) throw fail(key, "expected an array");
        return a;
    }
    std::string string(const char* key) const {
        const json& v = at(key);
        if (!v.is_string()) throw fail(key, "expected a string");
        return v.get<std::string>();
    }
    int64_t integer(const char* key) const {
        const json& v = at(key);
        if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
            throw fail(key, "out of range");
        if (!v.is_number_integer()) throw fail(key, "expected an integer");
        return v.get<int64_t>();
    }
    uint64_t count(const char* key) const {
        const json& v = at(key);
        if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
            throw fail(key, "expected a count (an integer >= 0)");
        return v.get<uint64_t>();
    }
    std::optional<int64_t> optional_integer(const char* key) const {
        if (!has(key) || at(key).is_null()) return std::nullopt;
        return integer(key);
    }
    // A metrics or summary number: null is NaN.
    double number(const char* key) const {
        const json& v = at(key);
        if (v.is_null()) return NAN;
        if (!v.is_number()) throw fail(key, "expected a number or null");
        return v.get<double>();
    }
    // A state number (exact()'s form).
    double exact_number(const char* key) const { return exact_value(at(key), key); }
    double exact_value(const json& v, const std::string& key) const {
        if (v.is_number()) return v.get<double>();
        if (v.is_string()) {
            const std::string s = v.get<std::string>();
            if (s == "nan") return NAN;
            if (s == "inf") return INFINITY;
            if (s == "-inf") return -INFINITY;
        }
        throw fail(key, "expected a number, \"nan\", \"inf\" or \"-inf\"");
    }
    std::string key(const std::string& k) const { return prefix_ + k; }
    const std::string& where() const { return where_; }

private:
    const json& j_;
    std::string where_, prefix_;
};

// Text that is not JSON: nlohmann's message without its
// "[json.exception.parse_error.101] " tag, and whether the text ended inside a
// value (a writer killed mid-write: the error is at its last byte) rather than
// holding something that is not JSON.
struct json_failure {
    std::string message;
    bool cut_short;
};

// json::parse, throwing json_failure for every text it refuses: a number
// beyond double's range ("1e400") is an out_of_range error, not a
// parse_error, and escaped the readers that caught only the latter.
json parse_json(std::string_view text);

// A file's bytes; nothing when it cannot be read (or is a folder). A file of
// more than `limit` bytes (util/file_text.hpp's limits) throws host::error.
std::optional<std::string> read_text(const fs::path& file, size_t limit);

// parse_json, as a host::error "NAME: cut short (half-written?): ..." or "NAME: not valid JSON: ...".
json parse_json_text(const std::string& text, const std::string& name);

// The history both summary.json and state.json keep: format switches and intervention counts.
json switches_json(const std::vector<format_switch>& switches);
std::vector<format_switch> switches_from(const fields& f, const char* key);
json interventions_json(const std::map<std::string, std::map<std::string, int64_t>>& counts);
std::map<std::string, std::map<std::string, int64_t>> interventions_from(const fields& f, const char* key);

// Metric `m`'s value in the object `f` reads (a nested name too: "blocks.saturated"):
// a count or a number (null: NaN; `exact`: the state's form); nothing when the key is absent.
std::optional<double> get_metric(const fields& f, const metric& m, bool exact_numbers = false);

// A value written with metric `m`'s type (a count, or a number or null) into `j`,
// under its name ("blocks.saturated" in the nested object "blocks").
void put_metric(json& j, const metric& m, double value, bool exact_numbers = false);

}  // namespace altgrad::host::run::json_io
