#include "conformance/format_reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "util/error.hpp"

namespace altgrad::host::conformance {

format_table::format_table(const format_handle& f)
    : family_(f.info().family), mantissa_bits_(f.info().mantissa_bits) {
    const altgrad_format_info& info = f.info();
    if (info.total_bits > 16) throw error("format_table: more than 16 bits");
    code_count_ = 1u << info.total_bits;
    by_code_ = f.decode_all_codes();
    for (uint32_t c = 0; c < code_count_; ++c) {
        const float v = by_code_[c];
        if (std::isnan(v)) ++nan_codes_;
        else if (std::isinf(v)) (v > 0 ? pos_inf_ : neg_inf_) = true;
        else {
            if (v == 0.0f && std::signbit(v)) negative_zero_ = true;
            finite_.push_back({v, c});
        }
    }
    if (finite_.empty()) throw error("format_table: no finite codes");
    std::stable_sort(finite_.begin(), finite_.end(), [](const table_entry& a, const table_entry& b) {
        if (a.value != b.value) return a.value < b.value;
        return std::signbit(a.value) < std::signbit(b.value);  // +0 first
    });
    finite_.erase(std::unique(finite_.begin(), finite_.end(),
                              [](const table_entry& a, const table_entry& b) { return a.value == b.value; }),
                  finite_.end());
    if (finite_.size() >= 2) {
        const double max = finite_.back().value, prev = finite_[finite_.size() - 2].value;
        const double low = finite_.front().value, low_next = finite_[1].value;
        if (family_ == ALTGRAD_FAMILY_FLOAT) {
            // The binade of max goes on with its step, 2^(exponent - M) (with
            // no mantissa bits the grid doubles); likewise below a negative
            // lowest. Below an unsigned format's 0 lies the mirror of its
            // first step.
            const int m = static_cast<int>(mantissa_bits_);
            next_above_max_ = max + std::ldexp(1.0, std::ilogb(max) - m);
            next_below_lowest_ =
                low < 0 ? low - std::ldexp(1.0, std::ilogb(low) - m) : low - (low_next - low);
        } else if (family_ != ALTGRAD_FAMILY_CODEBOOK) {
            next_above_max_ = max + (max - prev);  // the last step repeats
            next_below_lowest_ = low - (low_next - low);
        }
    }
}

bool format_table::has_code_for(float v) const {
    return std::any_of(finite_.begin(), finite_.end(), [&](const table_entry& e) { return e.value == v; });
}

std::optional<std::pair<table_entry, table_entry>> format_table::neighbours(float x) const {
    if (!(x >= lowest() && x <= max())) return std::nullopt;
    const auto hi = std::lower_bound(finite_.begin(), finite_.end(), x,
                                     [](const table_entry& e, float v) { return e.value < v; });
    if (hi->value == x) return std::make_pair(*hi, *hi);
    return std::make_pair(*(hi - 1), *hi);
}

float format_table::overflow_value(bool up, altgrad_rounding rounding, altgrad_overflow overflow,
                                   bool input_inf) const {
    const float saturated = up ? max() : lowest();
    if (overflow == ALTGRAD_OVERFLOW_SATURATE) return saturated;
    if (rounding == ALTGRAD_ROUND_TOWARD_ZERO && !input_inf) return saturated;
    if (up ? pos_inf_ : neg_inf_) return up ? INFINITY : -INFINITY;
    if (nan_codes_ > 0) return NAN;
    return saturated;
}

format_table::expectation format_table::expect(float x, altgrad_rounding rounding,
                                               altgrad_overflow overflow) const {
    expectation e{};
    if (std::isnan(x)) {
        e.value = NAN;
        e.why = "NaN in gives NaN out";
        return e;
    }
    if (std::isinf(x)) {
        e.value = overflow_value(x > 0, rounding, overflow, true);
        e.overflow = true;
        e.why = "an infinite input overflows";
        return e;
    }
    const bool positive = x > 0;
    const double xd = x;
    if (x > max() || x < lowest()) {
        // Which end: above max, or below lowest (for a format without zero
        // or negatives that includes 0 and small positive numbers).
        const bool up = x > max();
        const std::optional<double>& next = up ? next_above_max_ : next_below_lowest_;
        const float edge = up ? max() : lowest();
        const uint32_t edge_code = up ? finite_.back().code : finite_.front().code;
        bool stays = false;  // rounds back onto the edge value
        if (next) {
            const double mid = (static_cast<double>(edge) + *next) / 2;
            if (rounding == ALTGRAD_ROUND_TOWARD_ZERO) stays = up ? xd < *next : xd > *next;
            else
                stays = up ? (xd < mid || (xd == mid && edge_code % 2 == 0))
                           : (xd > mid || (xd == mid && edge_code % 2 == 0));
        }
        if (stays) {
            e.value = edge;
            e.why = "beyond the extreme value but rounds back to it (round first, then decide overflow)";
            return e;
        }
        e.value = overflow_value(up, rounding, overflow, false);
        e.overflow = true;
        e.why = next ? "rounds beyond the extreme value " + hex_float(edge) + " (the next step would be " +
                           hex_float(*next) + ")"
                     : "beyond the extreme value " + hex_float(edge);
        return e;
    }
    const auto n = neighbours(x);
    const table_entry lo = n->first, hi = n->second;
    if (lo.value == hi.value) {
        e.value = lo.value == 0.0f ? x : lo.value;  // keeps -0 for -0 in
        if (e.value == 0.0f && std::signbit(e.value) && !negative_zero_) e.value = 0.0f;
        e.why = "on the grid";
        return e;
    }
    // toward: the neighbour nearer zero; away: the other.
    const table_entry toward = positive ? lo : hi, away = positive ? hi : lo;
    bool up = false;
    if (rounding == ALTGRAD_ROUND_NEAREST_EVEN) {
        const double d_toward = std::fabs(xd - toward.value),
                     d_away = std::fabs(static_cast<double>(away.value) - xd);
        up = d_away < d_toward || (d_away == d_toward && toward.code % 2 == 1);
        e.why = d_away == d_toward ? "a tie between " + hex_float(lo.value) + " (code " +
                                         std::to_string(lo.code) + ") and " + hex_float(hi.value) +
                                         " (code " + std::to_string(hi.code) + "): ties go to the even code"
                                   : "nearest of " + hex_float(lo.value) + " and " + hex_float(hi.value);
    } else {
        e.why = "toward zero between " + hex_float(lo.value) + " and " + hex_float(hi.value);
    }
    e.value = (up ? away : toward).value;
    if (e.value == 0.0f) {
        e.underflow = true;
        e.value = (!positive && negative_zero_) ? -0.0f : 0.0f;
    }
    return e;
}

}  // namespace altgrad::host::conformance
