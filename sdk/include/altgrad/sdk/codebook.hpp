// AltGrad SDK: a codebook format, for number formats that are not ExMy.
//
// The author lists the value of every code (values_by_code[c] is code c's
// value; NaN marks a NaN code, +-Inf an Inf code). The class sorts the finite
// values and quantizes by searching the sorted table:
//  - nearest-even: the nearer neighbour; at a tie, the one with the even code;
//  - toward-zero: the neighbour nearer zero (for x >= 0 the lower one);
//  - stochastic: P3109 StochasticA between the two neighbours, the fraction
//    (x - toward) / (away - toward) computed in double.
// A codebook has no notional value beyond its extremes, so an input above the
// largest finite value (or below the lowest) is an overflow: it saturates, or
// under the non-finite mode becomes the Inf code of its sign if there is one,
// else NaN if there is one, else it saturates.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <altgrad/abi/format.h>
#include <altgrad/sdk/error.hpp>
#include <altgrad/sdk/rounding.hpp>

namespace altgrad::sdk {

class codebook_format {
public:
    codebook_format(int total_bits, std::vector<float> values_by_code)
        : total_bits_(static_cast<uint32_t>(total_bits)), by_code_(std::move(values_by_code)) {
        if (total_bits < 1 || total_bits > 16)
            fail("total_bits must be 1..16, got " + std::to_string(total_bits));
        if (by_code_.size() != (size_t{1} << total_bits))
            fail("expected " + std::to_string(size_t{1} << total_bits) + " values, got " +
                 std::to_string(by_code_.size()));
        for (uint32_t c = 0; c < by_code_.size(); ++c) {
            const float v = by_code_[c];
            if (std::isnan(v)) {
                by_code_[c] = std::numeric_limits<float>::quiet_NaN();  // NaN codes decode to a quiet NaN
                if (nan_codes_++ == 0) nan_code_ = c;
            } else if (std::isinf(v)) {
                (v > 0 ? pos_inf_code_ : neg_inf_code_) = static_cast<int64_t>(c);
            } else {
                if (v == 0.0f) (std::signbit(v) ? has_negative_zero_ : has_positive_zero_) = true;
                sorted_.push_back({v, c});
            }
        }
        if (sorted_.empty()) fail("no finite values");
        std::sort(sorted_.begin(), sorted_.end(), [](const entry& a, const entry& b) {
            return a.value < b.value || (a.value == b.value && std::signbit(a.value) > std::signbit(b.value));
        });
        // Keep one entry per value; +0 and -0 may both exist (kept as one
        // entry, with the sign of zero decided per input).
        std::vector<entry> unique;
        for (const entry& e : sorted_) {
            if (!unique.empty() && unique.back().value == e.value) {
                if (e.value != 0.0f)
                    fail("codes " + std::to_string(unique.back().code) + " and " + std::to_string(e.code) +
                         " both decode to " + std::to_string(e.value));
                if (!std::signbit(e.value)) unique.back() = e;  // +0 is the canonical zero
                continue;
            }
            unique.push_back(e);
        }
        sorted_ = std::move(unique);
        values_.reserve(sorted_.size());
        for (const entry& e : sorted_) values_.push_back(e.value);
    }

    uint32_t total_bits() const { return total_bits_; }

    altgrad_format_info info() const {
        altgrad_format_info i{};
        i.struct_size = sizeof i;
        i.family = ALTGRAD_FAMILY_CODEBOOK;
        i.total_bits = total_bits_;
        i.code_bytes = total_bits_ <= 8 ? 1u : 2u;
        i.is_signed = values_.front() < 0 ? 1u : 0u;
        i.zero = has_negative_zero_ && has_positive_zero_     ? ALTGRAD_ZERO_SIGNED
                 : (has_negative_zero_ || has_positive_zero_) ? ALTGRAD_ZERO_UNSIGNED
                                                              : ALTGRAD_ZERO_NONE;
        i.has_inf = pos_inf_code_ >= 0 || neg_inf_code_ >= 0;
        i.nan_code_count = nan_codes_;
        i.canonical_nan_code = nan_code_;
        i.max_finite = values_.back();
        i.lowest_finite = values_.front();
        const auto pos = std::upper_bound(values_.begin(), values_.end(), 0.0f);
        i.min_normal = pos == values_.end() ? 0.0 : *pos;
        i.rounding_modes = kAllRoundingModes;
        i.memory_kinds = 1u << ALTGRAD_MEMORY_HOST;
        return i;
    }

