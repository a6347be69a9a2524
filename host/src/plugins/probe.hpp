// Probing a plugin library in a child process before the host loads it: a
// library that crashes (a constructor or its entry faulting or aborting, an
// entry exported as data, a truncated file: SIGBUS), hangs or calls exit()
// while loading costs that child only, never the host.
#pragma once

#include <optional>
#include <string>

#include "plugins/manifest.hpp"

namespace altgrad::host {

// Seconds a library gets to load and pass the loader's checks in its probe.
inline constexpr double kDefaultProbeSeconds = 10;

// Loads the manifest's library with load_plugin() (the loader's every check)
// in a child process and returns why it cannot be used, or nothing when it
// can: the loader's own error, or "plugin 'NAME' (PATH): load: " and what
// happened to the child (the signal, the time limit, an exit status).
std::optional<std::string> probe_plugin(const manifest& m, double timeout_seconds = kDefaultProbeSeconds);

}  // namespace altgrad::host
