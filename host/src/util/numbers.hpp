// Reading and writing float32 values as text, exactly.
#pragma once

#include <cstdint>
#include <istream>
#include <optional>
#include <string>
#include <vector>

namespace altgrad::host {

// One token: decimal, C99 hex-float, "nan", "inf", "infinity" (any case,
// optional sign), converted straight to float32 (no double rounding). Nothing
// when the token is not entirely a number.
std::optional<float> parse_float(const std::string& token);

// A decimal integer 0 .. 2^64-1, digits only (no sign: "-1" must not wrap to
// 2^64-1). Nothing otherwise.
std::optional<uint64_t> parse_uint64(const std::string& text);

// Every whitespace-separated token of `in`. Throws host::error naming the
// source, the token's position and the token, for the first bad one, before
// anything is returned; and for a token longer than any number is written
// (kMaxNumberToken characters: a stream of NUL bytes such as /dev/zero is one
// endless token) or for input of more than `max_bytes` bytes in all.
constexpr size_t kMaxNumberToken = 128;
std::vector<float> read_floats(std::istream& in, const std::string& source, size_t max_bytes);

// C99 hex-float as printf("%a") writes it.
std::string hex_float(double x);

// The shortest decimal that reads back as `x` ("0.1", "1e-07"), a whole
// number below 2^53 in full ("1000"), and "nan", "inf", "-inf" for the
// non-finite values.
std::string shortest_decimal(double x);

}  // namespace altgrad::host
