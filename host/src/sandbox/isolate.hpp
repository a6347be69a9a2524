// Running one check in a child process with a time limit, so a plugin that
// crashes or hangs costs that check only: the kit itself never goes down.
#pragma once

#include <functional>

#include "sandbox/result.hpp"

namespace altgrad::host::sandbox {

// fork(); the child runs `body` and sends its result back through a pipe.
// A child killed by a signal (or exiting without a result) gives `crashed`;
// one still running after `timeout_seconds` is killed and gives `timed_out`.
// Either names the plugin call in progress (guarded_memory.hpp's call_note),
// and a fault in a guard page or a read-only input names the buffer and the
// element.
result run_isolated(const std::string& check, double timeout_seconds, const std::function<result()>& body);

}  // namespace altgrad::host::sandbox
