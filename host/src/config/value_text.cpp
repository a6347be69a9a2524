// Text of values (value_text.hpp says what each function does).
#include "config/value_text.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "util/edit_distance.hpp"

namespace altgrad::host::config {

std::string float_text(double d) {
    char buf[48];
    int precision = 1;
    for (; precision <= 17; ++precision) {
        std::snprintf(buf, sizeof buf, "%.*g", precision, d);
        if (std::strtod(buf, nullptr) == d) break;
    }
    // %g writes 50 as 5e+01: between 1e-4 and 1e16 prefer the same digits in fixed notation.
    if (std::strchr(buf, 'e') != nullptr && std::fabs(d) >= 1e-4 && std::fabs(d) < 1e16) {
        const int exponent = static_cast<int>(std::floor(std::log10(std::fabs(d))));
        char fixed[48];
        std::snprintf(fixed, sizeof fixed, "%.*f", std::max(0, precision - 1 - exponent), d);
        if (std::strtod(fixed, nullptr) == d) std::strcpy(buf, fixed);
    }
    std::string s(buf);
    if (s.find_first_of(".eEni") == std::string::npos) s += ".0";
    return s;
}

std::string bound_text(double d) {
    if (d == std::floor(d) && std::fabs(d) < 1e15) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.0f", d);
        return buf;
    }
    std::string s = float_text(d);
    return s;
}

std::string quote(const std::string& s) {
    std::string out = "\"";
    for (unsigned char ch : s) {
        switch (ch) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\b': out += "\\b"; break;
            case '\t': out += "\\t"; break;
            case '\n': out += "\\n"; break;
            case '\f': out += "\\f"; break;
            case '\r': out += "\\r"; break;
            default:
                if (ch < 0x20 || ch == 0x7f) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04X", ch);
                    out += buf;
                } else {
                    out += static_cast<char>(ch);
                }
        }
    }
    return out + "\"";
}

std::string key_text(const std::string& k) {
    bool bare = !k.empty();
    for (unsigned char ch : k)
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
              ch == '-'))
            bare = false;
    return bare ? k : quote(k);
}

std::string describe(const toml::node& n) {
    if (const auto* s = n.as_string()) {
        const std::string& v = s->get();
        return v.size() > 80 ? quote(v.substr(0, 77)) + "..." : quote(v);
    }
    if (const auto* i = n.as_integer()) return std::to_string(i->get());
    if (const auto* f = n.as_floating_point()) return float_text(f->get());
    if (const auto* b = n.as_boolean()) return b->get() ? "true" : "false";
    if (n.is_table()) return "a table";
    if (n.is_array()) return "an array";
    return "a date/time";
}

bool valid_utf8(const std::string& s) {
    size_t i = 0;
    while (i < s.size()) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
        if (len == 0 || i + len > s.size()) return false;
        for (size_t k = 1; k < len; ++k)
            if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return false;
        i += len;
    }
    return true;
}

std::string trim(const std::string& s) {
    const size_t b = s.find_first_not_of(" \t");
    if (b == std::string::npos) return "";
    const size_t e = s.find_last_not_of(" \t");
    return s.substr(b, e - b + 1);
}

std::string leaf_of(const std::string& key) {
    const size_t dot = key.rfind('.');
    return dot == std::string::npos ? key : key.substr(dot + 1);
}

std::string suggestion(const std::string& key, const std::vector<std::string>& candidates) {
    const std::string leaf = leaf_of(key);
    for (const std::string& c : candidates)
        if (leaf_of(c) == leaf && c != key && c.find('.') != std::string::npos)
            return "; did you mean '" + c + "'?";
    const std::string* best = nullptr;
    size_t best_d = 0;
    for (const std::string& c : candidates) {
        const size_t d = edit_distance(key, c);
        if (best == nullptr || d < best_d) best = &c, best_d = d;
    }
    if (best != nullptr && best_d <= std::max<size_t>(2, leaf.size() / 4))
        return "; did you mean '" + *best + "'?";
    return "";
}

bool valid_pattern(const std::string& s) {
    if (s.empty() || s.size() > 256) return false;
    for (char c : s)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '.' || c == '*' || c == '?' || c == '-'))
            return false;
    return true;
}

bool valid_run_name(const std::string& s) {
    if (s.empty() || s.size() > 128 || s == "." || s == "..") return false;
    for (unsigned char c : s)
        if (c < 0x20 || c == 0x7f || c == '/' || c == '\\') return false;
    return valid_utf8(s);
}

}  // namespace altgrad::host::config
