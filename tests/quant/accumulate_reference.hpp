// An independent implementation of the accumulation model (docs/accumulation.md), element by
// element, for the tests: no float64 sums, no float32 step and no plugin. Each chunk's sum is
// taken exactly in a big integer of its own (signed base-2^32 digits, in units of 2^-400), and
// rounded straight to the format's grid (p significant bits, subnormals down to the smallest
// normal's exponent, overflow past max finite) by the rounding's definition; promotions add in
// float32. Slow, and simple enough to check by reading.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace altgrad::test {

// A float format as an accumulator sees it: IEEE-like with subnormals.
struct reference_format {
    int mantissa_bits;  // p - 1
    int min_exponent;   // of the smallest normal: 1 - bias
    double max_finite;
    bool has_inf;  // else overflow (and Inf) become NaN
};

// The exact sum of float32 values and products of two, with IEEE's non-finite rules.
class exact_sum {
public:
    void add_value(float x) { add_product(x, 1.0f); }
    void add_product(float a, float b) {
        const double p = static_cast<double>(a) * static_cast<double>(b);  // only to classify
        if (std::isnan(p)) nan_ = true;
        if (std::isinf(p)) (p > 0 ? plus_inf_ : minus_inf_) = true;
        if (!std::isfinite(p) || a == 0.0f || b == 0.0f) return;
        int ea = 0, eb = 0;
        const auto ma = static_cast<uint64_t>(std::ldexp(std::fabs(std::frexp(a, &ea)), 24));
        const auto mb = static_cast<uint64_t>(std::ldexp(std::fabs(std::frexp(b, &eb)), 24));
        add_integer((a < 0) != (b < 0) ? -1 : 1, ma * mb, ea + eb - 48);
    }

    // The sum rounded to `f`: nearest-even when `nearest`, else toward zero.
    float rounded(const reference_format& f, bool nearest) const {
        if (nan_ || (plus_inf_ && minus_inf_)) return std::numeric_limits<float>::quiet_NaN();
        if (plus_inf_ || minus_inf_) {
            if (!f.has_inf) return std::numeric_limits<float>::quiet_NaN();
            return plus_inf_ ? INFINITY : -INFINITY;
        }
        std::vector<int64_t> d = digits_;
        const int sign = normalize(d);
        if (sign == 0) return 0.0f;
        int top = static_cast<int>(d.size()) * 32 - 1;
        while (!bit(d, top)) --top;
        const int exponent = top - kOffset;  // |S| in [2^exponent, 2^(exponent + 1))
        const int quantum = std::max(exponent, f.min_exponent) - f.mantissa_bits;
        const int cut = quantum + kOffset;  // bits of d below the quantum
        uint64_t kept = 0;
        for (int i = top; i >= cut; --i) kept = kept * 2 + (bit(d, i) ? 1 : 0);
        if (nearest && cut > 0 && bit(d, cut - 1)) {
            bool beyond_half = false;
            for (int i = cut - 2; i >= 0 && !beyond_half; --i) beyond_half = bit(d, i);
            if (beyond_half || (kept & 1u) != 0) ++kept;
        }
        double value = std::ldexp(static_cast<double>(kept), quantum);
        if (value > f.max_finite) {
            if (!nearest) value = f.max_finite;
            else if (!f.has_inf) return std::numeric_limits<float>::quiet_NaN();
            else value = INFINITY;
        }
        return static_cast<float>(sign * value);  // exact: a value of the format, or Inf
    }

private:
    static constexpr int kOffset = 400;  // digit bit 0 weighs 2^-400
    static constexpr int kDigits = 24;   // 768 bits: up to 2^367

    void add_integer(int sign, uint64_t magnitude, int exponent) {
        const int at = exponent + kOffset;
        const unsigned __int128 v = static_cast<unsigned __int128>(magnitude) << (at % 32);
        for (int k = 0; k < 3; ++k)
            digits_[static_cast<size_t>(at / 32 + k)] +=
                sign * static_cast<int64_t>((v >> (32 * k)) & 0xFFFFFFFFu);
    }
    // Carries propagated, the magnitude left in d (digits in [0, 2^32)); returns the sign.
    static int normalize(std::vector<int64_t>& d) {
        const auto carry_through = [](std::vector<int64_t>& x) {
            for (size_t i = 0; i + 1 < x.size(); ++i) {
                int64_t carry = x[i] >> 32;  // floor division by 2^32
                x[i] -= carry * (int64_t{1} << 32);
                x[i + 1] += carry;
            }
        };
        carry_through(d);
        if (d.back() < 0) {
            for (int64_t& x : d) x = -x;
            carry_through(d);
            return -1;
        }
        for (const int64_t x : d)
            if (x != 0) return 1;
        return 0;
    }
    static bool bit(const std::vector<int64_t>& d, int i) {
        return ((d[static_cast<size_t>(i / 32)] >> (i % 32)) & 1) != 0;
    }

    std::vector<int64_t> digits_ = std::vector<int64_t>(kDigits, 0);
    bool nan_ = false, plus_inf_ = false, minus_inf_ = false;
};

// C = A·B (A [m, k], B [k, n], row-major) by the model, element by element.
inline std::vector<float> reference_gemm(const std::vector<float>& a, const std::vector<float>& b, size_t m,
                                         size_t k, size_t n, const reference_format& f, bool nearest,
                                         size_t mma_depth, size_t promote_every) {
    std::vector<float> c(m * n);
    const size_t interval = promote_every == 0 ? k : promote_every;
    for (size_t i = 0; i < m; ++i)
        for (size_t j = 0; j < n; ++j) {
            float total = 0.0f, acc = 0.0f;
            for (size_t start = 0; start < k; start += interval) {
                const size_t end = std::min(k, start + interval);
                for (size_t k0 = start; k0 < end; k0 += mma_depth) {
                    exact_sum s;
                    s.add_value(acc);
                    for (size_t kk = k0; kk < std::min(end, k0 + mma_depth); ++kk)
                        s.add_product(a[i * k + kk], b[kk * n + j]);
                    acc = s.rounded(f, nearest);
                }
                total += acc;
                acc = 0.0f;
            }
            c[i * n + j] = total;
        }
    return c;
}

}  // namespace altgrad::test
