// grid_alignment: how far weights sit from their format's grid, |w - q(w)|,
// q = the tensor's own format with its scale (q(w*s)/s; a block-scaled
// tensor's s is the element's block's), nearest-even
// rounding, saturating overflow. Per weight tensor, over its finite elements
// (NaN/Inf skipped, counted in nonfinite_count): mean_abs_error,
// max_abs_error, and mse = mean((w - q(w))^2) (TransformerEngine's mse).
// An empty (or all non-finite) tensor gives NaN for the three errors.
#include <cmath>
#include <limits>
#include <vector>

#include <altgrad/sdk/diagnostic_plugin.hpp>

namespace {
namespace sdk = altgrad::sdk;

class grid_alignment_diagnostic {
public:
    // The values a report draws over training (ABI 1.3; docs/diagnostics.md).
    static constexpr altgrad_headline headlines[] = {
        sdk::headline("mse", "grid_alignment.mse")
            .title("Grid alignment error (mean over weight tensors of mean (w - q(w))^2)")
            .label("mean squared error")
            .summary(ALTGRAD_HEADLINE_MEAN)
            .log_scale(),
    };

    uint32_t interests() const { return 1u << ALTGRAD_TENSOR_WEIGHT; }
    size_t max_values_per_tensor() const { return 4; }

    void measure(uint64_t, const altgrad_tensor_view* tensors, size_t n, sdk::value_sink& out) {
        for (size_t i = 0; i < n; ++i) {
            const altgrad_tensor_view& t = tensors[i];
            const uint64_t nonfinite = sdk::finite_elements(t, x_, s_);
            const double nan = std::numeric_limits<double>::quiet_NaN();
            double mean = nan, max = nan, mse = nan;
            if (!x_.empty()) {
                q_.resize(x_.size());
                sdk::quantize_gathered(t, x_.data(), q_.data(), x_.size(), s_.data(),
                                       ALTGRAD_ROUND_NEAREST_EVEN);
                double sum = 0, sum2 = 0;
                max = 0;
                for (size_t j = 0; j < x_.size(); ++j) {
                    const double d = std::fabs(static_cast<double>(x_[j]) - static_cast<double>(q_[j]));
                    sum += d;
                    sum2 += d * d;
                    if (d > max) max = d;
                }
                mean = sum / x_.size();
                mse = sum2 / x_.size();
            }
            const uint32_t idx = static_cast<uint32_t>(i);
            out.add(idx, "mean_abs_error", mean);
            out.add(idx, "max_abs_error", max);
            out.add(idx, "mse", mse);
            out.add(idx, "nonfinite_count", static_cast<double>(nonfinite));
        }
    }

private:
    std::vector<float> x_, s_, q_;  // finite elements, their scales, q of them
};

grid_alignment_diagnostic make(const sdk::param_view&) { return grid_alignment_diagnostic(); }
}  // namespace

ALTGRAD_DIAGNOSTIC_PLUGIN(make)
