#include "util/json_value.hpp"

#include <cstdlib>
#include <cstring>

namespace altgrad::host::json {

value value::make_bool(bool b) {
    value v;
    v.kind_ = kind::boolean;
    v.bool_ = b;
    return v;
}

value value::make_number(double d) {
    value v;
    v.kind_ = kind::number;
    v.number_ = d;
    return v;
}

value value::make_string(std::string s) {
    value v;
    v.kind_ = kind::string;
    v.string_ = std::move(s);
    return v;
}

value value::make_array(std::vector<value> items) {
    value v;
    v.kind_ = kind::array;
    v.items_ = std::move(items);
    return v;
}

value value::make_object(std::vector<std::pair<std::string, value>> members) {
    value v;
    v.kind_ = kind::object;
    v.members_ = std::move(members);
    return v;
}

const value* value::find(std::string_view key) const {
    for (auto it = members_.rbegin(); it != members_.rend(); ++it)
        if (it->first == key) return &it->second;
    return nullptr;
}

std::optional<double> value::number_at(std::string_view key) const {
    const value* v = find(key);
    if (v == nullptr || !v->is_number()) return std::nullopt;
    return v->as_number();
}

std::optional<std::string> value::string_at(std::string_view key) const {
    const value* v = find(key);
    if (v == nullptr || !v->is_string()) return std::nullopt;
    return v->as_string();
}

namespace {

constexpr int kMaxDepth = 200;

class parser {
public:
    explicit parser(std::string_view text) : s_(text) {}

    value document() {
        skip_space();
        value v = parse_value(0);
        skip_space();
        if (pos_ != s_.size()) fail("unexpected text after the value");
        return v;
    }

private:
    [[noreturn]] void fail(const std::string& what) const {
        const bool at_end = pos_ >= s_.size();
        throw parse_error("at offset " + std::to_string(pos_) + ": " + (at_end ? "text ends early: " : "") + what, pos_,
                          at_end);
    }

    void skip_space() {
        while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
            ++pos_;
    }

    char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }

    void expect(char c) {
        if (pos_ >= s_.size() || s_[pos_] != c) fail(std::string("expected '") + c + "'");
        ++pos_;
    }

    // A literal (true/false/null); a proper prefix at the end of the text is truncation.
    void literal(const char* word) {
        const size_t n = std::strlen(word);
        for (size_t i = 0; i < n; ++i) {
            if (pos_ >= s_.size()) fail(std::string("expected '") + word + "'");
            if (s_[pos_] != word[i]) fail(std::string("expected '") + word + "'");
            ++pos_;
        }
    }

    value parse_value(int depth) {
        if (depth > kMaxDepth) fail("nested too deeply");
        switch (peek()) {
            case '{': return parse_object(depth);
            case '[': return parse_array(depth);
            case '"': return value::make_string(parse_string());
            case 't': literal("true"); return value::make_bool(true);
            case 'f': literal("false"); return value::make_bool(false);
            case 'n': literal("null"); return value();
            default:
                if (peek() == '-' || (peek() >= '0' && peek() <= '9')) return value::make_number(parse_number());
                fail("expected a value");
        }
    }

    value parse_object(int depth) {
        expect('{');
        std::vector<std::pair<std::string, value>> members;
        skip_space();
        if (peek() == '}') {
            ++pos_;
            return value::make_object(std::move(members));
        }
        for (;;) {
            skip_space();
            if (peek() != '"') fail("expected a member name");
            std::string key = parse_string();
            skip_space();
            expect(':');
            skip_space();
            value v = parse_value(depth + 1);
            members.emplace_back(std::move(key), std::move(v));
            skip_space();
            if (peek() == ',') {
                ++pos_;
                continue;
            }
            if (peek() == '}') {
                ++pos_;
                return value::make_object(std::move(members));
            }
            fail("expected ',' or '}'");
        }
    }

