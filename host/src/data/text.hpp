// Characters of a text corpus: UTF-8 decoding that never fails, and encoding.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace altgrad::host::data {

// Appends the code points of `bytes` to `out`. Well-formed UTF-8 (Unicode
// Table 3-7: no overlong forms, no surrogates, nothing above U+10FFFF) gives
// its code point; any other byte is taken alone as the Latin-1 character of
// the same value (U+0080..U+00FF), and decoding resumes at the next byte.
void decode_utf8_latin1(const std::string& bytes, std::vector<uint32_t>& out);

// The UTF-8 bytes of one code point (<= U+10FFFF).
std::string encode_utf8(uint32_t cp);

}  // namespace altgrad::host::data
