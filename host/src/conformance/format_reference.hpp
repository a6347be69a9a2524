// An independent model of a format, built only from what its codes decode to,
// and the rounding the ABI's rules say quantize must do. The conformance kit
// compares a plugin against this model, so the plugin is judged by its own
// code table, not by another implementation of the same arithmetic.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <altgrad/altgrad.h>

#include "plugins/format_handle.hpp"
#include "util/numbers.hpp"

namespace altgrad::host::conformance {

struct table_entry {
    float value;
    uint32_t code;
};

class format_table {
public:
    // Decode every code of `f` (at most 16 bits).
    explicit format_table(const format_handle& f);

    // Finite values, ascending, one entry per value (+0 stands for zero).
    const std::vector<table_entry>& finite() const { return finite_; }
    bool has_code_for(float v) const;
    uint32_t code_count() const { return code_count_; }
    const std::vector<float>& by_code() const { return by_code_; }
    bool has_nan() const { return nan_codes_ > 0; }
    uint32_t nan_codes() const { return nan_codes_; }
    bool has_pos_inf() const { return pos_inf_; }
    bool has_neg_inf() const { return neg_inf_; }
    bool has_negative_zero() const { return negative_zero_; }
    float max() const { return finite_.back().value; }
    float lowest() const { return finite_.front().value; }

    // What quantize must return for the scaled input x under nearest-even or
    // toward-zero (stochastic has two admissible answers: see neighbours), and
    // whether it counts as an overflow or underflow.
    struct expectation {
        float value;
        bool overflow = false;
        bool underflow = false;
        std::string why;  // how the value was decided, for failure messages
    };
    expectation expect(float x, altgrad_rounding rounding, altgrad_overflow overflow) const;

    // The two finite values around x (equal when x is on the grid); nothing
    // outside [lowest, max].
    std::optional<std::pair<table_entry, table_entry>> neighbours(float x) const;

private:
    float overflow_value(bool up, altgrad_rounding rounding, altgrad_overflow overflow, bool input_inf) const;

    altgrad_format_family family_;
    uint32_t mantissa_bits_ = 0;
    uint32_t code_count_ = 0;
    std::vector<float> by_code_;
    std::vector<table_entry> finite_;
    uint32_t nan_codes_ = 0;
    bool pos_inf_ = false, neg_inf_ = false, negative_zero_ = false;
    // The value the format would have next beyond max (and below lowest) if
    // its grid went on: where "round first, then decide overflow" draws the
    // line. Codebooks have none: anything beyond the extremes overflows.
    std::optional<double> next_above_max_, next_below_lowest_;
};

// "0x1.8p+0" for messages: the host's one hex-float writer.
using host::hex_float;

}  // namespace altgrad::host::conformance
