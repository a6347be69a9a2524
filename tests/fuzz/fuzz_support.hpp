// What every harness shares. A harness calls a parser on the fuzzer's bytes;
// host::error (the parsers' documented way to refuse input) is an expected
// outcome. Anything else escapes LLVMFuzzerTestOneInput: another exception
// reaches std::terminate, and a broken property calls finding(), both abort,
// which libFuzzer reports and saves as a crash, as it does sanitizer reports,
// timeouts and memory beyond -rss_limit_mb.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "util/error.hpp"

namespace altgrad::fuzz {

inline std::string bytes_of(const uint8_t* data, size_t size) {
    return std::string(reinterpret_cast<const char*>(data), size);
}

// A property of a parser's result does not hold: report it and abort.
[[noreturn]] inline void finding(const std::string& what) {
    std::fprintf(stderr, "fuzz finding: %s\n", what.c_str());
    std::abort();
}

// Runs `parse`, accepting host::error as the parser refusing the input.
template <class F>
void refusing_only_with_host_errors(F&& parse) {
    try {
        parse();
    } catch (const host::error&) {}
}

}  // namespace altgrad::fuzz
