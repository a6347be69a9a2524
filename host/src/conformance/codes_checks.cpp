// The codes.* checks: every code decodes and encodes back to itself, and the
// format info declares what the codes decode to.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "conformance/checks.hpp"

namespace altgrad::host::conformance {

result check_code_roundtrip(env& e) {
    if (!e.table) return needs_table(e);
    const format_table& t = *e.table;
    const altgrad_format_info& info = e.format->info();
    const std::vector<float>& values = t.by_code();
    std::vector<float> in;
    std::vector<uint32_t> which;
    for (uint32_t c = 0; c < values.size(); ++c) {
        if (std::isnan(values[c]) && info.nan_code_count == 0) continue;
        in.push_back(values[c]);
        which.push_back(c);
    }
    // Non-finite mode, so Inf codes encode as Inf rather than saturating.
    const std::vector<uint8_t> out =
        encode(e, in, mode(ALTGRAD_ROUND_NEAREST_EVEN, ALTGRAD_OVERFLOW_NONFINITE));
    for (size_t k = 0; k < in.size(); ++k) {
        const uint32_t got = info.code_bytes == 1 ? out[k] : reinterpret_cast<const uint16_t*>(out.data())[k];
        uint32_t want = which[k];
        if (std::isnan(values[which[k]])) want = info.canonical_nan_code;
        // Two codes for one value (only +0 and -0 are allowed that) encode to one.
        if (!std::isnan(values[which[k]]) && got != want && same(values[got], values[want])) continue;
        if (got != want)
            return fail("code " + std::to_string(want) + " decodes to " + hex_float(values[which[k]]) +
                            " which encodes to code " + std::to_string(got),
                        "code " + std::to_string(which[k]),
                        std::isnan(values[which[k]])
                            ? "NaN must encode to the canonical NaN code the info declares"
                            : "encode must invert decode on every code");
    }
    return pass("all " + std::to_string(values.size()) + " codes decode and encode back");
}

result check_declared_range(env& e) {
    if (!e.table) return needs_table(e);
    const format_table& t = *e.table;
    const altgrad_format_info& i = e.format->info();
    const char* hint = "the format info must describe what the codes actually decode to";
    if (i.max_finite != t.max())
        return fail("declares max_finite " + hex_float(i.max_finite) +
                        " but the largest finite code value is " + hex_float(t.max()),
                    "get_info().max_finite", hint);
    if (i.lowest_finite != t.lowest())
        return fail("declares lowest_finite " + hex_float(i.lowest_finite) +
                        " but the lowest finite code value is " + hex_float(t.lowest()),
                    "get_info().lowest_finite", hint);
    double smallest = 0;
    for (const table_entry& x : t.finite())
        if (x.value > 0) {
            smallest = x.value;
            break;
        }
    const double declared_smallest = i.min_subnormal > 0 ? i.min_subnormal : i.min_normal;
    if (declared_smallest != smallest)
        return fail("declares the smallest positive value as " + hex_float(declared_smallest) +
                        " but the codes give " + hex_float(smallest),
                    "get_info().min_subnormal / min_normal", hint);
    if ((i.has_inf != 0) != (t.has_pos_inf() || t.has_neg_inf()))
        return fail(std::string("declares has_inf = ") + (i.has_inf ? "1" : "0") + " but the codes " +
                        (i.has_inf ? "have no Inf" : "include Inf"),
                    "get_info().has_inf", hint);
    if (i.nan_code_count != t.nan_codes())
        return fail("declares " + std::to_string(i.nan_code_count) + " NaN codes but " +
                        std::to_string(t.nan_codes()) + " codes decode to NaN",
                    "get_info().nan_code_count", hint);
    if (i.nan_code_count > 0 && !std::isnan(t.by_code()[i.canonical_nan_code]))
        return fail("the canonical NaN code " + std::to_string(i.canonical_nan_code) + " decodes to " +
                        hex_float(t.by_code()[i.canonical_nan_code]),
                    "get_info().canonical_nan_code", hint);
    return pass("max " + hex_float(i.max_finite) + ", lowest " + hex_float(i.lowest_finite) +
                ", smallest positive " + hex_float(smallest) + " match the codes");
}

}  // namespace altgrad::host::conformance