    template <altgrad_rounding R, altgrad_overflow O>
    uint32_t quantize_bits(uint32_t bits, uint32_t random, element_counts& counts) const {
        const int64_t c = round_to_code<R, O>(bits, random, counts);
        return c < 0 ? kQuietNanBits : float_bits(by_code_[static_cast<size_t>(c)]);
    }

    template <altgrad_rounding R, altgrad_overflow O>
    uint32_t encode_bits(uint32_t bits, uint32_t random, element_counts& counts,
                         bool& unrepresentable) const {
        const int64_t c = round_to_code<R, O>(bits, random, counts);
        if (c >= 0) return static_cast<uint32_t>(c);
        if (nan_codes_ == 0) unrepresentable = true;
        return nan_code_;
    }

    float decode(uint32_t code) const { return by_code_[code]; }

private:
    struct entry {
        float value;
        uint32_t code;
    };

    [[noreturn]] static void fail(const std::string& why) {
        throw plugin_error(ALTGRAD_STATUS_INVALID_ARGUMENT, "codebook: " + why);
    }

    // The code an input rounds to; -1 for NaN.
    template <altgrad_rounding R, altgrad_overflow O>
    int64_t round_to_code(uint32_t bits, uint32_t random, element_counts& counts) const {
        const float x = bits_float(bits);
        if (std::isnan(x)) return -1;
        const size_t n = values_.size();
        if (x > values_[n - 1] || x < values_[0]) {
            counts.overflow += 1;
            const bool up = x > values_[n - 1];
            const bool finite_input = !std::isinf(x);
            if (O == ALTGRAD_OVERFLOW_NONFINITE && !(R == ALTGRAD_ROUND_TOWARD_ZERO && finite_input)) {
                const int64_t inf = up ? pos_inf_code_ : neg_inf_code_;
                if (inf >= 0) return inf;
                if (nan_codes_ > 0) return -1;
            }
            return sorted_[up ? n - 1 : 0].code;
        }
        const size_t hi =
            static_cast<size_t>(std::upper_bound(values_.begin(), values_.end(), x) - values_.begin());
        size_t pick;
        if (hi == 0) {
            pick = 0;
        } else if (values_[hi - 1] == x) {
            pick = hi - 1;
        } else {
            const size_t toward = x >= 0 ? hi - 1 : hi;
            const size_t away = x >= 0 ? hi : hi - 1;
            const double frac = (static_cast<double>(x) - values_[toward]) /
                                (static_cast<double>(values_[away]) - values_[toward]);
            bool up;
            if constexpr (R == ALTGRAD_ROUND_NEAREST_EVEN) {
                // Compared directly: a ratio's bits go past the 32 of frac32.
                up = frac > 0.5 || (frac == 0.5 && (sorted_[toward].code & 1u) != 0);
            } else {
                up = round_away<R>(static_cast<uint32_t>(std::ldexp(frac, 32)), 0u, random) != 0;
            }
            pick = up ? away : toward;
        }
        const entry& e = sorted_[pick];
        if (e.value == 0.0f) {
            counts.underflow += (x != 0.0f);
            if (std::signbit(x) && has_negative_zero_) return negative_zero_code();
        }
        return e.code;
    }

    int64_t negative_zero_code() const {
        for (uint32_t c = 0; c < by_code_.size(); ++c)
            if (by_code_[c] == 0.0f && std::signbit(by_code_[c])) return c;
        return -1;
    }

    uint32_t total_bits_;
    std::vector<float> by_code_;
    std::vector<entry> sorted_;
    std::vector<float> values_;
    uint32_t nan_codes_ = 0, nan_code_ = 0;
    int64_t pos_inf_code_ = -1, neg_inf_code_ = -1;
    bool has_negative_zero_ = false, has_positive_zero_ = false;
};

}  // namespace altgrad::sdk
