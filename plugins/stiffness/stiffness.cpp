// stiffness: the grid spacing a weight sits on, S(w) = 2^(floor(log2|w|) - M),
// M = the format's mantissa_bits (from its get_info). A FIXED_POINT format has
// one constant spacing, 2^-fraction_bits (1/128 for E0M7). A CODEBOOK format
// has no M: its values are NaN.
// Scale: the format sees y = fl(w*s); S is taken of y and divided by s, so it
// is in the units of w. Subnormal-range values follow the formula, not the
// (constant) subnormal spacing. The formula is the SDK's stiffness_of, shared
// with grad_stiffness.
// Per weight tensor, over its finite non-zero elements: stiffness_mean,
// stiffness_median (the mean of the middle two for an even count),
// stiffness_min, stiffness_max, and nonfinite_count (NaN/Inf skipped). No
// finite non-zero element (e.g. an empty tensor): NaN.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <altgrad/sdk/diagnostic_plugin.hpp>

namespace {
namespace sdk = altgrad::sdk;

class stiffness_diagnostic {
public:
    // The values a report draws over training (ABI 1.3; docs/diagnostics.md).
    static constexpr altgrad_headline headlines[] = {
        sdk::headline("stiffness_mean", "stiffness")
            .title("Stiffness (mean S = 2^(floor(log2|w|) - M))")
            .label("mean stiffness")
            .summary(ALTGRAD_HEADLINE_MEAN)
            .log_scale(),
    };

    uint32_t interests() const { return 1u << ALTGRAD_TENSOR_WEIGHT; }
    size_t max_values_per_tensor() const { return 5; }

    void measure(uint64_t, const altgrad_tensor_view* tensors, size_t n, sdk::value_sink& out) {
        for (size_t i = 0; i < n; ++i) {
            const altgrad_tensor_view& t = tensors[i];
            const uint64_t nonfinite = sdk::finite_elements(t, x_, scales_);
            const altgrad_format_info info = sdk::format_info_of(t.format);
            s_.clear();
            for (size_t k = 0; k < x_.size(); ++k) {
                const float w = x_[k];
                const double s = sdk::stiffness_of(info, w, scales_[k]);  // NaN: zero, overflowed or codebook
                if (w != 0.0f && !std::isnan(s)) s_.push_back(s);
            }
            const double nan = std::numeric_limits<double>::quiet_NaN();
            double mean = nan, median = nan, lo = nan, hi = nan;
            if (!s_.empty()) {
                double sum = 0;
                for (const double v : s_) sum += v;
                mean = sum / s_.size();
                std::sort(s_.begin(), s_.end());
                const size_t k = s_.size() / 2;
                median = s_.size() % 2 ? s_[k] : 0.5 * (s_[k - 1] + s_[k]);
                lo = s_.front();
                hi = s_.back();
            }
            const uint32_t idx = static_cast<uint32_t>(i);
            out.add(idx, "stiffness_mean", mean);
            out.add(idx, "stiffness_median", median);
            out.add(idx, "stiffness_min", lo);
            out.add(idx, "stiffness_max", hi);
            out.add(idx, "nonfinite_count", static_cast<double>(nonfinite));
        }
    }

private:
    std::vector<float> x_, scales_;  // finite weights and their scales
    std::vector<double> s_;
};

stiffness_diagnostic make(const sdk::param_view&) { return stiffness_diagnostic(); }
}  // namespace

ALTGRAD_DIAGNOSTIC_PLUGIN(make)
