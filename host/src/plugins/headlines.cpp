#include "plugins/headlines.hpp"

#include <cstddef>
#include <cstdio>
#include <cstring>

#include <altgrad/sdk/names.hpp>

#include "util/abi_names.hpp"
#include "util/error.hpp"

namespace altgrad::host {

namespace {

// ABI 1.3's altgrad_headline ends with flags; a larger struct_size is a newer
// minor's (fields appended), a much larger one a wild value.
constexpr size_t kHeadline13Size = offsetof(altgrad_headline, flags) + sizeof(uint32_t);
constexpr size_t kMaxHeadlineSize = 4096;

[[noreturn]] void bad(const std::string& what) { throw error(what); }

std::string hex_byte(unsigned char c) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "0x%02x", c);
    return buf;
}

// The bytes of s with anything outside printable ASCII shown as '?', for a
// message about a name that breaks the rule.
std::string shown(const std::string& s) {
    std::string out = s;
    for (char& c : out)
        if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7E) c = '?';
    return out;
}

// Why s is not one line of UTF-8 text, or nothing: the first control
// character, or the first byte that does not continue a UTF-8 sequence
// (overlong forms, surrogates and code points beyond U+10FFFF included).
std::optional<std::string> text_problem(const std::string& s) {
    const auto* b = reinterpret_cast<const unsigned char*>(s.data());
    const size_t n = s.size();
    for (size_t i = 0; i < n;) {
        const unsigned char c = b[i];
        const std::string at = " at offset " + std::to_string(i);
        if (c < 0x20 || c == 0x7F)
            return "holds a control character (byte " + hex_byte(c) + at + "): one line of text";
        if (c < 0x80) {
            ++i;
            continue;
        }
        size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
        if (c > 0xF4) len = 0;
        uint32_t cp = c & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
        bool ok = len > 0 && i + len <= n;
        for (size_t k = 1; ok && k < len; ++k) {
            ok = (b[i + k] & 0xC0) == 0x80;
            cp = (cp << 6) | (b[i + k] & 0x3F);
        }
        if (ok && len == 3) ok = cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF);
        if (ok && len == 4) ok = cp >= 0x10000 && cp <= 0x10FFFF;
        if (!ok) return "is not UTF-8 (byte " + hex_byte(c) + at + ")";
        i += len;
    }
    return std::nullopt;
}

// The NUL-terminated string at p, read up to `capacity` bytes (the rule's
// bound, its NUL included). `at` names the headline, `field` the field.
std::string bounded(const char* p, size_t capacity, const std::string& at, const char* field,
                    const char* bound) {
    if (p == nullptr)
        bad(at + ": " + field + " is NULL" + (std::strcmp(field, "unit") == 0 ? " (\"\" when none)" : ""));
    const size_t n = ::strnlen(p, capacity);
    if (n == capacity)
        bad(at + ": " + field + " is not NUL-terminated within " + std::to_string(capacity) + " bytes (" +
            bound + ")");
    return std::string(p, n);
}

std::string name_field(const char* p, const std::string& at, const char* field) {
    const std::string s = bounded(p, ALTGRAD_VALUE_NAME_CAPACITY, at, field, "ALTGRAD_VALUE_NAME_CAPACITY");
    if (!sdk::is_value_name(s.c_str())) bad(at + ": " + field + " '" + shown(s) + "' is not [a-z0-9_.]+");
    return s;
}

std::string text_field(const char* p, const std::string& at, const char* field, bool may_be_empty) {
    const std::string s =
        bounded(p, ALTGRAD_HEADLINE_TEXT_CAPACITY, at, field, "ALTGRAD_HEADLINE_TEXT_CAPACITY");
    if (s.empty() && !may_be_empty) bad(at + ": " + field + " is empty");
    if (const std::optional<std::string> why = text_problem(s)) bad(at + ": " + field + " " + *why);
    return s;
}

diagnostic_headline read_one(const altgrad_headline& h, size_t i) {
    diagnostic_headline d;
    const std::string index = "headline " + std::to_string(i);
    d.series = name_field(h.series, index, "series");
    const std::string at = index + " (series '" + d.series + "')";
    if (sdk::is_host_series_name(d.series.c_str()))
        bad(at +
            ": series is one of the host's own series (loss, val_loss, lr, grad_norm, tokens_per_s, "
            "grad_sparsity, overflow, underflow, bit_stall): prefix it with the plugin's name");
    d.value = name_field(h.value, at, "value");
    d.title = text_field(h.title, at, "title", false);
    d.label = text_field(h.label, at, "label", false);
    d.unit = text_field(h.unit, at, "unit", true);
    const std::optional<altgrad_headline_summary> summary = plugin_enum(h.summary, headline_summary_names());
    if (!summary) bad(at + ": " + plugin_enum_error("summary", h.summary, headline_summary_names()));
    d.summary = *summary;
    if ((h.flags & ~ALTGRAD_HEADLINE_LOG_SCALE) != 0)
        bad(at + ": flags " + std::to_string(h.flags) +
            " hold bits other than ALTGRAD_HEADLINE_LOG_SCALE (1)");
    d.log_scale = (h.flags & ALTGRAD_HEADLINE_LOG_SCALE) != 0;
    return d;
}

}  // namespace

bool has_headline_fields(const altgrad_entry& entry) {
    const altgrad_version v = entry.abi_version;
    return entry.diagnostic != nullptr && v.major == ALTGRAD_ABI_VERSION_MAJOR && v.minor >= 3 &&
           ALTGRAD_STRUCT_HAS(entry.diagnostic, altgrad_diagnostic_vtable, headline_count);
}

std::vector<diagnostic_headline> read_headlines(const altgrad_entry& entry) {
    if (!has_headline_fields(entry)) return {};
    const altgrad_diagnostic_vtable& t = *entry.diagnostic;
    const std::string count = std::to_string(t.headline_count);
    if (t.headline_count == 0) return {};
    if (t.headline_count > ALTGRAD_HEADLINE_MAX_COUNT)
        bad("headline_count " + count + " is more than ALTGRAD_HEADLINE_MAX_COUNT (" +
            std::to_string(ALTGRAD_HEADLINE_MAX_COUNT) + ")");
    if (t.headlines == nullptr) bad("headlines is NULL with headline_count " + count);
    const size_t stride = t.headlines->struct_size;
    if (stride < kHeadline13Size || stride > kMaxHeadlineSize)
        bad("headline 0: struct_size " + std::to_string(stride) + " is not a headline's (ABI 1.3's is " +
            std::to_string(kHeadline13Size) + ")");
    std::vector<diagnostic_headline> out;
    for (size_t i = 0; i < t.headline_count; ++i) {
        const altgrad_headline& h = *ALTGRAD_ARRAY_AT(const altgrad_headline, t.headlines, i);
        if (h.struct_size != stride)
            bad("headline " + std::to_string(i) + ": struct_size " + std::to_string(h.struct_size) +
                " differs from headline 0's " + std::to_string(stride) + " (one array, one size)");
        out.push_back(read_one(h, i));
        for (size_t j = 0; j < i; ++j)
            if (out[j].series == out[i].series)
                bad("headline " + std::to_string(i) + ": series '" + out[i].series + "' is headline " +
                    std::to_string(j) + "'s too (series are unique within a plugin)");
    }
    return out;
}

}  // namespace altgrad::host
