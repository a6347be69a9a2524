// A diagnostic's headline values (ABI 1.3, abi/diagnostic.h): the few values
// a report draws over training. Read out of the library once, when the
// plugin loads, checked field by field, and kept as host strings; the loader
// refuses a malformed declaration, and the conformance kit's
// measure.headlines reports it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <altgrad/altgrad.h>

namespace altgrad::host {

struct diagnostic_headline {
    std::string value;   // the value name measure() writes
    std::string series;  // the series' name in reports, tables and Python
    std::string title;   // a figure's title (one line)
    std::string label;   // the figure's axis label
    std::string unit;    // "" when none
    altgrad_headline_summary summary = ALTGRAD_HEADLINE_MEAN;  // over a measurement's tensors
    bool log_scale = false;                                    // ALTGRAD_HEADLINE_LOG_SCALE
};

// Whether an entry's diagnostic table carries the ABI 1.3 fields: the entry
// reports 1.3 or newer and the table's struct_size reaches headline_count.
bool has_headline_fields(const altgrad_entry& entry);

// The headlines a diagnostic entry declares (none for a table without the
// 1.3 fields, or headline_count 0). Throws host::error with a one-line
// "headline I (series 'S'): FIELD ..." (or "headline_count ..." or
// "headlines ...") naming the first rule of abi/diagnostic.h it breaks; the
// caller adds the plugin's name. Reads at most the bytes the rules allow of
// each string.
std::vector<diagnostic_headline> read_headlines(const altgrad_entry& entry);

}  // namespace altgrad::host