    value parse_array(int depth) {
        expect('[');
        std::vector<value> items;
        skip_space();
        if (peek() == ']') {
            ++pos_;
            return value::make_array(std::move(items));
        }
        for (;;) {
            skip_space();
            items.push_back(parse_value(depth + 1));
            skip_space();
            if (peek() == ',') {
                ++pos_;
                continue;
            }
            if (peek() == ']') {
                ++pos_;
                return value::make_array(std::move(items));
            }
            fail("expected ',' or ']'");
        }
    }

    unsigned hex4() {
        unsigned u = 0;
        for (int i = 0; i < 4; ++i) {
            const char c = peek();
            if (pos_ >= s_.size()) fail("expected 4 hex digits after \\u");
            u <<= 4;
            if (c >= '0' && c <= '9') u |= static_cast<unsigned>(c - '0');
            else if (c >= 'a' && c <= 'f') u |= static_cast<unsigned>(c - 'a' + 10);
            else if (c >= 'A' && c <= 'F') u |= static_cast<unsigned>(c - 'A' + 10);
            else fail("expected 4 hex digits after \\u");
            ++pos_;
        }
        return u;
    }

    static void append_utf8(std::string& out, unsigned cp) {
        if (cp < 0x80) {
            out += static_cast<char>(cp);
        } else if (cp < 0x800) {
            out += static_cast<char>(0xC0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out += static_cast<char>(0xE0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        } else {
            out += static_cast<char>(0xF0 | (cp >> 18));
            out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        }
    }

    std::string parse_string() {
        expect('"');
        std::string out;
        for (;;) {
            if (pos_ >= s_.size()) fail("unterminated string");
            const char c = s_[pos_];
            if (c == '"') {
                ++pos_;
                return out;
            }
            if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
            if (c != '\\') {
                out += c;
                ++pos_;
                continue;
            }
            ++pos_;
            if (pos_ >= s_.size()) fail("unterminated escape");
            const char e = s_[pos_++];
            switch (e) {
                case '"': out += '"'; break;
                case '\\': out += '\\'; break;
                case '/': out += '/'; break;
                case 'b': out += '\b'; break;
                case 'f': out += '\f'; break;
                case 'n': out += '\n'; break;
                case 'r': out += '\r'; break;
                case 't': out += '\t'; break;
                case 'u': {
                    unsigned cp = hex4();
                    if (cp >= 0xD800 && cp < 0xDC00) {  // a high surrogate needs its low half
                        if (pos_ >= s_.size()) fail("unterminated surrogate pair");
                        if (s_.substr(pos_, 2) != "\\u") fail("a lone surrogate");
                        pos_ += 2;
                        const unsigned lo = hex4();
                        if (lo < 0xDC00 || lo >= 0xE000) fail("a lone surrogate");
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    } else if (cp >= 0xDC00 && cp < 0xE000) {
                        fail("a lone surrogate");
                    }
                    append_utf8(out, cp);
                    break;
                }
                default: --pos_; fail(std::string("unknown escape '\\") + e + "'");
            }
        }
    }

    double parse_number() {
        // The JSON grammar, checked here: strtod alone would take "1.", ".5", "0x1p3", "inf".
        const size_t start = pos_;
        auto digits = [&] {
            const size_t from = pos_;
            while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
            return pos_ - from;
        };
        if (peek() == '-') ++pos_;
        if (peek() == '0') {
            ++pos_;
        } else if (digits() == 0) {
            fail("expected a digit");
        }
        if (peek() == '.') {
            ++pos_;
            if (digits() == 0) fail("expected a digit after '.'");
        }
        if (peek() == 'e' || peek() == 'E') {
            ++pos_;
            if (peek() == '+' || peek() == '-') ++pos_;
            if (digits() == 0) fail("expected a digit in the exponent");
        }
        const std::string text(s_.substr(start, pos_ - start));
        return std::strtod(text.c_str(), nullptr);
    }

    std::string_view s_;
    size_t pos_ = 0;
};

}  // namespace

value parse(std::string_view text) { return parser(text).document(); }

}  // namespace altgrad::host::json
