// How the report writes numbers and text into markdown: fixed decimals for
// losses, p-values, and table cells that keep a run's text from breaking the
// table. Shared by the report's sections (report.cpp, summary.cpp).
#pragma once

#include <cmath>
#include <cstdio>
#include <string>

namespace altgrad::host::report {

// x with `digits` decimals: "2.5590".
inline std::string fixed(double x, int digits = 4) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", digits, x);
    return buf;
}

// x with its sign: "+0.0110", "-0.0030".
inline std::string signed_fixed(double x, int digits = 4) { return (x >= 0 ? "+" : "") + fixed(x, digits); }

// A p-value: three decimals, or two significant digits below 0.001 ("3.1e-05"); "—" when NaN.
inline std::string p_value_text(double p) {
    if (std::isnan(p)) return "—";
    char buf[32];
    std::snprintf(buf, sizeof buf, p < 0.001 ? "%.1e" : "%.3f", p);
    return buf;
}

// Markdown table cells: a '|' would end the cell, a newline the row.
inline std::string cell(const std::string& s) {
    std::string out;
    for (const char c : s) {
        if (c == '|') out += "\\|";
        else if (c == '\n' || c == '\r') out += ' ';
        else out += c;
    }
    return out;
}

}  // namespace altgrad::host::report
