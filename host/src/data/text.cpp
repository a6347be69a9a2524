#include "data/text.hpp"

namespace altgrad::host::data {

void decode_utf8_latin1(const std::string& bytes, std::vector<uint32_t>& out) {
    const auto* b = reinterpret_cast<const unsigned char*>(bytes.data());
    const size_t n = bytes.size();
    out.reserve(out.size() + n);
    size_t i = 0;
    while (i < n) {
        const unsigned c = b[i];
        if (c < 0x80) {
            out.push_back(c);
            ++i;
            continue;
        }
        // The length and the allowed range of the second byte (Table 3-7).
        size_t len = 0;
        unsigned lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c == 0xE0) len = 3, lo = 0xA0;
        else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) len = 3;
        else if (c == 0xED) len = 3, hi = 0x9F;
        else if (c == 0xF0) len = 4, lo = 0x90;
        else if (c >= 0xF1 && c <= 0xF3) len = 4;
        else if (c == 0xF4) len = 4, hi = 0x8F;
        bool ok = len > 0 && i + len <= n && b[i + 1] >= lo && b[i + 1] <= hi;
        for (size_t k = 2; ok && k < len; ++k) ok = b[i + k] >= 0x80 && b[i + k] <= 0xBF;
        if (!ok) {
            out.push_back(c);  // Latin-1
            ++i;
            continue;
        }
        uint32_t cp = c & (0x7Fu >> len);
        for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (b[i + k] & 0x3Fu);
        out.push_back(cp);
        i += len;
    }
}

std::string encode_utf8(uint32_t cp) {
    std::string s;
    if (cp < 0x80) {
        s += static_cast<char>(cp);
    } else if (cp < 0x800) {
        s += static_cast<char>(0xC0 | (cp >> 6));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        s += static_cast<char>(0xE0 | (cp >> 12));
        s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        s += static_cast<char>(0xF0 | (cp >> 18));
        s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return s;
}

}  // namespace altgrad::host::data
