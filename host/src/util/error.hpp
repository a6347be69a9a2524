// Host-side errors. Every failure the user can cause (a bad manifest, config,
// plugin, argument or input) becomes one of these, with a one-line message
// that names the file and key, or the plugin and the check.
#pragma once

#include <stdexcept>
#include <string>

namespace altgrad::host {

class error : public std::runtime_error {
public:
    explicit error(const std::string& message) : std::runtime_error(message) {}
};

// The first line of a message (LibTorch's errors carry a backtrace after it).
inline std::string first_line(const std::string& message) { return message.substr(0, message.find('\n')); }

// A wrong command line: printed with a pointer to --help, exit code 2.
class usage_error : public error {
public:
    using error::error;
};

}  // namespace altgrad::host
