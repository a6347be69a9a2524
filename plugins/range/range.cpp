// range: how well each tensor fits its format's range, with TransformerEngine's
// FP8 debug-statistics definitions (as fractions in [0, 1], not percent).
// Over the finite elements x of a tensor, each with its scale s (the tensor's
// one scale, or its block's when the tensor is block-scaled; NaN/Inf are
// skipped and counted in nonfinite_count):
//   overflow_rate  = #{ |fl(x*s)| > max_finite } / #finite   (TE overflows%;
//                    measured on the scaled value, before rounding, so it is
//                    computed here rather than taken from quantize's
//                    round-first overflow_count)
//   underflow_rate = #{ x != 0 and q(x) == 0 } / #finite       (TE underflows%;
//                    quantize's underflow_count, nearest-even rounding)
//   dynamic_range  = log2(max|x| / min non-zero |x|)          (TE dynamic_range)
//   amax           = max|x| (unscaled)
// An empty (or all non-finite) tensor gives NaN for all four; a tensor with no
// non-zero element gives NaN dynamic_range.
#include <cmath>
#include <limits>
#include <vector>

#include <altgrad/sdk/diagnostic_plugin.hpp>

namespace {
namespace sdk = altgrad::sdk;

class range_diagnostic {
public:
    // The values a report draws over training (ABI 1.3; docs/diagnostics.md).
    static constexpr altgrad_headline headlines[] = {
        sdk::headline("dynamic_range", "range.dynamic_range")
            .title("Dynamic range (largest log2(max|x| / min non-zero |x|) over tensors)")
            .label("dynamic range")
            .unit("powers of two")
            .summary(ALTGRAD_HEADLINE_MAX),
        sdk::headline("overflow_rate", "range.overflow_rate")
            .title("Overflow rate (largest over tensors of the fraction with |x*s| > max finite, before "
                   "rounding)")
            .label("overflow rate")
            .summary(ALTGRAD_HEADLINE_MAX),
        sdk::headline("underflow_rate", "range.underflow_rate")
            .title("Underflow rate (largest over tensors of the fraction of non-zero x with q(x) = 0)")
            .label("underflow rate")
            .summary(ALTGRAD_HEADLINE_MAX),
    };

    uint32_t interests() const {
        return (1u << ALTGRAD_TENSOR_WEIGHT) | (1u << ALTGRAD_TENSOR_ACTIVATION) |
               (1u << ALTGRAD_TENSOR_GRADIENT) | (1u << ALTGRAD_TENSOR_OUTPUT_GRADIENT);
    }
    size_t max_values_per_tensor() const { return 5; }

    void measure(uint64_t, const altgrad_tensor_view* tensors, size_t n, sdk::value_sink& out) {
        for (size_t i = 0; i < n; ++i) {
            const altgrad_tensor_view& t = tensors[i];
            const uint64_t nonfinite = sdk::finite_elements(t, x_, s_);
            const double nan = std::numeric_limits<double>::quiet_NaN();
            double over = nan, under = nan, dr = nan, amax = nan;
            if (!x_.empty()) {
                const double max_finite = sdk::format_info_of(t.format).max_finite;
                q_.resize(x_.size());
                const sdk::quantize_result r = sdk::quantize_gathered(t, x_.data(), q_.data(), x_.size(),
                                                                      s_.data(), ALTGRAD_ROUND_NEAREST_EVEN);
                uint64_t overflows = 0;
                double lo = std::numeric_limits<double>::infinity();
                amax = 0;
                for (size_t k = 0; k < x_.size(); ++k) {
                    const float v = x_[k];
                    const double a = std::fabs(v);
                    if (std::fabs(static_cast<double>(v * s_[k])) > max_finite) ++overflows;
                    if (a > amax) amax = a;
                    if (a > 0 && a < lo) lo = a;
                }
                const double total = static_cast<double>(x_.size());
                over = overflows / total;
                under = r.underflow / total;
                if (amax > 0) dr = std::log2(amax / lo);
            }
            const uint32_t idx = static_cast<uint32_t>(i);
            out.add(idx, "overflow_rate", over);
            out.add(idx, "underflow_rate", under);
            out.add(idx, "dynamic_range", dr);
            out.add(idx, "amax", amax);
            out.add(idx, "nonfinite_count", static_cast<double>(nonfinite));
        }
    }

private:
    std::vector<float> x_, s_, q_;  // finite elements, their scales, q of them
};

range_diagnostic make(const sdk::param_view&) { return range_diagnostic(); }
}  // namespace

ALTGRAD_DIAGNOSTIC_PLUGIN(make)
