// AltGrad SDK: how C++ plugin code reports a failure.
//
// Throw plugin_error anywhere inside a plugin built with the SDK's adapters;
// the adapter catches it at the ABI boundary and turns it into the status and
// the one-line message the host shows. Any other exception becomes
// ALTGRAD_STATUS_INTERNAL with its what() as the message.
#pragma once

#include <cstdio>
#include <stdexcept>
#include <string>

#include <altgrad/abi/status.h>

namespace altgrad::sdk {

class plugin_error : public std::runtime_error {
public:
    plugin_error(altgrad_status status, const std::string& message)
        : std::runtime_error(message), status_(status) {}
    altgrad_status status() const noexcept { return status_; }

private:
    altgrad_status status_;
};

// Write `message` into a caller's error object, if there is one, cut to fit.
inline void write_error(altgrad_error* error, const char* message) noexcept {
    if (error == nullptr || error->struct_size < sizeof(altgrad_error)) return;
    std::snprintf(error->message, sizeof error->message, "%s", message);
}

}  // namespace altgrad::sdk
