#include "util/numbers.hpp"

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "util/error.hpp"

namespace altgrad::host {

std::optional<float> parse_float(const std::string& token) {
    if (token.empty()) return std::nullopt;
    char* end = nullptr;
    errno = 0;
    const float x = std::strtof(token.c_str(), &end);
    // The whole token, not up to an embedded NUL byte ("1\0002" is not 1).
    if (end == token.c_str() || end != token.c_str() + token.size()) return std::nullopt;
    return x;  // ERANGE: strtof already gave +-Inf or the correctly rounded tiny value
}

std::optional<uint64_t> parse_uint64(const std::string& text) {
    uint64_t value = 0;
    const char* end = text.data() + text.size();
    const auto [stop, ec] = std::from_chars(text.data(), end, value);  // no sign accepted for unsigned
    if (text.empty() || ec != std::errc() || stop != end) return std::nullopt;
    return value;
}

namespace {

// The next whitespace-separated token of `in` (false at the end), at most
// kMaxNumberToken + 1 characters of it; `bytes` counts what was read.
bool next_token(std::istream& in, std::string& token, size_t& bytes) {
    token.clear();
    std::streambuf* buf = in.rdbuf();
    int c = 0;
    while ((c = buf->sbumpc()) != EOF && std::isspace(c)) ++bytes;
    if (c == EOF) return false;
    for (;;) {
        ++bytes;
        token.push_back(static_cast<char>(c));
        if (token.size() > kMaxNumberToken) return true;
        c = buf->sgetc();
        if (c == EOF || std::isspace(c)) return true;
        buf->sbumpc();
    }
}

}  // namespace

std::vector<float> read_floats(std::istream& in, const std::string& source, size_t max_bytes) {
    std::vector<float> values;
    std::string token;
    size_t index = 0, bytes = 0;
    while (next_token(in, token, bytes)) {
        ++index;
        if (token.size() > kMaxNumberToken)
            throw error(source + ": token " + std::to_string(index) + " is longer than " +
                        std::to_string(kMaxNumberToken) + " characters: not a number");
        if (bytes > max_bytes)
            throw error(source + ": more than " + std::to_string(max_bytes) + " bytes of numbers");
        const std::optional<float> x = parse_float(token);
        if (!x)
            // Quoted as a JSON string: control bytes escaped, bytes that are not UTF-8 replaced.
            throw error(source + ": token " + std::to_string(index) + " " +
                        nlohmann::json(token).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                        " is not a number (decimal, hex-float, nan or inf)");
        values.push_back(*x);
    }
    return values;
}

std::string hex_float(double x) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%a", x);
    return buf;
}

std::string shortest_decimal(double x) {
    if (std::isnan(x)) return "nan";
    if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
    char buf[40];
    // Whole numbers in full ("1000", not "1e+03"), as far as a double holds every integer.
    if (x == std::trunc(x) && std::fabs(x) < 0x1p53) {
        std::snprintf(buf, sizeof buf, "%.0f", x);
        return buf;
    }
    for (int digits = 1; digits <= 17; ++digits) {  // 17 significant digits always read back exactly
        std::snprintf(buf, sizeof buf, "%.*g", digits, x);
        if (std::strtod(buf, nullptr) == x) break;
    }
    return buf;
}

}  // namespace altgrad::host
