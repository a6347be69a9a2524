// The outcome of one conformance check on one plugin.
#pragma once

#include <string>

#include "util/name_table.hpp"

namespace altgrad::host::sandbox {

enum class outcome { passed, failed, skipped, warning, crashed, timed_out };

// "passed", "failed", "skipped", "warning", "crashed", "timed out"
const name_table<outcome>& outcome_names();
inline const char* outcome_name(outcome o) { return outcome_names().name(o); }

// True for the outcomes that make the kit exit non-zero.
inline bool is_failure(outcome o) {
    return o == outcome::failed || o == outcome::crashed || o == outcome::timed_out;
}

struct result {
    std::string check;  // stable name, e.g. "quantize.ties_to_even"
    outcome status = outcome::passed;
    std::string reason;  // one line: what was found
    std::string input;   // for a failure: the input that shows it
    std::string hint;    // for a failure or warning: where to look
    double seconds = 0.0;
};

}  // namespace altgrad::host::sandbox
